// SamplePlan: what the pipeline will do to one sample, decided from the
// image's size alone, before anything is decoded.
//
// Each op's Plan adds its work through the methods below, in chain order:
//   Crop        a rectangle of the current view (costs nothing: views move);
//   Resample    a PIL-exact resize of the current view (resample.h);
//   PadCrop     CenterCrop's zero-padding crop;
//   Flip        mirrors the view (folded into the output pass, for free);
//   ImageOp     any other 8-bit op, run by the op's RunImage on the view;
//   TensorOp    a change of the final output (after ToTensor/ToUint8).
// Finish() then optimises the plan without changing a single output value:
//   - crops right after a resample become that resample's window: only the
//     kept output pixels are computed (ResampleWindow);
//   - the region of the file to decode is what the first action that reads
//     pixels reads (the crop box for RandomResizedCrop, the source taps of a
//     windowed resample, the final view of a chain of crops), so a JPEG is
//     decoded only there (DecodeJpegRegion);
//   - with DecodeOptions::draft or fast, a JPEG whose first resample shrinks
//     it is decoded at a smaller DCT scale (draft: 1/2, 1/4 or 1/8 when it
//     shrinks by 2x or more; fast: the smallest of 1/8, 1/4 and 1/2 that
//     keeps the resample's input at least as large as its output, since the
//     other eighths decode slower than the next larger of these:
//     FastJpegScaleUseful), and fast adds
//     libjpeg's faster settings. Those change values, slightly, by choice.
// The plan's DCT scale depends only on the image's size and the draws, so
// it is as deterministic as they are.
// A flip pending before an op that does not commute with flips (a rotation,
// a pad) is applied to the pixels first; the others (colour, blur) run on
// the unflipped view and the output pass flips their result.
//
// Thread-safety: a plan belongs to one thread (the pipeline keeps one per
// thread and reuses its memory). Copyable, but passed by pointer.
#ifndef HDMLP_TRANSFORMS_SAMPLE_PLAN_H_
#define HDMLP_TRANSFORMS_SAMPLE_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hdmlp/transforms/image_view.h"
#include "hdmlp/transforms/jpeg_decode.h"
#include "hdmlp/transforms/resample.h"
#include "hdmlp/transforms/transform_op.h"
#include "hdmlp/util/random.h"

namespace hdmlp {

class SamplePlan {
 public:
  struct Action {
    enum Kind { kCrop, kPadCrop, kResample, kImage } kind = kCrop;
    int x = 0, y = 0;    // crop: top-left in the current buffer; pad-crop: where the image starts in the output
    int w = 0, h = 0;    // size of the result
    int sx = 0, sy = 0;  // pad-crop: first view pixel copied
    bool hflip = false, vflip = false;  // pad-crop: flips of the view it reads
    Interpolation interpolation = Interpolation::kBilinear;
    bool antialias = true;
    // resample: the part of its w x h output to compute, when a crop follows
    // it (width 0: all of it); the result is then this rectangle.
    PixelRect window;
    const TransformOp* op = nullptr;  // image op
    OpParams params;
  };
  struct TensorAction {
    const TransformOp* op = nullptr;
    OpParams params;
    bool hflip = false, vflip = false;  // the flips at the op's place in the chain
  };

  // Starts a plan for a width x height image. jpeg_components: 0 for an
  // image that is not a JPEG, else the JPEG's colour components (which
  // DCT scales it can be decoded at: JpegScaleSupported). path names the
  // file in errors; with record_draws the ops describe their random
  // decisions (draws()).
  void Reset(int width, int height, int jpeg_components, uint64_t seed, int epoch, int64_t sample,
             const std::string* path, bool record_draws);

  // ---- For ops' Plan ---------------------------------------------------------
  // The current view's size.
  int width() const { return rw_; }
  int height() const { return rh_; }
  // The op's own generator for this sample.
  Rng RngFor(const TransformOp& op) const;
  // Keeps the rectangle (left, top, w, h) of the current view.
  void Crop(int left, int top, int w, int h);
  // Resamples the current view to w x h. Throws InvalidArgumentError naming
  // the file when w x h is outside 1..kMaxImagePixels.
  void Resample(const TransformOp& op, int64_t h, int64_t w, Interpolation interpolation, bool antialias);
  // CenterCrop's padding crop: a w x h output, zero except the view's
  // pixels from (sx, sy) on, placed at (x, y).
  void PadCrop(int w, int h, int x, int y, int sx, int sy);
  // Mirrors the current view left-right (horizontal) or top-bottom.
  void Flip(bool horizontal);
  // Runs op.RunImage(params) on the current view, giving out_w x out_h
  // pixels. commutes_with_flips: the op's result on a mirrored image is the
  // mirror of its result (pointwise colour ops, symmetric filters).
  void ImageOp(const TransformOp& op, const OpParams& params, int out_w, int out_h, bool commutes_with_flips);
  // Runs op.RunTensor(params) on the final output.
  void TensorOp(const TransformOp& op, const OpParams& params);
  // Whether ops should describe their draws (RandomDraws); AddDraw is
  // ignored otherwise.
  bool recording() const { return record_draws_; }
  void AddDraw(RandomDraw draw);
  // Throws InvalidArgumentError "'<path>': transform i (Op): what".
  [[noreturn]] void Fail(const TransformOp& op, const std::string& what) const;
  const std::string& path() const { return *path_; }

  // ---- For the pipeline --------------------------------------------------------
  // Fuses crops into resample windows and chooses the decode region and scale.
  void Finish(const DecodeOptions& decode);

  const std::vector<Action>& actions() const { return actions_; }
  const std::vector<TensorAction>& tensor_actions() const { return tensor_actions_; }
  const std::vector<RandomDraw>& draws() const { return draws_; }
  int out_width() const { return rw_; }   // the final size (after Finish)
  int out_height() const { return rh_; }
  bool hflip() const { return hf_; }  // flips the output pass applies
  bool vflip() const { return vf_; }
  // How a JPEG is decoded (its scale and settings); the exact mode for any
  // other image. scale() < 8: the first resample reads the scaled image.
  const JpegDecodeMode& decode_mode() const { return mode_; }
  int scale() const { return mode_.scale; }
  int first_resample() const { return first_resample_; }  // index in actions(); -1: none
  int image_width() const { return image_width_; }
  int image_height() const { return image_height_; }
  // What the decoder must deliver, in the decoded (scale/8) image's
  // coordinates: the pixels the first action that reads pixels reads.
  const PixelRect& region() const { return region_; }
  // scale() < 8: the first resample's input, in the scaled image's
  // coordinates: the pixels that cover its full-size input (it contains
  // region()), and the full-size input's box on them (PIL's fractional box,
  // relative to scaled_source()).
  const PixelRect& scaled_source() const { return scaled_source_; }
  const float* scaled_box() const { return scaled_box_; }

 private:
  // Called before an action that reads pixels: remembers the first one.
  void Reading();

  std::vector<Action> actions_;
  std::vector<TensorAction> tensor_actions_;
  std::vector<RandomDraw> draws_;
  uint64_t seed_ = 0;
  int epoch_ = 0;
  int64_t sample_ = 0;
  const std::string* path_ = nullptr;
  bool record_draws_ = false;
  int jpeg_components_ = 0;
  int rx_ = 0, ry_ = 0, rw_ = 0, rh_ = 0;  // the view: a region of the current buffer
  bool hf_ = false, vf_ = false;
  int first_read_ = -1;  // index in actions_ of the first action that reads pixels
  PixelRect first_read_view_;  // the view it reads, in the image's coordinates
  JpegDecodeMode mode_;
  int first_resample_ = -1;
  int image_width_ = 0, image_height_ = 0;
  PixelRect region_;
  PixelRect scaled_source_;
  float scaled_box_[4] = {};
};

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_SAMPLE_PLAN_H_
