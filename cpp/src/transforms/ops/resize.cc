#include "hdmlp/transforms/ops/resize.h"

#include <algorithm>
#include <cmath>

#include "hdmlp/transforms/decode.h"
#include "hdmlp/transforms/sample_plan.h"

namespace hdmlp {

std::unique_ptr<TransformOp> ResizeOp::Create(const TransformSpec& spec, int index) {
  return std::make_unique<ResizeOp>(OpArgs(spec, index, {"size", "interpolation", "max_size", "antialias"}));
}

ResizeOp::ResizeOp(const OpArgs& args) : TransformOp(args) {
  bool single;
  args.Size(&height_, &width_, &single);
  if (single) width_ = 0;
  interpolation_ = args.Interp();
  antialias_ = args.Flag("antialias", true);
  if (const auto* m = args.Get("max_size")) {
    if (!single) args.Fail("max_size is only allowed when size is one number (the shorter side)");
    const double v = args.Scalar("max_size", 0);
    if (v != std::floor(v) || v <= height_ || v > (1 << 20)) {
      args.Fail("max_size must be an integer greater than size (" + std::to_string(height_) + "), got " +
                FormatList(*m));
    }
    max_size_ = static_cast<int>(v);
  }
}

void ResizeOp::OutputSize(int h, int w, int64_t* nh, int64_t* nw) const {
  if (width_ > 0) {
    *nh = height_;
    *nw = width_;
    return;
  }
  const int64_t shorter = std::min(w, h), longer = std::max(w, h);
  int64_t new_short = height_;
  int64_t new_long = static_cast<int64_t>(static_cast<double>(new_short * longer) / static_cast<double>(shorter));
  if (max_size_ > 0 && new_long > max_size_) {
    new_short = static_cast<int64_t>(static_cast<double>(int64_t{max_size_} * new_short) /
                                     static_cast<double>(new_long));
    new_long = max_size_;
  }
  if (w <= h) {
    *nw = new_short;
    *nh = new_long;
  } else {
    *nw = new_long;
    *nh = new_short;
  }
}

void ResizeOp::Check(ChainState* chain) {
  chain->RequireImage(*this, "hdmlp resizes and crops the 8-bit image, as torchvision does with PIL images");
  if (chain->known == ChainState::Known::kExact) {
    int64_t nh, nw;
    OutputSize(chain->known_h, chain->known_w, &nh, &nw);
    if (nh < 1 || nw < 1 || nh * nw > kMaxImagePixels) {
      Fail("resizes the " + std::to_string(chain->known_h) + "x" + std::to_string(chain->known_w) + " output of " +
           chain->known_from + " to " + std::to_string(nh) + "x" + std::to_string(nw));
    }
    chain->SetExact(static_cast<int>(nh), static_cast<int>(nw), *this);
  } else if (width_ == 0 && max_size_ == 0) {
    chain->SetShortSide(height_, *this);
  } else if (width_ > 0) {
    chain->SetExact(height_, width_, *this);
  } else {
    chain->SetUnknown(*this);
  }
}

void ResizeOp::Plan(SamplePlan* plan) const {
  int64_t nh, nw;
  OutputSize(plan->height(), plan->width(), &nh, &nw);
  if (nh == plan->height() && nw == plan->width()) return;  // torchvision returns the image as is
  plan->Resample(*this, nh, nw, interpolation_, antialias_);
}

}  // namespace hdmlp
