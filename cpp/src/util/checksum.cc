#include "hdmlp/util/checksum.h"

#include <xxhash.h>
#if defined(__x86_64__)
// The library picks the widest vector unit the CPU has (AVX2, AVX-512) at
// run time; the plain entry point is built for SSE2 only, several times
// slower. Both give the same hash.
#include <xxh_x86dispatch.h>
#endif

namespace hdmlp {

uint64_t Checksum64(const void* data, size_t size) {
#if defined(__x86_64__)
  return XXH3_64bits_dispatch(data, size);
#else
  return XXH3_64bits(data, size);
#endif
}

}  // namespace hdmlp
