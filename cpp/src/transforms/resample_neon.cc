// The NEON kernels of the resampler's passes (resample_kernels.h) for
// aarch64: the portable code's integer arithmetic, 4 lanes of 32 bits at a
// time. Products and sums are the same int32 values as the portable code's
// (no lane overflows: a partial sum is bounded by 255 times the sum of the
// weights' magnitudes, as the whole sum is), so the bytes are the same.
#include "hdmlp/transforms/resample_kernels.h"

#if defined(HDMLP_KERNELS_NEON)

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

namespace hdmlp {
namespace resample_kernels {
namespace {

constexpr int kTapGroup = 8;  // taps per vld3_u8 (8 pixels, de-interleaved into 3 channels)

inline int RoundUp(int n, int m) { return (n + m - 1) / m * m; }

// Clip8 on 4 lanes twice: >> 22, then saturated to 0..255 (vqmovun).
inline uint8x8_t Clip8x8(int32x4_t lo, int32x4_t hi) {
  const int16x8_t w = vcombine_s16(vqmovn_s32(vshrq_n_s32(lo, kPrecisionBits)),
                                   vqmovn_s32(vshrq_n_s32(hi, kPrecisionBits)));
  return vqmovun_s16(w);
}

inline int32x4_t Widen(uint16x4_t v) { return vreinterpretq_s32_u32(vmovl_u16(v)); }

}  // namespace

// One output pixel at a time: its taps 8 at a time, each vld3_u8 giving the
// 8 taps' values of every channel, multiplied by their weights (zero past
// the pixel's taps, from a table padded to whole groups) and summed across
// the lanes at the end. Pixels whose groups would read past the row use the
// scalar code.
void HorizontalNeon(const ImageView& src, int first, int rows, int out_w, int ksize, const int* bounds,
                    const int32_t* kk, uint8_t* dst, int64_t dst_stride, ResampleScratch* s) {
  const int stride = RoundUp(ksize, kTapGroup);
  const int64_t row_pixels = src.width;
  s->table.assign(static_cast<size_t>(out_w) * stride, 0);
  s->safe.assign(static_cast<size_t>(out_w), 0);
  for (int x = 0; x < out_w; ++x) {
    const int xmin = bounds[2 * x], n = bounds[2 * x + 1];
    std::memcpy(&s->table[static_cast<size_t>(x) * stride], kk + static_cast<size_t>(x) * ksize,
                static_cast<size_t>(n) * sizeof(int32_t));
    s->safe[x] = int64_t{xmin} + RoundUp(n, kTapGroup) <= row_pixels;
  }
  const int32_t* table = s->table.data();
  for (int y = 0; y < rows; ++y) {
    const uint8_t* row = src.data + (first + y) * src.stride;
    uint8_t* o = dst + y * dst_stride;
    for (int x = 0; x < out_w; ++x) {
      const int xmin = bounds[2 * x], n = bounds[2 * x + 1];
      if (!s->safe[x]) {
        HorizontalPixel(row, xmin, n, kk + static_cast<size_t>(x) * ksize, o + 3 * x);
        continue;
      }
      const uint8_t* p = row + xmin * 3;
      const int32_t* w = table + static_cast<size_t>(x) * stride;
      int32x4_t a0 = vdupq_n_s32(0), a1 = a0, b0 = a0, b1 = a0, c0 = a0, c1 = a0;
      for (int t = 0; t < n; t += kTapGroup, p += 3 * kTapGroup, w += kTapGroup) {
        const uint8x8x3_t px = vld3_u8(p);
        const int32x4_t wl = vld1q_s32(w), wh = vld1q_s32(w + 4);
        const uint16x8_t v0 = vmovl_u8(px.val[0]), v1 = vmovl_u8(px.val[1]), v2 = vmovl_u8(px.val[2]);
        a0 = vmlaq_s32(a0, Widen(vget_low_u16(v0)), wl);
        a1 = vmlaq_s32(a1, Widen(vget_high_u16(v0)), wh);
        b0 = vmlaq_s32(b0, Widen(vget_low_u16(v1)), wl);
        b1 = vmlaq_s32(b1, Widen(vget_high_u16(v1)), wh);
        c0 = vmlaq_s32(c0, Widen(vget_low_u16(v2)), wl);
        c1 = vmlaq_s32(c1, Widen(vget_high_u16(v2)), wh);
      }
      o[3 * x] = Clip8(kHalf + vaddvq_s32(vaddq_s32(a0, a1)));
      o[3 * x + 1] = Clip8(kHalf + vaddvq_s32(vaddq_s32(b0, b1)));
      o[3 * x + 2] = Clip8(kHalf + vaddvq_s32(vaddq_s32(c0, c1)));
    }
  }
}

// 16 values of a row at a time, in 4 lanes of 32 bits per register.
void VerticalNeon(const ImageView& src, int out_h, int ksize, const int* bounds, const int32_t* kk, uint8_t* dst,
                  int64_t dst_stride) {
  const int n_values = src.width * 3;
  const int32x4_t half = vdupq_n_s32(kHalf);
  for (int yy = 0; yy < out_h; ++yy) {
    const int ymin = bounds[2 * yy], n = bounds[2 * yy + 1];
    const int32_t* k = kk + static_cast<size_t>(yy) * ksize;
    const uint8_t* base = src.data + ymin * src.stride;
    uint8_t* o = dst + yy * dst_stride;
    int x = 0;
    for (; x + 16 <= n_values; x += 16) {
      int32x4_t s0 = half, s1 = half, s2 = half, s3 = half;
      const uint8_t* r = base + x;
      for (int i = 0; i < n; ++i, r += src.stride) {
        const uint8x16_t v = vld1q_u8(r);
        const uint16x8_t lo = vmovl_u8(vget_low_u8(v)), hi = vmovl_u8(vget_high_u8(v));
        const int32_t c = k[i];
        s0 = vmlaq_n_s32(s0, Widen(vget_low_u16(lo)), c);
        s1 = vmlaq_n_s32(s1, Widen(vget_high_u16(lo)), c);
        s2 = vmlaq_n_s32(s2, Widen(vget_low_u16(hi)), c);
        s3 = vmlaq_n_s32(s3, Widen(vget_high_u16(hi)), c);
      }
      vst1q_u8(o + x, vcombine_u8(Clip8x8(s0, s1), Clip8x8(s2, s3)));
    }
    for (; x < n_values; ++x) {
      int32_t acc = kHalf;
      for (int i = 0; i < n; ++i) acc += base[i * src.stride + x] * k[i];
      o[x] = Clip8(acc);
    }
  }
}

}  // namespace resample_kernels
}  // namespace hdmlp

#endif  // HDMLP_KERNELS_NEON
