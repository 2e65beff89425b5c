#include "hdmlp/util/parallel_for.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace hdmlp {
namespace {

TEST(ParallelForTest, RunsEveryItemOnce) {
  std::vector<std::atomic<int>> runs(1000);
  ParallelFor(1000, 7, [&](int64_t i) { runs[static_cast<size_t>(i)].fetch_add(1); });
  for (const auto& r : runs) EXPECT_EQ(1, r.load());
}

// The lowest failing item's error, even when a later item fails first in time:
// a source that lists files in parallel names the first damaged file of its list.
TEST(ParallelForTest, RethrowsTheErrorOfTheLowestFailingItem) {
  for (int round = 0; round < 20; ++round) {
    std::vector<std::atomic<int>> ran(100);
    try {
      ParallelFor(100, 8, [&](int64_t i) {
        ran[static_cast<size_t>(i)] = 1;
        if (i == 17) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));  // fails last in time
          throw std::runtime_error("item 17");
        }
        if (i == 18 || i == 60) throw std::runtime_error("item " + std::to_string(i));
      });
      FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ("item 17", e.what()) << "round " << round;
    }
    for (int i = 0; i <= 17; ++i) EXPECT_EQ(1, ran[static_cast<size_t>(i)].load()) << "item " << i;
  }
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HDMLP_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HDMLP_SANITIZED 1
#endif
#endif

// Under an address-space limit that leaves no room for another thread's stack,
// every item still runs, on the caller's thread: no std::system_error, no terminate.
TEST(ParallelForTest, RunsEveryItemWhenNoThreadCanBeCreated) {
#ifdef HDMLP_SANITIZED
  GTEST_SKIP() << "the sanitizers reserve address space that RLIMIT_AS would take away";
#else
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    long pages = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    const rlim_t limit = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (2 << 20);
    const struct rlimit rl = {limit, limit};
    if (pages == 0 || setrlimit(RLIMIT_AS, &rl) != 0) _exit(3);
    std::vector<int> runs(64, 0);
    try {
      ParallelFor(64, 8, [&](int64_t i) { runs[static_cast<size_t>(i)] += 1; });
    } catch (...) {
      _exit(2);
    }
    for (int r : runs) {
      if (r != 1) _exit(1);
    }
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(pid, waitpid(pid, &status, 0));
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(0, WEXITSTATUS(status));
#endif
}

}  // namespace
}  // namespace hdmlp
