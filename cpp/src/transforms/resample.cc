#include "hdmlp/transforms/resample.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "hdmlp/transforms/libm.h"
#include "hdmlp/transforms/resample_kernels.h"
#include "hdmlp/transforms/simd.h"

namespace hdmlp {

using resample_kernels::Clip8;
using resample_kernels::HorizontalPixel;
using resample_kernels::kHalf;
using resample_kernels::kPrecisionBits;

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
  return libm::Sin(x) / x * (0.54f + 0.46f * libm::Cos(x));
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
  return libm::Sin(x) / x;
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

}  // namespace

namespace resample_kernels {

void HorizontalPortable(const ImageView& src, int first, int rows, int out_w, int ksize, const int* bounds,
                        const int32_t* kk, uint8_t* dst, int64_t dst_stride) {
  for (int y = 0; y < rows; ++y) {
    const uint8_t* s = src.data + (first + y) * src.stride;
    uint8_t* o = dst + y * dst_stride;
    for (int xx = 0; xx < out_w; ++xx) {
      HorizontalPixel(s, bounds[2 * xx], bounds[2 * xx + 1], kk + static_cast<size_t>(xx) * ksize, o + 3 * xx);
    }
  }
}

// Output row yy is a weighted sum of src rows. Row-wise accumulation keeps
// every inner loop contiguous (and vectorisable); integer sums do not depend
// on the order, so this equals PIL's per-pixel loop.
void VerticalPortable(const ImageView& src, int out_h, int ksize, const int* bounds, const int32_t* kk, uint8_t* dst,
                      int64_t dst_stride, ResampleScratch* s) {
  const int n_values = src.width * 3;
  s->acc.resize(static_cast<size_t>(n_values));
  int32_t* acc = s->acc.data();
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

}  // namespace resample_kernels

namespace {


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

// The passes, by the kernels simd.h chose (the same bytes from each).
void HorizontalPass(const ImageView& src, int first, int rows, int out_w, int ksize, const int* bounds,
                    const int32_t* kk, uint8_t* dst, int64_t dst_stride, ResampleScratch* s) {
  const Kernels kernels = ActiveKernels();
#if defined(HDMLP_KERNELS_AVX2)
  if (kernels == Kernels::kAvx2) {
    resample_kernels::HorizontalAvx2(src, first, rows, out_w, ksize, bounds, kk, dst, dst_stride, s);
    return;
  }
#elif defined(HDMLP_KERNELS_NEON)
  if (kernels == Kernels::kNeon) {
    resample_kernels::HorizontalNeon(src, first, rows, out_w, ksize, bounds, kk, dst, dst_stride, s);
    return;
  }
#endif
  (void)kernels;
  (void)s;
  resample_kernels::HorizontalPortable(src, first, rows, out_w, ksize, bounds, kk, dst, dst_stride);
}

void VerticalPass(const ImageView& src, int out_h, int ksize, const int* bounds, const int32_t* kk, uint8_t* dst,
                  int64_t dst_stride, ResampleScratch* s) {
  const Kernels kernels = ActiveKernels();
#if defined(HDMLP_KERNELS_AVX2)
  if (kernels == Kernels::kAvx2) {
    resample_kernels::VerticalAvx2(src, out_h, ksize, bounds, kk, dst, dst_stride);
    return;
  }
#elif defined(HDMLP_KERNELS_NEON)
  if (kernels == Kernels::kNeon) {
    resample_kernels::VerticalNeon(src, out_h, ksize, bounds, kk, dst, dst_stride);
    return;
  }
#endif
  (void)kernels;
  resample_kernels::VerticalPortable(src, out_h, ksize, bounds, kk, dst, dst_stride, s);
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
