#include "hdmlp/transforms/simd.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "hdmlp/errors.h"

namespace hdmlp {
namespace {

std::atomic<bool> forced_portable{false};

// The best kernels of this CPU and build, and HDMLP_SIMD, once.
Kernels Detect() {
  const char* env = std::getenv("HDMLP_SIMD");
  if (env != nullptr && *env != '\0' && std::strcmp(env, "auto") != 0) {
    if (std::strcmp(env, "portable") == 0) return Kernels::kPortable;
    throw InvalidArgumentError(std::string("HDMLP_SIMD='") + env +
                               "': use 'portable' (the portable C++ code on any CPU) or 'auto' (the CPU's vector "
                               "kernels: " + CompiledKernels() + "), or leave it unset");
  }
#if defined(HDMLP_KERNELS_AVX2)
  if (__builtin_cpu_supports("avx2")) return Kernels::kAvx2;
#elif defined(HDMLP_KERNELS_NEON)
  return Kernels::kNeon;
#endif
  return Kernels::kPortable;
}

}  // namespace

Kernels ActiveKernels() {
  static const Kernels best = Detect();
  return forced_portable.load(std::memory_order_relaxed) ? Kernels::kPortable : best;
}

const char* KernelsName(Kernels kernels) {
  switch (kernels) {
    case Kernels::kAvx2: return "avx2";
    case Kernels::kNeon: return "neon";
    case Kernels::kPortable: return "portable";
  }
  return "?";
}

std::string CompiledKernels() {
#if defined(HDMLP_KERNELS_AVX2)
  return "avx2, portable";
#elif defined(HDMLP_KERNELS_NEON)
  return "neon, portable";
#else
  return "portable";
#endif
}

void ForcePortableKernels(bool portable) { forced_portable.store(portable, std::memory_order_relaxed); }

}  // namespace hdmlp
