#include "hdmlp/sim/event_loop.h"

#include <algorithm>

namespace hdmlp::sim {
namespace {

// How far ahead the loop asks for an event's memory (RunToNextBarrier).
constexpr size_t kLookupAhead = 2;
constexpr size_t kCopyStateAhead = 1;
static_assert(kCopyStateAhead < kLookupAhead && kLookupAhead < LookaheadQueue::kAhead,
              "the loop's hints look at events the LookaheadQueue keeps aside");

// The sample event `e` will look up, where it is known without side
// effects: a prefetch thread's next fill, or a staging worker's claim
// once looked up; else -1.
inline int64_t NextSample(const EngineState& s, const Event& e) {
  if (e.thread >= kPfsDone) return -1;
  const NodeState& n = s.nodes[e.node];
  if (e.thread < s.staging_threads)
    return n.next_claim < n.looked_up ? n.claim_samples[static_cast<size_t>(n.next_claim % kClaimsAhead)] : -1;
  const auto j = static_cast<size_t>(s.thread_class[e.thread]);
  const NodeCache& cache = s.caches[e.node];
  const uint32_t cursor = n.fill_cursor[j];
  return cursor < cache.class_begin(j + 1) ? static_cast<int64_t>(cache.FillSample(cursor)) : -1;
}

// Hints for the event after next: its sample's lookup and holder.
inline void PrefetchLookup(const EngineState& s, const Event& e) {
  const int64_t sample = NextSample(s, e);
  if (sample < 0) return;
  s.caches[e.node].samples().PrefetchFind(sample);
  if (!s.holder.empty()) __builtin_prefetch(&s.holder[static_cast<size_t>(sample)]);
}

// Hints for the next event: its copy's state and the holder's (the
// lookups, asked for one event earlier, have most likely arrived).
inline void PrefetchCopyState(const EngineState& s, const Event& e) {
  const int64_t sample = NextSample(s, e);
  if (sample < 0) return;
  const int64_t idx = s.caches[e.node].Find(sample);
  if (idx >= 0) s.caches[e.node].PrefetchCopy(static_cast<size_t>(idx));
  if (s.holder.empty()) return;
  const Holder& h = s.holder[static_cast<size_t>(sample)];
  if (h.node >= 0 && static_cast<uint32_t>(h.node) != e.node) s.caches[static_cast<size_t>(h.node)].PrefetchCopy(h.index);
}

}  // namespace

void EventLoop::SetUp(size_t sources) {
  const auto& classes = s_.model.config().storage_classes;
  s_.staging_capacity = s_.model.CapacityBytes(0);
  s_.staging_threads = s_.traits.on_demand ? 1 : static_cast<uint32_t>(classes[0].threads);
  s_.thread_class.assign(s_.staging_threads, 0);
  if (s_.traits.prefetch_threads)
    for (size_t j = 1; j < classes.size(); ++j)
      for (int k = 0; k < classes[j].threads; ++k) s_.thread_class.push_back(static_cast<int>(j));
  s_.nodes.resize(static_cast<size_t>(s_.w.nodes));
  for (int i = 0; i < s_.w.nodes; ++i) {
    NodeState& n = s_.nodes[static_cast<size_t>(i)];
    n.items_per_epoch = s_.plan.RankEpochSize(i);
    n.total_items = n.items_per_epoch * s_.w.epochs;
    n.local_batch = s_.plan.LocalBatchSize(i, 0);
    n.bytes_by_source.assign(sources, 0);
  }
}

bool EventLoop::RunToNextBarrier() {
  LookaheadQueue& queue = s_.events;
  while (!queue.empty()) {
    const Event e = queue.top();
    queue.pop();
    ++events_;
    // Nodes take turns at random here, so most of an event's reads miss the
    // CPU's caches: ask early for what the next events will read, a
    // pipeline of hints with no effect on any result. The event after
    // next: its copy's state (its lookup was asked for one event ago);
    // the one after that: its sample's lookup.
    if (const Event* later = queue.ahead(kLookupAhead)) PrefetchLookup(s_, *later);
    if (const Event* next = queue.ahead(kCopyStateAhead)) PrefetchCopyState(s_, *next);
    Dispatch(e);
    if (released_) {
      released_ = false;
      return true;
    }
  }
  return false;
}

void EventLoop::Dispatch(const Event& e) {
  if (e.thread == kPfsDone) {
    reads_.PfsEnded(e.node, e.seq, e.time);
  } else if (e.thread == kConsumer) {
    Consumer(e.node, e.time);
  } else if (e.thread < s_.staging_threads) {
    StagingWorker(e.node, e.thread, e.time);
  } else {
    fills_.PrefetchThread(e.node, e.thread, e.time);
  }
}

// ---- staging ------------------------------------------------------------

int64_t EventLoop::SampleOf(int node, int64_t item) {
  NodeState& n = s_.nodes[static_cast<size_t>(node)];
  const AccessPlan& plan = s_.plan;
  const int epoch = static_cast<int>(item / n.items_per_epoch);
  const int64_t j = item % n.items_per_epoch;
  if (s_.traits.locality_batches && epoch >= 1)
    return Assignment(epoch)[static_cast<size_t>(plan.GlobalPosition(node, j))];
  if (s_.traits.scheme != DistributionScheme::kUniform) {
    if (epoch != n.claim_epoch) {
      n.claim_order.emplace(plan.Epoch(node, epoch));
      n.claim_epoch = epoch;
    }
    return n.claim_order->At(j);
  }
  // Uniform (EpochOrder::At without its divisions): the epoch's
  // permutation at the item's global position, the node's slices of the
  // global batches in order. Claims go item by item; anything else
  // starts the walk over from the plan's position.
  if (epoch != n.claim_epoch) {
    n.claim_perm.emplace(plan.EpochPermutation(epoch));
    n.claim_epoch = epoch;
    n.cursor_item = -1;
  }
  if (j != n.cursor_item) {
    const int64_t per_batch = plan.NominalLocalBatchSize(node);
    n.cursor_batch = std::min(j / per_batch, plan.BatchesPerEpoch() - 1);
    const PositionRange slice = plan.RankSlice(node, n.cursor_batch);
    const int64_t offset = j - n.cursor_batch * per_batch;
    n.cursor_position = slice.begin + offset;
    n.cursor_left = slice.size - offset;
    n.cursor_item = j;
  }
  const int64_t sample = static_cast<int64_t>(n.claim_perm->At(static_cast<uint64_t>(n.cursor_position)));
  ++n.cursor_item;
  ++n.cursor_position;
  if (--n.cursor_left == 0 && ++n.cursor_batch < plan.BatchesPerEpoch()) {
    const PositionRange slice = plan.RankSlice(node, n.cursor_batch);
    n.cursor_position = slice.begin;
    n.cursor_left = slice.size;
  }
  return sample;
}

// Epoch e's global batches (the same sets as the plan's) with each sample
// moved, where there is room, into the slice of the node caching it; the
// rest fill the remaining slots in order.
const std::vector<uint32_t>& EventLoop::Assignment(int epoch) {
  std::unique_lock<std::mutex> lock(assignments_mu_, std::defer_lock);
  if (s_.decomposed) lock.lock();  // nodes run on several threads there
  auto it = assignments_.find(epoch);
  if (it != assignments_.end()) return it->second;
  const AccessPlan& plan = s_.plan;
  const int nodes = s_.w.nodes;
  const IndexPermutation perm = plan.EpochPermutation(epoch);
  const int64_t batches = plan.BatchesPerEpoch();
  std::vector<uint32_t> out(static_cast<size_t>(std::max<int64_t>(plan.GlobalBatchEnd(batches - 1), 1)));
  std::vector<int64_t> used(static_cast<size_t>(nodes));
  std::vector<PositionRange> slices(static_cast<size_t>(nodes));
  std::vector<uint32_t> rest;
  for (int64_t h = 0; h < batches; ++h) {
    std::fill(used.begin(), used.end(), 0);
    rest.clear();
    for (int i = 0; i < nodes; ++i) slices[static_cast<size_t>(i)] = plan.RankSlice(i, h);
    auto place = [&](int i, uint32_t s) {
      const auto at = static_cast<size_t>(i);
      out[static_cast<size_t>(slices[at].begin + used[at]++)] = s;
    };
    auto has_room = [&](int i) { return used[static_cast<size_t>(i)] < slices[static_cast<size_t>(i)].size; };
    for (int64_t p = plan.GlobalBatchBegin(h); p < plan.GlobalBatchEnd(h); ++p) {
      const auto s = static_cast<uint32_t>(perm.At(static_cast<uint64_t>(p)));
      const int owner = s_.holder[s].node;
      if (owner >= 0 && has_room(owner)) {
        place(owner, s);
      } else {
        rest.push_back(s);
      }
    }
    size_t k = 0;
    for (int i = 0; i < nodes && k < rest.size(); ++i)
      while (has_room(i) && k < rest.size()) place(i, rest[k++]);
  }
  return assignments_.emplace(epoch, std::move(out)).first->second;
}

// A worker that claims wakes the next one, so a freed buffer fills up
// without waking every worker for every taken item.
void EventLoop::WakeIdle(NodeState& n, uint32_t node, double now) {
  if (n.idle_workers.empty() || n.next_claim >= n.total_items) return;
  if (s_.traits.on_demand) {
    if (!(n.consumer_waiting && n.next_claim == n.next_take)) return;
  } else {
    const int64_t size = s_.w.sizes[static_cast<size_t>(NextClaimSample(node))];
    if (n.bytes_in_flight > 0 && n.bytes_in_flight + size > s_.staging_capacity) return;
  }
  s_.Push(now, node, n.idle_workers.back());
  n.idle_workers.pop_back();
}

void EventLoop::StagingWorker(uint32_t node, uint32_t thread, double now) {
  NodeState& n = s_.nodes[node];
  reads_.EndRead(node, thread);
  if (n.next_claim >= n.total_items) return;
  if (s_.traits.on_demand && !(n.consumer_waiting && n.next_claim == n.next_take)) {
    n.idle_workers.push_back(thread);
    return;
  }
  const int64_t sample = NextClaimSample(node);
  const int64_t size = s_.w.sizes[static_cast<size_t>(sample)];
  if (n.bytes_in_flight > 0 && n.bytes_in_flight + size > s_.staging_capacity) {
    n.idle_workers.push_back(thread);
    return;
  }
  Fetch fetch = reads_.StagingFetch(static_cast<int>(node), thread, n.next_claim, sample, size, now);
  fetch.seconds += s_.AfterFetch(size);
  n.flight.push_back(InFlight{fetch.job < 0 ? now + fetch.seconds : kPendingTime, size, fetch.source});
  n.bytes_in_flight += size;
  if (n.consumer_waiting && n.next_claim == n.next_take) {
    n.consumer_waiting = false;
    if (fetch.job < 0) {
      s_.Push(now + fetch.seconds, node, kConsumer);
    } else {
      n.consumer_blocked = true;  // woken when the item's ready time is known
    }
  }
  if (fetch.job >= 0) reads_.When(fetch, Dependent{Dependent::kFlightItem, node, n.next_claim, 0}, now);
  reads_.When(fetch, Dependent{Dependent::kThreadEvent, node, thread, 0}, now);
  ++n.next_claim;
  if (n.next_claim < n.total_items) NextClaimSample(node);  // keeps the look-ahead kClaimsAhead deep
  WakeIdle(n, node, now);
}

// The next kClaimsAhead claims' samples are looked up ahead, in item order
// (as SampleOf walks the plan, so when changes nothing), and their memory
// asked for: by the time a claim comes, its size and lookup have arrived.
int64_t EventLoop::NextClaimSample(uint32_t node) {
  NodeState& n = s_.nodes[node];
  for (const int64_t end = std::min(n.next_claim + kClaimsAhead, n.total_items); n.looked_up < end; ++n.looked_up) {
    const int64_t sample = SampleOf(static_cast<int>(node), n.looked_up);
    n.claim_samples[static_cast<size_t>(n.looked_up % kClaimsAhead)] = sample;
    s_.PrefetchSample(node, sample, false);
  }
  return n.claim_samples[static_cast<size_t>(n.next_claim % kClaimsAhead)];
}

// ---- consumer and barrier ------------------------------------------------

void EventLoop::Consumer(uint32_t node, double now) {
  NodeState& n = s_.nodes[node];
  if (n.taken_in_batch == n.local_batch) {
    Arrive(n, now);
    return;
  }
  if (n.next_take >= n.next_claim) {
    n.consumer_waiting = true;
    if (s_.traits.on_demand) WakeIdle(n, node, now);
    return;
  }
  const InFlight item = n.flight.front();
  if (item.ready == kPendingTime) {
    n.consumer_blocked = true;  // its PFS read is in flight: Reads wakes the consumer
    return;
  }
  if (item.ready > now) {
    s_.Push(item.ready, node, kConsumer);
    return;
  }
  n.flight.pop_front();
  n.bytes_in_flight -= item.size();
  n.bytes_by_source[item.source()] += item.size();
  if (!s_.traits.on_demand) WakeIdle(n, node, now);
  const double compute = s_.Compute(item.size());
  n.batch_compute += compute;
  ++n.taken_in_batch;
  ++n.next_take;
  s_.Push(now + compute, node, kConsumer);
}

void EventLoop::Arrive(NodeState& n, double now) {
  if (s_.decomposed) {  // Decomposition::Run completes the barrier once every node arrived
    n.arrived = true;
    n.arrival = now;
    return;
  }
  barrier_time_ = std::max(barrier_time_, now);
  barrier_compute_ = std::max(barrier_compute_, n.batch_compute);
  if (++barrier_count_ < s_.w.nodes) return;
  const double time = barrier_time_;
  const double compute = barrier_compute_;
  barrier_count_ = 0;
  barrier_time_ = 0;
  barrier_compute_ = 0;
  CompleteBarrier(time, compute);
}

void EventLoop::CompleteBarrier(double time, double compute) {
  compute_seconds_ += compute;
  const int64_t per_epoch = s_.plan.BatchesPerEpoch();
  ++global_batch_;
  if (global_batch_ % per_epoch == 0) {
    epoch_seconds_.push_back(time - epoch_start_);
    epoch_start_ = time;
    const int next_epoch = static_cast<int>(global_batch_ / per_epoch);
    while (!assignments_.empty() && assignments_.begin()->first < next_epoch) assignments_.erase(assignments_.begin());
  }
  job_end_ = time;
  s_.release_time = time;
  if (global_batch_ == per_epoch * s_.w.epochs) return;
  for (size_t i = 0; i < s_.nodes.size(); ++i) {
    NodeState& n = s_.nodes[i];
    n.taken_in_batch = 0;
    n.batch_compute = 0;
    n.local_batch = s_.plan.LocalBatchSize(static_cast<int>(i), global_batch_ % per_epoch);
    s_.PushRelease(time, static_cast<uint32_t>(i));
  }
  if (!s_.decomposed) released_ = true;
}

}  // namespace hdmlp::sim
