#include "hdmlp/transforms/ops/augment_policy.h"

#include <cmath>

#include "hdmlp/transforms/sample_plan.h"

namespace hdmlp {
namespace {

// Sub-ops that leave every pixel as it is, exactly (PIL copies).
bool IsIdentity(AugmentOp op, double magnitude) {
  switch (op) {
    case AugmentOp::kIdentity: return true;
    case AugmentOp::kShearX:
    case AugmentOp::kShearY:
    case AugmentOp::kRotate:
    case AugmentOp::kBrightness:
    case AugmentOp::kColor:
    case AugmentOp::kContrast:
    case AugmentOp::kSharpness: return magnitude == 0;
    case AugmentOp::kTranslateX:
    case AugmentOp::kTranslateY: return std::trunc(magnitude) == 0;
    case AugmentOp::kPosterize: return static_cast<int>(magnitude) == 8;
    default: return false;
  }
}

}  // namespace

AugmentPolicyOp::AugmentPolicyOp(const OpArgs& args) : TransformOp(args) {
  filter_ = FilterOf(args.Interp(Interpolation::kNearest,
                                 {Interpolation::kNearest, Interpolation::kBilinear, Interpolation::kBicubic}));
  args.Fill("fill", fill_, &fill_count_);
}

void AugmentPolicyOp::Check(ChainState* chain) {
  chain->RequireImage(*this, "hdmlp augments the 8-bit image, as torchvision does with PIL images");
  if (chain->channels == 1 && fill_count_ == 3) Fail("fill must be one value: the image has 1 channel (Grayscale)");
}

void AugmentPolicyOp::AddSubOp(SamplePlan* plan, AugmentOp op, double magnitude) const {
  if (IsIdentity(op, magnitude)) return;
  OpParams p;
  p.v[0] = static_cast<double>(op);
  p.v[1] = magnitude;
  plan->ImageOp(*this, p, plan->width(), plan->height(), AugmentCommutesWithFlips(op));
}

void AugmentPolicyOp::RunImage(const OpParams& p, const ImageView& in, const MutableImageView& out,
                               OpScratch*) const {
  ApplyAugmentOp(static_cast<AugmentOp>(static_cast<int>(p.v[0])), p.v[1], filter_, fill_, in, out);
}

}  // namespace hdmlp
