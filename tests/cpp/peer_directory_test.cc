// PeerDirectory: N ranks simulated in one process agree with the rule that
// every rank knowing every placement would apply.
#include "hdmlp/cache/peer_directory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "hdmlp/util/random.h"

namespace hdmlp {
namespace {

struct Case {
  DistributionScheme scheme;
  int ranks;
  bool drop_last;
};

class PeerDirectoryTest : public ::testing::TestWithParam<Case> {};

TEST_P(PeerDirectoryTest, EveryRankFindsTheDesignatedRankOfWhatItReads) {
  const Case c = GetParam();
  PlanOptions o;
  o.num_samples = 997;
  o.batch_size = 4 * c.ranks + 1;
  o.epochs = 3;
  o.seed = 17;
  o.world_size = c.ranks;
  o.scheme = c.scheme;
  o.drop_last = c.drop_last;
  o.exchange_fraction = 0.3;
  const AccessPlan plan(o);
  const int n = c.ranks;

  // Each rank reads what the plan says, and caches a random part of it
  // (some samples by several ranks, some by none), classes 1 or 2.
  Rng rng(5);
  std::vector<std::vector<int64_t>> reads(static_cast<size_t>(n));
  std::vector<std::vector<CachedSample>> cached(static_cast<size_t>(n));
  std::vector<std::vector<int>> class_of(static_cast<size_t>(n), std::vector<int>(o.num_samples, 0));
  for (int r = 0; r < n; ++r) {
    std::set<int64_t> mine;
    for (int e = 0; e < o.epochs; ++e) {
      for (int64_t s : plan.RankEpochSamples(r, e)) mine.insert(s);
    }
    reads[static_cast<size_t>(r)].assign(mine.begin(), mine.end());
    for (int64_t s : mine) {
      if (rng.Uniform(3) == 0) continue;
      const int cls = 1 + static_cast<int>(rng.Uniform(2));
      cached[static_cast<size_t>(r)].push_back({s, cls});
      class_of[static_cast<size_t>(r)][static_cast<size_t>(s)] = cls;
    }
  }

  // The exchange, round by round, over all ranks at once.
  const auto all_to_all = [n](const std::vector<RankMessages>& out) {
    std::vector<RankMessages> in(static_cast<size_t>(n), RankMessages(static_cast<size_t>(n)));
    for (int from = 0; from < n; ++from) {
      for (int to = 0; to < n; ++to) in[static_cast<size_t>(to)][static_cast<size_t>(from)] = out[from][to];
    }
    return in;
  };
  std::vector<RankMessages> offers, queries, answers;
  for (int r = 0; r < n; ++r) offers.push_back(PeerDirectory::MakeOffers(plan, cached[static_cast<size_t>(r)]));
  const auto offered = all_to_all(offers);
  std::vector<HomeTable> homes;
  for (int r = 0; r < n; ++r) homes.push_back(PeerDirectory::AcceptOffers(plan, r, offered[static_cast<size_t>(r)]));
  for (int r = 0; r < n; ++r) queries.push_back(PeerDirectory::MakeQueries(plan, reads[static_cast<size_t>(r)]));
  const auto asked = all_to_all(queries);
  for (int r = 0; r < n; ++r) answers.push_back(PeerDirectory::Answer(homes[static_cast<size_t>(r)], asked[static_cast<size_t>(r)]));
  const auto answered = all_to_all(answers);

  int64_t found = 0;
  for (int r = 0; r < n; ++r) {
    const PeerDirectory directory =
        PeerDirectory::FromAnswers(queries[static_cast<size_t>(r)], answered[static_cast<size_t>(r)]);
    for (int64_t s : reads[static_cast<size_t>(r)]) {
      // The rule: the first-epoch reader if it caches s, else the lowest rank that does.
      int want = -1;
      const int first = plan.FirstEpochReader(s);
      if (first >= 0 && class_of[static_cast<size_t>(first)][static_cast<size_t>(s)] != 0) {
        want = first;
      } else {
        for (int q = 0; q < n && want < 0; ++q) {
          if (class_of[static_cast<size_t>(q)][static_cast<size_t>(s)] != 0) want = q;
        }
      }
      int rank = -1, cls = 0;
      const bool hit = directory.Lookup(s, &rank, &cls);
      ASSERT_EQ(hit, want >= 0) << "rank " << r << " sample " << s;
      if (!hit) continue;
      ++found;
      EXPECT_EQ(rank, want) << "rank " << r << " sample " << s;
      EXPECT_EQ(cls, class_of[static_cast<size_t>(want)][static_cast<size_t>(s)]);
    }
    // Only what this rank reads and some rank caches: O(reads), not O(dataset).
    EXPECT_LE(directory.entries(), static_cast<int64_t>(reads[static_cast<size_t>(r)].size()));
    int rank, cls;
    const int64_t unread = [&] {
      for (int64_t s = 0; s < o.num_samples; ++s) {
        if (!std::binary_search(reads[static_cast<size_t>(r)].begin(), reads[static_cast<size_t>(r)].end(), s)) return s;
      }
      return int64_t{-1};
    }();
    if (unread >= 0) EXPECT_FALSE(directory.Lookup(unread, &rank, &cls));
  }
  EXPECT_GT(found, 0);
}

INSTANTIATE_TEST_SUITE_P(Schemes, PeerDirectoryTest,
                         ::testing::Values(Case{DistributionScheme::kUniform, 1, false},
                                           Case{DistributionScheme::kUniform, 4, false},
                                           Case{DistributionScheme::kUniform, 5, true},
                                           Case{DistributionScheme::kLocal, 3, false},
                                           Case{DistributionScheme::kPartialLocal, 4, true}));

TEST(PeerDirectoryExchangeTest, OneRankThroughAnAllToAllFunction) {
  PlanOptions o;
  o.num_samples = 50;
  o.batch_size = 5;
  const AccessPlan plan(o);
  std::vector<int64_t> reads(50);
  for (int64_t s = 0; s < 50; ++s) reads[static_cast<size_t>(s)] = s;
  const PeerDirectory d = PeerDirectory::Exchange(plan, 0, {{7, 2}, {9, 1}}, reads,
                                                  [](const RankMessages& out) { return out; });
  int rank = -1, cls = 0;
  ASSERT_TRUE(d.Lookup(7, &rank, &cls));
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(cls, 2);
  EXPECT_FALSE(d.Lookup(8, &rank, &cls));
  EXPECT_EQ(d.entries(), 2);
}

}  // namespace
}  // namespace hdmlp
