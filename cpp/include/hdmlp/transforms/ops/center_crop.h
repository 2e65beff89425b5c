// CenterCrop: torchvision's CenterCrop. The offsets are round((H - h) / 2)
// with Python's half-to-even round; an image smaller than the crop is
// zero-padded (the short dimensions only), then cropped, as torchvision does.
//
//   size: [s] or [h, w].
// A crop larger than the size a fixed resize or crop before it makes is
// refused when the pipeline is built.
//
// Thread-safety: immutable after Check. Not copyable.
#ifndef HDMLP_TRANSFORMS_OPS_CENTER_CROP_H_
#define HDMLP_TRANSFORMS_OPS_CENTER_CROP_H_

#include <memory>

#include "hdmlp/transforms/transform_op.h"

namespace hdmlp {

// Python's round() on a non-negative integer / 2: half to even.
int HalfRoundEven(int d);

// Refuses (at build time) a crop of h x w that no image can hold at this
// point of the chain, given what is known about the size; `pad` is added to
// both sides of each dimension before the crop.
void CheckCropFits(const ChainState& chain, const TransformOp& op, int h, int w, int pad_h = 0, int pad_w = 0);

class CenterCropOp : public TransformOp {
 public:
  static std::unique_ptr<TransformOp> Create(const TransformSpec& spec, int index);
  explicit CenterCropOp(const OpArgs& args);
  void Check(ChainState* chain) override;
  void Plan(SamplePlan* plan) const override;

 private:
  int height_ = 0, width_ = 0;
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_OPS_CENTER_CROP_H_
