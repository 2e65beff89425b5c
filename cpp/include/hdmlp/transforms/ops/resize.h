// Resize: torchvision's Resize on a PIL image, with PIL's own resampling
// (resample.h), bit for bit.
//
//   size: [s] (shorter side; the longer is int(s * long / short)) or [h, w];
//   max_size: [m] (only with [s]); interpolation: [PIL code] = [2];
//   antialias: [0|1] = [1].
// An image already of the target size is left as is (torchvision returns it).
//
// Thread-safety: immutable after Check. Not copyable.
#ifndef HDMLP_TRANSFORMS_OPS_RESIZE_H_
#define HDMLP_TRANSFORMS_OPS_RESIZE_H_

#include <memory>

#include "hdmlp/transforms/resample.h"
#include "hdmlp/transforms/transform_op.h"

namespace hdmlp {

class ResizeOp : public TransformOp {
 public:
  static std::unique_ptr<TransformOp> Create(const TransformSpec& spec, int index);
  explicit ResizeOp(const OpArgs& args);
  void Check(ChainState* chain) override;
  void Plan(SamplePlan* plan) const override;

  // torchvision's _compute_resized_output_size for an h x w input.
  void OutputSize(int h, int w, int64_t* out_h, int64_t* out_w) const;

 private:
  int height_ = 0, width_ = 0;  // width 0: height is the shorter side
  int max_size_ = 0;            // 0: none
  Interpolation interpolation_ = Interpolation::kBilinear;
  bool antialias_ = true;
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_OPS_RESIZE_H_
