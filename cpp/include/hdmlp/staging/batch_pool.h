// BatchPool: the memory of transformed batches, handed to Python without a
// copy and reused only once Python has let go of it.
//
// Acquire() returns one buffer of `buffer_bytes` as a shared_ptr. The staging
// workers write their samples into it, the consumer hands it to Python, and
// the Python object exporting it (buffer protocol) holds the last reference.
// When the last reference drops, the buffer goes back to the pool's free
// list (at most `keep_free` buffers are kept; the rest are freed), so a
// buffer is never written again while any tensor still views it. Buffers
// outlive the pool itself: a buffer let go after the pool is gone is freed
// then.
//
// Memory comes from a HostAllocator: aligned host memory by default, or a
// page-locked one (cudaHostAlloc / cudaFreeHost found by the caller in the
// CUDA runtime torch has loaded; the core never links CUDA). Buffers are
// 64-byte aligned with the default allocator and at least 4-byte aligned
// with any allocator, as float32 samples require. An allocator whose free
// stalls others (cudaFreeHost waits for the whole device, on whichever
// thread drops a batch: often the training loop's) is never called to free
// while the pool lives: the pool keeps every buffer it made until it is
// destroyed, which is at most what the workers had filled at once.
//
// Thread-safety: Acquire and the release of buffers may happen on any
// threads concurrently.
#ifndef HDMLP_STAGING_BATCH_POOL_H_
#define HDMLP_STAGING_BATCH_POOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace hdmlp {

// Raw host memory, for the pool. Both functions are called from any thread.
struct HostAllocator {
  // Returns nullptr on failure.
  void* (*allocate)(size_t bytes, void* context) = nullptr;
  void (*free)(void* memory, void* context) = nullptr;
  void* context = nullptr;
  const char* name = "host";
  // Freeing waits for other work (cudaFreeHost synchronises the device): the
  // pool then keeps all its buffers while it lives, whatever keep_free says.
  bool free_waits = false;

  static HostAllocator Default();
  // Page-locked memory through the CUDA runtime's cudaHostAlloc/cudaFreeHost,
  // given as addresses (the caller looked them up; see hdmlp/torch.py).
  static HostAllocator CudaPinned(uintptr_t cuda_host_alloc, uintptr_t cuda_free_host);
};

class BatchPool {
 public:
  BatchPool(int64_t buffer_bytes, int keep_free, HostAllocator allocator = HostAllocator::Default());
  // Frees the buffers that are free now; those still held are freed when let go.
  ~BatchPool();
  BatchPool(const BatchPool&) = delete;
  BatchPool& operator=(const BatchPool&) = delete;

  // A buffer of buffer_bytes (uninitialised). Throws std::bad_alloc when the
  // allocator fails.
  std::shared_ptr<uint8_t> Acquire();

  int64_t buffer_bytes() const { return buffer_bytes_; }
  // Buffers allocated so far (not reused ones), for tests of reuse.
  int64_t allocations() const;

 private:
  struct Shared;
  int64_t buffer_bytes_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace hdmlp

#endif  // HDMLP_STAGING_BATCH_POOL_H_
