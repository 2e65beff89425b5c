// Tests of the performance model and simulator (sim/*.h) on cases small
// enough to check by hand, plus invariants over every policy.
#include "hdmlp/sim/simulator.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "hdmlp/config/config.h"
#include "hdmlp/errors.h"
#include "hdmlp/sim/model.h"
#include "hdmlp/sim/policy.h"

namespace hdmlp::sim {
namespace {

constexpr int64_t kMb = 1000000;

// One staging thread holding about one sample; b_fs = 10 MB/s, no PFS table
// (a stream gets b_fs / streams of its node); a memory class of 1000 MB/s.
Config TinyConfig(double class_mb = 100, int staging_threads = 1, const std::string& pfs_table = "") {
  return Config::LoadString("b_c = 100; b_fs = 10;\n"
                            "storage_classes = ( { capacity = 1; threads = " + std::to_string(staging_threads) + "; },\n"
                            "  { backend = \"memory\"; capacity = " + std::to_string(class_mb) + "; threads = 1;\n"
                            "    bandwidth = ( { threads = 1; bw = 1000; } ); } );\n" + pfs_table,
                            "tiny.cfg");
}

Workload Tiny(int nodes, int64_t samples, int64_t batch, int epochs) {
  Workload w;
  w.nodes = nodes;
  w.sizes.assign(static_cast<size_t>(samples), kMb);
  w.batch_size = batch;
  w.epochs = epochs;
  w.compute_mbps = 10;  // 0.1 s per 1 MB sample
  w.seed = 7;
  return w;
}

int64_t Bytes(const SimulationResult& r, const std::string& source) {
  for (const auto& [name, bytes] : r.bytes)
    if (name == source) return bytes;
  return 0;
}

int64_t TotalBytes(const SimulationResult& r) {
  int64_t total = 0;
  for (const auto& kv : r.bytes) total += kv.second;
  return total;
}

TEST(SimulatorModelTest, LowerBoundIsComputeTime) {
  // 10 samples x 3 epochs x 0.1 s; one node, so no barrier waits.
  const SimulationResult r = Simulate(TinyConfig(), Tiny(1, 10, 2, 3), Policy::kLowerBound);
  EXPECT_NEAR(r.seconds, 3.0, 1e-9);
  EXPECT_EQ(r.stall_seconds, 0);
  ASSERT_EQ(r.epoch_seconds.size(), 3u);
  EXPECT_NEAR(r.epoch_seconds[1], 1.0, 1e-9);
  EXPECT_EQ(Bytes(r, "ready"), 30 * kMb);
}

TEST(SimulatorModelTest, NaiveIsReadThenComputeFromThePfs) {
  // Every sample: 1 MB / 10 MB/s from the PFS, then 0.1 s compute, never overlapped.
  const SimulationResult r = Simulate(TinyConfig(), Tiny(1, 10, 2, 3), Policy::kNaive);
  EXPECT_NEAR(r.seconds, 6.0, 1e-9);
  EXPECT_NEAR(r.stall_seconds, 3.0, 1e-9);
  EXPECT_EQ(Bytes(r, "pfs"), 30 * kMb);
  EXPECT_EQ(r.pfs_read_bytes, 30 * kMb);
}

TEST(SimulatorModelTest, StagingPoolOverlapsOneReadWithCompute) {
  // One worker, a buffer of one sample: reads overlap compute, so only the
  // first read (0.1 s) is exposed.
  const SimulationResult r = Simulate(TinyConfig(), Tiny(1, 10, 2, 3), Policy::kStagingPool);
  EXPECT_NEAR(r.seconds, 3.1, 1e-9);
  EXPECT_EQ(Bytes(r, "pfs"), 30 * kMb);
}

TEST(SimulatorModelTest, PfsIsSharedByTheNodesReadingIt) {
  // t(g) = 10 MB/s in total for 1 or 2 readers, b_fs = 10: two nodes reading
  // at once get 5 MB/s each, so a 1 MB read takes 0.2 s; then 0.1 s compute;
  // a global batch of 2 is one sample per node: 2 batches of 0.3 s.
  const Config config = TinyConfig(100, 1, "pfs_bandwidth = ( { processes = 1; bw = 10; }, { processes = 2; bw = 10; } );");
  const SimulationResult two = Simulate(config, Tiny(2, 4, 2, 1), Policy::kNaive);
  EXPECT_NEAR(two.seconds, 0.6, 1e-9);
  // One node alone gets all 10 MB/s: 4 x (0.1 + 0.1) s.
  const SimulationResult one = Simulate(config, Tiny(1, 4, 2, 1), Policy::kNaive);
  EXPECT_NEAR(one.seconds, 0.8, 1e-9);
}

TEST(SimulatorModelTest, BarrierWaitsForTheSlowestNode) {
  // Two nodes, global batch 2 (one sample each); samples of 1 and 3 MB.
  // Each batch lasts as long as its larger sample's compute.
  Workload w = Tiny(2, 2, 2, 2);
  w.sizes = {kMb, 3 * kMb};
  const SimulationResult r = Simulate(TinyConfig(), w, Policy::kLowerBound);
  EXPECT_NEAR(r.seconds, 2 * 0.3, 1e-9);
}

TEST(SimulatorModelTest, PreprocessingAddsToEveryStagedSample) {
  Workload w = Tiny(1, 10, 2, 1);
  w.preprocess_mbps = 10;  // +0.1 s per sample on the (only) staging worker
  const SimulationResult r = Simulate(TinyConfig(), w, Policy::kNaive);
  EXPECT_NEAR(r.seconds, 10 * 0.3, 1e-9);
}

TEST(SimulatorModelTest, RatesFollowTheRuntimeSourceModel) {
  const Config config = TinyConfig(100, 1, "pfs_bandwidth = ( { processes = 1; bw = 8; }, { processes = 3; bw = 12; } );");
  const PerformanceModel m(config, 2);
  EXPECT_DOUBLE_EQ(m.PfsStreamMbps(1, 1), 8);           // min(b_fs, t(1)/1)
  EXPECT_DOUBLE_EQ(m.PfsStreamMbps(2, 1), 10.0 / 2);    // t(2) = 10 interpolated, / 2
  EXPECT_DOUBLE_EQ(m.PfsStreamMbps(2, 2), 5);           // two streams of one node share b_fs: min(10/2, 10/2)
  EXPECT_DOUBLE_EQ(m.PfsStreamMbps(3, 1), 4);           // min(b_fs, t(3)/3) = 12/3
  EXPECT_DOUBLE_EQ(m.LocalClassMbps(1), 1000);
  EXPECT_DOUBLE_EQ(m.PeerClassMbps(1), 100);            // min(b_c, r_1(p_1)/p_1)
  EXPECT_EQ(m.sources().PfsMbps(), SourceModel(config, 2).PfsMbps());
}

TEST(SimulatorTest, HdmlpLiesBetweenLowerBoundAndNaive) {
  const Config config = TinyConfig();
  Workload w = Tiny(1, 20, 4, 4);
  w.compute_mbps = 40;  // 0.025 s per sample: reading from the PFS (0.1 s) is the bottleneck
  const double lower = Simulate(config, w, Policy::kLowerBound).seconds;
  const SimulationResult hdmlp = Simulate(config, w, Policy::kHdmlp);
  const double naive = Simulate(config, w, Policy::kNaive).seconds;
  const double staging = Simulate(config, w, Policy::kStagingPool).seconds;
  EXPECT_GE(hdmlp.seconds, lower - 1e-9);
  EXPECT_LT(hdmlp.seconds, naive);
  EXPECT_LE(hdmlp.seconds, staging + 1e-9);
  // Everything fits in the memory class: after the first epoch nothing comes from the PFS,
  // and each sample is read from the PFS once.
  EXPECT_EQ(Bytes(hdmlp, "memory") + Bytes(hdmlp, "pfs"), 80 * kMb);
  EXPECT_GE(Bytes(hdmlp, "memory"), 60 * kMb);
  EXPECT_EQ(hdmlp.pfs_read_bytes, 20 * kMb);
}

TEST(SimulatorTest, EveryPolicyDeliversTheDatasetEveryEpoch) {
  const Config config = TinyConfig(8);  // 8 MiB per node: 4 nodes hold 32 of the 40 samples
  Workload w = Tiny(4, 40, 8, 3);
  w.sizes = NormalSampleSizes(40, 1.0, 0.3, 3);
  const int64_t dataset = std::accumulate(w.sizes.begin(), w.sizes.end(), int64_t{0});
  const double lower = Simulate(config, w, Policy::kLowerBound).seconds;
  for (Policy p : AllPolicies()) {
    const SimulationResult r = Simulate(config, w, p);
    SCOPED_TRACE(PolicyName(p));
    EXPECT_EQ(r.policy, PolicyName(p));
    EXPECT_EQ(TotalBytes(r), 3 * dataset);
    ASSERT_EQ(r.epoch_seconds.size(), 3u);
    EXPECT_NEAR(std::accumulate(r.epoch_seconds.begin(), r.epoch_seconds.end(), 0.0), r.seconds, 1e-6);
    EXPECT_GE(r.seconds, lower - 1e-9);
    EXPECT_GE(r.pfs_read_bytes, p == Policy::kLowerBound ? 0 : dataset / 2);
  }
}

TEST(SimulatorTest, PeersServeWhatTheirHolderReadOnceFromThePfs) {
  // Two nodes that together hold the dataset: hdmlp reads each sample from
  // the PFS exactly once (the runtime's rule) and the rest over b_c.
  const Config config = TinyConfig(100);
  const Workload w = Tiny(2, 20, 4, 3);
  const SimulationResult r = Simulate(config, w, Policy::kHdmlp);
  EXPECT_EQ(r.pfs_read_bytes, 20 * kMb);
  EXPECT_GT(Bytes(r, "peer") + Bytes(r, "memory"), 0);
  EXPECT_EQ(TotalBytes(r), 60 * kMb);
}

TEST(SimulatorTest, PreloadingWaitsForTheCaches) {
  const Config config = TinyConfig(100);
  const SimulationResult r = Simulate(config, Tiny(1, 10, 2, 2), Policy::kLbannPreloading);
  // One prefetch thread loads 10 MB at 10 MB/s (+ writes at 1000 MB/s) before the first batch.
  EXPECT_NEAR(r.startup_seconds, 10 * (0.1 + 0.001), 1e-6);
  EXPECT_EQ(Bytes(r, "pfs"), 0);
  EXPECT_GT(r.seconds, r.startup_seconds + 2.0);
}

TEST(SimulatorTest, DeterministicBySeed) {
  const Config config = TinyConfig(8);
  Workload w = Tiny(3, 50, 6, 2);
  w.sizes = NormalSampleSizes(50, 1.0, 0.5, 9);
  const SimulationResult a = Simulate(config, w, Policy::kHdmlp);
  const SimulationResult b = Simulate(config, w, Policy::kHdmlp);
  EXPECT_EQ(a.seconds, b.seconds);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.epoch_seconds, b.epoch_seconds);
  EXPECT_EQ(NormalSampleSizes(50, 1.0, 0.5, 9), w.sizes);
  EXPECT_NE(NormalSampleSizes(50, 1.0, 0.5, 10), w.sizes);
}

TEST(SimulatorTest, BadWorkloadsNameTheSetting) {
  const Config config = TinyConfig();
  Workload w = Tiny(1, 4, 2, 1);
  w.compute_mbps = 0;
  EXPECT_THROW(
      {
        try {
          Simulate(config, w, Policy::kHdmlp);
        } catch (const InvalidArgumentError& e) {
          EXPECT_NE(std::string(e.what()).find("--compute-mbps"), std::string::npos);
          throw;
        }
      },
      InvalidArgumentError);
  EXPECT_THROW(ParsePolicy("hdmpl"), InvalidArgumentError);
  EXPECT_THROW(NormalSampleSizes(0, 1, 0, 0), InvalidArgumentError);
  EXPECT_THROW(NormalSampleSizes(5, -1, 0, 0), InvalidArgumentError);
}

TEST(SimulatorTest, ScenarioConfigsParseWithTheRuntimeParser) {
#ifdef HDMLP_SOURCE_DIR
  for (const char* name : {"sim_fits_node_memory", "sim_fits_node_storage", "sim_fits_all_nodes", "sim_larger",
                           "sim_thesis_scenario2"}) {
    SCOPED_TRACE(name);
    const Config c = Config::LoadFile(std::string(HDMLP_SOURCE_DIR) + "/configs/" + name + ".cfg");
    EXPECT_GE(c.storage_classes.size(), 2u);
    EXPECT_FALSE(c.pfs_bandwidth.empty());
  }
#else
  GTEST_SKIP() << "HDMLP_SOURCE_DIR not defined";
#endif
}

}  // namespace
}  // namespace hdmlp::sim
