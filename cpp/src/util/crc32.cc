#include "hdmlp/util/crc32.h"

#include <zlib.h>

#include <algorithm>

namespace hdmlp {

uint32_t Crc32(const uint8_t* data, int64_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {  // zlib takes at most a uInt per call
    const auto chunk = static_cast<uInt>(std::min<int64_t>(n, 1 << 30));
    crc = crc32(crc, data, chunk);
    data += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace hdmlp
