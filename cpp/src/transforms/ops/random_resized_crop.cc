#include "hdmlp/transforms/ops/random_resized_crop.h"

#include <cmath>

#include "hdmlp/transforms/decode.h"
#include "hdmlp/transforms/libm.h"
#include "hdmlp/transforms/sample_plan.h"

namespace hdmlp {

std::unique_ptr<TransformOp> RandomResizedCropOp::Create(const TransformSpec& spec, int index) {
  return std::make_unique<RandomResizedCropOp>(
      OpArgs(spec, index, {"size", "scale", "ratio", "interpolation", "antialias"}));
}

RandomResizedCropOp::RandomResizedCropOp(const OpArgs& args) : TransformOp(args) {
  bool single;
  args.Size(&height_, &width_, &single);
  args.Range("scale", 0.08, 1.0, scale_);
  args.Range("ratio", 3.0 / 4.0, 4.0 / 3.0, ratio_);
  interpolation_ = args.Interp();
  antialias_ = args.Flag("antialias", true);
}

void RandomResizedCropOp::Check(ChainState* chain) {
  chain->RequireImage(*this, "hdmlp resizes and crops the 8-bit image, as torchvision does with PIL images");
  chain->SetExact(height_, width_, *this);
}

void RandomResizedCropOp::Plan(SamplePlan* plan) const {
  // torchvision's RandomResizedCrop.get_params.
  const int rw = plan->width(), rh = plan->height();
  Rng rng = plan->RngFor(*this);
  const double area = static_cast<double>(rh) * rw;
  const double log_lo = libm::Log(ratio_[0]), log_hi = libm::Log(ratio_[1]);
  int top = -1, left = 0, ch = 0, cw = 0;
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.UniformDouble(scale_[0], scale_[1]);
    const double aspect = libm::Exp(rng.UniformDouble(log_lo, log_hi));
    const double w = RoundHalfEven(std::sqrt(target_area * aspect));
    const double h = RoundHalfEven(std::sqrt(target_area / aspect));
    if (0 < w && w <= rw && 0 < h && h <= rh) {
      cw = static_cast<int>(w);
      ch = static_cast<int>(h);
      top = static_cast<int>(rng.UniformInt(0, rh - ch));
      left = static_cast<int>(rng.UniformInt(0, rw - cw));
      break;
    }
  }
  if (top < 0) {  // central crop fallback
    const double in_ratio = static_cast<double>(rw) / static_cast<double>(rh);
    if (in_ratio < ratio_[0]) {
      cw = rw;
      ch = static_cast<int>(RoundHalfEven(cw / ratio_[0]));
    } else if (in_ratio > ratio_[1]) {
      ch = rh;
      cw = static_cast<int>(RoundHalfEven(ch * ratio_[1]));
    } else {
      cw = rw;
      ch = rh;
    }
    top = (rh - ch) / 2;
    left = (rw - cw) / 2;
  }
  if (plan->recording()) {
    RandomDraw draw;
    draw.index = index();
    draw.top = top;
    draw.left = left;
    draw.height = ch;
    draw.width = cw;
    draw.Int("top", top).Int("left", left).Int("height", ch).Int("width", cw);
    plan->AddDraw(std::move(draw));
  }
  plan->Crop(left, top, cw, ch);
  if (ch != height_ || cw != width_) plan->Resample(*this, height_, width_, interpolation_, antialias_);
}

}  // namespace hdmlp
