// The two passes of Resample (resample.h) as kernels: the portable C++ code
// and its vector versions (simd.h), which give the same bytes. A pass reads
// 3-byte pixels; each output value is PIL's fixed-point sum
//   clip8((1 << 21) + sum_i p[i] * k[i]) >> 22)
// of its taps p and 22-bit weights k, computed in 32-bit integers: every
// kernel adds the same integers, so the order of the additions does not
// change the result.
//
// Taps: `bounds` holds (first tap, tap count) per output column (horizontal)
// or row (vertical), `kk` ksize weights per output, zero past its count.
// Thread-safety: reentrant; a ResampleScratch belongs to one thread.
#ifndef HDMLP_TRANSFORMS_RESAMPLE_KERNELS_H_
#define HDMLP_TRANSFORMS_RESAMPLE_KERNELS_H_

#include <cstdint>

#include "hdmlp/transforms/image_view.h"
#include "hdmlp/transforms/resample.h"
#include "hdmlp/transforms/simd.h"

namespace hdmlp {
namespace resample_kernels {

constexpr int kPrecisionBits = 32 - 8 - 2;
constexpr int32_t kHalf = 1 << (kPrecisionBits - 1);

inline uint8_t Clip8(int32_t v) {
  v >>= kPrecisionBits;
  return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

// One output pixel of the horizontal pass: n taps from pixel xmin of row.
inline void HorizontalPixel(const uint8_t* row, int xmin, int n, const int32_t* k, uint8_t* o) {
  const uint8_t* p = row + xmin * 3;
  int32_t s0 = kHalf, s1 = kHalf, s2 = kHalf;
  for (int i = 0; i < n; ++i) {
    const int32_t c = k[i];
    s0 += p[3 * i] * c;
    s1 += p[3 * i + 1] * c;
    s2 += p[3 * i + 2] * c;
  }
  o[0] = Clip8(s0);
  o[1] = Clip8(s1);
  o[2] = Clip8(s2);
}

// Horizontal pass over `rows` rows of src starting at row `first`: out_w
// pixels per row into dst.
void HorizontalPortable(const ImageView& src, int first, int rows, int out_w, int ksize, const int* bounds,
                        const int32_t* kk, uint8_t* dst, int64_t dst_stride);
// Vertical pass: out_h rows of src.width pixels into dst.
void VerticalPortable(const ImageView& src, int out_h, int ksize, const int* bounds, const int32_t* kk, uint8_t* dst,
                      int64_t dst_stride, ResampleScratch* s);

#if defined(HDMLP_KERNELS_AVX2)
void HorizontalAvx2(const ImageView& src, int first, int rows, int out_w, int ksize, const int* bounds,
                    const int32_t* kk, uint8_t* dst, int64_t dst_stride, ResampleScratch* s);
void VerticalAvx2(const ImageView& src, int out_h, int ksize, const int* bounds, const int32_t* kk, uint8_t* dst,
                  int64_t dst_stride);
#endif
#if defined(HDMLP_KERNELS_NEON)
void HorizontalNeon(const ImageView& src, int first, int rows, int out_w, int ksize, const int* bounds,
                    const int32_t* kk, uint8_t* dst, int64_t dst_stride, ResampleScratch* s);
void VerticalNeon(const ImageView& src, int out_h, int ksize, const int* bounds, const int32_t* kk, uint8_t* dst,
                  int64_t dst_stride);
#endif

}  // namespace resample_kernels
}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_RESAMPLE_KERNELS_H_
