// ColorJitter: torchvision's ColorJitter on a PIL image. Per sample it draws
// the order of its four adjustments (torch.randperm(4): 0 brightness,
// 1 contrast, 2 saturation, 3 hue) and a factor uniform in each given range,
// then applies them in that order with PIL's arithmetic (image_ops.h).
//
//   brightness, contrast, saturation: [f] (range [max(0, 1 - f), 1 + f]) or
//   [lo, hi] with 0 <= lo <= hi; hue: [f] (range [-f, f], f <= 0.5) or
//   [lo, hi] in [-0.5, 0.5]. Not given, or a range that is only the identity
//   (1 for the first three, 0 for hue): the adjustment is skipped.
// Draws (RandomDraw): order (4 digits, e.g. 2031), brightness, contrast,
// saturation, hue (each only when its adjustment is on).
//
// Thread-safety: immutable after Check. Not copyable.
#ifndef HDMLP_TRANSFORMS_OPS_COLOR_JITTER_H_
#define HDMLP_TRANSFORMS_OPS_COLOR_JITTER_H_

#include <memory>

#include "hdmlp/transforms/transform_op.h"

namespace hdmlp {

class ColorJitterOp : public TransformOp {
 public:
  static std::unique_ptr<TransformOp> Create(const TransformSpec& spec, int index);
  explicit ColorJitterOp(const OpArgs& args);
  void Check(ChainState* chain) override;
  void Plan(SamplePlan* plan) const override;
  void RunImage(const OpParams& params, const ImageView& in, const MutableImageView& out,
                OpScratch* scratch) const override;

 private:
  // For each adjustment: on, and its range.
  bool on_[4] = {};
  double range_[4][2] = {};
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_OPS_COLOR_JITTER_H_
