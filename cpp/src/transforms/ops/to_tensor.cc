#include "hdmlp/transforms/ops/to_tensor.h"

namespace hdmlp {

std::unique_ptr<TransformOp> ToTensorOp::Create(const TransformSpec& spec, int index) {
  if (spec.op == "ToTensor") return std::make_unique<ToTensorOp>(OpArgs(spec, index, {}), OutputType::kFloat32);
  return std::make_unique<ToTensorOp>(OpArgs(spec, index, {"layout"}), OutputType::kUint8);
}

ToTensorOp::ToTensorOp(const OpArgs& args, OutputType type) : TransformOp(args), type_(type) {
  if (type == OutputType::kUint8) {
    const double layout = args.Scalar("layout", 0);
    if (layout != 0 && layout != 1) args.Fail("layout must be 0 (CHW) or 1 (HWC), got " + FormatNumber(layout));
    chw_ = layout == 0;
  }
}

void ToTensorOp::Check(ChainState* chain) {
  using Stage = ChainState::Stage;
  const bool tensor = type_ == OutputType::kFloat32;
  if (chain->stage != Stage::kImage) {
    const bool same = (chain->stage == Stage::kFloat) == tensor;
    if (tensor) Fail(same ? "ToTensor appears twice" : "ToTensor after ToUint8: use one output transform");
    Fail(same ? "ToUint8 appears twice" : "ToUint8 after ToTensor: use one output transform");
  }
  chain->stage = tensor ? Stage::kFloat : Stage::kUint8;
  chain->output.type = type_;
  chain->output.chw = chw_;
  chain->output.channels = chain->channels;
}

}  // namespace hdmlp
