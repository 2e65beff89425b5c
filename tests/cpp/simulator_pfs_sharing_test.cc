// The physical reading's PFS (docs/simulator.md, "Two readings"): reads in
// flight share t(g) at every instant, whether the g readers are threads of
// one node or nodes, and a read's remaining time changes whenever g does.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <string>
#include <vector>

#include "hdmlp/config/config.h"
#include "hdmlp/sim/model.h"
#include "hdmlp/sim/pfs_sharing.h"
#include "hdmlp/sim/policy.h"
#include "hdmlp/sim/simulator.h"
#include "simulator_test_util.h"

namespace hdmlp::sim {
namespace {

constexpr int64_t kMb = 1000000;

// The thesis's cluster with 4 staging threads: t = 66/86/129/146 MB/s for
// 1-4 readers (146 beyond), b_fs = 2000, so 8 streams of 4 nodes started at
// once would each get t(8)/8 only if the rate followed g at every instant.
Config Cluster(int staging_threads, double ram_mb) {
  return Config::LoadString(
      "b_c = 10000; b_fs = 2000;\n"
      "storage_classes = (\n"
      "  { capacity = 8; threads = " + std::to_string(staging_threads) + "; },\n"
      "  { backend = \"memory\"; capacity = " + std::to_string(ram_mb) + "; threads = 2;\n"
      "    bandwidth = ( { threads = 2; bw = 21164; } ); } );\n"
      "pfs_bandwidth = ( { processes = 1; bw = 66; }, { processes = 2; bw = 86; }, { processes = 3; bw = 129; },\n"
      "                  { processes = 4; bw = 146; } );\n",
      "cluster.cfg");
}

Workload Job(int nodes, int64_t samples, int epochs, bool equal_sizes) {
  return testing::SimulatedJob(nodes, samples, epochs, equal_sizes, {1.0, 0.4, 5}, 400, 9);
}

SimulationResult Traced(const Config& c, const Workload& w, Policy p) {
  SimulationOptions o;
  o.trace_pfs = true;
  return Simulate(c, w, p, o);
}

// At every instant the aggregate is at most t(g) for the g streams then in
// flight (and each node's streams at most b_fs); the trace's aggregate rate,
// integrated over time, is every byte read from the PFS, so the rates in the
// trace are the ones the reads ran at.
void ExpectNeverAboveTheTable(const Config& config, const SimulationResult& r, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_GE(r.pfs_trace.size(), 2u);
  double bytes = 0;
  double most_over = 0;
  for (size_t k = 0; k < r.pfs_trace.size(); ++k) {
    const PfsTracePoint& p = r.pfs_trace[k];
    if (p.streams == 0) {
      EXPECT_EQ(p.aggregate_mbps, 0);
    } else {
      const double table = InterpolateBandwidth(config.pfs_bandwidth, p.streams);
      most_over = std::max(most_over, p.aggregate_mbps - table);
    }
    if (k + 1 < r.pfs_trace.size()) {
      const double dt = r.pfs_trace[k + 1].time - p.time;
      ASSERT_GE(dt, 0);
      bytes += p.aggregate_mbps * 1e6 * dt;
    }
  }
  EXPECT_LE(most_over, 1e-9);
  EXPECT_EQ(r.pfs_trace.back().streams, 0);
  EXPECT_NEAR(bytes, static_cast<double>(r.pfs_read_bytes), 1e-6 * static_cast<double>(r.pfs_read_bytes));
}

TEST(SimulatorPfsSharingTest, AggregateNeverExceedsTheTable) {
  const Config config = Cluster(4, 64);
  for (bool equal : {true, false}) {
    for (Policy p : {Policy::kNaive, Policy::kStagingPool, Policy::kHdmlp, Policy::kDeepioOrdered,
                     Policy::kLbannPreloading}) {
      const Workload w = Job(4, 400, 2, equal);
      const SimulationResult r = Traced(config, w, p);
      ExpectNeverAboveTheTable(config, r, std::string(PolicyName(p)) + (equal ? " equal sizes" : " normal sizes"));
    }
  }
}

TEST(SimulatorPfsSharingTest, SimultaneousStartsShareTheTable) {
  // 4 nodes x 2 staging threads start together: 8 streams. With rates fixed
  // at each read's start they summed to 66 + 43 + 43 + 36.5 + ... MB/s, far
  // above t(8) = 146; now the trace's largest aggregate is t(8) itself.
  const Config config = Cluster(2, 1);
  const SimulationResult r = Traced(config, Job(4, 80, 1, true), Policy::kStagingPool);
  double largest = 0;
  int most_streams = 0;
  for (const PfsTracePoint& p : r.pfs_trace) {
    largest = std::max(largest, p.aggregate_mbps);
    most_streams = std::max(most_streams, p.streams);
  }
  EXPECT_EQ(most_streams, 8);
  EXPECT_NEAR(largest, 146, 1e-9);
  ExpectNeverAboveTheTable(config, r, "staging pool");
}

TEST(SimulatorPfsSharingTest, ReadsSlowDownWhenOthersStart) {
  // One node, two threads on a PFS of t(1) = 10, t(2) = 10 MB/s, b_fs = 100,
  // samples of 1 MB and 3 MB, compute instant: thread 0 reads 1 MB, thread 1
  // reads 3 MB. Shared: both at 5 MB/s until the 1 MB read ends at 0.2 s,
  // then the 3 MB read alone at 10 MB/s for its last 2 MB: it ends at 0.4 s.
  // (With rates fixed at the start it would end at 0.6 s.)
  const Config config = Config::LoadString(
      "b_c = 100; b_fs = 100;\n"
      "storage_classes = ( { capacity = 10; threads = 2; } );\n"
      "pfs_bandwidth = ( { processes = 1; bw = 10; }, { processes = 2; bw = 10; } );\n",
      "two.cfg");
  Workload w;
  w.nodes = 1;
  w.sizes = {kMb, 3 * kMb};
  w.batch_size = 2;
  w.epochs = 1;
  w.compute_mbps = 1e9;
  w.seed = 1;
  const SimulationResult r = Traced(config, w, Policy::kStagingPool);
  EXPECT_NEAR(r.seconds, 0.4, 1e-6);
  ExpectNeverAboveTheTable(config, r, "two reads");
}

// PfsSharing on its own against a direct processor-sharing computation:
// 1024 reads (64 nodes x 16 threads, one read each) start at random times with
// random sizes; at every start or end every stream's rate is recomputed
// from the table and its remaining bytes advanced. Every read must end at
// the same time (up to rounding), and the model must ignore its stale end
// events. A node's every start and end moves its other streams to another
// group, so the groups' heaps of ends fill with stale entries and are
// compacted (many times, in this case) on the way.
TEST(SimulatorPfsSharingTest, GroupClocksMatchDirectProcessorSharing) {
  const Config config = Config::LoadString(
      "b_c = 10000; b_fs = 150;\n"
      "storage_classes = ( { capacity = 8; threads = 16; } );\n"
      "pfs_bandwidth = ( { processes = 1; bw = 66; }, { processes = 16; bw = 900; },\n"
      "                  { processes = 256; bw = 3000; } );\n",
      "sharing.cfg");
  constexpr int kNodes = 64, kThreads = 16;
  const PerformanceModel model(config, kNodes);
  struct Read {
    uint32_t node, thread;
    double start;
    int64_t bytes;
  };
  std::vector<Read> reads;
  uint64_t state = 12345;
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 11) / 9007199254740992.0;
  };
  for (uint32_t i = 0; i < kNodes; ++i)
    for (uint32_t t = 0; t < kThreads; ++t)
      reads.push_back(Read{i, t, next() * 0.2, static_cast<int64_t>(1e5 + next() * 4e6)});
  std::sort(reads.begin(), reads.end(), [](const Read& a, const Read& b) { return a.start < b.start; });

  // The model, driven by its own scheduled events, delivered in time order
  // (stale ones included), as the simulator's event queue does.
  struct Scheduled {
    double time;
    uint64_t seq;
    uint32_t group;
    bool operator>(const Scheduled& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };
  std::priority_queue<Scheduled, std::vector<Scheduled>, std::greater<Scheduled>> events;
  uint64_t seq = 0;
  PfsSharing pfs(model, kNodes, kThreads, false, [&](double time, uint32_t group) {
    events.push(Scheduled{time, seq, group});
    return seq++;
  });
  std::vector<double> model_end(static_cast<size_t>(kNodes * kThreads), -1);
  size_t started = 0;
  int64_t stale = 0;
  while (started < reads.size() || !events.empty()) {
    if (started < reads.size() && (events.empty() || reads[started].start < events.top().time)) {
      const Read& r = reads[started++];
      pfs.StartShared(r.node, r.thread, r.bytes, r.start);
      continue;
    }
    const Scheduled e = events.top();
    events.pop();
    const int64_t job = pfs.OnEndEvent(e.group, e.seq, e.time);
    if (job < 0) {
      ++stale;
      continue;
    }
    ASSERT_EQ(model_end[static_cast<size_t>(job)], -1) << "a read ended twice";
    model_end[static_cast<size_t>(job)] = e.time;
  }
  EXPECT_EQ(pfs.streams(), 0);
  EXPECT_GT(stale, 0);

  // Directly: every stream's remaining bytes, rates recomputed at each change.
  std::vector<double> left(model_end.size(), 0), direct_end(model_end.size(), -1);
  std::vector<int> node_streams(kNodes, 0);
  std::vector<size_t> active;
  double now = 0;
  started = 0;
  while (started < reads.size() || !active.empty()) {
    int g = static_cast<int>(active.size());
    double first = std::numeric_limits<double>::infinity();
    for (size_t a : active) {
      const double rate = model.PfsStreamMbps(g, node_streams[a / kThreads]) * 1e6;
      first = std::min(first, now + left[a] / rate);
    }
    const bool start = started < reads.size() && reads[started].start < first;
    const double until = start ? reads[started].start : first;
    for (size_t a : active) left[a] -= (until - now) * model.PfsStreamMbps(g, node_streams[a / kThreads]) * 1e6;
    now = until;
    if (start) {
      const Read& r = reads[started++];
      const size_t job = r.node * kThreads + r.thread;
      left[job] = static_cast<double>(r.bytes);
      active.push_back(job);
      ++node_streams[r.node];
      continue;
    }
    for (size_t k = 0; k < active.size(); ++k) {
      const size_t a = active[k];
      if (left[a] > 1e-6 * 4e6) continue;
      direct_end[a] = now;
      --node_streams[a / kThreads];
      active.erase(active.begin() + static_cast<std::ptrdiff_t>(k));
      break;
    }
  }
  for (size_t job = 0; job < model_end.size(); ++job) {
    ASSERT_GE(model_end[job], 0) << "read " << job << " never ended";
    EXPECT_NEAR(model_end[job], direct_end[job], 1e-9 * std::max(1.0, direct_end[job])) << "read " << job;
  }
}

}  // namespace
}  // namespace hdmlp::sim
