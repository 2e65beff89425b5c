// The C library's maths functions whose results reach a sample: the only
// operations of the transforms whose bytes can differ between CPUs.
//
// IEEE 754 fixes the result of +, -, *, /, sqrt, fma and of every
// conversion to the last bit, on x86-64 and aarch64 alike; the core is built
// with -ffp-contract=off, so no compiler fuses a multiply and an add where
// the source does not, and the vector kernels (simd.h) compute the portable
// code's integers. sin, cos, tan, atan, exp, log and expf are left to each C
// library, which may round their last bit differently (glibc picks other
// code on x86-64 CPUs with FMA than on aarch64). The transforms call them
// through these functions only, which names every such call:
//
//   Sin, Cos  Hamming and Lanczos resampling weights; RandomRotation's and
//             RandomAffine's matrices; RandomErasing's normal values
//   Tan       RandomAffine's shear
//   Atan      the policies' ShearX/ShearY (TrivialAugmentWide, RandAugment,
//             AutoAugment)
//   Exp, Log  RandomResizedCrop's and RandomErasing's aspect ratios;
//             RandomErasing's normal values
//   Expf      GaussianBlur's kernel
//
// What a difference in their last bits can do to a sample is bounded in
// tests/cpp/libm_bounds_test.cc, which shifts every result by 1 and 2 units
// in the last place (ShiftResultsForTesting) and compares (docs/transforms.md,
// "The same bytes on every CPU").
//
// Thread-safety: the functions are reentrant; ShiftResultsForTesting is
// process-wide, for tests, between transforms.
#ifndef HDMLP_TRANSFORMS_LIBM_H_
#define HDMLP_TRANSFORMS_LIBM_H_

#include <atomic>
#include <cmath>
#include <cstdlib>

namespace hdmlp {
namespace libm {

// Units in the last place added to every result below (0: none).
extern std::atomic<int> g_result_shift;

template <typename T>
inline T Shifted(T v) {
  const int ulps = g_result_shift.load(std::memory_order_relaxed);
  if (ulps == 0) return v;
  const T toward = ulps > 0 ? T(INFINITY) : T(-INFINITY);
  for (int i = 0; i < std::abs(ulps); ++i) v = std::nextafter(v, toward);
  return v;
}

inline double Sin(double x) { return Shifted(std::sin(x)); }
inline double Cos(double x) { return Shifted(std::cos(x)); }
inline double Tan(double x) { return Shifted(std::tan(x)); }
inline double Atan(double x) { return Shifted(std::atan(x)); }
inline double Exp(double x) { return Shifted(std::exp(x)); }
inline double Log(double x) { return Shifted(std::log(x)); }
inline float Expf(float x) { return Shifted(std::exp(x)); }

// For tests: every result above moves by `ulps` units in the last place
// (negative: down), as another C library's might.
void ShiftResultsForTesting(int ulps);

}  // namespace libm
}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_LIBM_H_
