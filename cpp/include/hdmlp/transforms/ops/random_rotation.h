// RandomRotation: torchvision's RandomRotation on a PIL image: an angle
// uniform in [min, max] degrees (counter-clockwise), then PIL's
// Image.rotate (image_ops.h: its matrix, its expand rule, its transposes
// for multiples of 90 degrees).
//
//   degrees: [d] (range [-d, d]) or [min, max] (required);
//   interpolation: [PIL code] = [0] (nearest; 2 bilinear, 3 bicubic);
//   expand: [0|1] = [0] (the output grows to hold the whole rotated image,
//   so its size varies: follow it with a resize or crop for fixed batches);
//   center: [x, y] (pixels; default the image's centre); fill: [v] or
//   [r, g, b] = [0].
// Draws (RandomDraw): angle.
//
// Thread-safety: immutable after Check. Not copyable.
#ifndef HDMLP_TRANSFORMS_OPS_RANDOM_ROTATION_H_
#define HDMLP_TRANSFORMS_OPS_RANDOM_ROTATION_H_

#include <cstdint>
#include <memory>

#include "hdmlp/transforms/image_ops.h"
#include "hdmlp/transforms/transform_op.h"

namespace hdmlp {

// degrees: [d] -> [-d, d] (d >= 0), or [min, max] with min <= max.
void ReadDegrees(const OpArgs& args, const char* name, double out[2]);

class RandomRotationOp : public TransformOp {
 public:
  static std::unique_ptr<TransformOp> Create(const TransformSpec& spec, int index);
  explicit RandomRotationOp(const OpArgs& args);
  void Check(ChainState* chain) override;
  void Plan(SamplePlan* plan) const override;
  void RunImage(const OpParams& params, const ImageView& in, const MutableImageView& out,
                OpScratch* scratch) const override;

 private:
  double degrees_[2] = {};
  TransformFilter filter_ = TransformFilter::kNearest;
  bool expand_ = false;
  bool has_center_ = false;
  double center_[2] = {};
  uint8_t fill_[3] = {0, 0, 0};
  int fill_count_ = 1;
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_OPS_RANDOM_ROTATION_H_
