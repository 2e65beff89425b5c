// Discrete-event simulation of a training job's data loading (issue #7).
//
// Simulate() plays a whole job -- every sample access of every node in every
// epoch -- under one policy (policy.h) on a machine described by the
// runtime's Config, with the times of the performance model (model.h). The
// order of accesses is the runtime's AccessPlan and hdmlp's caches are the
// runtime's PlanPlacement, so the prediction follows what the runtime does.
//
// Each node has: staging workers (threads of class 0) that claim the node's
// items strictly in plan order while the bytes claimed but not yet consumed
// fit in class 0's capacity, and fetch each from the source the policy
// picks; prefetch threads (p_j per class) that fill class j in first-read
// order; and a consumer that takes items in order, computes s_k / c on each,
// and after each local batch waits at a barrier for every node. A read from
// a class or a peer runs at a rate fixed when it starts; PFS reads share the
// PFS at every instant in the physical reading (each stream's rate, and so
// its remaining time, follows every change in the streams reading: the
// aggregate never exceeds t(g)), and keep the rate of their start in the
// thesis reading, as the thesis's simulator does.
//
// Nodes meet only at barriers. Once none shares anything with another
// (typically within the first epoch or two), each node's events run on
// their own from one barrier to the next, the nodes spread over threads,
// with every result the event-by-event loop's (decomposition.h,
// SimulationOptions::decompose). The engine's parts, each with its contract:
// engine_state.h (what they share), fill_phase.h, reads.h, event_loop.h and
// decomposition.h.
//
// Cost: O(E*F) events in a 4-ary heap of O(N * threads) entries
// (event_queue.h), plus the cache plans (cache_plan.h: PlanPlacement,
// O(E*F/N) per node, spread over `threads`). Memory: about 6 bytes per
// cached (node, sample) pair (node_cache.h), 8 bytes per sample, 16 bytes
// per staging-buffer item in flight. The PFS's sharing model is
// pfs_sharing.h. docs/simulator.md has numbers.
//
// Thread-safety: reentrant; Simulate uses worker threads for planning and
// for the decomposed loop's nodes, and joins them before it returns.
#ifndef HDMLP_SIM_SIMULATOR_H_
#define HDMLP_SIM_SIMULATOR_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hdmlp/config/config.h"
#include "hdmlp/sim/model.h"
#include "hdmlp/sim/policy.h"

namespace hdmlp::sim {

// Artifacts of the thesis's own simulator (alchemy315/NoPFS sim/) that change
// a number of its Table 5.2; honoured only with Reading::kThesis, each on by
// default there (docs/simulator.md says what each changes and why).
struct ThesisArtifacts {
  // A class's reader gets the whole r_j(p_j), not r_j(p_j) / p_j (Eq. 3.7):
  // its _get_speed(level) returns storage_classes[level][p[level]].
  bool full_class_rate_per_thread = true;
  // locality_aware never reassigns a sample: its `get_by_id(...) is not None`
  // test is always true, so the plan's batches stay and misses come from peers.
  bool locality_never_reorders = true;
  // parallel_staging: after its own shard, node i copies the shards of nodes
  // 0..i-1 from their storage into its own until full, before training (the
  // test `node_id*fbs <= i < (i+1)*fbs` skips every sample from its own shard on).
  bool parallel_staging_copies_lower_shards = true;
};

struct SimulationOptions {
  int threads = 0;  // planning threads (and the decomposed loop's); <= 0: the hardware's, at most 8
  // From the first barrier where the nodes share nothing until the next
  // one (no PFS stream in flight or to come, and every copy peers read
  // complete, or every cached copy filled and complete), run each node's
  // events on their own between barriers, on `threads` threads. The results
  // are the same as the event-by-event loop's (false), only faster.
  bool decompose = true;
  // Record the PFS's aggregate rate at every change (physical reading):
  // SimulationResult::pfs_trace.
  bool trace_pfs = false;
  Reading reading = Reading::kPhysical;  // model.h: kPhysical (default) or kThesis
  ThesisArtifacts artifacts;             // used only with Reading::kThesis
};

// The traits `policy` runs with under `options` (TraitsOf, adjusted for the
// thesis reading: DeepIO, LBANN preloading and locality_aware preload their
// caches with the prefetch threads before training; parallel_staging stages
// into node-local storage, the non-memory classes).
PolicyTraits EffectiveTraits(Policy policy, const SimulationOptions& options);

// From `time` until the next point, `streams` PFS reads are in flight and
// read `aggregate_mbps` MB/s together.
struct PfsTracePoint {
  double time = 0;
  int streams = 0;
  double aggregate_mbps = 0;
};

struct SimulationResult {
  std::string policy;
  double seconds = 0;          // the whole job: the last barrier
  double stall_seconds = 0;    // seconds - compute_seconds: time not explained by compute
  double compute_seconds = 0;  // sum over global batches of the slowest node's compute
  double startup_seconds = 0;  // preload before the first batch (preloading policies)
  std::vector<double> epoch_seconds;  // per epoch, barrier to barrier (epoch 0 from time 0)
  // Bytes the consumers received, by where the staging workers got them:
  // "pfs", "peer", a local class's name ("memory", "filesystem", ...), or
  // "ready" (lower_bound). Sums to the dataset's bytes times the epochs.
  std::vector<std::pair<std::string, int64_t>> bytes;
  int64_t pfs_read_bytes = 0;  // everything read from the PFS, prefetching included
  int64_t cached_samples = 0;  // (node, sample) copies the policy planned to cache
  int64_t events = 0;          // events processed (a cost measure)
  int64_t decomposed_batches = 0;  // global batches run decomposed (SimulationOptions::decompose)
  int64_t decomposed_unfilled = 0;  // cached copies whose fill had not started when it decomposed
  double decomposed_seconds = 0;   // wall time of the decomposed loop (part of simulation_seconds)
  std::vector<PfsTracePoint> pfs_trace;  // with SimulationOptions::trace_pfs
  double planning_seconds = 0; // wall time spent planning caches
  double simulation_seconds = 0;  // wall time of the event loop
};

// Throws InvalidArgumentError for a bad workload (ValidateWorkload).
SimulationResult Simulate(const Config& config, const Workload& workload, Policy policy,
                          const SimulationOptions& options = {});

}  // namespace hdmlp::sim

#endif  // HDMLP_SIM_SIMULATOR_H_
