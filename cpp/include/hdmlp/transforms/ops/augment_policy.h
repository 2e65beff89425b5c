// AugmentPolicyOp: what torchvision's augmentation policies
// (TrivialAugmentWide, RandAugment, AutoAugment; one file each) share: their
// interpolation and fill arguments, and running a chosen sub-op
// (augment.h) on the 8-bit image. Each policy's Plan draws its sub-ops and
// adds them with AddSubOp.
//
//   interpolation: [PIL code] = [0] (nearest; 2 bilinear and 3 bicubic too);
//   fill: [v] or [r, g, b] (8-bit levels) = [0].
//
// Thread-safety: immutable after Check. Not copyable.
#ifndef HDMLP_TRANSFORMS_OPS_AUGMENT_POLICY_H_
#define HDMLP_TRANSFORMS_OPS_AUGMENT_POLICY_H_

#include <cstdint>
#include <iterator>

#include "hdmlp/transforms/augment.h"
#include "hdmlp/transforms/transform_op.h"

namespace hdmlp {

class AugmentPolicyOp : public TransformOp {
 public:
  explicit AugmentPolicyOp(const OpArgs& args);
  void Check(ChainState* chain) override;
  void RunImage(const OpParams& params, const ImageView& in, const MutableImageView& out,
                OpScratch* scratch) const override;

 protected:
  // TrivialAugmentWide's and RandAugment's sub-ops, in the order of
  // torchvision's _augmentation_space (the same for both).
  static constexpr AugmentOp kSpace[] = {
      AugmentOp::kIdentity,  AugmentOp::kShearX,   AugmentOp::kShearY,       AugmentOp::kTranslateX,
      AugmentOp::kTranslateY, AugmentOp::kRotate,  AugmentOp::kBrightness,   AugmentOp::kColor,
      AugmentOp::kContrast,  AugmentOp::kSharpness, AugmentOp::kPosterize,   AugmentOp::kSolarize,
      AugmentOp::kAutoContrast, AugmentOp::kEqualize};

  // Plans sub-op `op` with `magnitude` on the current image (nothing when it
  // changes no pixel, e.g. Identity or a zero shear).
  void AddSubOp(SamplePlan* plan, AugmentOp op, double magnitude) const;

 private:
  TransformFilter filter_ = TransformFilter::kNearest;
  uint8_t fill_[3] = {0, 0, 0};
  int fill_count_ = 1;
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_OPS_AUGMENT_POLICY_H_
