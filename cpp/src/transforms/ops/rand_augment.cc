#include "hdmlp/transforms/ops/rand_augment.h"

#include "hdmlp/transforms/sample_plan.h"

namespace hdmlp {

std::unique_ptr<TransformOp> RandAugmentOp::Create(const TransformSpec& spec, int index) {
  return std::make_unique<RandAugmentOp>(
      OpArgs(spec, index, {"num_ops", "magnitude", "num_magnitude_bins", "interpolation", "fill"}));
}

RandAugmentOp::RandAugmentOp(const OpArgs& args) : AugmentPolicyOp(args) {
  num_ops_ = args.Int("num_ops", 2, 0, 64);
  num_bins_ = args.Int("num_magnitude_bins", 31, 2, 1 << 20);
  magnitude_ = args.Int("magnitude", 9, 0, num_bins_ - 1);
}

void RandAugmentOp::Plan(SamplePlan* plan) const {
  Rng rng = plan->RngFor(*this);
  RandomDraw draw;
  draw.index = index();
  for (int k = 0; k < num_ops_; ++k) {
    const AugmentOp op = kSpace[rng.Uniform(std::size(kSpace))];
    bool signed_op;
    double magnitude = StandardMagnitude(op, magnitude_, num_bins_, plan->width(), plan->height(), &signed_op);
    if (signed_op && rng.Uniform(2) == 1) magnitude = -magnitude;
    if (plan->recording()) {
      draw.Text("op_" + std::to_string(k), AugmentOpName(op)).Float("magnitude_" + std::to_string(k), magnitude);
    }
    AddSubOp(plan, op, magnitude);
  }
  if (plan->recording() && num_ops_ > 0) plan->AddDraw(std::move(draw));
}

}  // namespace hdmlp
