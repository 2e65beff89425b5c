#include "hdmlp/sim/decomposition.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>

#include "hdmlp/errors.h"

namespace hdmlp::sim {

void Decomposition::FindWhetherNeverPfs(const std::vector<uint8_t>& caches_every_read) {
  s_.never_pfs = std::all_of(caches_every_read.begin(), caches_every_read.end(), [](uint8_t b) { return b != 0; });
  if (!s_.traits.peers || s_.holder.empty()) return;
  for (size_t k = 0; k < s_.holder.size(); ++k) {
    const int h = s_.holder[k].node;
    if (h < 0) return;
    const int j = s_.caches[static_cast<size_t>(h)].Class(s_.holder[k].index);
    if (s_.traits.runtime_sources && !s_.model.PreferPeer(j)) return;
  }
  s_.holders_cover = s_.never_pfs = true;
  s_.held_unstarted = static_cast<int64_t>(s_.holder.size());
}

// No PFS stream is in flight, and either
//  - every sample has a holder whose copy peers read (holders_cover), and
//    every held copy is complete: a read a node does not serve itself, and
//    every fill of its own copies still to come, is a peer read of a
//    complete copy at its class's rate, which touches no other node's
//    state (Reads::Remote); a node's own copies are its own business; or
//  - no copy is left to fill and every copy is complete, and no later read
//    can go to the PFS (never_pfs).
bool Decomposition::Possible(double now) const {
  if (reads_.streams() != 0) return false;
  if (s_.holders_cover && s_.held_unstarted == 0 && s_.held_last_ready <= now) return true;
  if (!s_.never_pfs) return false;
  return std::all_of(s_.nodes.begin(), s_.nodes.end(),
                     [now](const NodeState& n) { return n.unfilled == 0 && n.last_ready <= now; });
}

void Decomposition::FindPeerClass() {
  if (!s_.holders_cover) return;
  int j = 0;
  for (const NodeCache& c : s_.caches) {
    if (c.empty()) continue;
    if (c.single_class() == 0 || (j != 0 && c.single_class() != j)) return;
    j = c.single_class();
  }
  s_.peer_class = j;
}

// Complete by the earliest time the node will still ask about: its next
// event's, which may lie before the barrier's release (a node runs only
// until its consumer arrives).
void Decomposition::SettleNode(size_t i) {
  NodeState& n = s_.nodes[i];
  if (n.settled || n.unfilled != 0) return;
  const double now = n.heap.empty() ? s_.release_time : std::min(s_.release_time, n.heap.top().time);
  if (n.last_ready > now) return;
  s_.caches[i].SettleAll();
  n.settled = true;
}

template <typename F>
void Decomposition::ForEachNode(F&& f) {
  const int nodes = s_.w.nodes;
  const int workers = std::max(1, std::min(threads_, nodes / 32));
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

// A node's events run in the event-by-event loop's order (kRelease) and
// touch only its own state, so the results are the same; but each step is a
// heap of one node's threads, the node's data stays in the CPU's caches, and
// the nodes run on several threads.
void Decomposition::Run() {
  s_.decomposed = true;
  FindPeerClass();
  while (!s_.events.empty()) {
    const Event e = s_.events.top();
    s_.events.pop();
    if (e.thread == kPfsDone) {  // stale: no PFS read is in flight
      ++events_;
      continue;
    }
    s_.nodes[e.node].heap.push(e);
  }
  for (NodeState& n : s_.nodes) n.seq = s_.seq;  // later pushes follow every earlier one
  const int64_t total = s_.plan.BatchesPerEpoch() * s_.w.epochs;
  auto run = [&](size_t i, bool until_arrival) {
    NodeState& n = s_.nodes[i];
    SettleNode(i);
    while (!n.heap.empty() && !(until_arrival && n.arrived)) {
      const Event e = n.heap.top();
      n.heap.pop();
      ++n.events;
      loop_.Dispatch(e);
    }
  };
  while (loop_.global_batch() < total) {
    ForEachNode([&](size_t i) { run(i, true); });
    double time = 0;
    double compute = 0;
    for (NodeState& n : s_.nodes) {
      if (!n.arrived) throw Error("simulator: a node never reached the barrier in the decomposed loop; a bug");
      n.arrived = false;
      time = std::max(time, n.arrival);
      compute = std::max(compute, n.batch_compute);
    }
    loop_.CompleteBarrier(time, compute);
    ++batches_;
  }
  ForEachNode([&](size_t i) { run(i, false); });  // the reads still in flight (the event count)
  for (const NodeState& n : s_.nodes) events_ += n.events;
}

}  // namespace hdmlp::sim
