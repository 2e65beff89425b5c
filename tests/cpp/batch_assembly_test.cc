// BatchAssembly without a Job: a plan, a staging buffer that the test fills
// as the staging workers would (a good sample's row holds its id; a bad one
// fails as a rejected image does), and the assembly under test.
#include "hdmlp/job/batch_assembly.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <thread>

namespace hdmlp {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kRowBytes = sizeof(int64_t);
constexpr int64_t kSamples = 23;

AccessPlan Plan(int world_size, int64_t batch_size, int epochs = 1) {
  PlanOptions o;
  o.num_samples = kSamples;
  o.batch_size = batch_size;
  o.epochs = epochs;
  o.seed = 7;
  o.world_size = world_size;
  return AccessPlan(o);
}

std::string Why(int64_t sample) { return "bad sample " + std::to_string(sample); }

// One rank's consumer side over `plan`; the samples in `bad` are rejected.
class Rank {
 public:
  Rank(const AccessPlan& plan, int rank, bool rows, bool skip, std::set<int64_t> bad = {})
      : plan_(plan), rank_(rank), rows_(rows), bad_(std::move(bad)),
        staging_(int64_t{1} << 30, plan.RankEpochSize(rank) * plan.epochs()) {
    for (int64_t s = 0; s < kSamples; ++s) labels_.push_back(static_cast<int32_t>(s * 3 % 5));
    BatchAssembly::Layout layout;
    layout.rank = rank;
    layout.epoch_size = plan.RankEpochSize(rank);
    layout.batch_start.push_back(0);
    for (int64_t b = 0; b < plan.BatchesPerEpoch(); ++b) {
      layout.batch_start.push_back(layout.batch_start.back() + plan.LocalBatchSize(rank, b));
      largest_ = std::max(largest_, plan.LocalBatchSize(rank, b));
    }
    layout.rows = rows;
    layout.row_bytes = kRowBytes;
    layout.skip_bad_samples = skip;
    BatchAssembly::Hooks hooks;
    hooks.batch_memory = [this](int epoch, int64_t batch) { return Memory(epoch, batch); };
    hooks.read_into_row = [this](int, int64_t sample, uint8_t* memory, int64_t row) {
      ++consumer_reads_;
      if (bad_.count(sample) != 0) throw InvalidArgumentError(Why(sample));
      std::memcpy(memory + row * kRowBytes, &sample, kRowBytes);
    };
    hooks.record_skip = [this](const std::string& why) { skips_.push_back(why); };
    assembly_ = std::make_unique<BatchAssembly>(std::move(layout), &staging_, &labels_, std::move(hooks));
  }

  BatchAssembly& assembly() { return *assembly_; }
  StagingBuffer& staging() { return staging_; }
  const std::vector<std::string>& skips() const { return skips_; }
  int consumer_reads() const { return consumer_reads_; }
  int64_t epoch_size() const { return plan_.RankEpochSize(rank_); }

  void Begin(int epoch) {
    epoch_ = epoch;
    order_.emplace(plan_.Epoch(rank_, epoch));
    assembly_->BeginEpoch(epoch, *order_, 0);
  }
  // Stages positions [from, to) of the epoch begun, as the workers would.
  void Stage(int64_t from, int64_t to) {
    for (int64_t j = from; j < to; ++j) {
      int64_t item = 0;
      ASSERT_TRUE(staging_.Claim([](int64_t) { return int64_t{1}; }, &item));
      ASSERT_EQ(item, epoch_ * epoch_size() + j);
      const int64_t sample = order_->At(j);
      if (bad_.count(sample) != 0) {
        staging_.Fail(item, CapturedError::FromKindName("invalid_argument", Why(sample)));
      } else if (rows_ && assembly_->MovedAway(item)) {
        staging_.Complete(item, SampleBuffer(), 0);
      } else if (rows_) {
        const int64_t batch = assembly_->BatchOfPosition(j);
        std::memcpy(Memory(epoch_, batch).get() + (j - assembly_->BatchBegin(batch)) * kRowBytes, &sample, kRowBytes);
        staging_.Complete(item, SampleBuffer(), 0);
      } else {
        SampleBuffer bytes = SampleBuffer::Allocate(kRowBytes);
        std::memcpy(bytes.data.get(), &sample, kRowBytes);
        staging_.Complete(item, std::move(bytes));
      }
    }
  }
  // Next() with a deadline now: everything it needs must be staged.
  BatchAssembly::Step Next(Batch* out, CapturedError* error = nullptr) {
    BatchAssembly::Progress progress;
    const auto step = assembly_->Next(out, Clock::now() + std::chrono::seconds(10), &progress);
    if (error != nullptr) *error = progress.error;
    return step;
  }
  // The samples a batch holds, read from its bytes or rows; checks its labels.
  std::vector<int64_t> Held(const Batch& batch) const {
    std::vector<int64_t> held(batch.ids.size());
    for (size_t i = 0; i < held.size(); ++i) {
      const uint8_t* from = rows_ ? batch.images.get() + static_cast<int64_t>(i) * kRowBytes : batch.samples[i].data.get();
      std::memcpy(&held[i], from, kRowBytes);
      EXPECT_EQ(batch.labels[i], labels_[static_cast<size_t>(batch.ids[i])]);
    }
    return held;
  }
  // A whole epoch staged, then assembled: its batches (failed ones are empty).
  std::vector<Batch> Epoch(int epoch) {
    Begin(epoch);
    Stage(0, epoch_size());
    std::vector<Batch> batches;
    for (Batch batch; ; batch = Batch()) {
      const auto step = Next(&batch);
      if (step == BatchAssembly::Step::kEndOfEpoch) break;
      EXPECT_NE(step, BatchAssembly::Step::kTimeout);
      if (step == BatchAssembly::Step::kBatch) EXPECT_EQ(Held(batch), batch.ids);
      batches.push_back(std::move(batch));
    }
    return batches;
  }

 private:
  std::shared_ptr<uint8_t> Memory(int epoch, int64_t batch) {
    std::lock_guard<std::mutex> lock(memory_mu_);
    auto& memory = memory_[{epoch, batch}];
    if (!memory) memory.reset(new uint8_t[static_cast<size_t>(largest_ * kRowBytes)](), std::default_delete<uint8_t[]>());
    return memory;
  }

  const AccessPlan& plan_;
  const int rank_;
  const bool rows_;
  const std::set<int64_t> bad_;
  StagingBuffer staging_;
  std::vector<int32_t> labels_;
  int64_t largest_ = 0;
  std::mutex memory_mu_;
  std::map<std::pair<int, int64_t>, std::shared_ptr<uint8_t>> memory_;
  std::vector<std::string> skips_;
  int consumer_reads_ = 0;
  int epoch_ = 0;
  std::optional<EpochOrder> order_;
  std::unique_ptr<BatchAssembly> assembly_;
};

TEST(BatchAssemblyTest, EachSampleOncePerEpochAcrossRanksInPlanBatches) {
  for (const bool rows : {false, true}) {
    const AccessPlan plan = Plan(/*world_size=*/3, /*batch_size=*/6, /*epochs=*/2);
    for (int epoch = 0; epoch < 2; ++epoch) {
      std::multiset<int64_t> seen;
      for (int r = 0; r < 3; ++r) {
        Rank rank(plan, r, rows, /*skip=*/false);
        rank.Begin(epoch);
        // The workers stage while the consumer assembles.
        std::thread workers([&] { rank.Stage(0, rank.epoch_size()); });
        for (int64_t b = 0; b < plan.BatchesPerEpoch(); ++b) {
          Batch batch;
          ASSERT_EQ(rank.Next(&batch), BatchAssembly::Step::kBatch);
          EXPECT_EQ(batch.epoch, epoch);
          EXPECT_EQ(batch.index, b);
          EXPECT_EQ(static_cast<int64_t>(batch.ids.size()), plan.LocalBatchSize(r, b));
          EXPECT_EQ(rank.Held(batch), batch.ids);
          seen.insert(batch.ids.begin(), batch.ids.end());
        }
        Batch after;
        EXPECT_EQ(rank.Next(&after), BatchAssembly::Step::kEndOfEpoch);
        workers.join();
      }
      ASSERT_EQ(seen.size(), static_cast<size_t>(kSamples)) << "rows=" << rows;
      for (int64_t s = 0; s < kSamples; ++s) EXPECT_EQ(seen.count(s), 1u) << "sample " << s;
    }
  }
}

TEST(BatchAssemblyTest, ABadSampleWithoutSkipEndsItsBatchOnly) {
  const AccessPlan plan = Plan(1, 5);
  const int64_t bad = plan.Epoch(0, 0).At(1);  // batch 0's second sample
  Rank rank(plan, 0, /*rows=*/false, /*skip=*/false, {bad});
  rank.Begin(0);
  rank.Stage(0, rank.epoch_size());
  Batch batch;
  CapturedError error;
  ASSERT_EQ(rank.Next(&batch, &error), BatchAssembly::Step::kFailed);
  EXPECT_EQ(error.message(), Why(bad));
  EXPECT_TRUE(batch.ids.empty());
  EXPECT_EQ(rank.assembly().next_batch(), 1);
  // The next call delivers the next batch whole: batch 0's rest is not read.
  ASSERT_EQ(rank.Next(&batch), BatchAssembly::Step::kBatch);
  EXPECT_EQ(batch.index, 1);
  EXPECT_EQ(batch.ids.front(), plan.Epoch(0, 0).At(5));
  EXPECT_EQ(static_cast<int64_t>(batch.ids.size()), 5);
}

TEST(BatchAssemblyTest, SkippedSamplesAreFilledFromTheEpochEndKeepingEveryStep) {
  const AccessPlan plan = Plan(1, 5);  // 23 samples: batches of 5, 5, 5, 5, 3
  const EpochOrder order = plan.Epoch(0, 0);
  const std::set<int64_t> bad = {order.At(0), order.At(6), order.At(21)};
  Rank rank(plan, 0, /*rows=*/true, /*skip=*/true, bad);
  const std::vector<Batch> batches = rank.Epoch(0);
  // Batch 0's hole takes the epoch's last sample (position 22). Batch 1's
  // would take position 21, which is bad too, and the one before would
  // empty the last batch: batch 1 stays one short, and the last batch keeps
  // only position 20.
  std::vector<size_t> sizes;
  std::multiset<int64_t> seen;
  for (const Batch& batch : batches) {
    sizes.push_back(batch.ids.size());
    seen.insert(batch.ids.begin(), batch.ids.end());
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{5, 4, 5, 5, 1}));
  EXPECT_EQ(batches[0].ids.front(), order.At(22));
  EXPECT_EQ(seen.size(), static_cast<size_t>(kSamples) - bad.size());
  for (int64_t s = 0; s < kSamples; ++s) EXPECT_EQ(seen.count(s), bad.count(s) != 0 ? 0u : 1u) << "sample " << s;
  EXPECT_EQ(rank.skips().size(), bad.size());
  EXPECT_EQ(rank.assembly().padded(), 0);
}

TEST(BatchAssemblyTest, ABatchWithNoGoodSampleRepeatsTheLastOneDelivered) {
  const AccessPlan plan = Plan(1, 5);
  const EpochOrder order = plan.Epoch(0, 0);
  // The last batch (positions 20..22) is all bad: nothing after it can fill it.
  Rank rank(plan, 0, /*rows=*/true, /*skip=*/true, {order.At(20), order.At(21), order.At(22)});
  const std::vector<Batch> batches = rank.Epoch(0);
  ASSERT_EQ(static_cast<int64_t>(batches.size()), plan.BatchesPerEpoch());
  EXPECT_EQ(batches.back().ids, std::vector<int64_t>{order.At(19)});
  EXPECT_EQ(rank.assembly().padded(), 1);
  EXPECT_EQ(rank.skips().size(), 3u);
}

TEST(BatchAssemblyTest, RanksWithDifferentBadSamplesTakeTheSameSteps) {
  const AccessPlan plan = Plan(2, 6);
  std::set<int64_t> bad;
  for (int64_t j = 0; j < 7; ++j) bad.insert(plan.Epoch(0, 0).At(j));  // most of rank 0's epoch
  std::multiset<int64_t> seen;
  int64_t padded = 0;
  for (int r = 0; r < 2; ++r) {
    Rank rank(plan, r, /*rows=*/true, /*skip=*/true, bad);
    const std::vector<Batch> batches = rank.Epoch(0);
    EXPECT_EQ(static_cast<int64_t>(batches.size()), plan.BatchesPerEpoch()) << "rank " << r;
    for (const Batch& batch : batches) {
      EXPECT_FALSE(batch.ids.empty()) << "rank " << r << " batch " << batch.index;
      seen.insert(batch.ids.begin(), batch.ids.end());
    }
    padded += rank.assembly().padded();
  }
  // Every good sample once, plus the repeats that kept steps non-empty.
  EXPECT_EQ(static_cast<int64_t>(seen.size()), kSamples - static_cast<int64_t>(bad.size()) + padded);
  for (int64_t s = 0; s < kSamples; ++s) {
    if (bad.count(s) != 0) EXPECT_EQ(seen.count(s), 0u) << "sample " << s;
    else EXPECT_GE(seen.count(s), 1u) << "sample " << s;
  }
}

TEST(BatchAssemblyTest, AnEpochWithNoGoodSampleFailsNamingTheFiles) {
  const AccessPlan plan = Plan(1, 30);  // one batch
  std::set<int64_t> all;
  for (int64_t s = 0; s < kSamples; ++s) all.insert(s);
  Rank rank(plan, 0, /*rows=*/true, /*skip=*/true, all);
  rank.Begin(0);
  rank.Stage(0, rank.epoch_size());
  Batch batch;
  CapturedError error;
  ASSERT_EQ(rank.Next(&batch, &error), BatchAssembly::Step::kFailed);
  EXPECT_TRUE(error.IsInvalidArgument());
  EXPECT_NE(error.message().find("rank 0: every sample of batch 0 of epoch 0 is bad"), std::string::npos);
  EXPECT_NE(error.message().find(Why(plan.Epoch(0, 0).At(0))), std::string::npos);
  EXPECT_EQ(rank.Next(&batch), BatchAssembly::Step::kEndOfEpoch);
}

TEST(BatchAssemblyTest, ATimeoutKeepsTheHalfAssembledBatch) {
  const AccessPlan plan = Plan(1, 5);
  Rank rank(plan, 0, /*rows=*/false, /*skip=*/false);
  rank.Begin(0);
  rank.Stage(0, 3);
  Batch batch;
  BatchAssembly::Progress progress;
  EXPECT_EQ(rank.assembly().Next(&batch, Clock::now() + std::chrono::milliseconds(20), &progress),
            BatchAssembly::Step::kTimeout);
  EXPECT_TRUE(rank.assembly().partial());
  EXPECT_GT(progress.waited, 0);
  rank.Stage(3, 5);
  ASSERT_EQ(rank.Next(&batch), BatchAssembly::Step::kBatch);
  EXPECT_EQ(rank.Held(batch), batch.ids);
  EXPECT_EQ(batch.ids.size(), 5u);
}

}  // namespace
}  // namespace hdmlp
