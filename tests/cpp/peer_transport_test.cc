// FetchPollPause: how often a Fetch waiting for a peer's reply looks again.
// The transport's protocol between ranks, over an in-process Fabric (no MPI):
// hits and misses, a peer's abort, a lost peer, a peer that is gone.
#include "hdmlp/transport/peer_transport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "loopback_fabric.h"

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

// Rank r serves the samples s with s % 2 == r, as "sample <s> from rank <r>".
PeerTransport::ServeFn ServeOwnHalf(int rank) {
  return [rank](int64_t sample, SampleBuffer* out) {
    if (sample % 2 != rank) return false;
    const std::string text = "sample " + std::to_string(sample) + " from rank " + std::to_string(rank);
    *out = SampleBuffer::Allocate(static_cast<int64_t>(text.size()));
    std::memcpy(out->data.get(), text.data(), text.size());
    return true;
  };
}

std::string Text(const SampleBuffer& b) { return std::string(reinterpret_cast<const char*>(b.data.get()), b.size); }

struct TwoRanks {
  explicit TwoRanks(double timeout_s, double linger_s = 2)
      : comm0(Communicator::Over(&fabric, LoopbackFabric::CommOf(0), timeout_s)),
        comm1(Communicator::Over(&fabric, LoopbackFabric::CommOf(1), timeout_s)),
        t0(comm0.get(), 1, 2, ServeOwnHalf(0), linger_s),
        t1(comm1.get(), 2, 2, ServeOwnHalf(1), linger_s) {}
  LoopbackFabric fabric{2};
  std::unique_ptr<Communicator> comm0, comm1;
  PeerTransport t0, t1;
};

TEST(PeerTransportOverAFabricTest, PeersServeTheirSamplesAndSayNotHereForOthers) {
  TwoRanks ranks(10);
  ranks.t0.Start();
  ranks.t1.Start();
  // Two client slots of rank 0 ask at once, as two staging workers do.
  std::vector<std::thread> clients;
  std::vector<int> wrong(2, 0);
  for (int slot = 0; slot < 2; ++slot) {
    clients.emplace_back([&, slot] {
      for (int64_t s = slot; s < 200; s += 2) {
        SampleBuffer out;
        const bool hit = ranks.t0.Fetch(1, s, slot, &out);
        if (hit != (s % 2 == 1) || (hit && Text(out) != "sample " + std::to_string(s) + " from rank 1")) {
          ++wrong[static_cast<size_t>(slot)];
        }
      }
    });
  }
  SampleBuffer out;
  EXPECT_TRUE(ranks.t1.Fetch(0, 42, 0, &out));  // the other way at the same time
  EXPECT_EQ(Text(out), "sample 42 from rank 0");
  for (auto& t : clients) t.join();
  EXPECT_EQ(wrong, std::vector<int>({0, 0}));
  EXPECT_EQ(ranks.t1.requests_served(), 100);  // the odd samples of 0..199
  EXPECT_EQ(ranks.t0.requests_served(), 1);
  // Both close at once: each lingers until the other said bye, not for linger_s.
  const auto start = std::chrono::steady_clock::now();
  std::thread close1([&] { ranks.t1.Close(); });
  ranks.t0.Close();
  close1.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500));
}

TEST(PeerTransportOverAFabricTest, APeersAbortReachesTheOtherRank) {
  TwoRanks ranks(10, 0.3);
  ranks.t0.Start();
  ranks.t1.Start();
  ranks.t1.Abort("rank 1 stopped: a bad sample");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (ranks.t0.PeerAbortMessage().empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(ranks.t0.PeerAbortMessage(), "rank 1 stopped: a bad sample");
  EXPECT_TRUE(Communicator::PeerFailed());
}

TEST(PeerTransportOverAFabricTest, APeerThatDoesNotAnswerIsLostAfterOneTimeout) {
  TwoRanks ranks(1, 0.2);
  ranks.t0.Start();  // rank 1 never serves
  SampleBuffer out;
  auto start = std::chrono::steady_clock::now();
  try {
    ranks.t0.Fetch(1, 7, 0, &out);
    FAIL() << "no error";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 did not answer rank 0's request for sample 7 within 1 s"),
              std::string::npos)
        << e.what();
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(900));
  start = std::chrono::steady_clock::now();
  EXPECT_THROW(ranks.t0.Fetch(1, 9, 1, &out), IOError);  // at once: the peer is lost for good
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(300));
  EXPECT_NE(ranks.t0.PeerAbortMessage().find("rank 1 did not answer"), std::string::npos);
}

TEST(PeerTransportOverAFabricTest, RequestsToARankThatIsGoneFallBackAtOnce) {
  TwoRanks ranks(10, 0.2);
  ranks.t0.Start();
  ranks.t1.Start();
  ranks.t1.Close();  // lingers 0.2 s for rank 0's bye, then says gone
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!ranks.t0.PeerLeft(1) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(ranks.t0.PeerLeft(1));
  SampleBuffer out;
  EXPECT_FALSE(ranks.t0.Fetch(1, 3, 0, &out));  // "not here": the caller reads the PFS
}

}  // namespace
}  // namespace hdmlp
