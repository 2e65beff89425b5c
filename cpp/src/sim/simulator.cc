#include "hdmlp/sim/simulator.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "hdmlp/errors.h"
#include "hdmlp/plan/access_plan.h"
#include "hdmlp/sim/cache_plan.h"
#include "hdmlp/sim/event_queue.h"
#include "hdmlp/sim/node_cache.h"
#include "hdmlp/sim/pfs_sharing.h"

namespace hdmlp::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// How far ahead the event-by-event loop asks for an event's memory (RunEvents).
constexpr size_t kLookupAhead = 2;
constexpr size_t kCopyStateAhead = 1;
static_assert(kCopyStateAhead < kLookupAhead && kLookupAhead < LookaheadQueue::kAhead,
              "the loop's hints look at events the LookaheadQueue keeps aside");

// How many of a node's next claims have their samples looked up, and their
// memory asked for (NextClaimSample); how far ahead a prefetch thread asks for
// its class's next fills' lookups, and their copies' state.
constexpr int64_t kClaimsAhead = 8;
constexpr uint32_t kFillLookupAhead = 8;
constexpr uint32_t kFillStateAhead = 4;

// Where a consumed sample came from, for the byte counts: 0 the PFS, 1 a
// peer's class, 2 "ready" (lower_bound), 2 + j the node's own class j.
enum : uint8_t { kFromPfs = 0, kFromPeer = 1, kFromReady = 2 };
uint8_t FromClass(int j) { return static_cast<uint8_t>(kFromReady + j); }

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A copy whose fill waits on a PFS read in flight (physical reading): its
// ready time is known only when that read ends (PendingCopy).
constexpr double kPendingTime = std::numeric_limits<double>::max();

// Where a fetch got its bytes and when it ends: `seconds` after now, or,
// with job >= 0, `seconds` after the end of that PFS read in flight.
struct Fetch {
  double seconds;
  uint8_t source;
  int32_t job = -1;
};

// What waits for a PFS read in flight, `offset` seconds after it ends.
struct Dependent {
  enum Kind : uint8_t { kThreadEvent, kFlightItem, kCopy } kind;
  uint32_t node;
  int64_t target;  // the thread, the item (over all epochs), or the copy's index
  double offset;
};

// An item claimed and not yet taken: 16 bytes (the staging buffers of a
// large job hold millions).
struct InFlight {
  InFlight(double ready_time, int64_t size, uint8_t source)
      : ready(ready_time), size_and_source((static_cast<uint64_t>(size) << 8) | source) {}
  int64_t size() const { return static_cast<int64_t>(size_and_source >> 8); }
  uint8_t source() const { return static_cast<uint8_t>(size_and_source & 0xff); }
  double ready;
  uint64_t size_and_source;  // the size in bytes << 8 | where it came from (kFromPfs, ...)
};

// A copy of the node's whose fill waits on PFS read `job`: complete `after`
// seconds after it ends (a few per node at a time).
struct PendingCopy {
  uint32_t idx;
  int32_t job;
  double after;
};

struct NodeState {
  int64_t items_per_epoch = 0;
  int64_t total_items = 0;
  int64_t next_claim = 0;  // staging: next item (over all epochs) to claim
  int64_t next_take = 0;   // consumer: next item to take
  int64_t bytes_in_flight = 0;
  // The samples of items [next_claim, looked_up), at most kClaimsAhead,
  // by item % kClaimsAhead (NextClaimSample).
  std::array<int64_t, kClaimsAhead> claim_samples{};
  int64_t looked_up = 0;
  std::deque<InFlight> flight;  // items [next_take, next_claim)
  std::vector<uint32_t> idle_workers;
  bool consumer_waiting = false;
  bool consumer_blocked = false;  // waits for the ready time of the next item (a PFS read in flight)
  int64_t taken_in_batch = 0;
  int64_t local_batch = 0;
  double batch_compute = 0;
  std::vector<PendingCopy> pending_copies;
  std::vector<uint32_t> fill_cursor;   // per class: next fill entry
  int claim_epoch = -1;
  std::optional<EpochOrder> claim_order;
  // Uniform scheme: the claim epoch's permutation and where the claims
  // stand in the epoch's global order (SampleOf walks the node's slices in
  // order instead of dividing per item as EpochOrder::At does).
  std::optional<IndexPermutation> claim_perm;
  int64_t cursor_item = -1;  // the item (within the epoch) cursor_position is for; -1: none
  int64_t cursor_position = 0;
  int64_t cursor_left = 0;   // positions left in the slice of global batch cursor_batch
  int64_t cursor_batch = 0;
  std::vector<int64_t> bytes_by_source;  // consumed bytes, by kFromPfs, kFromPeer, ...
  int64_t events = 0;                    // events of this node processed
  int64_t unfilled = 0;     // the node's cached copies whose fill has not started
  double last_ready = 0;    // the latest ready time of the node's copies so far
  bool settled = false;     // decomposed loop: every copy complete, ready times dropped
  // Decomposed loop (RunDecomposed) only: the node's own event heap and
  // push counter, and its consumer's arrival at the barrier.
  EventQueue heap;
  uint64_t seq = 0;
  bool arrived = false;
  double arrival = 0;
};


class Engine {
 public:
  Engine(const Config& config, const Workload& w, Policy policy, const SimulationOptions& options)
      : w_(w), policy_(policy), traits_(EffectiveTraits(policy, options)),
        model_(config, w.nodes, options.reading, options.artifacts.full_class_rate_per_thread),
        thesis_(options.reading == Reading::kThesis),
        plan_(MakePlan(w, traits_.scheme)), options_(options) {
    // The model's rates per class, asked for several times per event: once.
    for (int j = 0; j < model_.num_classes(); ++j) {
      local_mbps_.push_back(model_.LocalClassMbps(j));
      peer_mbps_.push_back(model_.PeerClassMbps(j));
      write_mbps_.push_back(model_.WriteClassMbps(j));
      prefer_peer_.push_back(model_.PreferPeer(j) ? 1 : 0);
    }
    staging_write_mbps_ = model_.StagingWriteMbps();
  }

  SimulationResult Run() {
    SimulationResult r;
    r.policy = PolicyName(policy_);
    byte_counts_.assign(static_cast<size_t>(kFromReady + model_.num_classes()), 0);
    if (policy_ == Policy::kLowerBound) {
      RunLowerBound(r);
    } else {
      const double t0 = Seconds();
      PlanCaches();
      r.planning_seconds = Seconds() - t0;
      for (const NodeCache& c : caches_) r.cached_samples += static_cast<int64_t>(c.size());
      const double t1 = Seconds();
      RunEvents(r);
      r.simulation_seconds = Seconds() - t1;
    }
    for (size_t k = 0; k < byte_counts_.size(); ++k) {
      if (byte_counts_[k] == 0 && k != kFromPfs) continue;
      std::string name = k == kFromPfs ? "pfs" : k == kFromPeer ? "peer" : k == kFromReady ? "ready"
                         : model_.config().storage_classes[k - kFromReady].name;
      r.bytes.emplace_back(name, byte_counts_[k]);
    }
    r.pfs_read_bytes = pfs_read_bytes_;
    r.stall_seconds = std::max(0.0, r.seconds - r.compute_seconds);
    return r;
  }

 private:
  static AccessPlan MakePlan(const Workload& w, DistributionScheme scheme) {
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

  double Compute(int64_t bytes) const { return TransferSeconds(bytes, w_.compute_mbps); }
  double Preprocess(int64_t bytes) const {
    return w_.preprocess_mbps > 0 ? TransferSeconds(bytes, w_.preprocess_mbps) : 0;
  }
  // The thesis's charge for writing a read sample into the staging buffer,
  // paid by every read there: max(s/beta, s/(w_0/p_0)).
  double StagingWrite(int64_t bytes) const {
    return std::max(Preprocess(bytes), TransferSeconds(bytes, staging_write_mbps_));
  }
  // What a staging worker adds to its fetch: s/beta, or the thesis's write.
  double AfterFetch(int64_t bytes) const { return thesis_ ? StagingWrite(bytes) : Preprocess(bytes); }
  // Storing a fetched sample into class j: s/(w_j/p_j), or the thesis's write.
  double Store(int64_t bytes, int j) const {
    return thesis_ ? StagingWrite(bytes) : TransferSeconds(bytes, write_mbps_[static_cast<size_t>(j)]);
  }

  // lower_bound: every sample is ready at once, so a global batch lasts as
  // long as its slowest node computes: sum_h max_i sum_{k in B^{h,i}} s_k / c.
  void RunLowerBound(SimulationResult& r) {
    const int64_t batches = plan_.BatchesPerEpoch();
    std::vector<double> slowest(static_cast<size_t>(batches));
    for (int e = 0; e < w_.epochs; ++e) {
      std::fill(slowest.begin(), slowest.end(), 0.0);
      for (int i = 0; i < w_.nodes; ++i) {
        const EpochOrder order = plan_.Epoch(i, e);
        int64_t j = 0;
        for (int64_t h = 0; h < batches; ++h) {
          double compute = 0;
          for (int64_t end = j + plan_.LocalBatchSize(i, h); j < end; ++j) {
            const int64_t size = w_.sizes[static_cast<size_t>(order.At(j))];
            compute += Compute(size);
            byte_counts_[kFromReady] += size;
            ++r.events;
          }
          slowest[static_cast<size_t>(h)] = std::max(slowest[static_cast<size_t>(h)], compute);
        }
      }
      double epoch = 0;
      for (double s : slowest) epoch += s;
      r.epoch_seconds.push_back(epoch);
      r.seconds += epoch;
    }
    r.compute_seconds = r.seconds;
  }

  // ---- cache plans (cache_plan.h) ----------------------------------------

  void PlanCaches() {
    int threads = options_.threads > 0 ? options_.threads
                                       : std::min(8, static_cast<int>(std::thread::hardware_concurrency()));
    threads = std::max(1, std::min(threads, w_.nodes));
    if (traits_.cache != CacheRule::kNone) decompose_threads_ = threads;
    CachePlan plan = sim::PlanCaches(plan_, w_, traits_, model_, options_, threads, &memory_);
    caches_ = std::move(plan.caches);
    // Node and index side by side: a peer read costs one cache miss for both.
    holder_ = SimVector<Holder>(SimAllocator<Holder>(&memory_));
    holder_.resize(plan.holder.size());
    for (size_t k = 0; k < plan.holder.size(); ++k) holder_[k] = Holder{plan.holder[k], plan.holder_index[k]};
    plan.holder = {};
    plan.holder_index = {};
    if (traits_.cache == CacheRule::kNone) return;
    const std::vector<uint8_t>& every_read = plan.caches_every_read;
    FindWhetherNeverPfs(every_read);
    only_class_.assign(static_cast<size_t>(w_.nodes), 0);
    for (size_t i = 0; i < caches_.size(); ++i) {
      if (every_read[i] && !caches_[i].empty()) only_class_[i] = static_cast<uint8_t>(caches_[i].single_class());
    }
  }

  // ---- the event loop ---------------------------------------------------

  void Push(double time, uint32_t node, uint32_t thread) {
    if (decomposed_) {
      NodeState& n = nodes_[node];
      n.heap.push(Event{time, n.seq++, node, thread});
      return;
    }
    events_.push(Event{time, seq_++, node, thread});
  }
  // A barrier's release of node's consumer at `time`: after every other
  // event at that time (kRelease).
  void PushRelease(double time, uint32_t node) {
    if (decomposed_) {
      NodeState& n = nodes_[node];
      n.heap.push(Event{time, n.seq++ | kRelease, node, kConsumer});
      return;
    }
    events_.push(Event{time, seq_++ | kRelease, node, kConsumer});
  }

  // Whether node's copy of `sample` is the one peers read, counted in
  // held_* (only where every sample has one: CanDecompose).
  bool IsHeld(uint32_t node, int64_t sample) const {
    return holders_cover_ && holder_[static_cast<size_t>(sample)].node == static_cast<int32_t>(node);
  }

  // Marks a copy's fill as started, complete at `ready`: every copy goes
  // from kNotStarted to its ready time once, and the decomposed loop needs to
  // know when the peers' copies (held_*) and each node's own are complete.
  void SetReady(uint32_t node, NodeCache& cache, size_t idx, int64_t sample, double ready, double now) {
    const float r = RoundUpReady(ready);
    cache.Start(idx, r, now);
    NodeState& n = nodes_[node];
    --n.unfilled;
    n.last_ready = std::max(n.last_ready, static_cast<double>(r));
    if (!decomposed_ && IsHeld(node, sample)) {  // decomposed: every held copy had started
      --held_unstarted_;
      held_last_ready_ = std::max(held_last_ready_, static_cast<double>(r));
    }
  }

  // A PFS read by `thread` of `node` starting now. Thesis: its rate is
  // fixed now, min(b_fs, t(gamma)/gamma) with gamma the nodes reading
  // (Eq. 3.5), and the stream ends at the thread's next event. Physical:
  // the streams share t(g) and their node's link at every instant
  // (processor sharing, PfsJob): the read ends when its bytes are read, at a
  // time known only then, so the fetch is {0, PFS, job}.
  Fetch PfsRead(uint32_t node, uint32_t thread, int64_t size, double now) {
    if (decomposed_)  // CanDecompose ruled this out: shared state in the decomposed loop
      throw Error("simulator: a PFS read in the decomposed loop; a bug (run with decompose = false)");
    pfs_read_bytes_ += size;
    if (thesis_) return {TransferSeconds(size, model_.ThesisPfsMbps(pfs_->StartFixed(node, thread))), kFromPfs};
    if (!(model_.PfsStreamMbps(1, 1) < kInf)) return {0, kFromPfs};  // an unlimited PFS
    const uint32_t job = pfs_->StartShared(node, thread, size, now);
    dependents_[job].clear();
    return {0, kFromPfs, static_cast<int32_t>(job)};
  }

  // A PFS end event: the read that ended (if the event is not stale) lets
  // what waited for it go on.
  void PfsEnded(uint32_t group, uint64_t seq, double now) {
    const int64_t job = pfs_->OnEndEvent(group, seq, now);
    if (job < 0) return;
    std::vector<Dependent> dependents = std::move(dependents_[static_cast<size_t>(job)]);
    dependents_[static_cast<size_t>(job)].clear();
    for (const Dependent& d : dependents) Resolve(d, now + d.offset);
  }

  // What waited for a PFS read: now due at `time`.
  void Resolve(const Dependent& d, double time) {
    NodeState& n = nodes_[d.node];
    switch (d.kind) {
      case Dependent::kThreadEvent:
        Push(time, d.node, static_cast<uint32_t>(d.target));
        break;
      case Dependent::kFlightItem: {
        n.flight[static_cast<size_t>(d.target - n.next_take)].ready = time;
        if (n.consumer_blocked && d.target == n.next_take) {
          n.consumer_blocked = false;
          Push(time, d.node, kConsumer);
        }
        break;
      }
      case Dependent::kCopy: {
        NodeCache& cache = caches_[d.node];
        const float r = RoundUpReady(time);
        cache.Settle(static_cast<size_t>(d.target), r);
        n.last_ready = std::max(n.last_ready, static_cast<double>(r));
        // Held or not (a PFS read in flight, so never in the decomposed
        // loop): the bound only has to be at least the held copies' latest.
        held_last_ready_ = std::max(held_last_ready_, static_cast<double>(r));
        auto& pending = nodes_[d.node].pending_copies;
        for (size_t k = 0; k < pending.size(); ++k) {
          if (pending[k].idx != static_cast<uint32_t>(d.target)) continue;
          pending[k] = pending.back();
          pending.pop_back();
          break;
        }
        break;
      }
    }
  }

  // Copy `idx` (of `sample`) of `node` is complete `offset` seconds after `fetch` ends.
  void SetReadyAfter(uint32_t node, NodeCache& cache, size_t idx, int64_t sample, const Fetch& fetch, double offset,
                     double now) {
    if (fetch.job < 0) {
      SetReady(node, cache, idx, sample, now + fetch.seconds + offset, now);
      return;
    }
    cache.Start(idx, kPendingReady, now);
    --nodes_[node].unfilled;
    if (IsHeld(node, sample)) --held_unstarted_;  // its ready time: Resolve
    const double after = fetch.seconds + offset;
    dependents_[static_cast<size_t>(fetch.job)].push_back(
        Dependent{Dependent::kCopy, node, static_cast<int64_t>(idx), after});
    nodes_[node].pending_copies.push_back(PendingCopy{static_cast<uint32_t>(idx), fetch.job, after});
  }

  // A read of a copy that is not complete: `extra` seconds after it is.
  Fetch AfterCopy(uint32_t node, uint32_t idx, float ready, double extra, uint8_t source, double now) {
    if (ready != kPendingReady) return {(ready - now) + extra, source};
    for (const PendingCopy& p : nodes_[node].pending_copies)
      if (p.idx == idx) return {p.after + extra, source, p.job};
    throw Error("simulator: a pending copy without its PFS read; a bug");
  }

  // `d` waits `seconds` after `fetch` (now + seconds when it has no job).
  void When(const Fetch& fetch, Dependent d, double now) {
    if (fetch.job < 0) {
      Resolve(d, now + fetch.seconds + d.offset);
      return;
    }
    d.offset += fetch.seconds;
    dependents_[static_cast<size_t>(fetch.job)].push_back(d);
  }

  // Fetching a sample the node does not hold: from its holder's class
  // (a peer) where the policy reads peers, else from the PFS.
  Fetch Remote(int node, uint32_t thread, int64_t sample, int64_t size, double now) {
    if (peer_class_ > 0)  // decomposed, every held copy complete and in that class: no lookup
      return {TransferSeconds(size, peer_mbps_[static_cast<size_t>(peer_class_)]), kFromPeer};
    if (traits_.peers) {
      const Holder holder = holder_[static_cast<size_t>(sample)];
      const int h = holder.node;
      if (h >= 0 && h != node) {
        NodeCache& peer = caches_[static_cast<size_t>(h)];
        const uint32_t idx = holder.index;
        const int j = peer.Class(idx);
        if (!traits_.runtime_sources || prefer_peer_[static_cast<size_t>(j)]) {
          const double link = TransferSeconds(size, peer_mbps_[static_cast<size_t>(j)]);
          // Decomposed (CanDecompose): every held copy is complete, and the
          // holder's thread may be writing its other copies' state now.
          if (decomposed_) return {link, kFromPeer};
          const float ready = peer.Ready(idx, now);
          if (ready <= now) return {link, kFromPeer};
          if (ready != kNotStarted) return AfterCopy(static_cast<uint32_t>(h), idx, ready, link, kFromPeer, now);
          // The holder fills it on the spot (read from the PFS, stored), then sends it.
          Fetch read = PfsRead(static_cast<uint32_t>(node), thread, size, now);
          SetReadyAfter(static_cast<uint32_t>(h), peer, static_cast<size_t>(idx), sample, read, Store(size, j), now);
          read.seconds += link;
          read.source = kFromPeer;
          return read;
        }
      }
    }
    return PfsRead(static_cast<uint32_t>(node), thread, size, now);
  }

  int64_t SampleOf(int node, int64_t item) {
    NodeState& n = nodes_[static_cast<size_t>(node)];
    const int epoch = static_cast<int>(item / n.items_per_epoch);
    const int64_t j = item % n.items_per_epoch;
    if (traits_.locality_batches && epoch >= 1) return Assignment(epoch)[static_cast<size_t>(plan_.GlobalPosition(node, j))];
    if (traits_.scheme != DistributionScheme::kUniform) {
      if (epoch != n.claim_epoch) {
        n.claim_order.emplace(plan_.Epoch(node, epoch));
        n.claim_epoch = epoch;
      }
      return n.claim_order->At(j);
    }
    // Uniform (EpochOrder::At without its divisions): the epoch's
    // permutation at the item's global position, the node's slices of the
    // global batches in order. Claims go item by item; anything else
    // starts the walk over from the plan's position.
    if (epoch != n.claim_epoch) {
      n.claim_perm.emplace(plan_.EpochPermutation(epoch));
      n.claim_epoch = epoch;
      n.cursor_item = -1;
    }
    if (j != n.cursor_item) {
      const int64_t per_batch = plan_.NominalLocalBatchSize(node);
      n.cursor_batch = std::min(j / per_batch, plan_.BatchesPerEpoch() - 1);
      const PositionRange slice = plan_.RankSlice(node, n.cursor_batch);
      const int64_t offset = j - n.cursor_batch * per_batch;
      n.cursor_position = slice.begin + offset;
      n.cursor_left = slice.size - offset;
      n.cursor_item = j;
    }
    const int64_t sample = static_cast<int64_t>(n.claim_perm->At(static_cast<uint64_t>(n.cursor_position)));
    ++n.cursor_item;
    ++n.cursor_position;
    if (--n.cursor_left == 0 && ++n.cursor_batch < plan_.BatchesPerEpoch()) {
      const PositionRange slice = plan_.RankSlice(node, n.cursor_batch);
      n.cursor_position = slice.begin;
      n.cursor_left = slice.size;
    }
    return sample;
  }

  // locality_aware: epoch e's global batches (the same sets as the plan's)
  // with each sample moved, where there is room, into the slice of the node
  // caching it; the rest fill the remaining slots in order.
  const std::vector<uint32_t>& Assignment(int epoch) {
    std::unique_lock<std::mutex> lock(assignments_mu_, std::defer_lock);
    if (decomposed_) lock.lock();  // nodes run on several threads there
    auto it = assignments_.find(epoch);
    if (it != assignments_.end()) return it->second;
    const IndexPermutation perm = plan_.EpochPermutation(epoch);
    const int64_t batches = plan_.BatchesPerEpoch();
    std::vector<uint32_t> out(static_cast<size_t>(std::max<int64_t>(plan_.GlobalBatchEnd(batches - 1), 1)));
    std::vector<int64_t> used(static_cast<size_t>(w_.nodes));
    std::vector<PositionRange> slices(static_cast<size_t>(w_.nodes));
    std::vector<uint32_t> rest;
    for (int64_t h = 0; h < batches; ++h) {
      std::fill(used.begin(), used.end(), 0);
      rest.clear();
      for (int i = 0; i < w_.nodes; ++i) slices[static_cast<size_t>(i)] = plan_.RankSlice(i, h);
      auto place = [&](int i, uint32_t s) {
        const auto at = static_cast<size_t>(i);
        out[static_cast<size_t>(slices[at].begin + used[at]++)] = s;
      };
      auto has_room = [&](int i) { return used[static_cast<size_t>(i)] < slices[static_cast<size_t>(i)].size; };
      for (int64_t p = plan_.GlobalBatchBegin(h); p < plan_.GlobalBatchEnd(h); ++p) {
        const auto s = static_cast<uint32_t>(perm.At(static_cast<uint64_t>(p)));
        const int owner = holder_[s].node;
        if (owner >= 0 && has_room(owner)) {
          place(owner, s);
        } else {
          rest.push_back(s);
        }
      }
      size_t k = 0;
      for (int i = 0; i < w_.nodes && k < rest.size(); ++i)
        while (has_room(i) && k < rest.size()) place(i, rest[k++]);
    }
    return assignments_.emplace(epoch, std::move(out)).first->second;
  }

  // Where a staging worker gets a sample, and how long it takes.
  Fetch StagingFetch(int node, uint32_t thread, int64_t item, int64_t sample, int64_t size, double now) {
    if (decomposed_ && only_class_[static_cast<size_t>(node)] > 0 && nodes_[static_cast<size_t>(node)].settled) {
      // Every read of this node is in its one class and complete
      // (SettleNode): the class's rate, without looking the copy up.
      const int j = only_class_[static_cast<size_t>(node)];
      return {TransferSeconds(size, local_mbps_[static_cast<size_t>(j)]), FromClass(j)};
    }
    NodeCache& cache = caches_[static_cast<size_t>(node)];
    const int64_t idx = cache.Find(sample);
    if (idx >= 0) {
      const int j = cache.Class(static_cast<size_t>(idx));
      const float ready = cache.Ready(static_cast<size_t>(idx), now);
      const double read = TransferSeconds(size, local_mbps_[static_cast<size_t>(j)]);
      if (ready <= now) return {read, FromClass(j)};
      if (ready != kNotStarted) {
        // The thesis's staging pool does not wait for a prefetch thread's
        // fill in flight: it reads the sample from its source itself
        // (StagingPoolPrefetcher with pfs_prefetch, as its HDMLP runs).
        if (!(thesis_ && traits_.prefetch_threads && !traits_.preload))
          return AfterCopy(static_cast<uint32_t>(node), static_cast<uint32_t>(idx), ready, read, FromClass(j),
                           now);  // wait for the fill in flight
        return Remote(node, thread, sample, size, now);
      }
      const Fetch fetched = Remote(node, thread, sample, size, now);
      if (traits_.fill_on_the_way)
        SetReadyAfter(static_cast<uint32_t>(node), cache, static_cast<size_t>(idx), sample, fetched, Store(size, j),
                      now);
      return fetched;
    }
    if (traits_.opportunistic && !cache.empty() &&
        item >= nodes_[static_cast<size_t>(node)].items_per_epoch) {
      // DeepIO's entropy-aware mode serves a locally cached sample instead.
      const int j = cache.Class(0);
      return {TransferSeconds(size, local_mbps_[static_cast<size_t>(j)]), FromClass(j)};
    }
    return Remote(node, thread, sample, size, now);
  }

  void EndRead(uint32_t node, uint32_t thread) {
    if (thesis_) pfs_->EndFixed(node, thread);  // physical: PfsEnded ends the stream
  }

  // Wakes one idle staging worker if it could claim the next item now; a
  // worker that claims wakes the next one, so a freed buffer fills up
  // without waking every worker for every taken item.
  void WakeIdle(NodeState& n, uint32_t node, double now) {
    if (n.idle_workers.empty() || n.next_claim >= n.total_items) return;
    if (traits_.on_demand) {
      if (!(n.consumer_waiting && n.next_claim == n.next_take)) return;
    } else {
      const int64_t size = w_.sizes[static_cast<size_t>(NextClaimSample(node))];
      if (n.bytes_in_flight > 0 && n.bytes_in_flight + size > staging_capacity_) return;
    }
    Push(now, node, n.idle_workers.back());
    n.idle_workers.pop_back();
  }

  // The sample event `e` will look up, where it is known without side
  // effects: a prefetch thread's next fill, or a staging worker's claim
  // once looked up; else -1.
  int64_t NextSample(const Event& e) const {
    if (e.thread >= kPfsDone) return -1;
    const NodeState& n = nodes_[e.node];
    if (e.thread < staging_threads_)
      return n.next_claim < n.looked_up ? n.claim_samples[static_cast<size_t>(n.next_claim % kClaimsAhead)] : -1;
    const auto j = static_cast<size_t>(thread_class_[e.thread]);
    const NodeCache& cache = caches_[e.node];
    const uint32_t cursor = n.fill_cursor[j];
    return cursor < cache.class_begin(j + 1) ? static_cast<int64_t>(cache.FillSample(cursor)) : -1;
  }

  // Hints for the event after next: its sample's lookup and holder.
  void PrefetchLookup(const Event& e) const {
    const int64_t sample = NextSample(e);
    if (sample < 0) return;
    caches_[e.node].samples().PrefetchFind(sample);
    if (!holder_.empty()) __builtin_prefetch(&holder_[static_cast<size_t>(sample)]);
  }

  // Hints for the next event: its copy's state and the holder's (the
  // lookups, asked for one event earlier, have most likely arrived).
  void PrefetchCopyState(const Event& e) const {
    const int64_t sample = NextSample(e);
    if (sample < 0) return;
    const int64_t idx = caches_[e.node].Find(sample);
    if (idx >= 0) caches_[e.node].PrefetchCopy(static_cast<size_t>(idx));
    if (holder_.empty()) return;
    const Holder& h = holder_[static_cast<size_t>(sample)];
    if (h.node >= 0 && static_cast<uint32_t>(h.node) != e.node) caches_[static_cast<size_t>(h.node)].PrefetchCopy(h.index);
  }

  void StagingWorker(uint32_t node, uint32_t thread, double now) {
    NodeState& n = nodes_[node];
    EndRead(node, thread);
    if (n.next_claim >= n.total_items) return;
    if (traits_.on_demand && !(n.consumer_waiting && n.next_claim == n.next_take)) {
      n.idle_workers.push_back(thread);
      return;
    }
    const int64_t sample = NextClaimSample(node);
    const int64_t size = w_.sizes[static_cast<size_t>(sample)];
    if (n.bytes_in_flight > 0 && n.bytes_in_flight + size > staging_capacity_) {
      n.idle_workers.push_back(thread);
      return;
    }
    Fetch fetch = StagingFetch(static_cast<int>(node), thread, n.next_claim, sample, size, now);
    fetch.seconds += AfterFetch(size);
    n.flight.push_back(InFlight{fetch.job < 0 ? now + fetch.seconds : kPendingTime, size, fetch.source});
    n.bytes_in_flight += size;
    if (n.consumer_waiting && n.next_claim == n.next_take) {
      n.consumer_waiting = false;
      if (fetch.job < 0) {
        Push(now + fetch.seconds, node, kConsumer);
      } else {
        n.consumer_blocked = true;  // woken when the item's ready time is known
      }
    }
    if (fetch.job >= 0) When(fetch, Dependent{Dependent::kFlightItem, node, n.next_claim, 0}, now);
    When(fetch, Dependent{Dependent::kThreadEvent, node, thread, 0}, now);
    ++n.next_claim;
    if (n.next_claim < n.total_items) NextClaimSample(node);  // keeps the look-ahead kClaimsAhead deep
    WakeIdle(n, node, now);
  }

  // The sample of node's next claim (next_claim < total_items). The next
  // kClaimsAhead claims' samples are looked up ahead, in item order (as
  // SampleOf walks the plan, so when changes nothing), and their memory asked
  // for: by the time a claim comes, its size and lookup have arrived.
  int64_t NextClaimSample(uint32_t node) {
    NodeState& n = nodes_[node];
    for (const int64_t end = std::min(n.next_claim + kClaimsAhead, n.total_items); n.looked_up < end; ++n.looked_up) {
      const int64_t sample = SampleOf(static_cast<int>(node), n.looked_up);
      n.claim_samples[static_cast<size_t>(n.looked_up % kClaimsAhead)] = sample;
      PrefetchSample(node, sample, false);
    }
    return n.claim_samples[static_cast<size_t>(n.next_claim % kClaimsAhead)];
  }

  // Asks the CPU for what a read of `sample` by `node` will look at: its
  // size, the node's lookup, and where `holder` its holder (a hint: no
  // effect on any result).
  void PrefetchSample(uint32_t node, int64_t sample, bool holder) const {
    __builtin_prefetch(&w_.sizes[static_cast<size_t>(sample)]);
    caches_[node].samples().PrefetchFind(sample);
    if (holder && !holder_.empty() && peer_class_ == 0) __builtin_prefetch(&holder_[static_cast<size_t>(sample)]);
  }

  void PrefetchThread(uint32_t node, uint32_t thread, double now) {
    NodeState& n = nodes_[node];
    EndRead(node, thread);
    NodeCache& cache = caches_[node];
    const int j = thread_class_[thread];
    uint32_t& cursor = n.fill_cursor[static_cast<size_t>(j)];
    const uint32_t end = cache.class_begin(static_cast<size_t>(j) + 1);
    size_t idx = 0;  // the copy at the cursor
    for (; cursor < end; ++cursor) {
      idx = static_cast<size_t>(cache.Find(cache.FillSample(cursor)));
      if (!cache.Started(idx)) break;
    }
    if (cursor >= end) {
      if (traits_.preload && --preloading_threads_ == 0) StartTraining(now);
      return;
    }
    const bool copy = cursor >= cache.copy_begin(static_cast<size_t>(j));
    const int64_t sample = cache.FillSample(cursor++);
    const int64_t size = w_.sizes[static_cast<size_t>(sample)];
    // The class's next fills (whichever thread takes them): their lookups,
    // and the copies' state of nearer ones (hints).
    if (cursor + kFillLookupAhead < end) PrefetchSample(node, cache.FillSample(cursor + kFillLookupAhead), true);
    if (cursor + kFillStateAhead < end) {
      const int64_t later = cache.Find(cache.FillSample(cursor + kFillStateAhead));
      if (later >= 0) cache.PrefetchCopy(static_cast<size_t>(later));
    }
    // A copy of a peer's staged sample comes from its class j over b_c.
    const Fetch fetch = copy ? Fetch{TransferSeconds(size, peer_mbps_[static_cast<size_t>(j)]), kFromPeer}
                             : Remote(static_cast<int>(node), thread, sample, size, now);
    const double store = Store(size, j);
    if (fetch.job < 0) {
      const double seconds = fetch.seconds + store;
      SetReady(node, cache, idx, sample, now + seconds, now);
      Push(now + seconds, node, thread);
      return;
    }
    SetReadyAfter(node, cache, idx, sample, fetch, store, now);
    When(fetch, Dependent{Dependent::kThreadEvent, node, thread, store}, now);
  }

  void Consumer(uint32_t node, double now) {
    NodeState& n = nodes_[node];
    if (n.taken_in_batch == n.local_batch) {
      Arrive(n, now);
      return;
    }
    if (n.next_take >= n.next_claim) {
      n.consumer_waiting = true;
      if (traits_.on_demand) WakeIdle(n, node, now);
      return;
    }
    const InFlight item = n.flight.front();
    if (item.ready == kPendingTime) {
      n.consumer_blocked = true;  // its PFS read is in flight: Resolve wakes the consumer
      return;
    }
    if (item.ready > now) {
      Push(item.ready, node, kConsumer);
      return;
    }
    n.flight.pop_front();
    n.bytes_in_flight -= item.size();
    n.bytes_by_source[item.source()] += item.size();
    if (!traits_.on_demand) WakeIdle(n, node, now);
    const double compute = Compute(item.size());
    n.batch_compute += compute;
    ++n.taken_in_batch;
    ++n.next_take;
    Push(now + compute, node, kConsumer);
  }

  // The barrier after every global batch.
  void Arrive(NodeState& n, double now) {
    if (decomposed_) {  // RunDecomposed completes the barrier once every node arrived
      n.arrived = true;
      n.arrival = now;
      return;
    }
    barrier_time_ = std::max(barrier_time_, now);
    barrier_compute_ = std::max(barrier_compute_, n.batch_compute);
    if (++barrier_count_ < w_.nodes) return;
    CompleteBarrier();
  }

  // Every node arrived: the barrier's time and compute are the maxima over
  // the nodes (barrier_time_, barrier_compute_); release the consumers.
  void CompleteBarrier() {
    compute_seconds_ += barrier_compute_;
    const int64_t per_epoch = plan_.BatchesPerEpoch();
    ++global_batch_;
    if (global_batch_ % per_epoch == 0) {
      epoch_seconds_.push_back(barrier_time_ - epoch_start_);
      epoch_start_ = barrier_time_;
      const int next_epoch = static_cast<int>(global_batch_ / per_epoch);
      while (!assignments_.empty() && assignments_.begin()->first < next_epoch) assignments_.erase(assignments_.begin());
    }
    job_end_ = barrier_time_;
    const double start = barrier_time_;
    release_time_ = start;
    barrier_count_ = 0;
    barrier_time_ = 0;
    barrier_compute_ = 0;
    if (global_batch_ == per_epoch * w_.epochs) return;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      nodes_[i].taken_in_batch = 0;
      nodes_[i].batch_compute = 0;
      nodes_[i].local_batch = plan_.LocalBatchSize(static_cast<int>(i), global_batch_ % per_epoch);
      PushRelease(start, static_cast<uint32_t>(i));
    }
    if (!decomposed_ && options_.decompose && CanDecompose(start)) switch_to_decomposed_ = true;
  }

  void Dispatch(const Event& e) {
    if (e.thread == kPfsDone) {
      PfsEnded(e.node, e.seq, e.time);
    } else if (e.thread == kConsumer) {
      Consumer(e.node, e.time);
    } else if (e.thread < staging_threads_) {
      StagingWorker(e.node, e.thread, e.time);
    } else {
      PrefetchThread(e.node, e.thread, e.time);
    }
  }

  // Whether, from the barrier at `now` on, nodes share nothing between
  // barriers: no PFS stream is in flight, and either
  //  - every sample has a holder whose copy peers read (holders_cover_), and
  //    every held copy is complete: a read a node does not serve itself, and
  //    every fill of its own copies still to come, is a peer read of a
  //    complete copy at its class's rate, which touches no other node's
  //    state (Remote); a node's own copies are its own business; or
  //  - no copy is left to fill and every copy is complete, and no later read
  //    can go to the PFS (never_pfs_).
  bool CanDecompose(double now) const {
    if (pfs_->streams() != 0) return false;
    if (holders_cover_ && held_unstarted_ == 0 && held_last_ready_ <= now) return true;
    if (!never_pfs_) return false;
    return std::all_of(nodes_.begin(), nodes_.end(),
                       [now](const NodeState& n) { return n.unfilled == 0 && n.last_ready <= now; });
  }

  // No read can ever go to the PFS once every copy is filled: every sample
  // has a holder whose copy peers read (holders_cover_), or every node caches
  // every sample it reads.
  void FindWhetherNeverPfs(const std::vector<uint8_t>& caches_every_read) {
    never_pfs_ = std::all_of(caches_every_read.begin(), caches_every_read.end(), [](uint8_t b) { return b != 0; });
    if (!traits_.peers || holder_.empty()) return;
    for (size_t s = 0; s < holder_.size(); ++s) {
      const int h = holder_[s].node;
      if (h < 0) return;
      const int j = caches_[static_cast<size_t>(h)].Class(holder_[s].index);
      if (traits_.runtime_sources && !model_.PreferPeer(j)) return;
    }
    holders_cover_ = never_pfs_ = true;
    held_unstarted_ = static_cast<int64_t>(holder_.size());
  }

  // Decomposed loop: where every sample has a holder (holders_cover_) and
  // every node's copies sit in one class, the same for all, a peer read needs
  // no holder lookup (Remote): every held copy is complete and in that class.
  void FindPeerClass() {
    if (!holders_cover_) return;
    int j = 0;
    for (const NodeCache& c : caches_) {
      if (c.empty()) continue;
      if (c.single_class() == 0 || (j != 0 && c.single_class() != j)) return;
      j = c.single_class();
    }
    peer_class_ = j;
  }

  // Decomposed loop, before node i runs on from a barrier: once every copy
  // of the node is complete, its ready times are dropped and its reads from
  // its one class need no lookup (StagingFetch). Complete by the earliest
  // time it will still ask about: its next event's, which may lie before the
  // barrier's release (a node runs only until its consumer arrives).
  void SettleNode(size_t i) {
    NodeState& n = nodes_[i];
    if (n.settled || n.unfilled != 0) return;
    const double now = n.heap.empty() ? release_time_ : std::min(release_time_, n.heap.top().time);
    if (n.last_ready > now) return;
    caches_[i].SettleAll();
    n.settled = true;
  }

  // Runs `f(node)` for every node, spread over the planning threads (each
  // node on one thread); rethrows the first exception after joining.
  template <typename F>
  void ForEachNode(F&& f) {
    const int nodes = w_.nodes;
    const int workers = std::max(1, std::min(decompose_threads_, nodes / 32));
    if (workers == 1) {
      for (int i = 0; i < nodes; ++i) f(static_cast<size_t>(i));
      return;
    }
    std::exception_ptr error;
    std::mutex error_mu;
    auto work = [&](int t) {
      try {
        for (int i = nodes * t / workers, end = nodes * (t + 1) / workers; i < end; ++i) f(static_cast<size_t>(i));
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
      }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < workers; ++t) pool.emplace_back(work, t);
    work(0);
    for (auto& t : pool) t.join();
    if (error) std::rethrow_exception(error);
  }

  // The event loop from a barrier where CanDecompose holds on: each node's
  // events run on their own, from the barrier's release until its consumer
  // arrives at the next barrier, and the barrier then takes the maxima
  // over the nodes. A node's events run in the event-by-event loop's order
  // (kRelease) and touch only its own state, so the results are the same;
  // but each step is a heap of one node's threads, the node's data stays
  // in the CPU's caches, and the nodes run on several threads.
  void RunDecomposed() {
    decomposed_ = true;
    FindPeerClass();
    while (!events_.empty()) {
      const Event e = events_.top();
      events_.pop();
      if (e.thread == kPfsDone) {  // stale: no PFS read is in flight
        ++dropped_events_;
        continue;
      }
      NodeState& n = nodes_[e.node];
      n.heap.push(e);
    }
    for (NodeState& n : nodes_) n.seq = seq_;  // later pushes follow every earlier one
    const int64_t total = plan_.BatchesPerEpoch() * w_.epochs;
    auto run = [&](size_t i, bool until_arrival) {
      NodeState& n = nodes_[i];
      SettleNode(i);
      while (!n.heap.empty() && !(until_arrival && n.arrived)) {
        const Event e = n.heap.top();
        n.heap.pop();
        ++n.events;
        Dispatch(e);
      }
    };
    while (global_batch_ < total) {
      ForEachNode([&](size_t i) { run(i, true); });
      barrier_time_ = 0;
      barrier_compute_ = 0;
      for (NodeState& n : nodes_) {
        if (!n.arrived) throw Error("simulator: a node never reached the barrier in the decomposed loop; a bug");
        n.arrived = false;
        barrier_time_ = std::max(barrier_time_, n.arrival);
        barrier_compute_ = std::max(barrier_compute_, n.batch_compute);
      }
      CompleteBarrier();
      ++decomposed_batches_;
    }
    ForEachNode([&](size_t i) { run(i, false); });  // the reads still in flight (the event count)
  }

  void StartTraining(double now) {
    startup_ = now;
    epoch_start_ = 0;
    for (uint32_t i = 0; i < nodes_.size(); ++i) {
      for (uint32_t t = 0; t < staging_threads_; ++t) Push(now, i, t);
      Push(now, i, kConsumer);
    }
  }

  void RunEvents(SimulationResult& r) {
    const auto& classes = model_.config().storage_classes;
    staging_capacity_ = model_.CapacityBytes(0);
    staging_threads_ = traits_.on_demand ? 1 : static_cast<uint32_t>(classes[0].threads);
    thread_class_.assign(staging_threads_, 0);
    if (traits_.prefetch_threads)
      for (size_t j = 1; j < classes.size(); ++j)
        for (int k = 0; k < classes[j].threads; ++k) thread_class_.push_back(static_cast<int>(j));
    nodes_.resize(static_cast<size_t>(w_.nodes));
    pfs_.emplace(model_, w_.nodes, static_cast<int>(thread_class_.size()), options_.trace_pfs,
                 [this](double time, uint32_t group) {
                   const uint64_t seq = seq_;
                   Push(time, group, kPfsDone);
                   return seq;
                 });
    if (!thesis_) dependents_.resize(static_cast<size_t>(w_.nodes) * thread_class_.size());
    for (int i = 0; i < w_.nodes; ++i) {
      NodeState& n = nodes_[static_cast<size_t>(i)];
      n.items_per_epoch = plan_.RankEpochSize(i);
      n.total_items = n.items_per_epoch * w_.epochs;
      n.local_batch = plan_.LocalBatchSize(i, 0);
      n.bytes_by_source.assign(byte_counts_.size(), 0);
      const NodeCache& c = caches_[static_cast<size_t>(i)];
      n.unfilled = static_cast<int64_t>(c.size());
      n.fill_cursor.assign(classes.size(), 0);
      for (size_t j = 0; j < c.classes(); ++j) n.fill_cursor[j] = c.class_begin(j);
      for (uint32_t t = staging_threads_; t < thread_class_.size(); ++t) {
        const auto j = static_cast<size_t>(thread_class_[t]);
        if (j < c.classes() && c.class_begin(j + 1) > c.class_begin(j)) {
          Push(0, static_cast<uint32_t>(i), t);
          ++preloading_threads_;
        }
      }
    }
    if (!traits_.preload || preloading_threads_ == 0) StartTraining(0);
    while (!events_.empty() && !switch_to_decomposed_) {
      const Event e = events_.top();
      events_.pop();
      ++r.events;
      // Nodes take turns at random here, so most of an event's reads miss the
      // CPU's caches: ask early for what the next events will read, a
      // pipeline of hints with no effect on any result. The event after
      // next: its copy's state (its lookup was asked for one event ago);
      // the one after that: its sample's lookup.
      if (const Event* later = events_.ahead(kLookupAhead)) PrefetchLookup(*later);
      if (const Event* next = events_.ahead(kCopyStateAhead)) PrefetchCopyState(*next);
      Dispatch(e);
    }
    if (switch_to_decomposed_) {
      for (const NodeState& n : nodes_) r.decomposed_unfilled += n.unfilled;
      const double t0 = Seconds();
      RunDecomposed();
      r.decomposed_seconds = Seconds() - t0;
    }
    r.events += dropped_events_;
    for (const NodeState& n : nodes_) {
      r.events += n.events;
      for (size_t k = 0; k < byte_counts_.size(); ++k) byte_counts_[k] += n.bytes_by_source[k];
    }
    if (global_batch_ != plan_.BatchesPerEpoch() * w_.epochs)
      throw Error("simulator: the job did not finish (" + std::to_string(global_batch_) + " global batches); a bug");
    r.seconds = job_end_;
    r.epoch_seconds = epoch_seconds_;
    r.compute_seconds = compute_seconds_;
    r.startup_seconds = traits_.preload ? startup_ : 0;
    r.decomposed_batches = decomposed_batches_;
    r.pfs_trace = pfs_->TakeTrace();
  }

  const Workload& w_;
  Policy policy_;
  PolicyTraits traits_;
  PerformanceModel model_;
  bool thesis_;
  AccessPlan plan_;
  SimulationOptions options_;

  // Per class j: model_'s LocalClassMbps, PeerClassMbps,
  // WriteClassMbps and PreferPeer; and its StagingWriteMbps.
  std::vector<double> local_mbps_, peer_mbps_, write_mbps_;
  std::vector<uint8_t> prefer_peer_;
  double staging_write_mbps_ = 0;

  SimMemory memory_;  // the caches' and holders' arrays (sim_memory.h): before them, to outlive them
  std::vector<NodeCache> caches_;
  struct Holder {
    int32_t node;    // the node whose copy peers read, or -1
    uint32_t index;  // the copy's index in that node's cache
  };
  SimVector<Holder> holder_;  // per sample (policies with peers or locality batches)
  std::map<int, std::vector<uint32_t>> assignments_;
  std::mutex assignments_mu_;
  std::optional<PfsSharing> pfs_;
  std::vector<std::vector<Dependent>> dependents_;  // by PFS job id: what waits for the read in flight
  int64_t dropped_events_ = 0;  // stale PFS end events left when the loop decomposed
  // Per node: the class holding every sample it reads, where one does
  // (0: none, or reads that need a lookup).
  std::vector<uint8_t> only_class_;
  // The copies peers read (holder_): how many have not started, and the
  // latest ready time among them (at least; CanDecompose).
  int64_t held_unstarted_ = 0;
  double held_last_ready_ = 0;
  bool holders_cover_ = false;   // FindWhetherNeverPfs
  int peer_class_ = 0;           // FindPeerClass
  bool never_pfs_ = false;       // FindWhetherNeverPfs
  double release_time_ = 0;      // the last barrier's release
  bool switch_to_decomposed_ = false;
  bool decomposed_ = false;      // RunDecomposed is running
  int decompose_threads_ = 1;
  int64_t decomposed_batches_ = 0;
  std::vector<NodeState> nodes_;
  std::vector<int> thread_class_;  // per thread id: 0 staging, j prefetching class j
  uint32_t staging_threads_ = 0;
  int64_t staging_capacity_ = 0;
  LookaheadQueue events_;  // the event-by-event loop's (nodes_[i].heap: the decomposed loop's)
  uint64_t seq_ = 0;
  int64_t pfs_read_bytes_ = 0;
  std::vector<int64_t> byte_counts_;
  int preloading_threads_ = 0;
  double startup_ = 0;
  int barrier_count_ = 0;
  double barrier_time_ = 0;
  double barrier_compute_ = 0;
  double compute_seconds_ = 0;
  int64_t global_batch_ = 0;
  double epoch_start_ = 0;
  double job_end_ = 0;
  std::vector<double> epoch_seconds_;
};

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
  Engine engine(config, workload, policy, options);
  return engine.Run();
}

}  // namespace hdmlp::sim
