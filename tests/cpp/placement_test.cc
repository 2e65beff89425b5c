// Tests of the placement planner (plan/placement.h) against brute-force
// references computed from AccessPlan::RankEpochSamples.
#include "hdmlp/plan/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <limits>

#include "hdmlp/errors.h"
#include "hdmlp/plan/access_plan.h"
#include "hdmlp/util/random.h"

namespace hdmlp {
namespace {

PlanOptions Options(int64_t samples, int64_t batch, int epochs, int world, bool drop_last, uint64_t seed = 11) {
  PlanOptions o;
  o.num_samples = samples;
  o.batch_size = batch;
  o.epochs = epochs;
  o.world_size = world;
  o.drop_last = drop_last;
  o.seed = seed;
  return o;
}

// Every read of the rank, epoch by epoch: the definition of the counts.
std::vector<SampleUse> ReferenceUses(const AccessPlan& plan, int rank) {
  std::map<int64_t, SampleUse> by_sample;
  const int64_t per_epoch = plan.RankEpochSize(rank);
  for (int e = 0; e < plan.epochs(); ++e) {
    const std::vector<int64_t> ids = plan.RankEpochSamples(rank, e);
    for (size_t j = 0; j < ids.size(); ++j) {
      auto [it, inserted] = by_sample.try_emplace(ids[j], SampleUse{ids[j], 0, e * per_epoch + static_cast<int64_t>(j)});
      ++it->second.count;
    }
  }
  std::vector<SampleUse> out;
  for (const auto& [sample, use] : by_sample) out.push_back(use);
  return out;
}

// The documented rule, written the obvious way: sort by (count desc, first
// asc), first fit into classes that still have capacity left, then each
// class by first read.
std::vector<std::vector<int64_t>> ReferencePlacement(const AccessPlan& plan, int rank,
                                                     const std::vector<int64_t>& sizes,
                                                     const std::vector<int64_t>& capacities) {
  std::vector<SampleUse> uses = ReferenceUses(plan, rank);
  std::sort(uses.begin(), uses.end(), [](const SampleUse& a, const SampleUse& b) {
    return std::make_tuple(-a.count, a.first_item) < std::make_tuple(-b.count, b.first_item);
  });
  std::vector<int64_t> remaining = capacities;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> chosen(capacities.size());
  for (const SampleUse& u : uses) {
    const int64_t size = sizes[static_cast<size_t>(u.sample)];
    for (size_t j = 1; j < capacities.size(); ++j) {
      if (remaining[j] > 0 && size <= remaining[j]) {
        remaining[j] -= size;
        chosen[j].push_back({u.first_item, u.sample});
        break;
      }
    }
  }
  std::vector<std::vector<int64_t>> out(capacities.size());
  for (size_t j = 1; j < capacities.size(); ++j) {
    std::sort(chosen[j].begin(), chosen[j].end());
    for (const auto& [first, sample] : chosen[j]) out[j].push_back(sample);
  }
  return out;
}

// Ways to run the counter: the defaults, both methods with several threads,
// and pieces small enough that the paths for many chunks, merges and
// slices crossing epoch ends are all taken on a small plan.
std::vector<PlanningOptions> CountingVariants() {
  std::vector<PlanningOptions> variants(4);
  variants[1].method = CountMethod::kDense;
  variants[1].threads = 3;
  variants[1].min_piece_items = 301;
  variants[2].method = CountMethod::kSorted;
  variants[2].threads = 3;
  variants[2].min_piece_items = 301;
  variants[3].method = CountMethod::kSorted;
  variants[3].threads = 1;
  variants[3].min_piece_items = 50;
  return variants;
}

std::string Describe(const PlanningOptions& o) {
  return "method " + std::to_string(static_cast<int>(o.method)) + " threads " + std::to_string(o.threads) +
         " piece " + std::to_string(o.min_piece_items);
}

void ExpectSameUses(const std::vector<SampleUse>& got, const std::vector<SampleUse>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].sample, want[i].sample) << what << " at " << i;
    ASSERT_EQ(got[i].count, want[i].count) << what << " sample " << got[i].sample;
    ASSERT_EQ(got[i].first_item, want[i].first_item) << what << " sample " << got[i].sample;
  }
}

TEST(CountRankAccessesTest, MatchesBruteForceForWorldSizesAndDropLast) {
  for (bool drop_last : {false, true}) {
    for (int world : {1, 2, 3, 5}) {
      const AccessPlan plan(Options(1003, 64, 7, world, drop_last));
      for (int rank = 0; rank < world; ++rank) {
        const std::vector<SampleUse> want = ReferenceUses(plan, rank);
        for (const PlanningOptions& o : CountingVariants()) {
          const std::string what = "world " + std::to_string(world) + " rank " + std::to_string(rank) +
                                   " drop_last " + std::to_string(drop_last) + " " + Describe(o);
          const std::vector<SampleUse> got = CountRankAccesses(plan, rank, o);
          ExpectSameUses(got, want, what);
          const int64_t reads = std::accumulate(got.begin(), got.end(), int64_t{0},
                                                [](int64_t s, const SampleUse& u) { return s + u.count; });
          EXPECT_EQ(reads, plan.epochs() * plan.RankEpochSize(rank)) << what;
        }
      }
    }
  }
}

TEST(CountRankAccessesTest, SparseShareAndManyEpochs) {
  // A rank reading a sliver of a large dataset (the kSorted regime of kAuto),
  // and more epochs than one radix digit of counts holds.
  for (const PlanOptions& options : {Options(100000, 64, 3, 16, false), Options(50, 7, 300, 2, true)}) {
    const AccessPlan plan(options);
    for (int rank : {0, options.world_size - 1}) {
      const std::vector<SampleUse> want = ReferenceUses(plan, rank);
      for (const PlanningOptions& o : CountingVariants()) {
        ExpectSameUses(CountRankAccesses(plan, rank, o), want,
                       "samples " + std::to_string(options.num_samples) + " rank " + std::to_string(rank) + " " +
                           Describe(o));
      }
    }
  }
}

TEST(CountRankAccessesTest, OneSamplePerStepAndSingleSample) {
  // Batch 8 over 8 ranks: one sample per rank and step.
  const AccessPlan plan(Options(40, 8, 3, 8, false));
  for (const PlanningOptions& o : CountingVariants()) {
    ExpectSameUses(CountRankAccesses(plan, 5, o), ReferenceUses(plan, 5), Describe(o));
    ExpectSameUses(CountRankAccesses(plan, 2, o), ReferenceUses(plan, 2), Describe(o));
  }
  const AccessPlan one(Options(1, 1, 4, 1, false));
  const std::vector<SampleUse> uses = CountRankAccesses(one, 0);
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0].sample, 0);
  EXPECT_EQ(uses[0].count, 4);
  EXPECT_EQ(uses[0].first_item, 0);
}

// A job of 2^31 - 1 epochs counts only the first H epochs, H * epoch size
// about max_counted_reads: what it counts is exactly those epochs' reads.
TEST(CountRankAccessesTest, ManyEpochsCountABoundedPrefix) {
  const AccessPlan huge(Options(30, 7, std::numeric_limits<int>::max(), 2, false));
  PlanningOptions options;
  options.max_counted_reads = 1000;
  const int counted = CountedEpochs(huge, 1, options);
  EXPECT_EQ(counted, static_cast<int>(1000 / huge.RankEpochSize(1)));
  const AccessPlan prefix(Options(30, 7, counted, 2, false));
  ExpectSameUses(CountRankAccesses(huge, 1, options), ReferenceUses(prefix, 1), "prefix");
  const Placement placement = PlanPlacement(huge, 1, std::vector<int64_t>(30, 10), {0, 100}, options);
  EXPECT_EQ(placement.class_samples[1].size(), 10u);
  // A job that fits is counted whole, and the default budget fits every
  // usual job (2^24 reads a rank).
  options.max_counted_reads = 0;
  EXPECT_EQ(CountedEpochs(prefix, 1, options), counted);
  EXPECT_EQ(CountedEpochs(AccessPlan(Options(1281167, 256 * 16, 90, 16, false)), 3), 90);
  EXPECT_EQ(CountedEpochs(huge, 1), (int64_t{1} << 24) / huge.RankEpochSize(1));
}

TEST(CountRankAccessesTest, InterruptStopsTheCount) {
  const AccessPlan plan(Options(1000, 10, 2000, 1, false));  // 2M reads: several chunks
  PlanningOptions options;
  int polls = 0;
  options.interrupt = [&polls] {
    if (++polls == 2) throw InterruptedError("stop");
  };
  EXPECT_THROW(CountRankAccesses(plan, 0, options), InterruptedError);
  EXPECT_EQ(polls, 2);
}

TEST(CountRankAccessesTest, RejectsBadRank) {
  const AccessPlan plan(Options(100, 10, 2, 3, false));
  EXPECT_THROW(CountRankAccesses(plan, -1), InvalidArgumentError);
  EXPECT_THROW(CountRankAccesses(plan, 3), InvalidArgumentError);
}

std::vector<int64_t> RandomSizes(int64_t n, int64_t lo, int64_t hi, uint64_t seed) {
  Rng rng(seed);
  std::vector<int64_t> sizes(static_cast<size_t>(n));
  for (int64_t& s : sizes) s = rng.UniformInt(lo, hi);
  return sizes;
}

// The invariants every placement has, whatever the sizes.
void ExpectWellFormed(const Placement& p, const AccessPlan& plan, int rank, const std::vector<int64_t>& sizes,
                      const std::vector<int64_t>& capacities, const std::string& what,
                      const std::vector<SampleUse>* reference = nullptr) {
  ASSERT_EQ(p.class_samples.size(), capacities.size()) << what;
  ASSERT_EQ(p.class_bytes.size(), capacities.size()) << what;
  EXPECT_TRUE(p.class_samples[0].empty()) << what;
  EXPECT_EQ(p.class_bytes[0], 0) << what;
  // Per sample: its reference use (count 0: not read by the rank) and class.
  const int64_t num_samples = plan.options().num_samples;
  std::vector<SampleUse> uses(static_cast<size_t>(num_samples));
  for (const SampleUse& u : reference ? *reference : ReferenceUses(plan, rank)) uses[static_cast<size_t>(u.sample)] = u;
  std::vector<int> class_of(static_cast<size_t>(num_samples), -1);
  int64_t cached = 0;
  for (size_t j = 1; j < capacities.size(); ++j) {
    int64_t bytes = 0;
    int64_t previous_first = -1;
    for (int64_t s : p.class_samples[j]) {
      const SampleUse& u = uses[static_cast<size_t>(s)];
      ASSERT_GT(u.count, 0) << what << ": sample " << s << " is not read by rank " << rank;
      EXPECT_EQ(class_of[static_cast<size_t>(s)], -1) << what << ": sample " << s << " placed twice";
      class_of[static_cast<size_t>(s)] = static_cast<int>(j);
      ++cached;
      EXPECT_GT(u.first_item, previous_first) << what << ": class " << j << " not in first-read order";
      previous_first = u.first_item;
      bytes += sizes[static_cast<size_t>(s)];
    }
    EXPECT_EQ(p.class_bytes[j], bytes) << what << " class " << j;
    EXPECT_LE(bytes, capacities[j]) << what << " class " << j;
  }
  EXPECT_EQ(p.cached_samples(), cached) << what;
  for (int64_t s = 0; s < num_samples; ++s) {
    ASSERT_EQ(p.ClassOf(s), class_of[static_cast<size_t>(s)]) << what << " sample " << s;
  }
  EXPECT_EQ(p.ClassOf(-1), -1);
  EXPECT_EQ(p.ClassOf(plan.options().num_samples), -1);
}

TEST(PlanPlacementTest, MatchesReferenceFirstFit) {
  for (bool drop_last : {false, true}) {
    for (int world : {1, 2, 4}) {
      const AccessPlan plan(Options(997, 32, 6, world, drop_last, 3));
      const std::vector<int64_t> sizes = RandomSizes(997, 1, 1000, 17);
      const std::vector<std::vector<int64_t>> capacity_sets = {
          {0, 20000},                  // one class, a fraction of the share
          {123, 15000, 0, 40000},      // class 0's capacity is ignored; an empty class
          {0, 5000, 5000, 5000, 999},  // several small classes
          {0, int64_t{1} << 40},       // everything fits
          {0, 0},                      // nothing fits
      };
      for (int rank : std::set<int>{0, world - 1}) {
        const std::vector<SampleUse> reference = ReferenceUses(plan, rank);
        for (const std::vector<int64_t>& caps : capacity_sets) {
          const std::vector<std::vector<int64_t>> want = ReferencePlacement(plan, rank, sizes, caps);
          for (const PlanningOptions& o : {CountingVariants()[0], CountingVariants()[2]}) {
            const std::string what = "world " + std::to_string(world) + " rank " + std::to_string(rank) +
                                     " drop_last " + std::to_string(drop_last) + " caps " +
                                     std::to_string(caps.size()) + "/" + std::to_string(caps[1]) + " " + Describe(o);
            const Placement p = PlanPlacement(plan, rank, sizes, caps, o);
            ExpectWellFormed(p, plan, rank, sizes, caps, what, &reference);
            for (size_t j = 1; j < caps.size(); ++j) EXPECT_EQ(p.class_samples[j], want[j]) << what << " class " << j;
          }
        }
      }
    }
  }
}

TEST(PlanPlacementTest, EqualSizesCacheTheMostReadInFrequencyOrder) {
  const int world = 3;
  const AccessPlan plan(Options(600, 24, 9, world, false, 5));
  const std::vector<int64_t> sizes(600, 10);
  const std::vector<int64_t> caps = {0, 300, 250, 0, 420};  // 30, 25, 0 and 42 samples
  for (int rank = 0; rank < world; ++rank) {
    const Placement p = PlanPlacement(plan, rank, sizes, caps);
    ExpectWellFormed(p, plan, rank, sizes, caps, "rank " + std::to_string(rank));
    EXPECT_EQ(p.class_samples[1].size(), 30u);
    EXPECT_EQ(p.class_samples[2].size(), 25u);
    EXPECT_TRUE(p.class_samples[3].empty());
    EXPECT_EQ(p.class_samples[4].size(), 42u);
    const std::vector<SampleUse> uses = ReferenceUses(plan, rank);
    EXPECT_EQ(p.rank_samples, static_cast<int64_t>(uses.size()));
    // Rank of each sample in frequency order: (count desc, first read asc).
    auto order_key = [](const SampleUse& u) { return std::make_pair(-u.count, u.first_item); };
    // Classes fill in order: every sample of a lower class comes before every
    // sample of a higher one, and every cached sample before every uncached one.
    using Key = std::pair<int, int64_t>;
    std::vector<std::optional<Key>> worst_of_class(5), best_of_class(5);
    std::optional<Key> best_uncached;
    for (const SampleUse& u : uses) {
      const int c = p.ClassOf(u.sample);
      const Key key = order_key(u);
      if (c < 0) {
        if (!best_uncached || key < *best_uncached) best_uncached = key;
        continue;
      }
      if (!worst_of_class[c] || key > *worst_of_class[c]) worst_of_class[c] = key;
      if (!best_of_class[c] || key < *best_of_class[c]) best_of_class[c] = key;
    }
    ASSERT_TRUE(worst_of_class[1] && best_of_class[2] && worst_of_class[2] && best_of_class[4] && worst_of_class[4]);
    ASSERT_TRUE(best_uncached);
    EXPECT_LT(*worst_of_class[1], *best_of_class[2]);
    EXPECT_LT(*worst_of_class[2], *best_of_class[4]);
    EXPECT_LT(*worst_of_class[4], *best_uncached);
    EXPECT_GE(-worst_of_class[4]->first, -best_uncached->first);
  }
}

TEST(PlanPlacementTest, TooLargeForOneClassGoesToTheNext) {
  const AccessPlan plan(Options(300, 16, 5, 1, false, 9));
  std::vector<SampleUse> uses = ReferenceUses(plan, 0);
  const SampleUse top = *std::min_element(uses.begin(), uses.end(), [](const SampleUse& a, const SampleUse& b) {
    return std::make_pair(-a.count, a.first_item) < std::make_pair(-b.count, b.first_item);
  });
  std::vector<int64_t> sizes(300, 10);
  sizes[static_cast<size_t>(top.sample)] = 500;  // the most-read sample: too large for class 1
  const std::vector<int64_t> caps = {0, 100, 1000};
  const Placement p = PlanPlacement(plan, 0, sizes, caps);
  ExpectWellFormed(p, plan, 0, sizes, caps, "too large");
  EXPECT_EQ(p.ClassOf(top.sample), 2);
  EXPECT_EQ(p.class_samples[1].size(), 10u);  // the next ten, by frequency
  EXPECT_EQ(p.class_bytes[2], 1000);          // the large one and 50 small ones
  EXPECT_EQ(p.class_samples[2].size(), 51u);
  EXPECT_EQ(p.class_samples, ReferencePlacement(plan, 0, sizes, caps));
  // Too large for every class: stays uncached, and smaller samples fill in.
  sizes[static_cast<size_t>(top.sample)] = 5000;
  const Placement q = PlanPlacement(plan, 0, sizes, caps);
  EXPECT_EQ(q.ClassOf(top.sample), -1);
  EXPECT_EQ(q.cached_samples(), 110);
}

TEST(PlanPlacementTest, ZeroSizedSamplesAndNoCapacity) {
  const AccessPlan plan(Options(200, 10, 3, 2, false));
  const std::vector<int64_t> zeros(200, 0);
  const Placement all = PlanPlacement(plan, 1, zeros, {0, 1});
  EXPECT_EQ(all.cached_samples(), all.rank_samples);
  EXPECT_EQ(all.class_bytes[1], 0);
  const Placement none = PlanPlacement(plan, 1, zeros, {1000, 0, 0});
  EXPECT_EQ(none.cached_samples(), 0);
  ASSERT_EQ(none.class_samples.size(), 3u);
  for (const auto& c : none.class_samples) EXPECT_TRUE(c.empty());
  const Placement staging_only = PlanPlacement(plan, 1, zeros, {1000});
  EXPECT_EQ(staging_only.class_samples.size(), 1u);
  EXPECT_EQ(staging_only.ClassOf(0), -1);
}

TEST(PlanPlacementTest, RanksUseOnlyTheirOwnSamples) {
  const int world = 4;
  const AccessPlan plan(Options(1000, 40, 2, world, true, 21));
  const std::vector<int64_t> sizes(1000, 1);
  std::set<int64_t> union_of_ranks;
  for (int rank = 0; rank < world; ++rank) {
    const Placement p = PlanPlacement(plan, rank, sizes, {0, int64_t{1} << 30});
    std::set<int64_t> own;
    for (const SampleUse& u : ReferenceUses(plan, rank)) own.insert(u.sample);
    // Unlimited capacity: exactly the rank's samples, nothing else.
    const std::set<int64_t> cached(p.class_samples[1].begin(), p.class_samples[1].end());
    EXPECT_EQ(cached, own) << "rank " << rank;
    EXPECT_EQ(p.rank_samples, static_cast<int64_t>(own.size()));
    EXPECT_LT(own.size(), 600u) << "rank " << rank;  // about 1 - (3/4)^2 of the dataset
    union_of_ranks.insert(cached.begin(), cached.end());
  }
  // Each epoch is split among the ranks, so between them they read it all.
  EXPECT_EQ(union_of_ranks.size(), 1000u);
}

TEST(PlanPlacementTest, SameResultWhateverThreadsAndMethod) {
  const AccessPlan plan(Options(5000, 50, 8, 2, false, 77));
  const std::vector<int64_t> sizes = RandomSizes(5000, 100, 200, 4);
  const std::vector<int64_t> caps = {0, 100000, 200000};
  const Placement base = PlanPlacement(plan, 1, sizes, caps);
  for (const PlanningOptions& o : CountingVariants()) {
    const Placement p = PlanPlacement(plan, 1, sizes, caps, o);
    EXPECT_EQ(p.class_samples, base.class_samples) << Describe(o);
    EXPECT_EQ(p.class_bytes, base.class_bytes) << Describe(o);
  }
}

TEST(PlanPlacementTest, RejectsBadArguments) {
  const AccessPlan plan(Options(100, 10, 2, 2, false));
  const std::vector<int64_t> sizes(100, 5);
  EXPECT_THROW(PlanPlacement(plan, 2, sizes, {0, 100}), InvalidArgumentError);
  EXPECT_THROW(PlanPlacement(plan, -1, sizes, {0, 100}), InvalidArgumentError);
  EXPECT_THROW(PlanPlacement(plan, 0, std::vector<int64_t>(99, 5), {0, 100}), InvalidArgumentError);
  EXPECT_THROW(PlanPlacement(plan, 0, sizes, {}), InvalidArgumentError);
  EXPECT_THROW(PlanPlacement(plan, 0, sizes, {0, 100, -1}), InvalidArgumentError);
  std::vector<int64_t> negative(100, -3);
  EXPECT_THROW(PlanPlacement(plan, 0, negative, {0, 100}), InvalidArgumentError);
  try {
    PlanPlacement(plan, 0, sizes, {0, 100, -1});
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("class 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hdmlp
