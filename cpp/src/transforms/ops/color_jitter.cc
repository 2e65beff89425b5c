#include "hdmlp/transforms/ops/color_jitter.h"

#include <algorithm>
#include <cmath>

#include "hdmlp/transforms/image_ops.h"
#include "hdmlp/transforms/sample_plan.h"

namespace hdmlp {
namespace {

const char* const kNames[4] = {"brightness", "contrast", "saturation", "hue"};

}  // namespace

std::unique_ptr<TransformOp> ColorJitterOp::Create(const TransformSpec& spec, int index) {
  return std::make_unique<ColorJitterOp>(OpArgs(spec, index, {"brightness", "contrast", "saturation", "hue"}));
}

ColorJitterOp::ColorJitterOp(const OpArgs& args) : TransformOp(args) {
  for (int k = 0; k < 4; ++k) {
    const auto* v = args.Get(kNames[k]);
    if (!v) continue;
    const bool hue = k == 3;
    const double center = hue ? 0.0 : 1.0;
    double lo, hi;
    if (v->size() == 1) {  // torchvision's _check_input for a number
      const double f = (*v)[0];
      if (!std::isfinite(f) || f < 0) args.Fail(std::string(kNames[k]) + " must be a non-negative number, got " + FormatList(*v));
      lo = center - f;
      hi = center + f;
      if (!hue) lo = std::max(lo, 0.0);
    } else if (v->size() == 2) {
      lo = (*v)[0];
      hi = (*v)[1];
    } else {
      args.Fail(std::string(kNames[k]) + " must be a number or a pair (min, max), got " + FormatList(*v));
    }
    const double bound_lo = hue ? -0.5 : 0.0, bound_hi = hue ? 0.5 : INFINITY;
    if (!(std::isfinite(lo) && std::isfinite(hi) && bound_lo <= lo && lo <= hi && hi <= bound_hi)) {
      args.Fail(std::string(kNames[k]) + " values should be between (" + FormatNumber(bound_lo) + ", " +
                FormatNumber(bound_hi) + ") as (min, max), but got [" + FormatNumber(lo) + ", " + FormatNumber(hi) +
                "]");
    }
    if (lo == center && hi == center) continue;  // torchvision: do nothing
    on_[k] = true;
    range_[k][0] = lo;
    range_[k][1] = hi;
  }
}

void ColorJitterOp::Check(ChainState* chain) {
  chain->RequireImage(*this, "hdmlp adjusts the 8-bit image, as torchvision does with PIL images");
}

// params: v[0..3] the order; v[4 + k] adjustment k's factor.
void ColorJitterOp::Plan(SamplePlan* plan) const {
  Rng rng = plan->RngFor(*this);
  OpParams p;
  int order[4] = {0, 1, 2, 3};  // a uniform permutation (Fisher-Yates)
  for (int i = 3; i > 0; --i) std::swap(order[i], order[rng.Uniform(static_cast<uint64_t>(i) + 1)]);
  for (int i = 0; i < 4; ++i) p.v[i] = order[i];
  for (int k = 0; k < 4; ++k) {
    if (on_[k]) p.v[4 + k] = rng.UniformDouble(range_[k][0], range_[k][1]);
  }
  if (plan->recording()) {
    RandomDraw draw;
    draw.index = index();
    draw.Int("order", order[0] * 1000 + order[1] * 100 + order[2] * 10 + order[3]);
    for (int k = 0; k < 4; ++k) {
      if (on_[k]) draw.Float(kNames[k], p.v[4 + k]);
    }
    plan->AddDraw(std::move(draw));
  }
  if (!(on_[0] || on_[1] || on_[2] || on_[3])) return;
  plan->ImageOp(*this, p, plan->width(), plan->height(), /*commutes_with_flips=*/true);
}

void ColorJitterOp::RunImage(const OpParams& p, const ImageView& in, const MutableImageView& out,
                             OpScratch*) const {
  // The first adjustment reads `in`; the others change `out` in place
  // (each is per pixel, so reading and writing the same pixel is safe).
  bool first = true;
  for (int i = 0; i < 4; ++i) {
    const int k = static_cast<int>(p.v[i]);
    if (!on_[k]) continue;
    const ImageView src = first ? in : out.view();
    const double f = p.v[4 + k];
    switch (k) {
      case 0: AdjustBrightness(src, f, out); break;
      case 1: AdjustContrast(src, f, out); break;
      case 2: AdjustSaturation(src, f, out); break;
      default: AdjustHue(src, f, out); break;
    }
    first = false;
  }
}

}  // namespace hdmlp
