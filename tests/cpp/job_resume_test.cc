// A Job resumed from a state (job/job_state.h): the batches it delivers
// against an uninterrupted job's, byte for byte, and the states it refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>
#include <map>
#include <memory>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "hdmlp/errors.h"
#include "hdmlp/job/job.h"
#include "test_util.h"

namespace hdmlp {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;
using testing::WriteFile;

// A delivered batch, reduced to what must be identical: ids, labels, bytes.
struct Delivered {
  int epoch;
  int64_t index;
  std::vector<int64_t> ids;
  std::vector<int64_t> labels;
  std::string bytes;
  bool operator==(const Delivered& o) const {
    return epoch == o.epoch && index == o.index && ids == o.ids && labels == o.labels && bytes == o.bytes;
  }
};

Job::Next Next(Job& job, Batch* batch) {
  for (;;) {
    const auto r = job.NextBatch(batch, 1000ms);
    if (r != Job::Next::kTimeout) return r;
  }
}

Delivered Reduce(const Batch& b) {
  Delivered d{b.epoch, b.index, b.ids, b.labels, ""};
  if (b.images) {
    d.bytes.assign(reinterpret_cast<const char*>(b.images.get()),
                   static_cast<size_t>(b.sample_shape.bytes()) * b.ids.size());
  } else {
    for (const auto& s : b.samples) {
      d.bytes.append(reinterpret_cast<const char*>(s.data.get()), static_cast<size_t>(s.size));
    }
  }
  return d;
}

// Runs the job from where it starts to its end (or `limit` batches), in
// order; the epoch the job starts in goes on where it resumes.
std::vector<Delivered> RunJob(Job& job, int64_t limit = -1) {
  std::vector<Delivered> out;
  for (int e = job.State().epoch; e < job.plan().epochs(); ++e) {
    job.BeginEpoch(e);
    Batch b;
    while ((limit < 0 || static_cast<int64_t>(out.size()) < limit) && Next(job, &b) == Job::Next::kBatch) {
      out.push_back(Reduce(b));
    }
    if (static_cast<int64_t>(out.size()) == limit) break;
  }
  return out;
}

class JobResumeTest : public ::testing::TestWithParam<std::tuple<bool, bool>> {
 protected:
  void SetUp() override {
    root_ = dir_ / "data";
    std::mt19937 rng(3);
    // 45 images of 3 classes: batches of 6 leave a remainder of 3.
    for (int i = 0; i < 45; ++i) {
      cv::Mat image(20 + i % 5, 24 + i % 3, CV_8UC3);
      cv::randu(image, 0, 255);
      std::vector<uint8_t> png;
      cv::imencode(i % 2 ? ".png" : ".jpg", image, png);
      WriteFile(root_ + "/c" + std::to_string(i % 3) + "/img" + std::to_string(i) + (i % 2 ? ".png" : ".jpg"),
                std::string(png.begin(), png.end()));
    }
    config_ = dir_ / "job.cfg";
    WriteFile(config_, "storage_classes = ( { capacity = 0.05; threads = 3; } );\n");
  }

  JobOptions Options() const {
    const auto [transforms, drop_last] = GetParam();
    JobOptions o;
    o.dataset_path = root_;
    o.batch_size = 6;
    o.epochs = 3;
    o.drop_last = drop_last;
    o.has_seed = true;
    o.seed = 77;
    o.config_path = config_;
    o.scan.use_cache = false;
    if (transforms) {
      o.transforms = {{"ImgDecode", {}},
                      {"RandomResizedCrop", {{"size", {10}}}},
                      {"RandomHorizontalFlip", {}},
                      {"ToTensor", {}}};
    }
    return o;
  }

  TempDir dir_;
  std::string root_, config_;
};

TEST_P(JobResumeTest, ResumedJobsDeliverTheRemainingBatchesBitForBit) {
  std::vector<Delivered> whole;
  int64_t per_epoch = 0;
  {
    Job job(Options());
    per_epoch = job.BatchesPerEpoch();
    whole = RunJob(job);
  }
  ASSERT_EQ(static_cast<int64_t>(whole.size()), 3 * per_epoch);
  // Stop after k batches (first batch, mid-epoch, an epoch boundary, the
  // last batch of the job), take the state, resume in a new job.
  for (const int64_t k : {int64_t{0}, int64_t{1}, per_epoch + 2, 2 * per_epoch, 3 * per_epoch - 1, 3 * per_epoch}) {
    JobState state;
    {
      Job first(Options());
      const std::vector<Delivered> before = RunJob(first, k);
      ASSERT_EQ(before, std::vector<Delivered>(whole.begin(), whole.begin() + k));
      state = first.State();
    }
    EXPECT_EQ(state.epoch, k / per_epoch) << k;
    EXPECT_EQ(state.batches, k % per_epoch) << k;
    {
      // A consumer that delivers behind the job (the Python stage reads ahead)
      // describes its position with StateAt: the same state as stopping there.
      Job ahead(Options());
      RunJob(ahead, std::min(k + 3, 3 * per_epoch));
      const JobState at = ahead.StateAt(static_cast<int>(k / per_epoch), k % per_epoch);
      EXPECT_EQ(DescribeState(at), DescribeState(state)) << k;
      if (k > 0 && k % per_epoch == 0) {  // the end of an epoch is the start of the next
        EXPECT_EQ(DescribeState(ahead.StateAt(static_cast<int>(k / per_epoch) - 1, per_epoch)), DescribeState(state));
      }
      EXPECT_THROW(ahead.StateAt(0, per_epoch + 1), InvalidArgumentError);
    }
    EXPECT_EQ(state.position, state.batches * 6);
    JobOptions o = Options();
    o.has_seed = false;  // the state's seed
    o.resume = state;
    Job resumed(o);
    EXPECT_EQ(resumed.seed(), 77u);
    const std::vector<Delivered> after = RunJob(resumed);
    ASSERT_EQ(after.size(), whole.size() - static_cast<size_t>(k)) << "stopped after " << k;
    for (size_t i = 0; i < after.size(); ++i) {
      ASSERT_TRUE(after[i] == whole[static_cast<size_t>(k) + i]) << "stopped after " << k << ", batch " << i;
    }
    // Only what is left was read.
    int64_t read = 0;
    for (const auto& m : resumed.Metrics()) {
      for (const auto& [source, c] : m.reads) read += c.count;
    }
    int64_t left = 0;
    for (size_t i = static_cast<size_t>(k); i < whole.size(); ++i) left += static_cast<int64_t>(whole[i].ids.size());
    EXPECT_EQ(read, left) << "stopped after " << k;
  }
}

TEST_P(JobResumeTest, StartEpochIsAStateAtTheStartOfThatEpoch) {
  std::vector<Delivered> whole;
  {
    Job job(Options());
    whole = RunJob(job);
  }
  JobOptions o = Options();
  o.start_epoch = 2;
  Job job(o);
  EXPECT_EQ(job.State().epoch, 2);
  EXPECT_EQ(job.State().batches, 0);
  EXPECT_THROW(job.BeginEpoch(1), InvalidArgumentError);  // delivered before the job started
  const std::vector<Delivered> after = RunJob(job);
  ASSERT_EQ(after, std::vector<Delivered>(whole.end() - static_cast<std::ptrdiff_t>(after.size()), whole.end()));
  EXPECT_EQ(after.size(), static_cast<size_t>(job.BatchesPerEpoch()));
}

INSTANTIATE_TEST_SUITE_P(TransformsAndDropLast, JobResumeTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "Transforms" : "Bytes") +
                                  (std::get<1>(info.param) ? "DropLast" : "KeepLast");
                         });

class JobStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_ / "data";
    for (int i = 0; i < 40; ++i) {
      WriteFile(root_ + "/c" + std::to_string(i % 2) + "/f" + std::to_string(i) + ".jpg", "x" + std::to_string(i));
    }
    config_ = dir_ / "job.cfg";
    WriteFile(config_, "storage_classes = ( { capacity = 0.01; threads = 2; } );\n");
  }
  JobOptions Options() const {
    JobOptions o;
    o.dataset_path = root_;
    o.batch_size = 8;
    o.epochs = 2;
    o.has_seed = true;
    o.seed = 5;
    o.config_path = config_;
    o.scan.use_cache = false;
    return o;
  }
  std::string Refusal(JobOptions o, const JobState& state) {
    o.resume = state;
    try {
      Job job(o);
    } catch (const InvalidArgumentError& e) {
      return e.what();
    }
    return "";
  }
  TempDir dir_;
  std::string root_, config_;
};

TEST_F(JobStateTest, AStateThatDoesNotFitIsRefusedNamingTheDifference) {
  JobState state;
  {
    Job job(Options());
    job.BeginEpoch(0);
    Batch b;
    ASSERT_EQ(Next(job, &b), Job::Next::kBatch);
    state = job.State();
  }
  EXPECT_EQ(Refusal(Options(), state), "");
  JobOptions o = Options();
  o.batch_size = 4;
  EXPECT_NE(Refusal(o, state).find("its global batch size is 8, this job's is 4"), std::string::npos);
  o = Options();
  o.distr_scheme = "local";
  EXPECT_NE(Refusal(o, state).find("its distr_scheme is 'uniform', this job's is 'local'"), std::string::npos);
  JobState bogus = state;  // issue 26: never "give distr_scheme='bogus'"
  bogus.distr_scheme = "bogus";
  const std::string why = Refusal(Options(), bogus);
  EXPECT_NE(why.find("its distr_scheme 'bogus' is none hdmlp has"), std::string::npos) << why;
  EXPECT_EQ(why.find("give distr_scheme"), std::string::npos) << why;
  o = Options();
  o.seed = 6;
  EXPECT_NE(Refusal(o, state).find("its seed is 5, but this job was given seed=6"), std::string::npos);
  o = Options();
  o.drop_last = true;
  EXPECT_NE(Refusal(o, state).find("drop_last_batch=False"), std::string::npos);
  o = Options();
  o.epochs = 1;  // fewer epochs than the state has started: fine while the epoch is not done
  EXPECT_EQ(Refusal(o, state), "");
  JobState done = state;
  done.epoch = 2;
  EXPECT_NE(Refusal(o, done).find("more than this job's epochs=1"), std::string::npos);
  JobState edited = state;
  edited.position = 5;
  EXPECT_NE(Refusal(Options(), edited).find("inconsistent"), std::string::npos);
  // Another dataset: a file more changes the fingerprint and the count.
  WriteFile(root_ + "/c0/extra.jpg", "new");
  const std::string other = Refusal(Options(), state);
  EXPECT_NE(other.find("it is from another dataset: 40 samples"), std::string::npos) << other;
  EXPECT_NE(other.find("has 41 samples"), std::string::npos) << other;
  // A changed configuration is fine.
  WriteFile(config_, "storage_classes = ( { capacity = 0.02; threads = 1; } );\n");
  std::remove((root_ + "/c0/extra.jpg").c_str());
  EXPECT_EQ(Refusal(Options(), state), "");
  JobOptions both = Options();
  both.start_epoch = 1;
  EXPECT_NE(Refusal(both, state).find("at most one of resume"), std::string::npos);
}

TEST_F(JobStateTest, EveryRankRaisesTheSameErrorWhenOneResumesFromAnotherState) {
  JobState state;
  {
    Job job(Options());
    job.BeginEpoch(0);
    Batch b;
    ASSERT_EQ(Next(job, &b), Job::Next::kBatch);
    ASSERT_EQ(Next(job, &b), Job::Next::kBatch);
    state = job.State();
  }
  JobState other = state;  // one batch earlier: a valid state, but not rank 0's
  other.batches = 1;
  other.position = 8;
  testing::InProcessGather gather(2);
  std::string errors[2];
  std::thread threads[2];
  for (int r = 0; r < 2; ++r) {
    threads[r] = std::thread([&, r] {
      JobOptions o = Options();
      o.use_mpi = false;
      o.launcher_rank = r;
      o.launcher_world_size = 2;
      o.resume = r == 0 ? state : other;
      o.gather = [&gather, r](const std::string& mine) { return gather.Gather(r, mine); };
      try {
        Job job(o);
      } catch (const InvalidArgumentError& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors[0], errors[1]);
  EXPECT_NE(errors[0].find("ranks disagree on resume: rank 0 has epoch 0 after 2 global batches"), std::string::npos)
      << errors[0];
  EXPECT_NE(errors[0].find("rank 1 has epoch 0 after 1 global batch "), std::string::npos) << errors[0];
}

TEST_F(JobStateTest, LauncherRanksResumedOnAnotherCountDeliverTheRestOnce) {
  // 4 ranks stop after 2 of 5 batches of epoch 0; 3 ranks go on.
  for (const std::string scheme : {"uniform", "local", "partial_local"}) {
    std::multiset<int64_t> seen;
    JobState state;
    for (int r = 0; r < 4; ++r) {
      JobOptions o = Options();
      o.distr_scheme = scheme;
      o.use_mpi = false;
      o.launcher_rank = r;
      o.launcher_world_size = 4;
      Job job(o);
      job.BeginEpoch(0);
      Batch b;
      for (int k = 0; k < 2; ++k) {
        ASSERT_EQ(Next(job, &b), Job::Next::kBatch);
        seen.insert(b.ids.begin(), b.ids.end());
      }
      const JobState mine = job.State();
      if (r > 0) EXPECT_EQ(DescribeState(mine), DescribeState(state)) << "ranks hold different states";
      state = mine;
    }
    EXPECT_EQ(state.world_size, 4);
    EXPECT_EQ(state.order_world_size, 4);
    std::vector<int64_t> steps;
    for (int r = 0; r < 3; ++r) {
      JobOptions o = Options();
      o.distr_scheme = scheme;
      o.use_mpi = false;
      o.launcher_rank = r;
      o.launcher_world_size = 3;
      o.resume = state;
      Job job(o);
      job.BeginEpoch(0);
      Batch b;
      int64_t n = 0;
      while (Next(job, &b) == Job::Next::kBatch) {
        seen.insert(b.ids.begin(), b.ids.end());
        ++n;
        // Inside the interrupted epoch the order stays the 4 ranks' one.
        if (n == 1) EXPECT_EQ(job.State().order_world_size, 4);
      }
      steps.push_back(n);
      EXPECT_EQ(job.State().epoch, 1);
      EXPECT_EQ(job.State().order_world_size, 3);
    }
    EXPECT_EQ(steps, (std::vector<int64_t>{3, 3, 3})) << scheme;
    EXPECT_EQ(seen.size(), 40u) << scheme;
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 40u) << scheme << ": a sample twice";
  }
}

}  // namespace
}  // namespace hdmlp
