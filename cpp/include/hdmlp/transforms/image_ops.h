// 8-bit image operations with the arithmetic of the libraries torchvision
// calls on PIL images, so that hdmlp's ops give torchvision's pixels:
//
//   Pillow's ImageEnhance (Brightness, Contrast, Color, Sharpness: Image.blend
//   of the image with a "degenerate" image, in C float as libImaging/Blend.c),
//   ImageOps (posterize, solarize, invert, autocontrast, equalize: lookup
//   tables as Pillow builds them), convert("L") (ITU-R 601-2 in 16.16 fixed
//   point), the HSV round trip of torchvision's adjust_hue, Image.transform
//   (AFFINE; libImaging/Geometry.c's nearest, bilinear and bicubic paths,
//   including its 16.16 fixed-point nearest path) and Image.rotate (its
//   matrix, expand rule and transpose fast paths);
//   numpy.pad's modes (constant, edge, reflect, symmetric) for Pad and
//   RandomCrop;
//   torch's gaussian_blur (a float32 kernel on a reflect-padded image), here
//   separable in float32: within one 8-bit level of torch's 2-D convolution.
//
// Pixels are 3-channel BGR (OpenCV's order, as the pipeline keeps them);
// colours given to these functions are in R, G, B order. Every function
// reads `in` and writes all of `out` (never the same memory), whose size is
// the caller's: in's size unless stated.
//
// Thread-safety: all functions are reentrant.
#ifndef HDMLP_TRANSFORMS_IMAGE_OPS_H_
#define HDMLP_TRANSFORMS_IMAGE_OPS_H_

#include <cstdint>
#include <vector>

#include "hdmlp/transforms/image_view.h"
#include "hdmlp/transforms/transform_op.h"

namespace hdmlp {

// ---- Colour (ImageEnhance, ImageOps, convert) --------------------------------

// ImageEnhance.Brightness(img).enhance(factor).
void AdjustBrightness(const ImageView& in, double factor, const MutableImageView& out);
// ImageEnhance.Contrast: blends with the mean of convert("L"), rounded.
void AdjustContrast(const ImageView& in, double factor, const MutableImageView& out);
// ImageEnhance.Color (torchvision's adjust_saturation): blends with convert("L").
void AdjustSaturation(const ImageView& in, double factor, const MutableImageView& out);
// ImageEnhance.Sharpness: blends with ImageFilter.SMOOTH (3x3, borders kept).
void AdjustSharpness(const ImageView& in, double factor, const MutableImageView& out);
// torchvision's adjust_hue on a PIL image: HSV, H += int(hue * 255) mod 256,
// back to RGB. hue in [-0.5, 0.5].
void AdjustHue(const ImageView& in, double hue, const MutableImageView& out);
// convert("L"), replicated to the three channels.
void ToGrayscale(const ImageView& in, const MutableImageView& out);
// ImageOps.posterize (bits 1..8), solarize (levels >= threshold inverted),
// invert, autocontrast (cutoff 0), equalize.
void Posterize(const ImageView& in, int bits, const MutableImageView& out);
void Solarize(const ImageView& in, double threshold, const MutableImageView& out);
void Invert(const ImageView& in, const MutableImageView& out);
void AutoContrast(const ImageView& in, const MutableImageView& out);
void Equalize(const ImageView& in, const MutableImageView& out);

// ---- Geometry (Image.transform, Image.rotate) -------------------------------------

// PIL's transform filters (Image.transform accepts only these three).
enum class TransformFilter { kNearest, kBilinear, kBicubic };

// Image.transform(out size, AFFINE, matrix, filter, fillcolor=fill_rgb):
// output pixel (x, y) samples the input at matrix * (x + 0.5, y + 0.5), as
// PIL computes it; outside the input, fill.
void AffineTransform(const ImageView& in, const double matrix[6], TransformFilter filter, const uint8_t fill_rgb[3],
                     const MutableImageView& out);

// What Image.rotate(angle, expand=..., center=...) does: a transpose (fast:
// 1 = 90, 2 = 180, 3 = 270 degrees counter-clockwise, 4 = a copy) or an
// affine transform with `matrix`; the output size.
struct Rotation {
  int fast = 0;  // 0: affine
  double matrix[6] = {};
  int width = 0, height = 0;
};
// has_center: rotate about (cx, cy) instead of the image's centre.
Rotation PlanRotation(int width, int height, double angle, bool expand, bool has_center, double cx, double cy);
void Rotate(const ImageView& in, const Rotation& rotation, TransformFilter filter, const uint8_t fill_rgb[3],
            const MutableImageView& out);

// torchvision's _get_inverse_affine_matrix(center, angle, translate, scale,
// shear) (degrees; the matrix Image.transform takes).
void InverseAffineMatrix(double cx, double cy, double angle, double tx, double ty, double scale, double shear_x,
                         double shear_y, double matrix[6]);

// Python's round(x, ndigits) (correctly rounded, half to even).
double PythonRound(double x, int ndigits);

// ---- Padding (numpy.pad) ----------------------------------------------------------

enum class PadMode { kConstant = 0, kEdge = 1, kReflect = 2, kSymmetric = 3 };

// Appends the source index of each position of a dimension of size n padded
// by `before` and `after` in `mode` (-1: the fill value), numpy.pad's rules
// (reflect and symmetric repeat beyond the size, as numpy does).
void PadIndices(int n, int before, int after, PadMode mode, std::vector<int>* indices);

// out(x, y) = in(xs[x], ys[y]), or fill where either is -1.
void Remap(const ImageView& in, const int* xs, const int* ys, const uint8_t fill_rgb[3], const MutableImageView& out);

// ---- Blur (torch) -------------------------------------------------------------------

// torchvision's gaussian_blur(img, [kx, ky], [sigma_x, sigma_y]) on an 8-bit
// image: float32 kernels, reflect padding (repeated for images smaller than
// the kernel), rounded half to even.
void GaussianBlur(const ImageView& in, int kx, int ky, double sigma_x, double sigma_y, const MutableImageView& out,
                  OpScratch* scratch);

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_IMAGE_OPS_H_
