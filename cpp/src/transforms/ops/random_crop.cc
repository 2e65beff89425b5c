#include "hdmlp/transforms/ops/random_crop.h"

#include <vector>

#include "hdmlp/transforms/ops/center_crop.h"
#include "hdmlp/transforms/ops/pad.h"
#include "hdmlp/transforms/sample_plan.h"

namespace hdmlp {
namespace {

// Source indices of one dimension: padded by `before`/`after`, then by
// `extra` on both sides, then the `size` positions from `first`.
void CropIndices(int n, int before, int after, int extra, PadMode mode, int first, int size, std::vector<int>* out) {
  std::vector<int> once, twice;
  PadIndices(n, before, after, mode, &once);
  const std::vector<int>* padded = &once;
  if (extra > 0) {
    PadIndices(static_cast<int>(once.size()), extra, extra, mode, &twice);
    for (int& i : twice) i = i < 0 ? -1 : once[static_cast<size_t>(i)];
    padded = &twice;
  }
  out->assign(padded->begin() + first, padded->begin() + first + size);
}

}  // namespace

std::unique_ptr<TransformOp> RandomCropOp::Create(const TransformSpec& spec, int index) {
  return std::make_unique<RandomCropOp>(
      OpArgs(spec, index, {"size", "padding", "pad_if_needed", "fill", "padding_mode"}));
}

RandomCropOp::RandomCropOp(const OpArgs& args) : TransformOp(args) {
  bool single;
  args.Size(&height_, &width_, &single);
  ReadPadding(args, "padding", pads_);
  pad_if_needed_ = args.Flag("pad_if_needed", false);
  mode_ = ReadPadMode(args);
  args.Fill("fill", fill_, &fill_count_);
}

void RandomCropOp::Check(ChainState* chain) {
  chain->RequireImage(*this, "hdmlp resizes and crops the 8-bit image, as torchvision does with PIL images");
  if (chain->channels == 1 && fill_count_ == 3) Fail("fill must be one value: the image has 1 channel (Grayscale)");
  if (!pad_if_needed_) CheckCropFits(*chain, *this, height_, width_, pads_[1] + pads_[3], pads_[0] + pads_[2]);
  chain->SetExact(height_, width_, *this);
}

// params: v[0] extra width padding, v[1] extra height padding, v[2] top, v[3] left.
void RandomCropOp::Plan(SamplePlan* plan) const {
  const int w1 = plan->width() + pads_[0] + pads_[2], h1 = plan->height() + pads_[1] + pads_[3];
  const int pw = pad_if_needed_ && w1 < width_ ? width_ - w1 : 0;
  const int ph = pad_if_needed_ && h1 < height_ ? height_ - h1 : 0;
  const int w = w1 + 2 * pw, h = h1 + 2 * ph;
  if (h < height_ || w < width_) {
    plan->Fail(*this, "the crop size " + std::to_string(height_) + "x" + std::to_string(width_) +
                          " (h x w) is larger than this image (" + std::to_string(h) + "x" + std::to_string(w) +
                          " after padding): use pad_if_needed=True or a smaller crop");
  }
  int top = 0, left = 0;
  if (h != height_ || w != width_) {
    Rng rng = plan->RngFor(*this);
    top = static_cast<int>(rng.UniformInt(0, h - height_));
    left = static_cast<int>(rng.UniformInt(0, w - width_));
  }
  if (plan->recording()) {
    RandomDraw draw;
    draw.index = index();
    draw.Int("top", top).Int("left", left);
    plan->AddDraw(std::move(draw));
  }
  const bool padded = w != plan->width() || h != plan->height();
  if (!padded) {
    plan->Crop(left, top, width_, height_);
    return;
  }
  OpParams p;
  p.v[0] = pw;
  p.v[1] = ph;
  p.v[2] = top;
  p.v[3] = left;
  plan->ImageOp(*this, p, width_, height_, /*commutes_with_flips=*/false);
}

void RandomCropOp::RunImage(const OpParams& p, const ImageView& in, const MutableImageView& out,
                            OpScratch* scratch) const {
  std::vector<int>& xs = scratch->ints;
  std::vector<int> ys;
  CropIndices(in.width, pads_[0], pads_[2], static_cast<int>(p.v[0]), mode_, static_cast<int>(p.v[3]), width_, &xs);
  CropIndices(in.height, pads_[1], pads_[3], static_cast<int>(p.v[1]), mode_, static_cast<int>(p.v[2]), height_, &ys);
  Remap(in, xs.data(), ys.data(), fill_, out);
}

}  // namespace hdmlp
