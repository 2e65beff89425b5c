// FillPhase: what every simulated node caches, and the prefetch threads
// that fill it (engine_state.h; simulator.h).
//
// PlanCaches asks cache_plan.h for every node's cached copies, each in one
// storage class j >= 1, and each sample's holder (the copy peers read).
// Then p_j prefetch threads per class fill class j in its fill order (first
// read first, or the thesis's most-read first): each takes the next copy
// not yet started, reads the sample from a peer's copy or the PFS (Reads),
// and stores it at the class's write rate. A copy a staging worker filled
// on the way, or a peer filled on the spot, is skipped. With a preloading
// policy (DeepIO, LBANN preloading, locality-aware in the thesis reading)
// training starts only when every prefetch thread has run out of copies;
// otherwise it starts at time 0, alongside the fills.
//
// In a large job this is where the event loop spends most of its time
// (docs/simulator.md, "Cost and scale": about 100 M fills at 1024 nodes), so
// a prefetch thread asks the CPU for its class's next fills' lookups and
// copy states a few fills ahead (hints only: no result depends on them).
//
// Thread-safety: none. In the decomposed loop each node's prefetch threads
// run on the node's thread and write only its own copies.
#ifndef HDMLP_SIM_FILL_PHASE_H_
#define HDMLP_SIM_FILL_PHASE_H_

#include <cstdint>
#include <vector>

#include "hdmlp/sim/engine_state.h"
#include "hdmlp/sim/reads.h"

namespace hdmlp::sim {

class FillPhase {
 public:
  // `s` and `reads` must outlive this.
  FillPhase(EngineState& s, Reads& reads) : s_(s), reads_(reads) {}

  // Plans every node's caches and the holders into the state (cache_plan.h),
  // on `threads` threads. Returns, per node, whether it caches every sample
  // it reads in the job.
  std::vector<uint8_t> PlanCaches(int threads);
  // Once the threads are laid out: each node's fill cursors, the first event
  // of every prefetch thread with copies to fill, and, unless the policy
  // preloads them, the start of training.
  void SetUp();
  // Prefetch thread `thread` of `node` at `now`: its last fill (if any) is
  // complete; it starts the next.
  HDMLP_SIM_HOT void PrefetchThread(uint32_t node, uint32_t thread, double now);

  // When training started: after the preload, or 0.
  double startup() const { return startup_; }

 private:
  // How far ahead a prefetch thread asks for its class's next fills'
  // lookups, and their copies' state.
  static constexpr uint32_t kFillLookupAhead = 8;
  static constexpr uint32_t kFillStateAhead = 4;

  // Every node's staging workers and consumer start at `now`.
  void StartTraining(double now);

  EngineState& s_;
  Reads& reads_;
  int preloading_threads_ = 0;  // prefetch threads with copies still to fill (preloading policies)
  double startup_ = 0;
};

// Implementation details follow: the event loop's hot path (HDMLP_SIM_HOT).

void FillPhase::PrefetchThread(uint32_t node, uint32_t thread, double now) {
  NodeState& n = s_.nodes[node];
  reads_.EndRead(node, thread);
  NodeCache& cache = s_.caches[node];
  const int j = s_.thread_class[thread];
  uint32_t& cursor = n.fill_cursor[static_cast<size_t>(j)];
  const uint32_t end = cache.class_begin(static_cast<size_t>(j) + 1);
  size_t idx = 0;  // the copy at the cursor
  for (; cursor < end; ++cursor) {
    idx = static_cast<size_t>(cache.Find(cache.FillSample(cursor)));
    if (!cache.Started(idx)) break;
  }
  if (cursor >= end) {
    if (s_.traits.preload && --preloading_threads_ == 0) StartTraining(now);
    return;
  }
  const bool copy = cursor >= cache.copy_begin(static_cast<size_t>(j));
  const int64_t sample = cache.FillSample(cursor++);
  const int64_t size = s_.w.sizes[static_cast<size_t>(sample)];
  // The class's next fills (whichever thread takes them): their lookups,
  // and the copies' state of nearer ones (hints).
  if (cursor + kFillLookupAhead < end) s_.PrefetchSample(node, cache.FillSample(cursor + kFillLookupAhead), true);
  if (cursor + kFillStateAhead < end) {
    const int64_t later = cache.Find(cache.FillSample(cursor + kFillStateAhead));
    if (later >= 0) cache.PrefetchCopy(static_cast<size_t>(later));
  }
  // A copy of a peer's staged sample comes from its class j over b_c.
  const Fetch fetch = copy ? Fetch{TransferSeconds(size, s_.peer_mbps[static_cast<size_t>(j)]), kFromPeer}
                           : reads_.Remote(static_cast<int>(node), thread, sample, size, now);
  const double store = s_.Store(size, j);
  if (fetch.job < 0) {
    const double seconds = fetch.seconds + store;
    reads_.SetReady(node, cache, idx, sample, now + seconds, now);
    s_.Push(now + seconds, node, thread);
    return;
  }
  reads_.SetReadyAfter(node, cache, idx, sample, fetch, store, now);
  reads_.When(fetch, Dependent{Dependent::kThreadEvent, node, thread, store}, now);
}

}  // namespace hdmlp::sim

#endif  // HDMLP_SIM_FILL_PHASE_H_
