#include "hdmlp/transforms/ops/img_decode.h"

namespace hdmlp {

std::unique_ptr<TransformOp> ImgDecodeOp::Create(const TransformSpec& spec, int index) {
  return std::make_unique<ImgDecodeOp>(OpArgs(spec, index, {"draft", "fast"}));
}

ImgDecodeOp::ImgDecodeOp(const OpArgs& args) : TransformOp(args) {
  options_.draft = args.Flag("draft", false);
  options_.fast = args.Flag("fast", false);
}

void ImgDecodeOp::Check(ChainState* chain) {
  if (index() != 0) {
    Fail("ImgDecode must be the first transform (it is transform " + std::to_string(index()) + ")");
  }
  chain->stage = ChainState::Stage::kImage;
  chain->decode = options_;
}

}  // namespace hdmlp
