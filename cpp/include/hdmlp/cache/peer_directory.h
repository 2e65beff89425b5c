// PeerDirectory: which rank to ask for a sample that other ranks cache
// ("make it once", cache_hierarchy.h), found without any rank learning
// every rank's placement.
//
// Each cached sample has one designated rank: the rank that reads it in
// the first epoch when that rank caches it, else the lowest rank that
// caches it. Each sample also has a home rank that every rank computes
// alone: its first-epoch reader (AccessPlan::FirstEpochReader), or
// sample mod N for a sample that drop-last leaves out of the first epoch.
// The exchange is two rounds of all-to-all messages:
//   1. offers: every rank sends (sample, class) of each sample it caches to
//      the sample's home; the home picks the designated rank (itself, when
//      it offered the sample, else the lowest rank that did);
//   2. queries: every rank sends each sample it reads to the sample's home,
//      which answers with the designated rank and class, or "nobody".
// A rank ends up knowing the designated rank of every sample it reads, in a
// sorted list of the samples some rank caches. Its memory and traffic are
// O(samples it caches + samples it reads + offers and queries it receives
// as a home), where exchanging whole placements costs every rank
// O(samples cached by all ranks) and a dense directory O(dataset).
//
// The rounds are separate steps (MakeOffers, AcceptOffers, MakeQueries,
// Answer, FromAnswers) so that N ranks can be simulated in one process
// (benchmarks/peer_directory.cc); Exchange runs them with an all-to-all
// function, over MPI in the job.
//
// Thread-safety: the steps are reentrant; a built PeerDirectory is
// immutable and its const methods may be called from any thread.
#ifndef HDMLP_CACHE_PEER_DIRECTORY_H_
#define HDMLP_CACHE_PEER_DIRECTORY_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hdmlp/plan/access_plan.h"

namespace hdmlp {

struct CachedSample {
  int64_t sample = 0;
  int storage_class = 0;  // 1..255
};

// Message bytes per rank: element r is sent to (or was received from) rank r.
using RankMessages = std::vector<std::string>;
// Sends out[r] to every rank r and returns what every rank sent this one.
using AllToAllFn = std::function<RankMessages(const RankMessages& out)>;

// What a home rank decided for the samples homed there: sorted by sample.
struct HomeTable {
  std::vector<int64_t> samples;
  std::vector<int32_t> who;  // designated rank << 8 | its class
};

class PeerDirectory {
 public:
  PeerDirectory() = default;

  // The home of a sample (see above).
  static int HomeOf(const AccessPlan& plan, int64_t sample);
  // Round 1: offers of this rank's cached samples, by home.
  static RankMessages MakeOffers(const AccessPlan& plan, const std::vector<CachedSample>& cached);
  // The designated rank of each sample offered to `rank` (offers[r] came
  // from rank r): `rank` itself when it offered it and reads it in the first
  // epoch, else the lowest rank that offered it.
  static HomeTable AcceptOffers(const AccessPlan& plan, int rank, const RankMessages& offers);
  // Round 2: queries for the samples this rank reads (sorted, distinct), by home.
  static RankMessages MakeQueries(const AccessPlan& plan, const std::vector<int64_t>& reads);
  // A home's answers to the queries it received (queries[r] came from rank r).
  static RankMessages Answer(const HomeTable& home, const RankMessages& queries);
  // The directory from this rank's queries and the answers to them.
  static PeerDirectory FromAnswers(const RankMessages& queries, const RankMessages& answers);

  // Both rounds through all_to_all (a collective: every rank calls it).
  static PeerDirectory Exchange(const AccessPlan& plan, int rank, const std::vector<CachedSample>& cached,
                                const std::vector<int64_t>& reads, const AllToAllFn& all_to_all);

  // The designated rank and class of `sample`; false when no rank caches it
  // (or this rank did not ask about it). O(log entries).
  bool Lookup(int64_t sample, int* rank, int* storage_class) const;
  int64_t entries() const { return static_cast<int64_t>(samples_.size()); }
  int64_t memory_bytes() const {
    return static_cast<int64_t>(samples_.capacity() * sizeof(int64_t) + who_.capacity() * sizeof(int32_t));
  }

 private:
  std::vector<int64_t> samples_;  // sorted; only samples some rank caches
  std::vector<int32_t> who_;
};

}  // namespace hdmlp

#endif  // HDMLP_CACHE_PEER_DIRECTORY_H_
