// TransformPipeline: decode one image and apply torchvision-style transforms,
// writing the result straight into the caller's memory (a batch slot).
//
// A pipeline is built once from a list of TransformSpecs (what the Python
// classes in hdmlp.transforms produce), validated there, and then applied to
// any number of samples from any number of threads at once.
//
//   TransformPipeline p({{"ImgDecode", {}},
//                        {"RandomResizedCrop", {{"size", {224}}}},
//                        {"RandomHorizontalFlip", {}},
//                        {"ToTensor", {}},
//                        {"Normalize", {{"mean", {0.485, 0.456, 0.406}},
//                                       {"std", {0.229, 0.224, 0.225}}}}});
//   std::vector<float> out(p.output().bytes() / 4);   // 3 x 224 x 224
//   p.Apply(bytes, n, path, seed, epoch, sample_id,
//           reinterpret_cast<uint8_t*>(out.data()));
//
// Ops and their args (each arg is a list of numbers; defaults are
// torchvision's). Op i (0-based) is "transform i" in error messages.
//   ImgDecode             draft: [0|1] = [0]. 1: for a JPEG whose first resize
//                         shrinks by 2x or more, decode at 1/2, 1/4 or 1/8
//                         scale in libjpeg (like PIL's Image.draft); faster,
//                         no longer bit-identical to PIL (docs/transforms.md).
//   Resize                size: [s] (shorter side) or [h, w]; max_size: [m]
//                         (only with [s]); interpolation: [PIL code] = [2];
//                         antialias: [0|1] = [1].
//   CenterCrop            size: [s] or [h, w]. Zero padding as torchvision
//                         when the image is smaller (refused at construction
//                         when the size before it is known to be smaller).
//   RandomResizedCrop     size: [s] or [h, w]; scale: [lo, hi] = [0.08, 1];
//                         ratio: [lo, hi] = [3/4, 4/3]; interpolation; antialias.
//   RandomHorizontalFlip  p: [0.5]          RandomVerticalFlip  p: [0.5]
//   ToTensor              float32, CHW, values in [0, 1].
//   Normalize             mean: [m] or [r, g, b]; std: [s] or [r, g, b].
//                         After ToTensor; several are applied in order.
//   ToUint8               layout: [0] = CHW (default) or [1] = HWC. 8-bit RGB.
// Interpolation codes are PIL's: 0 nearest, 1 lanczos, 2 bilinear,
// 3 bicubic, 4 box, 5 hamming.
//
// A chain is ImgDecode, then any of Resize, CenterCrop, RandomResizedCrop
// and the flips, then ToTensor (+ Normalize) or ToUint8. Flips may also
// follow ToTensor/Normalize (they commute with them). The output is always
// 3-channel RGB.
//
// Results: with draft off, every pixel is computed as torchvision computes it
// on a PIL image (PIL's decoder conventions, PIL's resampling, float32
// ToTensor/Normalize), so parity is exact up to decoder differences.
//
// Randomness: the random parameters of op i for a sample come only from
// Rng(DeriveKey({seed, epoch, sample, kTransformKeyDomain, i})), drawn in
// torchvision's order (RandomResizedCrop: up to 10 (scale, log-ratio) tries,
// then top, left; flips: one uniform double compared with p, none when
// p = 0). The bytes written depend on nothing else: not on threads, timing
// or the order of calls, and they differ between epochs.
//
// Errors: the constructor throws InvalidArgumentError naming the transform
// and argument at fault. ShapeOf and Apply throw DecodeError (an
// InvalidArgumentError; decode.h) for a bad image, and InvalidArgumentError
// for an image whose output would be too large or, in the checked Apply, of
// the wrong size; every message names path_for_errors. Every check and the
// decode happen before the first byte is written: when they throw, dst is
// untouched.
//
// Thread-safety: a constructed pipeline is immutable; ShapeOf, Apply and
// ApplyToImage may run concurrently on any threads. Each thread keeps two
// scratch buffers for the resized intermediates (as large as the largest
// intermediate it made, e.g. 2 x 256 x 341 x 3 bytes for Resize(256)) and
// the memory of the last decoded region (up to 16 MB) for its lifetime.
//
// Decoding: Apply decodes only the region of the image the chain reads
// before its first resize (e.g. RandomResizedCrop's box), which for a JPEG
// skips most of the decoder's work (jpeg_decode.h) and gives the same pixels.
#ifndef HDMLP_TRANSFORMS_TRANSFORM_PIPELINE_H_
#define HDMLP_TRANSFORMS_TRANSFORM_PIPELINE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hdmlp/transforms/resample.h"

namespace hdmlp {

struct TransformSpec {
  std::string op;
  std::map<std::string, std::vector<double>> args;
};

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

// Folded into every key so that transform randomness never coincides with
// other uses of (seed, epoch, ...) such as the epoch permutation.
inline constexpr uint64_t kTransformKeyDomain = 0x7472616e73666f72ULL;  // "transfor"

class TransformPipeline {
 public:
  explicit TransformPipeline(std::vector<TransformSpec> specs);

  const std::vector<TransformSpec>& specs() const { return specs_; }
  // The output: fixed = true with its size when every image gives the same
  // size; else fixed = false, height = width = 0, and ShapeOf tells per image.
  const OutputShape& output() const { return output_; }
  // Whether ImgDecode(draft=1) was asked for.
  bool draft() const { return draft_; }

  // The shape Apply will write for this image, from its header alone (a few
  // microseconds; nothing decoded). Equals output() for a fixed chain.
  OutputShape ShapeOf(const uint8_t* data, int64_t size, const std::string& path_for_errors) const;
  // The same for an image already decoded, from its size alone.
  OutputShape ShapeOfImage(int width, int height) const;

  // Decodes and transforms one sample into dst: ShapeOf(...).bytes() bytes,
  // i.e. output().bytes() for a fixed chain. dst must be 4-byte aligned for
  // float32 output. Returns the shape written.
  OutputShape Apply(const uint8_t* data, int64_t size, const std::string& path_for_errors, uint64_t seed,
                    int epoch, int64_t sample, uint8_t* dst) const;

  // The same, for a slot sized for `expected` (for a chain that is not fixed:
  // the shape of the job's first sample): throws InvalidArgumentError naming
  // the file and both sizes, before decoding or writing anything, when this
  // image's output would have another shape.
  OutputShape Apply(const uint8_t* data, int64_t size, const std::string& path_for_errors, uint64_t seed,
                    int epoch, int64_t sample, const OutputShape& expected, uint8_t* dst) const;

  // Everything after ImgDecode, on an image already decoded to 8-bit BGR
  // (OpenCV's order; e.g. DecodeImage's output): what Apply does after
  // decoding, with the same randomness. The draft option does not apply.
  // Writes ShapeFor(image).bytes() bytes into dst and returns the shape.
  OutputShape ApplyToImage(const ImageView& bgr, const std::string& path_for_errors, uint64_t seed, int epoch,
                           int64_t sample, uint8_t* dst) const;

  // The random decisions Apply makes for an image of width x height, in
  // chain order (for tests and debugging): for each RandomResizedCrop, its
  // crop box in the coordinates of its input image; for each flip with
  // 0 < p, whether it flips. Draft decoding does not change them.
  struct RandomDraw {
    int index = 0;  // position in specs()
    int top = 0, left = 0, height = 0, width = 0;  // RandomResizedCrop
    bool flip = false;                             // flips
  };
  std::vector<RandomDraw> RandomDraws(int width, int height, uint64_t seed, int epoch, int64_t sample) const;

  // Internal: one geometric op of the chain, as validated.
  struct Step {
    enum Kind { kResize, kCenterCrop, kRandomResizedCrop, kHorizontalFlip, kVerticalFlip } kind = kResize;
    int index = 0;              // position in specs()
    int height = 0, width = 0;  // target size; Resize(int): width = 0, height = shorter side
    int max_size = 0;           // Resize: 0 = none
    Interpolation interpolation = Interpolation::kBilinear;
    bool antialias = true;
    double scale[2] = {0.08, 1.0};
    double ratio[2] = {3.0 / 4.0, 4.0 / 3.0};
    double p = 0.5;
  };

 private:
  struct Plan;
  void MakePlan(int width, int height, bool is_jpeg, uint64_t seed, int epoch, int64_t sample,
                const std::string& path, Plan* plan) const;
  OutputShape ShapeFor(int height, int width) const;
  // `decoded` holds the pixels of the image from `origin` (x, y) on: the
  // plan's region for Apply, the whole image for ApplyToImage.
  void Execute(const Plan& plan, const ImageView& decoded, const PixelRect& origin, const OutputShape& shape,
               uint8_t* dst) const;

  std::vector<TransformSpec> specs_;
  std::vector<Step> steps_;
  OutputShape output_;
  bool draft_ = false;
  float lut_[3][256] = {};  // float32 output: value of each 8-bit level, per RGB channel
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_TRANSFORM_PIPELINE_H_
