// EventLoop: the simulated nodes' staging workers, consumers and barriers,
// and the loop that runs every event in time order (engine_state.h;
// simulator.h).
//
// Each node's staging workers claim its items strictly in plan order while
// the bytes claimed and not yet consumed fit in class 0 (or, on demand,
// one item when the consumer waits for it) and fetch each where Reads says;
// its consumer takes the items in order, computes s_k / c on each, and after
// its share of a global batch waits at the barrier. Once every node has
// arrived, the barrier (CompleteBarrier) counts the slowest node's compute
// and releases the consumers for the next batch at the latest arrival.
//
// The loop pops the global queue (a LookaheadQueue of every node's threads)
// and, before each event, asks the CPU for what the next ones will read
// (hints with no effect on any result): nodes take turns at random, so
// without them most of an event's reads miss the CPU's caches. It stops at
// every barrier that releases the consumers, so that Simulate() can hand
// the rest of the job to the decomposed loop (decomposition.h), which runs
// the same events (Dispatch) node by node.
//
// Thread-safety: none. In the decomposed loop, Dispatch runs each node's
// events on one of several threads; an event then touches only its node's
// state, and the locality-aware assignment (SampleOf) is shared under a lock.
#ifndef HDMLP_SIM_EVENT_LOOP_H_
#define HDMLP_SIM_EVENT_LOOP_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "hdmlp/sim/engine_state.h"
#include "hdmlp/sim/fill_phase.h"
#include "hdmlp/sim/reads.h"

namespace hdmlp::sim {

class EventLoop {
 public:
  // `s`, `reads` and `fills` must outlive this.
  EventLoop(EngineState& s, Reads& reads, FillPhase& fills) : s_(s), reads_(reads), fills_(fills) {}

  // Lays out every node's threads (staging workers, then the prefetch
  // threads of classes 1, 2, ...) and sets each node's items; byte counts by
  // `sources` sources (kFromPfs, ...).
  void SetUp(size_t sources);
  // Runs the global queue's events in time order until a barrier has
  // released the consumers for the next global batch (true; Run again to go
  // on) or no event is left (false).
  bool RunToNextBarrier();
  // Runs one event, in either loop.
  void Dispatch(const Event& e);
  // Every node arrived at the barrier, the last at `time`, the slowest of
  // them computing for `compute` seconds: the global batch ends, and the
  // consumers are released for the next one at `time`.
  void CompleteBarrier(double time, double compute);

  int64_t events() const { return events_; }  // events the global queue ran
  int64_t global_batch() const { return global_batch_; }  // global batches completed
  double job_end() const { return job_end_; }              // the last barrier
  double compute_seconds() const { return compute_seconds_; }
  const std::vector<double>& epoch_seconds() const { return epoch_seconds_; }

 private:
  // Defined in event_loop.cc, the one file that calls them (HDMLP_SIM_HOT).
  HDMLP_SIM_HOT void StagingWorker(uint32_t node, uint32_t thread, double now);
  HDMLP_SIM_HOT void Consumer(uint32_t node, double now);
  // The sample of node's next claim (next_claim < total_items).
  HDMLP_SIM_HOT int64_t NextClaimSample(uint32_t node);
  // The barrier after every global batch.
  void Arrive(NodeState& n, double now);
  // Wakes one idle staging worker if it could claim the next item now.
  HDMLP_SIM_HOT void WakeIdle(NodeState& n, uint32_t node, double now);
  // The sample of `item` (over all epochs) of `node`.
  int64_t SampleOf(int node, int64_t item);
  // locality_aware: epoch e's global batches reassigned to the caching nodes.
  const std::vector<uint32_t>& Assignment(int epoch);

  EngineState& s_;
  Reads& reads_;
  FillPhase& fills_;
  std::map<int, std::vector<uint32_t>> assignments_;  // by epoch (locality_batches)
  std::mutex assignments_mu_;
  int64_t events_ = 0;
  bool released_ = false;  // a barrier released the consumers (RunToNextBarrier returns)
  // The barrier being reached: nodes arrived, and the maxima of their
  // arrival times and computes.
  int barrier_count_ = 0;
  double barrier_time_ = 0;
  double barrier_compute_ = 0;
  double compute_seconds_ = 0;
  int64_t global_batch_ = 0;
  double epoch_start_ = 0;
  double job_end_ = 0;
  std::vector<double> epoch_seconds_;
};

}  // namespace hdmlp::sim

#endif  // HDMLP_SIM_EVENT_LOOP_H_
