// RandomResizedCrop: torchvision's RandomResizedCrop: a crop drawn with
// get_params (up to 10 tries of area U(scale) * H * W and aspect
// exp(U(log ratio)), then the central-crop fallback), resized to size.
//
//   size: [s] or [h, w]; scale: [lo, hi] = [0.08, 1]; ratio: [lo, hi] =
//   [3/4, 4/3]; interpolation: [PIL code] = [2]; antialias: [0|1] = [1].
// Draws (RandomDraw): top, left, height, width of the crop, in the
// coordinates of the op's input.
//
// Thread-safety: immutable after Check. Not copyable.
#ifndef HDMLP_TRANSFORMS_OPS_RANDOM_RESIZED_CROP_H_
#define HDMLP_TRANSFORMS_OPS_RANDOM_RESIZED_CROP_H_

#include <memory>

#include "hdmlp/transforms/resample.h"
#include "hdmlp/transforms/transform_op.h"

namespace hdmlp {

class RandomResizedCropOp : public TransformOp {
 public:
  static std::unique_ptr<TransformOp> Create(const TransformSpec& spec, int index);
  explicit RandomResizedCropOp(const OpArgs& args);
  void Check(ChainState* chain) override;
  void Plan(SamplePlan* plan) const override;

 private:
  int height_ = 0, width_ = 0;
  double scale_[2] = {0.08, 1.0};
  double ratio_[2] = {3.0 / 4.0, 4.0 / 3.0};
  Interpolation interpolation_ = Interpolation::kBilinear;
  bool antialias_ = true;
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_OPS_RANDOM_RESIZED_CROP_H_
