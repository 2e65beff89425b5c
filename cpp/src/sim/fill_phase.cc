#include "hdmlp/sim/fill_phase.h"

#include <utility>

#include "hdmlp/sim/cache_plan.h"

namespace hdmlp::sim {
std::vector<uint8_t> FillPhase::PlanCaches(int threads) {
  CachePlan plan = sim::PlanCaches(s_.plan, s_.w, s_.traits, s_.model, s_.options, threads, &s_.memory);
  s_.caches = std::move(plan.caches);
  s_.holder = SimVector<Holder>(SimAllocator<Holder>(&s_.memory));
  s_.holder.resize(plan.holder.size());
  for (size_t k = 0; k < plan.holder.size(); ++k) s_.holder[k] = Holder{plan.holder[k], plan.holder_index[k]};
  plan.holder = {};
  plan.holder_index = {};
  if (s_.traits.cache == CacheRule::kNone) return {};
  s_.only_class.assign(static_cast<size_t>(s_.w.nodes), 0);
  for (size_t i = 0; i < s_.caches.size(); ++i) {
    if (plan.caches_every_read[i] && !s_.caches[i].empty())
      s_.only_class[i] = static_cast<uint8_t>(s_.caches[i].single_class());
  }
  return std::move(plan.caches_every_read);
}

void FillPhase::SetUp() {
  for (uint32_t i = 0; i < s_.nodes.size(); ++i) {
    NodeState& n = s_.nodes[i];
    const NodeCache& c = s_.caches[i];
    n.unfilled = static_cast<int64_t>(c.size());
    n.fill_cursor.assign(s_.model.config().storage_classes.size(), 0);
    for (size_t j = 0; j < c.classes(); ++j) n.fill_cursor[j] = c.class_begin(j);
    for (uint32_t t = s_.staging_threads; t < s_.thread_class.size(); ++t) {
      const auto j = static_cast<size_t>(s_.thread_class[t]);
      if (j < c.classes() && c.class_begin(j + 1) > c.class_begin(j)) {
        s_.Push(0, i, t);
        ++preloading_threads_;
      }
    }
  }
  if (!s_.traits.preload || preloading_threads_ == 0) StartTraining(0);
}

void FillPhase::StartTraining(double now) {
  startup_ = now;
  for (uint32_t i = 0; i < s_.nodes.size(); ++i) {
    for (uint32_t t = 0; t < s_.staging_threads; ++t) s_.Push(now, i, t);
    s_.Push(now, i, kConsumer);
  }
}

}  // namespace hdmlp::sim
