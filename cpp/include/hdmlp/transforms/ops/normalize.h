// Normalize: (x - mean) / std per channel, in float32 as torchvision's
// tensor.sub_(mean).div_(std). Comes after ToTensor; several apply in order.
// Its work costs nothing per sample: it is folded into the output pass's
// table of the float value of each 8-bit level.
//
//   mean: [m] or one per channel; std: [s] or one per channel (none zero).
//
// Thread-safety: immutable after Check. Not copyable.
#ifndef HDMLP_TRANSFORMS_OPS_NORMALIZE_H_
#define HDMLP_TRANSFORMS_OPS_NORMALIZE_H_

#include <memory>
#include <vector>

#include "hdmlp/transforms/transform_op.h"

namespace hdmlp {

class NormalizeOp : public TransformOp {
 public:
  static std::unique_ptr<TransformOp> Create(const TransformSpec& spec, int index);
  explicit NormalizeOp(const OpArgs& args);
  void Check(ChainState* chain) override;
  void Plan(SamplePlan*) const override {}

 private:
  std::vector<double> mean_, std_;
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_OPS_NORMALIZE_H_
