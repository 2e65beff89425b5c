#include "hdmlp/sim/sim_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <new>

#include "hdmlp/util/huge_pages.h"

namespace hdmlp::sim {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kMapOwnChunks = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kMapOwnChunks = false;
#else
constexpr bool kMapOwnChunks = true;
#endif
#else
constexpr bool kMapOwnChunks = true;
#endif

constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kChunk = std::size_t{64} << 20;

}  // namespace

SimMemory::~SimMemory() {
  for (const auto& [base, bytes] : chunks_) munmap(base, bytes);
  for (void* p : fallback_) ::operator delete(p);
}

void* SimMemory::Allocate(std::size_t bytes, std::size_t align) {
  bytes = std::max<std::size_t>(bytes, 1);
  std::lock_guard<std::mutex> lock(mu_);
  used_ += bytes;
  if (!kMapOwnChunks) {
    fallback_.push_back(::operator new(bytes));
    return fallback_.back();
  }
  auto at = reinterpret_cast<std::uintptr_t>(next_);
  at = (at + align - 1) & ~(static_cast<std::uintptr_t>(align) - 1);
  if (next_ == nullptr || at + bytes > reinterpret_cast<std::uintptr_t>(end_)) {
    // A new chunk, 2 MiB-aligned so that every huge page in it is whole; the
    // rest of the old one stays unused (a few MB at most per job).
    const std::size_t size = std::max(kChunk, (bytes + kHugePage - 1) / kHugePage * kHugePage);
    void* base = mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) throw std::bad_alloc();
    chunks_.emplace_back(base, size + kHugePage);
    const auto aligned = (reinterpret_cast<std::uintptr_t>(base) + kHugePage - 1) & ~(kHugePage - 1);
    next_ = reinterpret_cast<char*>(aligned);
    end_ = next_ + size;
    AdviseHugePages(next_, size);
    at = reinterpret_cast<std::uintptr_t>(next_);
  }
  next_ = reinterpret_cast<char*>(at + bytes);
  return reinterpret_cast<void*>(at);
}

std::size_t SimMemory::used_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

}  // namespace hdmlp::sim
