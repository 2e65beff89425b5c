#include "hdmlp/transforms/ops/random_flip.h"

#include "hdmlp/transforms/sample_plan.h"

namespace hdmlp {

std::unique_ptr<TransformOp> RandomFlipOp::Create(const TransformSpec& spec, int index) {
  return std::make_unique<RandomFlipOp>(OpArgs(spec, index, {"p"}), spec.op == "RandomHorizontalFlip");
}

RandomFlipOp::RandomFlipOp(const OpArgs& args, bool horizontal)
    : TransformOp(args), horizontal_(horizontal), p_(args.Probability()) {}

void RandomFlipOp::Plan(SamplePlan* plan) const {
  if (p_ <= 0) return;
  Rng rng = plan->RngFor(*this);
  const bool flip = rng.UniformDouble() < p_;
  if (plan->recording()) {
    RandomDraw draw;
    draw.index = index();
    draw.flip = flip;
    draw.Bool("flip", flip);
    plan->AddDraw(std::move(draw));
  }
  if (flip) plan->Flip(horizontal_);
}

}  // namespace hdmlp
