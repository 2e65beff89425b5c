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
// The ops, their arguments and their rules are listed in docs/transforms.md;
// each is one class in transforms/ops/ (transform_op.h says how an op works,
// op_registry.h where it is registered). Op i (0-based) is "transform i" in
// error messages.
//
// A chain is ImgDecode, then ops on the 8-bit image (resizes, crops, flips,
// colour, blur, rotations, the augmentation policies, ...), then ToTensor
// (+ Normalize) or ToUint8, then tensor ops (RandomErasing). Flips may also
// follow ToTensor/Normalize (they commute with them). The output has 3
// channels, or 1 after Grayscale(num_output_channels=1).
//
// Results: with draft and fast off (the default), every pixel is computed
// as torchvision computes it on a PIL image (PIL's decoder conventions,
// PIL's resampling, PIL's ImageEnhance/ImageOps/transform arithmetic,
// float32 ToTensor/Normalize), so parity is exact up to decoder
// differences, except where docs/transforms.md gives a tolerance
// (GaussianBlur: torch's float convolution). ImgDecode(draft/fast) decodes
// JPEGs at a smaller DCT scale and (fast) with libjpeg's faster settings:
// the draws and shapes stay, the values move slightly (measured there).
//
// Randomness: the random parameters of op i for a sample come only from
// Rng(DeriveKey({seed, epoch, sample, kTransformKeyDomain, i})), drawn in
// torchvision's order (RandomResizedCrop: up to 10 (scale, log-ratio) tries,
// then top, left; flips: one uniform double compared with p, none when
// p = 0; the others as docs/transforms.md says). The bytes written depend on
// nothing else: not on threads, timing or the order of calls, and they
// differ between epochs.
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
// scratch buffers for the intermediates (as large as the largest
// intermediate it made, e.g. 2 x 256 x 341 x 3 bytes for Resize(256)) and
// the memory of the last decoded region (up to 16 MB) for its lifetime.
//
// Decoding: Apply decodes only the region of the image the chain reads
// before its first resize (e.g. RandomResizedCrop's box), which for a JPEG
// skips most of the decoder's work (jpeg_decode.h) and gives the same pixels
// (sample_plan.h).
#ifndef HDMLP_TRANSFORMS_TRANSFORM_PIPELINE_H_
#define HDMLP_TRANSFORMS_TRANSFORM_PIPELINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hdmlp/transforms/image_view.h"
#include "hdmlp/transforms/jpeg_decode.h"
#include "hdmlp/transforms/op_args.h"
#include "hdmlp/transforms/transform_op.h"

namespace hdmlp {

class SamplePlan;

// How a pipeline decodes one JPEG (PlanJpegDecode).
struct JpegDecodePlan {
  JpegDecodeMode mode;
  PixelRect region;  // in the scaled image's coordinates
};

class TransformPipeline {
 public:
  explicit TransformPipeline(std::vector<TransformSpec> specs);
  ~TransformPipeline();
  TransformPipeline(const TransformPipeline&) = delete;
  TransformPipeline& operator=(const TransformPipeline&) = delete;

  const std::vector<TransformSpec>& specs() const { return specs_; }
  // The output: fixed = true with its size when every image gives the same
  // size; else fixed = false, height = width = 0, and ShapeOf tells per image.
  const OutputShape& output() const { return output_; }
  // Whether ImgDecode(draft=1) or ImgDecode(fast=1) was asked for.
  bool draft() const { return decode_.draft; }
  bool fast() const { return decode_.fast; }

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
  // decoding, with the same randomness. Draft and fast do not apply.
  // Writes ShapeFor(image).bytes() bytes into dst and returns the shape.
  OutputShape ApplyToImage(const ImageView& bgr, const std::string& path_for_errors, uint64_t seed, int epoch,
                           int64_t sample, uint8_t* dst) const;

  // The random decisions Apply makes for an image of width x height, in
  // chain order (for tests, statistics and debugging): one RandomDraw per op
  // that drew something (transform_op.h): for each RandomResizedCrop, its
  // crop box in the coordinates of its input image; for each flip with
  // 0 < p, whether it flips; the other ops' decisions in `values`. Draft
  // decoding does not change them.
  using RandomDraw = hdmlp::RandomDraw;
  std::vector<RandomDraw> RandomDraws(int width, int height, uint64_t seed, int epoch, int64_t sample) const;

  // How Apply decodes a width x height JPEG with jpeg_components colour
  // components for this sample: its JpegDecodeMode (scale and settings) and
  // the region of the scaled image it decodes (for tests and statistics).
  JpegDecodePlan PlanJpegDecode(int width, int height, uint64_t seed, int epoch, int64_t sample,
                                int jpeg_components = 3) const;

 private:
  void MakePlan(int width, int height, int jpeg_components, uint64_t seed, int epoch, int64_t sample,
                const std::string& path, bool record_draws, SamplePlan* plan) const;
  OutputShape ShapeFor(int height, int width) const;
  // `decoded` holds the pixels of the image from `origin` (x, y) on: the
  // plan's region for Apply, the whole image for ApplyToImage.
  void Execute(const SamplePlan& plan, const ImageView& decoded, const PixelRect& origin, const OutputShape& shape,
               uint8_t* dst) const;

  std::vector<TransformSpec> specs_;
  std::vector<std::unique_ptr<TransformOp>> ops_;
  OutputShape output_;
  DecodeOptions decode_;
  float lut_[3][256] = {};  // float32 output: value of each 8-bit level, per output channel
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_TRANSFORM_PIPELINE_H_
