// RandomErasing: torchvision's RandomErasing, on the tensor (after
// ToTensor/Normalize, as torchvision's recipes place it). With probability p
// (one uniform double; none drawn when p = 0) it tries up to 10 times an
// area U(scale) * H * W and aspect exp(U(log ratio)), h = round(sqrt(area *
// aspect)), w = round(sqrt(area / aspect)), accepted when h < H and w < W,
// then top = randint(0, H - h), left = randint(0, W - w), and sets that
// rectangle to `value` (per channel) or to standard normal noise; after 10
// misses the sample is left as is.
//
//   p: [0.5]; scale: [min, max] in [0, 1] = [0.02, 0.33]; ratio: [min, max]
//   = [0.3, 3.3]; value: [v] or one per channel = [0]; random: [0|1]
//   (value="random"; float output only); inplace: ignored.
// Normalize may not follow it (the erased values would be normalised).
// With ToUint8, values are truncated to 8-bit levels as a uint8 tensor's
// assignment does.
// Draws (RandomDraw): erase, and when erasing top, left, height, width.
//
// Thread-safety: immutable after Check. Not copyable.
#ifndef HDMLP_TRANSFORMS_OPS_RANDOM_ERASING_H_
#define HDMLP_TRANSFORMS_OPS_RANDOM_ERASING_H_

#include <memory>
#include <vector>

#include "hdmlp/transforms/transform_op.h"

namespace hdmlp {

class RandomErasingOp : public TransformOp {
 public:
  static std::unique_ptr<TransformOp> Create(const TransformSpec& spec, int index);
  explicit RandomErasingOp(const OpArgs& args);
  void Check(ChainState* chain) override;
  void Plan(SamplePlan* plan) const override;
  void RunTensor(const OpParams& params, const TensorView& out) const override;

 private:
  double p_ = 0.5;
  double scale_[2] = {0.02, 0.33};
  double ratio_[2] = {0.3, 3.3};
  bool random_ = false;
  std::vector<double> value_ = {0.0};
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_OPS_RANDOM_ERASING_H_
