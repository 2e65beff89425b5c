// Placement: which samples a rank keeps in which storage class (issue #3).
//
// The access plan is known in advance, so at start-up a rank can count how
// often it will read every sample over the whole job and when it reads each
// one first. PlanPlacement turns those counts into a placement (HDMLP seed
// 001; NoPFS's Sampler does the same):
//
//   1. Order the rank's samples by read count, most-read first; ties go to
//      the sample read earlier (first reads are distinct, so the order is
//      total and the result deterministic).
//   2. Walk that order and put each sample into the first class 1..J that
//      still has capacity left and whose remainder holds the sample's bytes
//      ("first fit"). A sample too large for a class's remainder skips that
//      class and may land in a later one; a smaller, less-read sample after
//      it may still fill the gap. A class that is exactly full (or has
//      capacity 0) takes nothing more, not even empty files. A sample that
//      fits nowhere stays on the PFS. So the most-read samples are cached,
//      except those that no longer fit anywhere when their turn comes; with
//      equal sizes no uncached sample is read more often than a cached one,
//      and class j holds only samples that come before class j+1's in this
//      order.
//   3. Inside a class, samples are listed in order of first read: the order
//      in which the class's prefetch threads fill it, so the earliest needed
//      arrive first.
// Class 0 is the staging buffer, not a cache: it gets no samples.
//
// A resumed plan (plan/resume_point.h) counts only the reads from its start
// on (StartItem(rank) onwards): the placement is planned for what is left of
// the job, and its cost does not grow with the epochs already done.
//
// Cost. Let F = samples in the dataset, E = epochs, N = ranks, M = E*F/N
// (the reads of one rank) and D <= min(F, M) the distinct samples the rank
// reads. CountRankAccesses evaluates only the rank's own M positions
// (IndexPermutation::At, O(1) each, nearly all of the time), never a whole
// epoch, so its time is O(M + F) with kDense and O(M) with kSorted (radix
// sorts and merges are linear): it shrinks with N. Its memory never grows
// with E beyond D: kDense keeps 12 bytes per dataset sample, chosen only
// when the rank is expected to read at least F/4 distinct samples (so it is
// O(D)); kSorted keeps about 50 bytes per distinct sample, in chunks of
// about D/2 reads sorted by sample and merged into the running totals.
// PlanPlacement adds O(D) time and about 44 bytes per distinct sample, plus
// one random read of sizes[sample] per sample it considers. Measurements:
// docs/planning.md and benchmarks/plan_scaling.cc.
//
// Many epochs: counting stops after the first H epochs, H = max(1,
// max_counted_reads / reads per epoch) (all epochs when they fit, as in
// every job of up to 2^24 reads per rank). Every epoch's order is an
// independent permutation, so the first H epochs rank samples by frequency
// as all epochs would, and start-up does not grow with epochs beyond that.
// Long counts poll options.interrupt between chunks.
//
// Thread-safety: the functions are reentrant and only read the plan (which
// is immutable); they may use worker threads internally, all joined before
// they return. A Placement is immutable once returned: its const methods
// may be called from any number of threads.
#ifndef HDMLP_PLAN_PLACEMENT_H_
#define HDMLP_PLAN_PLACEMENT_H_

#include <cstdint>
#include <vector>

#include "hdmlp/plan/access_plan.h"
#include "hdmlp/util/interrupt.h"

namespace hdmlp {

// How CountRankAccesses aggregates reads per sample (same result either way).
enum class CountMethod {
  kAuto,    // kDense when the rank is expected to read >= 1/4 of the dataset, else kSorted
  kDense,   // counters indexed by sample id: 12 bytes per dataset sample, fastest
  kSorted,  // chunks sorted by sample and merged: memory O(distinct samples read)
};

// Tuning knobs; the defaults suit production. Tests lower min_piece_items
// and pick the method so that small plans exercise every path.
struct PlanningOptions {
  // Worker threads for counting; <= 0 means the hardware's, at most 8.
  int threads = 0;
  // Reads one worker evaluates at a time (at least; kSorted grows it with D).
  int64_t min_piece_items = int64_t{1} << 18;
  CountMethod method = CountMethod::kAuto;
  // Several ranks: the samples a rank reads in the first epoch (each is read
  // by exactly one rank there; for a resumed plan, those it reads first of
  // all ranks: AccessPlan::FirstEpochReader) claim space before all others,
  // in frequency order among themselves. When the ranks' storage together holds the
  // dataset, every sample is then cached by the rank that reads it first,
  // which is the one rank that reads it from the PFS (cache_hierarchy.h).
  bool first_epoch_first = false;
  // Reads counted at most (whole epochs, at least one): see "Many epochs".
  // 0: every epoch.
  int64_t max_counted_reads = int64_t{1} << 24;
  // Keep the distinct samples the rank reads (in the counted epochs) in
  // Placement::read_samples, counting them even when no class has capacity.
  bool keep_read_samples = false;
  // Polled between chunks of the count, on the calling thread.
  InterruptCheck interrupt;
};

// The reads CountRankAccesses counts: items [first_item, end_item) of the
// rank (items as in SampleUse::first_item), from the plan's start on, at
// most H epochs' worth (see above).
struct CountWindow {
  int64_t first_item = 0;
  int64_t end_item = 0;
};
CountWindow CountedItems(const AccessPlan& plan, int rank, const PlanningOptions& options = {});
// The epochs that window touches: all from the start epoch, or H (H + 1 when
// a resumed plan starts inside an epoch). A sample's count is at most this.
int CountedEpochs(const AccessPlan& plan, int rank, const PlanningOptions& options = {});

struct SampleUse {
  int64_t sample = 0;
  int32_t count = 0;       // reads over all epochs (>= 1)
  int64_t first_item = 0;  // first read: epoch * RankEpochSize(rank) + j
};

// Every sample `rank` reads in the counted window (CountedItems: from the
// plan's start on, all epochs unless the job has more reads than
// max_counted_reads), with its read count and first read, sorted by sample
// id (each sample once). The counts sum to end_item - first_item. Throws
// InvalidArgumentError for a rank outside [0, world_size).
std::vector<SampleUse> CountRankAccesses(const AccessPlan& plan, int rank,
                                         const PlanningOptions& options = {});

struct Placement {
  // Index = storage class; class 0 (the staging buffer) stays empty. Each
  // list is in order of first read.
  std::vector<std::vector<int64_t>> class_samples;
  // Bytes placed per class (<= its capacity); class_bytes[0] is 0.
  std::vector<int64_t> class_bytes;
  // Distinct samples the rank reads, cached or not; 0 when no class has
  // capacity (nothing is counted then, unless keep_read_samples).
  int64_t rank_samples = 0;
  // With keep_read_samples: those samples, sorted.
  std::vector<int64_t> read_samples;

  // The class holding `sample`, or -1 when it is not cached (also for a
  // sample the rank never reads). O(log cached samples).
  int ClassOf(int64_t sample) const;
  // Samples cached over all classes.
  int64_t cached_samples() const { return static_cast<int64_t>(index_samples_.size()); }

 private:
  friend Placement PlanPlacement(const AccessPlan&, int, const std::vector<int64_t>&,
                                 const std::vector<int64_t>&, const PlanningOptions&);
  // Every cached sample, sorted, and its class: ClassOf by binary search in
  // 12 bytes per cached sample (a hash map would need several times that).
  std::vector<int64_t> index_samples_;
  std::vector<int32_t> index_classes_;
};

// Places the samples `rank` reads into storage classes 1..J.
// capacities_bytes[j] is class j's capacity for j = 0..J (index 0, the
// staging buffer, is ignored); sizes[s] is sample s's size in bytes from the
// dataset index (sizes.size() == num_samples). Throws InvalidArgumentError
// for a bad rank, a sizes vector of the wrong length, an empty
// capacities_bytes, a negative capacity, or a negative size met while
// placing (only the sizes of samples the rank reads are looked at).
Placement PlanPlacement(const AccessPlan& plan, int rank, const std::vector<int64_t>& sizes,
                        const std::vector<int64_t>& capacities_bytes,
                        const PlanningOptions& options = {});

}  // namespace hdmlp

#endif  // HDMLP_PLAN_PLACEMENT_H_
