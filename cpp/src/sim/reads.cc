#include "hdmlp/sim/reads.h"

#include <algorithm>
#include <limits>

#include "hdmlp/errors.h"

namespace hdmlp::sim {

void Reads::SetUp() {
  EngineState& s = s_;
  pfs_.emplace(s.model, s.w.nodes, static_cast<int>(s.thread_class.size()), s.options.trace_pfs,
               [&s](double time, uint32_t group) {
                 const uint64_t seq = s.seq;
                 s.Push(time, group, kPfsDone);
                 return seq;
               });
  if (!s.thesis) dependents_.resize(static_cast<size_t>(s.w.nodes) * s.thread_class.size());
}

// Thesis: the rate is fixed now, min(b_fs, t(gamma)/gamma) with gamma the
// nodes reading (Eq. 3.5), and the stream ends at the thread's next event.
// Physical: the streams share t(g) and their node's link at every instant
// (processor sharing, PfsSharing): the read ends when its bytes are read, at
// a time known only then, so the fetch is {0, PFS, job}.
Fetch Reads::PfsRead(uint32_t node, uint32_t thread, int64_t size, double now) {
  if (s_.decomposed)  // Decomposition::Possible ruled this out: shared state in the decomposed loop
    throw Error("simulator: a PFS read in the decomposed loop; a bug (run with decompose = false)");
  pfs_read_bytes_ += size;
  if (s_.thesis) return {TransferSeconds(size, s_.model.ThesisPfsMbps(pfs_->StartFixed(node, thread))), kFromPfs};
  if (!(s_.model.PfsStreamMbps(1, 1) < std::numeric_limits<double>::infinity())) return {0, kFromPfs};  // unlimited
  const uint32_t job = pfs_->StartShared(node, thread, size, now);
  dependents_[job].clear();
  return {0, kFromPfs, static_cast<int32_t>(job)};
}

void Reads::Resolve(const Dependent& d, double time) {
  NodeState& n = s_.nodes[d.node];
  switch (d.kind) {
    case Dependent::kThreadEvent:
      s_.Push(time, d.node, static_cast<uint32_t>(d.target));
      break;
    case Dependent::kFlightItem: {
      n.flight[static_cast<size_t>(d.target - n.next_take)].ready = time;
      if (n.consumer_blocked && d.target == n.next_take) {
        n.consumer_blocked = false;
        s_.Push(time, d.node, kConsumer);
      }
      break;
    }
    case Dependent::kCopy: {
      NodeCache& cache = s_.caches[d.node];
      const float r = RoundUpReady(time);
      cache.Settle(static_cast<size_t>(d.target), r);
      n.last_ready = std::max(n.last_ready, static_cast<double>(r));
      // Held or not (a PFS read in flight, so never in the decomposed
      // loop): the bound only has to be at least the held copies' latest.
      s_.held_last_ready = std::max(s_.held_last_ready, static_cast<double>(r));
      auto& pending = n.pending_copies;
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

Fetch Reads::Remote(int node, uint32_t thread, int64_t sample, int64_t size, double now) {
  if (s_.peer_class > 0)  // decomposed, every held copy complete and in that class: no lookup
    return {TransferSeconds(size, s_.peer_mbps[static_cast<size_t>(s_.peer_class)]), kFromPeer};
  if (s_.traits.peers) {
    const Holder holder = s_.holder[static_cast<size_t>(sample)];
    const int h = holder.node;
    if (h >= 0 && h != node) {
      NodeCache& peer = s_.caches[static_cast<size_t>(h)];
      const uint32_t idx = holder.index;
      const int j = peer.Class(idx);
      if (!s_.traits.runtime_sources || s_.prefer_peer[static_cast<size_t>(j)]) {
        const double link = TransferSeconds(size, s_.peer_mbps[static_cast<size_t>(j)]);
        // Decomposed (Decomposition::Possible): every held copy is complete,
        // and the holder's thread may be writing its other copies' state now.
        if (s_.decomposed) return {link, kFromPeer};
        const float ready = peer.Ready(idx, now);
        if (ready <= now) return {link, kFromPeer};
        if (ready != kNotStarted) return AfterCopy(static_cast<uint32_t>(h), idx, ready, link, kFromPeer, now);
        // The holder fills it on the spot (read from the PFS, stored), then sends it.
        Fetch read = PfsRead(static_cast<uint32_t>(node), thread, size, now);
        SetReadyAfter(static_cast<uint32_t>(h), peer, static_cast<size_t>(idx), sample, read, s_.Store(size, j), now);
        read.seconds += link;
        read.source = kFromPeer;
        return read;
      }
    }
  }
  return PfsRead(static_cast<uint32_t>(node), thread, size, now);
}

}  // namespace hdmlp::sim
