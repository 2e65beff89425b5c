// Crc32c: the standard's test vectors (RFC 3720, B.4), the hardware and the
// table paths agreeing on every length and alignment, and continuation.
#include "hdmlp/util/crc32c.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hdmlp/util/random.h"

namespace hdmlp {
namespace {

TEST(Crc32cTest, StandardVectors) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  const std::vector<uint8_t> zeros(32, 0), ones(32, 0xff);
  std::vector<uint8_t> up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
    down[static_cast<size_t>(i)] = static_cast<uint8_t>(31 - i);
  }
  for (auto f : {&Crc32c, &Crc32cPortable}) {
    EXPECT_EQ(f(zeros.data(), 32, 0), 0x8A9136AAu);
    EXPECT_EQ(f(ones.data(), 32, 0), 0x62A8AB43u);
    EXPECT_EQ(f(up.data(), 32, 0), 0x46DD794Eu);
    EXPECT_EQ(f(down.data(), 32, 0), 0x113FDB5Cu);
    EXPECT_EQ(f(nullptr, 0, 0), 0u);
  }
}

TEST(Crc32cTest, PathsAgreeOnEveryLengthAndAlignmentAndContinue) {
  Rng rng(7);
  std::vector<uint8_t> data(4096 + 16);
  for (auto& b : data) b = static_cast<uint8_t>(rng.Uniform(256));
  for (size_t offset = 0; offset < 9; ++offset) {
    for (size_t n : {0u, 1u, 7u, 8u, 9u, 15u, 63u, 64u, 65u, 1000u, 4096u}) {
      const uint32_t whole = Crc32c(data.data() + offset, n);
      EXPECT_EQ(whole, Crc32cPortable(data.data() + offset, n)) << offset << " " << n;
      for (size_t cut : {size_t{0}, n / 3, n}) {
        EXPECT_EQ(Crc32c(data.data() + offset + cut, n - cut, Crc32c(data.data() + offset, cut)), whole);
      }
    }
  }
}

TEST(Crc32cTest, TFRecordMask) {
  // TensorFlow's own masked CRC of an 8-byte length of 0 (an empty record's header).
  const uint8_t zero[8] = {};
  const uint32_t crc = Crc32c(zero, 8);
  EXPECT_EQ(MaskCrc32c(crc), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
  EXPECT_NE(MaskCrc32c(crc), crc);
}

}  // namespace
}  // namespace hdmlp
