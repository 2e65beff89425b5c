#include "hdmlp/transforms/ops/random_rotation.h"

#include <cmath>

#include "hdmlp/transforms/augment.h"
#include "hdmlp/transforms/sample_plan.h"

namespace hdmlp {

void ReadDegrees(const OpArgs& args, const char* name, double out[2]) {
  const auto* v = args.Get(name);
  if (!v) args.Fail(std::string(name) + " is required");
  bool ok = (v->size() == 1 || v->size() == 2);
  for (double x : *v) ok = ok && std::isfinite(x);
  if (ok && v->size() == 1) ok = (*v)[0] >= 0;
  if (ok && v->size() == 2) ok = (*v)[0] <= (*v)[1];
  if (!ok) {
    args.Fail(std::string(name) + " must be a non-negative number d (for [-d, d]) or a pair (min, max), got " +
              FormatList(*v));
  }
  out[0] = v->size() == 1 ? -(*v)[0] : (*v)[0];
  out[1] = v->size() == 1 ? (*v)[0] : (*v)[1];
}

std::unique_ptr<TransformOp> RandomRotationOp::Create(const TransformSpec& spec, int index) {
  return std::make_unique<RandomRotationOp>(
      OpArgs(spec, index, {"degrees", "interpolation", "expand", "center", "fill"}));
}

RandomRotationOp::RandomRotationOp(const OpArgs& args) : TransformOp(args) {
  ReadDegrees(args, "degrees", degrees_);
  filter_ = FilterOf(args.Interp(Interpolation::kNearest,
                                 {Interpolation::kNearest, Interpolation::kBilinear, Interpolation::kBicubic}));
  expand_ = args.Flag("expand", false);
  has_center_ = args.Point("center", center_);
  args.Fill("fill", fill_, &fill_count_);
}

void RandomRotationOp::Check(ChainState* chain) {
  chain->RequireImage(*this, "hdmlp rotates the 8-bit image, as torchvision does with PIL images");
  if (chain->channels == 1 && fill_count_ == 3) Fail("fill must be one value: the image has 1 channel (Grayscale)");
  if (expand_) chain->SetUnknown(*this);
}

void RandomRotationOp::Plan(SamplePlan* plan) const {
  Rng rng = plan->RngFor(*this);
  OpParams p;
  p.v[0] = rng.UniformDouble(degrees_[0], degrees_[1]);
  if (plan->recording()) {
    RandomDraw draw;
    draw.index = index();
    draw.Float("angle", p.v[0]);
    plan->AddDraw(std::move(draw));
  }
  const Rotation r =
      PlanRotation(plan->width(), plan->height(), p.v[0], expand_, has_center_, center_[0], center_[1]);
  if (r.fast == 4) return;  // a copy
  plan->ImageOp(*this, p, r.width, r.height, /*commutes_with_flips=*/false);
}

void RandomRotationOp::RunImage(const OpParams& p, const ImageView& in, const MutableImageView& out,
                                OpScratch*) const {
  Rotate(in, PlanRotation(in.width, in.height, p.v[0], expand_, has_center_, center_[0], center_[1]), filter_,
         fill_, out);
}

}  // namespace hdmlp
