// Helpers shared by the simulator's tests (tests/cpp/simulator_*_test.cc):
// a synthetic job and the comparison of two runs that must agree exactly.
#ifndef HDMLP_TESTS_CPP_SIMULATOR_TEST_UTIL_H_
#define HDMLP_TESTS_CPP_SIMULATOR_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hdmlp/sim/model.h"
#include "hdmlp/sim/simulator.h"

namespace hdmlp::sim::testing {

struct SampleSizes {
  double mean_mb;
  double std_mb;
  uint64_t seed;  // of NormalSampleSizes
};

// `nodes` x `samples` for `epochs`, a global batch of 8 per node. With
// `equal_sizes` every sample is `sizes.mean_mb` (so many events fall on one
// instant), else the sizes are normal(mean, std).
inline Workload SimulatedJob(int nodes, int64_t samples, int epochs, bool equal_sizes, SampleSizes sizes,
                             double compute_mbps, uint64_t seed) {
  Workload w;
  w.nodes = nodes;
  w.sizes = equal_sizes ? std::vector<int64_t>(static_cast<size_t>(samples),
                                               static_cast<int64_t>(sizes.mean_mb * 1e6 + 0.5))
                        : NormalSampleSizes(samples, sizes.mean_mb, sizes.std_mb, sizes.seed);
  w.batch_size = 8 * nodes;
  w.epochs = epochs;
  w.compute_mbps = compute_mbps;
  w.seed = seed;
  return w;
}

// Two runs of one job that must give the same results bit for bit (the same
// additions in the same order): times, byte counts and event counts.
inline void ExpectSameResults(const SimulationResult& a, const SimulationResult& b, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(a.seconds, b.seconds);
  EXPECT_EQ(a.epoch_seconds, b.epoch_seconds);
  EXPECT_EQ(a.compute_seconds, b.compute_seconds);
  EXPECT_EQ(a.startup_seconds, b.startup_seconds);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.pfs_read_bytes, b.pfs_read_bytes);
  EXPECT_EQ(a.cached_samples, b.cached_samples);
  EXPECT_EQ(a.events, b.events);
}

}  // namespace hdmlp::sim::testing

#endif  // HDMLP_TESTS_CPP_SIMULATOR_TEST_UTIL_H_
