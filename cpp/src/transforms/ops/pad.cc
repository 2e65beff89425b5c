#include "hdmlp/transforms/ops/pad.h"

#include <cmath>

#include "hdmlp/transforms/sample_plan.h"

namespace hdmlp {

bool ReadPadding(const OpArgs& args, const char* name, int pads[4]) {
  const auto* v = args.Get(name);
  if (!v) return false;
  bool ok = v->size() == 1 || v->size() == 2 || v->size() == 4;
  for (double x : *v) ok = ok && x == std::floor(x) && x >= 0 && x <= (1 << 20);
  if (!ok) {
    args.Fail(std::string(name) + " must be a non-negative integer or a sequence of 2 (left/right, top/bottom) or "
              "4 (left, top, right, bottom) of them, got " + FormatList(*v));
  }
  const auto at = [&](size_t i) { return static_cast<int>((*v)[i]); };
  if (v->size() == 1) {
    pads[0] = pads[1] = pads[2] = pads[3] = at(0);
  } else if (v->size() == 2) {
    pads[0] = pads[2] = at(0);
    pads[1] = pads[3] = at(1);
  } else {
    for (int i = 0; i < 4; ++i) pads[i] = at(static_cast<size_t>(i));
  }
  return true;
}

PadMode ReadPadMode(const OpArgs& args) {
  const double m = args.Scalar("padding_mode", 0);
  if (m != 0 && m != 1 && m != 2 && m != 3) {
    args.Fail("padding_mode must be 0 (constant), 1 (edge), 2 (reflect) or 3 (symmetric), got " + FormatNumber(m));
  }
  return static_cast<PadMode>(static_cast<int>(m));
}

std::unique_ptr<TransformOp> PadOp::Create(const TransformSpec& spec, int index) {
  return std::make_unique<PadOp>(OpArgs(spec, index, {"padding", "fill", "padding_mode"}));
}

PadOp::PadOp(const OpArgs& args) : TransformOp(args) {
  if (!ReadPadding(args, "padding", pads_)) args.Fail("padding is required");
  mode_ = ReadPadMode(args);
  args.Fill("fill", fill_, &fill_count_);
}

void PadOp::Check(ChainState* chain) {
  chain->RequireImage(*this, "hdmlp pads the 8-bit image, as torchvision does with PIL images");
  if (chain->channels == 1 && fill_count_ == 3) Fail("fill must be one value: the image has 1 channel (Grayscale)");
  if (chain->known == ChainState::Known::kExact) {
    chain->SetExact(chain->known_h + pads_[1] + pads_[3], chain->known_w + pads_[0] + pads_[2], *this);
  } else {
    chain->SetUnknown(*this);
  }
}

void PadOp::Plan(SamplePlan* plan) const {
  if (pads_[0] == 0 && pads_[1] == 0 && pads_[2] == 0 && pads_[3] == 0) return;
  plan->ImageOp(*this, OpParams{}, plan->width() + pads_[0] + pads_[2], plan->height() + pads_[1] + pads_[3],
                /*commutes_with_flips=*/false);
}

void PadOp::RunImage(const OpParams&, const ImageView& in, const MutableImageView& out, OpScratch* scratch) const {
  std::vector<int>& xs = scratch->ints;
  std::vector<int> ys;
  PadIndices(in.width, pads_[0], pads_[2], mode_, &xs);
  PadIndices(in.height, pads_[1], pads_[3], mode_, &ys);
  Remap(in, xs.data(), ys.data(), fill_, out);
}

}  // namespace hdmlp
