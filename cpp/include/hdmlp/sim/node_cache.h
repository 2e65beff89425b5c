// NodeCache: one simulated node's cached copies and how far each is filled
// (the simulator's largest data: one record per cached (node, sample) pair;
// simulator.h, docs/simulator.md "Cost and scale").
//
// A node caches a set of samples, each in one storage class j >= 1, and its
// prefetch threads fill class j in a fill order (NodePlan::class_lists).
// Every copy is filled once: it goes from "not started" to started with a
// ready time (when it is complete) and never back. A copy is addressed by
// its index k: its rank among the node's samples by id (Find).
//
// Memory: about 5 to 6 bytes per copy, not the 13 of a record per copy:
//  - the sample set is a bitmap over [0, largest id] with a rank count per
//    256 bits (1.25 bits per dataset sample; the count includes the
//    block's words, so a lookup is one popcount) when that is smaller than a
//    sorted array of 4-byte ids, else that array;
//  - the fill order, 4 bytes per copy (the sample ids, class by class);
//  - the class, 1 byte per copy, only when the node uses several classes;
//  - one "started" bit per copy, and one saying whether its ready time is
//    still kept (a lookup of a complete copy reads no list). A ready time is kept only while it may lie
//    in the future: the simulator asks Ready(k, now) with a `now` that never
//    decreases (its event loop runs in time order), so a copy whose ready
//    time is <= the `now` of some call is complete for every later call, and
//    its time is dropped (Start purges such entries as the list grows). At
//    any instant only the fills in flight (a few per thread) are unsettled.
//
// Thread-safety: none inside. Build once (BuildCache), then one thread at a
// time may call Start / Settle; Find, Class, Started and Ready are const and
// may run concurrently with each other (the decomposed loop reads caches
// from several threads once no copy is left to start).
#ifndef HDMLP_SIM_NODE_CACHE_H_
#define HDMLP_SIM_NODE_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "hdmlp/sim/sim_memory.h"

namespace hdmlp::sim {

using std::size_t;

// Ready time of a copy whose fill has not started.
constexpr float kNotStarted = std::numeric_limits<float>::infinity();
// Ready time of a copy whose fill waits on a PFS read in flight: known only
// when that read ends (Settle).
constexpr float kPendingReady = std::numeric_limits<float>::max();

// Rounds a ready time up to a float: never lets a copy be read before it is
// complete.
float RoundUpReady(double t);

// Bits set in `w`. Inline arithmetic: without -mpopcnt (the default
// x86-64 target) __builtin_popcountll is a call into libgcc.
inline int Popcount(uint64_t w) {
#if defined(__POPCNT__) || !defined(__x86_64__)
  return __builtin_popcountll(w);
#else
  w -= (w >> 1) & 0x5555555555555555ULL;
  w = (w & 0x3333333333333333ULL) + ((w >> 2) & 0x3333333333333333ULL);
  w = (w + (w >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
  return static_cast<int>((w * 0x0101010101010101ULL) >> 56);
#endif
}

// A sorted set of sample ids, with each member's rank.
class SampleSet {
 public:
  SampleSet() = default;
  // `sorted`: distinct ids, ascending. Picks the smaller representation, in
  // `memory` (null: operator new).
  explicit SampleSet(const std::vector<uint32_t>& sorted, SimMemory* memory = nullptr);

  size_t size() const { return size_; }
  // The rank of `sample` among the members, or -1.
  int64_t Find(int64_t sample) const {
    if (bits_.empty()) return FindInArray(sample);
    const auto s = static_cast<uint64_t>(sample);
    const uint64_t word = s >> 6;
    if (sample < 0 || word >= bits_.size()) return -1;
    const uint64_t w = bits_[word];
    if (((w >> (s & 63)) & 1) == 0) return -1;
    // The block's count, plus the members in its words before this one
    // (byte 3 + (word & 3) of the entry; 0 for the block's first word).
    const uint64_t rank = rank_[word >> 2];
    const uint64_t before = (rank >> (8 * (word & 3) + 24)) & (word & 3 ? 0xff : 0);
    return static_cast<int64_t>((rank & 0xffffffffu) + before) + Popcount(w & ((uint64_t{1} << (s & 63)) - 1));
  }
  // Asks the CPU for the memory Find(sample) reads, without waiting (a hint:
  // no effect on any result).
  void PrefetchFind(int64_t sample) const {
    const auto s = static_cast<uint64_t>(sample);
    if (bits_.empty()) {
      if (!sorted_.empty() && sample >= 0) {
        const size_t guess = static_cast<size_t>(static_cast<double>(s) * density_);
        __builtin_prefetch(sorted_.data() + (guess < sorted_.size() ? guess : sorted_.size() - 1));
      }
      return;
    }
    if (sample < 0 || (s >> 6) >= bits_.size()) return;
    __builtin_prefetch(bits_.data() + (s >> 6));
    __builtin_prefetch(rank_.data() + (s >> 8));
  }
  // Calls f(sample, rank) for every member, ascending.
  template <typename F>
  void ForEach(F&& f) const {
    if (!bits_.empty()) {
      uint32_t k = 0;
      for (size_t w = 0; w < bits_.size(); ++w)
        for (uint64_t b = bits_[w]; b != 0; b &= b - 1)
          f(static_cast<uint32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(b))), k++);
      return;
    }
    for (uint32_t k = 0; k < sorted_.size(); ++k) f(sorted_[k], k);
  }

 private:
  int64_t FindInArray(int64_t sample) const;

  size_t size_ = 0;
  // Bitmap form: bit s of bits_ is set for a member s; rank_[b] holds, in
  // its low 32 bits, the members below 256 * b, and in byte 3 + k (k = 1..3)
  // those in the block's words before word k: one popcount per Find.
  SimVector<uint64_t> bits_;
  SimVector<uint64_t> rank_;
  // Array form: the ids, and members per id (for an interpolated first guess).
  SimVector<uint32_t> sorted_;
  double density_ = 0;
};

// What a node caches: class_lists[j], class j's samples in fill order (j = 0
// unused); the last copies[j] of them are copied from peers' storage.
struct NodePlan {
  std::vector<std::vector<int64_t>> class_lists;
  std::vector<size_t> copies;
  bool caches_every_read = false;  // every sample the node reads in the job is in its lists
};

class NodeCache {
 public:
  size_t size() const { return set_.size(); }
  bool empty() const { return set_.size() == 0; }
  // The index of `sample`'s copy, or -1 when the node does not cache it.
  int64_t Find(int64_t sample) const { return set_.Find(sample); }
  const SampleSet& samples() const { return set_; }

  // Class of copy k (>= 1).
  int Class(size_t k) const { return cls_.empty() ? single_class_ : cls_[k]; }
  // The class of every copy when they share one, else 0.
  int single_class() const { return cls_.empty() ? single_class_ : 0; }

  bool Started(size_t k) const { return (state_[k >> 5] >> (2 * (k & 31))) & 1; }
  // Asks the CPU for copy k's state (Started, Ready) and class without waiting (a hint).
  void PrefetchCopy(size_t k) const {
    __builtin_prefetch(state_.data() + (k >> 5));
    if (!cls_.empty()) __builtin_prefetch(cls_.data() + k);
  }
  // Copy k's ready time as seen at `now`: kNotStarted, kPendingReady, a time
  // > now, or, for a copy complete by now, some time <= now.
  float Ready(size_t k, double now) const {
    const uint64_t state = state_[k >> 5] >> (2 * (k & 31));
    if ((state & 1) == 0) return kNotStarted;
    if ((state & 2) == 0) return -kNotStarted;  // complete: not in unsettled_
    for (const auto& [idx, ready] : unsettled_)
      if (idx == k) return ready <= now ? -kNotStarted : ready;
    return -kNotStarted;
  }
  // Starts copy k's fill, complete at `ready` (RoundUpReady'd, or
  // kPendingReady); `now` is the caller's time (entries complete by then
  // may be dropped).
  void Start(size_t k, float ready, double now);
  // The pending copy k's ready time is now known.
  void Settle(size_t k, float ready);
  // Every copy is complete by `now`: drops the ready times left.
  void SettleAll() {
    unsettled_.clear();
    unsettled_.shrink_to_fit();
    for (uint64_t& w : state_) w &= 0x5555555555555555ULL;  // only the started bits
  }

  // The fill order, class by class: class j's entries are
  // [class_begin(j), class_begin(j + 1)), those from copy_begin(j) on are
  // copied from peers' storage.
  uint32_t FillSample(size_t position) const { return fill_[position]; }
  uint32_t class_begin(size_t j) const { return class_begin_[j]; }
  uint32_t copy_begin(size_t j) const { return copy_begin_[j]; }
  size_t classes() const { return copy_begin_.size(); }  // entries of class_begin: classes() + 1

 private:
  friend NodeCache BuildCache(const NodePlan& plan, SimMemory* memory);
  SampleSet set_;
  SimVector<uint8_t> cls_;  // by index; empty when every copy is in single_class_
  uint8_t single_class_ = 0;
  // Two bits per copy, side by side (one cache line for both): bit 2k,
  // copy k's fill started; bit 2k + 1, copy k is in unsettled_ (Ready
  // scans that list only then).
  SimVector<uint64_t> state_;
  std::vector<std::pair<uint32_t, float>> unsettled_;  // started copies whose ready time may be ahead
  size_t purge_at_ = 16;
  SimVector<uint32_t> fill_;
  std::vector<uint32_t> class_begin_;
  std::vector<uint32_t> copy_begin_;
};

// The node's cache, its arrays in `memory` (null: operator new).
NodeCache BuildCache(const NodePlan& plan, SimMemory* memory = nullptr);

}  // namespace hdmlp::sim

#endif  // HDMLP_SIM_NODE_CACHE_H_
