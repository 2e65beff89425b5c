// RandomAffine: torchvision's RandomAffine on a PIL image. Per sample, in
// torchvision's order: an angle uniform in degrees; with translate (a, b),
// tx = round(U(-a * W, a * W)) and ty = round(U(-b * H, b * H)); with scale,
// a factor uniform in it; with shear, shear_x uniform in its first pair and
// shear_y in its second (when given). Then PIL's Image.transform with
// torchvision's inverse affine matrix about the centre (image_ops.h).
//
//   degrees: [d] or [min, max] (required); translate: [a, b] in [0, 1];
//   scale: [min, max] (> 0); shear: [s] (x in [-s, s]), [min, max] (x) or
//   [xmin, xmax, ymin, ymax]; interpolation: [0] nearest (2 bilinear, 3
//   bicubic); fill: [v] or [r, g, b] = [0]; center: [x, y] (pixels).
// Draws (RandomDraw): angle, translate_x, translate_y, scale, shear_x, shear_y.
//
// Thread-safety: immutable after Check. Not copyable.
#ifndef HDMLP_TRANSFORMS_OPS_RANDOM_AFFINE_H_
#define HDMLP_TRANSFORMS_OPS_RANDOM_AFFINE_H_

#include <cstdint>
#include <memory>

#include "hdmlp/transforms/image_ops.h"
#include "hdmlp/transforms/transform_op.h"

namespace hdmlp {

class RandomAffineOp : public TransformOp {
 public:
  static std::unique_ptr<TransformOp> Create(const TransformSpec& spec, int index);
  explicit RandomAffineOp(const OpArgs& args);
  void Check(ChainState* chain) override;
  void Plan(SamplePlan* plan) const override;
  void RunImage(const OpParams& params, const ImageView& in, const MutableImageView& out,
                OpScratch* scratch) const override;

 private:
  double degrees_[2] = {};
  bool has_translate_ = false;
  double translate_[2] = {};
  bool has_scale_ = false;
  double scale_[2] = {1, 1};
  int shear_count_ = 0;  // 0, 2 or 4 values
  double shear_[4] = {};
  TransformFilter filter_ = TransformFilter::kNearest;
  bool has_center_ = false;
  double center_[2] = {};
  uint8_t fill_[3] = {0, 0, 0};
  int fill_count_ = 1;
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_OPS_RANDOM_AFFINE_H_
