// Tests of the op classes (transforms/ops/) and what the plan does with them:
// the registry, argument and chain checks of the new ops, their arithmetic
// on hand-checkable images (PIL's formulas; parity with torchvision itself
// is tested in tests/python/test_transform_ops.py), that decoding only the
// region the plan reads gives the pixels of a whole decode for chains with
// image and tensor ops, and that their draws are a pure function of
// (seed, epoch, sample) with the intended frequencies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "hdmlp/errors.h"
#include "hdmlp/transforms/augment.h"
#include "hdmlp/transforms/image_ops.h"
#include "hdmlp/transforms/op_registry.h"
#include "hdmlp/transforms/transform_pipeline.h"
#include "hdmlp/util/random.h"

namespace hdmlp {
namespace {

using Specs = std::vector<TransformSpec>;
using Bytes = std::vector<uint8_t>;
using Args = std::map<std::string, std::vector<double>>;

// A textured colour image (BGR), deterministic in seed.
cv::Mat Picture(int w, int h, uint64_t seed = 1) {
  cv::Mat m(h, w, CV_8UC3);
  Rng rng(seed);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      auto* p = m.ptr<uint8_t>(y) + 3 * x;
      p[0] = static_cast<uint8_t>((x * 255) / std::max(1, w - 1));
      p[1] = static_cast<uint8_t>((y * 255) / std::max(1, h - 1));
      p[2] = static_cast<uint8_t>(rng.Uniform(256));
    }
  }
  return m;
}

ImageView View(const cv::Mat& m) { return ImageView{m.data, m.cols, m.rows, static_cast<int64_t>(m.step)}; }

std::string ErrorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "";
}

// ImgDecode, ops, ToUint8(HWC): the 8-bit RGB result of `ops` on `img`.
Bytes RunOps(const Specs& ops, const cv::Mat& img, int64_t sample = 0) {
  Specs specs = {{"ImgDecode", {}}};
  specs.insert(specs.end(), ops.begin(), ops.end());
  specs.push_back({"ToUint8", {{"layout", {1}}}});
  TransformPipeline p(specs);
  std::vector<uint8_t> out(static_cast<size_t>(int64_t{img.cols + 400} * (img.rows + 400) * 3));
  const OutputShape got = p.ApplyToImage(View(img), "img", 0, 0, sample, out.data());
  out.resize(static_cast<size_t>(got.bytes()));
  return out;
}

// RGB of pixel (x, y) of a BGR image.
std::vector<int> RgbAt(const cv::Mat& m, int x, int y) {
  const uint8_t* p = m.ptr<uint8_t>(y) + 3 * x;
  return {p[2], p[1], p[0]};
}

std::vector<int> At(const Bytes& hwc, int width, int x, int y) {
  const uint8_t* p = hwc.data() + (int64_t{y} * width + x) * 3;
  return {p[0], p[1], p[2]};
}

// ---- Registry and checks -------------------------------------------------------

TEST(TransformOpRegistryTest, EveryNameIsRegisteredOnceAndUnknownNamesAreListed) {
  const auto names = OpNames();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  for (const char* n : {"ColorJitter", "Grayscale", "RandomGrayscale", "GaussianBlur", "RandomErasing", "Pad",
                        "RandomCrop", "RandomRotation", "RandomAffine", "TrivialAugmentWide", "RandAugment",
                        "AutoAugment", "RandomResizedCrop", "ToTensor"}) {
    EXPECT_NE(FindOp(n), nullptr) << n;
  }
  EXPECT_EQ(FindOp("Solarize"), nullptr);
  const std::string e = ErrorOf([] { TransformPipeline p({{"ImgDecode", {}}, {"Solarize", {}}, {"ToTensor", {}}}); });
  EXPECT_NE(e.find("unknown transform 'Solarize' (known: ImgDecode, Resize"), std::string::npos) << e;
  EXPECT_NE(e.find("TrivialAugmentWide"), std::string::npos) << e;
}

TEST(TransformOpRegistryTest, BadArgumentsNameTheTransform) {
  struct Case {
    std::string op;
    Args args;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"ColorJitter", {{"brightness", {-1}}}, "non-negative"},
      {"ColorJitter", {{"hue", {0.2, 0.7}}}, "between (-0.5, 0.5)"},
      {"ColorJitter", {{"contrast", {1.5, 0.5}}}, "between"},
      {"ColorJitter", {{"gamma", {1}}}, "has no argument 'gamma'"},
      {"Grayscale", {{"num_output_channels", {2}}}, "either 1 or 3"},
      {"RandomGrayscale", {{"p", {2}}}, "probability in [0, 1]"},
      {"GaussianBlur", {}, "kernel_size is required"},
      {"GaussianBlur", {{"kernel_size", {4}}}, "odd positive integer"},
      {"GaussianBlur", {{"kernel_size", {3}}, {"sigma", {0}}}, "sigma must be positive"},
      {"GaussianBlur", {{"kernel_size", {3}}, {"sigma", {2, 1}}}, "min <= max"},
      {"Pad", {}, "padding is required"},
      {"Pad", {{"padding", {1, 2, 3}}}, "sequence of 2"},
      {"Pad", {{"padding", {-1}}}, "non-negative integer"},
      {"Pad", {{"padding", {1}}, {"padding_mode", {4}}}, "padding_mode must be"},
      {"Pad", {{"padding", {1}}, {"fill", {300}}}, "8-bit levels"},
      {"RandomCrop", {{"size", {0}}}, "positive integer"},
      {"RandomRotation", {}, "degrees is required"},
      {"RandomRotation", {{"degrees", {10, -10}}}, "pair (min, max)"},
      {"RandomRotation", {{"degrees", {10}}, {"interpolation", {1}}}, "not supported here"},
      {"RandomAffine", {{"degrees", {0}}, {"translate", {0.5, 1.5}}}, "between 0 and 1"},
      {"RandomAffine", {{"degrees", {0}}, {"scale", {0, 1}}}, "positive"},
      {"RandomAffine", {{"degrees", {0}}, {"shear", {1, 2, 3}}}, "four values"},
      {"TrivialAugmentWide", {{"num_magnitude_bins", {1}}}, "integer in [2,"},
      {"RandAugment", {{"magnitude", {31}}}, "magnitude must be an integer in [0, 30]"},
      {"AutoAugment", {{"policy", {3}}}, "policy must be an integer in [0, 2]"},
  };
  for (const auto& c : cases) {
    const std::string e = ErrorOf([&] { TransformPipeline p({{"ImgDecode", {}}, {c.op, c.args}, {"ToTensor", {}}}); });
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.op << ": got '" << e << "', expected '" << c.expect << "'";
    EXPECT_NE(e.find("transform 1 (" + c.op + ")"), std::string::npos) << e;
  }
  const std::string e = ErrorOf([] {
    TransformPipeline p({{"ImgDecode", {}}, {"ToTensor", {}}, {"RandomErasing", {{"scale", {0.5, 1.5}}}}});
  });
  EXPECT_NE(e.find("must lie in [0, 1]"), std::string::npos) << e;
}

TEST(TransformOpRegistryTest, ChainPlacementIsChecked) {
  auto error = [](Specs s) { return ErrorOf([&] { TransformPipeline p(std::move(s)); }); };
  const std::vector<double> mean = {0.5, 0.5, 0.5};
  std::string e = error({{"ImgDecode", {}}, {"ToTensor", {}}, {"ColorJitter", {{"brightness", {0.4}}}}});
  EXPECT_NE(e.find("ColorJitter after ToTensor is not supported: put it before"), std::string::npos) << e;
  e = error({{"ImgDecode", {}}, {"ToUint8", {}}, {"TrivialAugmentWide", {}}});
  EXPECT_NE(e.find("TrivialAugmentWide after ToUint8"), std::string::npos) << e;
  e = error({{"ImgDecode", {}}, {"RandomErasing", {}}, {"ToTensor", {}}});
  EXPECT_NE(e.find("works on the tensor: put it after ToTensor"), std::string::npos) << e;
  e = error({{"ImgDecode", {}}, {"ToTensor", {}}, {"RandomErasing", {}}, {"Normalize", {{"mean", mean}, {"std", mean}}}});
  EXPECT_NE(e.find("Normalize after RandomErasing"), std::string::npos) << e;
  e = error({{"ImgDecode", {}}, {"Grayscale", {}}, {"ToTensor", {}}, {"Normalize", {{"mean", mean}, {"std", mean}}}});
  EXPECT_NE(e.find("must have 1 value (the images have 1 channel"), std::string::npos) << e;
  e = error({{"ImgDecode", {}}, {"ToUint8", {}}, {"RandomErasing", {{"random", {1}}}}});
  EXPECT_NE(e.find("need float output"), std::string::npos) << e;
  e = error({{"ImgDecode", {}}, {"Grayscale", {}}, {"RandomRotation", {{"degrees", {5}}, {"fill", {1, 2, 3}}}},
             {"ToTensor", {}}});
  EXPECT_NE(e.find("fill must be one value"), std::string::npos) << e;
  e = error({{"ImgDecode", {}}, {"Resize", {{"size", {32, 32}}}}, {"RandomCrop", {{"size", {40}}, {"padding", {2}}}},
             {"ToTensor", {}}});
  EXPECT_NE(e.find("larger than the images transform 1 (Resize) makes (32x32, plus the padding)"), std::string::npos)
      << e;
  // With enough padding, or pad_if_needed, the same crop is fine.
  EXPECT_EQ(error({{"ImgDecode", {}}, {"Resize", {{"size", {32, 32}}}}, {"RandomCrop", {{"size", {40}}, {"padding", {4}}}},
                   {"ToTensor", {}}}),
            "");
  EXPECT_EQ(error({{"ImgDecode", {}}, {"Resize", {{"size", {32, 32}}}},
                   {"RandomCrop", {{"size", {40}}, {"pad_if_needed", {1}}}}, {"ToTensor", {}}}),
            "");
}

TEST(TransformOpRegistryTest, OutputShapesFollowEachOpsRule) {
  auto shape = [](Specs ops, std::string last = "ToTensor") {
    Specs s = {{"ImgDecode", {}}};
    s.insert(s.end(), ops.begin(), ops.end());
    s.push_back({last, {}});
    return TransformPipeline(s).output();
  };
  OutputShape s = shape({{"RandomResizedCrop", {{"size", {32}}}}, {"Grayscale", {}}});
  EXPECT_TRUE(s.fixed);
  EXPECT_EQ(s.ToString(), "float32 1x32x32 (CHW)");
  s = shape({{"Grayscale", {}}, {"Grayscale", {{"num_output_channels", {3}}}}, {"CenterCrop", {{"size", {8}}}}});
  EXPECT_EQ(s.channels, 3);
  s = shape({{"Resize", {{"size", {20, 30}}}}, {"Pad", {{"padding", {1, 2, 3, 4}}}}}, "ToUint8");
  EXPECT_EQ(s.ToString(), "uint8 3x26x34 (CHW)");
  EXPECT_FALSE(shape({{"CenterCrop", {{"size", {20}}}}, {"RandomRotation", {{"degrees", {30}}, {"expand", {1}}}}}).fixed);
  EXPECT_TRUE(shape({{"RandomCrop", {{"size", {24, 20}}, {"padding", {4}}}}, {"TrivialAugmentWide", {}}}).fixed);
}

// ---- Arithmetic (PIL's formulas, by hand) --------------------------------------------

TEST(TransformOpArithmeticTest, EnhanceOpsBlendAsPilDoes) {
  const cv::Mat img = Picture(9, 7);
  // Brightness: blend with black, in C float, truncated (and clipped above 1).
  for (double f : {0.0, 0.37, 1.0, 1.8}) {
    const Bytes out = RunOps({{"ColorJitter", {{"brightness", {f, f}}}}}, img);
    for (int y = 0; y < 7; ++y) {
      for (int x = 0; x < 9; ++x) {
        const auto want = RgbAt(img, x, y);
        for (int c = 0; c < 3; ++c) {
          const float v = static_cast<float>(f) * static_cast<float>(want[c]);
          ASSERT_EQ(At(out, 9, x, y)[c], static_cast<int>(std::min(v, 255.0f))) << f;
        }
      }
    }
  }
  // Saturation 0: every pixel becomes its luma, (19595 R + 38470 G + 7471 B + 2^15) >> 16.
  const Bytes gray = RunOps({{"ColorJitter", {{"saturation", {0, 0}}}}}, img);
  const Bytes gray_op = RunOps({{"Grayscale", {{"num_output_channels", {3}}}}}, img);
  EXPECT_EQ(gray, gray_op);
  for (int x = 0; x < 9; ++x) {
    const auto rgb = RgbAt(img, x, 3);
    const int l = (rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 0x8000) >> 16;
    EXPECT_EQ(At(gray, 9, x, 3), (std::vector<int>{l, l, l}));
  }
  // Contrast 0: the rounded mean of the luma everywhere.
  const Bytes flat = RunOps({{"ColorJitter", {{"contrast", {0, 0}}}}}, img);
  double sum = 0;
  for (int y = 0; y < 7; ++y) {
    for (int x = 0; x < 9; ++x) sum += gray[(y * 9 + x) * 3];
  }
  const int mean = static_cast<int>(sum / 63 + 0.5);
  EXPECT_EQ(std::count(flat.begin(), flat.end(), mean), 63 * 3);
  // Hue by half a turn twice is the identity on this image's hues? No: but a
  // gray image has no hue, so any shift keeps it.
  cv::Mat g(5, 5, CV_8UC3, cv::Scalar(77, 77, 77));
  EXPECT_EQ(RunOps({{"ColorJitter", {{"hue", {0.31, 0.31}}}}}, g), Bytes(75, 77));
}

TEST(TransformOpArithmeticTest, PadModesFollowNumpy) {
  cv::Mat row(1, 3, CV_8UC3);
  for (int x = 0; x < 3; ++x) row.ptr<uint8_t>(0)[3 * x] = row.ptr<uint8_t>(0)[3 * x + 1] =
      row.ptr<uint8_t>(0)[3 * x + 2] = static_cast<uint8_t>(10 * (x + 1));
  auto first_channel = [](const Bytes& b) {
    std::vector<int> v;
    for (size_t i = 0; i < b.size(); i += 3) v.push_back(b[i]);
    return v;
  };
  auto pad = [&](int mode, int amount) {
    return first_channel(
        RunOps({{"Pad", {{"padding", {double(amount), 0}}, {"padding_mode", {double(mode)}}, {"fill", {5}}}}}, row));
  };
  EXPECT_EQ(pad(0, 2), (std::vector<int>{5, 5, 10, 20, 30, 5, 5}));
  EXPECT_EQ(pad(1, 2), (std::vector<int>{10, 10, 10, 20, 30, 30, 30}));
  EXPECT_EQ(pad(2, 2), (std::vector<int>{30, 20, 10, 20, 30, 20, 10}));
  EXPECT_EQ(pad(3, 2), (std::vector<int>{20, 10, 10, 20, 30, 30, 20}));
  // Beyond the size, reflect repeats as numpy.pad does (period 2 (n - 1)).
  EXPECT_EQ(pad(2, 5), (std::vector<int>{20, 10, 20, 30, 20, 10, 20, 30, 20, 10, 20, 30, 20}));  // np.pad([10, 20, 30], 5, "reflect")
  std::vector<int> idx;
  PadIndices(1, 3, 2, PadMode::kReflect, &idx);
  EXPECT_EQ(idx, (std::vector<int>{0, 0, 0, 0, 0, 0}));
}

TEST(TransformOpArithmeticTest, RotationsByRightAnglesAreTransposes) {
  const cv::Mat img = Picture(5, 3);
  const Bytes r90 = RunOps({{"RandomRotation", {{"degrees", {90, 90}}, {"expand", {1}}}}}, img);
  const Bytes r180 = RunOps({{"RandomRotation", {{"degrees", {180, 180}}}}}, img);
  const Bytes r270 = RunOps({{"RandomRotation", {{"degrees", {-90, -90}}, {"expand", {1}}}}}, img);
  ASSERT_EQ(r90.size(), 45u);
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 5; ++x) {
      // Counter-clockwise: pixel (x, y) goes to (y, W - 1 - x) of the 3x5 result.
      EXPECT_EQ(At(r90, 3, y, 4 - x), RgbAt(img, x, y));
      EXPECT_EQ(At(r180, 5, 4 - x, 2 - y), RgbAt(img, x, y));
      EXPECT_EQ(At(r270, 3, 2 - y, x), RgbAt(img, x, y));
    }
  }
  // Without expand, a quarter turn of a non-square image is an affine
  // resampling into the same size; the centre pixel stays.
  const cv::Mat odd = Picture(7, 5);
  const Bytes q = RunOps({{"RandomRotation", {{"degrees", {90, 90}}}}}, odd);
  EXPECT_EQ(q.size(), 105u);
  EXPECT_EQ(At(q, 7, 3, 2), RgbAt(odd, 3, 2));
}

TEST(TransformOpArithmeticTest, AffinePathsAgreeAndTranslationShifts) {
  const cv::Mat img = Picture(16, 12);
  const uint8_t fill[3] = {1, 2, 3};
  cv::Mat out(12, 16, CV_8UC3);
  const MutableImageView o{out.data, 16, 12, static_cast<int64_t>(out.step)};
  // A pure translation by (3, -2): the nearest path shifts pixels exactly.
  double m[6];
  InverseAffineMatrix(8, 6, 0, 3, -2, 1.0, 0, 0, m);
  AffineTransform(View(img), m, TransformFilter::kNearest, fill, o);
  EXPECT_EQ(RgbAt(out, 5, 4), RgbAt(img, 2, 6));
  EXPECT_EQ(RgbAt(out, 0, 0), (std::vector<int>{1, 2, 3}));  // outside: fill
  // Bilinear at integer shifts interpolates nothing.
  cv::Mat bil(12, 16, CV_8UC3);
  AffineTransform(View(img), m, TransformFilter::kBilinear, fill,
                  MutableImageView{bil.data, 16, 12, static_cast<int64_t>(bil.step)});
  EXPECT_EQ(RgbAt(bil, 5, 4), RgbAt(img, 2, 6));
  // The fixed-point nearest path (a shear) equals sampling at the affine
  // map of each pixel centre, within the rounding of 16.16 fixed point.
  InverseAffineMatrix(0, 0, 0, 0, 0, 1.0, 20, 0, m);
  AffineTransform(View(img), m, TransformFilter::kNearest, fill, o);
  int same = 0;
  for (int y = 0; y < 12; ++y) {
    for (int x = 0; x < 16; ++x) {
      const double sx = m[0] * (x + 0.5) + m[1] * (y + 0.5) + m[2], sy = m[3] * (x + 0.5) + m[4] * (y + 0.5) + m[5];
      const bool inside = sx >= 0 && sx < 16 && sy >= 0 && sy < 12;
      same += (inside ? RgbAt(img, int(sx), int(sy)) : std::vector<int>{1, 2, 3}) == RgbAt(out, x, y);
    }
  }
  EXPECT_GE(same, 12 * 16 - 4);
}

TEST(TransformOpArithmeticTest, LutOpsAndEqualize) {
  const cv::Mat img = Picture(10, 10);
  const Bytes inv = RunOps({{"RandAugment", {{"num_ops", {0}}}}}, img);  // no op: the image
  for (int x = 0; x < 10; ++x) EXPECT_EQ(At(inv, 10, x, 5), RgbAt(img, x, 5));
  cv::Mat out(10, 10, CV_8UC3);
  const MutableImageView o{out.data, 10, 10, static_cast<int64_t>(out.step)};
  Invert(View(img), o);
  EXPECT_EQ(RgbAt(out, 4, 4)[0], 255 - RgbAt(img, 4, 4)[0]);
  Posterize(View(img), 3, o);
  EXPECT_EQ(RgbAt(out, 7, 2)[2], RgbAt(img, 7, 2)[2] & 0xE0);
  Solarize(View(img), 100.5, o);
  for (int c = 0; c < 3; ++c) {
    const int v = RgbAt(img, 3, 8)[c];
    EXPECT_EQ(RgbAt(out, 3, 8)[c], v < 100.5 ? v : 255 - v);
  }
  // A two-level image: equalize and autocontrast stretch it to 0 and 255.
  cv::Mat two(4, 4, CV_8UC3, cv::Scalar(60, 60, 60));
  two(cv::Rect(0, 0, 4, 2)).setTo(cv::Scalar(90, 90, 90));
  cv::Mat eq(4, 4, CV_8UC3);
  AutoContrast(View(two), MutableImageView{eq.data, 4, 4, static_cast<int64_t>(eq.step)});
  EXPECT_EQ(RgbAt(eq, 0, 0), (std::vector<int>{255, 255, 255}));
  EXPECT_EQ(RgbAt(eq, 0, 3), (std::vector<int>{0, 0, 0}));
  Equalize(View(two), MutableImageView{eq.data, 4, 4, static_cast<int64_t>(eq.step)});
  // PIL: step = (16 - 8) // 255 = 0, so the table is the identity.
  EXPECT_EQ(RgbAt(eq, 0, 0), (std::vector<int>{90, 90, 90}));
}

TEST(TransformOpArithmeticTest, TorchLinspaceEndpointsAndMonotony) {
  for (int steps : {2, 10, 31, 255}) {
    EXPECT_EQ(TorchLinspace(0.0, 0.99, steps, 0), 0.0);
    EXPECT_EQ(TorchLinspace(0.0, 0.99, steps, steps - 1), static_cast<double>(0.99f));
    EXPECT_EQ(TorchLinspace(255.0, 0.0, steps, steps - 1), 0.0);
    for (int i = 1; i < steps; ++i) EXPECT_LT(TorchLinspace(0, 135, steps, i - 1), TorchLinspace(0, 135, steps, i));
  }
  bool signed_op;
  EXPECT_EQ(StandardMagnitude(AugmentOp::kPosterize, 9, 10, 32, 32, &signed_op), 4);  // 8 - round(9 / 2.25)
  EXPECT_FALSE(signed_op);
}

TEST(TransformOpArithmeticTest, RandomErasingWritesTheRectangleInEveryLayout) {
  const cv::Mat img = Picture(12, 10);
  for (bool flip : {false, true}) {
    Specs specs = {{"ImgDecode", {}}, {"ToTensor", {}}, {"RandomErasing", {{"p", {1}}, {"value", {0.5, -1, 2}}}}};
    if (flip) specs.push_back({"RandomHorizontalFlip", {{"p", {1}}}});
    TransformPipeline p(specs);
    const auto draws = p.RandomDraws(12, 10, 0, 0, 3);
    ASSERT_EQ(draws.size(), flip ? 2u : 1u);
    std::map<std::string, double> d;
    for (const auto& v : draws[0].values) d[v.name] = v.value;
    ASSERT_EQ(d["erase"], 1);
    std::vector<float> out(3 * 12 * 10);
    p.ApplyToImage(View(img), "e", 0, 0, 3, reinterpret_cast<uint8_t*>(out.data()));
    int erased = 0;
    for (int c = 0; c < 3; ++c) {
      for (int y = 0; y < 10; ++y) {
        for (int x = 0; x < 12; ++x) {
          const int fx = flip ? 11 - x : x;  // the op's frame
          const bool in = y >= d["top"] && y < d["top"] + d["height"] && fx >= d["left"] && fx < d["left"] + d["width"];
          const float v = out[(c * 10 + y) * 12 + x];
          if (in) {
            ASSERT_EQ(v, (std::vector<float>{0.5f, -1.0f, 2.0f})[c]);
            ++erased;
          } else {
            ASSERT_EQ(v, RgbAt(img, flip ? 11 - x : x, y)[c] / 255.0f);
          }
        }
      }
    }
    EXPECT_EQ(erased, 3 * d["height"] * d["width"]);
  }
  // uint8 HWC, one value for all channels.
  TransformPipeline u({{"ImgDecode", {}}, {"ToUint8", {{"layout", {1}}}}, {"RandomErasing", {{"p", {1}}, {"value", {7}}}}});
  Bytes hwc(12 * 10 * 3);
  u.ApplyToImage(View(img), "e", 0, 0, 1, hwc.data());
  EXPECT_GT(std::count(hwc.begin(), hwc.end(), 7), 0);
}

// ---- The plan: the decode region stays exact with the new ops -------------------------

TEST(TransformOpPlanTest, DecodingOnlyWhatThePlanReadsGivesTheWholeDecodesPixels) {
  const std::vector<double> mean = {0.485, 0.456, 0.406}, std_dev = {0.229, 0.224, 0.225};
  const std::vector<Specs> chains = {
      // The timm training chain.
      {{"ImgDecode", {}}, {"RandomResizedCrop", {{"size", {48}}}}, {"RandomHorizontalFlip", {}},
       {"TrivialAugmentWide", {}}, {"ToTensor", {}}, {"Normalize", {{"mean", mean}, {"std", std_dev}}},
       {"RandomErasing", {}}},
      // An image op before any resample reads the crops' view.
      {{"ImgDecode", {}}, {"CenterCrop", {{"size", {90, 70}}}}, {"ColorJitter", {{"brightness", {0.5}}, {"hue", {0.2}}}},
       {"Resize", {{"size", {40}}}}, {"ToTensor", {}}},
      // A padding crop (CIFAR-style), flips before geometry, blur after a windowed resize.
      {{"ImgDecode", {}}, {"RandomCrop", {{"size", {64}}, {"padding", {6}}, {"padding_mode", {2}}}},
       {"RandomVerticalFlip", {}}, {"RandomRotation", {{"degrees", {40}}, {"interpolation", {2}}}}, {"ToTensor", {}}},
      {{"ImgDecode", {}}, {"Resize", {{"size", {80}}}}, {"CenterCrop", {{"size", {64}}}},
       {"GaussianBlur", {{"kernel_size", {5}}}}, {"RandomGrayscale", {{"p", {0.5}}}}, {"ToTensor", {}}},
      // A crop without padding is a view: only its pixels are decoded.
      {{"ImgDecode", {}}, {"RandomCrop", {{"size", {50, 60}}}}, {"RandomAffine", {{"degrees", {10}}, {"shear", {5}}}},
       {"AutoAugment", {}}, {"RandAugment", {}}, {"ToTensor", {}}},
      {{"ImgDecode", {}}, {"Pad", {{"padding", {3, 1}}}}, {"RandomResizedCrop", {{"size", {32}}}},
       {"Grayscale", {}}, {"ToTensor", {}}},
  };
  const cv::Mat photo = Picture(203, 157, 9);
  std::vector<uint8_t> jpeg;
  ASSERT_TRUE(cv::imencode(".jpg", photo, jpeg, {cv::IMWRITE_JPEG_QUALITY, 90}));
  const cv::Mat whole = cv::imdecode(jpeg, cv::IMREAD_COLOR);
  for (size_t c = 0; c < chains.size(); ++c) {
    const TransformPipeline p(chains[c]);
    ASSERT_TRUE(p.output().fixed) << c;
    for (int64_t sample = 0; sample < 10; ++sample) {
      std::vector<float> a(static_cast<size_t>(p.output().bytes() / 4)), b(a.size());
      p.Apply(jpeg.data(), static_cast<int64_t>(jpeg.size()), "img.jpg", 3, 1, sample,
              reinterpret_cast<uint8_t*>(a.data()));
      p.ApplyToImage(View(whole), "img.jpg", 3, 1, sample, reinterpret_cast<uint8_t*>(b.data()));
      ASSERT_EQ(a, b) << "chain " << c << ", sample " << sample;
    }
  }
}

// ---- Randomness -----------------------------------------------------------------------

TEST(TransformOpRandomTest, EveryRandomOpIsAPureFunctionOfTheKey) {
  const Specs chain = {{"ImgDecode", {}},
                       {"RandomCrop", {{"size", {60}}, {"padding", {4}}}},
                       {"ColorJitter", {{"brightness", {0.4}}, {"contrast", {0.4}}, {"saturation", {0.4}}, {"hue", {0.1}}}},
                       {"RandomGrayscale", {{"p", {0.3}}}},
                       {"GaussianBlur", {{"kernel_size", {3}}}},
                       {"RandomRotation", {{"degrees", {20}}}},
                       {"RandomAffine", {{"degrees", {10}}, {"translate", {0.1, 0.1}}}},
                       {"TrivialAugmentWide", {}},
                       {"RandAugment", {}},
                       {"AutoAugment", {}},
                       {"ToTensor", {}},
                       {"RandomErasing", {{"random", {1}}}}};
  const TransformPipeline p(chain);
  const cv::Mat img = Picture(80, 70, 4);
  auto run = [&](int epoch, int64_t sample) {
    std::vector<float> out(3 * 60 * 60);
    p.ApplyToImage(View(img), "k", 5, epoch, sample, reinterpret_cast<uint8_t*>(out.data()));
    return out;
  };
  const int n = 12;
  std::vector<std::vector<float>> serial(n), parallel(n);
  for (int i = 0; i < n; ++i) serial[i] = run(2, i);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (int i = n - 1 - t; i >= 0; i -= 3) parallel[i] = run(2, i);
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::vector<float>> distinct;
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(serial[i], parallel[i]) << i;
    distinct.insert(serial[i]);
    EXPECT_NE(serial[i], run(3, i));
  }
  EXPECT_EQ(distinct.size(), static_cast<size_t>(n));
  // One op's draws do not depend on the other ops: removing ColorJitter
  // keeps TrivialAugmentWide's (the key is the op's position).
  Specs fewer = chain;
  fewer[2] = {"RandomGrayscale", {{"p", {0}}}};
  const TransformPipeline q(fewer);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(p.RandomDraws(80, 70, 5, 0, i)[5].values[0].text, q.RandomDraws(80, 70, 5, 0, i)[3].values[0].text);
  }
}

TEST(TransformOpRandomTest, PolicyAndJitterDrawsHaveTheirFrequencies) {
  const int n = 14000;
  // TrivialAugmentWide: 14 ops, each 1/14; signed ops negative half the time.
  const TransformPipeline ta({{"ImgDecode", {}}, {"TrivialAugmentWide", {}}, {"ToTensor", {}}});
  std::map<std::string, int> ops;
  int negative = 0, signed_draws = 0;
  for (int i = 0; i < n; ++i) {
    const auto draws = ta.RandomDraws(64, 64, 1, 0, i);
    const auto& v = draws[0].values;
    ++ops[v[0].text];
    const double magnitude = v[2].value;
    if (magnitude != 0 && v[0].text != "Posterize" && v[0].text != "Solarize") {
      ++signed_draws;
      negative += magnitude < 0;
    }
  }
  EXPECT_EQ(ops.size(), 14u);
  for (const auto& [name, count] : ops) EXPECT_NEAR(count, n / 14.0, 5 * std::sqrt(n / 14.0)) << name;
  EXPECT_NEAR(negative, signed_draws / 2.0, 5 * std::sqrt(signed_draws / 4.0));
  // ColorJitter: the 24 orders equally often, factors uniform in the range.
  const TransformPipeline cj({{"ImgDecode", {}}, {"ColorJitter", {{"brightness", {0.5}}}}, {"ToTensor", {}}});
  std::map<int, int> orders;
  double sum = 0, sum2 = 0;
  for (int i = 0; i < n; ++i) {
    const auto draws = cj.RandomDraws(8, 8, 2, 0, i);
    const auto& v = draws[0].values;
    ++orders[static_cast<int>(v[0].value)];
    sum += v[1].value;
    sum2 += v[1].value * v[1].value;
  }
  EXPECT_EQ(orders.size(), 24u);
  for (const auto& [order, count] : orders) EXPECT_NEAR(count, n / 24.0, 5 * std::sqrt(n / 24.0)) << order;
  EXPECT_NEAR(sum / n, 1.0, 0.01);                                    // U(0.5, 1.5)
  EXPECT_NEAR(sum2 / n - (sum / n) * (sum / n), 1.0 / 12.0, 0.005);  // its variance
  // AutoAugment: a sub-policy is applied with its probability (IMAGENET's
  // first sub-policy: Posterize 0.4, Rotate 0.6).
  const TransformPipeline aa({{"ImgDecode", {}}, {"AutoAugment", {}}, {"ToTensor", {}}});
  int first = 0, applied[2] = {0, 0};
  for (int i = 0; i < n; ++i) {
    const auto draws = aa.RandomDraws(8, 8, 3, 0, i);
    const auto& v = draws[0].values;
    if (v[0].value != 0) continue;
    ++first;
    applied[0] += v[2].value != 0;
    applied[1] += v[5].value != 0;
  }
  EXPECT_NEAR(first, n / 25.0, 5 * std::sqrt(n / 25.0));
  EXPECT_NEAR(applied[0], 0.4 * first, 5 * std::sqrt(first * 0.24));
  EXPECT_NEAR(applied[1], 0.6 * first, 5 * std::sqrt(first * 0.24));
}

}  // namespace
}  // namespace hdmlp
