// Checksum64: a fast 64-bit checksum of a byte range (XXH3 from the
// xxHash library, ~20 GB/s per core), for bytes that leave hdmlp's memory
// and come back (the files of a filesystem storage class): a changed byte
// changes it with probability 1 - 2^-64. Not a cryptographic hash. On
// x86-64 the library dispatches to AVX2 or AVX-512 at run time.
//
// Thread-safety: reentrant.
#ifndef HDMLP_UTIL_CHECKSUM_H_
#define HDMLP_UTIL_CHECKSUM_H_

#include <cstddef>
#include <cstdint>

namespace hdmlp {

uint64_t Checksum64(const void* data, size_t size);

}  // namespace hdmlp

#endif  // HDMLP_UTIL_CHECKSUM_H_
