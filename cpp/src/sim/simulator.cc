#include "hdmlp/sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "hdmlp/errors.h"
#include "hdmlp/sim/decomposition.h"
#include "hdmlp/sim/engine_state.h"
#include "hdmlp/sim/event_loop.h"
#include "hdmlp/sim/fill_phase.h"
#include "hdmlp/sim/reads.h"

namespace hdmlp::sim {
namespace {

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// lower_bound: every sample is ready at once, so a global batch lasts as
// long as its slowest node computes: sum_h max_i sum_{k in B^{h,i}} s_k / c.
void RunLowerBound(const EngineState& s, SimulationResult& r, std::vector<int64_t>& byte_counts) {
  const int64_t batches = s.plan.BatchesPerEpoch();
  std::vector<double> slowest(static_cast<size_t>(batches));
  for (int e = 0; e < s.w.epochs; ++e) {
    std::fill(slowest.begin(), slowest.end(), 0.0);
    for (int i = 0; i < s.w.nodes; ++i) {
      const EpochOrder order = s.plan.Epoch(i, e);
      int64_t j = 0;
      for (int64_t h = 0; h < batches; ++h) {
        double compute = 0;
        for (int64_t end = j + s.plan.LocalBatchSize(i, h); j < end; ++j) {
          const int64_t size = s.w.sizes[static_cast<size_t>(order.At(j))];
          compute += s.Compute(size);
          byte_counts[kFromReady] += size;
          ++r.events;
        }
        slowest[static_cast<size_t>(h)] = std::max(slowest[static_cast<size_t>(h)], compute);
      }
    }
    double epoch = 0;
    for (double t : slowest) epoch += t;
    r.epoch_seconds.push_back(epoch);
    r.seconds += epoch;
  }
  r.compute_seconds = r.seconds;
}

// Planning's threads, and the decomposed loop's: SimulationOptions::threads
// or the hardware's (at most 8), at most one per node.
int WorkerThreads(const SimulationOptions& options, int nodes) {
  const int threads = options.threads > 0 ? options.threads
                                          : std::min(8, static_cast<int>(std::thread::hardware_concurrency()));
  return std::max(1, std::min(threads, nodes));
}

// Every other policy: the caches are planned (FillPhase), then the
// event-by-event loop (EventLoop) runs until a barrier from which the nodes
// share nothing, and the decomposed loop (Decomposition) from there.
void RunEvents(EngineState& s, SimulationResult& r, std::vector<int64_t>& byte_counts) {
  Reads reads(s);
  FillPhase fills(s, reads);
  EventLoop loop(s, reads, fills);
  const bool cached = s.traits.cache != CacheRule::kNone;
  const int threads = WorkerThreads(s.options, s.w.nodes);
  Decomposition decomposition(s, reads, loop, cached ? threads : 1);
  const double t0 = Seconds();
  const std::vector<uint8_t> caches_every_read = fills.PlanCaches(threads);
  if (cached) decomposition.FindWhetherNeverPfs(caches_every_read);
  r.planning_seconds = Seconds() - t0;
  for (const NodeCache& c : s.caches) r.cached_samples += static_cast<int64_t>(c.size());

  const double t1 = Seconds();
  loop.SetUp(byte_counts.size());
  reads.SetUp();
  fills.SetUp();
  while (loop.RunToNextBarrier()) {
    if (!s.options.decompose || !decomposition.Possible(s.release_time)) continue;
    for (const NodeState& n : s.nodes) r.decomposed_unfilled += n.unfilled;
    const double t2 = Seconds();
    decomposition.Run();
    r.decomposed_seconds = Seconds() - t2;
    break;
  }
  r.events += loop.events() + decomposition.events();
  for (const NodeState& n : s.nodes)
    for (size_t k = 0; k < byte_counts.size(); ++k) byte_counts[k] += n.bytes_by_source[k];
  if (loop.global_batch() != s.plan.BatchesPerEpoch() * s.w.epochs)
    throw Error("simulator: the job did not finish (" + std::to_string(loop.global_batch()) +
                " global batches); a bug");
  r.seconds = loop.job_end();
  r.epoch_seconds = loop.epoch_seconds();
  r.compute_seconds = loop.compute_seconds();
  r.startup_seconds = s.traits.preload ? fills.startup() : 0;
  r.decomposed_batches = decomposition.batches();
  r.pfs_trace = reads.TakeTrace();
  r.pfs_read_bytes = reads.pfs_read_bytes();
  r.simulation_seconds = Seconds() - t1;
}

}  // namespace

PolicyTraits EffectiveTraits(Policy policy, const SimulationOptions& options) {
  PolicyTraits t = TraitsOf(policy);
  if (options.reading != Reading::kThesis) return t;
  switch (policy) {
    case Policy::kDeepioOrdered:
    case Policy::kDeepioOpportunistic:
    case Policy::kLbannPreloading:
      t.prefetch_threads = t.preload = true;
      t.fill_on_the_way = false;
      break;
    case Policy::kLocalityAware:
      t.prefetch_threads = t.preload = true;
      t.fill_on_the_way = false;
      if (options.artifacts.locality_never_reorders) {
        t.locality_batches = false;
        t.peers = true;  // its staging pool reads the other nodes' caches
      }
      break;
    case Policy::kParallelStaging:
      t.cache = CacheRule::kShardStorage;
      break;
    default:
      break;
  }
  return t;
}

SimulationResult Simulate(const Config& config, const Workload& workload, Policy policy,
                          const SimulationOptions& options) {
  ValidateWorkload(workload);
  EngineState s(config, workload, policy, options);
  SimulationResult r;
  r.policy = PolicyName(policy);
  // Consumed bytes by where they came from (kFromPfs, kFromPeer, ...).
  std::vector<int64_t> byte_counts(static_cast<size_t>(kFromReady + s.model.num_classes()), 0);
  if (policy == Policy::kLowerBound) {
    RunLowerBound(s, r, byte_counts);
  } else {
    RunEvents(s, r, byte_counts);
  }
  for (size_t k = 0; k < byte_counts.size(); ++k) {
    if (byte_counts[k] == 0 && k != kFromPfs) continue;
    std::string name = k == kFromPfs ? "pfs" : k == kFromPeer ? "peer" : k == kFromReady ? "ready"
                       : s.model.config().storage_classes[k - kFromReady].name;
    r.bytes.emplace_back(name, byte_counts[k]);
  }
  r.stall_seconds = std::max(0.0, r.seconds - r.compute_seconds);
  return r;
}

}  // namespace hdmlp::sim
