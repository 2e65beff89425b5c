// Grayscale and RandomGrayscale: torchvision's, on a PIL image
// (convert("L"): ITU-R 601-2 luma, image_ops.h).
//
//   Grayscale        num_output_channels: [1|3] = [1]. With 1, the chain's
//                    output has one channel (ToTensor gives 1 x H x W).
//   RandomGrayscale  p: [0.1]: converts with probability p (one uniform
//                    double compared with p; none drawn when p = 0), keeping
//                    the number of channels.
// Inside the pipeline a gray image keeps three equal channels, which every
// later op treats as PIL treats an "L" image; the output pass writes one.
// Draws (RandomDraw, RandomGrayscale): gray.
//
// Thread-safety: immutable after Check. Not copyable.
#ifndef HDMLP_TRANSFORMS_OPS_GRAYSCALE_H_
#define HDMLP_TRANSFORMS_OPS_GRAYSCALE_H_

#include <memory>

#include "hdmlp/transforms/transform_op.h"

namespace hdmlp {

class GrayscaleOp : public TransformOp {
 public:
  // spec.op says which: "Grayscale" or "RandomGrayscale".
  static std::unique_ptr<TransformOp> Create(const TransformSpec& spec, int index);
  GrayscaleOp(const OpArgs& args, bool random);
  void Check(ChainState* chain) override;
  void Plan(SamplePlan* plan) const override;
  void RunImage(const OpParams& params, const ImageView& in, const MutableImageView& out,
                OpScratch* scratch) const override;

 private:
  bool random_;
  double p_ = 1.0;
  int channels_ = 1;  // Grayscale: num_output_channels
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_OPS_GRAYSCALE_H_
