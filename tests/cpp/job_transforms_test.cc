// The Job with a transform chain: workers write samples into batch memory.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <random>
#include <set>

#include "hdmlp/errors.h"
#include "hdmlp/job/job.h"
#include "test_util.h"

namespace hdmlp {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;
using testing::WriteFile;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class JobTransformsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_ / "data";
    std::mt19937 rng(5);
    for (int i = 0; i < 30; ++i) {
      cv::Mat image(30 + i % 7, 40 + i % 5, CV_8UC3);
      cv::randu(image, 0, 255);
      std::vector<uint8_t> png;
      cv::imencode(i % 2 ? ".png" : ".jpg", image, png);
      const std::string rel = "c" + std::to_string(i % 3) + "/img" + std::to_string(i) + (i % 2 ? ".png" : ".jpg");
      WriteFile(root_ + "/" + rel, std::string(png.begin(), png.end()));
    }
  }

  JobOptions Options(int threads) {
    const std::string config = dir_ / ("t" + std::to_string(threads) + ".cfg");
    WriteFile(config, "storage_classes = ( { capacity = 0.2; threads = " + std::to_string(threads) + "; } );\n");
    JobOptions o;
    o.dataset_path = root_;
    o.batch_size = 4;
    o.epochs = 2;
    o.has_seed = true;
    o.seed = 9;
    o.config_path = config;
    o.scan.use_cache = false;
    o.transforms = {{"ImgDecode", {}},
                    {"RandomResizedCrop", {{"size", {12}}}},
                    {"RandomHorizontalFlip", {}},
                    {"ToTensor", {}}};
    return o;
  }

  static Job::Next Next(Job& job, Batch* batch) {
    for (;;) {
      auto r = job.NextBatch(batch, 1000ms);
      if (r != Job::Next::kTimeout) return r;
    }
  }

  // Every batch of every epoch, as (ids, the batch's bytes).
  static std::vector<std::pair<std::vector<int64_t>, std::string>> All(Job& job) {
    std::vector<std::pair<std::vector<int64_t>, std::string>> out;
    for (int e = 0; e < job.plan().epochs(); ++e) {
      job.BeginEpoch(e);
      Batch b;
      while (Next(job, &b) == Job::Next::kBatch) {
        const auto bytes = static_cast<size_t>(b.sample_shape.bytes()) * b.ids.size();
        out.emplace_back(b.ids, std::string(reinterpret_cast<const char*>(b.images.get()), bytes));
      }
    }
    return out;
  }

  TempDir dir_;
  std::string root_;
};

TEST_F(JobTransformsTest, RowsAreThePipelinesOutputWhateverTheThreadCount) {
  Job one(Options(1));
  Job three(Options(3));
  ASSERT_TRUE(three.has_transforms());
  EXPECT_EQ(three.sample_shape().bytes(), 3 * 12 * 12 * 4);
  const auto a = All(one);
  const auto b = All(three);
  ASSERT_EQ(a.size(), b.size());
  TransformPipeline pipeline(Options(1).transforms);
  const int64_t row = pipeline.output().bytes();
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second, b[i].second) << "batch " << i;
    const int epoch = static_cast<int>(i / static_cast<size_t>(three.BatchesPerEpoch()));
    for (size_t r = 0; r < a[i].first.size(); ++r) {
      const int64_t sample = a[i].first[r];
      const std::string file = ReadAll(three.source().Describe(sample));
      std::vector<float> expected(static_cast<size_t>(row / 4));
      pipeline.Apply(reinterpret_cast<const uint8_t*>(file.data()), static_cast<int64_t>(file.size()), "x", 9, epoch,
                     sample, reinterpret_cast<uint8_t*>(expected.data()));
      EXPECT_EQ(std::memcmp(expected.data(), a[i].second.data() + r * static_cast<size_t>(row),
                            static_cast<size_t>(row)), 0)
          << "epoch " << epoch << " sample " << sample;
    }
  }
}

TEST_F(JobTransformsTest, SkipKeepsEveryStepAndDeliversEveryGoodSampleOnce) {
  WriteFile(root_ + "/c0/bad_empty.jpg", "");
  WriteFile(root_ + "/c1/bad_text.png", "not a png");
  WriteFile(root_ + "/c2/bad_truncated.jpg", ReadAll(root_ + "/c0/img0.jpg").substr(0, 200));
  JobOptions o = Options(2);
  o.batch_size = 5;  // 33 samples: 6 batches of 5 and a last of 3
  o.skip_bad_samples = true;
  Job job(o);
  ASSERT_EQ(job.BatchesPerEpoch(), 7);
  std::set<int64_t> good;
  for (int64_t i = 0; i < job.source().size(); ++i) {
    if (job.source().names()[static_cast<size_t>(i)].find("bad_") == std::string::npos) good.insert(i);
  }
  for (int e = 0; e < 2; ++e) {
    job.BeginEpoch(e);
    Batch b;
    std::multiset<int64_t> seen;
    std::vector<size_t> sizes;
    // Hold every batch until the epoch ends: rows must never change.
    std::vector<std::pair<Batch, std::string>> held;
    while (Next(job, &b) == Job::Next::kBatch) {
      seen.insert(b.ids.begin(), b.ids.end());
      sizes.push_back(b.ids.size());
      const size_t bytes = static_cast<size_t>(b.sample_shape.bytes()) * b.ids.size();
      std::string copy(reinterpret_cast<const char*>(b.images.get()), bytes);
      held.emplace_back(std::move(b), std::move(copy));
      b = Batch();
    }
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()), good);
    EXPECT_EQ(seen.size(), good.size()) << "a sample was delivered twice";
    // Every step is taken and none is empty; a batch before the last is short
    // only once the last one is down to one sample.
    ASSERT_EQ(sizes.size(), 7u) << "epoch " << e;
    for (size_t i = 0; i < sizes.size(); ++i) {
      EXPECT_GE(sizes[i], 1u);
      if (i + 1 < sizes.size() && sizes[i] < 5) EXPECT_EQ(sizes.back(), 1u) << "batch " << i << " epoch " << e;
    }
    EXPECT_LE(sizes.back(), 3u);
    for (const auto& [batch, copy] : held) {
      EXPECT_EQ(std::memcmp(batch.images.get(), copy.data(), copy.size()), 0) << "memory reused while held";
    }
  }
  EXPECT_EQ(job.skipped_samples(), 6);
  EXPECT_EQ(job.SkippedFiles().size(), 3u);
  EXPECT_EQ(job.Metrics()[1].skipped, 3);
}

TEST_F(JobTransformsTest, SkipDeliversShorterBatchesOnceTheLastIsDownToOneAndPadsAnEmptyOne) {
  // Index order (no shuffle) puts the bad files first: batch 0 of 2 is all
  // bad, batch 1 half; 33 samples in batches of 2 leave a last batch of 1,
  // which must keep its sample, so no hole can be filled. Batch 0 then gets a
  // good sample of the epoch again (issue 26: as DistributedSampler pads),
  // instead of an error: the first good one, as none was delivered before.
  WriteFile(root_ + "/c0/aaa_bad1.jpg", "");
  WriteFile(root_ + "/c0/aaa_bad2.jpg", "not a jpeg");
  WriteFile(root_ + "/c0/aaa_bad3.jpg", "");
  JobOptions o = Options(2);
  o.batch_size = 2;
  o.epochs = 1;
  o.shuffle = false;
  o.skip_bad_samples = true;
  Job job(o);
  ASSERT_EQ(job.BatchesPerEpoch(), 17);
  job.BeginEpoch(0);
  Batch b;
  std::vector<size_t> sizes;
  std::vector<int64_t> ids;
  while (Next(job, &b) == Job::Next::kBatch) {
    sizes.push_back(b.ids.size());
    ids.insert(ids.end(), b.ids.begin(), b.ids.end());
  }
  ASSERT_EQ(sizes.size(), 17u);  // every step
  EXPECT_EQ(sizes[0], 1u);        // padded: sample 3, the first good one
  EXPECT_EQ(sizes[1], 1u);        // half bad, delivered shorter
  EXPECT_EQ(sizes.back(), 1u);
  EXPECT_EQ(ids[0], 3);
  EXPECT_EQ(ids.size(), 31u);                               // every good sample, and the repeat
  EXPECT_EQ(std::set<int64_t>(ids.begin(), ids.end()).size(), 30u);
  EXPECT_EQ(job.padded_samples(), 1);
  EXPECT_EQ(job.skipped_samples(), 3);
}

TEST_F(JobTransformsTest, SkipRaisesOnlyWhenTheRanksEpochHasNoGoodSample) {
  JobOptions o = Options(2);
  o.batch_size = 2;
  o.epochs = 1;
  o.shuffle = false;
  o.skip_bad_samples = true;
  // Every file bad.
  for (const auto& e : std::filesystem::recursive_directory_iterator(root_)) {
    if (e.is_regular_file()) WriteFile(e.path().string(), "not a jpeg");
  }
  Job job(o);
  job.BeginEpoch(0);
  Batch b;
  try {
    Next(job, &b);
    FAIL() << "an empty batch was delivered";
  } catch (const InvalidArgumentError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 0"), std::string::npos) << what;
    EXPECT_NE(what.find("epoch 0"), std::string::npos) << what;
    EXPECT_NE(what.find("no good sample to repeat"), std::string::npos) << what;
  }
}

TEST_F(JobTransformsTest, ShorterBatchesCloseUpTheirRows) {
  // A hole nothing fills moves the rows after it up: row k of the batch is
  // the transform of its k-th id.
  WriteFile(root_ + "/c0/img0a_bad.jpg", "");  // sorts right after c0/img0.jpg
  JobOptions o = Options(1);
  o.batch_size = 5;  // 31 samples: 6 batches of 5 and a last of 1, which keeps it
  o.epochs = 1;
  o.shuffle = false;
  o.skip_bad_samples = true;
  Job job(o);
  TransformPipeline pipeline(o.transforms);
  const int64_t row = pipeline.output().bytes();
  job.BeginEpoch(0);
  Batch b;
  int batches = 0;
  while (Next(job, &b) == Job::Next::kBatch) {
    ++batches;
    if (batches == 1) EXPECT_EQ(b.ids.size(), 4u);  // the hole at row 1, not filled
    for (size_t r = 0; r < b.ids.size(); ++r) {
      const std::string file = ReadAll(job.source().Describe(b.ids[r]));
      std::vector<uint8_t> expected(static_cast<size_t>(row));
      pipeline.Apply(reinterpret_cast<const uint8_t*>(file.data()), static_cast<int64_t>(file.size()), "x", 9, 0,
                     b.ids[r], expected.data());
      EXPECT_EQ(std::memcmp(expected.data(), b.images.get() + r * static_cast<size_t>(row),
                            static_cast<size_t>(row)), 0)
          << "batch " << batches - 1 << " row " << r;
    }
  }
  EXPECT_EQ(batches, 7);
}

TEST_F(JobTransformsTest, RaiseNamesTheBadFile) {
  WriteFile(root_ + "/c1/broken.jpg", "\xff\xd8\xff");
  Job job(Options(2));
  job.BeginEpoch(0);
  Batch b;
  try {
    while (Next(job, &b) == Job::Next::kBatch) {
    }
    FAIL() << "the bad file was not reported";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("broken.jpg"), std::string::npos) << e.what();
  }
}

TEST_F(JobTransformsTest, EarlyBreakAndCloseWithBatchesStillHeld) {
  Batch kept;
  {
    Job job(Options(3));
    job.BeginEpoch(0);
    ASSERT_EQ(Next(job, &kept), Job::Next::kBatch);
    job.BeginEpoch(1);  // the rest of epoch 0 is dropped while workers write it
    Batch b;
    ASSERT_EQ(Next(job, &b), Job::Next::kBatch);
  }
  // The job is gone; the held batch's memory is still valid (ASan).
  volatile float first = reinterpret_cast<const float*>(kept.images.get())[0];
  EXPECT_GE(first, 0.0f);
}

TEST_F(JobTransformsTest, ImpossibleChainIsRefusedBeforeAnythingStarts) {
  JobOptions o = Options(2);
  o.transforms = {{"RandomResizedCrop", {{"size", {12}}}}, {"ToTensor", {}}};
  EXPECT_THROW(Job job(o), InvalidArgumentError);
}

}  // namespace
}  // namespace hdmlp
