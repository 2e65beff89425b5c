// How the kernel backs large blocks of this process's memory.
//
// AdviseHugePages: asks the kernel to back a large block of this process's
// memory with transparent huge pages (2 MiB on x86-64 and most aarch64
// kernels) where it may, before the block is first touched.
//
// Why: the batch buffers (staging/batch_pool.h) are tens of MB, written by
// the workers and read by the training loop over and over. In 4 KiB pages
// both miss the TLB every 4 KiB; with huge pages the training chain ran
// 3-4% faster in steady epochs on 3-4% less CPU. Linux's default
// ("madvise") gives huge pages only to memory that asks. Not for memory
// touched once (a RAM class's arena, filled in the first epoch): clearing
// and compacting 2 MiB pages on its first touch slowed the first epoch by
// a tenth and gained the later ones nothing more (benchmarks/README.md).
//
// A hint only: where the kernel has no transparent huge pages, or refuses,
// nothing changes. Blocks under 4 MiB are left alone (a huge page there would
// mostly hold other allocations' memory).
//
// PrefaultForWrite: commits the whole pages inside a block in one call
// (Linux 5.14's MADV_POPULATE_WRITE) instead of one page fault per 4 KiB as
// it is first written. Why: a RAM class fills its arena once, in the first
// epoch, while the workers decode; faulting it in by stretches took about a
// tenth off the first epoch's extra CPU (benchmarks/README.md). Returns false where the
// kernel cannot (older kernels, other systems): the pages then fault in as
// they are written, as before.
//
// Both thread-safe.
#ifndef HDMLP_UTIL_HUGE_PAGES_H_
#define HDMLP_UTIL_HUGE_PAGES_H_

#include <cstddef>
#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace hdmlp {

inline void AdviseHugePages(void* memory, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr size_t kHugePage = size_t{2} << 20;
  if (memory == nullptr || bytes < 2 * kHugePage) return;
  // The whole huge pages inside the block: madvise wants a page-aligned start,
  // and a huge page reaching outside the block would back other memory too.
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(memory) + kHugePage - 1) / kHugePage * kHugePage;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(memory) + bytes) / kHugePage * kHugePage;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)memory;
  (void)bytes;
#endif
}

inline bool PrefaultForWrite(void* memory, size_t bytes) {
#if defined(__linux__)
  constexpr int kPopulateWrite = 23;  // MADV_POPULATE_WRITE: Linux ABI, absent from older C headers
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(memory) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(memory) + bytes) / page * page;
  return end > begin && madvise(reinterpret_cast<void*>(begin), end - begin, kPopulateWrite) == 0;
#else
  (void)memory;
  (void)bytes;
  return false;
#endif
}

}  // namespace hdmlp

#endif  // HDMLP_UTIL_HUGE_PAGES_H_
