#include "hdmlp/transforms/ops/auto_augment.h"

#include "hdmlp/transforms/sample_plan.h"

namespace hdmlp {
namespace {

struct SubOp {
  AugmentOp op;
  double p;
  int bin;  // -1: no magnitude
};
struct SubPolicy {
  SubOp first, second;
};

using A = AugmentOp;
constexpr int kNone = -1;

// torchvision's AutoAugment._get_policies.
constexpr SubPolicy kImagenet[25] = {
    {{A::kPosterize, 0.4, 8}, {A::kRotate, 0.6, 9}},
    {{A::kSolarize, 0.6, 5}, {A::kAutoContrast, 0.6, kNone}},
    {{A::kEqualize, 0.8, kNone}, {A::kEqualize, 0.6, kNone}},
    {{A::kPosterize, 0.6, 7}, {A::kPosterize, 0.6, 6}},
    {{A::kEqualize, 0.4, kNone}, {A::kSolarize, 0.2, 4}},
    {{A::kEqualize, 0.4, kNone}, {A::kRotate, 0.8, 8}},
    {{A::kSolarize, 0.6, 3}, {A::kEqualize, 0.6, kNone}},
    {{A::kPosterize, 0.8, 5}, {A::kEqualize, 1.0, kNone}},
    {{A::kRotate, 0.2, 3}, {A::kSolarize, 0.6, 8}},
    {{A::kEqualize, 0.6, kNone}, {A::kPosterize, 0.4, 6}},
    {{A::kRotate, 0.8, 8}, {A::kColor, 0.4, 0}},
    {{A::kRotate, 0.4, 9}, {A::kEqualize, 0.6, kNone}},
    {{A::kEqualize, 0.0, kNone}, {A::kEqualize, 0.8, kNone}},
    {{A::kInvert, 0.6, kNone}, {A::kEqualize, 1.0, kNone}},
    {{A::kColor, 0.6, 4}, {A::kContrast, 1.0, 8}},
    {{A::kRotate, 0.8, 8}, {A::kColor, 1.0, 2}},
    {{A::kColor, 0.8, 8}, {A::kSolarize, 0.8, 7}},
    {{A::kSharpness, 0.4, 7}, {A::kInvert, 0.6, kNone}},
    {{A::kShearX, 0.6, 5}, {A::kEqualize, 1.0, kNone}},
    {{A::kColor, 0.4, 0}, {A::kEqualize, 0.6, kNone}},
    {{A::kEqualize, 0.4, kNone}, {A::kSolarize, 0.2, 4}},
    {{A::kSolarize, 0.6, 5}, {A::kAutoContrast, 0.6, kNone}},
    {{A::kInvert, 0.6, kNone}, {A::kEqualize, 1.0, kNone}},
    {{A::kColor, 0.6, 4}, {A::kContrast, 1.0, 8}},
    {{A::kEqualize, 0.8, kNone}, {A::kEqualize, 0.6, kNone}},
};

constexpr SubPolicy kCifar10[25] = {
    {{A::kInvert, 0.1, kNone}, {A::kContrast, 0.2, 6}},
    {{A::kRotate, 0.7, 2}, {A::kTranslateX, 0.3, 9}},
    {{A::kSharpness, 0.8, 1}, {A::kSharpness, 0.9, 3}},
    {{A::kShearY, 0.5, 8}, {A::kTranslateY, 0.7, 9}},
    {{A::kAutoContrast, 0.5, kNone}, {A::kEqualize, 0.9, kNone}},
    {{A::kShearY, 0.2, 7}, {A::kPosterize, 0.3, 7}},
    {{A::kColor, 0.4, 3}, {A::kBrightness, 0.6, 7}},
    {{A::kSharpness, 0.3, 9}, {A::kBrightness, 0.7, 9}},
    {{A::kEqualize, 0.6, kNone}, {A::kEqualize, 0.5, kNone}},
    {{A::kContrast, 0.6, 7}, {A::kSharpness, 0.6, 5}},
    {{A::kColor, 0.7, 7}, {A::kTranslateX, 0.5, 8}},
    {{A::kEqualize, 0.3, kNone}, {A::kAutoContrast, 0.4, kNone}},
    {{A::kTranslateY, 0.4, 3}, {A::kSharpness, 0.2, 6}},
    {{A::kBrightness, 0.9, 6}, {A::kColor, 0.2, 8}},
    {{A::kSolarize, 0.5, 2}, {A::kInvert, 0.0, kNone}},
    {{A::kEqualize, 0.2, kNone}, {A::kAutoContrast, 0.6, kNone}},
    {{A::kEqualize, 0.2, kNone}, {A::kEqualize, 0.6, kNone}},
    {{A::kColor, 0.9, 9}, {A::kEqualize, 0.6, kNone}},
    {{A::kAutoContrast, 0.8, kNone}, {A::kSolarize, 0.2, 8}},
    {{A::kBrightness, 0.1, 3}, {A::kColor, 0.7, 0}},
    {{A::kSolarize, 0.4, 5}, {A::kAutoContrast, 0.9, kNone}},
    {{A::kTranslateY, 0.9, 9}, {A::kTranslateY, 0.7, 9}},
    {{A::kAutoContrast, 0.9, kNone}, {A::kSolarize, 0.8, 3}},
    {{A::kEqualize, 0.8, kNone}, {A::kInvert, 0.1, kNone}},
    {{A::kTranslateY, 0.7, 9}, {A::kAutoContrast, 0.9, kNone}},
};

constexpr SubPolicy kSvhn[25] = {
    {{A::kShearX, 0.9, 4}, {A::kInvert, 0.2, kNone}},
    {{A::kShearY, 0.9, 8}, {A::kInvert, 0.7, kNone}},
    {{A::kEqualize, 0.6, kNone}, {A::kSolarize, 0.6, 6}},
    {{A::kInvert, 0.9, kNone}, {A::kEqualize, 0.6, kNone}},
    {{A::kEqualize, 0.6, kNone}, {A::kRotate, 0.9, 3}},
    {{A::kShearX, 0.9, 4}, {A::kAutoContrast, 0.8, kNone}},
    {{A::kShearY, 0.9, 8}, {A::kInvert, 0.4, kNone}},
    {{A::kShearY, 0.9, 5}, {A::kSolarize, 0.2, 6}},
    {{A::kInvert, 0.9, kNone}, {A::kAutoContrast, 0.8, kNone}},
    {{A::kEqualize, 0.6, kNone}, {A::kRotate, 0.9, 3}},
    {{A::kShearX, 0.9, 4}, {A::kSolarize, 0.3, 3}},
    {{A::kShearY, 0.8, 8}, {A::kInvert, 0.7, kNone}},
    {{A::kEqualize, 0.9, kNone}, {A::kTranslateY, 0.6, 6}},
    {{A::kInvert, 0.9, kNone}, {A::kEqualize, 0.6, kNone}},
    {{A::kContrast, 0.3, 3}, {A::kRotate, 0.8, 4}},
    {{A::kInvert, 0.8, kNone}, {A::kTranslateY, 0.0, 2}},
    {{A::kShearY, 0.7, 6}, {A::kSolarize, 0.4, 8}},
    {{A::kInvert, 0.6, kNone}, {A::kRotate, 0.8, 4}},
    {{A::kShearY, 0.3, 7}, {A::kTranslateX, 0.9, 3}},
    {{A::kShearX, 0.1, 6}, {A::kInvert, 0.6, kNone}},
    {{A::kSolarize, 0.7, 2}, {A::kTranslateY, 0.6, 7}},
    {{A::kShearY, 0.8, 4}, {A::kInvert, 0.8, kNone}},
    {{A::kShearX, 0.7, 9}, {A::kTranslateY, 0.8, 3}},
    {{A::kShearY, 0.8, 5}, {A::kAutoContrast, 0.7, kNone}},
    {{A::kShearX, 0.7, 2}, {A::kInvert, 0.1, kNone}},
};

constexpr const SubPolicy* kPolicies[3] = {kImagenet, kCifar10, kSvhn};

}  // namespace

std::unique_ptr<TransformOp> AutoAugmentOp::Create(const TransformSpec& spec, int index) {
  return std::make_unique<AutoAugmentOp>(OpArgs(spec, index, {"policy", "interpolation", "fill"}));
}

AutoAugmentOp::AutoAugmentOp(const OpArgs& args) : AugmentPolicyOp(args) {
  policy_ = args.Int("policy", 0, 0, 2);
}

void AutoAugmentOp::Plan(SamplePlan* plan) const {
  // torchvision's get_params: policy id, two uniforms, two signs.
  Rng rng = plan->RngFor(*this);
  const int id = static_cast<int>(rng.Uniform(25));
  const double probs[2] = {rng.UniformDouble(), rng.UniformDouble()};
  const int signs[2] = {static_cast<int>(rng.Uniform(2)), static_cast<int>(rng.Uniform(2))};
  const SubPolicy& policy = kPolicies[policy_][id];
  RandomDraw draw;
  draw.index = index();
  draw.Int("policy", id);
  for (int k = 0; k < 2; ++k) {
    const SubOp& s = k == 0 ? policy.first : policy.second;
    const bool applied = probs[k] <= s.p;
    double magnitude = 0.0;
    bool signed_op = false;
    if (s.bin >= 0) magnitude = StandardMagnitude(s.op, s.bin, 10, plan->width(), plan->height(), &signed_op);
    if (signed_op && signs[k] == 0) magnitude = -magnitude;
    if (plan->recording()) {
      const std::string n = std::to_string(k);
      draw.Text("op_" + n, AugmentOpName(s.op)).Bool("applied_" + n, applied).Float("magnitude_" + n, magnitude);
    }
    if (applied) AddSubOp(plan, s.op, magnitude);
  }
  if (plan->recording()) plan->AddDraw(std::move(draw));
}

}  // namespace hdmlp
