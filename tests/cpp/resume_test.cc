// Tests of resumed plans (plan/resume_point.h): a plan that starts at a
// global batch of an epoch, on the same or another number of ranks, against
// the uninterrupted plan it continues.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "hdmlp/errors.h"
#include "hdmlp/plan/access_plan.h"
#include "hdmlp/plan/placement.h"
#include "hdmlp/util/random.h"

namespace hdmlp {
namespace {

// Every global batch of an epoch: the union of the ranks' slices of each.
std::vector<std::multiset<int64_t>> GlobalBatches(const AccessPlan& plan, int epoch) {
  std::vector<std::multiset<int64_t>> out(static_cast<size_t>(plan.BatchesPerEpoch()));
  for (int r = 0; r < plan.options().world_size; ++r) {
    const std::vector<int64_t> ids = plan.RankEpochSamples(r, epoch);
    for (int64_t h = 0; h < plan.BatchesPerEpoch(); ++h) {
      const int64_t begin = plan.LocalBatchStart(r, h);
      out[static_cast<size_t>(h)].insert(ids.begin() + begin, ids.begin() + begin + plan.LocalBatchSize(r, h));
    }
  }
  return out;
}

// Samples of batches [from, to) of an epoch, over every rank.
std::multiset<int64_t> Batches(const std::vector<std::multiset<int64_t>>& batches, int64_t from, int64_t to) {
  std::multiset<int64_t> out;
  for (int64_t h = from; h < to; ++h) {
    out.insert(batches[static_cast<size_t>(h)].begin(), batches[static_cast<size_t>(h)].end());
  }
  return out;
}

// Checks the promises of a plan resumed at global batch h of epoch e with
// `world` ranks, taken from the uninterrupted plan `old`; "" or what broke.
std::string CheckResumed(const AccessPlan& old, const AccessPlan& resumed, int e, int64_t h) {
  const int n_old = old.options().world_size, n_new = resumed.options().world_size;
  const int epochs = old.epochs();
  if (resumed.StartBatch() != h) return "StartBatch is not the resume point's batch";
  for (int r = 0; r < n_new; ++r) {
    if (resumed.StartItem(r) != e * resumed.RankEpochSize(r) + resumed.LocalBatchStart(r, h)) {
      return "StartItem of rank " + std::to_string(r) + " is wrong";
    }
  }
  // The interrupted epoch: what the old ranks delivered before the stop and
  // what the new ones read from it on are the epoch, each sample once. (At
  // an epoch boundary, h = 0, the epoch is simply the new world size's.)
  const int64_t common = std::min(old.BatchesPerEpoch(), resumed.BatchesPerEpoch()) - 1;
  if (h > 0) {
    const auto old_batches = GlobalBatches(old, e), new_batches = GlobalBatches(resumed, e);
    const std::multiset<int64_t> whole = Batches(old_batches, 0, old.BatchesPerEpoch());
    std::multiset<int64_t> both = Batches(old_batches, 0, h);
    const std::multiset<int64_t> rest = Batches(new_batches, h, resumed.BatchesPerEpoch());
    both.insert(rest.begin(), rest.end());
    if (both != whole) return "the interrupted epoch is not delivered exactly once across both runs";
    // Every remaining global batch holds the samples it would have held; only
    // a last remainder merged under one world size and not the other differs.
    for (int64_t k = h; k < common; ++k) {
      if (old_batches[static_cast<size_t>(k)] != new_batches[static_cast<size_t>(k)]) {
        return "global batch " + std::to_string(k) + " of the interrupted epoch changed";
      }
    }
    if (n_new == n_old) {
      // Same rank count: the same reads, sample for sample.
      for (int r = 0; r < n_new; ++r) {
        const auto a = old.RankEpochSamples(r, e), b = resumed.RankEpochSamples(r, e);
        for (int64_t j = resumed.LocalBatchStart(r, h); j < resumed.RankEpochSize(r); ++j) {
          if (a[static_cast<size_t>(j)] != b[static_cast<size_t>(j)]) return "same world size, different reads";
        }
      }
    }
  }
  // Later epochs: this world size's own plan; for uniform, the same global
  // batches as the uninterrupted run.
  PlanOptions fresh_options = resumed.options();
  fresh_options.start = ResumePoint();
  const AccessPlan fresh(fresh_options);
  for (int later = h > 0 ? e + 1 : e; later < epochs; ++later) {
    for (int r = 0; r < n_new; ++r) {
      if (resumed.RankEpochSamples(r, later) != fresh.RankEpochSamples(r, later)) {
        return "epoch " + std::to_string(later) + " is not this world size's own";
      }
    }
    if (old.options().scheme == DistributionScheme::kUniform) {
      const auto old_batches = GlobalBatches(old, later), new_batches = GlobalBatches(resumed, later);
      for (int64_t k = 0; k < common; ++k) {
        if (old_batches[static_cast<size_t>(k)] != new_batches[static_cast<size_t>(k)]) {
          return "a later global batch changed";
        }
      }
    }
  }
  // FirstEpochReader: the rank that reads the sample first from the start
  // on, in the rest of the start epoch or (after a stop inside it) the next.
  std::map<int64_t, int> reader;
  for (int r = 0; r < n_new; ++r) {
    const auto ids = resumed.RankEpochSamples(r, e);
    for (int64_t j = resumed.LocalBatchStart(r, h); j < resumed.RankEpochSize(r); ++j) {
      reader[ids[static_cast<size_t>(j)]] = r;
    }
  }
  if (h > 0 && e + 1 < epochs) {
    for (int r = 0; r < n_new; ++r) {
      for (int64_t id : resumed.RankEpochSamples(r, e + 1)) reader.emplace(id, r);  // keeps the start epoch's
    }
  }
  for (int64_t s = 0; s < old.options().num_samples; ++s) {
    const auto it = reader.find(s);
    if (resumed.FirstEpochReader(s) != (it == reader.end() ? -1 : it->second)) {
      return "FirstEpochReader of sample " + std::to_string(s) + " is wrong";
    }
  }
  return "";
}

bool Refused(int64_t n, int64_t b, int world, bool drop_last) {
  return b < world || n < world || (drop_last && n < b);
}

TEST(ResumePropertyTest, ExactlyOnceAndTheSameBatchesOnAnyWorldSize) {
  std::vector<std::array<int64_t, 4>> shapes;  // n, B, old ranks, new ranks
  for (int64_t n = 1; n <= 17; ++n)
    for (int64_t b = 1; b <= 6; ++b)
      for (int64_t w = 1; w <= 4; ++w)
        for (int64_t m = 1; m <= 4; ++m) shapes.push_back({n, b, w, m});
  Rng rng(14);
  for (int i = 0; i < 12; ++i) {
    const int64_t w = 1 + static_cast<int64_t>(rng.Uniform(9)), m = 1 + static_cast<int64_t>(rng.Uniform(9));
    const int64_t b = std::max(w, m) + static_cast<int64_t>(rng.Uniform(30));
    shapes.push_back({static_cast<int64_t>(rng.Uniform(200)) + std::max(w, m), b, w, m});
  }
  int64_t checked = 0, corners = 0;
  for (const auto& [n, b, w, m] : shapes) {
    for (const DistributionScheme scheme :
         {DistributionScheme::kUniform, DistributionScheme::kLocal, DistributionScheme::kPartialLocal}) {
      for (const bool drop_last : {false, true}) {
        if (Refused(n, b, static_cast<int>(w), drop_last) || Refused(n, b, static_cast<int>(m), drop_last)) continue;
        PlanOptions o;
        o.num_samples = n;
        o.batch_size = b;
        o.world_size = static_cast<int>(w);
        o.drop_last = drop_last;
        o.scheme = scheme;
        o.exchange_fraction = 0.5;
        o.seed = static_cast<uint64_t>(n * 7919 + b * 31 + w * 5 + m);
        o.epochs = 3;
        o.shuffle = (n + b + w + m) % 5 != 0;
        const AccessPlan old(o);
        const int e = static_cast<int>(rng.Uniform(2));
        const int64_t h = static_cast<int64_t>(rng.Uniform(static_cast<uint64_t>(old.BatchesPerEpoch())));
        PlanOptions r = o;
        r.world_size = static_cast<int>(m);
        r.start.epoch = e;
        r.start.position = h * b;
        r.start.order_world_size = static_cast<int>(w);
        const std::string what = std::string(DistributionSchemeName(scheme)) + " n=" + std::to_string(n) +
                                 " B=" + std::to_string(b) + " N=" + std::to_string(w) + " -> M=" +
                                 std::to_string(m) + (drop_last ? " drop_last" : "") +
                                 (o.shuffle ? "" : " no-shuffle") + " at epoch " + std::to_string(e) + " batch " +
                                 std::to_string(h);
        // Only a last global batch of fewer samples than the new ranks can be left alone.
        PlanOptions fresh = r;
        fresh.start = ResumePoint();
        if (h >= AccessPlan(fresh).BatchesPerEpoch()) {
          ASSERT_THROW(AccessPlan{r}, InvalidArgumentError) << what;
          ASSERT_LT(n - h * b, m) << what;
          ++corners;
          continue;
        }
        const AccessPlan resumed(r);
        ASSERT_EQ(CheckResumed(old, resumed, e, h), "") << what;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 4000);
  EXPECT_GT(corners, 10);
  std::printf("%lld resumed plans checked, %lld refused corners\n", static_cast<long long>(checked),
              static_cast<long long>(corners));
}

PlanOptions Small(DistributionScheme scheme) {
  PlanOptions o;
  o.num_samples = 100;
  o.batch_size = 8;
  o.epochs = 3;
  o.world_size = 4;
  o.seed = 3;
  o.scheme = scheme;
  return o;
}

std::string ErrorOf(const PlanOptions& o) {
  try {
    AccessPlan plan(o);
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "";
}

TEST(ResumePointTest, AtTheStartOfAnEpochAndAtTheEnd) {
  PlanOptions o = Small(DistributionScheme::kLocal);
  o.start.epoch = 2;
  const AccessPlan plan(o);
  EXPECT_EQ(plan.StartBatch(), 0);
  EXPECT_EQ(plan.StartItem(1), 2 * plan.RankEpochSize(1));
  o.start.epoch = 3;  // every epoch delivered: nothing left, nothing read first
  const AccessPlan done(o);
  EXPECT_EQ(done.StartItem(3), 3 * done.RankEpochSize(3));
  EXPECT_EQ(done.FirstEpochReader(5), -1);
}

TEST(ResumePointTest, BadPointsAreRefusedWithTheNumbers) {
  PlanOptions o = Small(DistributionScheme::kUniform);
  o.start.epoch = 4;
  EXPECT_NE(ErrorOf(o).find("epoch 4 is outside 0..3"), std::string::npos) << ErrorOf(o);
  o.start.epoch = 1;
  o.start.position = 12;
  EXPECT_NE(ErrorOf(o).find("position 12 is not a global batch boundary"), std::string::npos) << ErrorOf(o);
  o.start.position = 104;
  EXPECT_NE(ErrorOf(o).find("past the 13 global batches of epoch 1"), std::string::npos) << ErrorOf(o);
  o.start.position = 8;
  o.start.epoch = 3;
  EXPECT_NE(ErrorOf(o).find("after the job's last epoch"), std::string::npos) << ErrorOf(o);
  // 100 = 12 * 8 + 4: on 4 ranks the 4 are a last batch of their own; on 5
  // ranks they would have to join batch 11, which was delivered already.
  o.start.epoch = 1;
  o.start.position = 96;
  o.start.order_world_size = 4;
  o.world_size = 5;
  const std::string corner = ErrorOf(o);
  EXPECT_NE(corner.find("holds only 4 samples: fewer than the 5 ranks"), std::string::npos) << corner;
  EXPECT_NE(corner.find("Resume on at most 4 ranks"), std::string::npos) << corner;
  o.world_size = 4;
  EXPECT_EQ(ErrorOf(o), "");
}

TEST(ResumePointTest, LocalSchemeKeepsTheOldOrderOnlyForTheInterruptedEpoch) {
  // 4 ranks stopped after 5 of 13 batches, resumed on 2: the rest of epoch 1
  // is what the 4 old ranks had not read, cut into 2 slices per batch.
  PlanOptions o = Small(DistributionScheme::kLocal);
  const AccessPlan old(o);
  o.world_size = 2;
  o.start = ResumePoint{1, 40, 4};
  const AccessPlan resumed(o);
  std::set<int64_t> unread, got;
  for (int r = 0; r < 4; ++r) {
    const auto ids = old.RankEpochSamples(r, 1);
    unread.insert(ids.begin() + old.LocalBatchStart(r, 5), ids.end());
  }
  for (int r = 0; r < 2; ++r) {
    const auto ids = resumed.RankEpochSamples(r, 1);
    got.insert(ids.begin() + resumed.LocalBatchStart(r, 5), ids.end());
  }
  EXPECT_EQ(got, unread);
  // Batch 5 on the new rank 0 is old ranks 0 and 1's batch 5, in that order.
  std::vector<int64_t> want;
  for (int r = 0; r < 2; ++r) {
    const auto ids = old.RankEpochSamples(r, 1);
    want.insert(want.end(), ids.begin() + old.LocalBatchStart(r, 5), ids.begin() + old.LocalBatchStart(r, 6));
  }
  const auto rank0 = resumed.RankEpochSamples(0, 1);
  EXPECT_EQ(std::vector<int64_t>(rank0.begin() + resumed.LocalBatchStart(0, 5),
                                 rank0.begin() + resumed.LocalBatchStart(0, 6)),
            want);
  // Epoch 2: the shards of 2 ranks.
  PlanOptions two = o;
  two.start = ResumePoint();
  EXPECT_EQ(resumed.RankEpochSamples(1, 2), AccessPlan(two).RankEpochSamples(1, 2));
}

TEST(ResumePlacementTest, CountsOnlyTheReadsLeftAndPlansForThem) {
  for (const DistributionScheme scheme : {DistributionScheme::kUniform, DistributionScheme::kPartialLocal}) {
    PlanOptions o = Small(scheme);
    o.epochs = 4;
    o.world_size = 2;
    o.start = ResumePoint{1, 24, 3};  // 3 ranks stopped after 3 batches of epoch 1
    const AccessPlan plan(o);
    for (int rank = 0; rank < 2; ++rank) {
      // The reference: every read from the start on, in order.
      std::map<int64_t, SampleUse> want;
      const int64_t per_epoch = plan.RankEpochSize(rank);
      for (int64_t item = plan.StartItem(rank); item < 4 * per_epoch; ++item) {
        const int64_t sample = plan.SampleAt(rank, static_cast<int>(item / per_epoch), item % per_epoch);
        auto [it, inserted] = want.try_emplace(sample, SampleUse{sample, 0, item});
        ++it->second.count;
      }
      for (const CountMethod method : {CountMethod::kDense, CountMethod::kSorted}) {
        PlanningOptions planning;
        planning.method = method;
        planning.threads = 2;
        planning.min_piece_items = 7;  // many pieces, some crossing an epoch's end
        const std::vector<SampleUse> got = CountRankAccesses(plan, rank, planning);
        ASSERT_EQ(got.size(), want.size());
        int64_t reads = 0;
        for (const SampleUse& u : got) {
          const SampleUse& w = want.at(u.sample);
          ASSERT_EQ(u.count, w.count) << u.sample;
          ASSERT_EQ(u.first_item, w.first_item) << u.sample;
          reads += u.count;
        }
        EXPECT_EQ(reads, 4 * per_epoch - plan.StartItem(rank));
      }
      // Room for every sample: each class lists what it holds in first-read order, from the start on.
      PlanningOptions first;
      first.first_epoch_first = true;
      const Placement placement = PlanPlacement(plan, rank, std::vector<int64_t>(100, 1), {0, 45, 1000}, first);
      EXPECT_EQ(placement.cached_samples(), static_cast<int64_t>(want.size()));
      // Class 1 (45 samples) goes to samples this rank reads first of all
      // ranks: its 38 of the rest of epoch 1, then some of epoch 2 that were
      // delivered before the stop.
      ASSERT_EQ(placement.class_samples[1].size(), 45u);
      for (int64_t sample : placement.class_samples[1]) EXPECT_EQ(plan.FirstEpochReader(sample), rank) << sample;
    }
  }
}

}  // namespace
}  // namespace hdmlp
