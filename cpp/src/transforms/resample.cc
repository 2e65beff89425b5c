#include "hdmlp/transforms/resample.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define HDMLP_RESAMPLE_AVX2 1
#endif

namespace hdmlp {
namespace {

// ---- PIL's filters (libImaging/Resample.c), verbatim in behaviour ---------

double BoxFilter(double x) { return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0; }

double BilinearFilter(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

double HammingFilter(double x) {
  if (x < 0.0) x = -x;
  if (x == 0.0) return 1.0;
  if (x >= 1.0) return 0.0;
  x = x * M_PI;
  return std::sin(x) / x * (0.54f + 0.46f * std::cos(x));
}

double BicubicFilter(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

double Sinc(double x) {
  if (x == 0.0) return 1.0;
  x = x * M_PI;
  return std::sin(x) / x;
}

double LanczosFilter(double x) { return (-3.0 <= x && x < 3.0) ? Sinc(x) * Sinc(x / 3) : 0.0; }

struct Filter {
  double (*fn)(double);
  double support;
};

Filter FilterOf(Interpolation f) {
  switch (f) {
    case Interpolation::kBox: return {BoxFilter, 0.5};
    case Interpolation::kHamming: return {HammingFilter, 1.0};
    case Interpolation::kBicubic: return {BicubicFilter, 2.0};
    case Interpolation::kLanczos: return {LanczosFilter, 3.0};
    default: return {BilinearFilter, 1.0};
  }
}

constexpr int kPrecisionBits = 32 - 8 - 2;

inline uint8_t Clip8(int32_t v) {
  v >>= kPrecisionBits;
  return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

// PIL's precompute_coeffs + normalize_coeffs_8bpc. Returns ksize; bounds get
// (first tap, tap count) per output, kk ksize fixed-point weights per output.
int PrecomputeCoeffs(int in_size, float in0, float in1, int out_size, const Filter& filter, bool antialias,
                     std::vector<double>* weights, std::vector<int>* bounds, std::vector<int32_t>* kk) {
  const double scale = static_cast<double>(in1 - in0) / out_size;
  double filterscale = scale;
  if (filterscale < 1.0 || !antialias) filterscale = 1.0;
  const double support = filter.support * filterscale;
  const int ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  weights->assign(static_cast<size_t>(ksize), 0.0);
  bounds->resize(static_cast<size_t>(out_size) * 2);
  kk->assign(static_cast<size_t>(out_size) * ksize, 0);
  const double ss = 1.0 / filterscale;
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    if (xmax < 0) xmax = 0;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      const double w = filter.fn((x + xmin - center + 0.5) * ss);
      (*weights)[x] = w;
      ww += w;
    }
    int32_t* k = kk->data() + static_cast<size_t>(xx) * ksize;
    for (int x = 0; x < xmax; ++x) {
      double w = (*weights)[x];
      if (ww != 0.0) w /= ww;
      k[x] = w < 0 ? static_cast<int32_t>(-0.5 + w * (1 << kPrecisionBits))
                   : static_cast<int32_t>(0.5 + w * (1 << kPrecisionBits));
    }
    (*bounds)[2 * xx] = xmin;
    (*bounds)[2 * xx + 1] = xmax;
  }
  return ksize;
}

constexpr int32_t kHalf = 1 << (kPrecisionBits - 1);

// One output pixel of the horizontal pass.
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

// Horizontal pass over `rows` rows of src starting at row `first`.
void Horizontal(const ImageView& src, int first, int rows, int out_w, int ksize, const int* bounds,
                const int32_t* kk, uint8_t* dst, int64_t dst_stride) {
  for (int y = 0; y < rows; ++y) {
    const uint8_t* s = src.data + (first + y) * src.stride;
    uint8_t* o = dst + y * dst_stride;
    for (int xx = 0; xx < out_w; ++xx) {
      HorizontalPixel(s, bounds[2 * xx], bounds[2 * xx + 1], kk + static_cast<size_t>(xx) * ksize, o + 3 * xx);
    }
  }
}

// Vertical pass: output row yy is a weighted sum of src rows. Row-wise
// accumulation keeps every inner loop contiguous (and vectorisable); integer
// sums do not depend on the order, so this equals PIL's per-pixel loop.
void Vertical(const ImageView& src, int out_h, int ksize, const int* bounds, const int32_t* kk, uint8_t* dst,
              int64_t dst_stride, std::vector<int32_t>* acc_buf) {
  const int n_values = src.width * 3;
  acc_buf->resize(static_cast<size_t>(n_values));
  int32_t* acc = acc_buf->data();
  for (int yy = 0; yy < out_h; ++yy) {
    const int ymin = bounds[2 * yy], n = bounds[2 * yy + 1];
    const int32_t* k = kk + static_cast<size_t>(yy) * ksize;
    std::fill(acc, acc + n_values, kHalf);
    for (int i = 0; i < n; ++i) {
      const uint8_t* row = src.data + (ymin + i) * src.stride;
      const int32_t c = k[i];
      for (int x = 0; x < n_values; ++x) acc[x] += row[x] * c;
    }
    uint8_t* o = dst + yy * dst_stride;
    for (int x = 0; x < n_values; ++x) o[x] = Clip8(acc[x]);
  }
}

#ifdef HDMLP_RESAMPLE_AVX2
// ---- AVX2 kernels: the same integer arithmetic, 8 lanes at a time ---------

std::atomic<bool> avx2_allowed{true};

bool HaveAvx2() {
  static const bool have = __builtin_cpu_supports("avx2");
  return have && avx2_allowed.load(std::memory_order_relaxed);
}

__attribute__((target("avx2"))) inline __m256i Load2x16(const uint8_t* lo, const uint8_t* hi) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo))),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi)), 1);
}

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
#endif  // HDMLP_RESAMPLE_AVX2

// PIL's NEAREST resize: an affine transform sampled at pixel centres
// (ImagingScaleAffine), positions accumulated in double as PIL does. Fills
// xin and yin with the input column of every output column and the input row
// of every output row (non-decreasing).
void NearestTaps(const ResampleGeometry& g, std::vector<int>* xin, std::vector<int>* yin) {
  auto coord = [](double v) { return v < 0.0 ? -1 : static_cast<int>(v); };
  auto taps = [&](float b0, float b1, int out, int in, std::vector<int>* t) {
    const double a = static_cast<double>(b1 - b0) / out;
    t->resize(static_cast<size_t>(out));
    double o = b0 + a * 0.5;
    for (int i = 0; i < out; ++i) {
      (*t)[i] = std::clamp(coord(o), 0, in - 1);
      o += a;
    }
  };
  taps(g.box[0], g.box[2], g.out_width, g.src_width, xin);
  taps(g.box[1], g.box[3], g.out_height, g.src_height, yin);
}

void Nearest(const ImageView& src, int origin_x, int origin_y, const ResampleGeometry& g, const PixelRect& win,
             uint8_t* dst, int64_t dst_stride, ResampleScratch* s) {
  NearestTaps(g, &s->bx, &s->by);
  for (int y = 0; y < win.height; ++y) {
    const uint8_t* row = src.data + (s->by[win.y + y] - origin_y) * src.stride;
    uint8_t* o = dst + y * dst_stride;
    for (int x = 0; x < win.width; ++x) std::memcpy(o + 3 * x, row + 3 * (s->bx[win.x + x] - origin_x), 3);
  }
}

}  // namespace

void SetAvx2AllowedForTesting(bool allowed) {
#ifdef HDMLP_RESAMPLE_AVX2
  avx2_allowed.store(allowed, std::memory_order_relaxed);
#else
  (void)allowed;
#endif
}

bool ResampleUsesAvx2() {
#ifdef HDMLP_RESAMPLE_AVX2
  return HaveAvx2();
#else
  return false;
#endif
}

const char* InterpolationName(Interpolation interpolation) {
  switch (interpolation) {
    case Interpolation::kNearest: return "nearest";
    case Interpolation::kLanczos: return "lanczos";
    case Interpolation::kBilinear: return "bilinear";
    case Interpolation::kBicubic: return "bicubic";
    case Interpolation::kBox: return "box";
    case Interpolation::kHamming: return "hamming";
  }
  return "?";
}

namespace {

void HorizontalPass(const ImageView& src, int first, int rows, int out_w, int ksize, const int* bounds,
                    const int32_t* kk, uint8_t* dst, int64_t dst_stride, ResampleScratch* s) {
#ifdef HDMLP_RESAMPLE_AVX2
  if (HaveAvx2()) {
    HorizontalAvx2(src, first, rows, out_w, ksize, bounds, kk, dst, dst_stride, s);
    return;
  }
#endif
  (void)s;
  Horizontal(src, first, rows, out_w, ksize, bounds, kk, dst, dst_stride);
}

void VerticalPass(const ImageView& src, int out_h, int ksize, const int* bounds, const int32_t* kk, uint8_t* dst,
                  int64_t dst_stride, ResampleScratch* s) {
#ifdef HDMLP_RESAMPLE_AVX2
  if (HaveAvx2()) {
    VerticalAvx2(src, out_h, ksize, bounds, kk, dst, dst_stride);
    return;
  }
#endif
  Vertical(src, out_h, ksize, bounds, kk, dst, dst_stride, &s->acc);
}

void Copy(const ImageView& src, int w, int h, uint8_t* dst, int64_t dst_stride) {
  for (int y = 0; y < h; ++y) {
    std::memcpy(dst + y * dst_stride, src.data + y * src.stride, static_cast<size_t>(w) * 3);
  }
}

bool NeedsHorizontal(const ResampleGeometry& g) {
  return g.out_width != g.src_width || g.box[0] != 0 || g.box[2] != g.out_width;
}

bool NeedsVertical(const ResampleGeometry& g) {
  return g.out_height != g.src_height || g.box[1] != 0 || g.box[3] != g.out_height;
}

// The filter taps of every output column (s->bx, s->kx) and row (s->by,
// s->ky) of a dimension that is resampled; their kernel sizes, 0 for a
// dimension copied as is.
void PrecomputeTaps(const ResampleGeometry& g, ResampleScratch* s, int* ksize_h, int* ksize_v) {
  const Filter f = FilterOf(g.filter);
  *ksize_h = NeedsHorizontal(g) ? PrecomputeCoeffs(g.src_width, g.box[0], g.box[2], g.out_width, f, g.antialias,
                                                   &s->weights, &s->bx, &s->kx)
                                : 0;
  *ksize_v = NeedsVertical(g) ? PrecomputeCoeffs(g.src_height, g.box[1], g.box[3], g.out_height, f, g.antialias,
                                                 &s->weights, &s->by, &s->ky)
                              : 0;
}

// The input rectangle that the taps of the outputs in `win` read (taps from
// PrecomputeTaps; bounds are (first tap, count) and non-decreasing).
PixelRect TapRegion(const ResampleGeometry& g, const ResampleScratch& s, const PixelRect& win) {
  PixelRect r = win;  // a dimension that is not resampled is copied
  auto range = [](const std::vector<int>& b, int o, int n, int* first, int* size) {
    *first = b[2 * o];
    *size = b[2 * (o + n - 1)] + b[2 * (o + n - 1) + 1] - *first;
  };
  if (NeedsHorizontal(g)) range(s.bx, win.x, win.width, &r.x, &r.width);
  if (NeedsVertical(g)) range(s.by, win.y, win.height, &r.y, &r.height);
  return r;
}

}  // namespace

void Resample(const ImageView& src, const float box[4], int out_w, int out_h, Interpolation filter,
              bool antialias, uint8_t* dst, int64_t dst_stride, ResampleScratch* s) {
  const ResampleGeometry g{src.width, src.height, {box[0], box[1], box[2], box[3]}, out_w, out_h, filter, antialias};
  ResampleWindow(src, 0, 0, g, PixelRect{0, 0, out_w, out_h}, dst, dst_stride, s);
}

PixelRect ResampleSourceRegion(const ResampleGeometry& g, const PixelRect& win, ResampleScratch* s) {
  PixelRect r = win;  // a dimension that is not resampled is copied
  if (g.filter == Interpolation::kNearest) {
    NearestTaps(g, &s->bx, &s->by);
    if (NeedsHorizontal(g)) r.x = s->bx[win.x], r.width = s->bx[win.x + win.width - 1] + 1 - r.x;
    if (NeedsVertical(g)) r.y = s->by[win.y], r.height = s->by[win.y + win.height - 1] + 1 - r.y;
    return r;
  }
  int ksize_h, ksize_v;
  PrecomputeTaps(g, s, &ksize_h, &ksize_v);
  return TapRegion(g, *s, win);
}

// Every output pixel depends only on its own taps, and the coefficients of
// an output column or row depend only on its index, so computing a window
// of the output (with PIL's pass order for the whole resample) gives the
// whole resample's values there.
void ResampleWindow(const ImageView& src, int origin_x, int origin_y, const ResampleGeometry& g,
                    const PixelRect& win, uint8_t* dst, int64_t dst_stride, ResampleScratch* s) {
  const bool need_h = NeedsHorizontal(g), need_v = NeedsVertical(g);
  // Rectangle r of the input (in input coordinates).
  auto from = [&](const PixelRect& r) {
    return ImageView{src.data + int64_t{r.y - origin_y} * src.stride + int64_t{r.x - origin_x} * 3, r.width,
                     r.height, src.stride};
  };
  if (!need_h && !need_v) {  // PIL copies
    Copy(from(win), win.width, win.height, dst, dst_stride);
    return;
  }
  if (g.filter == Interpolation::kNearest) {
    Nearest(src, origin_x, origin_y, g, win, dst, dst_stride, s);
    return;
  }
  int ksize_h, ksize_v;
  PrecomputeTaps(g, s, &ksize_h, &ksize_v);
  const PixelRect in_rect = TapRegion(g, *s, win);
  // The window's taps, made relative to the first input column / row read.
  int* bx = need_h ? s->bx.data() + 2 * win.x : nullptr;
  int* by = need_v ? s->by.data() + 2 * win.y : nullptr;
  const int32_t* kx = need_h ? s->kx.data() + static_cast<size_t>(win.x) * ksize_h : nullptr;
  const int32_t* ky = need_v ? s->ky.data() + static_cast<size_t>(win.y) * ksize_v : nullptr;
  auto rebase = [](int* bounds, int n, int first) {
    for (int i = 0; i < n; ++i) bounds[2 * i] -= first;
  };
  if (need_h) rebase(bx, win.width, in_rect.x);
  if (need_v) rebase(by, win.height, in_rect.y);
  const ImageView in = from(in_rect);
  if (!need_v) {
    HorizontalPass(in, 0, win.height, win.width, ksize_h, bx, kx, dst, dst_stride, s);
    return;
  }
  if (!need_h) {
    VerticalPass(in, win.height, ksize_v, by, ky, dst, dst_stride, s);
    return;
  }
  if (g.out_height < g.src_height && g.src_height - g.out_height > 2 * (g.src_width - g.out_width)) {
    // Pillow 13 (python-pillow/Pillow#9549) resamples vertically first when
    // the height shrinks by more than twice as many pixels as the width; the
    // vertical pass only needs the columns the horizontal one reads.
    const int64_t temp_stride = int64_t{in.width} * 3;
    s->temp.resize(static_cast<size_t>(temp_stride * win.height));
    VerticalPass(in, win.height, ksize_v, by, ky, s->temp.data(), temp_stride, s);
    HorizontalPass(ImageView{s->temp.data(), in.width, win.height, temp_stride}, 0, win.height, win.width, ksize_h,
                   bx, kx, dst, dst_stride, s);
    return;
  }
  // Otherwise horizontally first, over the rows the vertical pass reads.
  const int64_t temp_stride = int64_t{win.width} * 3;
  s->temp.resize(static_cast<size_t>(temp_stride * in.height));
  HorizontalPass(in, 0, in.height, win.width, ksize_h, bx, kx, s->temp.data(), temp_stride, s);
  VerticalPass(ImageView{s->temp.data(), win.width, in.height, temp_stride}, win.height, ksize_v, by, ky, dst,
               dst_stride, s);
}

}  // namespace hdmlp
