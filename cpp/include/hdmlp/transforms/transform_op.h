// TransformOp: one op of a transform chain, and what the pipeline tells it.
//
// Every op (Resize, ColorJitter, TrivialAugmentWide, ...) is one class in
// transforms/ops/, registered by name in transforms/op_registry.cc. It owns
// its arguments, its place in the chain, its output size, and its work:
//
//   1. Its constructor reads and checks its arguments (OpArgs; errors name
//      the transform).
//   2. Check(ChainState*) runs once when the pipeline is built, in chain
//      order: the op checks where it stands (after ImgDecode, before
//      ToTensor, ...), refuses what cannot work for any image (a crop larger
//      than a fixed resize before it), and records what it does to the
//      output: its size, channels, type, the float lookup table.
//   3. Plan(SamplePlan*) runs per sample, from the image's size alone, before
//      anything is decoded: it draws the op's random parameters from its own
//      generator and adds its work to the sample's plan (a crop, a resample,
//      a flip, an 8-bit image op or a tensor op). The plan then decides which
//      region of the file to decode and fuses what it can (sample_plan.h).
//   4. RunImage / RunTensor execute the work the op planned, with the
//      parameters it planned (OpParams).
//
// Randomness: an op draws only from plan->RngFor(*this), keyed by (seed,
// epoch, sample, op index); so a sample's parameters depend on nothing else
// (not threads, not call order), and adding an op does not change the others'.
//
// Thread-safety: after Check, an op is immutable; Plan, RunImage and
// RunTensor are const and may run concurrently on any threads. Not copyable.
#ifndef HDMLP_TRANSFORMS_TRANSFORM_OP_H_
#define HDMLP_TRANSFORMS_TRANSFORM_OP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hdmlp/transforms/image_view.h"
#include "hdmlp/transforms/op_args.h"

namespace hdmlp {

enum class OutputType { kFloat32, kUint8 };

struct OutputShape {
  int channels = 3;
  int height = 0;  // 0 in output() when !fixed
  int width = 0;
  bool fixed = false;  // same size for every image (a known final size)
  OutputType type = OutputType::kFloat32;
  bool chw = true;  // layout: CHW, else HWC

  int64_t element_size() const { return type == OutputType::kFloat32 ? 4 : 1; }
  // channels * height * width * element_size(); 0 while the size is unknown.
  int64_t bytes() const { return int64_t{channels} * height * width * element_size(); }
  // {C, H, W} or {H, W, C}.
  std::vector<int64_t> dims() const;
  // "float32 3x224x224 (CHW)".
  std::string ToString() const;
  // Same type, layout and dims (`fixed` is not compared).
  bool SameAs(const OutputShape& other) const;
};

// What ImgDecode asks of the decoder; the pipeline passes the struct on
// wherever it decodes (SamplePlan::Finish turns it into each JPEG's
// JpegDecodeMode). Both options leave the random draws and the output shape
// as they are; only JPEGs are affected.
struct DecodeOptions {
  // For a JPEG whose first resize shrinks by 2x or more, decode at 1/2, 1/4
  // or 1/8 scale in libjpeg (like PIL's Image.draft); not bit-identical.
  bool draft = false;
  // Speed over bit-parity: decode every JPEG at the smallest DCT scale
  // (1/8, 1/4 or 1/2: FastJpegScaleUseful) that keeps the first resize's
  // input at least as large as its output, with libjpeg's faster settings
  // (FastJpegMode). Includes
  // what draft does.
  bool fast = false;
};

// One named value an op drew for a sample (RandomDraws), e.g. "angle".
struct DrawValue {
  enum class Kind { kInt, kBool, kFloat, kText };
  std::string name;
  double value = 0;
  Kind kind = Kind::kFloat;
  std::string text;  // kText: e.g. the sub-op a policy chose
};

// The random decisions of one op for one sample (RandomDraws). The fixed
// fields serve RandomResizedCrop (its box) and the flips (`flip`); every op
// lists its decisions in `values` (RandomResizedCrop: top, left, height,
// width; flips: flip).
struct RandomDraw {
  int index = 0;  // position in the chain
  int top = 0, left = 0, height = 0, width = 0;  // RandomResizedCrop
  bool flip = false;                             // flips
  std::vector<DrawValue> values;

  RandomDraw& Int(const std::string& name, int64_t v);
  RandomDraw& Bool(const std::string& name, bool v);
  RandomDraw& Float(const std::string& name, double v);
  RandomDraw& Text(const std::string& name, const std::string& v);
};

// The parameters an op's Plan hands to its Run for one sample.
struct OpParams {
  static constexpr int kSize = 16;
  double v[kSize] = {};
  uint64_t key = 0;  // e.g. the seed of values drawn while running
};

// Folded into every key so that transform randomness never coincides with
// other uses of (seed, epoch, ...) such as the epoch permutation.
inline constexpr uint64_t kTransformKeyDomain = 0x7472616e73666f72ULL;  // "transfor"

class TransformOp;

// What is known about the chain while it is built, op by op (Check).
struct ChainState {
  enum class Stage { kNeedDecode, kImage, kFloat, kUint8 };
  // What is known about the image size at this point, for refusing crops
  // that cannot fit and for output().fixed: nothing, the shorter side, or
  // the exact size.
  enum class Known { kUnknown, kShortSide, kExact };

  Stage stage = Stage::kNeedDecode;
  bool has_decode = false;  // the chain contains an ImgDecode somewhere
  Known known = Known::kUnknown;
  int known_h = 0, known_w = 0;  // kShortSide: known_h is the shorter side
  std::string known_from;        // which transform fixed it, e.g. "transform 1 (Resize)"
  int channels = 3;              // 1 after Grayscale(num_output_channels=1)
  OutputShape output;            // type and layout, set by the output op
  float lut[3][256] = {};        // float32 output: the value of each 8-bit level, per channel
  bool erased = false;           // a tensor op that Normalize may not follow came
  DecodeOptions decode;

  // The size is now exactly h x w, as `op` made it.
  void SetExact(int h, int w, const TransformOp& op);
  void SetShortSide(int s, const TransformOp& op);
  void SetUnknown(const TransformOp& op);
  // Refuses an op that works on the 8-bit image once the chain has reached
  // ToTensor/ToUint8. `what` says what hdmlp does instead.
  void RequireImage(const TransformOp& op, const char* what) const;
};

// A writable 8-bit, 3-channel image: height rows of width * 3 bytes.
struct MutableImageView {
  uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  int64_t stride = 0;
  ImageView view() const { return ImageView{data, width, height, stride}; }
};

// The final output of one sample, as a tensor op sees it: the output shape
// and, because the output pass applies the flips of the whole chain, whether
// the flips after the op mirror its coordinates.
struct TensorView {
  uint8_t* data = nullptr;
  OutputShape shape;
  bool mirror_x = false, mirror_y = false;
};

// Scratch memory an op may use while it runs; one per thread, reused.
struct OpScratch {
  std::vector<float> floats;
  std::vector<uint8_t> bytes;
  std::vector<int> ints;
};

class SamplePlan;

class TransformOp {
 public:
  explicit TransformOp(const OpArgs& args) : name_(args.op()), index_(args.index()), prefix_(args.prefix()) {}
  virtual ~TransformOp() = default;
  TransformOp(const TransformOp&) = delete;
  TransformOp& operator=(const TransformOp&) = delete;

  const std::string& name() const { return name_; }
  int index() const { return index_; }
  // "transform 2 (CenterCrop)".
  std::string label() const { return "transform " + std::to_string(index_) + " (" + name_ + ")"; }
  [[noreturn]] void Fail(const std::string& what) const;

  virtual void Check(ChainState* chain) = 0;
  virtual void Plan(SamplePlan* plan) const = 0;

  // Planned with SamplePlan::ImageOp: read `in` (the current image, 8-bit
  // BGR) and write the planned out.width x out.height pixels. `in` and
  // `out` never overlap.
  virtual void RunImage(const OpParams& params, const ImageView& in, const MutableImageView& out,
                        OpScratch* scratch) const;
  // Planned with SamplePlan::TensorOp: change the sample's output in place.
  virtual void RunTensor(const OpParams& params, const TensorView& out) const;

 private:
  std::string name_;
  int index_;
  std::string prefix_;
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_TRANSFORM_OP_H_
