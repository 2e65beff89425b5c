// GaussianBlur: torchvision's GaussianBlur: per sample a sigma uniform in
// [min, max], then torchvision's gaussian_blur with [sigma, sigma]: a float32
// Gaussian kernel on the reflect-padded 8-bit image, rounded (image_ops.h;
// within one level of torch's 2-D convolution).
//
//   kernel_size: [k] or [kx, ky], odd and positive; sigma: [s] or [min, max]
//   with 0 < min <= max = [0.1, 2.0].
// Draws (RandomDraw): sigma.
//
// Thread-safety: immutable after Check. Not copyable.
#ifndef HDMLP_TRANSFORMS_OPS_GAUSSIAN_BLUR_H_
#define HDMLP_TRANSFORMS_OPS_GAUSSIAN_BLUR_H_

#include <memory>

#include "hdmlp/transforms/transform_op.h"

namespace hdmlp {

class GaussianBlurOp : public TransformOp {
 public:
  static std::unique_ptr<TransformOp> Create(const TransformSpec& spec, int index);
  explicit GaussianBlurOp(const OpArgs& args);
  void Check(ChainState* chain) override;
  void Plan(SamplePlan* plan) const override;
  void RunImage(const OpParams& params, const ImageView& in, const MutableImageView& out,
                OpScratch* scratch) const override;

 private:
  int kx_ = 0, ky_ = 0;
  double sigma_[2] = {0.1, 2.0};
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_OPS_GAUSSIAN_BLUR_H_
