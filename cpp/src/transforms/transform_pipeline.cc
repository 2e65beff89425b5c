#include "hdmlp/transforms/transform_pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <sstream>
#include <utility>

#include <opencv2/core.hpp>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define HDMLP_OUTPUT_AVX2 1
#endif

#include "hdmlp/errors.h"
#include "hdmlp/plan/random.h"
#include "hdmlp/transforms/decode.h"

namespace hdmlp {

// ---- OutputShape -----------------------------------------------------------

std::vector<int64_t> OutputShape::dims() const {
  if (chw) return {channels, height, width};
  return {height, width, channels};
}

std::string OutputShape::ToString() const {
  std::ostringstream s;
  s << (type == OutputType::kFloat32 ? "float32 " : "uint8 ");
  const auto d = dims();
  s << d[0] << "x" << d[1] << "x" << d[2] << (chw ? " (CHW)" : " (HWC)");
  return s.str();
}

bool OutputShape::SameAs(const OutputShape& o) const {
  return channels == o.channels && height == o.height && width == o.width && type == o.type && chw == o.chw;
}

// ---- The per-sample plan ---------------------------------------------------

struct TransformPipeline::Plan {
  struct Action {
    enum Kind { kCrop, kPadCrop, kResample } kind = kCrop;
    int x = 0, y = 0;  // crop: top-left in the current buffer; pad-crop: where the image starts in the output
    int w = 0, h = 0;  // size of the result
    int sx = 0, sy = 0;  // pad-crop: first view pixel copied
    bool hflip = false, vflip = false;  // pad-crop: flips of the view it reads
    Interpolation interpolation = Interpolation::kBilinear;
    bool antialias = true;
    // resample: the part of its w x h output to compute, when a crop follows
    // it (width 0: all of it); the result is then this rectangle.
    PixelRect window;
  };
  std::vector<Action> actions;
  std::vector<RandomDraw> draws;
  int width = 0, height = 0;  // final size
  bool hflip = false, vflip = false;
  int reduce = 1;              // JPEG DCT scaling (draft)
  int first_resample = -1;     // index in actions; -1: nothing is resampled
  int src_x = 0, src_y = 0, src_w = 0, src_h = 0;  // region of the full image it resamples
  int image_width = 0, image_height = 0;           // the image MakePlan was given
  // What the decoder must deliver, in the decoded (1/reduce) image's
  // coordinates: the pixels the actions before the first resample read.
  PixelRect region;
  float reduced_box[4] = {};  // reduce > 1: the first resample's box, in region coordinates
};

namespace {

const char* const kOps[] = {"ImgDecode", "Resize",    "CenterCrop", "RandomResizedCrop", "RandomHorizontalFlip",
                            "RandomVerticalFlip", "ToTensor", "Normalize", "ToUint8"};

std::string Join(std::initializer_list<const char*> names) {
  std::string out;
  for (const char* n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

std::string Num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string List(const std::vector<double>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + Num(v[i]);
  return out + "]";
}

// Reads and checks one spec's arguments; every message names the transform.
class Args {
 public:
  Args(const TransformSpec& spec, int index, std::initializer_list<const char*> allowed)
      : spec_(spec), prefix_("transform " + std::to_string(index) + " (" + spec.op + "): ") {
    for (const auto& [name, value] : spec.args) {
      bool ok = false;
      for (const char* a : allowed) ok = ok || name == a;
      if (!ok) {
        Fail(spec.op + " has no argument '" + name + "'" +
             (allowed.size() ? " (its arguments: " + Join(allowed) + ")" : " (it takes none)"));
      }
    }
  }

  [[noreturn]] void Fail(const std::string& what) const { throw InvalidArgumentError(prefix_ + what); }

  const std::vector<double>* Get(const char* name) const {
    auto it = spec_.args.find(name);
    return it == spec_.args.end() ? nullptr : &it->second;
  }

  double Scalar(const char* name, double def) const {
    const auto* v = Get(name);
    if (!v) return def;
    if (v->size() != 1 || !std::isfinite((*v)[0])) Fail(std::string(name) + " must be one number, got " + List(*v));
    return (*v)[0];
  }

  bool Flag(const char* name, bool def) const {
    const double v = Scalar(name, def ? 1 : 0);
    if (v != 0 && v != 1) Fail(std::string(name) + " must be 0 or 1 (false or true), got " + Num(v));
    return v == 1;
  }

  // size: [s] (single) or [h, w]; positive integers.
  void Size(int* height, int* width, bool* single) const {
    const auto* v = Get("size");
    if (!v) Fail("size is required");
    const bool ok_len = v->size() == 1 || v->size() == 2;
    bool ok = ok_len;
    for (double x : *v) ok = ok && std::isfinite(x) && x == std::floor(x) && x >= 1 && x <= (1 << 20);
    if (!ok) {
      Fail("size must be a positive integer or a pair (h, w) of positive integers (at most 1048576), got " +
           List(*v));
    }
    *single = v->size() == 1;
    *height = static_cast<int>((*v)[0]);
    *width = *single ? *height : static_cast<int>((*v)[1]);
    if (int64_t{*height} * *width > kMaxImagePixels) {
      Fail("size " + List(*v) + " gives more than " + std::to_string(kMaxImagePixels) + " pixels");
    }
  }

  Interpolation Interp() const {
    const double v = Scalar("interpolation", 2);
    if (v != std::floor(v) || v < 0 || v > 5) {
      Fail("interpolation must be a PIL filter code (0 nearest, 1 lanczos, 2 bilinear, 3 bicubic, 4 box, "
           "5 hamming), got " + Num(v));
    }
    return static_cast<Interpolation>(static_cast<int>(v));
  }

  void Range(const char* name, double lo, double hi, double* out) const {
    const auto* v = Get(name);
    if (!v) {
      out[0] = lo;
      out[1] = hi;
      return;
    }
    if (v->size() != 2 || !std::isfinite((*v)[0]) || !std::isfinite((*v)[1])) {
      Fail(std::string(name) + " must be a pair (min, max), got " + List(*v));
    }
    if (!((*v)[0] > 0)) Fail(std::string(name) + " must be positive, got " + List(*v));
    if ((*v)[0] > (*v)[1]) Fail(std::string(name) + " must be (min, max) with min <= max, got " + List(*v));
    out[0] = (*v)[0];
    out[1] = (*v)[1];
  }

  double Probability() const {
    const double p = Scalar("p", 0.5);
    if (!(p >= 0 && p <= 1)) Fail("p must be a probability in [0, 1], got " + Num(p));
    return p;
  }

 private:
  const TransformSpec& spec_;
  std::string prefix_;
};

// Python's round() on a non-negative integer / 2: half to even.
int HalfRoundEven(int d) {
  int q = d / 2;
  if (d % 2 == 1 && q % 2 == 1) ++q;
  return q;
}

// torchvision's _compute_resized_output_size.
void ResizedSize(int h, int w, const TransformPipeline::Step& s, int64_t* nh, int64_t* nw) {
  if (s.width > 0) {
    *nh = s.height;
    *nw = s.width;
    return;
  }
  const int64_t shorter = std::min(w, h), longer = std::max(w, h);
  int64_t new_short = s.height;
  int64_t new_long =
      static_cast<int64_t>(static_cast<double>(new_short * longer) / static_cast<double>(shorter));
  if (s.max_size > 0 && new_long > s.max_size) {
    new_short = static_cast<int64_t>(static_cast<double>(int64_t{s.max_size} * new_short) /
                                     static_cast<double>(new_long));
    new_long = s.max_size;
  }
  if (w <= h) {
    *nw = new_short;
    *nh = new_long;
  } else {
    *nw = new_long;
    *nh = new_short;
  }
}

std::string StepName(const TransformPipeline::Step& s) {
  switch (s.kind) {
    case TransformPipeline::Step::kResize: return "Resize";
    case TransformPipeline::Step::kCenterCrop: return "CenterCrop";
    case TransformPipeline::Step::kRandomResizedCrop: return "RandomResizedCrop";
    case TransformPipeline::Step::kHorizontalFlip: return "RandomHorizontalFlip";
    case TransformPipeline::Step::kVerticalFlip: return "RandomVerticalFlip";
  }
  return "?";
}

// ---- Per-thread scratch ----------------------------------------------------

struct Scratch {
  std::vector<uint8_t> buf[2];
  ResampleScratch resample;
  DecodedImage decoded;
};

// A thread keeps the memory of decoded regions up to this size for its next
// image; a larger one (a huge photo) is freed after use.
constexpr size_t kKeptDecodeBytes = size_t{16} << 20;

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

inline void FloatPixel(const uint8_t* p, const float (*lut)[256], float* r, float* g, float* b, int x) {
  r[x] = lut[0][p[2]];
  g[x] = lut[1][p[1]];
  b[x] = lut[2][p[0]];
}

#ifdef HDMLP_OUTPUT_AVX2
// The float32 output, 8 pixels at a time: each value comes from its
// channel's 256-entry table by a plain load, and the 8 values of a channel
// are stored as one vector. (Gathering them was 1.6x slower on the AMD EPYC
// development VM, and Intel's gathers are slow since the Downfall microcode.)
__attribute__((target("avx2"))) void WriteFloatAvx2(const ImageView& v, bool hflip, bool vflip,
                                                     const float (*lut)[256], float* dst) {
  const int w = v.width, h = v.height;
  const int64_t plane = int64_t{w} * h;
  const int step = hflip ? -3 : 3;
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
      _mm256_storeu_ps(r + x, _mm256_setr_ps(at(0, 0), at(0, 1), at(0, 2), at(0, 3), at(0, 4), at(0, 5), at(0, 6),
                                             at(0, 7)));
      _mm256_storeu_ps(g + x, _mm256_setr_ps(at(1, 0), at(1, 1), at(1, 2), at(1, 3), at(1, 4), at(1, 5), at(1, 6),
                                             at(1, 7)));
      _mm256_storeu_ps(b + x, _mm256_setr_ps(at(2, 0), at(2, 1), at(2, 2), at(2, 3), at(2, 4), at(2, 5), at(2, 6),
                                             at(2, 7)));
    }
    for (; x < w; ++x) FloatPixel(first + step * x, lut, r, g, b, x);
  }
}
#endif

// The final pass: flips, BGR -> RGB, layout and type in one sweep into dst.
void WriteOutput(const ImageView& v, bool hflip, bool vflip, const OutputShape& shape, const float (*lut)[256],
                 uint8_t* dst) {
  const int w = v.width, h = v.height;
  const int64_t plane = int64_t{w} * h;
#ifdef HDMLP_OUTPUT_AVX2
  if (shape.type == OutputType::kFloat32 && ResampleUsesAvx2()) {
    WriteFloatAvx2(v, hflip, vflip, lut, reinterpret_cast<float*>(dst));
    return;
  }
#endif
  for (int y = 0; y < h; ++y) {
    const uint8_t* s = v.data + (vflip ? h - 1 - y : y) * v.stride;
    if (shape.type == OutputType::kFloat32) {
      float* r = reinterpret_cast<float*>(dst) + int64_t{y} * w;
      float* g = r + plane;
      float* b = g + plane;
      if (!hflip) {
        for (int x = 0; x < w; ++x) FloatPixel(s + 3 * x, lut, r, g, b, x);
      } else {
        for (int x = 0; x < w; ++x) FloatPixel(s + 3 * (w - 1 - x), lut, r, g, b, x);
      }
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

}  // namespace

// ---- Construction and validation --------------------------------------------

TransformPipeline::TransformPipeline(std::vector<TransformSpec> specs) : specs_(std::move(specs)) {
  if (specs_.empty()) {
    throw InvalidArgumentError(
        "the transform list is empty: it must start with ImgDecode() and end with ToTensor() or ToUint8()");
  }
  bool has_decode = false;
  for (const auto& s : specs_) has_decode = has_decode || s.op == "ImgDecode";

  enum Stage { kNeedDecode, kImage, kTensor, kUint8 } stage = kNeedDecode;
  // What is known about the image size at each point, for refusing crops
  // that cannot fit: nothing, the shorter side, or the exact size.
  enum Known { kUnknown, kShortSide, kExact } known = kUnknown;
  int known_h = 0, known_w = 0;  // kShortSide: known_h is the shorter side
  std::string known_from;        // which transform fixed it
  for (int c = 0; c < 3; ++c) {
    for (int v = 0; v < 256; ++v) lut_[c][v] = static_cast<float>(v) / 255.0f;
  }

  for (int i = 0; i < static_cast<int>(specs_.size()); ++i) {
    const TransformSpec& spec = specs_[i];
    const std::string where = "transform " + std::to_string(i) + " (" + spec.op + "): ";
    bool known_op = false;
    for (const char* op : kOps) known_op = known_op || spec.op == op;
    if (!known_op) {
      throw InvalidArgumentError(where + "unknown transform '" + spec.op +
                                 "' (known: ImgDecode, Resize, CenterCrop, RandomResizedCrop, "
                                 "RandomHorizontalFlip, RandomVerticalFlip, ToTensor, Normalize, ToUint8)");
    }
    if (spec.op == "ImgDecode") {
      if (i != 0) {
        throw InvalidArgumentError(where + "ImgDecode must be the first transform (it is transform " +
                                   std::to_string(i) + ")");
      }
      Args a(spec, i, {"draft"});
      draft_ = a.Flag("draft", false);
      stage = kImage;
      continue;
    }
    if (stage == kNeedDecode) {
      throw InvalidArgumentError(where + spec.op + " needs a decoded image, but the chain " +
                                 (has_decode ? "does not start with ImgDecode" : "has no ImgDecode") +
                                 ": make ImgDecode() the first transform");
    }
    const bool geometric = spec.op == "Resize" || spec.op == "CenterCrop" || spec.op == "RandomResizedCrop";
    if (geometric && stage != kImage) {
      throw InvalidArgumentError(where + spec.op + " after " + (stage == kTensor ? "ToTensor" : "ToUint8") +
                                 " is not supported: put it before (hdmlp resizes and crops the 8-bit image, "
                                 "as torchvision does with PIL images)");
    }
    Step step;
    step.index = i;
    if (spec.op == "Resize") {
      Args a(spec, i, {"size", "interpolation", "max_size", "antialias"});
      bool single;
      a.Size(&step.height, &step.width, &single);
      if (single) step.width = 0;
      step.interpolation = a.Interp();
      step.antialias = a.Flag("antialias", true);
      if (const auto* m = a.Get("max_size")) {
        if (!single) a.Fail("max_size is only allowed when size is one number (the shorter side)");
        const double v = a.Scalar("max_size", 0);
        if (v != std::floor(v) || v <= step.height || v > (1 << 20)) {
          a.Fail("max_size must be an integer greater than size (" + std::to_string(step.height) + "), got " +
                 List(*m));
        }
        step.max_size = static_cast<int>(v);
      }
      step.kind = Step::kResize;
      if (known == kExact) {
        int64_t nh, nw;
        ResizedSize(known_h, known_w, step, &nh, &nw);
        if (nh < 1 || nw < 1 || nh * nw > kMaxImagePixels) {
          a.Fail("resizes the " + std::to_string(known_h) + "x" + std::to_string(known_w) + " output of " +
                 known_from + " to " + std::to_string(nh) + "x" + std::to_string(nw));
        }
        known_h = static_cast<int>(nh);
        known_w = static_cast<int>(nw);
      } else if (single && step.max_size == 0) {
        known = kShortSide;
        known_h = step.height;
      } else if (!single) {
        known = kExact;
        known_h = step.height;
        known_w = step.width;
      } else {
        known = kUnknown;
      }
      known_from = "transform " + std::to_string(i) + " (Resize)";
    } else if (spec.op == "CenterCrop") {
      Args a(spec, i, {"size"});
      bool single;
      a.Size(&step.height, &step.width, &single);
      step.kind = Step::kCenterCrop;
      const bool too_big = (known == kExact && (step.height > known_h || step.width > known_w)) ||
                           (known == kShortSide && std::min(step.height, step.width) > known_h);
      if (too_big) {
        a.Fail("the crop " + std::to_string(step.height) + "x" + std::to_string(step.width) +
               " (h x w) is larger than the images " + known_from + " makes (" +
               (known == kExact ? std::to_string(known_h) + "x" + std::to_string(known_w)
                                : "shorter side " + std::to_string(known_h)) +
               "): crop at most that, or resize to at least the crop size");
      }
      known = kExact;
      known_h = step.height;
      known_w = step.width;
      known_from = "transform " + std::to_string(i) + " (CenterCrop)";
    } else if (spec.op == "RandomResizedCrop") {
      Args a(spec, i, {"size", "scale", "ratio", "interpolation", "antialias"});
      bool single;
      a.Size(&step.height, &step.width, &single);
      a.Range("scale", 0.08, 1.0, step.scale);
      a.Range("ratio", 3.0 / 4.0, 4.0 / 3.0, step.ratio);
      step.interpolation = a.Interp();
      step.antialias = a.Flag("antialias", true);
      step.kind = Step::kRandomResizedCrop;
      known = kExact;
      known_h = step.height;
      known_w = step.width;
      known_from = "transform " + std::to_string(i) + " (RandomResizedCrop)";
    } else if (spec.op == "RandomHorizontalFlip" || spec.op == "RandomVerticalFlip") {
      Args a(spec, i, {"p"});
      step.p = a.Probability();
      step.kind = spec.op == "RandomHorizontalFlip" ? Step::kHorizontalFlip : Step::kVerticalFlip;
    } else if (spec.op == "ToTensor") {
      Args a(spec, i, {});
      if (stage != kImage) {
        a.Fail(stage == kTensor ? "ToTensor appears twice" : "ToTensor after ToUint8: use one output transform");
      }
      stage = kTensor;
      output_.type = OutputType::kFloat32;
      output_.chw = true;
      continue;
    } else if (spec.op == "ToUint8") {
      Args a(spec, i, {"layout"});
      if (stage != kImage) {
        a.Fail(stage == kUint8 ? "ToUint8 appears twice" : "ToUint8 after ToTensor: use one output transform");
      }
      const double layout = a.Scalar("layout", 0);
      if (layout != 0 && layout != 1) a.Fail("layout must be 0 (CHW) or 1 (HWC), got " + Num(layout));
      stage = kUint8;
      output_.type = OutputType::kUint8;
      output_.chw = layout == 0;
      continue;
    } else if (spec.op == "Normalize") {
      Args a(spec, i, {"mean", "std", "inplace"});
      if (stage != kTensor) {
        a.Fail(stage == kUint8 ? "Normalize works on ToTensor's float32 output, not on ToUint8's 8-bit output "
                                 "(normalise on the GPU, or use ToTensor)"
                               : "Normalize needs a float tensor: put ToTensor() before it");
      }
      const auto* mean = a.Get("mean");
      const auto* stdv = a.Get("std");
      if (!mean || !stdv) a.Fail("mean and std are required");
      for (const auto* v : {mean, stdv}) {
        if (v->size() != 1 && v->size() != 3) {
          a.Fail(std::string(v == mean ? "mean" : "std") +
                 " must have 1 or 3 values (the images have 3 channels), got " + List(*v));
        }
        for (double x : *v) {
          if (!std::isfinite(x)) a.Fail(std::string(v == mean ? "mean" : "std") + " must be finite, got " + List(*v));
        }
      }
      for (int c = 0; c < 3; ++c) {
        const float m = static_cast<float>((*mean)[mean->size() == 1 ? 0 : c]);
        const float s = static_cast<float>((*stdv)[stdv->size() == 1 ? 0 : c]);
        if (s == 0.0f) a.Fail("std evaluated to zero, leading to division by zero: got " + List(*stdv));
        for (int v = 0; v < 256; ++v) lut_[c][v] = (lut_[c][v] - m) / s;
      }
      continue;
    }
    steps_.push_back(step);
  }
  if (stage == kNeedDecode || stage == kImage) {
    throw InvalidArgumentError(
        "the chain has no output transform: end it with ToTensor() (optionally followed by Normalize) or "
        "ToUint8()");
  }
  output_.channels = 3;
  output_.fixed = known == kExact;
  output_.height = output_.fixed ? known_h : 0;
  output_.width = output_.fixed ? known_w : 0;
}

// ---- Planning ----------------------------------------------------------------

OutputShape TransformPipeline::ShapeFor(int height, int width) const {
  OutputShape s = output_;
  s.height = height;
  s.width = width;
  return s;
}

void TransformPipeline::MakePlan(int width, int height, bool is_jpeg, uint64_t seed, int epoch, int64_t sample,
                                 const std::string& path, Plan* plan) const {
  using Action = Plan::Action;
  plan->actions.clear();
  plan->draws.clear();
  plan->reduce = 1;
  plan->first_resample = -1;
  int rx = 0, ry = 0, rw = width, rh = height;  // the view: a region of the current buffer
  bool hf = false, vf = false;
  bool resampled = false;
  auto key = [&](const Step& s) {
    return DeriveKey({seed, static_cast<uint64_t>(static_cast<int64_t>(epoch)), static_cast<uint64_t>(sample),
                      kTransformKeyDomain, static_cast<uint64_t>(s.index)});
  };
  auto crop = [&](int l, int t, int cw, int ch) {  // l, t in view coordinates
    rx += hf ? rw - l - cw : l;
    ry += vf ? rh - t - ch : t;
    rw = cw;
    rh = ch;
    Action a;
    a.kind = Action::kCrop;
    a.x = rx;
    a.y = ry;
    a.w = rw;
    a.h = rh;
    plan->actions.push_back(a);
  };
  auto resample = [&](const Step& s, int64_t nh, int64_t nw) {
    if (nh < 1 || nw < 1 || nh * nw > kMaxImagePixels) {
      throw InvalidArgumentError("'" + path + "': transform " + std::to_string(s.index) + " (" + StepName(s) +
                                 ") would resize this " + std::to_string(rw) + "x" + std::to_string(rh) +
                                 " (w x h) image to " + std::to_string(nw) + "x" + std::to_string(nh) +
                                 ", outside 1.." + std::to_string(kMaxImagePixels) + " pixels");
    }
    if (!resampled) {
      resampled = true;
      plan->first_resample = static_cast<int>(plan->actions.size());
      plan->src_x = rx;
      plan->src_y = ry;
      plan->src_w = rw;
      plan->src_h = rh;
    }
    Action a;
    a.kind = Action::kResample;
    a.w = static_cast<int>(nw);
    a.h = static_cast<int>(nh);
    a.interpolation = s.interpolation;
    a.antialias = s.antialias;
    plan->actions.push_back(a);
    rx = ry = 0;
    rw = a.w;
    rh = a.h;
  };
  bool only_crops = true;  // before the first resample: may the decode be reduced?
  for (const Step& s : steps_) {
    switch (s.kind) {
      case Step::kResize: {
        int64_t nh, nw;
        ResizedSize(rh, rw, s, &nh, &nw);
        if (nh == rh && nw == rw) break;  // torchvision returns the image as is
        resample(s, nh, nw);
        break;
      }
      case Step::kCenterCrop: {
        const int ch = s.height, cw = s.width;
        if (ch <= rh && cw <= rw) {
          crop(HalfRoundEven(rw - cw), HalfRoundEven(rh - ch), cw, ch);
          break;
        }
        // torchvision pads with zeros (the short dimensions only), then crops.
        if (!resampled) only_crops = false;
        Action a;
        a.kind = Action::kPadCrop;
        a.w = cw;
        a.h = ch;
        a.x = cw > rw ? (cw - rw) / 2 : 0;
        a.sx = cw > rw ? 0 : HalfRoundEven(rw - cw);
        a.y = ch > rh ? (ch - rh) / 2 : 0;
        a.sy = ch > rh ? 0 : HalfRoundEven(rh - ch);
        a.hflip = hf;
        a.vflip = vf;
        plan->actions.push_back(a);
        rx = ry = 0;
        rw = cw;
        rh = ch;
        hf = vf = false;
        break;
      }
      case Step::kRandomResizedCrop: {
        // torchvision's RandomResizedCrop.get_params.
        Rng rng(key(s));
        const double area = static_cast<double>(rh) * rw;
        const double log_lo = std::log(s.ratio[0]), log_hi = std::log(s.ratio[1]);
        int top = -1, left = 0, ch = 0, cw = 0;
        for (int attempt = 0; attempt < 10; ++attempt) {
          const double target_area = area * rng.UniformDouble(s.scale[0], s.scale[1]);
          const double aspect = std::exp(rng.UniformDouble(log_lo, log_hi));
          const double w = RoundHalfEven(std::sqrt(target_area * aspect));
          const double h = RoundHalfEven(std::sqrt(target_area / aspect));
          if (0 < w && w <= rw && 0 < h && h <= rh) {
            cw = static_cast<int>(w);
            ch = static_cast<int>(h);
            top = static_cast<int>(rng.UniformInt(0, rh - ch));
            left = static_cast<int>(rng.UniformInt(0, rw - cw));
            break;
          }
        }
        if (top < 0) {  // central crop fallback
          const double in_ratio = static_cast<double>(rw) / static_cast<double>(rh);
          if (in_ratio < s.ratio[0]) {
            cw = rw;
            ch = static_cast<int>(RoundHalfEven(cw / s.ratio[0]));
          } else if (in_ratio > s.ratio[1]) {
            ch = rh;
            cw = static_cast<int>(RoundHalfEven(ch * s.ratio[1]));
          } else {
            cw = rw;
            ch = rh;
          }
          top = (rh - ch) / 2;
          left = (rw - cw) / 2;
        }
        RandomDraw draw;
        draw.index = s.index;
        draw.top = top;
        draw.left = left;
        draw.height = ch;
        draw.width = cw;
        plan->draws.push_back(draw);
        crop(left, top, cw, ch);
        if (ch != s.height || cw != s.width) resample(s, s.height, s.width);
        break;
      }
      case Step::kHorizontalFlip:
      case Step::kVerticalFlip: {
        if (s.p <= 0) break;
        Rng rng(key(s));
        RandomDraw draw;
        draw.index = s.index;
        draw.flip = rng.UniformDouble() < s.p;
        plan->draws.push_back(draw);
        if (draw.flip) (s.kind == Step::kHorizontalFlip ? hf : vf) ^= true;
        break;
      }
    }
  }
  plan->width = rw;
  plan->height = rh;
  plan->hflip = hf;
  plan->vflip = vf;
  plan->image_width = width;
  plan->image_height = height;
  // A resample followed by crops computes only what the last crop keeps
  // (each crop's rectangle lies in the one before).
  for (size_t i = 0; i < plan->actions.size(); ++i) {
    if (plan->actions[i].kind != Action::kResample) continue;
    size_t j = i + 1;
    while (j < plan->actions.size() && plan->actions[j].kind == Action::kCrop) ++j;
    if (j == i + 1) continue;
    const Action& last = plan->actions[j - 1];
    plan->actions[i].window = PixelRect{last.x, last.y, last.w, last.h};
    plan->actions.erase(plan->actions.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                        plan->actions.begin() + static_cast<std::ptrdiff_t>(j));
  }
  // Draft: decode the JPEG at 1/d when the first resample still shrinks the
  // reduced image (never upsamples it).
  if (draft_ && is_jpeg && resampled && only_crops) {
    const Action& a = plan->actions[plan->first_resample];
    for (int d : {8, 4, 2}) {
      if (plan->src_w >= int64_t{a.w} * d && plan->src_h >= int64_t{a.h} * d) {
        plan->reduce = d;
        break;
      }
    }
  }
  // The region to decode. A resample reads only the view it is given (the
  // crop: torchvision crops, then resizes the cropped image), and crops read
  // only their own rectangle; a zero-padding crop before any resample needs
  // the whole image.
  if (plan->reduce > 1) {
    // The full-resolution region, mapped onto the 1/d image: pixel i of the
    // reduced image covers pixels [i*d, (i+1)*d). The region is its hull;
    // the resample's box is fractional within it.
    const int d = plan->reduce;
    const int dw = (width + d - 1) / d, dh = (height + d - 1) / d;
    const double x0 = plan->src_x / double(d), y0 = plan->src_y / double(d);
    const double x1 = (plan->src_x + plan->src_w) / double(d), y1 = (plan->src_y + plan->src_h) / double(d);
    const int hx0 = static_cast<int>(std::floor(x0)), hy0 = static_cast<int>(std::floor(y0));
    const int hx1 = std::min(dw, static_cast<int>(std::ceil(x1)));
    const int hy1 = std::min(dh, static_cast<int>(std::ceil(y1)));
    plan->region = PixelRect{hx0, hy0, hx1 - hx0, hy1 - hy0};
    plan->reduced_box[0] = static_cast<float>(x0 - hx0);
    plan->reduced_box[1] = static_cast<float>(y0 - hy0);
    plan->reduced_box[2] = static_cast<float>(x1 - hx0);
    plan->reduced_box[3] = static_cast<float>(y1 - hy0);
  } else if (only_crops && resampled) {
    plan->region = PixelRect{plan->src_x, plan->src_y, plan->src_w, plan->src_h};
    const Action& a = plan->actions[plan->first_resample];
    if (a.window.width > 0) {  // only the input that the window's taps read
      const ResampleGeometry g{plan->src_w, plan->src_h,
                               {0, 0, static_cast<float>(plan->src_w), static_cast<float>(plan->src_h)},
                               a.w, a.h, a.interpolation, a.antialias};
      const PixelRect r = ResampleSourceRegion(g, a.window, &ThreadScratch().resample);
      plan->region = PixelRect{plan->src_x + r.x, plan->src_y + r.y, r.width, r.height};
    }
  } else if (only_crops) {
    plan->region = PixelRect{rx, ry, rw, rh};  // nothing resampled: the final view
  } else {
    plan->region = PixelRect{0, 0, width, height};
  }
}

std::vector<TransformPipeline::RandomDraw> TransformPipeline::RandomDraws(int width, int height, uint64_t seed,
                                                                         int epoch, int64_t sample) const {
  if (width < 1 || height < 1 || int64_t{width} * height > kMaxImagePixels) {
    throw InvalidArgumentError("RandomDraws: invalid image size " + std::to_string(width) + "x" +
                               std::to_string(height));
  }
  Plan plan;
  MakePlan(width, height, false, seed, epoch, sample, "<RandomDraws>", &plan);
  return plan.draws;
}

// ---- Applying ----------------------------------------------------------------

OutputShape TransformPipeline::ShapeOf(const uint8_t* data, int64_t size, const std::string& path) const {
  const ImageHeader header = ReadImageHeader(data, size, path, /*check_complete=*/false);
  if (output_.fixed) return output_;
  thread_local Plan plan;
  MakePlan(header.width, header.height, false, 0, 0, 0, path, &plan);
  return ShapeFor(plan.height, plan.width);
}

OutputShape TransformPipeline::ShapeOfImage(int width, int height) const {
  if (output_.fixed) return output_;
  thread_local Plan plan;
  MakePlan(width, height, false, 0, 0, 0, "<ShapeOfImage>", &plan);
  return ShapeFor(plan.height, plan.width);
}

OutputShape TransformPipeline::Apply(const uint8_t* data, int64_t size, const std::string& path, uint64_t seed,
                                     int epoch, int64_t sample, uint8_t* dst) const {
  return Apply(data, size, path, seed, epoch, sample, OutputShape{}, dst);
}

OutputShape TransformPipeline::Apply(const uint8_t* data, int64_t size, const std::string& path, uint64_t seed,
                                     int epoch, int64_t sample, const OutputShape& expected,
                                     uint8_t* dst) const {
  const ImageHeader header = ReadImageHeader(data, size, path, /*check_complete=*/true);
  thread_local Plan plan;
  MakePlan(header.width, header.height, header.format == ImageFormat::kJpeg, seed, epoch, sample, path, &plan);
  const OutputShape shape = ShapeFor(plan.height, plan.width);
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

  DecodedImage& decoded = ThreadScratch().decoded;
  DecodeImage(data, size, header, plan.reduce, plan.region, path, &decoded);
  Execute(plan, decoded.view, PixelRect{plan.region.x, plan.region.y, 0, 0}, shape, dst);
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
  thread_local Plan plan;
  MakePlan(bgr.width, bgr.height, false, seed, epoch, sample, path, &plan);
  const OutputShape shape = ShapeFor(plan.height, plan.width);
  if (shape.type == OutputType::kFloat32 && reinterpret_cast<uintptr_t>(dst) % alignof(float) != 0) {
    throw InvalidArgumentError("TransformPipeline::ApplyToImage: dst must be 4-byte aligned for float32 output");
  }
  Execute(plan, bgr, PixelRect{}, shape, dst);
  return shape;
}

void TransformPipeline::Execute(const Plan& plan, const ImageView& decoded, const PixelRect& origin,
                                const OutputShape& shape, uint8_t* dst) const {
  Scratch& t = ThreadScratch();
  const int d = plan.reduce;
  // `data` holds the current image's pixels from (dx, dy) on; `view` is the
  // rectangle of the current image that the chain looks at.
  ImageView data = decoded;
  int dx = origin.x, dy = origin.y;
  PixelRect view{0, 0, plan.image_width, plan.image_height};
  auto visible = [&] { return SubView(data, PixelRect{view.x - dx, view.y - dy, view.width, view.height}); };
  int next = 0;
  using Action = Plan::Action;
  for (int ai = 0; ai < static_cast<int>(plan.actions.size()); ++ai) {
    const Action& a = plan.actions[ai];
    if (d > 1 && ai < plan.first_resample) continue;  // folded into the reduced resample
    switch (a.kind) {
      case Action::kCrop:
        view = PixelRect{a.x, a.y, a.w, a.h};
        break;
      case Action::kResample: {
        const PixelRect win = a.window.width > 0 ? a.window : PixelRect{0, 0, a.w, a.h};
        auto& out = t.buf[next];
        out.resize(static_cast<size_t>(win.width) * win.height * 3);
        if (d > 1 && ai == plan.first_resample) {
          // `data` is the region the reduced crop covers (MakePlan).
          const float* box = plan.reduced_box;
          const ResampleGeometry g{data.width, data.height, {box[0], box[1], box[2], box[3]}, a.w, a.h,
                                   a.interpolation, a.antialias};
          ResampleWindow(data, 0, 0, g, win, out.data(), int64_t{win.width} * 3, &t.resample);
        } else {
          const ResampleGeometry g{view.width, view.height,
                                   {0, 0, static_cast<float>(view.width), static_cast<float>(view.height)},
                                   a.w, a.h, a.interpolation, a.antialias};
          ResampleWindow(data, dx - view.x, dy - view.y, g, win, out.data(), int64_t{win.width} * 3, &t.resample);
        }
        data = ImageView{out.data(), win.width, win.height, int64_t{win.width} * 3};
        dx = dy = 0;
        view = PixelRect{0, 0, win.width, win.height};
        next ^= 1;
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
          for (int x = 0; x < cw; ++x) {
            const int vx = a.sx + x;
            std::memcpy(o + 3 * x, s + 3 * (a.hflip ? cur.width - 1 - vx : vx), 3);
          }
        }
        data = ImageView{out.data(), a.w, a.h, int64_t{a.w} * 3};
        dx = dy = 0;
        view = PixelRect{0, 0, a.w, a.h};
        next ^= 1;
        break;
      }
    }
  }
  WriteOutput(visible(), plan.hflip, plan.vflip, shape, lut_, dst);
}

}  // namespace hdmlp
