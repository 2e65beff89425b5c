// AutoAugment: torchvision's AutoAugment on a PIL image, with its learned
// policies (IMAGENET by default, CIFAR10, SVHN): 25 sub-policies of two
// (op, probability, magnitude bin) each. Per sample: a sub-policy uniformly,
// two uniform numbers compared with the probabilities, two signs (a signed
// op is negated when its sign is 0, as torchvision does); magnitudes from
// the standard space with 10 bins (augment.h); applied in order.
//
//   policy: [0] imagenet, [1] cifar10, [2] svhn; interpolation; fill
//   (augment_policy.h).
// Draws (RandomDraw): policy (the sub-policy's index), and for k = 0, 1:
// op_<k>, applied_<k>, magnitude_<k> (signed).
//
// Thread-safety: immutable after Check. Not copyable.
#ifndef HDMLP_TRANSFORMS_OPS_AUTO_AUGMENT_H_
#define HDMLP_TRANSFORMS_OPS_AUTO_AUGMENT_H_

#include <memory>

#include "hdmlp/transforms/ops/augment_policy.h"

namespace hdmlp {

class AutoAugmentOp : public AugmentPolicyOp {
 public:
  static std::unique_ptr<TransformOp> Create(const TransformSpec& spec, int index);
  explicit AutoAugmentOp(const OpArgs& args);
  void Plan(SamplePlan* plan) const override;

 private:
  int policy_ = 0;
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_OPS_AUTO_AUGMENT_H_
