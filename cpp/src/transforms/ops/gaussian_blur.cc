#include "hdmlp/transforms/ops/gaussian_blur.h"

#include <cmath>

#include "hdmlp/transforms/image_ops.h"
#include "hdmlp/transforms/sample_plan.h"

namespace hdmlp {

std::unique_ptr<TransformOp> GaussianBlurOp::Create(const TransformSpec& spec, int index) {
  return std::make_unique<GaussianBlurOp>(OpArgs(spec, index, {"kernel_size", "sigma"}));
}

GaussianBlurOp::GaussianBlurOp(const OpArgs& args) : TransformOp(args) {
  const auto* k = args.Get("kernel_size");
  if (!k) args.Fail("kernel_size is required");
  bool ok = k->size() == 1 || k->size() == 2;
  for (double v : *k) ok = ok && v == std::floor(v) && v >= 1 && v <= 1001 && static_cast<int>(v) % 2 == 1;
  if (!ok) args.Fail("kernel_size must be an odd positive integer or a pair (kx, ky) of them (at most 1001), got " + FormatList(*k));
  kx_ = static_cast<int>((*k)[0]);
  ky_ = static_cast<int>((*k)[k->size() - 1]);
  if (const auto* s = args.Get("sigma")) {
    if (s->size() == 1) {
      if (!((*s)[0] > 0) || !std::isfinite((*s)[0])) args.Fail("sigma must be positive, got " + FormatList(*s));
      sigma_[0] = sigma_[1] = (*s)[0];
    } else {
      args.Range("sigma", 0.1, 2.0, sigma_);
    }
  }
}

void GaussianBlurOp::Check(ChainState* chain) {
  chain->RequireImage(*this, "hdmlp blurs the 8-bit image, as torchvision does with PIL images");
}

void GaussianBlurOp::Plan(SamplePlan* plan) const {
  Rng rng = plan->RngFor(*this);
  OpParams p;
  p.v[0] = rng.UniformDouble(sigma_[0], sigma_[1]);
  if (plan->recording()) {
    RandomDraw draw;
    draw.index = index();
    draw.Float("sigma", p.v[0]);
    plan->AddDraw(std::move(draw));
  }
  // Not flip-commuting bit for bit: a mirrored image sums its taps in the
  // other order (float).
  plan->ImageOp(*this, p, plan->width(), plan->height(), /*commutes_with_flips=*/false);
}

void GaussianBlurOp::RunImage(const OpParams& p, const ImageView& in, const MutableImageView& out,
                              OpScratch* scratch) const {
  GaussianBlur(in, kx_, ky_, p.v[0], p.v[0], out, scratch);
}

}  // namespace hdmlp
