#include "hdmlp/plan/placement.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <utility>

#include "hdmlp/errors.h"
#include "hdmlp/plan/permutation.h"
#include "hdmlp/util/parallel_for.h"

namespace hdmlp {
namespace {

// Bits needed to write any value in [0, x]: 0 for x = 0.
int BitWidth(uint64_t x) {
  int bits = 0;
  while (x != 0) {
    ++bits;
    x >>= 1;
  }
  return bits;
}

// Stable LSD radix sort by key(element), where every key < 2^bits: reads
// src and leaves the result in dst (src may be dst). Digits of at most 8
// bits keep the scatter to 256 output streams, few enough for the L1 cache
// and the TLB to follow; the histograms of all digits come from one read
// pass, and a pass whose digit is the same for every element is skipped. tmp is scratch space, untouched when one pass does. Linear time:
// the sorts here run on millions of elements, where std::sort's n log n
// comparisons cost several times more.
template <typename T, typename KeyFn>
void RadixSortInto(const std::vector<T>& src, std::vector<T>& dst, std::vector<T>& tmp, int bits, KeyFn key) {
  constexpr int kMaxDigitBits = 8;
  const int passes = bits <= 0 ? 0 : (bits + kMaxDigitBits - 1) / kMaxDigitBits;
  const int digit_bits = passes == 0 ? 0 : (bits + passes - 1) / passes;
  const size_t buckets = size_t{1} << digit_bits;
  const uint64_t mask = buckets - 1;
  std::vector<size_t> offsets(buckets * static_cast<size_t>(passes), 0);
  for (const T& x : src) {
    const uint64_t k = key(x);
    for (int pass = 0; pass < passes; ++pass) ++offsets[pass * buckets + ((k >> (pass * digit_bits)) & mask)];
  }
  const std::vector<T>* in = &src;
  for (int pass = 0; pass < passes; ++pass) {
    size_t* const off = &offsets[pass * buckets];
    if (*std::max_element(off, off + buckets) == src.size()) continue;
    size_t sum = 0;
    for (size_t b = 0; b < buckets; ++b) sum += std::exchange(off[b], sum);
    std::vector<T>* out = in == &dst ? &tmp : &dst;
    out->resize(src.size());
    const int shift = pass * digit_bits;
    for (const T& x : *in) (*out)[off[(key(x) >> shift) & mask]++] = x;
    in = out;
  }
  if (in == &src && &src != &dst) {
    dst = src;
  } else if (in == &tmp) {
    dst.swap(tmp);
  }
}

template <typename T, typename KeyFn>
void RadixSort(std::vector<T>& v, std::vector<T>& tmp, int bits, KeyFn key) {
  RadixSortInto(v, v, tmp, bits, key);
}

int ResolveThreads(int requested) {
  if (requested > 0) return requested;
  const unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(hw, 1u, 8u));
}

void CheckRank(const AccessPlan& plan, int rank) {
  if (rank < 0 || rank >= plan.options().world_size) {
    throw InvalidArgumentError("rank must be in [0, " + std::to_string(plan.options().world_size) +
                               "), got " + std::to_string(rank));
  }
}

// One worker's slice [begin, end) of the rank's reads. FillPiece evaluates
// the slice's positions as keys (sample << rel_bits) | (item - begin), sorts
// them by sample and compresses each run of equal samples into one
// SampleUse. The sort is stable and keys are written in item order, so the
// first key of a run is the sample's first read in the slice.
struct Piece {
  int64_t begin = 0;
  int64_t end = 0;
  std::vector<uint64_t> keys;
  std::vector<uint64_t> scratch;
  std::vector<SampleUse> uses;  // the slice's totals, sorted by sample
};

// Samples of the rank's reads [begin, begin + n) into out[0, n).
void EvaluateReads(const AccessPlan& plan, int rank, int64_t epoch_size, int64_t begin, int64_t n, uint64_t* out) {
  int epoch = static_cast<int>(begin / epoch_size);
  int64_t j = begin % epoch_size;
  // One permutation per epoch touched: building one derives its round keys,
  // which costs more than evaluating a position.
  EpochOrder order = plan.Epoch(rank, epoch);
  for (int64_t i = 0; i < n; ++i) {
    out[i] = static_cast<uint64_t>(order.At(j));
    if (++j == epoch_size && i + 1 < n) {
      j = 0;
      order = plan.Epoch(rank, ++epoch);
    }
  }
}

void FillPiece(const AccessPlan& plan, int rank, int64_t epoch_size, int sample_bits, Piece& piece) {
  const int64_t n = piece.end - piece.begin;
  const int rel_bits = std::max(1, BitWidth(static_cast<uint64_t>(n - 1)));
  piece.keys.resize(static_cast<size_t>(n));
  EvaluateReads(plan, rank, epoch_size, piece.begin, n, piece.keys.data());
  for (int64_t i = 0; i < n; ++i) {
    piece.keys[static_cast<size_t>(i)] = (piece.keys[static_cast<size_t>(i)] << rel_bits) | static_cast<uint64_t>(i);
  }
  RadixSort(piece.keys, piece.scratch, sample_bits, [rel_bits](uint64_t k) { return k >> rel_bits; });

  const uint64_t rel_mask = (uint64_t{1} << rel_bits) - 1;
  piece.uses.clear();
  for (const uint64_t key : piece.keys) {
    const int64_t sample = static_cast<int64_t>(key >> rel_bits);
    if (!piece.uses.empty() && piece.uses.back().sample == sample) {
      ++piece.uses.back().count;
    } else {
      piece.uses.push_back({sample, 1, piece.begin + static_cast<int64_t>(key & rel_mask)});
    }
  }
}

// Merges b into a, two lists of per-sample totals sorted by sample, where
// every read counted in a precedes every read counted in b: a sample in
// both keeps a's first read. The output size is counted first, a is grown
// to it, and the merge runs from the back, so it needs no second buffer
// (writes never overtake the unread part of a). Branch-free in the common
// case (conditional moves choose the next output), because which list is
// ahead at each step is a coin toss that a branch predictor cannot learn.
void MergeBack(std::vector<SampleUse>& a, const std::vector<SampleUse>& b) {
  size_t i = 0, k = 0, n = 0;
  while (i < a.size() && k < b.size()) {
    const int64_t x = a[i].sample, y = b[k].sample;
    i += x <= y;
    k += y <= x;
    ++n;
  }
  n += (a.size() - i) + (b.size() - k);
  int64_t ai = static_cast<int64_t>(a.size()) - 1;
  int64_t bk = static_cast<int64_t>(b.size()) - 1;
  int64_t w = static_cast<int64_t>(n) - 1;
  a.resize(n);
  while (ai >= 0 && bk >= 0) {
    const SampleUse x = a[static_cast<size_t>(ai)];
    const SampleUse& y = b[static_cast<size_t>(bk)];
    const bool take_a = x.sample >= y.sample;
    const bool take_b = y.sample >= x.sample;
    SampleUse& o = a[static_cast<size_t>(w--)];
    o.sample = take_a ? x.sample : y.sample;
    o.count = (take_a ? x.count : 0) + (take_b ? y.count : 0);
    o.first_item = take_a ? x.first_item : y.first_item;
    ai -= take_a;
    bk -= take_b;
  }
  // What is left of a is already in place (then w == ai).
  for (; bk >= 0; --bk) a[static_cast<size_t>(w--)] = b[static_cast<size_t>(bk)];
}

// Few ranks (a rank reads a good share of the dataset): per-sample arrays
// over the whole dataset, 12 bytes a dataset sample; kAuto picks this only
// when D >= F/4 is expected, so that is at most 48 bytes a distinct sample. Each chunk of reads is first evaluated into a
// buffer by all threads (the permutation is nearly all the work), then each
// thread applies the chunk to its own range of sample ids, scanning the
// buffer in item order (so the first write of first_item is the first
// read, and no two threads touch the same counter). Evaluating and counting
// in one loop was measured 2x slower: the random counter updates stall the
// long dependency chain of the permutation.
std::vector<SampleUse> CountDense(const AccessPlan& plan, int rank, int64_t epoch_size, int64_t first_item,
                                  int64_t end_item, int threads, int64_t piece, const InterruptCheck& interrupt) {
  const int64_t total = end_item - first_item;
  const int64_t num_samples = plan.options().num_samples;
  std::vector<int32_t> count(static_cast<size_t>(num_samples), 0);
  std::vector<int64_t> first(static_cast<size_t>(num_samples));
  std::vector<int64_t> distinct(static_cast<size_t>(threads), 0);
  const int64_t chunk_cap = std::min(total, piece * threads);
  std::vector<uint64_t> samples(static_cast<size_t>(chunk_cap));
  for (int64_t t = first_item; t < end_item;) {
    CheckInterrupt(interrupt);
    const int64_t chunk = std::min(end_item - t, chunk_cap);
    const int64_t slices = (chunk + piece - 1) / piece;
    ParallelFor(slices, threads, [&](int64_t p) {
      const int64_t begin = p * piece;
      EvaluateReads(plan, rank, epoch_size, t + begin, std::min(chunk - begin, piece), &samples[static_cast<size_t>(begin)]);
    });
    ParallelFor(threads, threads, [&](int64_t k) {
      const uint64_t lo = static_cast<uint64_t>(num_samples * k / threads);
      const uint64_t width = static_cast<uint64_t>(num_samples * (k + 1) / threads) - lo;
      int64_t added = 0;
      for (int64_t i = 0; i < chunk; ++i) {
        const uint64_t s = samples[static_cast<size_t>(i)];
        if (s - lo >= width) continue;  // another thread's range (unsigned wrap covers s < lo)
        if (count[s]++ == 0) {
          first[s] = t + i;
          ++added;
        }
      }
      distinct[static_cast<size_t>(k)] += added;
    });
    t += chunk;
  }
  int64_t d = 0;
  for (int64_t x : distinct) d += x;
  std::vector<SampleUse> uses;
  uses.reserve(static_cast<size_t>(d));
  for (int64_t s = 0; s < num_samples; ++s) {
    if (count[static_cast<size_t>(s)] > 0) uses.push_back({s, count[static_cast<size_t>(s)], first[static_cast<size_t>(s)]});
  }
  return uses;
}

// Many ranks (a rank reads a small share): sorted runs, O(D) memory.
// Chunks of reads are evaluated, sorted by sample and compressed by the
// threads, then merged into the running per-sample totals.
std::vector<SampleUse> CountSorted(const AccessPlan& plan, int rank, int64_t epoch_size, int64_t first_item,
                                   int64_t end_item, int threads, int64_t min_piece_items,
                                   double expected_distinct, const InterruptCheck& interrupt) {
  const int64_t total = end_item - first_item;
  const int sample_bits = BitWidth(static_cast<uint64_t>(plan.options().num_samples - 1));
  // A piece's item offsets share a 64-bit key with the sample id.
  const int max_rel_bits = std::min(40, 64 - sample_bits);
  const int64_t max_piece = int64_t{1} << max_rel_bits;
  const int64_t min_piece = std::min(min_piece_items, max_piece);

  // The totals grow in place: reserving the expected D (plus a margin far
  // above its random spread) saves copying them at every growth.
  std::vector<SampleUse> acc;
  acc.reserve(static_cast<size_t>(std::min(expected_distinct * 1.01 + 4096, static_cast<double>(total))));
  std::vector<Piece> pieces(static_cast<size_t>(threads));
  std::vector<SampleUse> chunk_uses;
  for (int64_t t = first_item; t < end_item;) {
    CheckInterrupt(interrupt);
    // A chunk of about D/2 reads: each merge (O(D)) is paid for by D/2 new
    // reads, O(1) amortised per read, and the chunk's buffers (40 bytes a
    // read) stay within about the totals' own 24 bytes a sample.
    const int64_t piece_size = std::clamp<int64_t>(
        (static_cast<int64_t>(acc.size()) / 2 + threads - 1) / threads, min_piece, max_piece);
    const int64_t chunk = std::min(end_item - t, piece_size * threads);
    const int64_t used = (chunk + piece_size - 1) / piece_size;
    for (int64_t p = 0; p < used; ++p) {
      Piece& piece = pieces[static_cast<size_t>(p)];
      piece.begin = t + p * piece_size;
      piece.end = std::min(piece.begin + piece_size, t + chunk);
    }
    ParallelFor(used, threads, [&](int64_t p) {
      FillPiece(plan, rank, epoch_size, sample_bits, pieces[static_cast<size_t>(p)]);
    });
    // Fold the pieces in item order, then append the chunk to the totals.
    chunk_uses.swap(pieces[0].uses);
    for (int64_t p = 1; p < used; ++p) MergeBack(chunk_uses, pieces[static_cast<size_t>(p)].uses);
    MergeBack(acc, chunk_uses);
    t += chunk;
  }
  return acc;
}

}  // namespace

CountWindow CountedItems(const AccessPlan& plan, int rank, const PlanningOptions& options) {
  CheckRank(plan, rank);
  const int64_t epoch_size = plan.RankEpochSize(rank);
  int64_t end_item = 0;
  if (__builtin_mul_overflow(static_cast<int64_t>(plan.epochs()), epoch_size, &end_item)) {
    throw InvalidArgumentError("epochs * samples per epoch of rank " + std::to_string(rank) +
                               " overflows a 64-bit item count");
  }
  // A resumed plan counts only what is left: the cost does not grow with
  // the epochs already done.
  const int64_t first_item = std::min(plan.StartItem(rank), end_item);
  if (options.max_counted_reads > 0 && epoch_size > 0) {
    const int64_t horizon = std::max<int64_t>(1, options.max_counted_reads / epoch_size);
    if (horizon < (end_item - first_item) / epoch_size) end_item = first_item + horizon * epoch_size;
  }
  return {first_item, end_item};
}

int CountedEpochs(const AccessPlan& plan, int rank, const PlanningOptions& options) {
  const CountWindow w = CountedItems(plan, rank, options);
  const int64_t epoch_size = plan.RankEpochSize(rank);
  if (w.end_item <= w.first_item || epoch_size == 0) return 0;
  return static_cast<int>((w.end_item - 1) / epoch_size - w.first_item / epoch_size + 1);
}

std::vector<SampleUse> CountRankAccesses(const AccessPlan& plan, int rank, const PlanningOptions& options) {
  const CountWindow window = CountedItems(plan, rank, options);
  const int64_t epoch_size = plan.RankEpochSize(rank);
  const int64_t first_item = window.first_item, end_item = window.end_item;
  const int64_t total = end_item - first_item;
  if (total <= 0) return {};
  const int threads = ResolveThreads(options.threads);
  const int64_t min_piece = std::max<int64_t>(1, options.min_piece_items);
  // Expected distinct samples if every epoch's share were a uniform random
  // subset, as the permutation makes it: F * (1 - (1 - R/F)^E).
  const double f = static_cast<double>(plan.options().num_samples);
  const double r = static_cast<double>(epoch_size);
  const double epochs_left = static_cast<double>(total) / r;
  const double expected = -f * std::expm1(epochs_left * std::log1p(-std::min(1.0, r / f)));
  CountMethod method = options.method;
  if (method == CountMethod::kAuto) {
    // Dense arrays (12 bytes a dataset sample) when they cost at most 48
    // bytes a distinct sample, about what kSorted's buffers would (~50).
    method = 4 * expected >= f ? CountMethod::kDense : CountMethod::kSorted;
  }
  if (method == CountMethod::kDense) {
    return CountDense(plan, rank, epoch_size, first_item, end_item, threads, min_piece, options.interrupt);
  }
  return CountSorted(plan, rank, epoch_size, first_item, end_item, threads, min_piece, expected, options.interrupt);
}

int Placement::ClassOf(int64_t sample) const {
  const auto it = std::lower_bound(index_samples_.begin(), index_samples_.end(), sample);
  if (it == index_samples_.end() || *it != sample) return -1;
  return index_classes_[static_cast<size_t>(it - index_samples_.begin())];
}

namespace {

// A sample's ordering key, (first read << count bits) | (E - count), and
// its index into the placement's sorted samples.
struct KeyedSample {
  uint64_t key;
  uint64_t idx;
};

// The checked total of classes 1..J's capacities (saturating at 2^63 - 1).
int64_t TotalCapacity(const AccessPlan& plan, const std::vector<int64_t>& sizes,
                      const std::vector<int64_t>& capacities_bytes) {
  const int64_t num_samples = plan.options().num_samples;
  if (static_cast<int64_t>(sizes.size()) != num_samples) {
    throw InvalidArgumentError("sizes has " + std::to_string(sizes.size()) + " entries but the dataset has " +
                               std::to_string(num_samples) + " samples");
  }
  if (capacities_bytes.empty()) {
    throw InvalidArgumentError("capacities_bytes must list the staging buffer (class 0) and classes 1..J");
  }
  if (capacities_bytes.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw InvalidArgumentError("too many storage classes");
  }
  int64_t total_capacity = 0;
  for (size_t j = 1; j < capacities_bytes.size(); ++j) {
    if (capacities_bytes[j] < 0) {
      throw InvalidArgumentError("capacity of storage class " + std::to_string(j) + " is negative (" +
                                 std::to_string(capacities_bytes[j]) + " bytes)");
    }
    total_capacity = capacities_bytes[j] > std::numeric_limits<int64_t>::max() - total_capacity
                         ? std::numeric_limits<int64_t>::max()
                         : total_capacity + capacities_bytes[j];
  }
  return total_capacity;
}

// samples[] and sizes[] are read at random: prefetched this far ahead.
constexpr size_t kAhead = 16;

// First fit in frequency order: cls[idx] = the class of samples[idx] (0:
// none), and placement->class_bytes; returns the samples placed per class.
// A class that is exactly full leaves the scan, and the walk ends once
// every class has.
std::vector<size_t> FirstFit(const std::vector<KeyedSample>& by_freq, const std::vector<int64_t>& samples,
                             const std::vector<int64_t>& sizes, const std::vector<int64_t>& capacities_bytes,
                             std::vector<int32_t>* cls, Placement* placement) {
  const size_t classes = capacities_bytes.size();
  std::vector<int64_t> remaining(capacities_bytes);
  std::vector<size_t> open;  // classes with capacity left, in order
  for (size_t j = 1; j < classes; ++j) {
    if (remaining[j] > 0) open.push_back(j);
  }
  std::vector<size_t> per_class(classes, 0);
  for (size_t i = 0; i < by_freq.size() && !open.empty(); ++i) {
    if (i + 2 * kAhead < by_freq.size()) __builtin_prefetch(&samples[by_freq[i + 2 * kAhead].idx]);
    if (i + kAhead < by_freq.size()) {
      __builtin_prefetch(&sizes[static_cast<size_t>(samples[by_freq[i + kAhead].idx])]);
    }
    const size_t idx = by_freq[i].idx;
    const int64_t sample = samples[idx];
    const int64_t size = sizes[static_cast<size_t>(sample)];
    if (size < 0) {
      throw InvalidArgumentError("sample " + std::to_string(sample) + " has a negative size (" +
                                 std::to_string(size) + " bytes)");
    }
    for (size_t k = 0; k < open.size(); ++k) {
      const size_t j = open[k];
      if (size > remaining[j]) continue;
      remaining[j] -= size;
      placement->class_bytes[j] += size;
      (*cls)[idx] = static_cast<int32_t>(j);
      ++per_class[j];
      if (remaining[j] == 0) open.erase(open.begin() + static_cast<std::ptrdiff_t>(k));
      break;
    }
  }
  return per_class;
}

}  // namespace

Placement PlanPlacement(const AccessPlan& plan, int rank, const std::vector<int64_t>& sizes,
                        const std::vector<int64_t>& capacities_bytes, const PlanningOptions& options) {
  CheckRank(plan, rank);
  const int64_t total_capacity = TotalCapacity(plan, sizes, capacities_bytes);
  const size_t classes = capacities_bytes.size();
  Placement placement;
  placement.class_samples.assign(classes, {});
  placement.class_bytes.assign(classes, 0);

  if (total_capacity == 0 && !options.keep_read_samples) return placement;  // nothing to place: skip the counting too
  std::vector<SampleUse> uses = CountRankAccesses(plan, rank, options);
  placement.rank_samples = static_cast<int64_t>(uses.size());
  if (options.keep_read_samples) {
    placement.read_samples.reserve(uses.size());
    for (const SampleUse& u : uses) placement.read_samples.push_back(u.sample);
  }
  if (uses.empty() || total_capacity == 0) return placement;

  // Orders by one 64-bit key per sample, (first << count_bits) | (E - count),
  // with an index into `uses` (sorted by sample) as payload:
  //   by_first: sorted on the first-read bits: the prefetchers' fill order;
  //   by_freq:  a copy of it, stably sorted on the count bits: (count desc,
  //             first read asc), the order in which samples claim space.
  // Radix sorts, because n log n comparison sorts of millions of samples
  // cost several times more.
  // Counts are at most the epochs the counted window touches; first reads
  // are below its end.
  const int epochs = CountedEpochs(plan, rank, options);
  const int64_t total_items = CountedItems(plan, rank, options).end_item;
  const int first_bits = BitWidth(static_cast<uint64_t>(total_items - 1));
  const int count_bits = BitWidth(static_cast<uint64_t>(epochs - 1));
  if (first_bits + count_bits > 64) {
    throw InvalidArgumentError("the job is too large to plan: epochs^2 * samples per epoch must be below 2^64");
  }
  const size_t distinct = uses.size();
  std::vector<KeyedSample> by_first(distinct), scratch;
  std::vector<int64_t> samples(distinct);  // all that is left of uses: 8 bytes a sample, not 24
  for (size_t i = 0; i < distinct; ++i) {
    by_first[i] = {(static_cast<uint64_t>(uses[i].first_item) << count_bits) |
                       static_cast<uint64_t>(epochs - uses[i].count),
                   i};
    samples[i] = uses[i].sample;
  }
  std::vector<SampleUse>().swap(uses);
  RadixSort(by_first, scratch, first_bits, [count_bits](const KeyedSample& r) { return r.key >> count_bits; });
  if (count_bits <= 8) std::vector<KeyedSample>().swap(scratch);  // one pass: scatters straight into by_freq
  std::vector<KeyedSample> by_freq;
  const uint64_t count_mask = (uint64_t{1} << count_bits) - 1;
  RadixSortInto(by_first, by_freq, scratch, count_bits, [count_mask](const KeyedSample& r) { return r.key & count_mask; });
  std::vector<KeyedSample>().swap(scratch);
  if (options.first_epoch_first) {
    // The samples this rank reads first of all ranks: its reads of the start
    // epoch (what is left of it), and after a start inside an epoch, those
    // of the next epoch that nobody read in the start epoch's rest.
    const int64_t epoch_size = plan.RankEpochSize(rank);
    const auto first_end = static_cast<uint64_t>((static_cast<int64_t>(plan.start().epoch) + 1) * epoch_size);
    const bool mid_epoch = plan.start().position > 0;
    std::stable_partition(by_freq.begin(), by_freq.end(), [&](const KeyedSample& r) {
      const uint64_t first = r.key >> count_bits;
      if (first < first_end) return true;
      return mid_epoch && first < first_end + static_cast<uint64_t>(epoch_size) &&
             plan.FirstEpochReader(samples[r.idx]) == rank;
    });
  }

  std::vector<int32_t> cls(distinct, 0);
  const std::vector<size_t> per_class = FirstFit(by_freq, samples, sizes, capacities_bytes, &cls, &placement);
  std::vector<KeyedSample>().swap(by_freq);

  // Each class in order of first read, the order its prefetchers fill it.
  size_t placed = 0;
  for (size_t j = 1; j < classes; ++j) {
    placement.class_samples[j].reserve(per_class[j]);
    placed += per_class[j];
  }
  for (size_t i = 0; i < by_first.size(); ++i) {
    if (i + kAhead < by_first.size()) __builtin_prefetch(&cls[by_first[i + kAhead].idx]);
    const size_t idx = by_first[i].idx;
    if (cls[idx] != 0) placement.class_samples[static_cast<size_t>(cls[idx])].push_back(samples[idx]);
  }
  std::vector<KeyedSample>().swap(by_first);

  // The ClassOf index: samples is sorted, so a scan gives it sorted.
  placement.index_samples_.reserve(placed);
  placement.index_classes_.reserve(placed);
  for (size_t i = 0; i < distinct; ++i) {
    if (cls[i] == 0) continue;
    placement.index_samples_.push_back(samples[i]);
    placement.index_classes_.push_back(cls[i]);
  }
  return placement;
}

}  // namespace hdmlp
