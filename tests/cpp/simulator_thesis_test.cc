// Tests of the thesis reading of the model (Reading::kThesis, docs/simulator.md
// "Two readings"): each rule on a case small enough to check by hand, and a
// scaled-down thesis scenario 2 whose expected times follow from the model's
// equations (the full scenario's table is benchmarks/results/sim_thesis_scenario2.md).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "hdmlp/config/config.h"
#include "hdmlp/errors.h"
#include "hdmlp/sim/model.h"
#include "hdmlp/sim/policy.h"
#include "hdmlp/sim/simulator.h"

namespace hdmlp::sim {
namespace {

constexpr int64_t kMb = 1000000;

SimulationOptions Thesis() {
  SimulationOptions o;
  o.reading = Reading::kThesis;
  return o;
}

// The thesis's cluster (configs/sim_thesis_scenario2.cfg): 2 threads per
// class, r_0(2) = r_1(2) = 21,164 MB/s, r_2(2) = 86 MB/s, t = 66/86/129/146.
Config ThesisCluster() {
  return Config::LoadString(
      "b_c = 10000; b_fs = 2000;\n"
      "storage_classes = (\n"
      "  { capacity = 976.5625; threads = 2; bandwidth = ( { threads = 2; bw = 21164; } ); },\n"
      "  { backend = \"memory\"; capacity = 48828.125; threads = 2; bandwidth = ( { threads = 2; bw = 21164; } ); },\n"
      "  { backend = \"filesystem\"; capacity = 97656.25; threads = 2; backend_options = { path = \"/tmp/x\"; };\n"
      "    bandwidth = ( { threads = 2; bw = 86; } ); } );\n"
      "pfs_bandwidth = ( { processes = 1; bw = 66; }, { processes = 2; bw = 86; }, { processes = 3; bw = 129; },\n"
      "                  { processes = 4; bw = 146; } );\n",
      "thesis.cfg");
}

// Scenario 2 scaled down: 4 nodes, F samples of exactly 1 MB, global batch
// 100, c = 100 MB/s, beta = 200 MB/s.
Workload Scenario2(int64_t samples, int epochs) {
  Workload w;
  w.nodes = 4;
  w.sizes.assign(static_cast<size_t>(samples), kMb);
  w.batch_size = 100;
  w.epochs = epochs;
  w.compute_mbps = 100;
  w.preprocess_mbps = 200;
  w.seed = 3;
  return w;
}

// A thread's time per 1 MB sample from the PFS with every node reading:
// 1/(t(4)/4) + the staging write max(1/beta, 1/(r_0(2)/2)) = 1/36.5 + 1/200.
constexpr double kPfsRead = 1 / 36.5 + 1 / 200.0;
// From a peer's or its own SSD at the whole r_2(2) = 86 MB/s (the artifact), + the write.
constexpr double kSsdRead = 1 / 86.0 + 1 / 200.0;

TEST(SimulatorThesisTest, PfsReadersAreCountedPerNode) {
  // One node, two staging threads, no compute to speak of: each thread gets
  // t(1) = 66 MB/s in the thesis reading; physically the two share t(2) = 86.
  Config c = ThesisCluster();
  Workload w = Scenario2(400, 1);
  w.nodes = 1;
  w.compute_mbps = 1e9;
  w.preprocess_mbps = 0;
  const double thesis = Simulate(c, w, Policy::kStagingPool, Thesis()).seconds;
  const double physical = Simulate(c, w, Policy::kStagingPool).seconds;
  const double write = 1 / (21164 / 2.0);  // the staging write, slower than a free beta
  EXPECT_NEAR(thesis, 200 * (1 / 66.0 + write), 0.01);
  EXPECT_NEAR(physical, 200 * (1 / 43.0), 0.01);
}

TEST(SimulatorThesisTest, FourNodesOfTwoThreadsDrawMoreThanTheTable) {
  // Staging pool, 4 nodes x 2 threads: 1/36.5 MB/s each in the thesis reading, so
  // the PFS delivers 8 x 36.5 = 292 MB/s where t(4) = 146; the physical
  // reading keeps the aggregate at t(8) (= t(4), the last point) or below.
  const Workload w = Scenario2(4000, 1);
  const SimulationResult thesis = Simulate(ThesisCluster(), w, Policy::kStagingPool, Thesis());
  const SimulationResult physical = Simulate(ThesisCluster(), w, Policy::kStagingPool);
  const double thesis_mbps = static_cast<double>(thesis.pfs_read_bytes) / 1e6 / thesis.seconds;
  const double physical_mbps = static_cast<double>(physical.pfs_read_bytes) / 1e6 / physical.seconds;
  EXPECT_NEAR(thesis.seconds, 1000 * kPfsRead / 2, 0.01 * thesis.seconds);
  EXPECT_GT(thesis_mbps, 146 * 1.5);
  EXPECT_LE(physical_mbps, 146 * 1.001);
}

TEST(SimulatorThesisTest, EveryReadPaysTheStagingWrite) {
  // beta = 10 MB/s: the write max(s/beta, s/(w_0/p_0)) = 0.1 s is paid by
  // every staged sample, those from RAM included, in place of s/beta.
  Workload w = Scenario2(400, 2);
  w.nodes = 1;
  w.compute_mbps = 1e9;
  w.preprocess_mbps = 10;
  const SimulationResult r = Simulate(ThesisCluster(), w, Policy::kDeepioOrdered, Thesis());
  // Preload: 400 samples over the RAM class's 2 threads at 1/66 + 0.1 s;
  // then 2 epochs of 400 samples from RAM at 1/21164 + 0.1 s over 2 staging threads.
  const double preload = 200 * (1 / 66.0 + 0.1);
  EXPECT_NEAR(r.startup_seconds, preload, 0.01);
  EXPECT_NEAR(r.seconds, preload + 400 * (1 / 21164.0 + 0.1), 0.05);
}

// The expected times of the scaled scenario (1,000 samples a node, 3 epochs;
// lower bound 3 x 1,000 x 0.01 s = 30 s; the RAM holds a node's share).
TEST(SimulatorThesisTest, ScaledScenario2FollowsTheEquations) {
  const Workload w = Scenario2(4000, 3);
  auto run = [&](Policy p, const SimulationOptions& o = Thesis()) { return Simulate(ThesisCluster(), w, p, o); };
  const double lower = run(Policy::kLowerBound).seconds;
  EXPECT_NEAR(lower, 30.0, 1e-6);
  // Preloading policies: each node's 1,000 samples over 2 RAM threads, then the lower bound.
  const double preload = 500 * kPfsRead;
  for (Policy p : {Policy::kDeepioOrdered, Policy::kDeepioOpportunistic, Policy::kLbannPreloading,
                   Policy::kLocalityAware}) {
    SCOPED_TRACE(PolicyName(p));
    const SimulationResult r = run(p);
    EXPECT_NEAR(r.startup_seconds, preload, 0.01);
    EXPECT_NEAR(r.seconds, preload + lower, 0.01 * lower);
  }
  // Staging pool: every epoch at two PFS threads per node.
  EXPECT_NEAR(run(Policy::kStagingPool).seconds, 3 * 500 * kPfsRead, 0.01 * 3 * 500 * kPfsRead);
  // LBANN dynamic: epoch 0 at two PFS threads per node, then the lower bound.
  EXPECT_NEAR(run(Policy::kLbannDynamic).seconds, 500 * kPfsRead + 2 * 10.0, 0.01 * 36.2);
  // Parallel staging: own shard to the SSD from the PFS, then node 3 copies
  // nodes 0-2's shards from their SSDs (the artifact), then the lower bound
  // (two threads read the SSD at 86 MB/s each: 120 samples/s > 100).
  const double staging = 500 * kPfsRead + 1500 * kSsdRead;
  const SimulationResult ps = run(Policy::kParallelStaging);
  EXPECT_NEAR(ps.startup_seconds, staging, 0.01);
  EXPECT_NEAR(ps.seconds, staging + lower, 0.01 * (staging + lower));
  SimulationOptions no_copies = Thesis();
  no_copies.artifacts.parallel_staging_copies_lower_shards = false;
  EXPECT_NEAR(run(Policy::kParallelStaging, no_copies).startup_seconds, 500 * kPfsRead, 0.01);
  // hdmlp: two prefetch threads (most-read first) and two staging workers
  // (read order) fetch different samples, 4 x 30.9 > 100 samples/s: within
  // 3% of the bound (the thesis's code gives 30.72 s against its 30.56).
  const double hdmlp = run(Policy::kHdmlp).seconds;
  EXPECT_GE(hdmlp, lower);
  EXPECT_LT(hdmlp, 1.03 * lower);
  // Naive: one PFS read, the write and the compute per sample, one after
  // another; the other nodes read the PFS for 2.7 of every 3.7 units of that
  // time, so gamma lies between 3 and 4.
  const double naive = run(Policy::kNaive).seconds;
  EXPECT_LT(naive, 3000 * (kPfsRead + 0.01));
  EXPECT_GT(naive, 3000 * (1 / 43.0 + 1 / 200.0 + 0.01));
}

// Scenario 2 at a tenth (15,000 samples of 1 +- 0.1 MB, 10 epochs, RAM and
// SSD capacities / 10) against the thesis's own simulator (alchemy315/NoPFS
// sim/, run with these parameters and seed 42; its sizes and order differ
// from ours, so the goal is 2%). The full scenario's table:
// benchmarks/results/sim_thesis_scenario2.md.
TEST(SimulatorThesisTest, TenthOfScenario2MatchesTheThesisCode) {
  Config c = ThesisCluster();
  c.storage_classes[1].capacity_mb /= 10;
  c.storage_classes[2].capacity_mb /= 10;
  Workload w = Scenario2(15000, 10);
  w.sizes = NormalSampleSizes(15000, 1.0, 0.1, 0);
  const std::vector<std::pair<Policy, double>> thesis_code = {
      {Policy::kLowerBound, 382.51},     {Policy::kNaive, 1513.62},           {Policy::kHdmlp, 388.38},
      {Policy::kDeepioOrdered, 443.20},  {Policy::kDeepioOpportunistic, 443.76},
      {Policy::kParallelStaging, 497.33}, {Policy::kLbannDynamic, 405.27},   {Policy::kLbannPreloading, 443.20},
      {Policy::kLocalityAware, 443.20}};
  for (const auto& [policy, seconds] : thesis_code) {
    SCOPED_TRACE(PolicyName(policy));
    EXPECT_NEAR(Simulate(c, w, policy, Thesis()).seconds, seconds, 0.02 * seconds);
  }
  // The staging pool is the exception: the thesis's code gives 502.07 s
  // because it simulates the nodes one after another and counts only the
  // readers already logged; the equations give 2 threads x 1/36.5 MB/s per node.
  const double staging = Simulate(c, w, Policy::kStagingPool, Thesis()).seconds;
  EXPECT_NEAR(staging, 10 * 3750 * (1 / 36.5 + 1 / 200.0) / 2, 0.02 * staging);
}

TEST(SimulatorThesisTest, SsdArtifactIsWhatKeepsParallelStagingAtTheBound) {
  // Without the artifact a thread reads the SSD at r_2(2)/2 = 43 MB/s (Eq. 3.7):
  // two threads give 1/(1/43 + 1/200)/... = 70.7 samples/s < 100, so the
  // training epochs are bound by the SSD.
  const Workload w = Scenario2(4000, 3);
  SimulationOptions eq37 = Thesis();
  eq37.artifacts.full_class_rate_per_thread = false;
  const SimulationResult r = Simulate(ThesisCluster(), w, Policy::kParallelStaging, eq37);
  const double per_epoch = 500 * (1 / 43.0 + 1 / 200.0);
  EXPECT_NEAR(r.seconds - r.startup_seconds, 3 * per_epoch, 0.02 * 3 * per_epoch);
}

TEST(SimulatorThesisTest, ParseReadingNamesTheSetting) {
  EXPECT_EQ(ParseReading("thesis"), Reading::kThesis);
  EXPECT_EQ(ParseReading("physical"), Reading::kPhysical);
  try {
    ParseReading("paper");
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("--model"), std::string::npos);
  }
}

}  // namespace
}  // namespace hdmlp::sim
