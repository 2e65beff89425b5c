// Portable pseudo-random numbers for hdmlp.
//
// Everything random in hdmlp (epoch orders, rank assignments, augmentation
// parameters, generated datasets) is derived from these functions, so a seed
// gives the same result on every compiler, standard library and platform.
// The C++ <random> engines are portable but their distributions are not, so
// hdmlp never uses std::*_distribution.
//
//   Mix64       SplitMix64's finaliser (Steele, Lea, Flood 2014): a bijective
//               64-bit hash with full avalanche; used to derive keys.
//   DeriveKey   folds several 64-bit words into one key with Mix64.
//   HashBytes   FNV-1a finished with Mix64: the key of a byte string (the
//               index caches' file names and checksums).
//   Rng         xoshiro256** (Blackman, Vigna 2018) seeded through SplitMix64,
//               with unbiased bounded integers (Lemire 2019) and 53-bit doubles.
//
// Thread-safety: the free functions are pure; an Rng object is not shared
// between threads (make one per (seed, purpose) instead).
#ifndef HDMLP_UTIL_RANDOM_H_
#define HDMLP_UTIL_RANDOM_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace hdmlp {

inline constexpr uint64_t Mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Order matters: DeriveKey({a, b}) != DeriveKey({b, a}).
inline uint64_t DeriveKey(const uint64_t* words, size_t count) {
  uint64_t key = 0x6a09e667f3bcc909ULL;  // sqrt(2) fraction bits: arbitrary.
  for (size_t i = 0; i < count; ++i) key = Mix64(key ^ Mix64(words[i]));
  return key;
}
inline uint64_t DeriveKey(std::initializer_list<uint64_t> words) { return DeriveKey(words.begin(), words.size()); }

inline uint64_t HashBytes(const char* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(p[i])) * 0x100000001b3ULL;
  return Mix64(h);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t x = seed;
    for (auto& word : s_) {
      x += 0x9e3779b97f4a7c15ULL;
      word = Mix64(x - 0x9e3779b97f4a7c15ULL);
    }
  }

  uint64_t NextU64() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform integer in [0, bound); bound > 0. Lemire's multiply-and-reject,
  // so no modulo bias.
  uint64_t Uniform(uint64_t bound) {
    __uint128_t m = static_cast<__uint128_t>(NextU64()) * bound;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < bound) {
      const uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        m = static_cast<__uint128_t>(NextU64()) * bound;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

  // Uniform integer in [lo, hi], inclusive.
  int64_t UniformInt(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(Uniform(static_cast<uint64_t>(hi - lo) + 1));
  }

  // Uniform double in [0, 1) with 53 random bits.
  double UniformDouble() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }

  // Uniform double in [lo, hi).
  double UniformDouble(double lo, double hi) { return lo + (hi - lo) * UniformDouble(); }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace hdmlp

#endif  // HDMLP_UTIL_RANDOM_H_
