#include "hdmlp/plan/permutation.h"

#include "hdmlp/plan/random.h"

namespace hdmlp {

IndexPermutation::IndexPermutation(uint64_t n, uint64_t key) : n_(n) {
  // At least two bits, so both halves are non-empty and even n = 2 is shuffled.
  bits_ = 2;
  while (bits_ < 64 && (uint64_t{1} << bits_) < n) ++bits_;
  low_bits_[0] = bits_ / 2;
  low_bits_[1] = bits_ - bits_ / 2;
  for (int r = 0; r < kRounds; ++r) round_keys_[r] = DeriveKey({key, static_cast<uint64_t>(r), 0x7065726dULL});
}

uint64_t IndexPermutation::Encrypt(uint64_t x) const {
  // One round: split x into high h and low l; output (l, h ^ F(l)) with the
  // roles of the widths swapped, which is invertible whatever F is.
  for (int r = 0; r < kRounds; ++r) {
    const int low = low_bits_[r & 1];
    const int high = bits_ - low;
    const uint64_t low_mask = (uint64_t{1} << low) - 1;
    const uint64_t high_mask = (uint64_t{1} << high) - 1;
    const uint64_t h = x >> low;
    const uint64_t l = x & low_mask;
    x = (l << high) | ((h ^ Mix64(l ^ round_keys_[r])) & high_mask);
  }
  return x;
}

uint64_t IndexPermutation::Decrypt(uint64_t x) const {
  for (int r = kRounds - 1; r >= 0; --r) {
    const int low = low_bits_[r & 1];
    const int high = bits_ - low;
    const uint64_t high_mask = (uint64_t{1} << high) - 1;
    const uint64_t l = x >> high;
    const uint64_t h = (x ^ Mix64(l ^ round_keys_[r])) & high_mask;
    x = (h << low) | l;
  }
  return x;
}

uint64_t IndexPermutation::Inverse(uint64_t x) const {
  if (n_ <= 1) return 0;
  // Cycle walking backwards: the inverse walk leaves [0, n) exactly where the
  // forward one entered it.
  uint64_t i = Decrypt(x);
  while (i >= n_) i = Decrypt(i);
  return i;
}

uint64_t IndexPermutation::At(uint64_t i) const {
  if (n_ <= 1) return 0;
  uint64_t x = Encrypt(i);
  while (x >= n_) x = Encrypt(x);
  return x;
}

}  // namespace hdmlp
