#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>

#include "hdmlp/errors.h"
#include "hdmlp/job/job.h"
#include "test_util.h"

namespace hdmlp {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;
using testing::WriteFile;

class JobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_ / "data";
    for (int i = 0; i < 57; ++i) {
      const std::string rel = "class" + std::to_string(i % 4) + "/f" + std::to_string(i) + ".jpg";
      std::string content(static_cast<size_t>(10 + i * 37), static_cast<char>('a' + i % 26));
      content += rel;
      WriteFile(root_ + "/" + rel, content);
      contents_[rel] = content;
    }
    config_ = dir_ / "job.cfg";
    WriteFile(config_, "storage_classes = ( { capacity = 0.002; threads = 3; } );\n");
  }

  JobOptions Options() {
    JobOptions o;
    o.dataset_path = root_;
    o.batch_size = 8;
    o.epochs = 3;
    o.has_seed = true;
    o.seed = 11;
    o.config_path = config_;
    o.scan.use_cache = false;
    return o;
  }

  static Job::Next Next(Job& job, Batch* batch) {
    for (;;) {
      auto r = job.NextBatch(batch, 1000ms);
      if (r != Job::Next::kTimeout) return r;
    }
  }

  TempDir dir_;
  std::string root_, config_;
  std::map<std::string, std::string> contents_;
};

TEST_F(JobTest, EveryEpochDeliversEachFileOnceWithItsBytes) {
  Job job(Options());
  EXPECT_EQ(job.BatchesPerEpoch(), 8);  // ceil(57 / 8)
  for (int e = 0; e < 3; ++e) {
    job.BeginEpoch(e);
    std::multiset<int64_t> seen;
    Batch batch;
    int batches = 0;
    while (Next(job, &batch) == Job::Next::kBatch) {
      ++batches;
      for (size_t k = 0; k < batch.ids.size(); ++k) {
        const std::string& rel = job.index().relpaths[static_cast<size_t>(batch.ids[k])];
        const auto& s = batch.samples[k];
        ASSERT_EQ(std::string(reinterpret_cast<const char*>(s.data.get()), static_cast<size_t>(s.size)), contents_[rel]);
        ASSERT_EQ(batch.labels[k], job.index().labels[static_cast<size_t>(batch.ids[k])]);
        seen.insert(batch.ids[k]);
      }
    }
    EXPECT_EQ(batches, 8);
    EXPECT_EQ(seen.size(), 57u);
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 57u);
  }
  auto metrics = job.Metrics();
  ASSERT_EQ(metrics.size(), 3u);
  for (const auto& m : metrics) {
    EXPECT_EQ(m.samples, 57);
    EXPECT_EQ(m.reads.at("pfs").count, 57);
  }
  // The staging capacity (2 kB) bounds what was read ahead.
  EXPECT_LE(job.staging_peak_bytes(), static_cast<int64_t>(0.002 * 1024 * 1024) + 10 + 57 * 37 + 20);
}

TEST_F(JobTest, EarlyBreakSkipsTheRestUnread) {
  JobOptions o = Options();
  ThrottledEnv slow(Env::Default(), {0.002, 0, {}});
  o.env = &slow;
  Job job(o);
  job.BeginEpoch(0);
  Batch batch;
  ASSERT_EQ(Next(job, &batch), Job::Next::kBatch);
  job.BeginEpoch(1);
  int64_t delivered = 0;
  while (Next(job, &batch) == Job::Next::kBatch) delivered += static_cast<int64_t>(batch.ids.size());
  EXPECT_EQ(delivered, 57);
  // Epoch 0 was abandoned after one batch: only what the 2 kB buffer had
  // admitted was read, not the whole epoch.
  EXPECT_LT(job.Metrics()[0].reads.at("pfs").count, 40);
}

TEST_F(JobTest, VanishedFileIsReportedByName) {
  Job job(Options());
  const std::string victim = job.index().Path(job.plan().SampleAt(0, 0, 20));
  ASSERT_EQ(std::remove(victim.c_str()), 0);
  job.BeginEpoch(0);
  Batch batch;
  ASSERT_EQ(Next(job, &batch), Job::Next::kBatch);  // batch 0: samples 0..7
  ASSERT_EQ(Next(job, &batch), Job::Next::kBatch);  // batch 1: samples 8..15
  try {
    Next(job, &batch);  // batch 2 holds sample 20
    FAIL() << "expected an error for " << victim;
  } catch (const NotFoundError& e) {
    EXPECT_NE(std::string(e.what()).find(victim), std::string::npos) << e.what();
  }
  // The job goes on with the next batch.
  EXPECT_EQ(Next(job, &batch), Job::Next::kBatch);
  EXPECT_EQ(batch.index, 3);
}

TEST_F(JobTest, CloseDuringAStallReturnsPromptly) {
  JobOptions o = Options();
  ThrottledEnv slow(Env::Default(), {0.2, 0, {}});
  o.env = &slow;
  auto job = std::make_unique<Job>(o);
  job->BeginEpoch(0);
  std::thread closer([&] {
    std::this_thread::sleep_for(50ms);
    job->Close();
  });
  const auto start = std::chrono::steady_clock::now();
  Batch batch;
  EXPECT_THROW(job->NextBatch(&batch, 10s), ClosedError);
  closer.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  job.reset();
}

TEST_F(JobTest, RejectsBadArguments) {
  JobOptions o = Options();
  o.batch_size = 0;
  EXPECT_THROW(Job{o}, InvalidArgumentError);
  o = Options();
  o.epochs = 0;
  EXPECT_THROW(Job{o}, InvalidArgumentError);
  o = Options();
  o.distr_scheme = "bogus";
  EXPECT_THROW(Job{o}, InvalidArgumentError);
  o = Options();
  o.batch_size = 100;
  o.drop_last = true;
  EXPECT_THROW(Job{o}, InvalidArgumentError);
  Job job(Options());
  EXPECT_THROW(job.BeginEpoch(3), InvalidArgumentError);
  job.BeginEpoch(1);
  EXPECT_THROW(job.BeginEpoch(0), InvalidArgumentError);
}

}  // namespace
}  // namespace hdmlp
