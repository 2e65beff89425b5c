// A Job over each non-folder source: every sample exactly once per epoch
// with its stored bytes, the storage classes serving pack and HDF5 samples
// from the second epoch on, and HDF5 batches as [B, ...] arrays written into
// batch memory (with the label arrays after them).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "hdmlp/cache/cache_hierarchy.h"

#include "hdmlp/job/job.h"
#include "source_test_util.h"

namespace hdmlp {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

std::string Config(const TempDir& dir) {
  const std::string path = dir / "job.cfg";
  testing::WriteFile(path, "storage_classes = ( { capacity = 0.01; threads = 2; },"
                           " { backend = \"memory\"; capacity = 4.0; threads = 2; } );\n");
  return path;
}

JobOptions Options(const std::string& dataset, const std::string& config, ThrottledEnv* env) {
  JobOptions o;
  o.dataset_path = dataset;
  o.batch_size = 5;
  o.epochs = 3;
  o.has_seed = true;
  o.seed = 9;
  o.config_path = config;
  o.scan.use_cache = false;
  o.use_mpi = false;
  o.env = env;
  return o;
}

int64_t Reads(const EpochMetrics& m, const std::string& source) {
  const auto it = m.reads.find(source);
  return it == m.reads.end() ? 0 : it->second.count;
}

TEST(JobSourcesTest, PackSamplesOncePerEpochServedFromMemoryAfterTheFirst) {
  TempDir dir;
  std::vector<testing::PackSample> samples;
  for (int i = 0; i < 23; ++i) samples.push_back({"c/" + std::to_string(i), i % 2, std::string(100 + i, char('a' + i))});
  const int shards = testing::WritePack(dir / "pack", samples, {"even", "odd"}, 800);
  ThrottledEnv env(Env::Default(), {});
  Job job(Options(dir / "pack", Config(dir), &env));
  ASSERT_EQ(job.source().kind(), "pack");
  for (int e = 0; e < 3; ++e) {
    job.BeginEpoch(e);
    std::multiset<int64_t> seen;
    Batch b;
    for (Job::Next n; (n = job.NextBatch(&b, 10s)) != Job::Next::kEndOfEpoch;) {
      ASSERT_EQ(n, Job::Next::kBatch);
      for (size_t k = 0; k < b.ids.size(); ++k) {
        const auto& want = samples[static_cast<size_t>(b.ids[k])];
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(b.samples[k].data.get()), b.samples[k].size), want.bytes);
        EXPECT_EQ(b.labels[k], want.label);
        seen.insert(b.ids[k]);
      }
    }
    EXPECT_EQ(seen.size(), 23u);
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 23u);
  }
  const auto metrics = job.Metrics();
  EXPECT_EQ(Reads(metrics[1], "pfs") + Reads(metrics[2], "pfs"), 0);
  EXPECT_EQ(Reads(metrics[2], "memory"), 23);
  EXPECT_EQ(job.cache().pfs_reads(), 23);          // each sample read from the pack once
  EXPECT_EQ(env.files_opened(), 1 + shards);       // the index and each shard, once
  job.Close();
}

TEST(JobSourcesTest, Hdf5BatchesAreArraysWithLabelArrays) {
  TempDir dir;
  const int n = 17;
  std::vector<float> data, target;
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < 12; ++k) data.push_back(static_cast<float>(i * 100 + k));
    target.push_back(static_cast<float>(-i));
    target.push_back(static_cast<float>(i) / 2);
  }
  const hid_t f = H5Fcreate((dir / "set.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  testing::WriteFloats(f, "x", {n, 3, 4}, data, {4, 3, 4});
  testing::WriteFloats(f, "y", {n, 2}, target);
  H5Fclose(f);
  ThrottledEnv env(Env::Default(), {});
  JobOptions o = Options(dir / "set.h5", Config(dir), &env);
  o.source.hdf5_samples = "x";
  o.source.hdf5_labels = "y";
  Job job(o);
  ASSERT_TRUE(job.has_arrays());
  for (int e = 0; e < 3; ++e) {
    job.BeginEpoch(e);
    std::set<int64_t> seen;
    Batch b;
    while (job.NextBatch(&b, 10s) == Job::Next::kBatch) {
      ASSERT_NE(b.array, nullptr);
      ASSERT_TRUE(b.images && b.label_arrays);
      EXPECT_EQ(b.array->ToString(), "float32[3, 4]");
      const auto* x = reinterpret_cast<const float*>(b.images.get());
      const auto* y = reinterpret_cast<const float*>(b.label_arrays.get());
      for (size_t k = 0; k < b.ids.size(); ++k) {
        const int64_t i = b.ids[k];
        for (int j = 0; j < 12; ++j) ASSERT_EQ(x[k * 12 + j], static_cast<float>(i * 100 + j));
        EXPECT_EQ(y[k * 2], static_cast<float>(-i));
        EXPECT_EQ(y[k * 2 + 1], static_cast<float>(i) / 2);
        EXPECT_TRUE(seen.insert(i).second);
      }
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(n));
  }
  const auto metrics = job.Metrics();
  EXPECT_EQ(Reads(metrics[2], "memory"), n);
  EXPECT_EQ(job.cache().pfs_reads(), n);
  job.Close();
}

TEST(JobSourcesTest, TransformsOnArraysAreRefused) {
  TempDir dir;
  const hid_t f = H5Fcreate((dir / "set.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  testing::WriteFloats(f, "data", {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  H5Fclose(f);
  JobOptions o = Options(dir / "set.h5", Config(dir), nullptr);
  o.transforms = {{"ImgDecode", {}}, {"CenterCrop", {{"size", {8}}}}, {"ToTensor", {}}};
  try {
    Job job(o);
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("arrays"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hdmlp

namespace hdmlp {
namespace {

PlanOptions PlanOf(int64_t samples, int batch_size, int epochs, uint64_t seed) {
  PlanOptions p;
  p.num_samples = samples;
  p.batch_size = batch_size;
  p.epochs = epochs;
  p.seed = seed;
  return p;
}

// Waits (at most `limit`) for class 0 of `cache` to hold `samples` samples; its count then.
int64_t WaitUntilFilled(CacheHierarchy& cache, int64_t samples, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (cache.Status()[0].filled_samples < samples && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  return cache.Status()[0].filled_samples;
}

// The prefetch threads of a class holding a whole pack read neighbouring
// samples together: far fewer reads than samples, each sample stored intact.
TEST(CoalescingTest, PrefetchReadsNeighboursInAShardTogether) {
  for (const int coalesce_kb : {0, 64}) {
    TempDir dir;
    std::vector<testing::PackSample> samples;
    for (int i = 0; i < 40; ++i) samples.push_back({"c/" + std::to_string(i), 0, std::string(500 + i, char('A' + i % 26))});
    testing::WritePack(dir / "pack", samples, {"c"}, 1 << 20);
    ThrottledEnv env(Env::Default(), {});
    hdmlp::Config config = hdmlp::Config::LoadString("coalesce_kb = " + std::to_string(coalesce_kb) +
                                       ";\nstorage_classes = ( { capacity = 1.0; threads = 1; },"
                                       " { backend = \"memory\"; capacity = 1.0; threads = 2; } );\n");
    auto source = OpenSource(&env, dir / "pack");
    AccessPlan plan(PlanOf(40, 8, 2, 1));
    CacheHierarchy cache(config, plan, 0, *source, Env::Default());
    cache.Start();
    ASSERT_EQ(WaitUntilFilled(cache, 40, 30s), 40);
    for (int i = 0; i < 40; ++i) {
      SampleBuffer b;
      EXPECT_EQ(cache.Fetch(i, &b), "memory");
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(b.data.get()), b.size), samples[static_cast<size_t>(i)].bytes);
    }
    EXPECT_EQ(cache.pfs_reads(), 40);
    const int64_t reads = env.reads() - 2;  // less the index and the shard header
    if (coalesce_kb == 0) {
      EXPECT_EQ(reads, 40);
    } else {
      EXPECT_LT(reads, 20) << "coalesced prefetch made " << reads << " reads for 40 samples";
    }
    cache.Close();
  }
}


// FetchView, what the staging workers call before they transform a sample:
// a sample the RAM class holds is lent where it lies there (no copy into the
// caller's buffer, the same address every time, the stored bytes); one read
// from the dataset's storage lands in the caller's buffer and the view
// points there.
TEST(FetchViewTest, LendsTheMemoryClassBytesInPlaceAndReadsTheRest) {
  TempDir dir;
  std::vector<testing::PackSample> samples;
  for (int i = 0; i < 40; ++i) samples.push_back({"c/" + std::to_string(i), 0, std::string(300 + i, char('a' + i % 26))});
  testing::WritePack(dir / "pack", samples, {"c"}, 1 << 20);
  for (const bool ram : {true, false}) {
    SCOPED_TRACE(ram ? "memory class" : "no cache class");
    ThrottledEnv env(Env::Default(), {});
    hdmlp::Config config = hdmlp::Config::LoadString(
        std::string("storage_classes = ( { capacity = 1.0; threads = 1; }") +
        (ram ? ", { backend = \"memory\"; capacity = 1.0; threads = 2; }" : "") + " );\n");
    auto source = OpenSource(&env, dir / "pack");
    AccessPlan plan(PlanOf(40, 8, 2, 1));
    CacheHierarchy cache(config, plan, 0, *source, Env::Default());
    cache.Start();
    if (ram) ASSERT_EQ(WaitUntilFilled(cache, 40, 30s), 40);
    for (int i = 0; i < 40; ++i) {
      const std::string& want = samples[static_cast<size_t>(i)].bytes;
      SampleBuffer storage;
      SampleView view;
      EXPECT_EQ(cache.FetchView(i, &storage, &view), ram ? "memory" : "pfs");
      ASSERT_NE(view.data, nullptr);
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(view.data), view.size), want);
      if (ram) {
        EXPECT_EQ(storage.size, 0) << "sample " << i << " was copied out of the RAM class";
        SampleBuffer again;
        SampleView second;
        cache.FetchView(i, &again, &second);
        EXPECT_EQ(second.data, view.data);
      } else {
        EXPECT_EQ(view.data, storage.data.get());
        EXPECT_EQ(view.size, storage.size);
      }
    }
    cache.Close();
  }
}

// Over a store where every request takes time (a remote file system), the
// shipped default configuration keeps more reads of a pack in flight than
// two prefetch threads could (each reads a coalesced run in at most 8
// pieces): the memory class's threads each keep a run under way.
TEST(CoalescingTest, DefaultConfigKeepsMoreThanTwoRunsInFlight) {
  TempDir dir;
  std::vector<testing::PackSample> samples;
  for (int i = 0; i < 256; ++i) samples.push_back({"c/" + std::to_string(i), 0, std::string(128 << 10, char('a' + i % 26))});
  testing::WritePack(dir / "pack", samples, {"c"}, 64 << 20);
  const hdmlp::Config shipped = hdmlp::Config::LoadFile(std::string(HDMLP_SOURCE_DIR) + "/configs/default.cfg");
  ASSERT_GE(shipped.storage_classes.size(), 2u);
  ASSERT_EQ(shipped.storage_classes[1].backend, "memory");
  constexpr int kPiecesPerRun = 8;  // ReadInPieces' default
  static const int kTwo = 2;  // the memory class's threads before: at most 2 runs in flight
  for (const int* threads_of : {&shipped.storage_classes[1].threads, &kTwo}) {
    const int& threads = *threads_of;
    SCOPED_TRACE("memory class threads " + std::to_string(threads));
    hdmlp::Config config = shipped;
    config.storage_classes.resize(2);  // RAM holds the pack; no on-disk class in the user's cache
    config.storage_classes[1].threads = threads;
    ThrottledEnv::Options slow;
    // A 512 KiB piece takes 0.26 s: long enough that the threads' runs overlap also when starting
    // a run's piece threads is slow (TSan on a busy machine: 15 reads in flight at 5 MB/s).
    slow.read_bandwidth_mbps = 2;
    ThrottledEnv env(Env::Default(), slow);
    auto source = OpenSource(&env, dir / "pack");
    AccessPlan plan(PlanOf(256, 16, 1, 3));
    CacheHierarchy cache(config, plan, 0, *source, Env::Default());
    cache.Start();
    ASSERT_EQ(WaitUntilFilled(cache, 256, 60s), 256);
    for (int i = 0; i < 256; i += 37) {
      SampleBuffer b;
      EXPECT_EQ(cache.Fetch(i, &b), "memory");
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(b.data.get()), b.size), samples[static_cast<size_t>(i)].bytes);
    }
    RecordProperty("max_reads_in_flight_" + std::to_string(threads), std::to_string(env.max_reads_in_flight()));
    EXPECT_LE(env.max_reads_in_flight(), threads * kPiecesPerRun);
    if (&threads == &shipped.storage_classes[1].threads) {
      EXPECT_GT(env.max_reads_in_flight(), 2 * kPiecesPerRun)
          << "the default config kept no more reads in flight than two prefetch threads could";
    }
    cache.Close();
  }
}

}  // namespace
}  // namespace hdmlp
