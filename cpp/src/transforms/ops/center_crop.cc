#include "hdmlp/transforms/ops/center_crop.h"

#include <algorithm>

#include "hdmlp/transforms/sample_plan.h"

namespace hdmlp {

int HalfRoundEven(int d) {
  int q = d / 2;
  if (d % 2 == 1 && q % 2 == 1) ++q;
  return q;
}

void CheckCropFits(const ChainState& chain, const TransformOp& op, int h, int w, int pad_h, int pad_w) {
  using Known = ChainState::Known;
  const bool too_big =
      (chain.known == Known::kExact && (h > chain.known_h + pad_h || w > chain.known_w + pad_w)) ||
      (chain.known == Known::kShortSide && std::min(h - pad_h, w - pad_w) > chain.known_h);
  if (!too_big) return;
  op.Fail("the crop " + std::to_string(h) + "x" + std::to_string(w) + " (h x w) is larger than the images " +
          chain.known_from + " makes (" +
          (chain.known == Known::kExact ? std::to_string(chain.known_h) + "x" + std::to_string(chain.known_w)
                                        : "shorter side " + std::to_string(chain.known_h)) +
          (pad_h || pad_w ? ", plus the padding" : "") +
          "): crop at most that, or resize to at least the crop size");
}

std::unique_ptr<TransformOp> CenterCropOp::Create(const TransformSpec& spec, int index) {
  return std::make_unique<CenterCropOp>(OpArgs(spec, index, {"size"}));
}

CenterCropOp::CenterCropOp(const OpArgs& args) : TransformOp(args) {
  bool single;
  args.Size(&height_, &width_, &single);
}

void CenterCropOp::Check(ChainState* chain) {
  chain->RequireImage(*this, "hdmlp resizes and crops the 8-bit image, as torchvision does with PIL images");
  CheckCropFits(*chain, *this, height_, width_);
  chain->SetExact(height_, width_, *this);
}

void CenterCropOp::Plan(SamplePlan* plan) const {
  const int rw = plan->width(), rh = plan->height();
  const int ch = height_, cw = width_;
  if (ch <= rh && cw <= rw) {
    plan->Crop(HalfRoundEven(rw - cw), HalfRoundEven(rh - ch), cw, ch);
    return;
  }
  // torchvision pads with zeros (the short dimensions only), then crops.
  plan->PadCrop(cw, ch, cw > rw ? (cw - rw) / 2 : 0, ch > rh ? (ch - rh) / 2 : 0,
                cw > rw ? 0 : HalfRoundEven(rw - cw), ch > rh ? 0 : HalfRoundEven(rh - ch));
}

}  // namespace hdmlp
