// IndexPermutation: a random permutation of [0, n) evaluated at any position.
//
// Shuffling a vector costs O(n) time and memory on every rank for every
// epoch. IndexPermutation instead encrypts the position: a keyed Feistel
// network is a bijection on [0, 2^k), and "cycle walking" (re-encrypting
// until the value falls below n) restricts it to a bijection on [0, n)
// (Black & Rogaway 2002). So At(i) costs O(1) expected (fewer than two
// walks, since 2^k < 2n), and a rank evaluates only the positions it reads.
//
// The network is unbalanced where k is odd, has kRounds rounds, and its
// round function is Mix64 (random.h) of the half-block XOR a round key
// derived from the permutation key. The result depends only on (n, key):
// the same on every compiler and platform.
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

  uint64_t size() const { return n_; }
  // The element at position i (i < size()).
  uint64_t At(uint64_t i) const;
  // The position of element x (x < size()): At(Inverse(x)) == x.
  uint64_t Inverse(uint64_t x) const;

 private:
  uint64_t Encrypt(uint64_t x) const;
  uint64_t Decrypt(uint64_t x) const;

  uint64_t n_;
  int bits_ = 0;
  int low_bits_[2] = {0, 0};
  uint64_t round_keys_[kRounds];
};

}  // namespace hdmlp

#endif  // HDMLP_PLAN_PERMUTATION_H_
