// AccessPlan: which sample every rank reads, at every step of every epoch.
//
// The plan is a pure function of (seed, epoch, dataset size, batch size,
// number of ranks, drop-last, shuffle): every rank can compute any rank's
// samples of any epoch without running the loader and without talking to
// the others. This is hdmlp's clairvoyance; caches, peers and the simulator
// all build on it.
//
// Global batches (every scheme). An epoch's n samples are cut into global
// batches of B = batch_size positions of the epoch's global order: global
// batch h is positions [GlobalBatchBegin(h), GlobalBatchEnd(h)), and these
// two functions are the only place the cut is made. With drop-last the
// n mod B remainder is never read. Without drop-last a remainder of R
// samples is its own, last global batch when R >= N (the number of ranks);
// when 0 < R < N it is merged into the previous global batch (which then
// holds B + R), so that every rank has at least one sample in every step
// and nothing is lost or duplicated. That merge is the only place N enters
// the boundaries: otherwise they depend on (n, B, drop-last) alone, so the
// remaining global batches of an epoch can be re-cut for another rank count.
// A plan with fewer samples than ranks, or B < N, is refused (some rank
// would have an empty step); so is drop-last with n < B (no batch at all).
//
// Rank slices. Global batch h of S samples is split as evenly as possible
// over the N ranks, in rank order: the first S mod N ranks take ceil(S/N)
// contiguous positions, the others floor(S/N) (RankSlice). So every rank
// takes BatchesPerEpoch() steps, each of at least one sample, and the local
// batches of one step differ by at most one sample, as PyTorch's
// DistributedSampler users expect.
//
// Scheme "uniform" (a true global shuffle, as in PyTorch's DistributedSampler
// but without padding): epoch e visits the samples in the order of an
// IndexPermutation keyed by (seed, e); rank r reads its slice of every global
// batch. Each sample is therefore read exactly once per epoch across all
// ranks (per the drop-last rule).
//
// Schemes "local" and "partial_local" (seed 004): the dataset is split once
// into fixed shards, shard r = positions [start_r, start_r + T_r) of a
// permutation keyed by the seed alone, T_r = the samples rank r reads per
// epoch under "uniform" without drop-last (so the local batch sizes are
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
// shuffle = false (validation): every permutation is the identity. Uniform
// then reads the dataset in index order, cut into global batches and rank
// slices as above; local and partial_local (no exchange without a shuffle)
// give every rank a contiguous block of the dataset, read in index order.
// The step counts and local batch sizes are the same as with a shuffle.
//
// Resuming (PlanOptions::start, plan/resume_point.h): the plan starts at
// global batch StartBatch() of epoch start.epoch; each rank's reads begin at
// StartItem(rank), and the epochs before are never read. When the epoch
// began with another world size under a local scheme, that epoch follows
// the old world size's global order (its remaining positions re-cut into
// this plan's slices); every later epoch is this plan's own.
//
// Nothing is materialised: memory is O(world size), independent of epochs
// and samples; SampleAt is O(1) (O(log world size) for partial_local).
// Thread-safety: immutable after construction; all methods are const.
#ifndef HDMLP_PLAN_ACCESS_PLAN_H_
#define HDMLP_PLAN_ACCESS_PLAN_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hdmlp/plan/permutation.h"
#include "hdmlp/plan/resume_point.h"

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
  bool shuffle = true;             // false: every epoch in index order
  ResumePoint start;               // where the plan starts (default: epoch 0)
};

// Positions [begin, begin + size) of an epoch's global order.
struct PositionRange {
  int64_t begin = 0;
  int64_t size = 0;
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
  // A resumed epoch that follows another world size's order: that plan's
  // rank orders of the epoch, by old rank (shared: copies stay cheap).
  std::shared_ptr<const std::vector<EpochOrder>> origin_;
};

class AccessPlan {
 public:
  explicit AccessPlan(const PlanOptions& options);  // validates; InvalidArgumentError

  const PlanOptions& options() const { return options_; }
  int epochs() const { return options_.epochs; }

  // Global batches per epoch: the same number on every rank.
  int64_t BatchesPerEpoch() const;
  // Global batch h (0 <= h < BatchesPerEpoch()) is positions
  // [GlobalBatchBegin(h), GlobalBatchEnd(h)) of the epoch's global order.
  int64_t GlobalBatchBegin(int64_t h) const;
  int64_t GlobalBatchEnd(int64_t h) const;
  // Rank's contiguous part of global batch h: never empty, and the parts of
  // one batch differ in size by at most one.
  PositionRange RankSlice(int rank, int64_t h) const;
  // Samples rank `rank` reads in one epoch (the same every epoch).
  int64_t RankEpochSize(int rank) const;
  // Size of rank's local batch `batch` (0 <= batch < BatchesPerEpoch()).
  int64_t LocalBatchSize(int rank, int64_t batch) const { return RankSlice(rank, batch).size; }
  // Rank's share of a global batch of exactly batch_size samples: its local
  // batch in every step but a merged or partial last one.
  int64_t NominalLocalBatchSize(int rank) const;
  // The j-th sample rank reads in epoch (0 <= j < RankEpochSize(rank)).
  int64_t SampleAt(int rank, int epoch, int64_t j) const;
  // Position in the epoch's global order of rank's j-th sample (uniform).
  int64_t GlobalPosition(int rank, int64_t j) const;
  // All samples of a rank's epoch, in reading order.
  std::vector<int64_t> RankEpochSamples(int rank, int epoch) const;
  // The permutation that orders epoch `epoch` (uniform scheme; the identity
  // without shuffle).
  IndexPermutation EpochPermutation(int epoch) const;
  // A rank's epoch order with its permutations built once.
  EpochOrder Epoch(int rank, int epoch) const { return EpochOrder(this, rank, epoch); }
  // The rank that reads `sample` first from the plan's start on: in the
  // start epoch (epoch 0 unless resumed), or after a start inside an epoch,
  // in the epoch after it when the sample was delivered before the start.
  // Every scheme reads each sample once per epoch; -1 when the sample is
  // not read there (drop-last). O(1) for uniform and local.
  int FirstEpochReader(int64_t sample) const;

  // Resuming (plan/resume_point.h). The global batch of start().epoch the
  // plan starts at (0 unless resumed inside an epoch).
  const ResumePoint& start() const { return options_.start; }
  int64_t StartBatch() const { return start_batch_; }
  // Rank's first read: item start.epoch * RankEpochSize(rank) + its local
  // position of StartBatch(); items count a rank's reads over all epochs.
  int64_t StartItem(int rank) const;
  // How many samples rank reads before its part of global batch h
  // (0 <= h <= BatchesPerEpoch()).
  int64_t LocalBatchStart(int rank, int64_t h) const;
  // Position of `sample` in epoch's global order, or -1 when the epoch does
  // not read it (drop-last). The global order of a local scheme is its
  // ranks' slices, batch by batch, in rank order.
  int64_t PositionInEpoch(int64_t sample, int epoch) const;
  // The rank whose slice holds position q of an epoch's global order.
  int RankAtPosition(int64_t q) const;

 private:
  friend class EpochOrder;
  // How an epoch is cut: `batches` global batches, each of batch_size
  // positions but the last, which holds `last` (B, B + R or R).
  struct Cut {
    int64_t batches = 0;
    int64_t last = 0;
  };
  static Cut CutEpoch(int64_t num_samples, int64_t batch_size, int world_size, bool drop_last);
  // Checks options_.start and builds origin_plan_ when needed.
  void SetUpStart();
  // The sample at position q of an epoch's global order, given this plan's
  // rank orders of that epoch.
  int64_t SampleAtPosition(const std::vector<EpochOrder>& orders, int64_t q) const;
  // Rank of the offset-th position of a global batch of batch_samples.
  int RankOfOffset(int64_t batch_samples, int64_t offset) const;
  // Rank's part of a global batch of `batch_samples` (evenly, in rank order).
  PositionRange Share(int rank, int64_t batch_samples) const;
  int64_t EpochSize(const Cut& cut, int rank) const;
  uint64_t Key(std::initializer_list<uint64_t> words) const;
  // A permutation keyed by `key`, or the identity without shuffle.
  IndexPermutation Permutation(uint64_t n, uint64_t key) const;

  PlanOptions options_;
  Cut cut_;  // this plan's (drop-last as asked)
  // local / partial_local: shard sizes T_r, starts, set-aside counts X_r and pool starts.
  std::vector<int64_t> shard_size_, shard_start_, exchange_, pool_start_;
  int64_t pool_size_ = 0;
  int64_t start_batch_ = 0;
  // The plan of start.order_world_size ranks whose global order the start
  // epoch follows (a local scheme resumed on another world size), else null.
  std::shared_ptr<const AccessPlan> origin_plan_;
};

}  // namespace hdmlp

#endif  // HDMLP_PLAN_ACCESS_PLAN_H_
