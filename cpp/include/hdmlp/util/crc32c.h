// Crc32c: the CRC-32C (Castagnoli) checksum, and TFRecord's "masked" form.
//
// TFRecord files guard each record's length and payload with a masked
// CRC-32C (tfrecord_source.h); ext4, iSCSI and LevelDB use the same
// polynomial. On x86-64 with SSE 4.2 (chosen at run time) the CPU's crc32
// instruction does the work, about 20 GB/s per core; elsewhere a table, eight
// bytes a step. Both give identical results (tests/cpp/crc32c_test.cc checks
// the standard's test vectors).
//
// Thread-safety: reentrant.
#ifndef HDMLP_UTIL_CRC32C_H_
#define HDMLP_UTIL_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace hdmlp {

// CRC-32C of data[0, n), continuing from `crc` (the value of the bytes
// before; 0 for none).
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);

// TFRecord's mask: a CRC of bytes that themselves contain CRCs is weak, so
// the stored value is rotated right by 15 bits plus a constant.
inline uint32_t MaskCrc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

// The table path alone (for tests that compare it with the hardware one).
uint32_t Crc32cPortable(const void* data, size_t n, uint32_t crc = 0);

}  // namespace hdmlp

#endif  // HDMLP_UTIL_CRC32C_H_
