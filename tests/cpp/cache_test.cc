#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

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

std::string ThisHost() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::string h(host);
  for (char& c : h) {
    if (c == '-' || c == '/') c = '_';
  }
  return h;
}

TEST_F(CacheTest, FilesystemClassServesLaterEpochsAndCleansUp) {
  const std::string disk = dir_ / "disk";
  // A folder a crashed job left behind: its lock file is held by nobody.
  const std::string stale = disk + "/hdmlp-job-" + ThisHost() + "-999999999-deadbeef";
  WriteFile(stale + "/1.bin", "old");
  WriteFile(stale + "/.lock", "");
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

// The sweep of crash leftovers trusts locks, not host names and PIDs: a job
// in another PID namespace (a container) may have a PID that does not exist
// here, on the same host name.
TEST(FilesystemClassTest, SweepRemovesOnlyFoldersNobodyHolds) {
  TempDir dir;
  const std::string disk = dir / "disk";
  const std::string live = disk + "/hdmlp-job-" + ThisHost() + "-999999998-cafecafe";  // "dead" PID, live job
  const std::string dead = disk + "/hdmlp-job-" + ThisHost() + "-999999997-deadbeef";
  const std::string old_unlocked = disk + "/hdmlp-job-otherhost-1-00000001";
  const std::string young_unlocked = disk + "/hdmlp-job-otherhost-2-00000002";
  const std::string half_made = disk + "/.hdmlp-new-otherhost-3-00000003";
  for (const auto& f : {live, dead, old_unlocked, young_unlocked, half_made}) WriteFile(f + "/1.bin", "x");
  WriteFile(live + "/.lock", "");
  WriteFile(dead + "/.lock", "");
  auto held = Env::Default()->TryLockFile(live + "/.lock", false);  // as the live job in its container does
  ASSERT_NE(held, nullptr);
  const auto two_hours_ago = std::filesystem::file_time_type::clock::now() - std::chrono::hours(2);
  std::filesystem::last_write_time(old_unlocked, two_hours_ago);
  std::filesystem::last_write_time(half_made, two_hours_ago);

  auto cls = MakeFilesystemClass(Env::Default(), "filesystem", disk);
  EXPECT_TRUE(std::filesystem::exists(live + "/1.bin")) << "a live job's folder was removed";
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_FALSE(std::filesystem::exists(old_unlocked));
  EXPECT_TRUE(std::filesystem::exists(young_unlocked));
  EXPECT_FALSE(std::filesystem::exists(half_made));
  // The new class's own folder is locked while it lives, and only then.
  const std::string mine = FilesystemClassFolder(*cls);
  EXPECT_EQ(Env::Default()->TryLockFile(mine + "/.lock", false), nullptr);
  auto other = MakeFilesystemClass(Env::Default(), "filesystem", disk);
  EXPECT_TRUE(std::filesystem::exists(mine));
  cls.reset();
  EXPECT_FALSE(std::filesystem::exists(mine));
}

// Store and Release race (a staging worker caching a sample on its way while
// the job closes): whatever the interleaving, nothing is left on disk.
TEST(FilesystemClassTest, ReleaseWhileStoringLeavesNothing) {
  TempDir dir;
  const std::string disk = dir / "disk";
  const std::string payload(4096, 'p');
  for (int round = 0; round < 10; ++round) {
    auto cls = MakeFilesystemClass(Env::Default(), "filesystem", disk);
    const std::string folder = FilesystemClassFolder(*cls);
    std::atomic<bool> go{false};
    std::vector<std::thread> storers;
    for (int t = 0; t < 3; ++t) {
      storers.emplace_back([&, t] {
        while (!go.load()) std::this_thread::yield();
        for (int i = 0; i < 100; ++i) {
          cls->Store(t * 1000 + i, t * 1000 + i, reinterpret_cast<const uint8_t*>(payload.data()), 4096);
        }
      });
    }
    go = true;
    std::this_thread::sleep_for(std::chrono::microseconds(200 * (round % 10)));
    cls->Release();
    for (auto& t : storers) t.join();
    EXPECT_FALSE(std::filesystem::exists(folder)) << "round " << round << ": files written after the release";
    if (std::filesystem::exists(folder)) break;
  }
}

TEST(FilesystemClassTest, AChangedFileIsDroppedNeverServed) {
  TempDir dir;
  auto cls = MakeFilesystemClass(Env::Default(), "filesystem", dir / "disk");
  const std::string bytes = "the bytes of sample seven";
  ASSERT_TRUE(cls->Store(0, 7, reinterpret_cast<const uint8_t*>(bytes.data()), static_cast<int64_t>(bytes.size())));
  SampleBuffer out;
  ASSERT_TRUE(cls->Read(0, 7, static_cast<int64_t>(bytes.size()), &out));
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(out.data.get()), static_cast<size_t>(out.size)), bytes);
  // One byte changed in place, same size.
  const std::string file = FilesystemClassFolder(*cls) + "/7.bin";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4);
    f.put('X');
  }
  EXPECT_FALSE(cls->Read(0, 7, static_cast<int64_t>(bytes.size()), &out));
  EXPECT_EQ(cls->dropped_corrupt(), 1);
  EXPECT_NE(cls->corruption_warning().find(file), std::string::npos) << cls->corruption_warning();
  EXPECT_FALSE(std::filesystem::exists(file)) << "the changed file must be dropped";
}

TEST_F(CacheTest, ACorruptCachedFileIsReadFromThePfsWithAWarning) {
  const std::string disk = dir_ / "disk";
  Job job(Options(Config(DiskClass(disk, 1)), nullptr, 3));
  // Epoch 0 fills the class; then every cached file gets one byte changed.
  job.BeginEpoch(0);
  Batch batch;
  for (;;) {
    const auto r = job.NextBatch(&batch, 1000ms);
    if (r == Job::Next::kEndOfEpoch) break;
  }
  for (int i = 0; i < 200 && job.ClassStatuses()[0].filled_samples < 40; ++i) std::this_thread::sleep_for(10ms);
  int changed = 0;
  for (auto& e : std::filesystem::recursive_directory_iterator(disk)) {
    if (e.path().extension() != ".bin") continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(10);
    f.put('\x7f');
    ++changed;
  }
  ASSERT_EQ(changed, 40);
  // Epochs 1 and 2: every sample's bytes are still right (RunAll checks).
  for (int e = 1; e < 3; ++e) {
    job.BeginEpoch(e);
    for (;;) {
      const auto r = job.NextBatch(&batch, 1000ms);
      if (r == Job::Next::kTimeout) continue;
      if (r == Job::Next::kEndOfEpoch) break;
      for (size_t k = 0; k < batch.ids.size(); ++k) {
        const auto& s = batch.samples[k];
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(s.data.get()), static_cast<size_t>(s.size)),
                  contents_[job.source().names()[static_cast<size_t>(batch.ids[k])]]);
      }
    }
  }
  EXPECT_EQ(job.ClassStatuses()[0].dropped_corrupt, 40);
  EXPECT_EQ(job.Metrics()[2].reads.at("pfs").count, 40);
  bool warned = false;
  for (const auto& w : job.Warnings()) warned = warned || w.find("checksum") != std::string::npos;
  EXPECT_TRUE(warned);
}

TEST_F(CacheTest, ASourceFileChangedDuringTheJobIsReported) {
  // No cache class: every epoch reads the dataset's storage.
  Job job(Options(Config(""), nullptr, 2));
  // Same size, new time (a file rewritten in place) after the job indexed it.
  const std::string changed = root_ + "/c1/f5.jpg";
  std::filesystem::last_write_time(changed, std::filesystem::last_write_time(changed) + std::chrono::seconds(5));
  RunAll(job);  // still delivers the bytes on disk
  EXPECT_EQ(job.changed_samples(), 1);
  EXPECT_EQ(job.ChangedFiles(), std::vector<std::string>{changed});
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

// The staging workers decode a RAM-cached sample where it lies: the class
// lends its stored bytes in place, at one address for the class's life.
TEST(MemoryClassTest, LendsStoredBytesInPlace) {
  auto memory = MakeMemoryClass("memory", {3, 4, 5});
  const uint8_t a[] = {1, 2, 3}, b[] = {4, 3, 2, 1}, c[] = {9, 8, 7, 6, 5};
  ASSERT_TRUE(memory->Store(0, 10, a, 3));
  const uint8_t* lent = memory->StoredBytes(0);
  ASSERT_NE(lent, nullptr);
  EXPECT_EQ(std::vector<uint8_t>(lent, lent + 3), std::vector<uint8_t>(a, a + 3));
  ASSERT_TRUE(memory->Store(2, 12, c, 5));  // storing others moves nothing
  ASSERT_TRUE(memory->Store(1, 11, b, 4));
  EXPECT_EQ(memory->StoredBytes(0), lent);
  EXPECT_EQ(std::vector<uint8_t>(lent, lent + 3), std::vector<uint8_t>(a, a + 3));
  const uint8_t* third = memory->StoredBytes(2);
  EXPECT_EQ(std::vector<uint8_t>(third, third + 5), std::vector<uint8_t>(c, c + 5));
}

// Storing a sample faults in the 8 MiB stretch of the arena around it in one
// call (MADV_POPULATE_WRITE), and only that stretch: the next sample to
// arrive finds its pages there, the rest of the arena stays uncommitted.
TEST(MemoryClassTest, StoringFaultsInItsStretchOfTheArena) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  auto memory = MakeMemoryClass("memory", {kMiB, 30 * kMiB, kMiB});
  std::vector<uint8_t> bytes(kMiB, 7);
  ASSERT_TRUE(memory->Store(0, 10, bytes.data(), kMiB));
  const long page = sysconf(_SC_PAGESIZE);
  auto resident_pages = [&](const uint8_t* from, int64_t length) {
    const auto begin = (reinterpret_cast<uintptr_t>(from) + page - 1) / page * page;
    std::vector<unsigned char> in_core(static_cast<size_t>(length / page));
    if (mincore(reinterpret_cast<void*>(begin), in_core.size() * page, in_core.data()) != 0) return int64_t{-1};
    int64_t n = 0;
    for (unsigned char c : in_core) n += c & 1;
    return n;
  };
  void* probe = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  const bool kernel_can = madvise(probe, page, /*MADV_POPULATE_WRITE=*/23) == 0;
  munmap(probe, page);
  if (!kernel_can) GTEST_SKIP() << "this kernel cannot fault pages in ahead (MADV_POPULATE_WRITE is Linux 5.14)";
  const uint8_t* second = memory->StoredBytes(1);  // planned right after the first, not yet stored
  EXPECT_EQ(resident_pages(second, 6 * kMiB), 6 * kMiB / page) << "the rest of the first stretch";
  EXPECT_EQ(resident_pages(second + 10 * kMiB, 16 * kMiB), 0) << "the stretches no sample reached";
}

TEST(FilesystemClassTest, LendsNothing) {  // its bytes are checked on every read: they are always copied
  TempDir dir;
  auto cls = MakeFilesystemClass(Env::Default(), "filesystem", dir / "disk");
  const uint8_t a[] = {1, 2, 3};
  ASSERT_TRUE(cls->Store(0, 10, a, 3));
  EXPECT_EQ(cls->StoredBytes(0), nullptr);
  cls->Release();
}

}  // namespace
}  // namespace hdmlp
