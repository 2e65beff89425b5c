// CachePlan: what each simulated node caches, and where its peers find
// each sample (simulator.h). Part of the simulator's set-up: it plans every
// node's classes before the event loop starts.
//
// hdmlp (CacheRule::kPlacement) caches what the runtime's PlanPlacement
// places, filled in order of first read (the thesis reading: most-read
// first, as the thesis's FrequencyPrefetcher). The baselines cache the
// node's epoch-0 samples in read order, first fit into the classes the
// policy uses (parallel_staging in the thesis reading then copies lower
// nodes' shards). With peers, each sample's holder is its epoch-0 reader
// where that node caches it, else the lowest node that does, as the
// runtime's PFS read rule.
//
// Cost: PlanPlacement per node, O(E*F/N) each, spread over `threads`
// threads; NodeCache's memory (node_cache.h) plus 8 bytes per sample for
// the holders.
//
// Thread-safety: reentrant; uses `threads` worker threads, joined before
// it returns.
#ifndef HDMLP_SIM_CACHE_PLAN_H_
#define HDMLP_SIM_CACHE_PLAN_H_

#include <cstdint>
#include <vector>

#include "hdmlp/plan/access_plan.h"
#include "hdmlp/sim/model.h"
#include "hdmlp/sim/node_cache.h"
#include "hdmlp/sim/policy.h"
#include "hdmlp/sim/simulator.h"

namespace hdmlp::sim {

struct CachePlan {
  std::vector<NodeCache> caches;            // per node (all empty for CacheRule::kNone)
  std::vector<uint8_t> caches_every_read;   // per node: it caches every sample it reads in the job
  // Policies with peers or locality batches: per sample, the node whose
  // copy peers read (-1: none) and the copy's index in that node's cache.
  std::vector<int32_t> holder;
  std::vector<uint32_t> holder_index;
};

// `traits`: EffectiveTraits(policy, options). The caches' arrays go into
// `memory` (null: operator new). Throws what PlanPlacement throws.
CachePlan PlanCaches(const AccessPlan& plan, const Workload& w, const PolicyTraits& traits,
                     const PerformanceModel& model, const SimulationOptions& options, int threads,
                     SimMemory* memory = nullptr);

}  // namespace hdmlp::sim

#endif  // HDMLP_SIM_CACHE_PLAN_H_
