#include "hdmlp/staging/batch_pool.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <new>

#include "hdmlp/util/huge_pages.h"

namespace hdmlp {
namespace {

void* AlignedAllocate(size_t bytes, void*) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;  // aligned_alloc wants a multiple
  void* memory = std::aligned_alloc(64, rounded);
  AdviseHugePages(memory, rounded);
  return memory;
}
void AlignedFree(void* memory, void*) { std::free(memory); }

struct CudaFunctions {
  int (*host_alloc)(void** memory, size_t bytes, unsigned int flags);
  int (*free_host)(void* memory);
};

void* CudaAllocate(size_t bytes, void* context) {
  auto* cuda = static_cast<CudaFunctions*>(context);
  void* memory = nullptr;
  if (cuda->host_alloc(&memory, std::max<size_t>(bytes, 1), /*cudaHostAllocDefault=*/0) != 0) return nullptr;
  return memory;
}
void CudaFree(void* memory, void* context) { static_cast<CudaFunctions*>(context)->free_host(memory); }

}  // namespace

HostAllocator HostAllocator::Default() { return HostAllocator{&AlignedAllocate, &AlignedFree, nullptr, "host"}; }

HostAllocator HostAllocator::CudaPinned(uintptr_t cuda_host_alloc, uintptr_t cuda_free_host) {
  // Lives for the process: buffers may be freed after every job is gone.
  auto* cuda = new CudaFunctions{reinterpret_cast<int (*)(void**, size_t, unsigned int)>(cuda_host_alloc),
                                 reinterpret_cast<int (*)(void*)>(cuda_free_host)};
  return HostAllocator{&CudaAllocate, &CudaFree, cuda, "cuda-pinned", /*free_waits=*/true};
}

struct BatchPool::Shared {
  HostAllocator allocator;
  int keep_free = 0;
  bool pool_gone = false;  // buffers that come back later are freed at once
  std::mutex mu;
  std::vector<uint8_t*> free_list;
  int64_t allocations = 0;  // the free list is emptied by ~BatchPool, which always comes first
};

BatchPool::BatchPool(int64_t buffer_bytes, int keep_free, HostAllocator allocator)
    : buffer_bytes_(buffer_bytes), shared_(std::make_shared<Shared>()) {
  shared_->allocator = allocator;
  shared_->keep_free = allocator.free_waits ? INT_MAX : keep_free;
}

BatchPool::~BatchPool() {
  std::vector<uint8_t*> free_list;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->pool_gone = true;
    free_list.swap(shared_->free_list);
  }
  for (uint8_t* memory : free_list) shared_->allocator.free(memory, shared_->allocator.context);
}

std::shared_ptr<uint8_t> BatchPool::Acquire() {
  uint8_t* memory = nullptr;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (!shared_->free_list.empty()) {
      memory = shared_->free_list.back();
      shared_->free_list.pop_back();
    }
  }
  if (memory == nullptr) {
    memory = static_cast<uint8_t*>(shared_->allocator.allocate(static_cast<size_t>(buffer_bytes_),
                                                               shared_->allocator.context));
    if (memory == nullptr) throw std::bad_alloc();
    std::lock_guard<std::mutex> lock(shared_->mu);
    ++shared_->allocations;
  }
  // The deleter keeps the free list alive: a buffer may come back after the
  // pool (and its job) are gone.
  std::shared_ptr<Shared> shared = shared_;
  return std::shared_ptr<uint8_t>(memory, [shared](uint8_t* released) {
    {
      std::lock_guard<std::mutex> lock(shared->mu);
      if (!shared->pool_gone && static_cast<int>(shared->free_list.size()) < shared->keep_free) {
        shared->free_list.push_back(released);
        return;
      }
    }
    shared->allocator.free(released, shared->allocator.context);  // outside the lock: it may wait
  });
}

int64_t BatchPool::allocations() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  return shared_->allocations;
}

}  // namespace hdmlp
