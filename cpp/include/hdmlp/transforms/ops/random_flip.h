// RandomHorizontalFlip and RandomVerticalFlip: mirror with probability p, as
// torchvision's (one uniform double in [0, 1) compared with p; none drawn
// when p = 0). A flip costs nothing: the plan folds it into the output pass,
// so it may stand before or after ToTensor/Normalize.
//
//   p: [0.5].
// Draws (RandomDraw): flip.
//
// Thread-safety: immutable after Check. Not copyable.
#ifndef HDMLP_TRANSFORMS_OPS_RANDOM_FLIP_H_
#define HDMLP_TRANSFORMS_OPS_RANDOM_FLIP_H_

#include <memory>

#include "hdmlp/transforms/transform_op.h"

namespace hdmlp {

class RandomFlipOp : public TransformOp {
 public:
  // spec.op says which: "RandomHorizontalFlip" or "RandomVerticalFlip".
  static std::unique_ptr<TransformOp> Create(const TransformSpec& spec, int index);
  RandomFlipOp(const OpArgs& args, bool horizontal);
  void Check(ChainState*) override {}
  void Plan(SamplePlan* plan) const override;

 private:
  bool horizontal_;
  double p_;
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_OPS_RANDOM_FLIP_H_
