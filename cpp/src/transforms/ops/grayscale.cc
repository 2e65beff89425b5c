#include "hdmlp/transforms/ops/grayscale.h"

#include "hdmlp/transforms/image_ops.h"
#include "hdmlp/transforms/sample_plan.h"

namespace hdmlp {

std::unique_ptr<TransformOp> GrayscaleOp::Create(const TransformSpec& spec, int index) {
  if (spec.op == "RandomGrayscale") return std::make_unique<GrayscaleOp>(OpArgs(spec, index, {"p"}), true);
  return std::make_unique<GrayscaleOp>(OpArgs(spec, index, {"num_output_channels"}), false);
}

GrayscaleOp::GrayscaleOp(const OpArgs& args, bool random) : TransformOp(args), random_(random) {
  if (random) {
    p_ = args.Probability(0.1);
    return;
  }
  channels_ = args.Int("num_output_channels", 1, 1, 3);
  if (channels_ == 2) args.Fail("num_output_channels should be either 1 or 3, got 2");
}

void GrayscaleOp::Check(ChainState* chain) {
  chain->RequireImage(*this, "hdmlp converts the 8-bit image, as torchvision does with PIL images");
  if (!random_) chain->channels = channels_;
}

void GrayscaleOp::Plan(SamplePlan* plan) const {
  if (random_) {
    if (p_ <= 0) return;
    Rng rng = plan->RngFor(*this);
    const bool gray = rng.UniformDouble() < p_;
    if (plan->recording()) {
      RandomDraw draw;
      draw.index = index();
      draw.Bool("gray", gray);
      plan->AddDraw(std::move(draw));
    }
    if (!gray) return;
  }
  plan->ImageOp(*this, OpParams{}, plan->width(), plan->height(), /*commutes_with_flips=*/true);
}

void GrayscaleOp::RunImage(const OpParams&, const ImageView& in, const MutableImageView& out, OpScratch*) const {
  ToGrayscale(in, out);
}

}  // namespace hdmlp
