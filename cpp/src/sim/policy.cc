#include "hdmlp/sim/policy.h"

#include "hdmlp/errors.h"

namespace hdmlp::sim {

const std::vector<Policy>& AllPolicies() {
  static const std::vector<Policy> all = {
      Policy::kLowerBound,      Policy::kHdmlp,           Policy::kNaive,
      Policy::kStagingPool,     Policy::kDeepioOrdered,   Policy::kDeepioOpportunistic,
      Policy::kLbannDynamic,    Policy::kLbannPreloading, Policy::kParallelStaging,
      Policy::kLocalityAware};
  return all;
}

const char* PolicyName(Policy policy) {
  switch (policy) {
    case Policy::kLowerBound: return "lower_bound";
    case Policy::kHdmlp: return "hdmlp";
    case Policy::kNaive: return "naive";
    case Policy::kStagingPool: return "staging_pool";
    case Policy::kDeepioOrdered: return "deepio_ordered";
    case Policy::kDeepioOpportunistic: return "deepio_opportunistic";
    case Policy::kLbannDynamic: return "lbann_dynamic";
    case Policy::kLbannPreloading: return "lbann_preloading";
    case Policy::kParallelStaging: return "parallel_staging";
    case Policy::kLocalityAware: return "locality_aware";
  }
  return "?";
}

Policy ParsePolicy(const std::string& name) {
  std::string valid;
  for (Policy p : AllPolicies()) {
    if (name == PolicyName(p)) return p;
    valid += valid.empty() ? "" : ", ";
    valid += PolicyName(p);
  }
  throw InvalidArgumentError("--policy: unknown policy \"" + name + "\"; valid: all, " + valid);
}

PolicyTraits TraitsOf(Policy policy) {
  PolicyTraits t;
  switch (policy) {
    case Policy::kLowerBound:
    case Policy::kStagingPool:
      break;
    case Policy::kNaive:
      t.on_demand = true;
      break;
    case Policy::kHdmlp:
      t.cache = CacheRule::kPlacement;
      t.prefetch_threads = t.fill_on_the_way = t.peers = t.runtime_sources = true;
      break;
    case Policy::kDeepioOrdered:
      t.cache = CacheRule::kEpochZeroMemory;
      t.fill_on_the_way = t.peers = true;
      break;
    case Policy::kDeepioOpportunistic:
      t.cache = CacheRule::kEpochZeroMemory;
      t.fill_on_the_way = t.peers = t.opportunistic = true;
      break;
    case Policy::kLbannDynamic:
      t.cache = CacheRule::kEpochZeroMemory;
      t.fill_on_the_way = t.peers = t.needs_full_fit = true;
      break;
    case Policy::kLbannPreloading:
      t.cache = CacheRule::kEpochZeroMemory;
      t.prefetch_threads = t.peers = t.needs_full_fit = t.preload = true;
      break;
    case Policy::kParallelStaging:
      t.cache = CacheRule::kShardAll;
      t.scheme = DistributionScheme::kLocal;
      t.prefetch_threads = t.preload = true;
      break;
    case Policy::kLocalityAware:
      t.cache = CacheRule::kEpochZeroMemory;
      t.fill_on_the_way = t.locality_batches = true;
      break;
  }
  return t;
}

}  // namespace hdmlp::sim
