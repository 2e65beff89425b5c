// RandomCrop: torchvision's RandomCrop on a PIL image: pad (padding), pad
// the width, then the height, by the missing size on both sides
// (pad_if_needed, as torchvision does), then crop at top = randint(0, H - h),
// left = randint(0, W - w) (none drawn when the sizes are equal). Without
// padding the crop is a view: only its pixels are decoded.
//
//   size: [s] or [h, w]; padding: as Pad's (optional); pad_if_needed: [0|1]
//   = [0]; fill: [v] or [r, g, b] = [0]; padding_mode: as Pad's.
// An image smaller than the crop (after padding) is a bad sample: its
// message names the file.
// Draws (RandomDraw): top, left (in the padded image).
//
// Thread-safety: immutable after Check. Not copyable.
#ifndef HDMLP_TRANSFORMS_OPS_RANDOM_CROP_H_
#define HDMLP_TRANSFORMS_OPS_RANDOM_CROP_H_

#include <cstdint>
#include <memory>

#include "hdmlp/transforms/image_ops.h"
#include "hdmlp/transforms/transform_op.h"

namespace hdmlp {

class RandomCropOp : public TransformOp {
 public:
  static std::unique_ptr<TransformOp> Create(const TransformSpec& spec, int index);
  explicit RandomCropOp(const OpArgs& args);
  void Check(ChainState* chain) override;
  void Plan(SamplePlan* plan) const override;
  void RunImage(const OpParams& params, const ImageView& in, const MutableImageView& out,
                OpScratch* scratch) const override;

 private:
  int height_ = 0, width_ = 0;
  int pads_[4] = {};  // left, top, right, bottom
  bool pad_if_needed_ = false;
  PadMode mode_ = PadMode::kConstant;
  uint8_t fill_[3] = {0, 0, 0};
  int fill_count_ = 1;
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_OPS_RANDOM_CROP_H_
