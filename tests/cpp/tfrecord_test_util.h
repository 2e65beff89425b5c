// Writers of TFRecord records and tf.train.Example messages for the C++
// tests (tfrecord_source_test.cc, tf_example_test.cc).
#ifndef HDMLP_TESTS_CPP_TFRECORD_TEST_UTIL_H_
#define HDMLP_TESTS_CPP_TFRECORD_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hdmlp/util/crc32c.h"

namespace hdmlp::testing {

inline std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}

inline std::string LengthField(int number, const std::string& payload) {
  return Varint(static_cast<uint64_t>(number) << 3 | 2) + Varint(payload.size()) + payload;
}

// A Feature: bytes_list of `bytes`, or int64_list of `ints` (packed or not).
inline std::string BytesFeature(const std::vector<std::string>& bytes) {
  std::string list;
  for (const auto& b : bytes) list += LengthField(1, b);
  return LengthField(1, list);
}
inline std::string Int64Feature(const std::vector<int64_t>& ints, bool packed = true) {
  std::string list;
  if (packed) {
    std::string values;
    for (int64_t v : ints) values += Varint(static_cast<uint64_t>(v));
    list = LengthField(1, values);
  } else {
    for (int64_t v : ints) list += Varint(1 << 3 | 0) + Varint(static_cast<uint64_t>(v));
  }
  return LengthField(3, list);
}

// An Example of (name, serialized Feature) entries.
inline std::string Example(const std::vector<std::pair<std::string, std::string>>& features) {
  std::string entries;
  for (const auto& [name, feature] : features) entries += LengthField(1, LengthField(1, name) + LengthField(2, feature));
  return LengthField(1, entries);
}

inline std::string Fixed32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }

inline std::string TFRecord(const std::string& payload) {
  const uint64_t n = payload.size();
  const std::string length(reinterpret_cast<const char*>(&n), 8);
  return length + Fixed32(MaskCrc32c(Crc32c(length.data(), 8))) + payload +
         Fixed32(MaskCrc32c(Crc32c(payload.data(), payload.size())));
}

}  // namespace hdmlp::testing

#endif  // HDMLP_TESTS_CPP_TFRECORD_TEST_UTIL_H_
