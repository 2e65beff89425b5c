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
// Schemes "local" and "partial_local" (seed 004): the dataset is split once
// into fixed shards, shard r = positions [start_r, start_r + T_r) of a
// permutation keyed by the seed alone, T_r = the samples rank r reads per
// epoch under "uniform" without drop-last (so batch sizes are the same as
// uniform's). "local": every epoch, rank r reads its own shard in the order
// of a permutation keyed by (seed, epoch, r). "partial_local" with exchange
// fraction Q: every epoch, each rank sets aside X_r = floor(Q * T_r) samples
// of its shard (the first X_r of its epoch permutation); all set-aside
// samples form a pool that a permutation keyed by (seed, epoch) deals back,
// X_r to each rank, so each moves to a random rank; Q = 0 is "local", Q = 1
// a global shuffle. A rank then reads what it kept plus what it received,
// in a random order. With drop-last, a rank reads only the first S_r of its
// epoch's T_r (S_r as in uniform), so the dropped samples change per epoch.
//
// Nothing is materialised: memory is O(world size), independent of epochs
// and samples; SampleAt is O(1) (O(log world size) for partial_local).
// Thread-safety: immutable after construction; all methods are const.
#ifndef HDMLP_PLAN_ACCESS_PLAN_H_
#define HDMLP_PLAN_ACCESS_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hdmlp/plan/permutation.h"

namespace hdmlp {

enum class DistributionScheme { kUniform, kLocal, kPartialLocal };

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
  double exchange_fraction = 0.1;  // partial_local only, in [0, 1]
};

class AccessPlan;

// One rank's order of one epoch, with its permutations built once: At(j) is
// the j-th sample the rank reads. Cheap to copy.
class EpochOrder {
 public:
  int64_t At(int64_t j) const;

 private:
  friend class AccessPlan;
  EpochOrder(const AccessPlan* plan, int rank, int epoch);
  int64_t ShardSample(int rank, int64_t i) const;
  const AccessPlan* plan_;
  int rank_;
  int epoch_;
  IndexPermutation global_;  // uniform: the epoch; partial_local: the pool
  IndexPermutation rank_order_;
  IndexPermutation shards_;     // local schemes: the fixed split into shards
  IndexPermutation own_pick_;   // local schemes: this rank's set-aside-first order
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
  // The permutation that orders epoch `epoch` (uniform scheme).
  IndexPermutation EpochPermutation(int epoch) const;
  // A rank's epoch order with its permutations built once.
  EpochOrder Epoch(int rank, int epoch) const { return EpochOrder(this, rank, epoch); }
  // The rank that reads `sample` in epoch 0 (every scheme reads each sample
  // once per epoch; -1 when drop-last leaves it out of epoch 0). O(1) for
  // uniform and local; O(samples of one shard) is never needed.
  int FirstEpochReader(int64_t sample) const;

 private:
  friend class EpochOrder;
  int64_t Share(int rank, int64_t batch_samples) const;
  uint64_t Key(std::initializer_list<uint64_t> words) const;

  PlanOptions options_;
  int64_t local_batch_ = 0;   // L = ceil(B / world_size)
  int64_t full_batches_ = 0;  // global batches with B samples
  int64_t remainder_ = 0;     // samples in the last, partial global batch (0 with drop-last)
  // local / partial_local: shard sizes T_r, starts, set-aside counts X_r and pool starts.
  std::vector<int64_t> shard_size_, shard_start_, exchange_, pool_start_;
  int64_t pool_size_ = 0;
};

}  // namespace hdmlp

#endif  // HDMLP_PLAN_ACCESS_PLAN_H_
