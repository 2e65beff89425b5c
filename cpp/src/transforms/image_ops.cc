#include "hdmlp/transforms/image_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "hdmlp/transforms/libm.h"

namespace hdmlp {
namespace {

// Pillow's CLIP8 (Convert.c, getlist): an int clamped to 0..255.
inline uint8_t Clip8(int v) { return static_cast<uint8_t>(v <= 0 ? 0 : v < 256 ? v : 255); }

// convert("L") of one BGR pixel: ITU-R 601-2 luma in 16.16 fixed point (L24).
inline uint8_t Luma(const uint8_t* bgr) {
  return static_cast<uint8_t>((bgr[2] * 19595 + bgr[1] * 38470 + bgr[0] * 7471 + 0x8000) >> 16);
}

// Image.blend(degenerate, image, alpha) for one value: libImaging/Blend.c,
// in C float, truncated (clipped when extrapolating).
inline uint8_t Blend(int degenerate, int image, float alpha) {
  if (alpha >= 0 && alpha <= 1.0) {
    return static_cast<uint8_t>(static_cast<float>(degenerate) + alpha * static_cast<float>(image - degenerate));
  }
  const float temp = static_cast<float>(degenerate) + alpha * static_cast<float>(image - degenerate);
  if (temp <= 0.0) return 0;
  if (temp >= 255.0) return 255;
  return static_cast<uint8_t>(temp);
}

// Blend over a row of n values: out[i] = Blend(degenerate[i], image[i]),
// with the branch on alpha outside the loop so that it vectorises.
void BlendRow(const uint8_t* degenerate, const uint8_t* image, int64_t n, float alpha, uint8_t* out) {
  if (alpha >= 0 && alpha <= 1.0) {
    for (int64_t i = 0; i < n; ++i) {
      out[i] = static_cast<uint8_t>(static_cast<float>(degenerate[i]) +
                                    alpha * static_cast<float>(int{image[i]} - int{degenerate[i]}));
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    float t = static_cast<float>(degenerate[i]) + alpha * static_cast<float>(int{image[i]} - int{degenerate[i]});
    t = t <= 0.0f ? 0.0f : t;
    t = t >= 255.0f ? 255.0f : t;
    out[i] = static_cast<uint8_t>(t);
  }
}

// out = lut[channel][in] (lut in B, G, R order, as the pixels).
void ApplyLut(const ImageView& in, const uint8_t (*lut)[256], const MutableImageView& out) {
  for (int y = 0; y < in.height; ++y) {
    const uint8_t* s = in.data + y * in.stride;
    uint8_t* o = out.data + y * out.stride;
    for (int x = 0; x < in.width; ++x) {
      o[3 * x] = lut[0][s[3 * x]];
      o[3 * x + 1] = lut[1][s[3 * x + 1]];
      o[3 * x + 2] = lut[2][s[3 * x + 2]];
    }
  }
}

// The same table for every channel.
void ApplyLut(const ImageView& in, const uint8_t* lut, const MutableImageView& out) {
  for (int y = 0; y < in.height; ++y) {
    const uint8_t* s = in.data + y * in.stride;
    uint8_t* o = out.data + y * out.stride;
    for (int64_t i = 0; i < int64_t{in.width} * 3; ++i) o[i] = lut[s[i]];
  }
}

void Copy(const ImageView& in, const MutableImageView& out) {
  for (int y = 0; y < in.height; ++y) {
    std::memcpy(out.data + y * out.stride, in.data + y * in.stride, static_cast<size_t>(in.width) * 3);
  }
}

// Image.blend(constant, image, factor) as a table: the degenerate image is
// one level everywhere.
void BlendWithConstant(const ImageView& in, int degenerate, double factor, const MutableImageView& out) {
  const float alpha = static_cast<float>(factor);
  uint8_t lut[256];
  for (int v = 0; v < 256; ++v) lut[v] = Blend(degenerate, v, alpha);
  ApplyLut(in, lut, out);
}

// Per-channel histograms (B, G, R) of the image.
void Histograms(const ImageView& in, int64_t (*h)[256]) {
  for (int c = 0; c < 3; ++c) std::fill(h[c], h[c] + 256, 0);
  for (int y = 0; y < in.height; ++y) {
    const uint8_t* s = in.data + y * in.stride;
    for (int x = 0; x < in.width; ++x) {
      ++h[0][s[3 * x]];
      ++h[1][s[3 * x + 1]];
      ++h[2][s[3 * x + 2]];
    }
  }
}

// ---- rgb <-> hsv, as libImaging/Convert.c (types matter: float vs double) ----

void RgbToHsv(uint8_t r, uint8_t g, uint8_t b, uint8_t* out) {
  const uint8_t maxc = std::max(r, std::max(g, b));
  const uint8_t minc = std::min(r, std::min(g, b));
  uint8_t uh, us;
  if (minc == maxc) {
    uh = 0;
    us = 0;
  } else {
    const float cr = static_cast<float>(maxc - minc);
    const float s = cr / static_cast<float>(maxc);
    const float rc = static_cast<float>(maxc - r) / cr;
    const float gc = static_cast<float>(maxc - g) / cr;
    const float bc = static_cast<float>(maxc - b) / cr;
    float h;
    if (r == maxc) {
      h = bc - gc;
    } else if (g == maxc) {
      h = static_cast<float>(2.0 + rc - bc);
    } else {
      h = static_cast<float>(4.0 + gc - rc);
    }
    h = static_cast<float>(std::fmod((h / 6.0 + 1.0), 1.0));
    uh = Clip8(static_cast<int>(h * 255.0));
    us = Clip8(static_cast<int>(s * 255.0));
  }
  out[0] = uh;
  out[1] = us;
  out[2] = maxc;
}

void HsvToRgb(uint8_t h, uint8_t s, uint8_t v, uint8_t* rgb) {
  if (s == 0) {
    rgb[0] = rgb[1] = rgb[2] = v;
    return;
  }
  const int i = static_cast<int>(std::floor(static_cast<float>(h) * 6.0 / 255.0));
  const float f = static_cast<float>(static_cast<float>(h) * 6.0 / 255.0 - static_cast<float>(i));
  const float fs = static_cast<float>(static_cast<float>(s) / 255.0);
  const int p = static_cast<int>(std::round(static_cast<float>(v) * (1.0 - fs)));
  const int q = static_cast<int>(std::round(static_cast<float>(v) * (1.0 - fs * f)));
  const int t = static_cast<int>(std::round(static_cast<float>(v) * (1.0 - fs * (1.0 - f))));
  const uint8_t up = Clip8(p), uq = Clip8(q), ut = Clip8(t);
  switch (i % 6) {
    case 0: rgb[0] = v, rgb[1] = ut, rgb[2] = up; break;
    case 1: rgb[0] = uq, rgb[1] = v, rgb[2] = up; break;
    case 2: rgb[0] = up, rgb[1] = v, rgb[2] = ut; break;
    case 3: rgb[0] = up, rgb[1] = uq, rgb[2] = v; break;
    case 4: rgb[0] = ut, rgb[1] = up, rgb[2] = v; break;
    default: rgb[0] = v, rgb[1] = up, rgb[2] = uq; break;
  }
}

// ---- Image.transform (libImaging/Geometry.c) ----------------------------------

inline int Coord(double v) { return v < 0.0 ? -1 : static_cast<int>(v); }
inline int Floor(double v) { return v < 0.0 ? static_cast<int>(std::floor(v)) : static_cast<int>(v); }
inline int ClipTo(int v, int size) { return v < 0 ? 0 : v < size ? v : size - 1; }

void Fill(const MutableImageView& out, const uint8_t rgb[3]) {
  const uint8_t bgr[3] = {rgb[2], rgb[1], rgb[0]};
  for (int y = 0; y < out.height; ++y) {
    uint8_t* o = out.data + y * out.stride;
    if (bgr[0] == bgr[1] && bgr[1] == bgr[2]) {
      std::memset(o, bgr[0], static_cast<size_t>(out.width) * 3);
      continue;
    }
    for (int x = 0; x < out.width; ++x) std::memcpy(o + 3 * x, bgr, 3);
  }
}

inline void CopyPixel(const ImageView& in, int x, int y, uint8_t* o) { std::memcpy(o, in.data + y * in.stride + 3 * x, 3); }

// ImagingScaleAffine: a[1] == a[3] == 0, nearest.
void ScaleAffine(const ImageView& in, const double* a, const MutableImageView& out) {
  std::vector<int> xintab(static_cast<size_t>(out.width), 0);
  double xo = a[2] + a[0] * 0.5;
  double yo = a[5] + a[4] * 0.5;
  int xmin = out.width, xmax = 0;
  for (int x = 0; x < out.width; ++x) {
    const int xin = Coord(xo);
    if (xin >= 0 && xin < in.width) {
      xmax = x + 1;
      if (x < xmin) xmin = x;
      xintab[x] = xin;
    }
    xo += a[0];
  }
  for (int y = 0; y < out.height; ++y) {
    const int yi = Coord(yo);
    if (yi >= 0 && yi < in.height) {
      uint8_t* o = out.data + y * out.stride;
      for (int x = xmin; x < xmax; ++x) CopyPixel(in, xintab[x], yi, o + 3 * x);
    }
    yo += a[4];
  }
}

bool CheckFixed(const double* a, int x, int y) {
  return std::fabs(x * a[0] + y * a[1] + a[2]) < 32768.0 && std::fabs(x * a[3] + y * a[4] + a[5]) < 32768.0;
}

// affine_fixed: nearest in 16.16 fixed point.
void AffineFixed(const ImageView& in, const double* a, const MutableImageView& out) {
  auto fix = [](double v) { return Floor(v * 65536.0 + 0.5); };
  const int a0 = fix(a[0]), a1 = fix(a[1]), a3 = fix(a[3]), a4 = fix(a[4]);
  int a2 = fix(a[2] + a[0] * 0.5 + a[1] * 0.5);
  int a5 = fix(a[5] + a[3] * 0.5 + a[4] * 0.5);
  for (int y = 0; y < out.height; ++y) {
    int xx = a2, yy = a5;
    uint8_t* o = out.data + y * out.stride;
    for (int x = 0; x < out.width; ++x) {
      const int xin = xx >> 16;
      if (xin >= 0 && xin < in.width) {
        const int yin = yy >> 16;
        if (yin >= 0 && yin < in.height) CopyPixel(in, xin, yin, o + 3 * x);
      }
      xx += a0;
      yy += a3;
    }
    a2 += a1;
    a5 += a4;
  }
}

// ImagingTransformAffine's floating-point nearest path (huge coordinates).
void AffineFloat(const ImageView& in, const double* a, const MutableImageView& out) {
  double xo = a[2] + a[1] * 0.5 + a[0] * 0.5;
  double yo = a[5] + a[4] * 0.5 + a[3] * 0.5;
  for (int y = 0; y < out.height; ++y) {
    double xx = xo, yy = yo;
    uint8_t* o = out.data + y * out.stride;
    for (int x = 0; x < out.width; ++x) {
      const int xin = Coord(xx);
      if (xin >= 0 && xin < in.width) {
        const int yin = Coord(yy);
        if (yin >= 0 && yin < in.height) CopyPixel(in, xin, yin, o + 3 * x);
      }
      xx += a[0];
      yy += a[3];
    }
    xo += a[1];
    yo += a[4];
  }
}

// bilinear_filter32RGB.
bool BilinearPixel(const ImageView& in, double xin, double yin, uint8_t* o) {
  if (xin < 0.0 || xin >= in.width || yin < 0.0 || yin >= in.height) return false;
  xin -= 0.5;
  yin -= 0.5;
  const int x = Floor(xin), y = Floor(yin);
  const double dx = xin - x, dy = yin - y;
  const uint8_t* r0 = in.data + ClipTo(y, in.height) * in.stride;
  const bool second = y + 1 >= 0 && y + 1 < in.height;
  const uint8_t* r1 = second ? in.data + (y + 1) * in.stride : r0;
  const int x0 = ClipTo(x, in.width) * 3, x1 = ClipTo(x + 1, in.width) * 3;
  for (int b = 0; b < 3; ++b) {
    double v1 = r0[x0 + b] + (r0[x1 + b] - r0[x0 + b]) * dx;
    const double v2 = second ? r1[x0 + b] + (r1[x1 + b] - r1[x0 + b]) * dx : v1;
    v1 = v1 + (v2 - v1) * dy;
    o[b] = static_cast<uint8_t>(v1);
  }
  return true;
}

inline double Cubic(double v1, double v2, double v3, double v4, double d) {
  const double p1 = v2;
  const double p2 = -v1 + v3;
  const double p3 = 2 * (v1 - v2) + v3 - v4;
  const double p4 = -v1 + v2 - v3 + v4;
  return p1 + d * (p2 + d * (p3 + d * p4));
}

// bicubic_filter32RGB.
bool BicubicPixel(const ImageView& in, double xin, double yin, uint8_t* o) {
  if (xin < 0.0 || xin >= in.width || yin < 0.0 || yin >= in.height) return false;
  xin -= 0.5;
  yin -= 0.5;
  int x = Floor(xin), y = Floor(yin);
  const double dx = xin - x, dy = yin - y;
  --x;
  --y;
  int xs[4];
  for (int k = 0; k < 4; ++k) xs[k] = ClipTo(x + k, in.width) * 3;
  for (int b = 0; b < 3; ++b) {
    double v[4];
    for (int k = 0; k < 4; ++k) {
      const int yy = y + k;
      if (k > 0 && !(yy >= 0 && yy < in.height)) {
        v[k] = v[k - 1];
        continue;
      }
      const uint8_t* r = in.data + (k == 0 ? ClipTo(yy, in.height) : yy) * in.stride;
      v[k] = Cubic(r[xs[0] + b], r[xs[1] + b], r[xs[2] + b], r[xs[3] + b], dx);
    }
    const double value = Cubic(v[0], v[1], v[2], v[3], dy);
    o[b] = value <= 0.0 ? 0 : value >= 255.0 ? 255 : static_cast<uint8_t>(value);
  }
  return true;
}

void AffineFiltered(const ImageView& in, const double* a, TransformFilter filter, const MutableImageView& out) {
  for (int y = 0; y < out.height; ++y) {
    uint8_t* o = out.data + y * out.stride;
    const double yin = y + 0.5;
    for (int x = 0; x < out.width; ++x) {
      const double xin = x + 0.5;
      const double xx = a[0] * xin + a[1] * yin + a[2];
      const double yy = a[3] * xin + a[4] * yin + a[5];
      if (filter == TransformFilter::kBilinear) {
        BilinearPixel(in, xx, yy, o + 3 * x);
      } else {
        BicubicPixel(in, xx, yy, o + 3 * x);
      }
    }
  }
}

// Index of position p in numpy's reflect / symmetric extension of [0, n).
inline int Reflect(int64_t p, int n) {
  if (n == 1) return 0;
  const int64_t period = 2 * int64_t{n - 1};
  int64_t m = p % period;
  if (m < 0) m += period;
  return static_cast<int>(m >= n ? period - m : m);
}

inline int Symmetric(int64_t p, int n) {
  const int64_t period = 2 * int64_t{n};
  int64_t m = p % period;
  if (m < 0) m += period;
  return static_cast<int>(m >= n ? period - 1 - m : m);
}

// torchvision's _get_gaussian_kernel1d, in float32.
void GaussianKernel(int size, double sigma, std::vector<float>* k) {
  k->resize(static_cast<size_t>(size));
  const float half = static_cast<float>((size - 1) * 0.5);
  const float s = static_cast<float>(sigma);
  float sum = 0;
  for (int i = 0; i < size; ++i) {
    const float x = -half + static_cast<float>(i);  // linspace(-half, half, size): step 1, exact
    const float r = x / s;
    const float v = libm::Expf(-0.5f * (r * r));
    (*k)[i] = v;
    sum += v;
  }
  for (float& v : *k) v /= sum;
}

}  // namespace

// ---- Colour ----------------------------------------------------------------------

void AdjustBrightness(const ImageView& in, double factor, const MutableImageView& out) {
  BlendWithConstant(in, 0, factor, out);
}

void AdjustContrast(const ImageView& in, double factor, const MutableImageView& out) {
  // ImageStat's mean of convert("L"), from its histogram, then int(mean + 0.5).
  int64_t hist[256] = {};
  for (int y = 0; y < in.height; ++y) {
    const uint8_t* s = in.data + y * in.stride;
    for (int x = 0; x < in.width; ++x) ++hist[Luma(s + 3 * x)];
  }
  double sum = 0.0;
  for (int j = 0; j < 256; ++j) sum += static_cast<double>(j) * static_cast<double>(hist[j]);
  const double mean = sum / (static_cast<double>(in.width) * in.height);
  BlendWithConstant(in, static_cast<int>(mean + 0.5), factor, out);
}

void AdjustSaturation(const ImageView& in, double factor, const MutableImageView& out) {
  const float alpha = static_cast<float>(factor);
  const int64_t n = int64_t{in.width} * 3;
  // Per row: each value's degenerate level (its pixel's luma) first, then
  // one contiguous blend loop the compiler can vectorise.
  thread_local std::vector<uint8_t> luma;
  luma.resize(static_cast<size_t>(n));
  uint8_t* l = luma.data();
  for (int y = 0; y < in.height; ++y) {
    const uint8_t* s = in.data + y * in.stride;
    uint8_t* o = out.data + y * out.stride;
    for (int x = 0; x < in.width; ++x) l[3 * x] = l[3 * x + 1] = l[3 * x + 2] = Luma(s + 3 * x);
    BlendRow(l, s, n, alpha, o);
  }
}

void AdjustSharpness(const ImageView& in, double factor, const MutableImageView& out) {
  const float alpha = static_cast<float>(factor);
  const int w = in.width, h = in.height;
  if (w < 3 || h < 3) {  // ImagingFilter returns a copy: blending with it changes nothing
    Copy(in, out);
    return;
  }
  // ImageFilter.SMOOTH: kernel (1 1 1 / 1 5 1 / 1 1 1) / 13 in C float,
  // offset 0.5, summed row by row as libImaging/Filter.c does, clamped and
  // truncated; the border rows and columns are copied (blend(x, x) = x).
  const float k1 = 1.0f / 13.0f, k5 = 5.0f / 13.0f;
  const int64_t n = int64_t{w} * 3;
  thread_local std::vector<uint8_t> smooth;
  smooth.resize(static_cast<size_t>(n));
  for (int y = 0; y < h; ++y) {
    const uint8_t* s = in.data + y * in.stride;
    uint8_t* o = out.data + y * out.stride;
    if (y == 0 || y == h - 1) {
      std::memcpy(o, s, static_cast<size_t>(n));
      continue;
    }
    const uint8_t* up = s - in.stride;
    const uint8_t* down = s + in.stride;
    uint8_t* __restrict sm = smooth.data();
    std::memcpy(sm, s, 3);
    std::memcpy(sm + n - 3, s + n - 3, 3);
    for (int64_t i = 3; i < n - 3; ++i) {
      float ss = 0.5f;
      ss += static_cast<float>(down[i - 3]) * k1 + static_cast<float>(down[i]) * k1 +
            static_cast<float>(down[i + 3]) * k1;
      ss += static_cast<float>(s[i - 3]) * k1 + static_cast<float>(s[i]) * k5 + static_cast<float>(s[i + 3]) * k1;
      ss += static_cast<float>(up[i - 3]) * k1 + static_cast<float>(up[i]) * k1 + static_cast<float>(up[i + 3]) * k1;
      ss = ss < 0.0f ? 0.0f : ss;
      ss = ss > 255.0f ? 255.0f : ss;
      sm[i] = static_cast<uint8_t>(ss);
    }
    BlendRow(sm, s, n, alpha, o);
  }
}

void AdjustHue(const ImageView& in, double hue, const MutableImageView& out) {
  // np.int32(hue * 255).astype(np.uint8): truncated, then modulo 256.
  const uint8_t shift = static_cast<uint8_t>(static_cast<int32_t>(hue * 255));
  for (int y = 0; y < in.height; ++y) {
    const uint8_t* s = in.data + y * in.stride;
    uint8_t* o = out.data + y * out.stride;
    for (int x = 0; x < in.width; ++x) {
      const uint8_t* p = s + 3 * x;
      uint8_t hsv[3], rgb[3];
      RgbToHsv(p[2], p[1], p[0], hsv);
      HsvToRgb(static_cast<uint8_t>(hsv[0] + shift), hsv[1], hsv[2], rgb);
      o[3 * x] = rgb[2];
      o[3 * x + 1] = rgb[1];
      o[3 * x + 2] = rgb[0];
    }
  }
}

void ToGrayscale(const ImageView& in, const MutableImageView& out) {
  for (int y = 0; y < in.height; ++y) {
    const uint8_t* s = in.data + y * in.stride;
    uint8_t* o = out.data + y * out.stride;
    for (int x = 0; x < in.width; ++x) o[3 * x] = o[3 * x + 1] = o[3 * x + 2] = Luma(s + 3 * x);
  }
}

void Posterize(const ImageView& in, int bits, const MutableImageView& out) {
  const int mask = ~((1 << (8 - bits)) - 1);
  uint8_t lut[256];
  for (int v = 0; v < 256; ++v) lut[v] = static_cast<uint8_t>(v & mask);
  ApplyLut(in, lut, out);
}

void Solarize(const ImageView& in, double threshold, const MutableImageView& out) {
  uint8_t lut[256];
  for (int v = 0; v < 256; ++v) lut[v] = static_cast<uint8_t>(v < threshold ? v : 255 - v);
  ApplyLut(in, lut, out);
}

void Invert(const ImageView& in, const MutableImageView& out) {
  uint8_t lut[256];
  for (int v = 0; v < 256; ++v) lut[v] = static_cast<uint8_t>(255 - v);
  ApplyLut(in, lut, out);
}

void AutoContrast(const ImageView& in, const MutableImageView& out) {
  int64_t h[3][256];
  Histograms(in, h);
  uint8_t lut[3][256];
  for (int c = 0; c < 3; ++c) {
    int lo = 0, hi = 255;
    while (lo < 255 && h[c][lo] == 0) ++lo;
    while (hi > 0 && h[c][hi] == 0) --hi;
    if (hi <= lo) {
      for (int v = 0; v < 256; ++v) lut[c][v] = static_cast<uint8_t>(v);
      continue;
    }
    const double scale = 255.0 / (hi - lo);
    const double offset = -lo * scale;
    for (int v = 0; v < 256; ++v) {
      const int ix = static_cast<int>(v * scale + offset);  // Python int(): toward zero
      lut[c][v] = static_cast<uint8_t>(ix < 0 ? 0 : ix > 255 ? 255 : ix);
    }
  }
  ApplyLut(in, lut, out);
}

void Equalize(const ImageView& in, const MutableImageView& out) {
  int64_t h[3][256];
  Histograms(in, h);
  uint8_t lut[3][256];
  for (int c = 0; c < 3; ++c) {
    int64_t total = 0, last = 0;
    int nonzero = 0;
    for (int v = 0; v < 256; ++v) {
      if (h[c][v] == 0) continue;
      total += h[c][v];
      last = h[c][v];
      ++nonzero;
    }
    const int64_t step = nonzero <= 1 ? 0 : (total - last) / 255;
    if (step == 0) {
      for (int v = 0; v < 256; ++v) lut[c][v] = static_cast<uint8_t>(v);
      continue;
    }
    int64_t n = step / 2;
    for (int v = 0; v < 256; ++v) {
      lut[c][v] = Clip8(static_cast<int>(std::min<int64_t>(n / step, 256)));
      n += h[c][v];
    }
  }
  ApplyLut(in, lut, out);
}

// ---- Geometry --------------------------------------------------------------------

void AffineTransform(const ImageView& in, const double matrix[6], TransformFilter filter, const uint8_t fill_rgb[3],
                     const MutableImageView& out) {
  Fill(out, fill_rgb);  // PIL: Image.new(mode, size, fillcolor), then only the pixels that map inside are set
  const double* a = matrix;
  if (filter != TransformFilter::kNearest) {
    AffineFiltered(in, a, filter, out);
  } else if (a[1] == 0 && a[3] == 0) {
    ScaleAffine(in, a, out);
  } else if (CheckFixed(a, 0, 0) && CheckFixed(a, out.width, out.height) && CheckFixed(a, 0, out.height) &&
             CheckFixed(a, out.width, 0)) {
    AffineFixed(in, a, out);
  } else {
    AffineFloat(in, a, out);
  }
}

double PythonRound(double x, int ndigits) {
  // CPython rounds through a correctly rounded decimal string; glibc's
  // printf is correctly rounded too (half to even on exact ties).
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", ndigits, x);
  return std::strtod(buf, nullptr);
}

Rotation PlanRotation(int width, int height, double angle, bool expand, bool has_center, double cx, double cy) {
  Rotation r;
  r.width = width;
  r.height = height;
  // Python's angle % 360.0: in [0, 360).
  angle = std::fmod(angle, 360.0);
  if (angle != 0 && angle < 0) angle += 360.0;
  if (angle == 0) angle = 0.0;  // -0.0
  if (!has_center) {
    if (angle == 0) {
      r.fast = 4;
      return r;
    }
    if (angle == 180) {
      r.fast = 2;
      return r;
    }
    if ((angle == 90 || angle == 270) && (expand || width == height)) {
      r.fast = angle == 90 ? 1 : 3;
      r.width = height;
      r.height = width;
      return r;
    }
  }
  const double w = width, h = height;
  if (!has_center) {
    cx = w / 2;
    cy = h / 2;
  }
  const double radians = -(angle * (M_PI / 180.0));
  double* m = r.matrix;
  m[0] = PythonRound(libm::Cos(radians), 15);
  m[1] = PythonRound(libm::Sin(radians), 15);
  m[2] = 0.0;
  m[3] = PythonRound(-libm::Sin(radians), 15);
  m[4] = PythonRound(libm::Cos(radians), 15);
  m[5] = 0.0;
  auto apply = [&](double x, double y, double* ox, double* oy) {
    *ox = m[0] * x + m[1] * y + m[2];
    *oy = m[3] * x + m[4] * y + m[5];
  };
  double tx, ty;
  apply(-cx - 0, -cy - 0, &tx, &ty);
  m[2] = tx + cx;
  m[5] = ty + cy;
  if (expand) {
    double xs[4], ys[4];
    const double corners[4][2] = {{0, 0}, {w, 0}, {w, h}, {0, h}};
    for (int i = 0; i < 4; ++i) apply(corners[i][0], corners[i][1], &xs[i], &ys[i]);
    const int nw = static_cast<int>(std::ceil(*std::max_element(xs, xs + 4)) - std::floor(*std::min_element(xs, xs + 4)));
    const int nh = static_cast<int>(std::ceil(*std::max_element(ys, ys + 4)) - std::floor(*std::min_element(ys, ys + 4)));
    apply(-(nw - w) / 2.0, -(nh - h) / 2.0, &tx, &ty);
    m[2] = tx;
    m[5] = ty;
    r.width = nw;
    r.height = nh;
  }
  return r;
}

void Rotate(const ImageView& in, const Rotation& r, TransformFilter filter, const uint8_t fill_rgb[3],
            const MutableImageView& out) {
  if (r.fast == 0) {
    AffineTransform(in, r.matrix, filter, fill_rgb, out);
    return;
  }
  if (r.fast == 4) {
    Copy(in, out);
    return;
  }
  const int w = in.width, h = in.height;
  for (int yo = 0; yo < out.height; ++yo) {
    uint8_t* o = out.data + yo * out.stride;
    for (int xo = 0; xo < out.width; ++xo) {
      int x, y;
      if (r.fast == 1) {  // ROTATE_90 (counter-clockwise)
        x = w - 1 - yo;
        y = xo;
      } else if (r.fast == 3) {  // ROTATE_270
        x = yo;
        y = h - 1 - xo;
      } else {  // ROTATE_180
        x = w - 1 - xo;
        y = h - 1 - yo;
      }
      CopyPixel(in, x, y, o + 3 * xo);
    }
  }
}

void InverseAffineMatrix(double cx, double cy, double angle, double tx, double ty, double scale, double shear_x,
                         double shear_y, double matrix[6]) {
  constexpr double kDegToRad = M_PI / 180.0;  // Python's math.radians
  const double rot = angle * kDegToRad;
  const double sx = shear_x * kDegToRad;
  const double sy = shear_y * kDegToRad;
  const double a = libm::Cos(rot - sy) / libm::Cos(sy);
  const double b = -libm::Cos(rot - sy) * libm::Tan(sx) / libm::Cos(sy) - libm::Sin(rot);
  const double c = libm::Sin(rot - sy) / libm::Cos(sy);
  const double d = -libm::Sin(rot - sy) * libm::Tan(sx) / libm::Cos(sy) + libm::Cos(rot);
  double* m = matrix;
  m[0] = d / scale;
  m[1] = -b / scale;
  m[2] = 0.0 / scale;
  m[3] = -c / scale;
  m[4] = a / scale;
  m[5] = 0.0 / scale;
  m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
  m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
  m[2] += cx;
  m[5] += cy;
}

// ---- Padding ------------------------------------------------------------------------

void PadIndices(int n, int before, int after, PadMode mode, std::vector<int>* indices) {
  indices->resize(static_cast<size_t>(before) + n + after);
  for (int k = 0; k < before + n + after; ++k) {
    const int64_t p = int64_t{k} - before;
    int s;
    if (p >= 0 && p < n) {
      s = static_cast<int>(p);
    } else if (mode == PadMode::kConstant) {
      s = -1;
    } else if (mode == PadMode::kEdge) {
      s = p < 0 ? 0 : n - 1;
    } else if (mode == PadMode::kReflect) {
      s = Reflect(p, n);
    } else {
      s = Symmetric(p, n);
    }
    (*indices)[k] = s;
  }
}

void Remap(const ImageView& in, const int* xs, const int* ys, const uint8_t fill_rgb[3], const MutableImageView& out) {
  const uint8_t bgr[3] = {fill_rgb[2], fill_rgb[1], fill_rgb[0]};
  for (int y = 0; y < out.height; ++y) {
    uint8_t* o = out.data + y * out.stride;
    if (ys[y] < 0) {
      for (int x = 0; x < out.width; ++x) std::memcpy(o + 3 * x, bgr, 3);
      continue;
    }
    const uint8_t* row = in.data + ys[y] * in.stride;
    for (int x = 0; x < out.width; ++x) std::memcpy(o + 3 * x, xs[x] < 0 ? bgr : row + 3 * xs[x], 3);
  }
}

// ---- Blur ---------------------------------------------------------------------------------

void GaussianBlur(const ImageView& in, int kx, int ky, double sigma_x, double sigma_y, const MutableImageView& out,
                  OpScratch* scratch) {
  std::vector<float> wx, wy;
  GaussianKernel(kx, sigma_x, &wx);
  GaussianKernel(ky, sigma_y, &wy);
  const int w = in.width, h = in.height, px = kx / 2, py = ky / 2;
  const int64_t row_values = int64_t{w} * 3;
  // Horizontal pass over every row, into floats; each row is first padded.
  std::vector<float>& rows = scratch->floats;
  rows.resize(static_cast<size_t>(row_values * h));
  std::vector<uint8_t>& padded = scratch->bytes;
  padded.resize(static_cast<size_t>(int64_t{w + 2 * px} * 3));
  for (int y = 0; y < h; ++y) {
    const uint8_t* s = in.data + y * in.stride;
    for (int x = 0; x < w + 2 * px; ++x) std::memcpy(&padded[3 * static_cast<size_t>(x)], s + 3 * Reflect(x - px, w), 3);
    float* r = rows.data() + y * row_values;
    std::fill(r, r + row_values, 0.0f);
    for (int j = 0; j < kx; ++j) {
      const float k = wx[j];
      const uint8_t* p = padded.data() + 3 * j;
      for (int64_t i = 0; i < row_values; ++i) r[i] += k * static_cast<float>(p[i]);
    }
  }
  // Vertical pass, rounded half to even.
  std::vector<float> acc(static_cast<size_t>(row_values));
  for (int y = 0; y < h; ++y) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int i = 0; i < ky; ++i) {
      const float k = wy[i];
      const float* r = rows.data() + int64_t{Reflect(int64_t{y} + i - py, h)} * row_values;
      for (int64_t v = 0; v < row_values; ++v) acc[v] += k * r[v];
    }
    uint8_t* o = out.data + y * out.stride;
    for (int64_t v = 0; v < row_values; ++v) {
      const float r = std::nearbyint(acc[v]);
      o[v] = static_cast<uint8_t>(r < 0 ? 0 : r > 255 ? 255 : r);
    }
  }
}

}  // namespace hdmlp
