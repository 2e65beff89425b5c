#include "hdmlp/util/parallel_for.h"

#include <gtest/gtest.h>

#include <atomic>
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

}  // namespace
}  // namespace hdmlp
