// SimMemory: where the simulator keeps its per-copy arrays (the cached
// copies' sample sets, fill orders and states, the holders), in memory the
// kernel may back with 2 MiB pages.
//
// A large job's event loop reads those arrays at random (1024 nodes:
// about 850 MB), so with 4 KiB pages nearly every read also misses the
// TLB, and the CPU then drops the loop's software prefetches (docs/simulator.md,
// "Cost and scale"). SimMemory hands out memory from 64 MiB chunks that it
// maps itself and marks MADV_HUGEPAGE (honoured where transparent huge pages
// are "always" or "madvise"); nothing is freed before the SimMemory is
// destroyed, so it suits arrays that are built once and live for the whole
// simulation. A null SimMemory, and every SimMemory of an AddressSanitizer
// build (whose checks need the heap's own allocations), uses operator new.
//
// SimAllocator<T> is the allocator of a SimVector<T> on a SimMemory; moving
// or swapping such vectors moves their memory along with it.
//
// Thread-safety: Allocate may be called from several threads at once.
// SimMemory is not copyable.
#ifndef HDMLP_SIM_SIM_MEMORY_H_
#define HDMLP_SIM_SIM_MEMORY_H_

#include <cstddef>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

namespace hdmlp::sim {

class SimMemory {
 public:
  SimMemory() = default;
  ~SimMemory();
  SimMemory(const SimMemory&) = delete;
  SimMemory& operator=(const SimMemory&) = delete;

  // `bytes` aligned to `align` (at most 4096), valid until the SimMemory is
  // destroyed. Throws std::bad_alloc when the system has no memory to map.
  void* Allocate(std::size_t bytes, std::size_t align);
  // Bytes handed out so far.
  std::size_t used_bytes() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<void*, std::size_t>> chunks_;  // guarded by mu_
  char* next_ = nullptr;                               // guarded by mu_
  char* end_ = nullptr;                                // guarded by mu_
  std::size_t used_ = 0;                               // guarded by mu_
  std::vector<void*> fallback_;                        // AddressSanitizer builds: operator new blocks
};

template <typename T>
class SimAllocator {
 public:
  using value_type = T;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;

  SimAllocator() = default;
  explicit SimAllocator(SimMemory* memory) : memory_(memory) {}
  template <typename U>
  SimAllocator(const SimAllocator<U>& other) : memory_(other.memory()) {}  // NOLINT: rebinding

  T* allocate(std::size_t n) {
    if (memory_ == nullptr) return std::allocator<T>().allocate(n);
    return static_cast<T*>(memory_->Allocate(n * sizeof(T), alignof(T)));
  }
  void deallocate(T* p, std::size_t n) {
    if (memory_ == nullptr) std::allocator<T>().deallocate(p, n);  // a SimMemory frees at its end
  }
  SimMemory* memory() const { return memory_; }

  friend bool operator==(const SimAllocator& a, const SimAllocator& b) { return a.memory_ == b.memory_; }
  friend bool operator!=(const SimAllocator& a, const SimAllocator& b) { return a.memory_ != b.memory_; }

 private:
  SimMemory* memory_ = nullptr;
};

template <typename T>
using SimVector = std::vector<T, SimAllocator<T>>;

}  // namespace hdmlp::sim

#endif  // HDMLP_SIM_SIM_MEMORY_H_
