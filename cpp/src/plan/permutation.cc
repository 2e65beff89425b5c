#include "hdmlp/plan/permutation.h"

#include <cmath>

#include "hdmlp/util/random.h"

namespace hdmlp {
namespace {

// F(half) in [0, radix): Lemire's multiply-shift instead of a modulo.
inline uint64_t RoundValue(uint64_t half, uint64_t key, uint64_t radix) {
  return static_cast<uint64_t>((static_cast<__uint128_t>(Mix64(half ^ key)) * radix) >> 64);
}

}  // namespace

IndexPermutation::IndexPermutation(uint64_t n, uint64_t key) : n_(n) {
  if (n > 1) {
    a_ = static_cast<uint64_t>(std::sqrt(static_cast<double>(n)));
    while (a_ * a_ < n) ++a_;
    while (a_ > 1 && (a_ - 1) * (a_ - 1) >= n) --a_;
    b_ = (n + a_ - 1) / a_;
  }
  for (int r = 0; r < kRounds; ++r) round_keys_[r] = DeriveKey({key, static_cast<uint64_t>(r), 0x7065726dULL});
}

IndexPermutation IndexPermutation::Identity(uint64_t n) {
  IndexPermutation p(n, 0);
  p.identity_ = true;
  return p;
}

uint64_t IndexPermutation::Encrypt(uint64_t x) const {
  // (l, r) in [0, a) x [0, b); the radices swap every round and are back in
  // place after an even number of rounds.
  uint64_t l = x / b_, r = x % b_;
  uint64_t ml = a_, mr = b_;
  for (int k = 0; k < kRounds; ++k) {
    uint64_t w = l + RoundValue(r, round_keys_[k], ml);
    if (w >= ml) w -= ml;
    l = r;
    r = w;
    const uint64_t t = ml;
    ml = mr;
    mr = t;
  }
  return l * b_ + r;
}

uint64_t IndexPermutation::Decrypt(uint64_t x) const {
  uint64_t l = x / b_, r = x % b_;
  uint64_t ml = a_, mr = b_;  // kRounds is even: the last round ended in (a, b)
  for (int k = kRounds - 1; k >= 0; --k) {
    // Undo (l, r) = (r_prev, (l_prev + F(r_prev)) mod m), m the radix of l_prev.
    const uint64_t t = ml;
    ml = mr;
    mr = t;
    const uint64_t r_prev = l;
    const uint64_t f = RoundValue(r_prev, round_keys_[k], ml);
    const uint64_t l_prev = r >= f ? r - f : r + ml - f;
    l = l_prev;
    r = r_prev;
  }
  return l * b_ + r;
}

uint64_t IndexPermutation::Inverse(uint64_t x) const {
  if (identity_) return x;
  if (n_ <= 1) return 0;
  // Cycle walking backwards: the inverse walk leaves [0, n) exactly where the
  // forward one entered it.
  uint64_t i = Decrypt(x);
  while (i >= n_) i = Decrypt(i);
  return i;
}

uint64_t IndexPermutation::At(uint64_t i) const {
  if (identity_) return i;
  if (n_ <= 1) return 0;
  uint64_t x = Encrypt(i);
  while (x >= n_) x = Encrypt(x);
  return x;
}

}  // namespace hdmlp
