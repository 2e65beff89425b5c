// RandAugment: torchvision's RandAugment on a PIL image. Per sample,
// num_ops times: one of its 14 ops uniformly (Identity, ShearX, ShearY,
// TranslateX, TranslateY, Rotate, Brightness, Color, Contrast, Sharpness,
// Posterize, Solarize, AutoContrast, Equalize) at the fixed magnitude bin
// `magnitude` of the standard space (augment.h: shear 0..0.3, translate
// 0..150/331 of the size, rotate 0..30 degrees, enhance 0..0.9, posterize
// 8 - round(bin / ((bins - 1) / 4)), solarize 255..0), negated with
// probability 1/2 for the signed ops; applied in order.
//
//   num_ops: [2]; magnitude: [9] (< num_magnitude_bins);
//   num_magnitude_bins: [31]; interpolation; fill (augment_policy.h).
// Draws (RandomDraw): op_<k>, magnitude_<k> (signed), k = 0..num_ops-1.
//
// Thread-safety: immutable after Check. Not copyable.
#ifndef HDMLP_TRANSFORMS_OPS_RAND_AUGMENT_H_
#define HDMLP_TRANSFORMS_OPS_RAND_AUGMENT_H_

#include <memory>

#include "hdmlp/transforms/ops/augment_policy.h"

namespace hdmlp {

class RandAugmentOp : public AugmentPolicyOp {
 public:
  static std::unique_ptr<TransformOp> Create(const TransformSpec& spec, int index);
  explicit RandAugmentOp(const OpArgs& args);
  void Plan(SamplePlan* plan) const override;

 private:
  int num_ops_ = 2;
  int magnitude_ = 9;
  int num_bins_ = 31;
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_OPS_RAND_AUGMENT_H_
