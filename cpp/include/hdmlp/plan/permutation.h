// IndexPermutation: a random permutation of [0, n) evaluated at any position.
//
// Shuffling a vector costs O(n) time and memory on every rank for every
// epoch. IndexPermutation instead encrypts the position with a keyed Feistel
// network over mixed radices (Black & Rogaway 2002, "FE2"): a position is a
// pair (l, r) in [0, a) x [0, b), a = ceil(sqrt(n)), b = ceil(n / a); a
// round maps it to (r, (l + F(r)) mod a) and the next round does the same
// with the radices swapped, so every round is a bijection whatever F is.
// The domain a*b exceeds n by less than a, so "cycle walking" (encrypting
// again until the value falls below n) almost never walks, and At(i) costs
// O(1): a rank evaluates only the positions it reads.
//
// kRounds (even) rounds; F is Mix64 (random.h) of the half-block XOR a round
// key derived from the permutation key, scaled into the radix by a 128-bit
// multiply. The result depends only on (n, key): the same on every compiler
// and platform.
//
// Identity(n) is the permutation that keeps every position (an unshuffled
// order, Job's shuffle=False) behind the same interface.
//
// Thread-safety: immutable after construction; At() may be called from any
// number of threads.
#ifndef HDMLP_PLAN_PERMUTATION_H_
#define HDMLP_PLAN_PERMUTATION_H_

#include <cstdint>

namespace hdmlp {

class IndexPermutation {
 public:
  static constexpr int kRounds = 6;

  IndexPermutation(uint64_t n, uint64_t key);
  static IndexPermutation Identity(uint64_t n);

  uint64_t size() const { return n_; }
  // The element at position i (i < size()).
  uint64_t At(uint64_t i) const;
  // The position of element x (x < size()): At(Inverse(x)) == x.
  uint64_t Inverse(uint64_t x) const;

 private:
  uint64_t Encrypt(uint64_t x) const;
  uint64_t Decrypt(uint64_t x) const;

  uint64_t n_;
  bool identity_ = false;
  uint64_t a_ = 1;  // radix of the left half (l)
  uint64_t b_ = 1;  // radix of the right half (r)
  uint64_t round_keys_[kRounds];
};

}  // namespace hdmlp

#endif  // HDMLP_PLAN_PERMUTATION_H_
