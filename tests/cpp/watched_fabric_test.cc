// WatchedFabric: a library call that does not return within the limit is
// reported once, naming the call, the peer and the time; calls that return
// are never reported; the watchdog joins.
#include "hdmlp/transport/watched_fabric.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "hdmlp/transport/communicator.h"

namespace hdmlp {
namespace {

using namespace std::chrono_literals;

// A fabric whose sends block until released (as MPICH's MPI_Isend to a dead
// rank over libfabric's TCP does); everything else returns at once.
class BlockingSendFabric final : public Fabric {
 public:
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  const FabricInfo& info() const override { return info_; }
  bool Initialized() override { return true; }
  bool Finalized() override { return false; }
  int InitThreadMultiple() override { return 3; }
  int ThreadLevel() override { return 3; }
  int WorldRank() override { return 0; }
  void AbortWorld(int) override {}
  void Finalize() override {}
  std::string ErrorText(int) override { return ""; }
  void DupWorld(FabricHandle* comm, FabricHandle* request) override { *comm = 1, *request = 0; }
  void RankAndSize(FabricHandle, int* rank, int* size) override { *rank = 0, *size = 3; }
  void ReturnErrors(FabricHandle) override {}
  int Send(FabricHandle, int, int, const void*, int, FabricHandle* request) override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return released_; });
    *request = 0;
    return 0;
  }
  bool Probe(FabricHandle, int, int, FabricMessage*) override { return false; }
  int Receive(FabricMessage*, void*) override { return 0; }
  bool Test(FabricHandle* request) override { return (*request = 0, true); }
  void Wait(FabricHandle*) override {}
  void Cancel(FabricHandle*) override {}
  void Release(FabricHandle*) override {}
  int AllGather(FabricHandle, const void*, int, void*, FabricHandle*) override { return 0; }
  int AllGatherV(FabricHandle, const void*, int, void*, const int*, const int*, FabricHandle*) override { return 0; }
  int AllToAll(FabricHandle, const void*, int, void*, FabricHandle*) override { return 0; }
  int AllToAllV(FabricHandle, const void*, const int*, const int*, void*, const int*, const int*,
                FabricHandle*) override {
    return 0;
  }

 private:
  FabricInfo info_{"MPICH Version: test", "mpich", "", "", ""};
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
};

struct Reports {
  std::mutex mu;
  std::vector<std::string> seen;
  std::chrono::steady_clock::time_point when;
  void Add(const std::string& report) {
    std::lock_guard<std::mutex> lock(mu);
    if (seen.empty()) when = std::chrono::steady_clock::now();
    seen.push_back(report);
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu);
    return seen.size();
  }
};

std::string Describe(int rank) { return "rank " + std::to_string(rank) + " on node" + std::to_string(rank + 1); }

TEST(WatchedFabricTest, ASendThatDoesNotReturnIsReportedOnceNamingThePeerAndTheLimit) {
  BlockingSendFabric inner;
  Reports reports;
  const auto start = std::chrono::steady_clock::now();
  {
    WatchedFabric fabric(&inner, 0.3, 0, Describe, [&reports](const std::string& r) { reports.Add(r); });
    FabricHandle request = 1;
    std::thread sender([&] { fabric.Send(1, 2, 7, nullptr, 0, &request); });
    const auto deadline = start + 5s;
    while (reports.count() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
    std::this_thread::sleep_for(600ms);  // a second report would come by now
    EXPECT_TRUE(fabric.fired());
    inner.Release();
    sender.join();
  }
  ASSERT_EQ(reports.count(), 1u);
  const std::string& r = reports.seen[0];
  EXPECT_NE(r.find("hdmlp: rank 0 on node1: MPICH Version: test has not returned from a send to rank 2 on node3"),
            std::string::npos) << r;
  EXPECT_NE(r.find("(timeout_s = 0.3)"), std::string::npos) << r;
  EXPECT_NE(r.find("srun --kill-on-bad-exit=1"), std::string::npos) << r;
  const double after = std::chrono::duration<double>(reports.when - start).count();
  EXPECT_GE(after, 0.3);
  EXPECT_LT(after, 4.0);  // generous: CI machines are loaded
}

TEST(WatchedFabricTest, CallsThatReturnAreNeverReported) {
  BlockingSendFabric inner;
  inner.Release();  // sends return at once
  Reports reports;
  {
    WatchedFabric fabric(&inner, 2.0, 0, Describe, [&reports](const std::string& r) { reports.Add(r); });
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&fabric] {
        const auto end = std::chrono::steady_clock::now() + 300ms;
        FabricMessage message;
        while (std::chrono::steady_clock::now() < end) {
          FabricHandle request = 1;
          fabric.Send(1, 1, 7, nullptr, 0, &request);
          fabric.Probe(1, Fabric::kAnySource, 7, &message);
          fabric.Test(&request);
        }
      });
    }
    for (auto& t : threads) t.join();
    std::this_thread::sleep_for(150ms);
    EXPECT_FALSE(fabric.fired());
  }
  EXPECT_EQ(reports.count(), 0u);
}

TEST(WatchedFabricTest, ACommunicatorWithPeersWatchesItsCalls) {
  BlockingSendFabric inner;  // 3 ranks
  const auto comm = Communicator::Over(&inner, 1, 30);
  EXPECT_NE(comm->fabric(), static_cast<Fabric*>(&inner));
  EXPECT_EQ(comm->fabric()->info().library, "MPICH Version: test");
  inner.Release();
}

}  // namespace
}  // namespace hdmlp
