#include "hdmlp/sim/engine_state.h"

namespace hdmlp::sim {
namespace {

AccessPlan MakePlan(const Workload& w, DistributionScheme scheme) {
  PlanOptions o;
  o.num_samples = static_cast<int64_t>(w.sizes.size());
  o.batch_size = w.batch_size;
  o.epochs = w.epochs;
  o.seed = w.seed;
  o.drop_last = w.drop_last;
  o.world_size = w.nodes;
  o.scheme = scheme;
  return AccessPlan(o);
}

}  // namespace

EngineState::EngineState(const Config& config, const Workload& workload, Policy policy_in,
                         const SimulationOptions& options_in)
    : w(workload), policy(policy_in), traits(EffectiveTraits(policy_in, options_in)),
      model(config, workload.nodes, options_in.reading, options_in.artifacts.full_class_rate_per_thread),
      thesis(options_in.reading == Reading::kThesis), plan(MakePlan(workload, traits.scheme)), options(options_in) {
  for (int j = 0; j < model.num_classes(); ++j) {
    local_mbps.push_back(model.LocalClassMbps(j));
    peer_mbps.push_back(model.PeerClassMbps(j));
    write_mbps.push_back(model.WriteClassMbps(j));
    prefer_peer.push_back(model.PreferPeer(j) ? 1 : 0);
  }
  staging_write_mbps = model.StagingWriteMbps();
}

}  // namespace hdmlp::sim
