// The AVX2 kernels of the resampler's passes (resample_kernels.h): the
// portable code's integer arithmetic, 8 lanes at a time. Compiled with their
// own target attribute; simd.h runs them only on CPUs that have AVX2.
#include "hdmlp/transforms/resample_kernels.h"

#if defined(HDMLP_KERNELS_AVX2)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace hdmlp {
namespace resample_kernels {
namespace {

__attribute__((target("avx2"))) inline __m256i Load2x16(const uint8_t* lo, const uint8_t* hi) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo))),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi)), 1);
}

}  // namespace

// Four output pixels per iteration, two per register (one per 128-bit
// lane). Each lane loads 16 bytes (5 pixels) at its pixel's first tap; a byte
// shuffle makes 16-bit pairs (tap a, tap a+1) of each channel, and
// vpmaddwd multiplies a pair by its two weights and adds them. PIL's weights
// have 22 bits, more than 16, so each is split as k = 256 * kh + kl
// (kh = k >> 8, kl = k & 255, both fit 16 bits) and the sum is
// 256 * sum(p * kh) + sum(p * kl): the same integer as PIL's. Taps go 5 at a
// time (pairs (0,1), (2,3), (4,-)); weights past a pixel's taps are zero.
// Pixels whose loads would leave the row use the scalar code.
__attribute__((target("avx2"))) void HorizontalAvx2(const ImageView& src, int first, int rows, int out_w,
                                                     int ksize, const int* bounds, const int32_t* kk,
                                                     uint8_t* dst, int64_t dst_stride, ResampleScratch* s) {
  const int groups = (ksize + 4) / 5;
  const int quads = out_w / 4;
  const int64_t row_bytes = int64_t{src.width} * 3;
  const size_t vectors_per_quad = static_cast<size_t>(groups) * 3 * 4;  // (group, pair) x (hi, lo) x (A, B)
  // The weights start on a 32-byte boundary and are read with aligned loads: GCC before 12, tuning
  // for generic x86-64, splits every unaligned 256-bit load in two (-mavx256-split-unaligned-load),
  // which cost the wheels' build (GCC 10) 18% more instructions in this loop.
  s->table.assign(static_cast<size_t>(quads) * vectors_per_quad * 8 + 8, 0);  // 8 int32 = 16 int16 per vector
  int32_t* table = s->table.data();
  table += (8 - reinterpret_cast<uintptr_t>(table) / sizeof(int32_t) % 8) % 8;
  s->safe.assign(static_cast<size_t>(quads), 0);
  auto* words = reinterpret_cast<int16_t*>(table);
  for (int q = 0; q < quads; ++q) {
    bool safe = true;
    for (int px = 0; px < 4; ++px) {
      const int x = 4 * q + px, xmin = bounds[2 * x], n = bounds[2 * x + 1];
      safe = safe && int64_t{xmin + 5 * (groups - 1)} * 3 + 16 <= row_bytes;
      const int half = px / 2, lane = px % 2;
      for (int t = 0; t < n; ++t) {
        const int32_t k = kk[static_cast<size_t>(x) * ksize + t];
        const int g = t / 5, pair = (t % 5) / 2, second = (t % 5) % 2;
        const size_t v = ((static_cast<size_t>(q) * groups + g) * 3 + pair) * 4 + 2 * half;
        for (int c = 0; c < 3; ++c) {
          const int w = lane * 8 + 2 * c + second;
          words[v * 16 + w] = static_cast<int16_t>(k >> 8);
          words[(v + 1) * 16 + w] = static_cast<int16_t>(k & 255);
        }
      }
    }
    s->safe[q] = safe;
  }
  __m256i masks[3];
  for (int pair = 0; pair < 3; ++pair) {
    alignas(32) int8_t m[32];
    const int a = 2 * pair, b = a + 1;
    for (int i = 0; i < 16; ++i) m[i] = -128;  // zero
    for (int c = 0; c < 3; ++c) {
      m[4 * c] = static_cast<int8_t>(3 * a + c);
      if (b < 5) m[4 * c + 2] = static_cast<int8_t>(3 * b + c);
    }
    for (int i = 0; i < 16; ++i) m[16 + i] = m[i];
    masks[pair] = _mm256_load_si256(reinterpret_cast<const __m256i*>(m));
  }
  const __m256i m0 = masks[0], m1 = masks[1], m2 = masks[2];
  const __m256i rounding = _mm256_set1_epi32(kHalf);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m128i compress = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -128, -128, -128, -128);
  for (int y = 0; y < rows; ++y) {
    const uint8_t* row = src.data + (first + y) * src.stride;
    uint8_t* o = dst + y * dst_stride;
    for (int q = 0; q < quads; ++q) {
      const int x = 4 * q;
      if (!s->safe[q]) {
        for (int px = x; px < x + 4; ++px) {
          HorizontalPixel(row, bounds[2 * px], bounds[2 * px + 1], kk + static_cast<size_t>(px) * ksize, o + 3 * px);
        }
        continue;
      }
      const uint8_t* p0 = row + bounds[2 * x] * 3;
      const uint8_t* p1 = row + bounds[2 * x + 2] * 3;
      const uint8_t* p2 = row + bounds[2 * x + 4] * 3;
      const uint8_t* p3 = row + bounds[2 * x + 6] * 3;
      const __m256i* c = reinterpret_cast<const __m256i*>(table) + q * vectors_per_quad;
      __m256i hi_a = _mm256_setzero_si256(), lo_a = hi_a, hi_b = hi_a, lo_b = hi_a;
      for (int g = 0; g < groups; ++g, p0 += 15, p1 += 15, p2 += 15, p3 += 15, c += 12) {
        const __m256i a = Load2x16(p0, p1), b = Load2x16(p2, p3);
        __m256i sa = _mm256_shuffle_epi8(a, m0), sb = _mm256_shuffle_epi8(b, m0);
        hi_a = _mm256_add_epi32(hi_a, _mm256_madd_epi16(sa, _mm256_load_si256(c)));
        lo_a = _mm256_add_epi32(lo_a, _mm256_madd_epi16(sa, _mm256_load_si256(c + 1)));
        hi_b = _mm256_add_epi32(hi_b, _mm256_madd_epi16(sb, _mm256_load_si256(c + 2)));
        lo_b = _mm256_add_epi32(lo_b, _mm256_madd_epi16(sb, _mm256_load_si256(c + 3)));
        sa = _mm256_shuffle_epi8(a, m1);
        sb = _mm256_shuffle_epi8(b, m1);
        hi_a = _mm256_add_epi32(hi_a, _mm256_madd_epi16(sa, _mm256_load_si256(c + 4)));
        lo_a = _mm256_add_epi32(lo_a, _mm256_madd_epi16(sa, _mm256_load_si256(c + 5)));
        hi_b = _mm256_add_epi32(hi_b, _mm256_madd_epi16(sb, _mm256_load_si256(c + 6)));
        lo_b = _mm256_add_epi32(lo_b, _mm256_madd_epi16(sb, _mm256_load_si256(c + 7)));
        sa = _mm256_shuffle_epi8(a, m2);
        sb = _mm256_shuffle_epi8(b, m2);
        hi_a = _mm256_add_epi32(hi_a, _mm256_madd_epi16(sa, _mm256_load_si256(c + 8)));
        lo_a = _mm256_add_epi32(lo_a, _mm256_madd_epi16(sa, _mm256_load_si256(c + 9)));
        hi_b = _mm256_add_epi32(hi_b, _mm256_madd_epi16(sb, _mm256_load_si256(c + 10)));
        lo_b = _mm256_add_epi32(lo_b, _mm256_madd_epi16(sb, _mm256_load_si256(c + 11)));
      }
      const __m256i va = _mm256_srai_epi32(
          _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(hi_a, 8), lo_a), rounding), kPrecisionBits);
      const __m256i vb = _mm256_srai_epi32(
          _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(hi_b, 8), lo_b), rounding), kPrecisionBits);
      // Saturate to 0..255 (PIL's clip8); lanes hold pixels [x, x+2 | x+1, x+3].
      const __m256i w = _mm256_packs_epi32(va, vb);
      const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(w, w), order);
      const __m128i packed = _mm_shuffle_epi8(_mm256_castsi256_si128(bytes), compress);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(o + 3 * x), packed);
      const uint32_t last4 = static_cast<uint32_t>(_mm_extract_epi32(packed, 2));
      std::memcpy(o + 3 * x + 8, &last4, 4);
    }
    for (int x = 4 * quads; x < out_w; ++x) {
      HorizontalPixel(row, bounds[2 * x], bounds[2 * x + 1], kk + static_cast<size_t>(x) * ksize, o + 3 * x);
    }
  }
}

// 32 values at a time, 8 per register; a final permute undoes the lane
// interleaving of the packs.
__attribute__((target("avx2"))) void VerticalAvx2(const ImageView& src, int out_h, int ksize, const int* bounds,
                                                   const int32_t* kk, uint8_t* dst, int64_t dst_stride) {
  const int n_values = src.width * 3;
  const __m256i half = _mm256_set1_epi32(kHalf);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int yy = 0; yy < out_h; ++yy) {
    const int ymin = bounds[2 * yy], n = bounds[2 * yy + 1];
    const int32_t* k = kk + static_cast<size_t>(yy) * ksize;
    const uint8_t* base = src.data + ymin * src.stride;
    uint8_t* o = dst + yy * dst_stride;
    int x = 0;
    for (; x + 32 <= n_values; x += 32) {
      __m256i s0 = half, s1 = half, s2 = half, s3 = half;
      const uint8_t* r = base + x;
      for (int i = 0; i < n; ++i, r += src.stride) {
        const __m256i c = _mm256_set1_epi32(k[i]);
        s0 = _mm256_add_epi32(s0, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(
                                                          reinterpret_cast<const __m128i*>(r))), c));
        s1 = _mm256_add_epi32(s1, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(
                                                          reinterpret_cast<const __m128i*>(r + 8))), c));
        s2 = _mm256_add_epi32(s2, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(
                                                          reinterpret_cast<const __m128i*>(r + 16))), c));
        s3 = _mm256_add_epi32(s3, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(
                                                          reinterpret_cast<const __m128i*>(r + 24))), c));
      }
      const __m256i w01 = _mm256_packs_epi32(_mm256_srai_epi32(s0, kPrecisionBits),
                                             _mm256_srai_epi32(s1, kPrecisionBits));
      const __m256i w23 = _mm256_packs_epi32(_mm256_srai_epi32(s2, kPrecisionBits),
                                             _mm256_srai_epi32(s3, kPrecisionBits));
      const __m256i b = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(w01, w23), order);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + x), b);
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

#endif  // HDMLP_KERNELS_AVX2
