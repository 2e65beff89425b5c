// The augmentation operations of torchvision's policies (TrivialAugmentWide,
// RandAugment, AutoAugment): the op names, torchvision's _apply_op on a PIL
// image, and torch's float32 tables of magnitudes.
//
//   ShearX/Y     affine, shear = degrees(atan(magnitude)), centre (0, 0)
//   TranslateX/Y affine, translate = int(magnitude) pixels, about the centre
//   Rotate       Image.rotate(magnitude degrees)
//   Brightness, Color, Contrast, Sharpness   ImageEnhance with 1 + magnitude
//   Posterize (int(magnitude) bits), Solarize (threshold magnitude),
//   AutoContrast, Equalize, Invert, Identity
// with the interpolation (nearest, bilinear or bicubic) and fill the policy
// was given (image_ops.h has the pixel arithmetic).
//
// Thread-safety: pure functions; call from any thread.
#ifndef HDMLP_TRANSFORMS_AUGMENT_H_
#define HDMLP_TRANSFORMS_AUGMENT_H_

#include <cstdint>

#include "hdmlp/transforms/image_ops.h"
#include "hdmlp/transforms/transform_op.h"

namespace hdmlp {

enum class AugmentOp {
  kIdentity,
  kShearX,
  kShearY,
  kTranslateX,
  kTranslateY,
  kRotate,
  kBrightness,
  kColor,
  kContrast,
  kSharpness,
  kPosterize,
  kSolarize,
  kAutoContrast,
  kEqualize,
  kInvert,
};

// torchvision's name of the op ("ShearX", ...).
const char* AugmentOpName(AugmentOp op);

// Whether the op on a mirrored image gives the mirror of its result,
// bit for bit (colour tables and per-pixel blends do; geometry and the
// sharpness filter, whose float sums run in another order, do not).
bool AugmentCommutesWithFlips(AugmentOp op);

// torchvision's _apply_op(img, op, magnitude, interpolation, fill) on a PIL
// image; `in` and `out` have the same size.
void ApplyAugmentOp(AugmentOp op, double magnitude, TransformFilter filter, const uint8_t fill_rgb[3],
                    const ImageView& in, const MutableImageView& out);

// torch.linspace(start, end, steps)[index] in float32 (torch's CPU kernel:
// the first half from start, the second from end, each a fused
// multiply-add), as a double.
double TorchLinspace(double start, double end, int steps, int index);

// The magnitude of bin `bin` of the augmentation space RandAugment and
// AutoAugment share (torchvision's _augmentation_space), for an image of
// width x height; 0 for the ops without magnitudes. `signed_op` says
// whether a random sign applies.
double StandardMagnitude(AugmentOp op, int bin, int num_bins, int width, int height, bool* signed_op);

// The interpolation a policy's spec gives, as a transform filter.
TransformFilter FilterOf(Interpolation interpolation);

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_AUGMENT_H_
