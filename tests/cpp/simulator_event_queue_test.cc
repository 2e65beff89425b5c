// EventQueue (event_queue.h) against a plain priority queue ordered by
// Event::Before: the simulator's results depend on the exact order of
// events, ties at one instant included.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <queue>
#include <random>
#include <vector>

#include "hdmlp/sim/event_queue.h"

namespace hdmlp::sim {
namespace {

struct After {
  bool operator()(const Event& a, const Event& b) const { return b.Before(a); }
};

TEST(SimulatorEventQueueTest, PopsInTheOrderOfBefore) {
  std::mt19937_64 rng(7);
  // Few distinct times (many ties, resolved by seq and kRelease), tiny
  // and huge ones, zero and infinity.
  const double times[] = {0.0, std::numeric_limits<double>::denorm_min(), 1e-300, 0.5, 0.5000000000000001,
                          1.0, 3.25, 1e9, std::numeric_limits<double>::max(),
                          std::numeric_limits<double>::infinity()};
  for (int round = 0; round < 20; ++round) {
    EventQueue queue;
    std::priority_queue<Event, std::vector<Event>, After> reference;
    uint64_t seq = 0;
    int popped = 0;
    for (int step = 0; step < 20000; ++step) {
      // Mostly pushes early, mostly pops late: the heap grows past a few
      // thousand entries and empties again, with partial last levels.
      const bool push = reference.empty() || rng() % 100 < (step < 10000 ? 70u : 30u);
      if (push) {
        double t = times[rng() % (sizeof times / sizeof times[0])];
        if (rng() % 2) t = static_cast<double>(rng() % 1000) / 8.0;  // more ties
        Event e{t, seq++, static_cast<uint32_t>(rng() % 1024), static_cast<uint32_t>(rng() % 17)};
        if (rng() % 8 == 0) e.seq |= kRelease;
        queue.push(e);
        reference.push(e);
      } else {
        ASSERT_FALSE(queue.empty());
        const Event want = reference.top();
        const Event got = queue.top();
        ASSERT_EQ(got.time, want.time) << "pop " << popped;
        ASSERT_EQ(got.seq, want.seq) << "pop " << popped;
        ASSERT_EQ(got.node, want.node);
        ASSERT_EQ(got.thread, want.thread);
        queue.pop();
        reference.pop();
        ++popped;
      }
      ASSERT_EQ(queue.size(), reference.size());
    }
    EXPECT_GT(popped, 5000);
  }
}

}  // namespace
}  // namespace hdmlp::sim
