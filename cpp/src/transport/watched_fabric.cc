#include "hdmlp/transport/watched_fabric.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "hdmlp/env/start_thread.h"

namespace hdmlp {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void ReportAndExit(const std::string& report) {
  std::fprintf(stderr, "%s\n", report.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  ::_exit(70);
}

}  // namespace

class WatchedFabric::Watch {
 public:
  Watch(WatchedFabric* fabric, const char* what, int peer) {
    // Start where this thread's id points, so threads rarely collide.
    const size_t start = std::hash<std::thread::id>()(std::this_thread::get_id()) % kSlots;
    const int64_t now = NowNs();
    for (size_t i = 0; i < kSlots; ++i) {
      Slot& slot = fabric->slots_[(start + i) % kSlots];
      int64_t free = 0;
      if (slot.since_ns.load(std::memory_order_relaxed) == 0 &&
          slot.since_ns.compare_exchange_strong(free, -1, std::memory_order_acquire)) {
        slot.what.store(what, std::memory_order_relaxed);
        slot.peer.store(peer, std::memory_order_relaxed);
        slot.since_ns.store(now, std::memory_order_release);
        slot_ = &slot;
        return;
      }
    }
    // More calls at once than slots: this one goes unwatched.
  }
  ~Watch() {
    if (slot_ != nullptr) slot_->since_ns.store(0, std::memory_order_release);
  }
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

 private:
  Slot* slot_ = nullptr;
};

WatchedFabric::WatchedFabric(Fabric* inner, double limit_s, int my_rank, DescribeRank describe, StuckAction on_stuck)
    : inner_(inner),
      limit_s_(limit_s),
      my_rank_(my_rank),
      describe_(std::move(describe)),
      on_stuck_(on_stuck ? std::move(on_stuck) : StuckAction(ReportAndExit)) {
  watchdog_ = StartThread("hdmlp-watchdog", "MPI watchdog", "the number of jobs running at once",
                          [this] { WatchLoop(); });
}

WatchedFabric::~WatchedFabric() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  watchdog_.join();
}

void WatchedFabric::WatchLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  const auto period = std::chrono::milliseconds(std::clamp<int64_t>(std::llround(limit_s_ * 250), 10, 250));
  while (!stop_cv_.wait_for(lock, period, [this] { return stopping_; })) {
    // The call in flight the longest: under a library's global lock, the
    // others wait behind it, and it names the peer that is gone.
    const int64_t now = NowNs();
    const Slot* oldest = nullptr;
    int64_t oldest_since = 0;
    int stuck = 0;
    for (const Slot& slot : slots_) {
      const int64_t since = slot.since_ns.load(std::memory_order_acquire);
      if (since <= 0 || static_cast<double>(now - since) * 1e-9 <= limit_s_) continue;
      ++stuck;
      if (oldest == nullptr || since < oldest_since) oldest = &slot, oldest_since = since;
    }
    if (oldest == nullptr) continue;
    std::string report = Report(oldest->what.load(std::memory_order_relaxed),
                                oldest->peer.load(std::memory_order_relaxed),
                                static_cast<double>(now - oldest_since) * 1e-9);
    if (stuck > 1) report += " (" + std::to_string(stuck - 1) + " more of its calls wait as long)";
    fired_ = true;
    lock.unlock();  // the action may take long (or never return)
    on_stuck_(report);
    return;  // one report: the process is beyond repair
  }
}

std::string WatchedFabric::Report(const char* what, int peer, double seconds) const {
  char elapsed[32];
  std::snprintf(elapsed, sizeof elapsed, "%.0f", std::floor(seconds));
  char limit[32];
  std::snprintf(limit, sizeof limit, "%g", limit_s_);
  std::string call = what != nullptr ? what : "a call";
  if (peer >= 0) call += " " + describe_(peer);  // `what` ends in "to" or "from"
  return "hdmlp: " + describe_(my_rank_) + ": " + inner_->info().library + " has not returned from " + call +
         " for " + elapsed + " s (timeout_s = " + limit +
         "). Its peer's process or node is probably gone, and a call into MPI cannot be interrupted (MPICH over "
         "libfabric's TCP keeps polling a dead peer while it holds its lock, so every MPI call of this process "
         "waits): ending this process (exit code 70) rather than hang. With Slurm, srun --kill-on-bad-exit=1 "
         "ends the whole job step at once; raise timeout_s if the network is only slow.";
}

int WatchedFabric::Send(FabricHandle comm, int peer, int tag, const void* data, int bytes, FabricHandle* request) {
  Watch watch(this, "a send to", peer);
  return inner_->Send(comm, peer, tag, data, bytes, request);
}

bool WatchedFabric::Probe(FabricHandle comm, int source, int tag, FabricMessage* message) {
  Watch watch(this, source >= 0 ? "a probe for messages from" : "a probe for messages", source);
  return inner_->Probe(comm, source, tag, message);
}

int WatchedFabric::Receive(FabricMessage* message, void* data) {
  Watch watch(this, "a receive from", message->source);
  return inner_->Receive(message, data);
}

bool WatchedFabric::Test(FabricHandle* request) {
  Watch watch(this, "a test of a pending operation", -1);
  return inner_->Test(request);
}

void WatchedFabric::Wait(FabricHandle* request) {
  Watch watch(this, "a wait for a pending operation", -1);
  inner_->Wait(request);
}

void WatchedFabric::Cancel(FabricHandle* request) {
  Watch watch(this, "the cancel of a send", -1);
  inner_->Cancel(request);
}

void WatchedFabric::Release(FabricHandle* request) {
  Watch watch(this, "the release of a send", -1);
  inner_->Release(request);
}

int WatchedFabric::AllGather(FabricHandle comm, const void* mine, int bytes, void* all, FabricHandle* request) {
  Watch watch(this, "the start of an all-gather", -1);
  return inner_->AllGather(comm, mine, bytes, all, request);
}

int WatchedFabric::AllGatherV(FabricHandle comm, const void* mine, int bytes, void* all, const int* counts,
                              const int* displs, FabricHandle* request) {
  Watch watch(this, "the start of an all-gather", -1);
  return inner_->AllGatherV(comm, mine, bytes, all, counts, displs, request);
}

int WatchedFabric::AllToAll(FabricHandle comm, const void* out, int bytes_each, void* in, FabricHandle* request) {
  Watch watch(this, "the start of an all-to-all", -1);
  return inner_->AllToAll(comm, out, bytes_each, in, request);
}

int WatchedFabric::AllToAllV(FabricHandle comm, const void* out, const int* out_counts, const int* out_displs,
                             void* in, const int* in_counts, const int* in_displs, FabricHandle* request) {
  Watch watch(this, "the start of an all-to-all", -1);
  return inner_->AllToAllV(comm, out, out_counts, out_displs, in, in_counts, in_displs, request);
}

}  // namespace hdmlp
