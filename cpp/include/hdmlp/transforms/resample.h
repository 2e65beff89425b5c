// Image resampling that reproduces PIL's Image.resize bit for bit.
//
// torchvision resizes PIL images with Image.resize, whose filters (bilinear,
// bicubic, ...) are always antialiased: when shrinking, the filter's support
// grows with the scale factor, so every input pixel contributes. OpenCV's
// INTER_LINEAR does not do that (it aliases when shrinking), and INTER_AREA
// is a box filter. Resample implements PIL's algorithm (libImaging/Resample.c:
// separable two-pass convolution, coefficients normalised to 22-bit fixed
// point, an 8-bit intermediate image), so for the same input pixels the
// output is identical to PIL's. The order of the two passes follows Pillow
// 13: vertical first when the height shrinks by more than twice as many
// pixels as the width (out_h < in_h and in_h - out_h > 2 * (in_w - out_w)),
// else horizontal first. Pillow before that change (#9549) always went
// horizontal first; in the vertical-first cases its results differ from
// these by at most 1 level in some pixels.
//
// Thread-safety: Resample is reentrant; a ResampleScratch belongs to one
// thread at a time.
#ifndef HDMLP_TRANSFORMS_RESAMPLE_H_
#define HDMLP_TRANSFORMS_RESAMPLE_H_

#include <cstdint>
#include <vector>

#include "hdmlp/transforms/image_view.h"

namespace hdmlp {

// PIL's filters, numbered as PIL numbers them (Image.Resampling).
enum class Interpolation : int {
  kNearest = 0,
  kLanczos = 1,
  kBilinear = 2,
  kBicubic = 3,
  kBox = 4,
  kHamming = 5,
};
const char* InterpolationName(Interpolation interpolation);

// Memory reused from call to call.
struct ResampleScratch {
  std::vector<double> weights;
  std::vector<int32_t> kx, ky;
  std::vector<int> bx, by;
  std::vector<uint8_t> temp;
  std::vector<int32_t> acc;
  std::vector<int32_t> table;  // SIMD coefficient layout
  std::vector<uint8_t> safe;
};

// Resample runs vector kernels where the CPU has them (simd.h); the bytes
// are the same either way.

// The channel order of an ImageView does not matter to Resample.

// Resamples the region box = {x0, y0, x1, y1} of src (PIL's `box` argument,
// in float as PIL has it; taps are clamped to src, not to the box) to
// out_w x out_h, writing rows of out_w * 3 bytes dst_stride apart into dst.
// Bit-identical to PIL's Image.resize((out_w, out_h), filter, box) when
// antialias is true. antialias = false keeps the filter's support at its
// nominal width when shrinking (torch's interpolate(antialias=False) for
// bilinear); PIL has no such mode.
void Resample(const ImageView& src, const float box[4], int out_w, int out_h, Interpolation filter,
              bool antialias, uint8_t* dst, int64_t dst_stride, ResampleScratch* scratch);

// One resample: the input's size, PIL's box on it, the output's size and
// the filter.
struct ResampleGeometry {
  int src_width = 0;
  int src_height = 0;
  float box[4] = {};
  int out_width = 0;
  int out_height = 0;
  Interpolation filter = Interpolation::kBilinear;
  bool antialias = true;
};

// The input pixels that the output pixels in `window` (a rectangle of the
// out_width x out_height result) read.
PixelRect ResampleSourceRegion(const ResampleGeometry& g, const PixelRect& window, ResampleScratch* scratch);

// Computes only the output pixels in `window`, with the values Resample
// gives them (so a resize followed by a crop can skip the rest, and the
// decoder can skip the input the window does not read). `src` shows the
// input from pixel (origin_x, origin_y) on and must cover
// ResampleSourceRegion(g, window); dst gets window.height rows of
// window.width pixels, dst_stride bytes apart.
void ResampleWindow(const ImageView& src, int origin_x, int origin_y, const ResampleGeometry& g,
                    const PixelRect& window, uint8_t* dst, int64_t dst_stride, ResampleScratch* scratch);

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_RESAMPLE_H_
