// NodeCache and SampleSet (cpp/include/hdmlp/sim/node_cache.h): lookups in
// both of the sample set's forms, the fill order, and ready times that are
// kept only while they may lie ahead of the simulated clock.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "hdmlp/sim/node_cache.h"

namespace hdmlp::sim {
namespace {

// Every id in [0, span + 10) is found at its rank, or not at all.
void ExpectRanks(const std::vector<uint32_t>& sorted, uint32_t span) {
  const SampleSet set(sorted);
  ASSERT_EQ(set.size(), sorted.size());
  const std::set<uint32_t> members(sorted.begin(), sorted.end());
  int64_t rank = 0;
  for (uint32_t s = 0; s < span + 10; ++s) {
    if (members.count(s)) {
      EXPECT_EQ(set.Find(s), rank) << s;
      ++rank;
    } else {
      EXPECT_EQ(set.Find(s), -1) << s;
    }
  }
  EXPECT_EQ(set.Find(-1), -1);
  std::vector<uint32_t> seen;
  set.ForEach([&](uint32_t s, uint32_t k) {
    EXPECT_EQ(k, seen.size());
    seen.push_back(s);
  });
  EXPECT_EQ(seen, sorted);
}

TEST(SimulatorNodeCacheTest, SampleSetFindsRanksInBothForms) {
  // Dense (a bitmap is smaller than 4 bytes per id): every third id, and
  // runs across 64- and 256-bit boundaries.
  std::vector<uint32_t> dense;
  for (uint32_t s = 0; s < 3000; s += 3) dense.push_back(s);
  for (uint32_t s = 3000; s < 3600; ++s) dense.push_back(s);
  ExpectRanks(dense, 3600);
  // Sparse (the array): one id in a hundred, irregular gaps.
  std::vector<uint32_t> sparse;
  for (uint32_t s = 7; s < 200000; s += 97 + (s % 13)) sparse.push_back(s);
  ExpectRanks(sparse, 200000);
  ExpectRanks({}, 5);
  ExpectRanks({0}, 1);
}

NodePlan TwoClasses() {
  NodePlan plan;
  plan.class_lists = {{}, {40, 3, 17}, {8, 100}};
  plan.copies = {0, 0, 1};  // class 2's last entry comes from a peer
  return plan;
}

TEST(SimulatorNodeCacheTest, FillOrderAndClasses) {
  const NodeCache c = BuildCache(TwoClasses());
  ASSERT_EQ(c.size(), 5u);
  EXPECT_EQ(c.classes(), 3u);
  EXPECT_EQ(c.class_begin(1), 0u);
  EXPECT_EQ(c.class_begin(2), 3u);
  EXPECT_EQ(c.class_begin(3), 5u);
  EXPECT_EQ(c.copy_begin(2), 4u);
  const std::vector<uint32_t> fill = {40, 3, 17, 8, 100};
  for (size_t p = 0; p < fill.size(); ++p) EXPECT_EQ(c.FillSample(p), fill[p]);
  EXPECT_EQ(c.single_class(), 0);
  for (uint32_t s : {40u, 3u, 17u}) EXPECT_EQ(c.Class(static_cast<size_t>(c.Find(s))), 1);
  for (uint32_t s : {8u, 100u}) EXPECT_EQ(c.Class(static_cast<size_t>(c.Find(s))), 2);
  EXPECT_EQ(c.Find(4), -1);

  NodePlan one;
  one.class_lists = {{}, {9, 2, 5}};
  const NodeCache d = BuildCache(one);
  EXPECT_EQ(d.single_class(), 1);
  EXPECT_EQ(d.Class(0), 1);
}

TEST(SimulatorNodeCacheTest, ReadyTimesUntilTheClockPassesThem) {
  NodeCache c = BuildCache(TwoClasses());
  const auto k = static_cast<size_t>(c.Find(17));
  EXPECT_FALSE(c.Started(k));
  EXPECT_EQ(c.Ready(k, 0.0), kNotStarted);
  c.Start(k, RoundUpReady(0.5), 0.1);
  EXPECT_TRUE(c.Started(k));
  EXPECT_EQ(c.Ready(k, 0.1), RoundUpReady(0.5));  // ahead: its time
  EXPECT_LE(c.Ready(k, 0.6), 0.6);                // complete by then
  // A pending fill (its PFS read in flight) stays pending until settled.
  const auto p = static_cast<size_t>(c.Find(100));
  c.Start(p, kPendingReady, 0.2);
  EXPECT_EQ(c.Ready(p, 5.0), kPendingReady);
  c.Settle(p, RoundUpReady(6.0));
  EXPECT_EQ(c.Ready(p, 5.0), RoundUpReady(6.0));
  // Many fills that complete soon: the entries passed by the clock are
  // dropped, the others (and the pending one's time) kept.
  NodePlan big;
  big.class_lists = {{}, {}};
  for (int64_t s = 0; s < 1000; ++s) big.class_lists[1].push_back(s);
  NodeCache b = BuildCache(big);
  for (size_t i = 0; i < 1000; ++i) b.Start(i, RoundUpReady(static_cast<double>(i) + 0.5), static_cast<double>(i));
  for (size_t i = 0; i < 1000; ++i) {
    const double now = 998.0;
    const float r = b.Ready(i, now);
    if (static_cast<double>(i) + 0.5 <= now) {
      EXPECT_LE(r, now) << i;
    } else {
      EXPECT_EQ(r, RoundUpReady(static_cast<double>(i) + 0.5)) << i;
    }
  }
  // RoundUpReady never rounds below its argument.
  for (double t : {0.1, 1.0 / 3, 12345.678901234, 1e-9}) EXPECT_GE(static_cast<double>(RoundUpReady(t)), t);
}

}  // namespace
}  // namespace hdmlp::sim
