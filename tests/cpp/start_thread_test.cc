// Threads the OS refuses (EAGAIN under RLIMIT_AS or a thread limit): every
// place that starts one either does the work without it or raises an error
// naming the thread and the setting, after stopping the threads it started;
// never std::terminate. Failures are injected (env/start_thread.h); the real
// thing runs in tests/python/test_fault_classes.py and parallel_for_test.
#include "hdmlp/env/start_thread.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <numeric>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <thread>

#include "hdmlp/env/deadline_reader.h"
#include "hdmlp/errors.h"
#include "hdmlp/job/job.h"
#include "hdmlp/source/source.h"
#include "test_util.h"

namespace hdmlp {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;
using testing::WriteFile;

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// This process's threads now.
int ThreadCount() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)entry;
    ++n;
  }
  return n;
}

// Waits (up to 5 s) until no more than `count` threads are left.
int ThreadsSettleTo(int count) {
  const auto end = std::chrono::steady_clock::now() + 5s;
  int now = ThreadCount();
  while (now > count && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(10ms);
    now = ThreadCount();
  }
  return now;
}

class StartThreadTest : public ::testing::Test {
 protected:
  void TearDown() override { FailThreadStartsForTesting("", 0, 0); }
};

TEST_F(StartThreadTest, ARefusedThreadIsAMemoryErrorNamingTheThreadTheLimitAndTheSetting) {
  FailThreadStartsForTesting("hdmlp-x", 1, 1);
  bool ran = false;
  std::thread first = StartThread("hdmlp-x1", "test", "the test's threads", [&ran] { ran = true; });
  first.join();
  EXPECT_TRUE(ran);
  try {
    std::thread second = StartThread("hdmlp-x2", "test", "the test's threads", [] {});
    second.join();
    FAIL() << "the second start should have failed";
  } catch (const AllocationError& e) {
    const std::string m = e.what();
    EXPECT_TRUE(Contains(m, "cannot start hdmlp's test thread 'hdmlp-x2'")) << m;
    EXPECT_TRUE(Contains(m, "RLIMIT_AS, ulimit -v")) << m;
    EXPECT_TRUE(Contains(m, "ulimit -u")) << m;
    EXPECT_TRUE(Contains(m, "or lower the test's threads")) << m;
  }
  // Only `count` starts fail; other names never do.
  std::thread third = StartThread("hdmlp-x3", "test", "the test's threads", [] {});
  third.join();
}

TEST_F(StartThreadTest, AReadInPiecesReadsEveryPieceWhenItsThreadsAreRefused) {
  TempDir dir;
  std::string content(4 << 20, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>((i * 2654435761u) >> 13);
  WriteFile(dir / "big.bin", content);
  const std::unique_ptr<ReadableFile> file = Env::Default()->OpenForRead(dir / "big.bin");
  for (int refused : {1, 3, 100}) {
    FailThreadStartsForTesting("hdmlp-piece", 2, refused);  // 2 pieces on threads, then refusals
    std::string out(content.size(), '\1');
    ReadInPieces(file.get(), 0, static_cast<int64_t>(out.size()), reinterpret_cast<uint8_t*>(out.data()), 8);
    EXPECT_TRUE(out == content) << refused << " refused";
  }
}

TEST_F(StartThreadTest, ADeadlineReaderWithNoThreadReadsOnTheCallersThread) {
  DeadlineReader reader(5);
  FailThreadStartsForTesting("hdmlp-read", 0, 1);
  std::thread::id ran_on;
  reader.Run([&ran_on] { ran_on = std::this_thread::get_id(); }, "a test read");
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  // Its errors reach the caller as from the pool.
  FailThreadStartsForTesting("hdmlp-read", 0, 1);
  EXPECT_THROW(reader.Run([] { throw IOError("broken"); }, "a test read"), IOError);
  // With threads again, reads run on the pool.
  reader.Run([&ran_on] { ran_on = std::this_thread::get_id(); }, "a test read");
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST_F(StartThreadTest, ADeadlineReaderThatHasAThreadQueuesTheReadForIt) {
  DeadlineReader reader(5);
  reader.Run([] {}, "a first read");  // starts one pool thread, idle after
  FailThreadStartsForTesting("hdmlp-read", 0, 100);
  std::atomic<int> runs{0};
  std::vector<std::thread> callers;
  for (int i = 0; i < 4; ++i) {
    callers.emplace_back([&] { reader.Run([&runs] { std::this_thread::sleep_for(5ms), ++runs; }, "a test read"); });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(runs.load(), 4);
}

class JobThreadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_ / "data";
    for (int i = 0; i < 12; ++i) {
      cv::Mat image(20, 24, CV_8UC3);
      cv::randu(image, 0, 255);
      std::vector<uint8_t> jpeg;
      cv::imencode(".jpg", image, jpeg);
      WriteFile(root_ + "/c" + std::to_string(i % 2) + "/img" + std::to_string(i) + ".jpg",
                std::string(jpeg.begin(), jpeg.end()));
    }
    WriteFile(dir_ / "memory.cfg",
              "storage_classes = ( { capacity = 0.01; threads = 3; },\n"
              "  { backend = \"memory\"; capacity = 1; threads = 2; } );\n");
  }
  void TearDown() override { FailThreadStartsForTesting("", 0, 0); }

  JobOptions Options() {
    JobOptions o;
    o.dataset_path = root_;
    o.batch_size = 4;
    o.epochs = 1;
    o.has_seed = true;
    o.seed = 3;
    o.config_path = dir_ / "memory.cfg";
    o.scan.use_cache = false;
    return o;
  }

  // Starting a job with the threads named `prefix` refused after `after` of
  // them raises the MemoryError; the threads it started are gone.
  std::string StartFails(const std::string& prefix, int after) {
    std::thread([] {}).join();  // TSan's runtime starts a thread of its own at the first thread: not the job's
    const int before = ThreadCount();
    FailThreadStartsForTesting(prefix, after, 1);
    std::string message;
    try {
      Job job(Options());
      ADD_FAILURE() << "the job started with its " << prefix << " thread refused";
    } catch (const AllocationError& e) {
      message = e.what();
    }
    EXPECT_EQ(ThreadsSettleTo(before), before) << "threads left behind";
    return message;
  }

  TempDir dir_;
  std::string root_;
};

TEST_F(JobThreadsTest, ARefusedStagingThreadStopsTheJobWithAMemoryErrorNamingTheSetting) {
  for (int after : {0, 2}) {
    const std::string m = StartFails("hdmlp-stage", after);
    EXPECT_TRUE(Contains(m, "cannot start hdmlp's staging thread 'hdmlp-stage-" + std::to_string(after) + "'")) << m;
    EXPECT_TRUE(Contains(m, "the staging buffer's threads (3 in the config's first storage class)")) << m;
  }
}

TEST_F(JobThreadsTest, ARefusedPrefetchThreadStopsTheJobWithAMemoryErrorNamingTheClass) {
  for (int after : {0, 1}) {
    const std::string m = StartFails("hdmlp-fill", after);
    EXPECT_TRUE(Contains(m, "cannot start hdmlp's prefetch thread 'hdmlp-fill-1'")) << m;
    EXPECT_TRUE(Contains(m, "the 'threads' of storage class 'memory' (2)")) << m;
  }
}

TEST_F(JobThreadsTest, AJobWhoseReadsGetNoThreadStillDeliversEverySampleOnce) {
  FailThreadStartsForTesting("hdmlp-read", 0, 1 << 30);
  Job job(Options());
  job.BeginEpoch(0);
  Batch batch;
  std::vector<int64_t> seen;
  for (;;) {
    const auto r = job.NextBatch(&batch, 1000ms);
    if (r == Job::Next::kTimeout) continue;
    if (r != Job::Next::kBatch) break;
    seen.insert(seen.end(), batch.ids.begin(), batch.ids.end());
  }
  std::sort(seen.begin(), seen.end());
  std::vector<int64_t> all(12);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(seen, all);
}

}  // namespace
}  // namespace hdmlp
