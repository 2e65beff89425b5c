// EngineState: what the parts of one simulation share (simulator.h): the
// job and its model, every node's cached copies and the holders peers read,
// each node's staging, consumer and decomposition state, and the event
// queue.
//
// Simulate() runs a job through four parts, each acting on its share of
// this state:
//   FillPhase (fill_phase.h)          plans every node's caches; its prefetch threads fill them
//   Reads (reads.h)                   where a read gets its bytes and when it ends, and the
//                                     state of the copies reads start filling
//   EventLoop (event_loop.h)          staging workers, consumers and barriers, event by event
//   Decomposition (decomposition.h)   once the nodes share nothing, each node's events on their own
// This header holds the records they pass between them (Fetch, Dependent)
// and the few helpers the loop's hot paths call on nearly every event
// (Push, the transfer costs, the memory hints), inline: the parts sit in
// separate files, and these must not cost a call each.
//
// Thread-safety: none, except in the decomposed loop, where each node's
// events run on one of several threads: an event then writes only its own
// node's NodeState and NodeCache, and reads what no thread writes there
// (decomposition.h says why that holds).
#ifndef HDMLP_SIM_ENGINE_STATE_H_
#define HDMLP_SIM_ENGINE_STATE_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <vector>

#include "hdmlp/config/config.h"
#include "hdmlp/plan/access_plan.h"
#include "hdmlp/sim/event_queue.h"
#include "hdmlp/sim/model.h"
#include "hdmlp/sim/node_cache.h"
#include "hdmlp/sim/policy.h"
#include "hdmlp/sim/sim_memory.h"
#include "hdmlp/sim/simulator.h"

// The event loop's hot path: what EventLoop::Dispatch runs on nearly every
// event (a staging worker's claim, a consumer's take, a prefetch thread's
// fill) compiles into Dispatch as one function. GCC inlines a function with
// internal linkage that is called once whatever its size, but these have
// external linkage (their parts sit in separate files), so they say so:
// as calls they cost the event loop about 4% more instructions
// (docs/simulator.md, "The engine's parts").
#if defined(__GNUC__)
#define HDMLP_SIM_HOT inline __attribute__((always_inline))
#else
#define HDMLP_SIM_HOT inline
#endif

namespace hdmlp::sim {

// How many of a node's next claims have their samples looked up, and their
// memory asked for (EventLoop::NextClaimSample).
constexpr int64_t kClaimsAhead = 8;

// Where a consumed sample came from, for the byte counts: 0 the PFS, 1 a
// peer's class, 2 "ready" (lower_bound), 2 + j the node's own class j.
enum : uint8_t { kFromPfs = 0, kFromPeer = 1, kFromReady = 2 };
inline uint8_t FromClass(int j) { return static_cast<uint8_t>(kFromReady + j); }

// A copy or item whose ready time waits on a PFS read in flight (physical
// reading): known only when that read ends.
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

// Per sample: the node whose copy peers read, side by side with the copy's
// index there, so that a peer read costs one cache miss for both.
struct Holder {
  int32_t node;    // -1: none
  uint32_t index;  // the copy's index in that node's cache
};

struct NodeState {
  // Staging (EventLoop).
  int64_t items_per_epoch = 0;
  int64_t total_items = 0;
  int64_t next_claim = 0;  // staging: next item (over all epochs) to claim
  int64_t next_take = 0;   // consumer: next item to take
  int64_t bytes_in_flight = 0;
  // The samples of items [next_claim, looked_up), at most kClaimsAhead,
  // by item % kClaimsAhead (EventLoop::NextClaimSample).
  std::array<int64_t, kClaimsAhead> claim_samples{};
  int64_t looked_up = 0;
  std::deque<InFlight> flight;  // items [next_take, next_claim)
  std::vector<uint32_t> idle_workers;
  bool consumer_waiting = false;
  bool consumer_blocked = false;  // waits for the ready time of the next item (a PFS read in flight)
  int64_t taken_in_batch = 0;
  int64_t local_batch = 0;
  double batch_compute = 0;
  // Reads: the node's copies waiting on a PFS read.
  std::vector<PendingCopy> pending_copies;
  // FillPhase: per class, the next fill entry.
  std::vector<uint32_t> fill_cursor;
  // Claims (EventLoop::SampleOf).
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
  int64_t events = 0;                    // events of this node processed (decomposed loop)
  int64_t unfilled = 0;     // the node's cached copies whose fill has not started
  double last_ready = 0;    // the latest ready time of the node's copies so far
  bool settled = false;     // decomposed loop: every copy complete, ready times dropped
  // Decomposed loop only: the node's own event heap and push counter, and
  // its consumer's arrival at the barrier.
  EventQueue heap;
  uint64_t seq = 0;
  bool arrived = false;
  double arrival = 0;
};

struct EngineState {
  // `w` must outlive this.
  EngineState(const Config& config, const Workload& w, Policy policy, const SimulationOptions& options);
  EngineState(const EngineState&) = delete;
  EngineState& operator=(const EngineState&) = delete;

  // Schedules `thread` of `node` at `time`: in the global queue, or, in the
  // decomposed loop, in the node's own.
  void Push(double time, uint32_t node, uint32_t thread) {
    if (decomposed) {
      NodeState& n = nodes[node];
      n.heap.push(Event{time, n.seq++, node, thread});
      return;
    }
    events.push(Event{time, seq++, node, thread});
  }
  // A barrier's release of node's consumer at `time`: after every other
  // event at that time (kRelease).
  void PushRelease(double time, uint32_t node) {
    if (decomposed) {
      NodeState& n = nodes[node];
      n.heap.push(Event{time, n.seq++ | kRelease, node, kConsumer});
      return;
    }
    events.push(Event{time, seq++ | kRelease, node, kConsumer});
  }

  // Whether node's copy of `sample` is the one peers read, counted in
  // held_* (only where every sample has one: holders_cover).
  bool IsHeld(uint32_t node, int64_t sample) const {
    return holders_cover && holder[static_cast<size_t>(sample)].node == static_cast<int32_t>(node);
  }

  double Compute(int64_t bytes) const { return TransferSeconds(bytes, w.compute_mbps); }
  double Preprocess(int64_t bytes) const {
    return w.preprocess_mbps > 0 ? TransferSeconds(bytes, w.preprocess_mbps) : 0;
  }
  // The thesis's charge for writing a read sample into the staging buffer,
  // paid by every read there: max(s/beta, s/(w_0/p_0)).
  double StagingWrite(int64_t bytes) const {
    return std::max(Preprocess(bytes), TransferSeconds(bytes, staging_write_mbps));
  }
  // What a staging worker adds to its fetch: s/beta, or the thesis's write.
  double AfterFetch(int64_t bytes) const { return thesis ? StagingWrite(bytes) : Preprocess(bytes); }
  // Storing a fetched sample into class j: s/(w_j/p_j), or the thesis's write.
  double Store(int64_t bytes, int j) const {
    return thesis ? StagingWrite(bytes) : TransferSeconds(bytes, write_mbps[static_cast<size_t>(j)]);
  }

  // Asks the CPU for what a read of `sample` by `node` will look at: its
  // size, the node's lookup, and where `with_holder` its holder (a hint: no
  // effect on any result).
  void PrefetchSample(uint32_t node, int64_t sample, bool with_holder) const {
    __builtin_prefetch(&w.sizes[static_cast<size_t>(sample)]);
    caches[node].samples().PrefetchFind(sample);
    if (with_holder && !holder.empty() && peer_class == 0) __builtin_prefetch(&holder[static_cast<size_t>(sample)]);
  }

  // The job.
  const Workload& w;
  const Policy policy;
  const PolicyTraits traits;
  const PerformanceModel model;
  const bool thesis;
  const AccessPlan plan;
  const SimulationOptions options;
  // Per class j: model's LocalClassMbps, PeerClassMbps, WriteClassMbps and
  // PreferPeer (asked for several times per event: once); and its
  // StagingWriteMbps.
  std::vector<double> local_mbps, peer_mbps, write_mbps;
  std::vector<uint8_t> prefer_peer;
  double staging_write_mbps = 0;

  // The threads of every node: per thread id, 0 for a staging worker (ids
  // [0, staging_threads)), j for a prefetch thread of class j (FillPhase).
  std::vector<int> thread_class;
  uint32_t staging_threads = 0;
  int64_t staging_capacity = 0;

  // The caches (FillPhase::PlanCaches). `memory` holds their arrays and the
  // holders: declared before them, to outlive them.
  SimMemory memory;
  std::vector<NodeCache> caches;
  SimVector<Holder> holder;  // per sample (policies with peers or locality batches)
  // Per node: the class holding every sample it reads, where one does
  // (0: none, or reads that need a lookup).
  std::vector<uint8_t> only_class;
  // The copies peers read (holder): how many have not started, and the
  // latest ready time among them (at least; Decomposition::Possible).
  int64_t held_unstarted = 0;
  double held_last_ready = 0;
  bool holders_cover = false;  // every sample has a holder peers read (Decomposition::FindWhetherNeverPfs)
  bool never_pfs = false;      // no read goes to the PFS once every copy is filled (the same)
  int peer_class = 0;          // Decomposition::FindPeerClass

  std::vector<NodeState> nodes;
  LookaheadQueue events;  // the event-by-event loop's (nodes[i].heap: the decomposed loop's)
  uint64_t seq = 0;
  bool decomposed = false;   // the decomposed loop is running
  double release_time = 0;   // the last barrier's release
};

}  // namespace hdmlp::sim

#endif  // HDMLP_SIM_ENGINE_STATE_H_
