// Crc32: zlib's CRC-32 of a byte range of any length, as zip members and
// hdmlp's pack files store it. (TFRecord's CRC-32C is util/crc32c.h.)
//
// Thread-safety: reentrant.
#ifndef HDMLP_UTIL_CRC32_H_
#define HDMLP_UTIL_CRC32_H_

#include <cstdint>

namespace hdmlp {

uint32_t Crc32(const uint8_t* data, int64_t n);

}  // namespace hdmlp

#endif  // HDMLP_UTIL_CRC32_H_
