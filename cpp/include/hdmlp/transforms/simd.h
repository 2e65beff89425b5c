// Which vector kernels the transforms run: the resampler's horizontal and
// vertical passes and the pipeline's float32 output pass. Each kernel
// computes exactly the integers of the portable C++ code (and looks up
// exactly its floats), so the choice changes speed only, never a byte: the
// same seed and chain give the same batches on x86-64 and aarch64
// (docs/transforms.md, "The same bytes on every CPU").
//
//   x86-64   AVX2 where the CPU has it (checked at run time), else portable;
//   aarch64  NEON (every aarch64 CPU has it);
//   others   portable.
//
// HDMLP_SIMD=portable in the environment (read once, at the first
// transform) or ForcePortableKernels(true) runs the portable code on any
// CPU; the tests compare its bytes with the vector kernels' (CI runs on
// x86-64 only). Configured with -DHDMLP_SIMD=OFF, CMake builds the portable
// code alone.
//
// Thread-safety: ActiveKernels may be called from any thread.
// ForcePortableKernels is process-wide, for tests and benchmarks, between
// transforms.
#ifndef HDMLP_TRANSFORMS_SIMD_H_
#define HDMLP_TRANSFORMS_SIMD_H_

#include <string>

// The vector kernels this build compiles: AVX2 on x86-64 with GCC or clang
// (each kernel carries its own target attribute, so the rest of the build
// stays baseline x86-64), NEON on aarch64; HDMLP_NO_SIMD (CMake's
// -DHDMLP_SIMD=OFF) leaves the portable code alone.
#if !defined(HDMLP_NO_SIMD) && defined(__GNUC__) && defined(__x86_64__)
#define HDMLP_KERNELS_AVX2 1
#elif !defined(HDMLP_NO_SIMD) && defined(__GNUC__) && defined(__aarch64__) && defined(__ARM_NEON)
#define HDMLP_KERNELS_NEON 1
#endif

namespace hdmlp {

enum class Kernels { kPortable, kAvx2, kNeon };

// The kernels the transforms use now. Throws InvalidArgumentError when
// HDMLP_SIMD holds something other than "", "auto" or "portable".
Kernels ActiveKernels();
const char* KernelsName(Kernels kernels);
// The kernels this build holds, best first, e.g. "avx2, portable".
std::string CompiledKernels();
// true: the portable code everywhere; false: back to the CPU's best (unless
// HDMLP_SIMD=portable).
void ForcePortableKernels(bool portable);

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_SIMD_H_
