#include "hdmlp/transforms/transform_pipeline.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include <opencv2/core.hpp>

#include "hdmlp/transforms/simd.h"
#if defined(HDMLP_KERNELS_AVX2)
#include <immintrin.h>
#endif

#include "hdmlp/errors.h"
#include "hdmlp/transforms/decode.h"
#include "hdmlp/transforms/op_registry.h"
#include "hdmlp/transforms/resample.h"
#include "hdmlp/transforms/sample_plan.h"

namespace hdmlp {
namespace {

// ---- Per-thread scratch ----------------------------------------------------

struct Scratch {
  std::vector<uint8_t> buf[2];
  ResampleScratch resample;
  DecodedImage decoded;
  OpScratch op;
  SamplePlan plan;
};

// A thread keeps the memory of decoded regions up to this size for its next
// image; a larger one (a huge photo) is freed after use.
constexpr size_t kKeptDecodeBytes = size_t{16} << 20;

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

// ---- The output pass ----------------------------------------------------------

inline void FloatPixel(const uint8_t* p, const float (*lut)[256], float* r, float* g, float* b, int x) {
  r[x] = lut[0][p[2]];
  g[x] = lut[1][p[1]];
  b[x] = lut[2][p[0]];
}

#if defined(HDMLP_KERNELS_AVX2)
// The float32 output, 8 pixels at a time: each value comes from its
// channel's 256-entry table by a plain load, and the 8 values of a channel
// are stored as one vector. (Gathering them was 1.6x slower on the AMD EPYC
// development VM, and Intel's gathers are slow since the Downfall microcode.)
//
// A large output (a batch row of kStreamOutputBytes or more: 602 KB for
// 224x224) is written with non-temporal stores: its batch (38 MB for 64 such
// rows) does not stay in the cache until the consumer reads it anyway, and a
// plain store first reads each line it writes from memory (a read for
// ownership), twice the memory traffic (benchmarks/results/cpu_gap.md).
// Identical values either way. Not when tensor ops (RandomErasing) work on
// the row next: they want it in the cache.
constexpr int64_t kStreamOutputBytes = int64_t{256} << 10;

__attribute__((target("avx2"))) inline void StoreFloats(float* dst, __m256 v, bool stream) {
  if (stream) {
    _mm256_stream_ps(dst, v);
  } else {
    _mm256_storeu_ps(dst, v);
  }
}

__attribute__((target("avx2"))) void WriteFloatAvx2(const ImageView& v, bool hflip, bool vflip,
                                                     const float (*lut)[256], float* dst, bool may_stream) {
  const int w = v.width, h = v.height;
  const int64_t plane = int64_t{w} * h;
  const int step = hflip ? -3 : 3;
  // Streaming stores need 32-byte aligned addresses: every row's when the
  // output starts aligned and a row is whole vectors.
  const bool stream = may_stream && plane * 3 * 4 >= kStreamOutputBytes && w % 8 == 0 &&
                      reinterpret_cast<uintptr_t>(dst) % 32 == 0;
  for (int y = 0; y < h; ++y) {
    const uint8_t* s = v.data + (vflip ? h - 1 - y : y) * v.stride;
    const uint8_t* first = hflip ? s + 3 * (w - 1) : s;  // the pixel of output column 0
    float* r = dst + int64_t{y} * w;
    float* g = r + plane;
    float* b = g + plane;
    int x = 0;
    for (; x + 8 <= w; x += 8) {
      const uint8_t* p = first + step * x;
      // Channel c (0 = R) of the i-th pixel: byte 2 - c of BGR.
      auto at = [&](int c, int i) { return lut[c][p[step * i + 2 - c]]; };
      StoreFloats(r + x, _mm256_setr_ps(at(0, 0), at(0, 1), at(0, 2), at(0, 3), at(0, 4), at(0, 5), at(0, 6),
                                        at(0, 7)), stream);
      StoreFloats(g + x, _mm256_setr_ps(at(1, 0), at(1, 1), at(1, 2), at(1, 3), at(1, 4), at(1, 5), at(1, 6),
                                        at(1, 7)), stream);
      StoreFloats(b + x, _mm256_setr_ps(at(2, 0), at(2, 1), at(2, 2), at(2, 3), at(2, 4), at(2, 5), at(2, 6),
                                        at(2, 7)), stream);
    }
    for (; x < w; ++x) FloatPixel(first + step * x, lut, r, g, b, x);
  }
  // Streaming stores are weakly ordered: visible before the row is handed over.
  if (stream) _mm_sfence();
}
#endif

// The final pass: flips, BGR -> RGB (or the one gray channel), layout and
// type in one sweep into dst (may_stream: nothing reads dst next).
void WriteOutput(const ImageView& v, bool hflip, bool vflip, const OutputShape& shape, const float (*lut)[256],
                 uint8_t* dst, bool may_stream) {
  const int w = v.width, h = v.height;
  const int64_t plane = int64_t{w} * h;
  const bool gray = shape.channels == 1;  // the three channels are equal: write R
#if defined(HDMLP_KERNELS_AVX2)
  if (shape.type == OutputType::kFloat32 && !gray && ActiveKernels() == Kernels::kAvx2) {
    WriteFloatAvx2(v, hflip, vflip, lut, reinterpret_cast<float*>(dst), may_stream);
    return;
  }
#endif
  for (int y = 0; y < h; ++y) {
    const uint8_t* s = v.data + (vflip ? h - 1 - y : y) * v.stride;
    if (shape.type == OutputType::kFloat32 && gray) {
      float* o = reinterpret_cast<float*>(dst) + int64_t{y} * w;
      for (int x = 0; x < w; ++x) o[x] = lut[0][s[3 * (hflip ? w - 1 - x : x) + 2]];
    } else if (shape.type == OutputType::kFloat32) {
      float* r = reinterpret_cast<float*>(dst) + int64_t{y} * w;
      float* g = r + plane;
      float* b = g + plane;
      if (!hflip) {
        for (int x = 0; x < w; ++x) FloatPixel(s + 3 * x, lut, r, g, b, x);
      } else {
        for (int x = 0; x < w; ++x) FloatPixel(s + 3 * (w - 1 - x), lut, r, g, b, x);
      }
    } else if (gray) {
      uint8_t* o = dst + int64_t{y} * w;  // CHW and HWC are the same for one channel
      for (int x = 0; x < w; ++x) o[x] = s[3 * (hflip ? w - 1 - x : x) + 2];
    } else if (shape.chw) {
      uint8_t* r = dst + int64_t{y} * w;
      uint8_t* g = r + plane;
      uint8_t* b = g + plane;
      for (int x = 0; x < w; ++x) {
        const uint8_t* p = s + 3 * (hflip ? w - 1 - x : x);
        r[x] = p[2];
        g[x] = p[1];
        b[x] = p[0];
      }
    } else {
      uint8_t* o = dst + int64_t{y} * w * 3;
      for (int x = 0; x < w; ++x) {
        const uint8_t* p = s + 3 * (hflip ? w - 1 - x : x);
        o[3 * x] = p[2];
        o[3 * x + 1] = p[1];
        o[3 * x + 2] = p[0];
      }
    }
  }
}

std::string KnownOps() {
  std::string out;
  for (const std::string& name : OpNames()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

// ---- Construction and validation --------------------------------------------

TransformPipeline::TransformPipeline(std::vector<TransformSpec> specs) : specs_(std::move(specs)) {
  if (specs_.empty()) {
    throw InvalidArgumentError(
        "the transform list is empty: it must start with ImgDecode() and end with ToTensor() or ToUint8()");
  }
  ChainState chain;
  for (const auto& s : specs_) chain.has_decode = chain.has_decode || s.op == "ImgDecode";
  for (int c = 0; c < 3; ++c) {
    for (int v = 0; v < 256; ++v) chain.lut[c][v] = static_cast<float>(v) / 255.0f;
  }
  for (int i = 0; i < static_cast<int>(specs_.size()); ++i) {
    const TransformSpec& spec = specs_[i];
    const std::string where = "transform " + std::to_string(i) + " (" + spec.op + "): ";
    const OpFactory make = FindOp(spec.op);
    if (make == nullptr) {
      throw InvalidArgumentError(where + "unknown transform '" + spec.op + "' (known: " + KnownOps() + ")");
    }
    if (spec.op != "ImgDecode" && chain.stage == ChainState::Stage::kNeedDecode) {
      throw InvalidArgumentError(where + spec.op + " needs a decoded image, but the chain " +
                                 (chain.has_decode ? "does not start with ImgDecode" : "has no ImgDecode") +
                                 ": make ImgDecode() the first transform");
    }
    std::unique_ptr<TransformOp> op = make(spec, i);
    op->Check(&chain);
    ops_.push_back(std::move(op));
  }
  if (chain.stage == ChainState::Stage::kNeedDecode || chain.stage == ChainState::Stage::kImage) {
    throw InvalidArgumentError(
        "the chain has no output transform: end it with ToTensor() (optionally followed by Normalize) or "
        "ToUint8()");
  }
  output_ = chain.output;
  output_.channels = chain.channels;
  output_.fixed = chain.known == ChainState::Known::kExact;
  output_.height = output_.fixed ? chain.known_h : 0;
  output_.width = output_.fixed ? chain.known_w : 0;
  decode_ = chain.decode;
  std::memcpy(lut_, chain.lut, sizeof(lut_));
}

TransformPipeline::~TransformPipeline() = default;

// ---- Planning ----------------------------------------------------------------

OutputShape TransformPipeline::ShapeFor(int height, int width) const {
  OutputShape s = output_;
  s.height = height;
  s.width = width;
  return s;
}

void TransformPipeline::MakePlan(int width, int height, int jpeg_components, uint64_t seed, int epoch,
                                 int64_t sample, const std::string& path, bool record_draws, SamplePlan* plan) const {
  plan->Reset(width, height, jpeg_components, seed, epoch, sample, &path, record_draws);
  for (const auto& op : ops_) op->Plan(plan);
  plan->Finish(decode_);
}

std::vector<RandomDraw> TransformPipeline::RandomDraws(int width, int height, uint64_t seed, int epoch,
                                                       int64_t sample) const {
  if (width < 1 || height < 1 || int64_t{width} * height > kMaxImagePixels) {
    throw InvalidArgumentError("RandomDraws: invalid image size " + std::to_string(width) + "x" +
                               std::to_string(height));
  }
  SamplePlan plan;
  const std::string path = "<RandomDraws>";
  MakePlan(width, height, 0, seed, epoch, sample, path, true, &plan);
  return plan.draws();
}

JpegDecodePlan TransformPipeline::PlanJpegDecode(int width, int height, uint64_t seed, int epoch, int64_t sample,
                                                 int jpeg_components) const {
  if (width < 1 || height < 1 || int64_t{width} * height > kMaxImagePixels || jpeg_components < 1) {
    throw InvalidArgumentError("PlanJpegDecode: invalid image size " + std::to_string(width) + "x" +
                               std::to_string(height) + " or components " + std::to_string(jpeg_components));
  }
  SamplePlan plan;
  const std::string path = "<PlanJpegDecode>";
  MakePlan(width, height, jpeg_components, seed, epoch, sample, path, false, &plan);
  return JpegDecodePlan{plan.decode_mode(), plan.region()};
}

// ---- Applying ----------------------------------------------------------------

OutputShape TransformPipeline::ShapeOf(const uint8_t* data, int64_t size, const std::string& path) const {
  const ImageHeader header = ReadImageHeader(data, size, path, /*check_complete=*/false);
  if (output_.fixed) return output_;
  SamplePlan& plan = ThreadScratch().plan;
  MakePlan(header.width, header.height, 0, 0, 0, 0, path, false, &plan);
  return ShapeFor(plan.out_height(), plan.out_width());
}

OutputShape TransformPipeline::ShapeOfImage(int width, int height) const {
  if (output_.fixed) return output_;
  SamplePlan& plan = ThreadScratch().plan;
  const std::string path = "<ShapeOfImage>";
  MakePlan(width, height, 0, 0, 0, 0, path, false, &plan);
  return ShapeFor(plan.out_height(), plan.out_width());
}

OutputShape TransformPipeline::Apply(const uint8_t* data, int64_t size, const std::string& path, uint64_t seed,
                                     int epoch, int64_t sample, uint8_t* dst) const {
  return Apply(data, size, path, seed, epoch, sample, OutputShape{}, dst);
}

OutputShape TransformPipeline::Apply(const uint8_t* data, int64_t size, const std::string& path, uint64_t seed,
                                     int epoch, int64_t sample, const OutputShape& expected,
                                     uint8_t* dst) const {
  const ImageHeader header = ReadImageHeader(data, size, path, /*check_complete=*/true);
  Scratch& t = ThreadScratch();
  SamplePlan& plan = t.plan;
  MakePlan(header.width, header.height,
           header.format == ImageFormat::kJpeg ? std::max(1, header.jpeg_components) : 0, seed, epoch, sample,
           path, false, &plan);
  const OutputShape shape = ShapeFor(plan.out_height(), plan.out_width());
  if (expected.height != 0 && !shape.SameAs(expected)) {
    throw InvalidArgumentError(
        "'" + path + "': this " + std::to_string(header.width) + "x" + std::to_string(header.height) +
        " (w x h) image gives a sample of " + shape.ToString() + ", but the batch holds samples of " +
        expected.ToString() +
        ": the transforms have no fixed output size, so all images must give the same size; add "
        "Resize((h, w)), CenterCrop or RandomResizedCrop to the transforms");
  }
  if (shape.type == OutputType::kFloat32 && reinterpret_cast<uintptr_t>(dst) % alignof(float) != 0) {
    throw InvalidArgumentError("TransformPipeline::Apply: dst must be 4-byte aligned for float32 output");
  }

  DecodedImage& decoded = t.decoded;
  DecodeImage(data, size, header, plan.decode_mode(), plan.region(), path, &decoded);
  Execute(plan, decoded.view, PixelRect{plan.region().x, plan.region().y, 0, 0}, shape, dst);
  // A huge image's pixels are not kept for the rest of the thread's life.
  if (decoded.jpeg.pixels.capacity() > kKeptDecodeBytes) decoded.jpeg.pixels = {};
  decoded.mat.release();
  return shape;
}

OutputShape TransformPipeline::ApplyToImage(const ImageView& bgr, const std::string& path, uint64_t seed, int epoch,
                                            int64_t sample, uint8_t* dst) const {
  if (bgr.width < 1 || bgr.height < 1 || int64_t{bgr.width} * bgr.height > kMaxImagePixels) {
    throw InvalidArgumentError("'" + path + "': invalid image size " + std::to_string(bgr.width) + "x" +
                               std::to_string(bgr.height));
  }
  SamplePlan& plan = ThreadScratch().plan;
  MakePlan(bgr.width, bgr.height, 0, seed, epoch, sample, path, false, &plan);
  const OutputShape shape = ShapeFor(plan.out_height(), plan.out_width());
  if (shape.type == OutputType::kFloat32 && reinterpret_cast<uintptr_t>(dst) % alignof(float) != 0) {
    throw InvalidArgumentError("TransformPipeline::ApplyToImage: dst must be 4-byte aligned for float32 output");
  }
  Execute(plan, bgr, PixelRect{}, shape, dst);
  return shape;
}

void TransformPipeline::Execute(const SamplePlan& plan, const ImageView& decoded, const PixelRect& origin,
                                const OutputShape& shape, uint8_t* dst) const {
  Scratch& t = ThreadScratch();
  const bool scaled = plan.scale() < 8;
  // `data` holds the current image's pixels from (dx, dy) on; `view` is the
  // rectangle of the current image that the chain looks at.
  ImageView data = decoded;
  int dx = origin.x, dy = origin.y;
  PixelRect view{0, 0, plan.image_width(), plan.image_height()};
  auto visible = [&] { return SubView(data, PixelRect{view.x - dx, view.y - dy, view.width, view.height}); };
  int next = 0;
  // A step wrote a w x h image into buffer `next`: it is the whole current image now.
  auto took_output = [&](int w, int h) {
    data = ImageView{t.buf[next].data(), w, h, int64_t{w} * 3};
    dx = dy = 0;
    view = PixelRect{0, 0, w, h};
    next ^= 1;
  };
  using Action = SamplePlan::Action;
  const std::vector<Action>& actions = plan.actions();
  for (int ai = 0; ai < static_cast<int>(actions.size()); ++ai) {
    const Action& a = actions[ai];
    if (scaled && ai < plan.first_resample()) continue;  // folded into the scaled resample
    switch (a.kind) {
      case Action::kCrop:
        view = PixelRect{a.x, a.y, a.w, a.h};
        break;
      case Action::kResample: {
        const PixelRect win = a.window.width > 0 ? a.window : PixelRect{0, 0, a.w, a.h};
        auto& out = t.buf[next];
        out.resize(static_cast<size_t>(win.width) * win.height * 3);
        if (scaled && ai == plan.first_resample()) {
          // The input is the hull of the crop in the scaled image, of which
          // `data` holds the part the window reads (SamplePlan::Finish).
          const float* box = plan.scaled_box();
          const PixelRect& src = plan.scaled_source();
          const ResampleGeometry g{src.width, src.height, {box[0], box[1], box[2], box[3]}, a.w, a.h,
                                   a.interpolation, a.antialias};
          ResampleWindow(data, dx - src.x, dy - src.y, g, win, out.data(), int64_t{win.width} * 3, &t.resample);
        } else {
          const ResampleGeometry g{view.width, view.height,
                                   {0, 0, static_cast<float>(view.width), static_cast<float>(view.height)},
                                   a.w, a.h, a.interpolation, a.antialias};
          ResampleWindow(data, dx - view.x, dy - view.y, g, win, out.data(), int64_t{win.width} * 3, &t.resample);
        }
        took_output(win.width, win.height);
        break;
      }
      case Action::kPadCrop: {
        const ImageView cur = visible();
        auto& out = t.buf[next];
        out.assign(static_cast<size_t>(a.w) * a.h * 3, 0);
        const int cw = std::min(cur.width - a.sx, a.w - a.x), ch = std::min(cur.height - a.sy, a.h - a.y);
        for (int y = 0; y < ch; ++y) {
          const int vy = a.sy + y;
          const uint8_t* s = cur.data + (a.vflip ? cur.height - 1 - vy : vy) * cur.stride;
          uint8_t* o = out.data() + (int64_t{a.y + y} * a.w + a.x) * 3;
          if (!a.hflip) {
            std::memcpy(o, s + 3 * a.sx, static_cast<size_t>(cw) * 3);
            continue;
          }
          for (int x = 0; x < cw; ++x) std::memcpy(o + 3 * x, s + 3 * (cur.width - 1 - (a.sx + x)), 3);
        }
        took_output(a.w, a.h);
        break;
      }
      case Action::kImage: {
        const ImageView cur = visible();
        auto& out = t.buf[next];
        out.resize(static_cast<size_t>(a.w) * a.h * 3);
        a.op->RunImage(a.params, cur, MutableImageView{out.data(), a.w, a.h, int64_t{a.w} * 3}, &t.op);
        took_output(a.w, a.h);
        break;
      }
    }
  }
  WriteOutput(visible(), plan.hflip(), plan.vflip(), shape, lut_, dst, plan.tensor_actions().empty());
  for (const SamplePlan::TensorAction& ta : plan.tensor_actions()) {
    ta.op->RunTensor(ta.params, TensorView{dst, shape, ta.hflip != plan.hflip(), ta.vflip != plan.vflip()});
  }
}

}  // namespace hdmlp
