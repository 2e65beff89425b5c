#include "hdmlp/transforms/ops/trivial_augment_wide.h"

#include <cmath>

#include "hdmlp/transforms/sample_plan.h"

namespace hdmlp {
namespace {

// The wide space's magnitude of `bin`; has_bins: the op has a table;
// signed_op: a random sign applies.
double WideMagnitude(AugmentOp op, int bin, int bins, bool* has_bins, bool* signed_op) {
  *has_bins = true;
  *signed_op = true;
  switch (op) {
    case AugmentOp::kShearX:
    case AugmentOp::kShearY:
    case AugmentOp::kBrightness:
    case AugmentOp::kColor:
    case AugmentOp::kContrast:
    case AugmentOp::kSharpness: return TorchLinspace(0.0, 0.99, bins, bin);
    case AugmentOp::kTranslateX:
    case AugmentOp::kTranslateY: return TorchLinspace(0.0, 32.0, bins, bin);
    case AugmentOp::kRotate: return TorchLinspace(0.0, 135.0, bins, bin);
    default: break;
  }
  *signed_op = false;
  switch (op) {
    case AugmentOp::kPosterize: {
      const float q = static_cast<float>(bin) / static_cast<float>((bins - 1) / 6.0);
      return 8 - static_cast<int>(std::nearbyint(q));
    }
    case AugmentOp::kSolarize: return TorchLinspace(255.0, 0.0, bins, bin);
    default: break;
  }
  *has_bins = false;
  return 0.0;
}

}  // namespace

std::unique_ptr<TransformOp> TrivialAugmentWideOp::Create(const TransformSpec& spec, int index) {
  return std::make_unique<TrivialAugmentWideOp>(
      OpArgs(spec, index, {"num_magnitude_bins", "interpolation", "fill"}));
}

TrivialAugmentWideOp::TrivialAugmentWideOp(const OpArgs& args) : AugmentPolicyOp(args) {
  num_bins_ = args.Int("num_magnitude_bins", 31, 2, 1 << 20);
}

void TrivialAugmentWideOp::Plan(SamplePlan* plan) const {
  Rng rng = plan->RngFor(*this);
  const AugmentOp op = kSpace[rng.Uniform(std::size(kSpace))];
  bool has_bins, signed_op;
  WideMagnitude(op, 0, num_bins_, &has_bins, &signed_op);
  const int bin = has_bins ? static_cast<int>(rng.Uniform(static_cast<uint64_t>(num_bins_))) : -1;
  double magnitude = has_bins ? WideMagnitude(op, bin, num_bins_, &has_bins, &signed_op) : 0.0;
  if (signed_op && rng.Uniform(2) == 1) magnitude = -magnitude;
  if (plan->recording()) {
    RandomDraw draw;
    draw.index = index();
    draw.Text("op", AugmentOpName(op)).Int("bin", bin).Float("magnitude", magnitude);
    plan->AddDraw(std::move(draw));
  }
  AddSubOp(plan, op, magnitude);
}

}  // namespace hdmlp
