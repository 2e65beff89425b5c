// Reads: where a simulated read gets its bytes and when it ends, and the
// state of the copies that reads fill (engine_state.h; simulator.h).
//
// A staging worker's read is served by the node's own copy, a peer's copy
// (the sample's holder, where the policy reads peers and the runtime's
// source model prefers it), or the PFS; a prefetch thread's fill reads a
// peer's copy or the PFS. A copy not yet complete is waited for; a holder's
// copy not yet started is filled on the spot (read from the PFS, stored,
// then sent). A copy's fill starts once and completes at a ready time
// (SetReady), which, behind a PFS read in flight in the physical reading,
// is known only when that read ends (SetReadyAfter, Dependent).
//
// The PFS: the thesis reading fixes a read's rate when it starts (its
// stream ends at its thread's next event: EndRead); the physical reading
// shares the PFS among the streams at every instant (PfsSharing), so a read
// ends at a PFS end event (PfsEnded), and what waits on it (a thread's next
// event, a staging item's ready time, a copy's) waits in `dependents_` by
// the read's job id until then.
//
// Thread-safety: none. In the decomposed loop, where several nodes' events
// run at once, no PFS read is ever in flight and every held copy is
// complete, so a read writes only its own node's state and reads of a peer
// only what planning fixed (the copy's class; decomposition.h).
#ifndef HDMLP_SIM_READS_H_
#define HDMLP_SIM_READS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "hdmlp/errors.h"
#include "hdmlp/sim/engine_state.h"
#include "hdmlp/sim/pfs_sharing.h"

namespace hdmlp::sim {

class Reads {
 public:
  // `s` must outlive this.
  explicit Reads(EngineState& s) : s_(s) {}

  // Once every node's threads are laid out (s.thread_class): the PFS's
  // streams, and the dependents' lists of the physical reading.
  void SetUp();

  // Where staging worker `thread` of `node` gets the sample of its claim
  // `item`, and how long it takes (a fill on the way starts the node's copy).
  HDMLP_SIM_HOT Fetch StagingFetch(int node, uint32_t thread, int64_t item, int64_t sample, int64_t size,
                                   double now);
  // A sample the node does not hold: from its holder's class (a peer) where
  // the policy reads peers, else from the PFS.
  Fetch Remote(int node, uint32_t thread, int64_t sample, int64_t size, double now);
  // The thread's next event: its PFS read, if it started one with a fixed
  // rate (thesis reading), ends now; the physical reading ends it in PfsEnded.
  void EndRead(uint32_t node, uint32_t thread) {
    if (s_.thesis) pfs_->EndFixed(node, thread);
  }
  // A PFS end event (its thread is kPfsDone): the read that ended, if the
  // event is not stale, lets what waited for it go on.
  void PfsEnded(uint32_t group, uint64_t seq, double now);
  // `d` waits `seconds` after `fetch` (now + seconds when it has no job).
  void When(const Fetch& fetch, Dependent d, double now);

  // Marks a copy's fill as started, complete at `ready`: every copy goes
  // from kNotStarted to its ready time once, and the decomposed loop needs
  // to know when the peers' copies (held_*) and each node's own are complete.
  void SetReady(uint32_t node, NodeCache& cache, size_t idx, int64_t sample, double ready, double now);
  // Copy `idx` (of `sample`) of `node` is complete `offset` seconds after
  // `fetch` ends.
  void SetReadyAfter(uint32_t node, NodeCache& cache, size_t idx, int64_t sample, const Fetch& fetch, double offset,
                     double now);

  int streams() const { return pfs_->streams(); }  // PFS reads in flight
  int64_t pfs_read_bytes() const { return pfs_read_bytes_; }
  std::vector<PfsTracePoint> TakeTrace() { return pfs_->TakeTrace(); }

 private:
  // A PFS read by `thread` of `node` starting now.
  Fetch PfsRead(uint32_t node, uint32_t thread, int64_t size, double now);
  // A read of a copy that is not complete: `extra` seconds after it is.
  Fetch AfterCopy(uint32_t node, uint32_t idx, float ready, double extra, uint8_t source, double now) const;
  // What waited for a PFS read: now due at `time`.
  void Resolve(const Dependent& d, double time);

  EngineState& s_;
  std::optional<PfsSharing> pfs_;
  std::vector<std::vector<Dependent>> dependents_;  // by PFS job id: what waits for the read in flight
  int64_t pfs_read_bytes_ = 0;
};

// Implementation details follow: the event loop's hot path (HDMLP_SIM_HOT),
// and what it calls on most events, inline.

inline void Reads::SetReady(uint32_t node, NodeCache& cache, size_t idx, int64_t sample, double ready, double now) {
  const float r = RoundUpReady(ready);
  cache.Start(idx, r, now);
  NodeState& n = s_.nodes[node];
  --n.unfilled;
  n.last_ready = std::max(n.last_ready, static_cast<double>(r));
  if (!s_.decomposed && s_.IsHeld(node, sample)) {  // decomposed: every held copy had started
    --s_.held_unstarted;
    s_.held_last_ready = std::max(s_.held_last_ready, static_cast<double>(r));
  }
}

inline void Reads::When(const Fetch& fetch, Dependent d, double now) {
  if (fetch.job < 0) {
    Resolve(d, now + fetch.seconds + d.offset);
    return;
  }
  d.offset += fetch.seconds;
  dependents_[static_cast<size_t>(fetch.job)].push_back(d);
}

Fetch Reads::StagingFetch(int node, uint32_t thread, int64_t item, int64_t sample, int64_t size, double now) {
  const auto at = static_cast<size_t>(node);
  if (s_.decomposed && s_.only_class[at] > 0 && s_.nodes[at].settled) {
    // Every read of this node is in its one class and complete
    // (Decomposition::SettleNode): the class's rate, without looking the
    // copy up.
    const int j = s_.only_class[at];
    return {TransferSeconds(size, s_.local_mbps[static_cast<size_t>(j)]), FromClass(j)};
  }
  NodeCache& cache = s_.caches[at];
  const int64_t idx = cache.Find(sample);
  if (idx >= 0) {
    const int j = cache.Class(static_cast<size_t>(idx));
    const float ready = cache.Ready(static_cast<size_t>(idx), now);
    const double read = TransferSeconds(size, s_.local_mbps[static_cast<size_t>(j)]);
    if (ready <= now) return {read, FromClass(j)};
    if (ready != kNotStarted) {
      // The thesis's staging pool does not wait for a prefetch thread's
      // fill in flight: it reads the sample from its source itself
      // (StagingPoolPrefetcher with pfs_prefetch, as its HDMLP runs).
      if (!(s_.thesis && s_.traits.prefetch_threads && !s_.traits.preload))
        return AfterCopy(static_cast<uint32_t>(node), static_cast<uint32_t>(idx), ready, read, FromClass(j),
                         now);  // wait for the fill in flight
      return Remote(node, thread, sample, size, now);
    }
    const Fetch fetched = Remote(node, thread, sample, size, now);
    if (s_.traits.fill_on_the_way)
      SetReadyAfter(static_cast<uint32_t>(node), cache, static_cast<size_t>(idx), sample, fetched, s_.Store(size, j),
                    now);
    return fetched;
  }
  if (s_.traits.opportunistic && !cache.empty() && item >= s_.nodes[at].items_per_epoch) {
    // DeepIO's entropy-aware mode serves a locally cached sample instead.
    const int j = cache.Class(0);
    return {TransferSeconds(size, s_.local_mbps[static_cast<size_t>(j)]), FromClass(j)};
  }
  return Remote(node, thread, sample, size, now);
}

inline void Reads::PfsEnded(uint32_t group, uint64_t seq, double now) {
  const int64_t job = pfs_->OnEndEvent(group, seq, now);
  if (job < 0) return;
  std::vector<Dependent> dependents = std::move(dependents_[static_cast<size_t>(job)]);
  dependents_[static_cast<size_t>(job)].clear();
  for (const Dependent& d : dependents) Resolve(d, now + d.offset);
}

inline void Reads::SetReadyAfter(uint32_t node, NodeCache& cache, size_t idx, int64_t sample, const Fetch& fetch,
                          double offset, double now) {
  if (fetch.job < 0) {
    SetReady(node, cache, idx, sample, now + fetch.seconds + offset, now);
    return;
  }
  cache.Start(idx, kPendingReady, now);
  --s_.nodes[node].unfilled;
  if (s_.IsHeld(node, sample)) --s_.held_unstarted;  // its ready time: Resolve
  const double after = fetch.seconds + offset;
  dependents_[static_cast<size_t>(fetch.job)].push_back(
      Dependent{Dependent::kCopy, node, static_cast<int64_t>(idx), after});
  s_.nodes[node].pending_copies.push_back(PendingCopy{static_cast<uint32_t>(idx), fetch.job, after});
}

inline Fetch Reads::AfterCopy(uint32_t node, uint32_t idx, float ready, double extra, uint8_t source, double now) const {
  if (ready != kPendingReady) return {(ready - now) + extra, source};
  for (const PendingCopy& p : s_.nodes[node].pending_copies)
    if (p.idx == idx) return {p.after + extra, source, p.job};
  throw Error("simulator: a pending copy without its PFS read; a bug");
}

}  // namespace hdmlp::sim

#endif  // HDMLP_SIM_READS_H_
