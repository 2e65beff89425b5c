// Env and DeadlineReader: reads that cannot block forever, end where the
// file ends, and never touch freed memory when left behind.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "hdmlp/env/deadline_reader.h"
#include "hdmlp/env/env.h"
#include "hdmlp/errors.h"
#include "test_util.h"

namespace hdmlp {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::TempDir;
using testing::WriteFile;

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(EnvTest, OpeningAFifoFailsAtOnceNamingIt) {
  TempDir dir;
  const std::string fifo = dir / "pipe.jpg";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const auto start = Clock::now();
  try {
    Env::Default()->OpenForRead(fifo);  // without a writer, open(2) would wait forever
    FAIL() << "a FIFO was opened";
  } catch (const IOError& e) {
    EXPECT_TRUE(Contains(e.what(), fifo)) << e.what();
    EXPECT_TRUE(Contains(e.what(), "FIFO")) << e.what();
  }
  EXPECT_LT(SecondsSince(start), 5);
  EXPECT_EQ(Env::Default()->Stat(fifo).kind, FileKind::kFifo);
}

TEST(EnvTest, ReadsToTheEndWhateverStatSays) {
  // /proc files report size 0 and have content.
  const FileInfo info = Env::Default()->Stat("/proc/self/status");
  ASSERT_EQ(info.kind, FileKind::kRegular);
  ASSERT_EQ(info.size, 0);
  const std::string whole = Env::Default()->ReadWholeFile("/proc/self/status");
  EXPECT_TRUE(Contains(whole, "Pid:")) << whole.size() << " bytes";
  auto file = Env::Default()->OpenForRead("/proc/self/status");
  const FileContents contents = ReadToEnd(file.get());
  EXPECT_GT(contents.bytes.size, 100);
  EXPECT_TRUE(Contains(std::string(reinterpret_cast<const char*>(contents.bytes.data.get()),
                                   static_cast<size_t>(contents.bytes.size)),
                       "Pid:"));
  // A regular file: exactly its bytes.
  TempDir dir;
  WriteFile(dir / "f", std::string(70000, 'x') + "end");
  EXPECT_EQ(Env::Default()->ReadWholeFile(dir / "f"), std::string(70000, 'x') + "end");
}

TEST(EnvTest, AFileLockIsHeldUntilReleased) {
  TempDir dir;
  const std::string path = dir / "lock";
  EXPECT_THROW(Env::Default()->TryLockFile(path, false), NotFoundError);
  auto held = Env::Default()->TryLockFile(path, true);
  ASSERT_NE(held, nullptr);
  // Another open of the file (as another process would) cannot take it.
  EXPECT_EQ(Env::Default()->TryLockFile(path, false), nullptr);
  held.reset();
  EXPECT_NE(Env::Default()->TryLockFile(path, false), nullptr);
}

// Reads `path` whole through `reader`, as the job does: the task owns the
// Env and its result.
std::string ReadThrough(DeadlineReader& reader, std::shared_ptr<Env> env, const std::string& path,
                        const std::atomic<bool>* stop = nullptr) {
  auto result = std::make_shared<std::string>();
  reader.Run(
      [env, path, result] {
        auto file = env->OpenForRead(path);
        const FileContents c = ReadToEnd(file.get());
        result->assign(reinterpret_cast<const char*>(c.bytes.data.get()), static_cast<size_t>(c.bytes.size));
      },
      "reading '" + path + "'", stop);
  return *result;
}

// A storage whose opens take `latency`, and which counts reads that ended.
class SlowEnv : public ThrottledEnv {
 public:
  SlowEnv(double latency_s, std::atomic<int>* finished)
      : ThrottledEnv(Env::Default(), Opts(latency_s)), finished_(finished) {}
  std::unique_ptr<ReadableFile> OpenForRead(const std::string& path) override {
    auto file = ThrottledEnv::OpenForRead(path);
    finished_->fetch_add(1);
    return file;
  }

 private:
  static Options Opts(double latency_s) {
    Options o;
    o.read_latency_s = latency_s;
    return o;
  }
  std::atomic<int>* finished_;
};

TEST(DeadlineReaderTest, AReadPastItsDeadlineFailsNamingTheFileAndIsLeftBehind) {
  TempDir dir;
  WriteFile(dir / "slow.jpg", "abc");
  static std::atomic<int> finished{0};  // outlives the test: the left-behind read reports here
  finished = 0;
  {
    auto env = std::make_shared<SlowEnv>(1.5, &finished);
    DeadlineReader reader(0.2);
    const auto start = Clock::now();
    try {
      ReadThrough(reader, env, dir / "slow.jpg");
      FAIL() << "the read did not time out";
    } catch (const IOError& e) {
      EXPECT_TRUE(Contains(e.what(), dir / "slow.jpg")) << e.what();
      EXPECT_TRUE(Contains(e.what(), "read_timeout_s")) << e.what();
    }
    EXPECT_LT(SecondsSince(start), 1.2);
    EXPECT_EQ(reader.timed_out_reads(), 1);
    const auto closing = Clock::now();
    reader.Close(0.05);  // does not wait for the stuck read
    EXPECT_LT(SecondsSince(closing), 1.0);
  }  // reader and env released here; the read's thread still holds the env
  EXPECT_EQ(finished.load(), 0);
  for (int i = 0; i < 100 && finished.load() == 0; ++i) std::this_thread::sleep_for(50ms);
  EXPECT_EQ(finished.load(), 1) << "the left-behind read should end on its own (ASan checks it touched nothing freed)";
  std::this_thread::sleep_for(100ms);  // lets the detached thread finish before the next test
}

TEST(DeadlineReaderTest, AStopFlagEndsTheWaitAtOnce) {
  TempDir dir;
  WriteFile(dir / "slow.jpg", "abc");
  static std::atomic<int> finished{0};
  finished = 0;
  auto env = std::make_shared<SlowEnv>(0.6, &finished);
  DeadlineReader reader(60);
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    stop = true;
    reader.WakeWaiters();
  });
  const auto start = Clock::now();
  EXPECT_THROW(ReadThrough(reader, env, dir / "slow.jpg", &stop), ClosedError);
  EXPECT_LT(SecondsSince(start), 0.5);
  stopper.join();
  // Reads still work, and in parallel: four reads of 0.6 s take about 0.6 s.
  std::vector<std::thread> readers;
  std::atomic<int> ok{0};
  const auto parallel = Clock::now();
  for (int i = 0; i < 4; ++i) {
    readers.emplace_back([&] {
      if (ReadThrough(reader, env, dir / "slow.jpg") == "abc") ++ok;
    });
  }
  for (auto& t : readers) t.join();
  EXPECT_EQ(ok.load(), 4);
  EXPECT_LT(SecondsSince(parallel), 2.2);
  reader.Close(2.0);  // idle threads are joined
}

TEST(DeadlineReaderTest, ErrorsKeepTheirType) {
  TempDir dir;
  DeadlineReader reader(10);
  const std::shared_ptr<Env> env(Env::Default(), [](Env*) {});
  EXPECT_THROW(ReadThrough(reader, env, dir / "missing.jpg"), NotFoundError);
  reader.Close();
  EXPECT_THROW(ReadThrough(reader, env, dir / "missing.jpg"), ClosedError);
}

// A file that says it is larger than any memory.
class HugeFileEnv : public ThrottledEnv {
 public:
  HugeFileEnv() : ThrottledEnv(Env::Default(), {}) {}
  std::unique_ptr<ReadableFile> OpenForRead(const std::string& path) override {
    return std::make_unique<testing::HugeFile>(path);
  }
};

TEST(DeadlineReaderTest, AFileTooLargeForMemoryIsAnAllocationErrorNamingIt) {
  DeadlineReader reader(10);
  try {
    ReadThrough(reader, std::make_shared<HugeFileEnv>(), "/data/huge.jpg");
    FAIL() << "no error";
  } catch (const AllocationError& e) {
    EXPECT_TRUE(Contains(e.what(), "/data/huge.jpg")) << e.what();
  }
}

TEST(CapturedErrorTest, KindsTravelByName) {
  for (const auto& make : std::vector<std::function<void()>>{
           [] { throw NotFoundError("a"); }, [] { throw NotADirectoryError("a"); }, [] { throw ConfigError("a"); },
           [] { throw InvalidArgumentError("a"); }, [] { throw AllocationError("a"); }, [] { throw IOError("a"); },
           [] { throw ClosedError("a"); }, [] { throw TypeError("a"); }}) {
    CapturedError original;
    try {
      make();
    } catch (...) {
      original = CapturedError::FromCurrentException();
    }
    const CapturedError copy = CapturedError::FromKindName(original.KindName(), "b");
    EXPECT_EQ(copy.KindName(), original.KindName());
    EXPECT_EQ(copy.message(), "b");
  }
  EXPECT_THROW(CapturedError::FromKindName("not_found", "x").Throw(), NotFoundError);
  EXPECT_THROW(CapturedError::FromKindName("config", "x").Throw(), ConfigError);
  EXPECT_THROW(CapturedError::FromKindName("type", "x").Throw(), TypeError);
  EXPECT_TRUE(CapturedError::FromKindName("allocation", "x").IsInvalidArgument());
}

}  // namespace
}  // namespace hdmlp
