#include "hdmlp/transforms/ops/random_erasing.h"

#include <cmath>
#include <cstring>

#include "hdmlp/transforms/decode.h"
#include "hdmlp/transforms/libm.h"
#include "hdmlp/transforms/sample_plan.h"

namespace hdmlp {
namespace {

// A standard normal number (Box-Muller on two 53-bit uniforms).
double Normal(Rng* rng, bool* have_spare, double* spare) {
  if (*have_spare) {
    *have_spare = false;
    return *spare;
  }
  double u1;
  do {
    u1 = rng->UniformDouble();
  } while (u1 <= 0.0);
  const double u2 = rng->UniformDouble();
  const double r = std::sqrt(-2.0 * libm::Log(u1));
  *spare = r * libm::Sin(2.0 * M_PI * u2);
  *have_spare = true;
  return r * libm::Cos(2.0 * M_PI * u2);
}

}  // namespace

std::unique_ptr<TransformOp> RandomErasingOp::Create(const TransformSpec& spec, int index) {
  return std::make_unique<RandomErasingOp>(
      OpArgs(spec, index, {"p", "scale", "ratio", "value", "random", "inplace"}));
}

RandomErasingOp::RandomErasingOp(const OpArgs& args) : TransformOp(args) {
  p_ = args.Probability(0.5);
  const double scale_def[2] = {0.02, 0.33};
  args.Interval("scale", 0.0, 1.0, scale_def, scale_);
  args.Range("ratio", 0.3, 3.3, ratio_);
  random_ = args.Flag("random", false);
  if (const auto* v = args.Get("value")) {
    if (random_) args.Fail("give either value or random, not both");
    if (v->empty()) args.Fail("value must be one number or one per channel, got []");
    for (double x : *v) {
      if (!std::isfinite(x)) args.Fail("value must be finite, got " + FormatList(*v));
    }
    value_ = *v;
  }
}

void RandomErasingOp::Check(ChainState* chain) {
  using Stage = ChainState::Stage;
  if (chain->stage == Stage::kImage) {
    Fail("RandomErasing works on the tensor: put it after ToTensor (and Normalize), as torchvision does");
  }
  if (value_.size() != 1 && value_.size() != static_cast<size_t>(chain->channels)) {
    Fail("value must have 1 or " + std::to_string(chain->channels) + " values (one per channel), got " +
         FormatList(value_));
  }
  if (chain->stage == Stage::kUint8) {
    if (random_) Fail("random values need float output: use ToTensor instead of ToUint8");
    for (double v : value_) {
      if (!(v >= 0 && v < 256)) Fail("value must be an 8-bit level (0..255) with ToUint8, got " + FormatList(value_));
    }
  }
  chain->erased = true;
}

// params: v[0] top, v[1] left, v[2] height, v[3] width; key: the noise's seed.
void RandomErasingOp::Plan(SamplePlan* plan) const {
  if (p_ <= 0) return;
  Rng rng = plan->RngFor(*this);
  RandomDraw draw;
  draw.index = index();
  const bool erase = rng.UniformDouble() < p_;
  draw.Bool("erase", erase);
  const int H = plan->height(), W = plan->width();
  bool found = false;
  OpParams p;
  if (erase) {
    const double area = static_cast<double>(H) * W;
    const double log_lo = libm::Log(ratio_[0]), log_hi = libm::Log(ratio_[1]);
    for (int attempt = 0; attempt < 10 && !found; ++attempt) {
      const double erase_area = area * rng.UniformDouble(scale_[0], scale_[1]);
      const double aspect = libm::Exp(rng.UniformDouble(log_lo, log_hi));
      const int h = static_cast<int>(RoundHalfEven(std::sqrt(erase_area * aspect)));
      const int w = static_cast<int>(RoundHalfEven(std::sqrt(erase_area / aspect)));
      if (!(h < H && w < W)) continue;
      if (random_) p.key = rng.NextU64();
      p.v[0] = static_cast<double>(rng.UniformInt(0, H - h));
      p.v[1] = static_cast<double>(rng.UniformInt(0, W - w));
      p.v[2] = h;
      p.v[3] = w;
      found = true;
    }
  }
  if (plan->recording()) {
    if (found) {
      draw.Int("top", static_cast<int64_t>(p.v[0])).Int("left", static_cast<int64_t>(p.v[1]));
      draw.Int("height", static_cast<int64_t>(p.v[2])).Int("width", static_cast<int64_t>(p.v[3]));
    }
    plan->AddDraw(std::move(draw));
  }
  if (found && p.v[2] > 0 && p.v[3] > 0) plan->TensorOp(*this, p);
}

void RandomErasingOp::RunTensor(const OpParams& p, const TensorView& out) const {
  const OutputShape& s = out.shape;
  const int top = static_cast<int>(p.v[0]), left = static_cast<int>(p.v[1]);
  const int h = static_cast<int>(p.v[2]), w = static_cast<int>(p.v[3]);
  const int C = s.channels, H = s.height, W = s.width;
  const bool f32 = s.type == OutputType::kFloat32;
  // Element (c, y, x) of the output, for (y, x) in the op's own frame.
  auto offset = [&](int c, int y, int x) -> int64_t {
    const int oy = out.mirror_y ? H - 1 - y : y, ox = out.mirror_x ? W - 1 - x : x;
    return s.chw ? (int64_t{c} * H + oy) * W + ox : (int64_t{oy} * W + ox) * C + c;
  };
  Rng rng(p.key);
  bool have_spare = false;
  double spare = 0;
  for (int c = 0; c < C; ++c) {
    const double constant = value_[value_.size() == 1 ? 0 : static_cast<size_t>(c)];
    for (int y = top; y < top + h; ++y) {
      for (int x = left; x < left + w; ++x) {
        const int64_t i = offset(c, y, x);
        if (f32) {
          const float v = static_cast<float>(random_ ? Normal(&rng, &have_spare, &spare) : constant);
          std::memcpy(out.data + 4 * i, &v, 4);
        } else {
          out.data[i] = static_cast<uint8_t>(constant);
        }
      }
    }
  }
}

}  // namespace hdmlp
