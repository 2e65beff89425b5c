#include "hdmlp/util/crc32c.h"

#include <array>
#include <cstring>

namespace hdmlp {
namespace {

constexpr uint32_t kPolynomial = 0x82f63b78u;  // Castagnoli, bit-reversed

// tables[k][b]: the CRC of byte b followed by k zero bytes (slicing by 8).
struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  Tables() {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1u) ? kPolynomial : 0u);
      t[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; ++b) {
      for (int k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xffu];
    }
  }
};

const Tables& GetTables() {
  static const Tables tables;
  return tables;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2"))) uint32_t Crc32cHardware(const uint8_t* p, size_t n, uint32_t crc) {
  uint64_t c = ~crc;
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7u) != 0) {
    c = __builtin_ia32_crc32qi(static_cast<uint32_t>(c), *p++);
    --n;
  }
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = __builtin_ia32_crc32di(c, word);
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c = __builtin_ia32_crc32qi(static_cast<uint32_t>(c), *p++);
    --n;
  }
  return ~static_cast<uint32_t>(c);
}

bool HaveHardware() {
  static const bool have = __builtin_cpu_supports("sse4.2");
  return have;
}
#endif

}  // namespace

uint32_t Crc32cPortable(const void* data, size_t n, uint32_t crc) {
  const auto& t = GetTables().t;
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  while (n >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    lo = __builtin_bswap32(lo);
    hi = __builtin_bswap32(hi);
#endif
    lo ^= c;
    c = t[7][lo & 0xffu] ^ t[6][(lo >> 8) & 0xffu] ^ t[5][(lo >> 16) & 0xffu] ^ t[4][lo >> 24] ^
        t[3][hi & 0xffu] ^ t[2][(hi >> 8) & 0xffu] ^ t[1][(hi >> 16) & 0xffu] ^ t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xffu];
  return ~c;
}

uint32_t Crc32c(const void* data, size_t n, uint32_t crc) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (HaveHardware()) return Crc32cHardware(static_cast<const uint8_t*>(data), n, crc);
#endif
  return Crc32cPortable(data, n, crc);
}

}  // namespace hdmlp
