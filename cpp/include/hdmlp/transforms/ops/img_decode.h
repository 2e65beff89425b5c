// ImgDecode: decode the file's bytes to an 8-bit image, as torchvision's
// ImageFolder loader does (PIL's Image.open(f).convert("RGB"); decode.h has
// the rules). It must be the first op; its arguments become the pipeline's
// DecodeOptions (transform_op.h), so a new decode mode is one field there
// and one argument here.
//
//   draft: [0|1] = [0]. 1: for a JPEG whose first resize shrinks by 2x or
//          more, decode at 1/2, 1/4 or 1/8 scale in libjpeg (like PIL's
//          Image.draft); faster, no longer bit-identical to PIL.
//   fast:  [0|1] = [0]. 1: speed over bit-parity for JPEGs: the smallest DCT
//          scale (1/8, 1/4 or 1/2) that keeps the first resize's input at least
//          as large as its output, and libjpeg's faster settings
//          (FastJpegMode); includes what draft does. Other formats: exact.
//
// Thread-safety: immutable after Check. Not copyable.
#ifndef HDMLP_TRANSFORMS_OPS_IMG_DECODE_H_
#define HDMLP_TRANSFORMS_OPS_IMG_DECODE_H_

#include <memory>

#include "hdmlp/transforms/transform_op.h"

namespace hdmlp {

class ImgDecodeOp : public TransformOp {
 public:
  static std::unique_ptr<TransformOp> Create(const TransformSpec& spec, int index);
  explicit ImgDecodeOp(const OpArgs& args);
  void Check(ChainState* chain) override;
  void Plan(SamplePlan*) const override {}  // the pipeline decodes what the plan reads

 private:
  DecodeOptions options_;
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_OPS_IMG_DECODE_H_
