// WatchedFabric: a Fabric whose calls that never return end the process with
// an error, instead of a hang.
//
// hdmlp bounds every wait of its own by timeout_s, but it cannot interrupt a
// call into the message-passing library. One such call can block for ever:
// MPICH over libfabric's TCP provider, asked to send to a rank whose node
// died, polls for it inside MPI_Isend while it holds MPICH's global lock, so
// every other MPI call of the process waits behind it (docs/cluster.md). A
// job that nothing else stops (srun --kill-on-bad-exit=0) would hang.
//
// WatchedFabric forwards every call to the library's Fabric and notes, for
// each call in flight, when it began and what it is. A watchdog thread looks
// every quarter of a second; a call still in flight after `limit_s` (the
// communicator's timeout_s: no call of a working library takes that long, as
// every one is nonblocking or a test) is reported once through `on_stuck`.
// The default action writes the report to stderr and ends the process
// (exit code 70, EX_SOFTWARE): the library's state cannot be recovered, and
// finalising or aborting MPI would wait for the same lock. Python's resource
// tracker removes the shared memory of hdmlp's Python workers after it.
//
// Cost: two atomic stores and a clock read per call.
// Thread-safety: as Fabric; the watchdog is joined by the destructor.
#ifndef HDMLP_TRANSPORT_WATCHED_FABRIC_H_
#define HDMLP_TRANSPORT_WATCHED_FABRIC_H_

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "hdmlp/transport/fabric.h"

namespace hdmlp {

class WatchedFabric final : public Fabric {
 public:
  // "rank 2 on node3" for a rank of the watched communicator.
  using DescribeRank = std::function<std::string(int rank)>;
  // Gets the whole report; the default writes it to stderr and _exits(70).
  using StuckAction = std::function<void(const std::string& report)>;

  WatchedFabric(Fabric* inner, double limit_s, int my_rank, DescribeRank describe, StuckAction on_stuck = {});
  ~WatchedFabric() override;
  WatchedFabric(const WatchedFabric&) = delete;
  WatchedFabric& operator=(const WatchedFabric&) = delete;

  // True once a call was reported stuck.
  bool fired() const { return fired_.load(); }

  const FabricInfo& info() const override { return inner_->info(); }
  bool Initialized() override { return inner_->Initialized(); }
  bool Finalized() override { return inner_->Finalized(); }
  int InitThreadMultiple() override { return inner_->InitThreadMultiple(); }
  int ThreadLevel() override { return inner_->ThreadLevel(); }
  int WorldRank() override { return inner_->WorldRank(); }
  void AbortWorld(int code) override { inner_->AbortWorld(code); }
  void Finalize() override { inner_->Finalize(); }
  std::string ErrorText(int code) override { return inner_->ErrorText(code); }
  void DupWorld(FabricHandle* comm, FabricHandle* request) override { inner_->DupWorld(comm, request); }
  void RankAndSize(FabricHandle comm, int* rank, int* size) override { inner_->RankAndSize(comm, rank, size); }
  void ReturnErrors(FabricHandle comm) override { inner_->ReturnErrors(comm); }

  int Send(FabricHandle comm, int peer, int tag, const void* data, int bytes, FabricHandle* request) override;
  bool Probe(FabricHandle comm, int source, int tag, FabricMessage* message) override;
  int Receive(FabricMessage* message, void* data) override;
  bool Test(FabricHandle* request) override;
  void Wait(FabricHandle* request) override;
  void Cancel(FabricHandle* request) override;
  void Release(FabricHandle* request) override;
  int AllGather(FabricHandle comm, const void* mine, int bytes, void* all, FabricHandle* request) override;
  int AllGatherV(FabricHandle comm, const void* mine, int bytes, void* all, const int* counts, const int* displs,
                 FabricHandle* request) override;
  int AllToAll(FabricHandle comm, const void* out, int bytes_each, void* in, FabricHandle* request) override;
  int AllToAllV(FabricHandle comm, const void* out, const int* out_counts, const int* out_displs, void* in,
                const int* in_counts, const int* in_displs, FabricHandle* request) override;

 private:
  // One call in flight: when it began (steady clock, ns; 0: the slot is
  // free), what it is and which rank it concerns (-1: none, or any).
  struct Slot {
    std::atomic<int64_t> since_ns{0};
    std::atomic<const char*> what{nullptr};
    std::atomic<int> peer{-1};
  };
  class Watch;  // takes a slot for one call, frees it at the end of its scope
  static constexpr size_t kSlots = 256;

  void WatchLoop();
  std::string Report(const char* what, int peer, double seconds) const;

  Fabric* const inner_;
  const double limit_s_;
  const int my_rank_;
  const DescribeRank describe_;
  const StuckAction on_stuck_;
  std::array<Slot, kSlots> slots_;
  std::atomic<bool> fired_{false};
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread watchdog_;
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSPORT_WATCHED_FABRIC_H_
