// Pad: torchvision's Pad on a PIL image (numpy.pad's modes; image_ops.h).
//
//   padding: [p] (all sides), [lr, tb] or [left, top, right, bottom];
//            non-negative integers (required);
//   fill: [v] or [r, g, b] (8-bit levels) = [0], for padding_mode constant;
//   padding_mode: [0] constant, [1] edge, [2] reflect, [3] symmetric.
// The padding helpers here serve RandomCrop too.
//
// Thread-safety: immutable after Check. Not copyable.
#ifndef HDMLP_TRANSFORMS_OPS_PAD_H_
#define HDMLP_TRANSFORMS_OPS_PAD_H_

#include <cstdint>
#include <memory>

#include "hdmlp/transforms/image_ops.h"
#include "hdmlp/transforms/transform_op.h"

namespace hdmlp {

// Reads a padding argument into left, top, right, bottom; false when absent.
bool ReadPadding(const OpArgs& args, const char* name, int pads[4]);
PadMode ReadPadMode(const OpArgs& args);

class PadOp : public TransformOp {
 public:
  static std::unique_ptr<TransformOp> Create(const TransformSpec& spec, int index);
  explicit PadOp(const OpArgs& args);
  void Check(ChainState* chain) override;
  void Plan(SamplePlan* plan) const override;
  void RunImage(const OpParams& params, const ImageView& in, const MutableImageView& out,
                OpScratch* scratch) const override;

 private:
  int pads_[4] = {};  // left, top, right, bottom
  PadMode mode_ = PadMode::kConstant;
  uint8_t fill_[3] = {0, 0, 0};
  int fill_count_ = 1;
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_OPS_PAD_H_
