// The Job at the edges: waits that end, start-up that does not grow with
// epochs, a fork, a sample too large for memory, bad wait arguments.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "hdmlp/errors.h"
#include "hdmlp/job/job.h"
#include "test_util.h"

namespace hdmlp {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::TempDir;
using testing::WriteFile;

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class JobFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_ / "data";
    for (int i = 0; i < 24; ++i) {
      cv::Mat image(20 + i % 5, 24 + i % 3, CV_8UC3);
      cv::randu(image, 0, 255);
      std::vector<uint8_t> jpeg;
      cv::imencode(".jpg", image, jpeg);
      WriteFile(root_ + "/c" + std::to_string(i % 3) + "/img" + std::to_string(i) + ".jpg",
                std::string(jpeg.begin(), jpeg.end()));
    }
    WriteFile(dir_ / "staging.cfg", "storage_classes = ( { capacity = 0.01; threads = 2; } );\n");
    WriteFile(dir_ / "memory.cfg",
              "storage_classes = ( { capacity = 0.01; threads = 2; },\n"
              "  { backend = \"memory\"; capacity = 1; threads = 1; } );\n");
  }

  JobOptions Options(const std::string& config = "staging.cfg") {
    JobOptions o;
    o.dataset_path = root_;
    o.batch_size = 4;
    o.epochs = 2;
    o.has_seed = true;
    o.seed = 3;
    o.config_path = dir_ / config;
    o.scan.use_cache = false;
    return o;
  }

  static Job::Next Next(Job& job, Batch* batch) {
    for (;;) {
      const auto r = job.NextBatch(batch, 1000ms);
      if (r != Job::Next::kTimeout) return r;
    }
  }

  TempDir dir_;
  std::string root_;
};

TEST_F(JobFaultsTest, StartUpDoesNotGrowWithEpochs) {
  // 2^31 - 1 epochs: metrics and staging must not be O(epochs) (they were:
  // 200 GB of metrics). The placement's count is bounded too (placement_test).
  JobOptions o = Options();
  o.epochs = std::numeric_limits<int>::max();
  Job job(o);
  EXPECT_TRUE(job.Metrics().size() <= 2u);  // only epochs touched so far
  job.BeginEpoch(0);
  Batch batch;
  int64_t samples = 0;
  while (Next(job, &batch) == Job::Next::kBatch) samples += static_cast<int64_t>(batch.ids.size());
  EXPECT_EQ(samples, 24);
  job.BeginEpoch(1000);
  ASSERT_EQ(Next(job, &batch), Job::Next::kBatch);
  const auto metrics = job.Metrics();
  ASSERT_LE(metrics.size(), 1002u);  // epoch e at index e, up to the last one touched
  EXPECT_EQ(metrics[1000].epoch, 1000);
  EXPECT_EQ(metrics[500].samples, 0);
}

TEST_F(JobFaultsTest, LongStartUpPhasesPollForInterrupts) {
  JobOptions o = Options("memory.cfg");
  o.epochs = 12000;  // 288K reads to count for the placement: one chunk of the count
  o.scan.threads = 1;  // the calling thread walks every folder: a fixed number of polls
  int calls = 0;
  o.interrupt = [&calls] { ++calls; };
  { Job job(o); }
  const int scan_folders = 3;  // the class folders
  EXPECT_GT(calls, scan_folders) << "the placement count polls too";
  for (const int stop_at : {1, calls}) {
    int n = 0;
    o.interrupt = [&n, stop_at] {
      if (++n == stop_at) throw InterruptedError("interrupted");
    };
    EXPECT_THROW(Job job(o), InterruptedError) << "stopping at poll " << stop_at;
  }
}

TEST_F(JobFaultsTest, EndlessOrHugeArgumentsAreRefused) {
  for (const double bad : {std::nan(""), std::numeric_limits<double>::infinity(), -1.0, 0.0, 1e12}) {
    JobOptions o = Options();
    o.timeout_s = bad;
    try {
      Job job(o);
      FAIL() << "timeout_s " << bad << " accepted";
    } catch (const InvalidArgumentError& e) {
      EXPECT_TRUE(Contains(e.what(), "timeout_s")) << e.what();
    }
    o = Options();
    o.read_timeout_s = bad == 0.0 ? -2.0 : bad;
    EXPECT_THROW(Job job(o), InvalidArgumentError) << "read_timeout_s " << o.read_timeout_s;
  }
  JobOptions o = Options();
  o.batch_size = std::numeric_limits<int64_t>::max();
  try {
    Job job(o);
    FAIL() << "batch_size 2^63-1 accepted";
  } catch (const InvalidArgumentError& e) {
    EXPECT_TRUE(Contains(e.what(), "batch_size must be from 1 to 2**62")) << e.what();
  }
  o = Options();
  o.exchange_fraction = std::nan("");
  EXPECT_THROW(Job job(o), InvalidArgumentError);
}

TEST_F(JobFaultsTest, AStuckReadFailsNamingTheFileAndCloseDoesNotWaitForIt) {
  ThrottledEnv::Options slow;
  slow.read_latency_s = 4;
  JobOptions o = Options();
  o.shared_env = std::make_shared<ThrottledEnv>(Env::Default(), slow);
  o.read_timeout_s = 0.3;
  Job job(o);
  job.BeginEpoch(0);
  Batch batch;
  const auto start = Clock::now();
  try {
    Next(job, &batch);
    FAIL() << "no error";
  } catch (const IOError& e) {
    EXPECT_TRUE(Contains(e.what(), root_)) << e.what();
    EXPECT_TRUE(Contains(e.what(), "read_timeout_s")) << e.what();
  }
  EXPECT_LT(SecondsSince(start), 3);
  const auto closing = Clock::now();
  job.Close();
  EXPECT_LT(SecondsSince(closing), 2) << "Close waited for reads stuck in the storage";
}

TEST_F(JobFaultsTest, CloseDuringSlowReadsReturnsAtOnce) {
  ThrottledEnv::Options slow;
  slow.read_latency_s = 20;
  JobOptions o = Options("memory.cfg");  // prefetch threads read too
  o.shared_env = std::make_shared<ThrottledEnv>(Env::Default(), slow);
  auto job = std::make_unique<Job>(o);
  job->BeginEpoch(0);
  Batch batch;
  EXPECT_EQ(job->NextBatch(&batch, 200ms), Job::Next::kTimeout);
  const auto closing = Clock::now();
  job.reset();  // the reads' threads keep the storage alive; nothing they touch is freed
  EXPECT_LT(SecondsSince(closing), 2);
}

TEST_F(JobFaultsTest, AForkedChildGetsAnErrorAtOnce) {
  Job job(Options());
  job.BeginEpoch(0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 3;
    try {
      Batch batch;
      job.NextBatch(&batch, 1000ms);
      code = 1;
    } catch (const ForkedError& e) {
      code = Contains(e.what(), "forked child") ? 0 : 2;
    } catch (...) {
      code = 4;
    }
    job.Close();  // does nothing here
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  Batch batch;
  int64_t samples = 0;
  while (Next(job, &batch) == Job::Next::kBatch) samples += static_cast<int64_t>(batch.ids.size());
  EXPECT_EQ(samples, 24);  // the parent's job is unharmed
}

// One file larger than any memory: named, and a bad sample.
class OneHugeFileEnv : public ThrottledEnv {
 public:
  explicit OneHugeFileEnv(std::string huge) : ThrottledEnv(Env::Default(), {}), huge_(std::move(huge)) {}
  std::unique_ptr<ReadableFile> OpenForRead(const std::string& path) override {
    if (path == huge_) return std::make_unique<testing::HugeFile>(path);
    return ThrottledEnv::OpenForRead(path);
  }

 private:
  std::string huge_;
};

TEST_F(JobFaultsTest, ASampleTooLargeForMemoryIsNamedAndSkippable) {
  const std::string huge = root_ + "/c1/img4.jpg";
  for (const bool skip : {false, true}) {
    JobOptions o = Options();
    o.shared_env = std::make_shared<OneHugeFileEnv>(huge);
    o.epochs = 1;
    o.transforms = {{"ImgDecode", {}}, {"Resize", {{"size", {8, 8}}}}, {"ToTensor", {}}};
    o.skip_bad_samples = skip;
    Job job(o);
    job.BeginEpoch(0);
    Batch batch;
    int64_t samples = 0;
    try {
      while (Next(job, &batch) == Job::Next::kBatch) samples += static_cast<int64_t>(batch.ids.size());
      EXPECT_TRUE(skip) << "no error without skip";
    } catch (const AllocationError& e) {
      EXPECT_FALSE(skip) << e.what();
      EXPECT_TRUE(Contains(e.what(), huge)) << e.what();
    }
    if (skip) {
      EXPECT_EQ(samples, 23);
      EXPECT_EQ(job.skipped_samples(), 1);
      ASSERT_EQ(job.SkippedFiles().size(), 1u);
      EXPECT_TRUE(Contains(job.SkippedFiles()[0], huge)) << job.SkippedFiles()[0];
    }
  }
}

TEST_F(JobFaultsTest, ReportingAStartUpFailureOutsideMpiDoesNothing) {
  Job::ReportStartupFailure(CapturedError::FromKindName("not_found", "x"), 1);
}

}  // namespace
}  // namespace hdmlp
