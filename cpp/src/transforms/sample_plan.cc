#include "hdmlp/transforms/sample_plan.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "hdmlp/errors.h"
#include "hdmlp/transforms/decode.h"

namespace hdmlp {

void SamplePlan::Reset(int width, int height, int jpeg_components, uint64_t seed, int epoch, int64_t sample,
                       const std::string* path, bool record_draws) {
  actions_.clear();
  tensor_actions_.clear();
  draws_.clear();
  seed_ = seed;
  epoch_ = epoch;
  sample_ = sample;
  path_ = path;
  record_draws_ = record_draws;
  jpeg_components_ = jpeg_components;
  rx_ = ry_ = 0;
  rw_ = width;
  rh_ = height;
  hf_ = vf_ = false;
  first_read_ = -1;
  first_read_view_ = PixelRect{};
  mode_ = JpegDecodeMode{};
  first_resample_ = -1;
  image_width_ = width;
  image_height_ = height;
  region_ = PixelRect{};
  scaled_source_ = PixelRect{};
}

Rng SamplePlan::RngFor(const TransformOp& op) const {
  return Rng(DeriveKey({seed_, static_cast<uint64_t>(static_cast<int64_t>(epoch_)), static_cast<uint64_t>(sample_),
                        kTransformKeyDomain, static_cast<uint64_t>(op.index())}));
}

void SamplePlan::Fail(const TransformOp& op, const std::string& what) const {
  throw InvalidArgumentError("'" + *path_ + "': " + op.label() + ": " + what);
}

void SamplePlan::AddDraw(RandomDraw draw) {
  if (record_draws_) draws_.push_back(std::move(draw));
}

void SamplePlan::Reading() {
  if (first_read_ >= 0) return;
  first_read_ = static_cast<int>(actions_.size());
  first_read_view_ = PixelRect{rx_, ry_, rw_, rh_};
}

void SamplePlan::Crop(int left, int top, int w, int h) {  // left, top in view coordinates
  rx_ += hf_ ? rw_ - left - w : left;
  ry_ += vf_ ? rh_ - top - h : top;
  rw_ = w;
  rh_ = h;
  Action a;
  a.kind = Action::kCrop;
  a.x = rx_;
  a.y = ry_;
  a.w = rw_;
  a.h = rh_;
  actions_.push_back(a);
}

void SamplePlan::Resample(const TransformOp& op, int64_t nh, int64_t nw, Interpolation interpolation,
                          bool antialias) {
  if (nh < 1 || nw < 1 || nh * nw > kMaxImagePixels) {
    throw InvalidArgumentError("'" + *path_ + "': " + op.label() + " would resize this " + std::to_string(rw_) + "x" +
                               std::to_string(rh_) + " (w x h) image to " + std::to_string(nw) + "x" +
                               std::to_string(nh) + ", outside 1.." + std::to_string(kMaxImagePixels) + " pixels");
  }
  Reading();
  if (first_resample_ < 0) first_resample_ = static_cast<int>(actions_.size());
  Action a;
  a.kind = Action::kResample;
  a.w = static_cast<int>(nw);
  a.h = static_cast<int>(nh);
  a.interpolation = interpolation;
  a.antialias = antialias;
  actions_.push_back(a);
  rx_ = ry_ = 0;
  rw_ = a.w;
  rh_ = a.h;
}

void SamplePlan::PadCrop(int w, int h, int x, int y, int sx, int sy) {
  Reading();
  Action a;
  a.kind = Action::kPadCrop;
  a.w = w;
  a.h = h;
  a.x = x;
  a.y = y;
  a.sx = sx;
  a.sy = sy;
  a.hflip = hf_;
  a.vflip = vf_;
  actions_.push_back(a);
  rx_ = ry_ = 0;
  rw_ = w;
  rh_ = h;
  hf_ = vf_ = false;
}

void SamplePlan::Flip(bool horizontal) { (horizontal ? hf_ : vf_) ^= true; }

void SamplePlan::ImageOp(const TransformOp& op, const OpParams& params, int out_w, int out_h,
                         bool commutes_with_flips) {
  if (int64_t{out_w} * out_h > kMaxImagePixels || out_w < 1 || out_h < 1) {
    Fail(op, "would make this " + std::to_string(rw_) + "x" + std::to_string(rh_) + " (w x h) image " +
                 std::to_string(out_w) + "x" + std::to_string(out_h) + ", outside 1.." +
                 std::to_string(kMaxImagePixels) + " pixels");
  }
  // The op sees the mirrored image: mirror the pixels first (a copy of the
  // view), unless mirroring its result instead gives the same.
  if (!commutes_with_flips && (hf_ || vf_)) PadCrop(rw_, rh_, 0, 0, 0, 0);
  Reading();
  Action a;
  a.kind = Action::kImage;
  a.w = out_w;
  a.h = out_h;
  a.op = &op;
  a.params = params;
  actions_.push_back(a);
  rx_ = ry_ = 0;
  rw_ = out_w;
  rh_ = out_h;
}

void SamplePlan::TensorOp(const TransformOp& op, const OpParams& params) {
  TensorAction t;
  t.op = &op;
  t.params = params;
  t.hflip = hf_;
  t.vflip = vf_;
  tensor_actions_.push_back(t);
}

void SamplePlan::Finish(const DecodeOptions& decode) {
  // A resample followed by crops computes only what the last crop keeps
  // (each crop's rectangle lies in the one before).
  for (size_t i = 0; i < actions_.size(); ++i) {
    if (actions_[i].kind != Action::kResample) continue;
    size_t j = i + 1;
    while (j < actions_.size() && actions_[j].kind == Action::kCrop) ++j;
    if (j == i + 1) continue;
    const Action& last = actions_[j - 1];
    actions_[i].window = PixelRect{last.x, last.y, last.w, last.h};
    actions_.erase(actions_.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                   actions_.begin() + static_cast<std::ptrdiff_t>(j));
  }
  const bool resample_reads_first = first_resample_ >= 0 && first_read_ == first_resample_;
  const PixelRect& src = first_read_view_;
  const bool jpeg = jpeg_components_ > 0;
  if (jpeg && decode.fast) mode_ = FastJpegMode(8);
  // A smaller DCT scale when the first resample reads the image and still
  // shrinks (never enlarges) the scaled image: the smallest allowed scale m
  // whose scaled input, src * m / 8, is at least the resample's output in
  // both dimensions. Draft allows 1/8, 1/4 and 1/2 (PIL's Image.draft rule:
  // the largest d = 8 / m with src >= d * output); fast allows every scale
  // it has settings for, except what the JPEG's decoder cannot do.
  if (jpeg && (decode.draft || decode.fast) && resample_reads_first) {
    const Action& a = actions_[first_resample_];
    for (int m = 1; m < 8; ++m) {
      const bool power_of_two = m == 1 || m == 2 || m == 4;
      const bool allowed = decode.fast ? FastJpegScaleUseful(m) : power_of_two;
      if (!allowed || (jpeg_components_ == 4 && !power_of_two)) continue;  // CMYK: OpenCV's 1/2, 1/4, 1/8
      if (int64_t{src.width} * m >= int64_t{a.w} * 8 && int64_t{src.height} * m >= int64_t{a.h} * 8) {
        mode_.scale = m;
        break;
      }
    }
  }
  // The region to decode: what the first action that reads pixels reads. A
  // resample reads only the view it is given (torchvision crops, then
  // resizes the cropped image), or only its window's taps; the other actions
  // read their view; with no such action, the final view is the output.
  if (mode_.scale < 8) {
    // The full-size input mapped onto the scaled image: pixel i of the
    // scaled image covers full-size pixels [8i/m, 8(i+1)/m). The resample
    // reads the hull of that box (its taps are clamped to the hull), with
    // the box fractional within it, and only its window's taps from it.
    const int m = mode_.scale;
    const int dw = JpegScaledSize(image_width_, m), dh = JpegScaledSize(image_height_, m);
    const double x0 = src.x * m / 8.0, y0 = src.y * m / 8.0;
    const double x1 = (src.x + src.width) * m / 8.0, y1 = (src.y + src.height) * m / 8.0;
    const int hx0 = static_cast<int>(std::floor(x0)), hy0 = static_cast<int>(std::floor(y0));
    const int hx1 = std::min(dw, static_cast<int>(std::ceil(x1)));
    const int hy1 = std::min(dh, static_cast<int>(std::ceil(y1)));
    scaled_source_ = PixelRect{hx0, hy0, hx1 - hx0, hy1 - hy0};
    scaled_box_[0] = static_cast<float>(x0 - hx0);
    scaled_box_[1] = static_cast<float>(y0 - hy0);
    scaled_box_[2] = static_cast<float>(x1 - hx0);
    scaled_box_[3] = static_cast<float>(y1 - hy0);
    region_ = scaled_source_;
    const Action& a = actions_[first_resample_];
    if (a.window.width > 0) {
      thread_local ResampleScratch scratch;
      const ResampleGeometry g{scaled_source_.width,
                               scaled_source_.height,
                               {scaled_box_[0], scaled_box_[1], scaled_box_[2], scaled_box_[3]},
                               a.w,
                               a.h,
                               a.interpolation,
                               a.antialias};
      const PixelRect r = ResampleSourceRegion(g, a.window, &scratch);
      region_ = PixelRect{hx0 + r.x, hy0 + r.y, r.width, r.height};
    }
  } else if (resample_reads_first) {
    region_ = src;
    const Action& a = actions_[first_resample_];
    if (a.window.width > 0) {  // only the input that the window's taps read
      thread_local ResampleScratch scratch;
      const ResampleGeometry g{src.width, src.height,
                               {0, 0, static_cast<float>(src.width), static_cast<float>(src.height)},
                               a.w, a.h, a.interpolation, a.antialias};
      const PixelRect r = ResampleSourceRegion(g, a.window, &scratch);
      region_ = PixelRect{src.x + r.x, src.y + r.y, r.width, r.height};
    }
  } else if (first_read_ >= 0) {
    region_ = src;
  } else {
    region_ = PixelRect{rx_, ry_, rw_, rh_};  // nothing reads pixels: the final view is the output
  }
}

}  // namespace hdmlp
