#include "hdmlp/transforms/ops/normalize.h"

#include <cmath>

namespace hdmlp {

std::unique_ptr<TransformOp> NormalizeOp::Create(const TransformSpec& spec, int index) {
  return std::make_unique<NormalizeOp>(OpArgs(spec, index, {"mean", "std", "inplace"}));
}

NormalizeOp::NormalizeOp(const OpArgs& args) : TransformOp(args) {
  const auto* mean = args.Get("mean");
  const auto* stdv = args.Get("std");
  if (!mean || !stdv) args.Fail("mean and std are required");
  for (const auto* v : {mean, stdv}) {
    for (double x : *v) {
      if (!std::isfinite(x)) args.Fail(std::string(v == mean ? "mean" : "std") + " must be finite, got " + FormatList(*v));
    }
  }
  mean_ = *mean;
  std_ = *stdv;
}

void NormalizeOp::Check(ChainState* chain) {
  using Stage = ChainState::Stage;
  if (chain->stage != Stage::kFloat) {
    Fail(chain->stage == Stage::kUint8 ? "Normalize works on ToTensor's float32 output, not on ToUint8's 8-bit output "
                                         "(normalise on the GPU, or use ToTensor)"
                                       : "Normalize needs a float tensor: put ToTensor() before it");
  }
  if (chain->erased) {
    Fail("Normalize after RandomErasing is not supported: put RandomErasing after Normalize, as torchvision's "
         "recipes do");
  }
  const size_t channels = static_cast<size_t>(chain->channels);
  for (const auto* v : {&mean_, &std_}) {
    if (v->size() != 1 && v->size() != channels) {
      Fail(std::string(v == &mean_ ? "mean" : "std") +
           (channels == 3 ? " must have 1 or 3 values (the images have 3 channels), got "
                          : " must have 1 value (the images have 1 channel, after Grayscale), got ") +
           FormatList(*v));
    }
  }
  for (size_t c = 0; c < channels; ++c) {
    const float m = static_cast<float>(mean_[mean_.size() == 1 ? 0 : c]);
    const float s = static_cast<float>(std_[std_.size() == 1 ? 0 : c]);
    if (s == 0.0f) Fail("std evaluated to zero, leading to division by zero: got " + FormatList(std_));
    for (int v = 0; v < 256; ++v) chain->lut[c][v] = (chain->lut[c][v] - m) / s;
  }
}

}  // namespace hdmlp
