#include "hdmlp/transforms/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>

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

// Horizontal pass over `rows` rows of src starting at row `first`.
void Horizontal(const ImageView& src, int first, int rows, int out_w, int ksize, const int* bounds,
                const int32_t* kk, uint8_t* dst, int64_t dst_stride) {
  constexpr int32_t kHalf = 1 << (kPrecisionBits - 1);
  for (int y = 0; y < rows; ++y) {
    const uint8_t* s = src.data + (first + y) * src.stride;
    uint8_t* o = dst + y * dst_stride;
    for (int xx = 0; xx < out_w; ++xx) {
      const int n = bounds[2 * xx + 1];
      const uint8_t* p = s + bounds[2 * xx] * 3;
      const int32_t* k = kk + static_cast<size_t>(xx) * ksize;
      int32_t s0 = kHalf, s1 = kHalf, s2 = kHalf;
      for (int i = 0; i < n; ++i) {
        const int32_t c = k[i];
        s0 += p[3 * i] * c;
        s1 += p[3 * i + 1] * c;
        s2 += p[3 * i + 2] * c;
      }
      o[3 * xx] = Clip8(s0);
      o[3 * xx + 1] = Clip8(s1);
      o[3 * xx + 2] = Clip8(s2);
    }
  }
}

// Vertical pass: output row yy is a weighted sum of src rows. Row-wise
// accumulation keeps every inner loop contiguous (and vectorisable); integer
// sums do not depend on the order, so this equals PIL's per-pixel loop.
void Vertical(const ImageView& src, int out_h, int ksize, const int* bounds, const int32_t* kk, uint8_t* dst,
              int64_t dst_stride, std::vector<int32_t>* acc_buf) {
  constexpr int32_t kHalf = 1 << (kPrecisionBits - 1);
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

// PIL's NEAREST resize: an affine transform sampled at pixel centres
// (ImagingScaleAffine), positions accumulated in double as PIL does.
void Nearest(const ImageView& src, const float box[4], int out_w, int out_h, uint8_t* dst, int64_t dst_stride,
             std::vector<int>* xin_buf) {
  const double ax = static_cast<double>(box[2] - box[0]) / out_w;
  const double ay = static_cast<double>(box[3] - box[1]) / out_h;
  auto coord = [](double v) { return v < 0.0 ? -1 : static_cast<int>(v); };
  xin_buf->resize(static_cast<size_t>(out_w));
  double xo = box[0] + ax * 0.5;
  for (int x = 0; x < out_w; ++x) {
    (*xin_buf)[x] = std::clamp(coord(xo), 0, src.width - 1);
    xo += ax;
  }
  double yo = box[1] + ay * 0.5;
  for (int y = 0; y < out_h; ++y) {
    const int yi = std::clamp(coord(yo), 0, src.height - 1);
    yo += ay;
    const uint8_t* s = src.data + yi * src.stride;
    uint8_t* o = dst + y * dst_stride;
    for (int x = 0; x < out_w; ++x) std::memcpy(o + 3 * x, s + 3 * (*xin_buf)[x], 3);
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

void Resample(const ImageView& src, const float box[4], int out_w, int out_h, Interpolation filter,
              bool antialias, uint8_t* dst, int64_t dst_stride, ResampleScratch* s) {
  const bool need_h = out_w != src.width || box[0] != 0 || box[2] != out_w;
  const bool need_v = out_h != src.height || box[1] != 0 || box[3] != out_h;
  if (!need_h && !need_v) {  // PIL copies
    for (int y = 0; y < out_h; ++y) {
      std::memcpy(dst + y * dst_stride, src.data + y * src.stride, static_cast<size_t>(out_w) * 3);
    }
    return;
  }
  if (filter == Interpolation::kNearest) {
    Nearest(src, box, out_w, out_h, dst, dst_stride, &s->bx);
    return;
  }
  const Filter f = FilterOf(filter);
  const int ksize_v =
      PrecomputeCoeffs(src.height, box[1], box[3], out_h, f, antialias, &s->weights, &s->by, &s->ky);
  ImageView vin = src;
  if (need_h) {
    const int first = s->by[0];
    const int last = s->by[2 * out_h - 2] + s->by[2 * out_h - 1];
    const int ksize_h =
        PrecomputeCoeffs(src.width, box[0], box[2], out_w, f, antialias, &s->weights, &s->bx, &s->kx);
    for (int i = 0; i < out_h; ++i) s->by[2 * i] -= first;
    const int rows = last - first;
    const int64_t temp_stride = int64_t{out_w} * 3;
    s->temp.resize(static_cast<size_t>(temp_stride * std::max(rows, 1)));
    Horizontal(src, first, rows, out_w, ksize_h, s->bx.data(), s->kx.data(), s->temp.data(), temp_stride);
    vin = ImageView{s->temp.data(), out_w, rows, temp_stride};
  }
  if (need_v) {
    Vertical(vin, out_h, ksize_v, s->by.data(), s->ky.data(), dst, dst_stride, &s->acc);
  } else {
    for (int y = 0; y < out_h; ++y) {
      std::memcpy(dst + y * dst_stride, vin.data + y * vin.stride, static_cast<size_t>(out_w) * 3);
    }
  }
}

}  // namespace hdmlp
