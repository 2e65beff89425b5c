// FetchPollPause: how often a Fetch waiting for a peer's reply looks again.
#include "hdmlp/transport/peer_transport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace hdmlp {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(PeerTransportFetchPollPauseTest, LooksEvery50UsWhileTheReplyIsQuick) {
  EXPECT_EQ(FetchPollPause(microseconds(0)), microseconds(50));
  EXPECT_EQ(FetchPollPause(microseconds(400)), microseconds(50));
  EXPECT_EQ(FetchPollPause(milliseconds(1)), microseconds(50));
}

TEST(PeerTransportFetchPollPauseTest, BacksOffToATwentiethOfTheWaitAtMostOneMillisecond) {
  EXPECT_EQ(FetchPollPause(milliseconds(2)), microseconds(100));
  EXPECT_EQ(FetchPollPause(milliseconds(10)), microseconds(500));
  EXPECT_EQ(FetchPollPause(milliseconds(20)), microseconds(1000));
  EXPECT_EQ(FetchPollPause(seconds(30)), microseconds(1000));
  // Never longer than a twentieth of the wait, so a slow reply is seen at most 5% late (past the
  // first millisecond), and never shorter than the quick pause.
  for (int64_t us = 0; us <= 100000; us += 137) {
    const microseconds pause = FetchPollPause(microseconds(us));
    EXPECT_GE(pause, microseconds(50)) << us;
    EXPECT_LE(pause, microseconds(1000)) << us;
    if (us > 1000) EXPECT_LE(pause.count(), std::max<int64_t>(50, us / 20)) << us;
  }
}

}  // namespace
}  // namespace hdmlp
