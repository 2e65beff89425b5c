// The prefetching policies the simulator compares (seed 001's table), each
// reduced to the few traits that decide how it moves samples.
//
// A policy says which samples each node caches and where (CacheRule), whether
// prefetch threads fill the caches ahead of use or only reads on the way do,
// whether peers' caches are read, whether training waits for a preload, and
// how far the staging buffer may read ahead. docs/simulator.md describes each
// one with the model's formulas. Thread-safety: plain constant data.
#ifndef HDMLP_SIM_POLICY_H_
#define HDMLP_SIM_POLICY_H_

#include <string>
#include <vector>

#include "hdmlp/plan/access_plan.h"

namespace hdmlp::sim {

enum class Policy {
  kLowerBound,           // every sample ready at once: only compute and barriers
  kHdmlp,                // this system: the runtime's placement, prefetch threads, peers
  kNaive,                // no prefetching: the consumer reads each sample when it needs it
  kStagingPool,          // only the staging buffer, filled ahead in access order from the PFS
  kDeepioOrdered,        // DeepIO: epoch-0 shard in memory, peers over RDMA, misses from the PFS
  kDeepioOpportunistic,  // DeepIO entropy-aware: misses replaced by locally cached samples
  kLbannDynamic,         // LBANN data store: epoch-0 reads cached, later epochs from owners
  kLbannPreloading,      // LBANN data store, preloaded before training
  kParallelStaging,      // shards staged to node-local storage first, then local shuffling
  kLocalityAware,        // Yang & Cong: each global batch reassigned to the nodes caching it
};

enum class CacheRule {
  kNone,            // no caches
  kPlacement,       // the runtime's PlanPlacement (frequency order, first fit)
  kEpochZeroMemory, // the node's epoch-0 samples, in read order, into its memory classes
  kShardAll,        // the node's epoch-0 samples, in read order, into all its classes
  kShardStorage,    // the same into its node-local storage: the non-memory classes (all if none)
};

struct PolicyTraits {
  CacheRule cache = CacheRule::kNone;
  DistributionScheme scheme = DistributionScheme::kUniform;
  bool prefetch_threads = false;   // classes' threads fill them ahead of use
  bool fill_on_the_way = false;    // a cached sample read before it is filled is stored then
  bool peers = false;              // other nodes' caches are read over b_c
  bool runtime_sources = false;    // choose sources with the runtime's SourceModel (hdmlp)
  bool preload = false;            // training starts when every cache is filled
  bool on_demand = false;          // a read starts only when the consumer waits for it
  bool needs_full_fit = false;     // cache only if every node's shard fits (else no cache)
  bool opportunistic = false;      // after epoch 0, misses are replaced by cached samples
  bool locality_batches = false;   // global batches reassigned to the caching nodes
};

const std::vector<Policy>& AllPolicies();
const char* PolicyName(Policy policy);
// Accepts the names PolicyName gives; throws InvalidArgumentError listing them.
Policy ParsePolicy(const std::string& name);
PolicyTraits TraitsOf(Policy policy);

}  // namespace hdmlp::sim

#endif  // HDMLP_SIM_POLICY_H_
