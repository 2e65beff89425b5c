// The output ops, which end the 8-bit part of a chain:
//   ToTensor   float32, CHW, v / 255.0f (torchvision's ToTensor);
//   ToUint8    8-bit, layout: [0] = CHW (like PILToTensor) or [1] = HWC, for
//              users who normalise on the GPU.
// Either writes the output's channels (3, or 1 after
// Grayscale(num_output_channels=1)). Their work is the pipeline's output
// pass, which also applies the chain's flips and the Normalize table.
//
// Thread-safety: immutable after Check. Not copyable.
#ifndef HDMLP_TRANSFORMS_OPS_TO_TENSOR_H_
#define HDMLP_TRANSFORMS_OPS_TO_TENSOR_H_

#include <memory>

#include "hdmlp/transforms/transform_op.h"

namespace hdmlp {

class ToTensorOp : public TransformOp {
 public:
  // spec.op says which: "ToTensor" or "ToUint8".
  static std::unique_ptr<TransformOp> Create(const TransformSpec& spec, int index);
  ToTensorOp(const OpArgs& args, OutputType type);
  void Check(ChainState* chain) override;
  void Plan(SamplePlan*) const override {}

 private:
  OutputType type_;
  bool chw_ = true;
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_OPS_TO_TENSOR_H_
