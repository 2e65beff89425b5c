// AccessPlan: which sample every rank reads, at every step of every epoch.
//
// The plan is a pure function of (seed, epoch, dataset size, batch size,
// number of ranks, drop-last): every rank can compute any rank's samples of
// any epoch without running the loader and without talking to the others.
// This is hdmlp's clairvoyance; caches, peers and the simulator all build on
// it.
//
// Scheme "uniform" (a true global shuffle, as in PyTorch's DistributedSampler
// but without padding): epoch e visits the samples in the order of an
// IndexPermutation keyed by (seed, e). Global batch h is positions
// [h*B, (h+1)*B) of that order; rank r takes the contiguous slice
// [h*B + r*L, h*B + (r+1)*L) of it, L = ceil(B / world_size). Without
// drop-last the final global batch is the remainder (ranks past its end get
// fewer or no samples); with drop-last the remainder is never read. Each
// sample is therefore read exactly once per epoch across all ranks.
//
// Nothing is materialised: memory is O(1) in the number of epochs and
// samples, and SampleAt is O(1).
// Thread-safety: immutable after construction; all methods are const.
#ifndef HDMLP_PLAN_ACCESS_PLAN_H_
#define HDMLP_PLAN_ACCESS_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hdmlp/plan/permutation.h"

namespace hdmlp {

enum class DistributionScheme { kUniform };

// Parses a user's distr_scheme; throws InvalidArgumentError listing the valid ones.
DistributionScheme ParseDistributionScheme(const std::string& name);
const char* DistributionSchemeName(DistributionScheme scheme);

struct PlanOptions {
  int64_t num_samples = 0;
  int64_t batch_size = 1;  // global batch, over all ranks
  int epochs = 1;
  uint64_t seed = 0;
  bool drop_last = false;
  int world_size = 1;
  DistributionScheme scheme = DistributionScheme::kUniform;
};

class AccessPlan {
 public:
  explicit AccessPlan(const PlanOptions& options);  // validates; InvalidArgumentError

  const PlanOptions& options() const { return options_; }
  int epochs() const { return options_.epochs; }

  // Global batches per epoch: the same number on every rank.
  int64_t BatchesPerEpoch() const;
  // Samples rank `rank` reads in one epoch (the same every epoch).
  int64_t RankEpochSize(int rank) const;
  // Size of rank's local batch `batch` (0 <= batch < BatchesPerEpoch()).
  int64_t LocalBatchSize(int rank, int64_t batch) const;
  // The j-th sample rank reads in epoch (0 <= j < RankEpochSize(rank)).
  int64_t SampleAt(int rank, int epoch, int64_t j) const;
  // Position in the epoch's global order of rank's j-th sample.
  int64_t GlobalPosition(int rank, int64_t j) const;
  // All samples of a rank's epoch, in reading order.
  std::vector<int64_t> RankEpochSamples(int rank, int epoch) const;
  // The permutation that orders epoch `epoch`.
  IndexPermutation EpochPermutation(int epoch) const;

 private:
  int64_t Share(int rank, int64_t batch_samples) const;

  PlanOptions options_;
  int64_t local_batch_ = 0;   // L = ceil(B / world_size)
  int64_t full_batches_ = 0;  // global batches with B samples
  int64_t remainder_ = 0;     // samples in the last, partial global batch (0 with drop-last)
};

}  // namespace hdmlp

#endif  // HDMLP_PLAN_ACCESS_PLAN_H_
