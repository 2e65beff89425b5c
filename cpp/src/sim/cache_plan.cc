#include "hdmlp/sim/cache_plan.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include "hdmlp/plan/placement.h"

namespace hdmlp::sim {
namespace {

class CachePlanner {
 public:
  CachePlanner(const AccessPlan& plan, const Workload& w, const PolicyTraits& traits, const PerformanceModel& model,
               const SimulationOptions& options)
      : w_(w), traits_(traits), model_(model), thesis_(options.reading == Reading::kThesis), plan_(plan),
        options_(options) {}

  NodePlan PlanNode(int node) const {
    const int num_classes = model_.num_classes();
    NodePlan out;
    out.copies.assign(static_cast<size_t>(num_classes), 0);
    std::vector<std::vector<int64_t>>& lists = out.class_lists;
    lists.resize(static_cast<size_t>(num_classes));
    if (traits_.cache == CacheRule::kPlacement) {
      std::vector<int64_t> capacities(static_cast<size_t>(num_classes), 0);
      for (int j = 1; j < num_classes; ++j) {
        // As the runtime (cache_hierarchy.cc): a class predicted slower than the PFS holds nothing.
        capacities[static_cast<size_t>(j)] = model_.PreferClass(j) ? model_.CapacityBytes(j) : 0;
      }
      PlanningOptions planning;
      planning.first_epoch_first = w_.nodes > 1;
      planning.threads = w_.nodes > 1 ? 1 : options_.threads;
      Placement p = PlanPlacement(plan_, node, w_.sizes, capacities, planning);
      const CountWindow counted = CountedItems(plan_, node, planning);
      out.caches_every_read = p.cached_samples() == p.rank_samples && p.rank_samples > 0 &&
                              counted.end_item - counted.first_item == plan_.RankEpochSize(node) * w_.epochs;
      lists = std::move(p.class_samples);
      if (thesis_) {
        // The thesis's FrequencyPrefetcher fills the most-read samples first
        // (its prefetch order is by read count), so its prefetch threads and
        // the staging workers, which go in read order, fetch different
        // samples rather than the same ones in lockstep.
        std::vector<uint16_t> count(w_.sizes.size(), 0);
        for (int e = 0; e < w_.epochs; ++e) {
          const EpochOrder order = plan_.Epoch(node, e);
          for (int64_t j = 0, m = plan_.RankEpochSize(node); j < m; ++j) {
            uint16_t& c = count[static_cast<size_t>(order.At(j))];
            if (c < UINT16_MAX) ++c;
          }
        }
        for (auto& list : lists)
          std::stable_sort(list.begin(), list.end(), [&](int64_t a, int64_t b) {
            return count[static_cast<size_t>(a)] > count[static_cast<size_t>(b)];
          });
      }
      return out;
    }
    // The node's epoch-0 samples in read order, first fit into its classes.
    std::vector<int64_t> left(static_cast<size_t>(num_classes), 0);
    const auto& classes = model_.config().storage_classes;
    bool has_storage = false;
    for (int j = 1; j < num_classes; ++j) has_storage |= classes[static_cast<size_t>(j)].backend != "memory";
    for (int j = 1; j < num_classes; ++j) {
      const bool memory = classes[static_cast<size_t>(j)].backend == "memory";
      const bool usable = traits_.cache == CacheRule::kShardAll ? true
                          : traits_.cache == CacheRule::kShardStorage ? (!memory || !has_storage)
                                                                       : memory;
      left[static_cast<size_t>(j)] = usable ? model_.CapacityBytes(j) : 0;
    }
    const EpochOrder order = plan_.Epoch(node, 0);
    const int64_t m = plan_.RankEpochSize(node);
    int64_t placed = 0;
    for (int64_t j = 0; j < m; ++j) {
      const int64_t s = order.At(j);
      const int64_t size = w_.sizes[static_cast<size_t>(s)];
      for (int k = 1; k < num_classes; ++k) {
        if (left[static_cast<size_t>(k)] >= size && left[static_cast<size_t>(k)] > 0) {
          left[static_cast<size_t>(k)] -= size;
          lists[static_cast<size_t>(k)].push_back(s);
          ++placed;
          break;
        }
      }
    }
    if (traits_.needs_full_fit && placed < m) lists.assign(static_cast<size_t>(num_classes), {});
    // A local scheme reads the same shard every epoch.
    out.caches_every_read = traits_.scheme == DistributionScheme::kLocal && placed == m && m > 0;
    if (thesis_ && traits_.scheme == DistributionScheme::kLocal &&
        options_.artifacts.parallel_staging_copies_lower_shards) {
      // The thesis's parallel staging: then the shards of nodes 0..node-1, in
      // order, from their storage, until this node's is full.
      for (int k = 0; k < node; ++k) {
        const EpochOrder shard = plan_.Epoch(k, 0);
        for (int64_t j = 0, n = plan_.RankEpochSize(k); j < n; ++j) {
          const int64_t s = shard.At(j);
          const int64_t size = w_.sizes[static_cast<size_t>(s)];
          int c = 1;
          while (c < num_classes && !(left[static_cast<size_t>(c)] >= size && left[static_cast<size_t>(c)] > 0)) ++c;
          if (c == num_classes) return out;
          left[static_cast<size_t>(c)] -= size;
          lists[static_cast<size_t>(c)].push_back(s);
          ++out.copies[static_cast<size_t>(c)];
        }
      }
    }
    return out;
  }


 private:
  const Workload& w_;
  const PolicyTraits& traits_;
  const PerformanceModel& model_;
  const bool thesis_;
  const AccessPlan& plan_;
  const SimulationOptions& options_;
};

}  // namespace

CachePlan PlanCaches(const AccessPlan& plan, const Workload& w, const PolicyTraits& traits,
                     const PerformanceModel& model, const SimulationOptions& options, int threads,
                     SimMemory* memory) {
  CachePlan out;
  out.caches.resize(static_cast<size_t>(w.nodes));
  out.caches_every_read.assign(static_cast<size_t>(w.nodes), 0);
  if (traits.cache == CacheRule::kNone) return out;
  const CachePlanner planner(plan, w, traits, model, options);
  std::vector<NodeCache>& caches = out.caches;
  std::vector<uint8_t>& every_read = out.caches_every_read;
  std::atomic<int> next{0};
  std::exception_ptr error;
  std::mutex error_mu;
  auto work = [&] {
    for (int i = next++; i < w.nodes; i = next++) {
      try {
        NodePlan node_plan = planner.PlanNode(i);
        every_read[static_cast<size_t>(i)] = node_plan.caches_every_read ? 1 : 0;
        caches[static_cast<size_t>(i)] = BuildCache(node_plan, memory);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
        next = w.nodes;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);

  if (traits.needs_full_fit) {
    // LBANN's data store holds the whole dataset or is not used at all.
    bool all_fit = true;
    int64_t cached = 0;
    for (const NodeCache& c : caches) cached += static_cast<int64_t>(c.size());
    for (int i = 0; i < w.nodes; ++i)
      if (plan.RankEpochSize(i) > 0 && caches[static_cast<size_t>(i)].empty()) all_fit = false;
    if (!all_fit || cached == 0) {
      caches.assign(static_cast<size_t>(w.nodes), NodeCache{});
      std::fill(every_read.begin(), every_read.end(), 0);
    }
  }
  if (traits.peers || traits.locality_batches) {
    // The designated holder of each sample, as the runtime's PFS read rule:
    // its epoch-0 reader if that node caches it, else the lowest node that does.
    std::vector<int32_t>& holder = out.holder;
    holder.assign(w.sizes.size(), -1);
    for (int i = w.nodes - 1; i >= 0; --i)
      caches[static_cast<size_t>(i)].samples().ForEach([&](uint32_t s, uint32_t) { holder[s] = i; });
    for (size_t s = 0; s < holder.size(); ++s) {
      if (holder[s] < 0) continue;
      const int first = plan.FirstEpochReader(static_cast<int64_t>(s));
      if (first >= 0 && caches[static_cast<size_t>(first)].Find(static_cast<int64_t>(s)) >= 0) holder[s] = first;
    }
    // Where the copy sits in its holder's cache: peer reads need no search.
    out.holder_index.assign(w.sizes.size(), 0);
    for (size_t s = 0; s < holder.size(); ++s)
      if (holder[s] >= 0)
        out.holder_index[s] =
            static_cast<uint32_t>(caches[static_cast<size_t>(holder[s])].Find(static_cast<int64_t>(s)));
  }
  return out;
}

}  // namespace hdmlp::sim
