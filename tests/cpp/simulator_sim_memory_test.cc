// SimMemory and SimVector (sim_memory.h): the simulator's per-copy arrays
// live there; every block must be its own, aligned and writable, from
// several threads at once, and a vector moved or swapped takes its memory
// along.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "hdmlp/sim/node_cache.h"
#include "hdmlp/sim/sim_memory.h"

namespace hdmlp::sim {
namespace {

TEST(SimulatorSimMemoryTest, BlocksAreAlignedDisjointAndWritableFromSeveralThreads) {
  SimMemory memory;
  constexpr int kThreads = 4;
  constexpr int kBlocks = 300;
  std::vector<std::vector<std::pair<char*, size_t>>> blocks(kThreads);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&, t] {
      for (int b = 0; b < kBlocks; ++b) {
        // From a byte to 3 MB (past a huge page), alignments 1 to 64.
        const size_t bytes = (b % 7 == 0) ? (size_t{3} << 20) + static_cast<size_t>(b) : 1 + 977 * static_cast<size_t>(b);
        const size_t align = size_t{1} << (b % 7);
        auto* p = static_cast<char*>(memory.Allocate(bytes, align));
        ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u);
        std::memset(p, t + 1, bytes);
        blocks[static_cast<size_t>(t)].emplace_back(p, bytes);
      }
    });
  }
  for (auto& th : pool) th.join();
  std::vector<std::pair<char*, size_t>> all;
  size_t total = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (const auto& [p, bytes] : blocks[static_cast<size_t>(t)]) {
      // Nobody else wrote into this thread's blocks.
      EXPECT_EQ(p[0], t + 1);
      EXPECT_EQ(p[bytes - 1], t + 1);
      all.emplace_back(p, bytes);
      total += bytes;
    }
  }
  std::sort(all.begin(), all.end());
  for (size_t k = 1; k < all.size(); ++k) ASSERT_LE(all[k - 1].first + all[k - 1].second, all[k].first);
  EXPECT_EQ(memory.used_bytes(), total);
}

TEST(SimulatorSimMemoryTest, VectorsKeepTheirMemoryWhenMovedAndNullMeansOperatorNew) {
  SimMemory memory;
  SimVector<uint32_t> a{SimAllocator<uint32_t>(&memory)};
  for (uint32_t k = 0; k < 100000; ++k) a.push_back(k * 3);
  EXPECT_GE(memory.used_bytes(), 100000 * sizeof(uint32_t));
  const uint32_t* data = a.data();
  SimVector<uint32_t> b;  // operator new
  b = std::move(a);       // takes a's memory, not a copy
  EXPECT_EQ(b.data(), data);
  EXPECT_EQ(b.get_allocator().memory(), &memory);
  EXPECT_EQ(b[99999], 299997u);
  SimVector<uint32_t> c(5, 7u);
  EXPECT_EQ(c.get_allocator().memory(), nullptr);
  std::swap(b, c);
  EXPECT_EQ(c.data(), data);
  EXPECT_EQ(b.size(), 5u);
}

// A cache built in a SimMemory answers as one built with operator new.
TEST(SimulatorSimMemoryTest, ANodeCacheInSimMemoryAnswersAsOneOnTheHeap) {
  NodePlan plan;
  plan.class_lists = {{}, {}, {}};
  for (int64_t s = 0; s < 50000; s += 3) plan.class_lists[1 + static_cast<size_t>(s % 2)].push_back(s);
  plan.copies = {0, 0, 10};
  SimMemory memory;
  const NodeCache heap = BuildCache(plan);
  NodeCache mapped = BuildCache(plan, &memory);
  EXPECT_GT(memory.used_bytes(), 0u);
  ASSERT_EQ(mapped.size(), heap.size());
  for (int64_t s = -1; s < 50010; ++s) {
    ASSERT_EQ(mapped.Find(s), heap.Find(s)) << s;
    if (heap.Find(s) >= 0) ASSERT_EQ(mapped.Class(static_cast<size_t>(heap.Find(s))), heap.Class(static_cast<size_t>(heap.Find(s))));
  }
  for (size_t k = 0; k < heap.size(); ++k) ASSERT_EQ(mapped.FillSample(k), heap.FillSample(k));
  mapped.Start(7, 1.5f, 0.0);
  EXPECT_TRUE(mapped.Started(7));
  EXPECT_EQ(mapped.Ready(7, 1.0), 1.5f);
  EXPECT_FALSE(mapped.Started(8));
}

}  // namespace
}  // namespace hdmlp::sim
