#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>

#include "hdmlp/cache/cache_hierarchy.h"
#include "hdmlp/cache/storage_class.h"
#include "hdmlp/job/job.h"
#include "test_util.h"

namespace hdmlp {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;
using testing::WriteFile;

// 40 files of 1000..2950 bytes (about 79 kB in all) in 4 classes.
class CacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_ / "data";
    for (int i = 0; i < 40; ++i) {
      const std::string rel = "c" + std::to_string(i % 4) + "/f" + std::to_string(i) + ".jpg";
      std::string content(static_cast<size_t>(1000 + i * 50), static_cast<char>('A' + i % 26));
      content[0] = static_cast<char>(i);
      WriteFile(root_ + "/" + rel, content);
      contents_[rel] = content;
      total_bytes_ += static_cast<int64_t>(content.size());
    }
  }

  std::string Config(const std::string& classes) {
    const std::string path = dir_ / "job.cfg";
    WriteFile(path, "storage_classes = ( { capacity = 0.01; threads = 2; }" + classes + " );\n");
    return path;
  }
  std::string MemoryClass(double mb) {
    return ", { backend = \"memory\"; capacity = " + std::to_string(mb) + "; threads = 2; }";
  }
  std::string DiskClass(const std::string& path, double mb) {
    return ", { backend = \"filesystem\"; capacity = " + std::to_string(mb) +
           "; threads = 2; backend_options = { path = \"" + path + "\"; }; }";
  }

  JobOptions Options(const std::string& config, Env* env, int epochs = 3) {
    JobOptions o;
    o.dataset_path = root_;
    o.batch_size = 6;
    o.epochs = epochs;
    o.has_seed = true;
    o.seed = 3;
    o.config_path = config;
    o.scan.use_cache = false;
    o.env = env;
    return o;
  }

  // Runs every epoch, checking each sample's bytes; returns pfs reads per epoch.
  std::vector<int64_t> RunAll(Job& job) {
    std::vector<int64_t> pfs;
    for (int e = 0; e < job.plan().epochs(); ++e) {
      job.BeginEpoch(e);
      Batch batch;
      std::set<int64_t> seen;
      for (;;) {
        const auto r = job.NextBatch(&batch, 1000ms);
        if (r == Job::Next::kTimeout) continue;
        if (r == Job::Next::kEndOfEpoch) break;
        for (size_t k = 0; k < batch.ids.size(); ++k) {
          const std::string& rel = job.source().names()[static_cast<size_t>(batch.ids[k])];
          const auto& s = batch.samples[k];
          EXPECT_EQ(std::string(reinterpret_cast<const char*>(s.data.get()), static_cast<size_t>(s.size)),
                    contents_[rel]);
          seen.insert(batch.ids[k]);
        }
      }
      EXPECT_EQ(seen.size(), 40u);
      const auto m = job.Metrics()[static_cast<size_t>(e)];
      pfs.push_back(m.reads.count("pfs") ? m.reads.at("pfs").count : 0);
    }
    return pfs;
  }

  TempDir dir_;
  std::string root_;
  std::map<std::string, std::string> contents_;
  int64_t total_bytes_ = 0;
};

TEST_F(CacheTest, MemoryClassHoldingTheDatasetReadsThePfsOnce) {
  ThrottledEnv pfs(Env::Default(), {0.001, 0, {}});
  Job job(Options(Config(MemoryClass(1)), &pfs));
  const auto pfs_reads = RunAll(job);
  EXPECT_EQ(pfs_reads[1], 0);
  EXPECT_EQ(pfs_reads[2], 0);
  EXPECT_EQ(job.Metrics()[2].reads.at("memory").count, 40);
  // Prefetch threads and staging workers together opened each file once.
  EXPECT_EQ(pfs.files_opened(), 40);
  const auto status = job.ClassStatuses();
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status[0].planned_samples, 40);
  EXPECT_EQ(status[0].filled_samples, 40);
  EXPECT_EQ(status[0].filled_bytes, total_bytes_);
}

TEST_F(CacheTest, HalfSizedClassServesWhatItHolds) {
  const double half_mb = static_cast<double>(total_bytes_) / 2 / (1024 * 1024);
  Job job(Options(Config(MemoryClass(half_mb)), nullptr));
  const auto pfs_reads = RunAll(job);
  const auto status = job.ClassStatuses();
  const int64_t cached = status[0].planned_samples;
  EXPECT_LE(status[0].planned_bytes, static_cast<int64_t>(half_mb * 1024 * 1024));
  EXPECT_GT(cached, 10);
  EXPECT_LT(cached, 30);
  EXPECT_EQ(pfs_reads[1], 40 - cached);
  EXPECT_EQ(pfs_reads[2], 40 - cached);
}

TEST_F(CacheTest, FilesystemClassServesLaterEpochsAndCleansUp) {
  const std::string disk = dir_ / "disk";
  // A folder a crashed job on this host left behind (no such process).
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::string h(host);
  for (char& c : h) {
    if (c == '-' || c == '/') c = '_';
  }
  const std::string stale = disk + "/hdmlp-job-" + h + "-999999999-deadbeef";
  WriteFile(stale + "/1.bin", "old");
  std::string folder;
  {
    Job job(Options(Config(DiskClass(disk, 1)), nullptr));
    EXPECT_FALSE(std::filesystem::exists(stale));
    const auto pfs_reads = RunAll(job);
    EXPECT_EQ(pfs_reads[1], 0);
    EXPECT_EQ(job.Metrics()[1].reads.at("filesystem").count, 40);
    bool found = false;
    for (auto& e : std::filesystem::directory_iterator(disk)) {
      found = true;
      folder = e.path().string();
    }
    EXPECT_TRUE(found);
  }
  EXPECT_FALSE(std::filesystem::exists(folder)) << "the job's folder must be removed at close";
}

TEST_F(CacheTest, FullDiskWarnsAndKeepsBytesRight) {
  const std::string disk = dir_ / "disk";
  ThrottledEnv::Options quota;
  quota.write_quota_bytes = total_bytes_ / 3;
  ThrottledEnv local(Env::Default(), quota);
  JobOptions o = Options(Config(DiskClass(disk, 1)), nullptr);
  o.local_env = &local;
  Job job(o);
  const auto pfs_reads = RunAll(job);  // checks every sample's bytes
  const auto status = job.ClassStatuses();
  EXPECT_LT(status[0].filled_samples, 40);
  EXPECT_EQ(pfs_reads[2], 40 - status[0].filled_samples);
  ASSERT_FALSE(job.Warnings().empty());
  EXPECT_NE(job.Warnings()[0].find("No space left"), std::string::npos) << job.Warnings()[0];
}

TEST_F(CacheTest, UnwritableFolderLeavesSamplesToTheNextClass) {
  ThrottledEnv::Options read_only;
  read_only.read_only_prefix = dir_ / "readonly";
  ThrottledEnv local(Env::Default(), read_only);
  JobOptions o = Options(Config(DiskClass(dir_ / "readonly/cache", 1) + MemoryClass(1)), nullptr);
  o.local_env = &local;
  Job job(o);
  const auto status = job.ClassStatuses();
  ASSERT_EQ(status.size(), 2u);
  EXPECT_EQ(status[0].planned_samples, 0);
  EXPECT_NE(status[0].warning.find("Permission denied"), std::string::npos) << status[0].warning;
  EXPECT_EQ(status[1].planned_samples, 40);
  const auto pfs_reads = RunAll(job);
  EXPECT_EQ(pfs_reads[2], 0);
}

TEST_F(CacheTest, ClassPredictedSlowerThanThePfsIsNotUsed) {
  const std::string path = dir_ / "slow.cfg";
  WriteFile(path,
            "b_fs = 1000;\n"
            "storage_classes = ( { capacity = 0.01; threads = 2; },\n"
            "  { backend = \"memory\"; capacity = 1; threads = 2;\n"
            "    bandwidth = ( { threads = 1; bw = 10.0; }, { threads = 2; bw = 20.0; } ); } );\n");
  Job job(Options(path, nullptr, 2));
  EXPECT_EQ(job.ClassStatuses()[0].planned_samples, 0);
  EXPECT_NE(job.ClassStatuses()[0].note.find("10 MB/s per reader"), std::string::npos) << job.ClassStatuses()[0].note;
  EXPECT_TRUE(job.Warnings().empty());
  const auto pfs_reads = RunAll(job);
  EXPECT_EQ(pfs_reads[1], 40);
}

TEST_F(CacheTest, SlowPfsIsReadOnceEvenUnderPressure) {
  // Prefetch threads and staging workers race for the same samples; the
  // per-sample state must keep every file to one read.
  ThrottledEnv pfs(Env::Default(), {0.003, 0, {}});
  Job job(Options(Config(MemoryClass(0.5) + MemoryClass(1)), &pfs, 4));
  const auto pfs_reads = RunAll(job);
  EXPECT_EQ(pfs.files_opened(), 40);
  for (size_t e = 1; e < pfs_reads.size(); ++e) EXPECT_EQ(pfs_reads[e], 0);
}

TEST(MemoryClassTest, StoresAndReadsBack) {
  auto memory = MakeMemoryClass("memory", {3, 0, 5});
  const uint8_t a[] = {1, 2, 3}, c[] = {9, 8, 7, 6, 5};
  ASSERT_TRUE(memory->Store(0, 10, a, 3));
  ASSERT_TRUE(memory->Store(2, 12, c, 5));
  SampleBuffer out;
  ASSERT_TRUE(memory->Read(2, 12, 5, &out));
  EXPECT_EQ(std::vector<uint8_t>(out.data.get(), out.data.get() + 5), std::vector<uint8_t>(c, c + 5));
  ASSERT_TRUE(memory->Read(0, 10, 3, &out));
  EXPECT_EQ(out.data[2], 3);
}

}  // namespace
}  // namespace hdmlp
