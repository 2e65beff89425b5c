#include "hdmlp/sim/pfs_sharing.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace hdmlp::sim {

PfsSharing::PfsSharing(const PerformanceModel& model, int nodes, int threads_per_node, bool trace,
                       Scheduler scheduler)
    : model_(model), threads_per_node_(static_cast<uint32_t>(threads_per_node)), trace_on_(trace),
      scheduler_(std::move(scheduler)), node_streams_(static_cast<size_t>(nodes), 0),
      on_pfs_(static_cast<size_t>(nodes) * static_cast<size_t>(threads_per_node), 0) {}

int PfsSharing::StartFixed(uint32_t node, uint32_t thread) {
  if (node_streams_[node]++ == 0) ++nodes_reading_;
  ++streams_;
  on_pfs_[JobId(node, thread)] = 1;
  return nodes_reading_;
}

void PfsSharing::EndFixed(uint32_t node, uint32_t thread) {
  uint8_t& on = on_pfs_[JobId(node, thread)];
  if (!on) return;
  on = 0;
  if (--node_streams_[node] == 0) --nodes_reading_;
  --streams_;
}

uint32_t PfsSharing::StartShared(uint32_t node, uint32_t thread, int64_t bytes, double now) {
  if (jobs_.empty()) jobs_.resize(on_pfs_.size());
  Advance(now);
  const uint32_t job = JobId(node, thread);
  int& q = node_streams_[node];
  Regroup(node, q, q + 1);
  if (q++ == 0) ++nodes_reading_;
  ++streams_;
  on_pfs_[job] = 1;
  Group& g = GroupOf(q);
  jobs_[job].v_end = g.clock + static_cast<double>(bytes);
  AddEnd(g, job);
  Reschedule(now);
  return job;
}

int64_t PfsSharing::OnEndEvent(uint32_t group, uint64_t seq, double now) {
  Group& g = groups_[group];
  if (seq != pending_seq_ || g.live == 0) return -1;  // stale: the rates changed since
  Advance(now);
  const uint32_t job = FirstEnd(g).job;
  RemoveEnd(g, job);
  const uint32_t node = JobNode(job);
  on_pfs_[job] = 0;
  int& q = node_streams_[node];
  Regroup(node, q, q - 1);
  if (--q == 0) --nodes_reading_;
  --streams_;
  Reschedule(now);
  return job;
}

PfsSharing::Group& PfsSharing::GroupOf(int q) {
  while (groups_.size() <= static_cast<size_t>(q)) {
    groups_.emplace_back();
    groups_.back().since = now_;
  }
  return groups_[static_cast<size_t>(q)];
}

void PfsSharing::AddEnd(Group& g, uint32_t job) {
  g.ends.push_back(End{jobs_[job].v_end, job, jobs_[job].version});
  std::push_heap(g.ends.begin(), g.ends.end(), std::greater<End>());
  ++g.live;
}

// The job leaves group g: its entry goes stale. Stale entries are dropped
// when they reach the top, or all at once when they outnumber the live ones
// (a heap of 1024 nodes' regroups would otherwise grow far beyond the
// streams in flight). Live entries are distinct (one per job), so the
// heap's order, and the first end, do not depend on when.
void PfsSharing::RemoveEnd(Group& g, uint32_t job) {
  ++jobs_[job].version;
  if (--g.live == 0) {
    g.ends.clear();
  } else if (g.ends.size() > 2 * static_cast<size_t>(g.live) + 64) {
    g.ends.erase(std::remove_if(g.ends.begin(), g.ends.end(),
                                [&](const End& e) { return e.version != jobs_[e.job].version; }),
                 g.ends.end());
    std::make_heap(g.ends.begin(), g.ends.end(), std::greater<End>());
  }
}

// The group's first live end (g.live > 0); drops stale entries above it.
const PfsSharing::End& PfsSharing::FirstEnd(Group& g) {
  while (g.ends.front().version != jobs_[g.ends.front().job].version) {
    std::pop_heap(g.ends.begin(), g.ends.end(), std::greater<End>());
    g.ends.pop_back();
  }
  return g.ends.front();
}

// Brings every group's clock to `now` at the rates so far.
void PfsSharing::Advance(double now) {
  now_ = now;
  for (Group& g : groups_) {
    if (g.live > 0) g.clock += (now - g.since) * g.rate;
    g.since = now;
  }
}

// Node's streams move from group `from` to `to` (its stream count changes),
// keeping the bytes each has left.
void PfsSharing::Regroup(uint32_t node, int from, int to) {
  if (from == 0) return;
  GroupOf(std::max(from, to));  // grows the groups where needed
  Group& src = groups_[static_cast<size_t>(from)];
  Group& dst = groups_[static_cast<size_t>(to)];
  for (uint32_t t = 0; t < threads_per_node_; ++t) {
    const uint32_t job = JobId(node, t);
    if (!on_pfs_[job]) continue;
    RemoveEnd(src, job);
    const double left = jobs_[job].v_end - src.clock;
    jobs_[job].v_end = dst.clock + left;
    AddEnd(dst, job);
  }
}

// New rates for the streams now reading, and one event for the first read
// to end (earlier events are stale).
void PfsSharing::Reschedule(double now) {
  double aggregate = 0;
  double first = std::numeric_limits<double>::infinity();
  uint32_t first_group = 0;
  for (size_t q = 1; q < groups_.size(); ++q) {
    Group& g = groups_[q];
    if (g.live == 0) continue;
    g.rate = model_.PfsStreamMbps(streams_, static_cast<int>(q)) * 1e6;
    aggregate += g.rate * static_cast<double>(g.live);
    const double end = now + std::max(0.0, FirstEnd(g).v_end - g.clock) / g.rate;
    if (end < first) {
      first = end;
      first_group = static_cast<uint32_t>(q);
    }
  }
  if (first_group != 0) pending_seq_ = scheduler_(first, first_group);
  if (trace_on_) trace_.push_back(PfsTracePoint{now, streams_, aggregate / 1e6});
}

}  // namespace hdmlp::sim
