// EventQueue and LookaheadQueue (event_queue.h) against a plain priority
// queue ordered by Event::Before: the simulator's results depend on the
// exact order of events, ties at one instant included.
#include <gtest/gtest.h>

#include <algorithm>
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

template <typename Queue>
class SimulatorEventQueueTest : public testing::Test {};
using Queues = testing::Types<EventQueue, LookaheadQueue>;
TYPED_TEST_SUITE(SimulatorEventQueueTest, Queues);

TYPED_TEST(SimulatorEventQueueTest, PopsInTheOrderOfBefore) {
  std::mt19937_64 rng(7);
  // Few distinct times (many ties, resolved by seq and kRelease), tiny
  // and huge ones, zero and infinity.
  const double times[] = {0.0, std::numeric_limits<double>::denorm_min(), 1e-300, 0.5, 0.5000000000000001,
                          1.0, 3.25, 1e9, std::numeric_limits<double>::max(),
                          std::numeric_limits<double>::infinity()};
  for (int round = 0; round < 20; ++round) {
    TypeParam queue;
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

// What the loop sees ahead is what it will pop next, in that order.
TEST(SimulatorLookaheadQueueTest, AheadShowsTheNextEventsInOrder) {
  std::mt19937_64 rng(11);
  LookaheadQueue queue;
  EXPECT_EQ(queue.ahead(0), nullptr);
  uint64_t seq = 0;
  for (int step = 0; step < 5000; ++step) {
    if (queue.empty() || rng() % 100 < 55) {
      queue.push(Event{static_cast<double>(rng() % 64), seq++, 0, 0});
      continue;
    }
    std::vector<Event> seen;
    for (size_t k = 0; k < LookaheadQueue::kAhead; ++k)
      if (const Event* e = queue.ahead(k)) seen.push_back(*e);
    ASSERT_EQ(seen.size(), std::min(queue.size(), LookaheadQueue::kAhead));
    for (const Event& want : seen) {  // no pushes in between: the pops follow the view
      ASSERT_FALSE(queue.empty());
      EXPECT_EQ(queue.top().seq, want.seq);
      EXPECT_EQ(queue.top().time, want.time);
      queue.pop();
    }
  }
}

}  // namespace
}  // namespace hdmlp::sim
