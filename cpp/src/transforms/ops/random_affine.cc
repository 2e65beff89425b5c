#include "hdmlp/transforms/ops/random_affine.h"

#include <cmath>

#include "hdmlp/transforms/augment.h"
#include "hdmlp/transforms/decode.h"
#include "hdmlp/transforms/ops/random_rotation.h"
#include "hdmlp/transforms/sample_plan.h"

namespace hdmlp {

std::unique_ptr<TransformOp> RandomAffineOp::Create(const TransformSpec& spec, int index) {
  return std::make_unique<RandomAffineOp>(
      OpArgs(spec, index, {"degrees", "translate", "scale", "shear", "interpolation", "fill", "center"}));
}

RandomAffineOp::RandomAffineOp(const OpArgs& args) : TransformOp(args) {
  ReadDegrees(args, "degrees", degrees_);
  if (const auto* t = args.Get("translate")) {
    if (t->size() != 2) args.Fail("translate must be a pair (a, b), got " + FormatList(*t));
    translate_[0] = (*t)[0];
    translate_[1] = (*t)[1];
    if (!(translate_[0] >= 0 && translate_[0] <= 1 && translate_[1] >= 0 && translate_[1] <= 1)) {
      args.Fail("translation values should be between 0 and 1, got " + FormatList(*t));
    }
    has_translate_ = true;
  }
  if (args.Get("scale")) {
    args.Range("scale", 1, 1, scale_);
    has_scale_ = true;
  }
  if (const auto* s = args.Get("shear")) {
    bool ok = s->size() == 1 || s->size() == 2 || s->size() == 4;
    for (double x : *s) ok = ok && std::isfinite(x);
    if (ok && s->size() == 1) ok = (*s)[0] >= 0;
    if (!ok) {
      args.Fail("shear must be a non-negative number s (for [-s, s]), a pair (min, max) or four values (xmin, xmax, "
                "ymin, ymax), got " + FormatList(*s));
    }
    if (s->size() == 1) {
      shear_[0] = -(*s)[0];
      shear_[1] = (*s)[0];
      shear_count_ = 2;
    } else {
      for (size_t i = 0; i < s->size(); ++i) shear_[i] = (*s)[i];
      shear_count_ = static_cast<int>(s->size());
    }
  }
  filter_ = FilterOf(args.Interp(Interpolation::kNearest,
                                 {Interpolation::kNearest, Interpolation::kBilinear, Interpolation::kBicubic}));
  has_center_ = args.Point("center", center_);
  args.Fill("fill", fill_, &fill_count_);
}

void RandomAffineOp::Check(ChainState* chain) {
  chain->RequireImage(*this, "hdmlp transforms the 8-bit image, as torchvision does with PIL images");
  if (chain->channels == 1 && fill_count_ == 3) Fail("fill must be one value: the image has 1 channel (Grayscale)");
}

// params: angle, tx, ty, scale, shear_x, shear_y.
void RandomAffineOp::Plan(SamplePlan* plan) const {
  // torchvision's RandomAffine.get_params, with img_size = [width, height].
  Rng rng = plan->RngFor(*this);
  OpParams p;
  p.v[0] = rng.UniformDouble(degrees_[0], degrees_[1]);
  if (has_translate_) {
    const double max_dx = translate_[0] * plan->width(), max_dy = translate_[1] * plan->height();
    p.v[1] = RoundHalfEven(rng.UniformDouble(-max_dx, max_dx));
    p.v[2] = RoundHalfEven(rng.UniformDouble(-max_dy, max_dy));
  }
  p.v[3] = has_scale_ ? rng.UniformDouble(scale_[0], scale_[1]) : 1.0;
  if (shear_count_ >= 2) p.v[4] = rng.UniformDouble(shear_[0], shear_[1]);
  if (shear_count_ == 4) p.v[5] = rng.UniformDouble(shear_[2], shear_[3]);
  if (plan->recording()) {
    RandomDraw draw;
    draw.index = index();
    draw.Float("angle", p.v[0]).Int("translate_x", static_cast<int64_t>(p.v[1]))
        .Int("translate_y", static_cast<int64_t>(p.v[2])).Float("scale", p.v[3]).Float("shear_x", p.v[4])
        .Float("shear_y", p.v[5]);
    plan->AddDraw(std::move(draw));
  }
  plan->ImageOp(*this, p, plan->width(), plan->height(), /*commutes_with_flips=*/false);
}

void RandomAffineOp::RunImage(const OpParams& p, const ImageView& in, const MutableImageView& out,
                              OpScratch*) const {
  const double cx = has_center_ ? center_[0] : in.width * 0.5, cy = has_center_ ? center_[1] : in.height * 0.5;
  double m[6];
  InverseAffineMatrix(cx, cy, p.v[0], p.v[1], p.v[2], p.v[3], p.v[4], p.v[5], m);
  AffineTransform(in, m, filter_, fill_, out);
}

}  // namespace hdmlp
