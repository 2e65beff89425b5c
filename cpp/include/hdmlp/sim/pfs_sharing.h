// PfsSharing: who reads the simulated PFS, and, in the physical reading,
// when each read ends (simulator.h; docs/simulator.md, "Two readings").
//
// Every PFS read is a stream of one thread of one node; the model counts
// the streams in flight (g, and q per node) and the nodes reading.
//
// Thesis reading (StartFixed / EndFixed): a read's rate is fixed when it
// starts, min(b_fs, t(gamma)/gamma) with gamma the nodes reading (Eq. 3.5);
// the caller times it and ends the stream at its thread's next step.
//
// Physical reading (StartShared / OnEndEvent): the streams share the PFS at
// every instant, processor-sharing style: while g streams are in flight, a
// stream of a node with q of them reads at min(b_fs/q, t(g)/g), so every
// start or end changes every stream's rate and remaining time. All streams
// of nodes with q streams read at one rate, so they share a virtual clock
// (a group per q): a read ends when its group's clock reaches its end, and
// a change of g or q costs a few operations per group rather than one per
// stream. The model asks its scheduler for one event at the first end after
// each change (earlier ones go stale); the caller passes each such event to
// OnEndEvent, which ends that read (or ignores a stale event). A read's
// dependents (what waits for it) are the caller's, by job id.
//
// A job id is node * threads_per_node + thread: a thread has at most one
// read in flight.
//
// Thread-safety: none; the event-by-event loop alone uses it (the
// decomposed loop runs only while no stream is in flight).
#ifndef HDMLP_SIM_PFS_SHARING_H_
#define HDMLP_SIM_PFS_SHARING_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "hdmlp/sim/model.h"
#include "hdmlp/sim/simulator.h"

namespace hdmlp::sim {

class PfsSharing {
 public:
  // Schedules the physical reading's next end, of group `group` at `time`;
  // returns the event's sequence number (OnEndEvent's `seq`).
  using Scheduler = std::function<uint64_t(double time, uint32_t group)>;

  // `model` must outlive this. `trace`: record the aggregate rate at every
  // change (physical reading).
  PfsSharing(const PerformanceModel& model, int nodes, int threads_per_node, bool trace, Scheduler scheduler);

  int streams() const { return streams_; }
  int nodes_reading() const { return nodes_reading_; }

  // Thesis reading: `thread` of `node` starts a read; returns the nodes
  // reading now, this one included.
  int StartFixed(uint32_t node, uint32_t thread);
  // Ends the thread's read started by StartFixed, if it has one.
  void EndFixed(uint32_t node, uint32_t thread);

  // Physical reading: `thread` of `node` starts reading `bytes` at `now`;
  // returns its job id. The PFS must be limited (PfsStreamMbps(1, 1) finite).
  uint32_t StartShared(uint32_t node, uint32_t thread, int64_t bytes, double now);
  // A scheduled end of `group` at `now`: returns the job that ended, or -1
  // for a stale event (the rates changed after it was scheduled).
  int64_t OnEndEvent(uint32_t group, uint64_t seq, double now);
  uint32_t JobNode(uint32_t job) const { return job / threads_per_node_; }

  std::vector<PfsTracePoint> TakeTrace() { return std::move(trace_); }

 private:
  struct Job {
    double v_end = 0;      // its group's clock when its last byte is read
    uint32_t version = 0;  // its entry in a group's heap with another version is stale
  };
  // A read's entry in its group's heap of ends (a min-heap on (v_end, job)).
  struct End {
    double v_end;
    uint32_t job;
    uint32_t version;
    bool operator>(const End& o) const { return v_end != o.v_end ? v_end > o.v_end : job > o.job; }
  };
  struct Group {
    double clock = 0;  // bytes each of its streams has read since the group began
    double rate = 0;   // bytes/s of each stream now
    double since = 0;  // simulated time of `clock`
    // Its reads' ends, plus stale entries of reads that moved to another
    // group or ended: a regroup is a push.
    std::vector<End> ends;
    int live = 0;  // reads in the group
  };

  uint32_t JobId(uint32_t node, uint32_t thread) const { return node * threads_per_node_ + thread; }
  Group& GroupOf(int q);
  void AddEnd(Group& g, uint32_t job);
  void RemoveEnd(Group& g, uint32_t job);
  const End& FirstEnd(Group& g);
  void Advance(double now);
  void Regroup(uint32_t node, int from, int to);
  void Reschedule(double now);

  const PerformanceModel& model_;
  const uint32_t threads_per_node_;
  const bool trace_on_;
  Scheduler scheduler_;
  std::vector<int> node_streams_;  // q per node
  std::vector<uint8_t> on_pfs_;    // per job id: its thread's read is a stream
  std::vector<Job> jobs_;          // per job id (physical reading)
  std::vector<Group> groups_;      // by q
  std::vector<PfsTracePoint> trace_;
  int streams_ = 0;
  int nodes_reading_ = 0;
  double now_ = 0;            // the time the groups' clocks were last brought to
  uint64_t pending_seq_ = 0;  // the seq of the scheduled end (older ones are stale)
};

}  // namespace hdmlp::sim

#endif  // HDMLP_SIM_PFS_SHARING_H_
