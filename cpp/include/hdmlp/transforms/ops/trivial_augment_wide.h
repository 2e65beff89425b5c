// TrivialAugmentWide: torchvision's TrivialAugmentWide on a PIL image. Per
// sample: one of its 14 ops uniformly (Identity, ShearX, ShearY,
// TranslateX, TranslateY, Rotate, Brightness, Color, Contrast, Sharpness,
// Posterize, Solarize, AutoContrast, Equalize), a magnitude bin uniformly
// (for the ops with magnitudes), and for the signed ops a sign (negative
// with probability 1/2); magnitudes from torchvision's "wide" space
// (shear 0..0.99, translate 0..32 px, rotate 0..135 degrees, enhance
// 0..0.99, posterize 8 - round(bin / ((bins - 1) / 6)) bits, solarize
// 255..0), as torch's float32 tables.
//
//   num_magnitude_bins: [31] (>= 2); interpolation; fill (augment_policy.h).
// Draws (RandomDraw): op, bin (-1: none), magnitude (signed).
//
// Thread-safety: immutable after Check. Not copyable.
#ifndef HDMLP_TRANSFORMS_OPS_TRIVIAL_AUGMENT_WIDE_H_
#define HDMLP_TRANSFORMS_OPS_TRIVIAL_AUGMENT_WIDE_H_

#include <memory>

#include "hdmlp/transforms/ops/augment_policy.h"

namespace hdmlp {

class TrivialAugmentWideOp : public AugmentPolicyOp {
 public:
  static std::unique_ptr<TransformOp> Create(const TransformSpec& spec, int index);
  explicit TrivialAugmentWideOp(const OpArgs& args);
  void Plan(SamplePlan* plan) const override;

 private:
  int num_bins_ = 31;
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_OPS_TRIVIAL_AUGMENT_WIDE_H_
