// Decomposition: the rest of a simulated job, node by node, once the nodes
// share nothing between barriers (engine_state.h; simulator.h;
// docs/simulator.md, "Decomposed loop").
//
// Nodes meet only at barriers. From a barrier where no PFS stream is in
// flight and either every sample's holder copy is complete (and peers read
// those), or every cached copy is filled and complete and no read can go to
// the PFS (Possible), a node's events touch only its own state: a read it
// does not serve itself, and every fill of its own copies still to come, is
// a peer read of a complete copy at its class's fixed rate. Run then takes
// the global queue's events into per-node heaps and runs each node from the
// barrier's release until its consumer arrives at the next one, the nodes
// spread over threads; the barrier takes the maxima over the nodes
// (EventLoop::CompleteBarrier). Events at one instant run in the order the
// event-by-event loop gives them (event_queue.h: kRelease), which depends on
// the node's own events alone, so every result is that loop's, to the bit
// (tests/cpp/simulator_decompose_test.cc).
//
// Thread-safety: Run uses up to `threads` worker threads (a node on one
// thread; at least 32 nodes per thread) and joins them, rethrowing the
// first exception, before it returns. Nothing else is thread-safe.
#ifndef HDMLP_SIM_DECOMPOSITION_H_
#define HDMLP_SIM_DECOMPOSITION_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hdmlp/sim/engine_state.h"
#include "hdmlp/sim/event_loop.h"
#include "hdmlp/sim/reads.h"

namespace hdmlp::sim {

class Decomposition {
 public:
  // `s`, `reads` and `loop` must outlive this.
  Decomposition(EngineState& s, const Reads& reads, EventLoop& loop, int threads)
      : s_(s), reads_(reads), loop_(loop), threads_(threads) {}

  // After the caches are planned (FillPhase::PlanCaches, whose result is
  // `caches_every_read`): whether no read can ever go to the PFS once every
  // copy is filled, because every sample has a holder whose copy peers read
  // (EngineState::holders_cover) or every node caches every sample it reads.
  void FindWhetherNeverPfs(const std::vector<uint8_t>& caches_every_read);
  // Whether, from the barrier at `now` on, the nodes share nothing between
  // barriers.
  bool Possible(double now) const;
  // Runs the rest of the job from the barrier Possible held at.
  void Run();

  int64_t batches() const { return batches_; }  // global batches run decomposed
  int64_t events() const { return events_; }    // events run (or dropped) here

 private:
  // Where every node's copies sit in one class, the same for all, a peer
  // read needs no holder lookup (Reads::Remote).
  void FindPeerClass();
  // Before node i runs on from a barrier: once every copy of the node is
  // complete, its ready times are dropped and its reads from its one class
  // need no lookup (Reads::StagingFetch).
  void SettleNode(size_t i);
  // Runs `f(node)` for every node, spread over the threads (each node on
  // one thread); rethrows the first exception after joining.
  template <typename F>
  void ForEachNode(F&& f);

  EngineState& s_;
  const Reads& reads_;
  EventLoop& loop_;
  const int threads_;
  int64_t batches_ = 0;
  int64_t events_ = 0;
};

}  // namespace hdmlp::sim

#endif  // HDMLP_SIM_DECOMPOSITION_H_
