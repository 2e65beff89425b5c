#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

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
        const std::string& rel = job.source().names()[static_cast<size_t>(batch.ids[k])];
        const auto& s = batch.samples[k];
        ASSERT_EQ(std::string(reinterpret_cast<const char*>(s.data.get()), static_cast<size_t>(s.size)), contents_[rel]);
        ASSERT_EQ(batch.labels[k], job.source().labels()[static_cast<size_t>(batch.ids[k])]);
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
  const std::string victim = job.source().Describe(job.plan().SampleAt(0, 0, 20));
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
  o = Options();
  o.spare_cores = -1;
  EXPECT_THROW(Job{o}, InvalidArgumentError);
  Job job(Options());
  EXPECT_THROW(job.BeginEpoch(3), InvalidArgumentError);
  job.BeginEpoch(1);
  EXPECT_THROW(job.BeginEpoch(0), InvalidArgumentError);
}

TEST_F(JobTest, LauncherRanksWithoutMpiReadTheirSliceInEqualSteps) {
  // 57 samples, global batch 8, 3 ranks: the remainder of 1 joins the last
  // full batch (9 = 3 + 3 + 3), so every rank takes 7 steps.
  std::vector<std::unique_ptr<Job>> ranks;
  for (int r = 0; r < 3; ++r) {
    JobOptions o = Options();
    o.use_mpi = false;
    o.launcher_rank = r;
    o.launcher_world_size = 3;
    ranks.push_back(std::make_unique<Job>(o));
    EXPECT_EQ(ranks.back()->rank(), r);
    EXPECT_EQ(ranks.back()->world_size(), 3);
    EXPECT_STREQ(ranks.back()->transport(), "none");
  }
  for (int e = 0; e < 3; ++e) {
    std::vector<std::vector<size_t>> sizes(3);
    std::multiset<int64_t> seen;
    for (int r = 0; r < 3; ++r) {
      ranks[static_cast<size_t>(r)]->BeginEpoch(e);
      Batch batch;
      while (Next(*ranks[static_cast<size_t>(r)], &batch) == Job::Next::kBatch) {
        sizes[static_cast<size_t>(r)].push_back(batch.ids.size());
        seen.insert(batch.ids.begin(), batch.ids.end());
      }
    }
    EXPECT_EQ(seen.size(), 57u);
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 57u) << "a sample was read twice";
    for (int r = 0; r < 3; ++r) ASSERT_EQ(sizes[static_cast<size_t>(r)].size(), 7u) << "rank " << r;
    for (size_t h = 0; h < 7; ++h) {
      const auto [lo, hi] = std::minmax({sizes[0][h], sizes[1][h], sizes[2][h]});
      EXPECT_GE(lo, 1u);
      EXPECT_LE(hi - lo, 1u) << "step " << h;
    }
    EXPECT_EQ(sizes[0].back(), 3u);
  }
}

TEST_F(JobTest, GatherHookChecksAgreementAndSharesRankZerosSeed) {
  testing::InProcessGather gather(2);
  std::unique_ptr<Job> jobs[2];
  std::thread threads[2];
  for (int r = 0; r < 2; ++r) {
    threads[r] = std::thread([&, r] {
      JobOptions o = Options();
      o.use_mpi = false;
      o.has_seed = false;  // each draws one; rank 0's wins
      o.launcher_rank = r;
      o.launcher_world_size = 2;
      o.gather = [&gather, r](const std::string& mine) { return gather.Gather(r, mine); };
      jobs[r] = std::make_unique<Job>(o);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(jobs[0]->seed(), jobs[1]->seed());
  EXPECT_EQ(jobs[0]->plan().RankEpochSamples(1, 0), jobs[1]->plan().RankEpochSamples(1, 0));

  testing::InProcessGather disagree(2);
  std::string errors[2];
  for (int r = 0; r < 2; ++r) {
    threads[r] = std::thread([&, r] {
      JobOptions o = Options();
      o.use_mpi = false;
      o.batch_size = r == 0 ? 8 : 16;
      o.launcher_rank = r;
      o.launcher_world_size = 2;
      o.gather = [&disagree, r](const std::string& mine) { return disagree.Gather(r, mine); };
      try {
        Job job(o);
      } catch (const InvalidArgumentError& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors[0], errors[1]);
  EXPECT_NE(errors[0].find("ranks disagree on batch_size: rank 0 has 8, rank 1 has 16"), std::string::npos)
      << errors[0];
}

TEST_F(JobTest, BatchSizePerRankAndWorkers) {
  JobOptions o = Options();
  o.use_mpi = false;
  o.batch_size = 0;
  o.batch_size_per_rank = 5;
  o.launcher_rank = 1;
  o.launcher_world_size = 3;
  o.staging_threads = 2;
  Job job(o);
  EXPECT_EQ(job.plan().options().batch_size, 15);
  EXPECT_EQ(job.plan().NominalLocalBatchSize(1), 5);
  EXPECT_EQ(job.config().storage_classes[0].threads, 2);
  o.batch_size = 8;  // both
  EXPECT_THROW(Job{o}, InvalidArgumentError);
  o.batch_size = 0;
  o.batch_size_per_rank = 0;  // neither
  EXPECT_THROW(Job{o}, InvalidArgumentError);
  o = Options();
  o.launcher_rank = 3;
  o.launcher_world_size = 3;
  EXPECT_THROW(Job{o}, InvalidArgumentError);
  o = Options();
  o.use_mpi = false;
  o.launcher_world_size = 64;  // more ranks than the 57 samples
  try {
    Job job_too_wide(o);
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("batch_size 8 is smaller than the world size 64"), std::string::npos)
        << e.what();
  }
}

TEST_F(JobTest, UnshuffledEpochsAreInIndexOrder) {
  JobOptions o = Options();
  o.shuffle = false;
  Job job(o);
  for (int e = 0; e < 2; ++e) {
    job.BeginEpoch(e);
    std::vector<int64_t> ids;
    Batch batch;
    while (Next(job, &batch) == Job::Next::kBatch) ids.insert(ids.end(), batch.ids.begin(), batch.ids.end());
    ASSERT_EQ(ids.size(), 57u);
    for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(ids[i], static_cast<int64_t>(i));
  }
}

}  // namespace
}  // namespace hdmlp
