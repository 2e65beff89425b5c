#include "hdmlp/sim/node_cache.h"

#include <algorithm>
#include <cmath>

namespace hdmlp::sim {
namespace {

// Sorts (sample, class) pairs by sample, a node's samples being distinct: an
// LSD radix sort in 11-bit digits, a few times faster than a comparison
// sort for the 10^5 copies of a node of a large job.
void SortBySample(std::vector<std::pair<uint32_t, uint32_t>>& order) {
  if (order.size() < 256) {
    std::sort(order.begin(), order.end());
    return;
  }
  uint32_t largest = 0;
  for (const auto& p : order) largest = std::max(largest, p.first);
  std::vector<std::pair<uint32_t, uint32_t>> buffer(order.size());
  constexpr int kBits = 11;
  constexpr uint32_t kMask = (1u << kBits) - 1;
  for (int shift = 0; shift < 32 && (largest >> shift) != 0; shift += kBits) {
    uint32_t count[kMask + 2] = {};
    for (const auto& p : order) ++count[((p.first >> shift) & kMask) + 1];
    for (uint32_t d = 1; d <= kMask + 1; ++d) count[d] += count[d - 1];
    for (const auto& p : order) buffer[count[(p.first >> shift) & kMask]++] = p;
    order.swap(buffer);
  }
}

}  // namespace

float RoundUpReady(double t) {
  float f = static_cast<float>(t);
  if (static_cast<double>(f) < t) f = std::nextafter(f, kNotStarted);
  return f;
}

SampleSet::SampleSet(const std::vector<uint32_t>& sorted, SimMemory* memory)
    : size_(sorted.size()), bits_(SimAllocator<uint64_t>(memory)), rank_(SimAllocator<uint64_t>(memory)),
      sorted_(SimAllocator<uint32_t>(memory)) {
  if (sorted.empty()) return;
  const uint64_t span = uint64_t{sorted.back()} + 1;
  // Bitmap: span bits plus a 64-bit count per 256; array: 32 bits per member.
  if (span + span / 4 < 32 * uint64_t{sorted.size()}) {
    bits_.assign(static_cast<size_t>((span + 255) / 256 * 4), 0);
    for (uint32_t s : sorted) bits_[s >> 6] |= uint64_t{1} << (s & 63);
    rank_.resize(bits_.size() / 4);
    uint32_t below = 0;
    for (size_t b = 0; b < rank_.size(); ++b) {
      uint64_t entry = below;
      uint64_t in_block = 0;  // at most 192 before the block's last word: a byte
      for (size_t k = 0; k < 4; ++k) {
        if (k > 0) entry |= in_block << (24 + 8 * k);
        in_block += static_cast<uint64_t>(Popcount(bits_[4 * b + k]));
      }
      rank_[b] = entry;
      below += static_cast<uint32_t>(in_block);
    }
    return;
  }
  sorted_.assign(sorted.begin(), sorted.end());
  density_ = static_cast<double>(sorted_.size()) / static_cast<double>(span);
}

int64_t SampleSet::FindInArray(int64_t sample) const {
  if (size_ == 0 || sample < 0) return -1;
  // The ids are a random subset of [0, F), so the interpolated position is
  // within about sqrt(n) of the right one: gallop from there, then search
  // the bracket. A few cache misses instead of a binary search's log2(n).
  const size_t n = sorted_.size();
  if (sample > static_cast<int64_t>(sorted_.back())) return -1;
  const auto s = static_cast<uint32_t>(sample);
  const size_t guess = std::min(n - 1, static_cast<size_t>(static_cast<double>(s) * density_));
  size_t lo = 0, hi = n;  // sorted_[lo, hi) holds s if anything does
  if (sorted_[guess] == s) return static_cast<int64_t>(guess);
  if (sorted_[guess] < s) {
    size_t step = 1;
    lo = guess + 1;
    hi = std::min(n, lo + step);
    while (hi < n && sorted_[hi - 1] < s) {
      lo = hi;
      step *= 2;
      hi = std::min(n, lo + step);
    }
  } else {
    size_t step = 1;
    hi = guess;
    lo = hi >= step ? hi - step : 0;
    while (lo > 0 && sorted_[lo] > s) {
      hi = lo;
      step *= 2;
      lo = hi >= step ? hi - step : 0;
    }
  }
  auto it = std::lower_bound(sorted_.begin() + static_cast<std::ptrdiff_t>(lo),
                             sorted_.begin() + static_cast<std::ptrdiff_t>(hi), s);
  if (it == sorted_.begin() + static_cast<std::ptrdiff_t>(hi) || *it != s) return -1;
  return it - sorted_.begin();
}

void NodeCache::Start(size_t k, float ready, double now) {
  state_[k >> 5] |= uint64_t{3} << (2 * (k & 31));  // started, listed
  if (unsettled_.size() >= purge_at_) {
    // Copies complete by now are complete for every later caller.
    unsettled_.erase(std::remove_if(unsettled_.begin(), unsettled_.end(),
                                    [&](const std::pair<uint32_t, float>& e) {
                                      if (e.second > now) return false;
                                      state_[e.first >> 5] &= ~(uint64_t{2} << (2 * (e.first & 31)));
                                      return true;
                                    }),
                     unsettled_.end());
    purge_at_ = std::max<size_t>(16, 2 * unsettled_.size());
  }
  unsettled_.emplace_back(static_cast<uint32_t>(k), ready);
}

void NodeCache::Settle(size_t k, float ready) {
  for (auto& e : unsettled_)
    if (e.first == k) e.second = ready;
}

NodeCache BuildCache(const NodePlan& plan, SimMemory* memory) {
  const auto& class_lists = plan.class_lists;
  NodeCache c;
  c.cls_ = SimVector<uint8_t>(SimAllocator<uint8_t>(memory));
  c.state_ = SimVector<uint64_t>(SimAllocator<uint64_t>(memory));
  c.fill_ = SimVector<uint32_t>(SimAllocator<uint32_t>(memory));
  c.class_begin_.push_back(0);
  for (const auto& list : class_lists)
    c.class_begin_.push_back(c.class_begin_.back() + static_cast<uint32_t>(list.size()));
  std::vector<std::pair<uint32_t, uint32_t>> order;  // (sample, class)
  order.reserve(c.class_begin_.back());
  c.fill_.reserve(c.class_begin_.back());
  for (size_t j = 0; j < class_lists.size(); ++j) {
    for (int64_t s : class_lists[j]) {
      order.emplace_back(static_cast<uint32_t>(s), static_cast<uint32_t>(j));
      c.fill_.push_back(static_cast<uint32_t>(s));
    }
  }
  SortBySample(order);
  std::vector<uint32_t> sorted(order.size());
  bool one_class = true;
  for (size_t k = 0; k < order.size(); ++k) {
    sorted[k] = order[k].first;
    one_class &= order[k].second == order[0].second;
  }
  c.set_ = SampleSet(sorted, memory);
  if (one_class) {
    c.single_class_ = order.empty() ? 0 : static_cast<uint8_t>(order[0].second);
  } else {
    c.cls_.resize(order.size());
    for (size_t k = 0; k < order.size(); ++k) c.cls_[k] = static_cast<uint8_t>(order[k].second);
  }
  c.state_.assign((order.size() + 31) / 32, 0);
  c.copy_begin_.assign(class_lists.size(), 0);
  for (size_t j = 0; j < class_lists.size(); ++j)
    c.copy_begin_[j] = c.class_begin_[j + 1] - static_cast<uint32_t>(j < plan.copies.size() ? plan.copies[j] : 0);
  return c;
}

}  // namespace hdmlp::sim
