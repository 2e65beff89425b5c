// Tests of the transform pipeline (transforms/): chain validation, decoding
// rules and bad images, each op's geometry and arithmetic, determinism of
// the random ops, and that the vector kernels (AVX2, NEON) equal the portable code.
// Images are made in the test with cv::imencode; parity with torchvision
// itself is tested in tests/python/test_transforms.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "hdmlp/errors.h"
#include "hdmlp/transforms/decode.h"
#include "hdmlp/transforms/resample.h"
#include "hdmlp/transforms/simd.h"
#include "hdmlp/transforms/transform_pipeline.h"
#include "hdmlp/util/random.h"
#include "test_util.h"

namespace hdmlp {
namespace {

using Specs = std::vector<TransformSpec>;
using Bytes = std::vector<uint8_t>;

const std::vector<double> kMean = {0.485, 0.456, 0.406};
const std::vector<double> kStd = {0.229, 0.224, 0.225};

Specs TrainChain() {
  return {{"ImgDecode", {}},
          {"RandomResizedCrop", {{"size", {224}}}},
          {"RandomHorizontalFlip", {}},
          {"ToTensor", {}},
          {"Normalize", {{"mean", kMean}, {"std", kStd}}}};
}

// A smooth colour image with some texture, deterministic in seed (BGR).
cv::Mat TestImage(int w, int h, uint64_t seed = 1) {
  cv::Mat m(h, w, CV_8UC3);
  Rng rng(seed);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      auto* p = m.ptr<uint8_t>(y) + 3 * x;
      p[0] = static_cast<uint8_t>((x * 255) / std::max(1, w - 1));
      p[1] = static_cast<uint8_t>((y * 255) / std::max(1, h - 1));
      p[2] = static_cast<uint8_t>(128 + static_cast<int>(rng.Uniform(64)) - 32);
    }
  }
  return m;
}

Bytes Encode(const cv::Mat& img, const std::string& ext, const std::vector<int>& params = {}) {
  std::vector<uchar> buf;
  EXPECT_TRUE(cv::imencode(ext, img, buf, params));
  return Bytes(buf.begin(), buf.end());
}

// The message of the InvalidArgumentError fn throws, or "" if none.
std::string ErrorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "";
}

std::string BuildError(const Specs& specs) {
  return ErrorOf([&] { TransformPipeline p(specs); });
}

// Runs the pipeline; returns the output bytes.
Bytes RunPipeline(const TransformPipeline& p, const Bytes& data, const std::string& path = "img", uint64_t seed = 0,
          int epoch = 0, int64_t sample = 0) {
  const OutputShape s = p.ShapeOf(data.data(), static_cast<int64_t>(data.size()), path);
  std::vector<float> out(static_cast<size_t>((s.bytes() + 3) / 4));
  const OutputShape got =
      p.Apply(data.data(), static_cast<int64_t>(data.size()), path, seed, epoch, sample, s,
              reinterpret_cast<uint8_t*>(out.data()));
  EXPECT_TRUE(got.SameAs(s));
  const auto* b = reinterpret_cast<const uint8_t*>(out.data());
  return Bytes(b, b + s.bytes());
}

// RGB HWC bytes of a BGR image.
Bytes Rgb(const cv::Mat& bgr) {
  Bytes out;
  for (int y = 0; y < bgr.rows; ++y) {
    for (int x = 0; x < bgr.cols; ++x) {
      const auto* p = bgr.ptr<uint8_t>(y) + 3 * x;
      out.insert(out.end(), {p[2], p[1], p[0]});
    }
  }
  return out;
}

Bytes DecodeRgb(const Bytes& data, const std::string& path = "img") {
  TransformPipeline p({{"ImgDecode", {}}, {"ToUint8", {{"layout", {1}}}}});
  return RunPipeline(p, data, path);
}

std::string PhotosDir() {
  const char* dir = std::getenv("HDMLP_TEST_PHOTOS");
  return dir ? dir : "/usr/share/doc/opencv-doc/examples/data";
}

Bytes ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// ---- Validation --------------------------------------------------------------

TEST(TransformSpecTest, RefusesImpossibleChains) {
  EXPECT_NE(BuildError({}).find("empty"), std::string::npos);
  std::string e = BuildError({{"RandomResizedCrop", {{"size", {224}}}}, {"ToTensor", {}}});
  EXPECT_NE(e.find("transform 0 (RandomResizedCrop)"), std::string::npos) << e;
  EXPECT_NE(e.find("needs a decoded image"), std::string::npos) << e;
  EXPECT_NE(e.find("has no ImgDecode"), std::string::npos) << e;
  e = BuildError({{"ToTensor", {}}, {"ImgDecode", {}}});
  EXPECT_NE(e.find("does not start with ImgDecode"), std::string::npos) << e;
  e = BuildError({{"ImgDecode", {}}, {"ImgDecode", {}}, {"ToTensor", {}}});
  EXPECT_NE(e.find("must be the first"), std::string::npos) << e;
  e = BuildError({{"ImgDecode", {}}, {"Resize", {{"size", {256}}}}});
  EXPECT_NE(e.find("no output transform"), std::string::npos) << e;
  e = BuildError({{"ImgDecode", {}}, {"Normalize", {{"mean", kMean}, {"std", kStd}}}, {"ToTensor", {}}});
  EXPECT_NE(e.find("put ToTensor() before it"), std::string::npos) << e;
  e = BuildError({{"ImgDecode", {}}, {"ToUint8", {}}, {"Normalize", {{"mean", kMean}, {"std", kStd}}}});
  EXPECT_NE(e.find("not on ToUint8"), std::string::npos) << e;
  e = BuildError({{"ImgDecode", {}}, {"ToTensor", {}}, {"Resize", {{"size", {256}}}}});
  EXPECT_NE(e.find("Resize after ToTensor"), std::string::npos) << e;
  e = BuildError({{"ImgDecode", {}}, {"ToTensor", {}}, {"ToTensor", {}}});
  EXPECT_NE(e.find("twice"), std::string::npos) << e;
  e = BuildError({{"ImgDecode", {}}, {"ToTensor", {}}, {"ToUint8", {}}});
  EXPECT_NE(e.find("one output transform"), std::string::npos) << e;
  e = BuildError({{"ImgDecode", {}}, {"ElasticTransform", {}}, {"ToTensor", {}}});
  EXPECT_NE(e.find("unknown transform 'ElasticTransform'"), std::string::npos) << e;
}

TEST(TransformSpecTest, RefusesCropsLargerThanAFixedResize) {
  std::string e = BuildError(
      {{"ImgDecode", {}}, {"Resize", {{"size", {200, 200}}}}, {"CenterCrop", {{"size", {224}}}}, {"ToTensor", {}}});
  EXPECT_NE(e.find("transform 2 (CenterCrop)"), std::string::npos) << e;
  EXPECT_NE(e.find("larger than the images transform 1 (Resize) makes (200x200)"), std::string::npos) << e;
  e = BuildError({{"ImgDecode", {}}, {"Resize", {{"size", {256}}}}, {"CenterCrop", {{"size", {300}}}},
                  {"ToTensor", {}}});
  EXPECT_NE(e.find("shorter side 256"), std::string::npos) << e;
  e = BuildError({{"ImgDecode", {}}, {"RandomResizedCrop", {{"size", {100}}}}, {"CenterCrop", {{"size", {128}}}},
                  {"ToTensor", {}}});
  EXPECT_NE(e.find("larger than"), std::string::npos) << e;
  // Possible for some images: a wide crop after a shorter-side resize.
  EXPECT_EQ(BuildError({{"ImgDecode", {}}, {"Resize", {{"size", {256}}}}, {"CenterCrop", {{"size", {224, 400}}}},
                        {"ToTensor", {}}}),
            "");
}

TEST(TransformSpecTest, RefusesBadArguments) {
  auto with = [](const std::string& op, std::map<std::string, std::vector<double>> args) {
    Specs s = {{"ImgDecode", {}}};
    const bool tensor_op = op == "Normalize";
    if (tensor_op) s.push_back({"ToTensor", {}});
    s.push_back({op, std::move(args)});
    if (!tensor_op) s.push_back({"ToTensor", {}});
    return BuildError(s);
  };
  struct Case {
    std::string op;
    std::map<std::string, std::vector<double>> args;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"Resize", {}, "size is required"},
      {"Resize", {{"size", {0}}}, "positive integer"},
      {"Resize", {{"size", {1.5}}}, "positive integer"},
      {"Resize", {{"size", {1, 2, 3}}}, "positive integer"},
      {"Resize", {{"size", {256}}, {"interpolation", {7}}}, "PIL filter code"},
      {"Resize", {{"size", {256}}, {"max_size", {200}}}, "greater than size"},
      {"Resize", {{"size", {256, 256}}, {"max_size", {300}}}, "only allowed when size is one number"},
      {"Resize", {{"size", {256}}, {"antialias", {2}}}, "0 or 1"},
      {"Resize", {{"size", {256}}, {"sizes", {2}}}, "has no argument 'sizes'"},
      {"CenterCrop", {{"size", {-3}}}, "positive integer"},
      {"RandomResizedCrop", {{"size", {224}}, {"scale", {1.0, 0.08}}}, "min <= max"},
      {"RandomResizedCrop", {{"size", {224}}, {"ratio", {4.0 / 3, 3.0 / 4}}}, "min <= max"},
      {"RandomResizedCrop", {{"size", {224}}, {"ratio", {0, 1}}}, "positive"},
      {"RandomResizedCrop", {{"size", {224}}, {"scale", {0.5}}}, "pair (min, max)"},
      {"RandomHorizontalFlip", {{"p", {1.5}}}, "probability in [0, 1]"},
      {"RandomVerticalFlip", {{"p", {-0.1}}}, "probability in [0, 1]"},
      {"Normalize", {{"mean", {0.5, 0.5}}, {"std", kStd}}, "1 or 3 values"},
      {"Normalize", {{"mean", kMean}, {"std", {0.2, 0, 0.2}}}, "division by zero"},
      {"Normalize", {{"mean", kMean}}, "mean and std are required"},
  };
  for (const auto& c : cases) {
    const std::string e = with(c.op, c.args);
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.op << ": got '" << e << "', expected '" << c.expect << "'";
    EXPECT_NE(e.find("(" + c.op + ")"), std::string::npos) << e;
  }
  EXPECT_NE(BuildError({{"ImgDecode", {}}, {"ToUint8", {{"layout", {2}}}}}).find("layout"), std::string::npos);
}

TEST(TransformSpecTest, OutputShapes) {
  TransformPipeline train(TrainChain());
  EXPECT_TRUE(train.output().fixed);
  EXPECT_EQ(train.output().ToString(), "float32 3x224x224 (CHW)");
  EXPECT_EQ(train.output().bytes(), 3 * 224 * 224 * 4);

  TransformPipeline val({{"ImgDecode", {}}, {"Resize", {{"size", {256}}}}, {"CenterCrop", {{"size", {224, 200}}}},
                         {"ToUint8", {{"layout", {1}}}}});
  EXPECT_TRUE(val.output().fixed);
  EXPECT_EQ(val.output().dims(), (std::vector<int64_t>{224, 200, 3}));
  EXPECT_EQ(val.output().bytes(), 224 * 200 * 3);

  TransformPipeline plain({{"ImgDecode", {}}, {"ToTensor", {}}});
  EXPECT_FALSE(plain.output().fixed);
  EXPECT_EQ(plain.output().bytes(), 0);
  const Bytes png = Encode(TestImage(28, 30), ".png");
  const OutputShape s = plain.ShapeOf(png.data(), static_cast<int64_t>(png.size()), "a.png");
  EXPECT_EQ(s.dims(), (std::vector<int64_t>{3, 30, 28}));

  TransformPipeline shorter({{"ImgDecode", {}}, {"Resize", {{"size", {64}}}}, {"ToTensor", {}}});
  EXPECT_FALSE(shorter.output().fixed);
  // torchvision: the longer side is int(64 * 30 / 28) = 68.
  EXPECT_EQ(shorter.ShapeOf(png.data(), static_cast<int64_t>(png.size()), "a.png").dims(),
            (std::vector<int64_t>{3, 68, 64}));

  TransformPipeline crop_then_resize(
      {{"ImgDecode", {}}, {"CenterCrop", {{"size", {100, 50}}}}, {"Resize", {{"size", {20}}}}, {"ToTensor", {}}});
  EXPECT_TRUE(crop_then_resize.output().fixed);
  EXPECT_EQ(crop_then_resize.output().dims(), (std::vector<int64_t>{3, 40, 20}));
}

// ---- Decoding ----------------------------------------------------------------

TEST(TransformDecodeTest, LosslessFormatsDecodeToTheirRgbPixels) {
  const cv::Mat img = TestImage(37, 23);
  for (const std::string ext : {".png", ".bmp", ".tiff", ".ppm"}) {
    EXPECT_EQ(DecodeRgb(Encode(img, ext), "x" + ext), Rgb(img)) << ext;
  }
  const Bytes webp = Encode(img, ".webp", {cv::IMWRITE_WEBP_QUALITY, 101});  // > 100: lossless
  EXPECT_EQ(DecodeRgb(webp), Rgb(img));
  // The format comes from the content, not the name.
  EXPECT_EQ(DecodeRgb(Encode(img, ".png"), "photo.jpg"), Rgb(img));
}

TEST(TransformDecodeTest, GrayscaleAlphaAndCmykBecomeRgb) {
  cv::Mat gray(9, 11, CV_8UC1);
  for (int i = 0; i < gray.rows * gray.cols; ++i) gray.data[i] = static_cast<uint8_t>(i * 7);
  for (const std::string ext : {".png", ".pgm", ".jpg"}) {
    const Bytes rgb = DecodeRgb(Encode(gray, ext));
    ASSERT_EQ(rgb.size(), 9u * 11 * 3) << ext;
    for (size_t i = 0; i < rgb.size(); i += 3) {
      ASSERT_EQ(rgb[i], rgb[i + 1]) << ext;
      ASSERT_EQ(rgb[i], rgb[i + 2]) << ext;
    }
    if (ext != ".jpg") {
      for (int i = 0; i < gray.rows * gray.cols; ++i) ASSERT_EQ(rgb[3 * i], gray.data[i]) << ext;
    }
  }

  // RGBA: alpha is dropped, colour kept (PIL's convert("RGB") does not blend).
  cv::Mat bgra(6, 5, CV_8UC4);
  cv::Mat bgr(6, 5, CV_8UC3);
  for (int i = 0; i < 30; ++i) {
    const uint8_t b = static_cast<uint8_t>(i * 8), g = static_cast<uint8_t>(255 - i), r = static_cast<uint8_t>(i * 3);
    const uint8_t px4[4] = {b, g, r, static_cast<uint8_t>(i * 5)};
    std::memcpy(bgra.data + 4 * i, px4, 4);
    std::memcpy(bgr.data + 3 * i, px4, 3);
  }
  EXPECT_EQ(DecodeRgb(Encode(bgra, ".png")), Rgb(bgr));

  // An Adobe CMYK JPEG written by PIL (8x8; left half C=30x M=30y K=40,
  // right half Y=200). PIL's RGB: (215, 215, 215) at (0, 0),
  // (255, 255, 55) at x=6, (138, 38, 214) at (x=3, y=7).
  static const uint8_t kCmyk[] = {
      0xff, 0xd8, 0xff, 0xee, 0x00, 0x0e, 0x41, 0x64, 0x6f, 0x62, 0x65, 0x00, 0x64, 0x00, 0x00, 0x00, 0x00, 0x00,
      0xff, 0xdb, 0x00, 0x43, 0x00, 0x02, 0x01, 0x01, 0x01, 0x01, 0x01, 0x02, 0x01, 0x01, 0x01, 0x02, 0x02, 0x02,
      0x02, 0x02, 0x04, 0x03, 0x02, 0x02, 0x02, 0x02, 0x05, 0x04, 0x04, 0x03, 0x04, 0x06, 0x05, 0x06, 0x06, 0x06,
      0x05, 0x06, 0x06, 0x06, 0x07, 0x09, 0x08, 0x06, 0x07, 0x09, 0x07, 0x06, 0x06, 0x08, 0x0b, 0x08, 0x09, 0x0a,
      0x0a, 0x0a, 0x0a, 0x0a, 0x06, 0x08, 0x0b, 0x0c, 0x0b, 0x0a, 0x0c, 0x09, 0x0a, 0x0a, 0x0a, 0xff, 0xc0, 0x00,
      0x14, 0x08, 0x00, 0x08, 0x00, 0x08, 0x04, 0x43, 0x11, 0x00, 0x4d, 0x11, 0x00, 0x59, 0x11, 0x00, 0x4b, 0x11,
      0x00, 0xff, 0xc4, 0x00, 0x1f, 0x00, 0x00, 0x01, 0x05, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0xff, 0xc4,
      0x00, 0xb5, 0x10, 0x00, 0x02, 0x01, 0x03, 0x03, 0x02, 0x04, 0x03, 0x05, 0x05, 0x04, 0x04, 0x00, 0x00, 0x01,
      0x7d, 0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12, 0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07, 0x22,
      0x71, 0x14, 0x32, 0x81, 0x91, 0xa1, 0x08, 0x23, 0x42, 0xb1, 0xc1, 0x15, 0x52, 0xd1, 0xf0, 0x24, 0x33, 0x62,
      0x72, 0x82, 0x09, 0x0a, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x34, 0x35, 0x36,
      0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58,
      0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a,
      0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0xa2,
      0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2,
      0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe1,
      0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9,
      0xfa, 0xff, 0xda, 0x00, 0x0e, 0x04, 0x43, 0x00, 0x4d, 0x00, 0x59, 0x00, 0x4b, 0x00, 0x00, 0x3f, 0x00, 0xfd,
      0xa2, 0xf8, 0x29, 0xff, 0x00, 0x27, 0x0d, 0xf1, 0x47, 0xfe, 0xe1, 0x7f, 0xfa, 0x15, 0xed, 0x7e, 0x95, 0x7f,
      0xc1, 0x20, 0xbf, 0xe0, 0xa2, 0x3f, 0xf0, 0xdf, 0x1f, 0xf0, 0xb0, 0xff, 0x00, 0xe2, 0x7b, 0xf6, 0xdf, 0xf8,
      0x44, 0xff, 0x00, 0xb2, 0x7f, 0xe5, 0xa6, 0xed, 0x9f, 0x6a, 0xfb, 0x6f, 0xf3, 0xfb, 0x3f, 0xe9, 0x5e, 0xd9,
      0xff, 0x00, 0x07, 0x6a, 0xff, 0x00, 0xcd, 0x00, 0xff, 0x00, 0xb9, 0xaf, 0xff, 0x00, 0x70, 0xf5, 0xfb, 0x59,
      0xfb, 0x37, 0x7f, 0xcc, 0x6b, 0xfe, 0xdd, 0xbf, 0xf6, 0xad, 0x7f, 0xff, 0xd9};
  const Bytes cmyk(std::begin(kCmyk), std::end(kCmyk));
  const Bytes rgb = DecodeRgb(cmyk, "cmyk.jpg");
  ASSERT_EQ(rgb.size(), 8u * 8 * 3);
  auto near = [&](int x, int y, int r, int g, int b) {
    const uint8_t* p = &rgb[(y * 8 + x) * 3];
    EXPECT_NEAR(p[0], r, 3) << x << "," << y;
    EXPECT_NEAR(p[1], g, 3) << x << "," << y;
    EXPECT_NEAR(p[2], b, 3) << x << "," << y;
  };
  near(0, 0, 215, 215, 215);
  near(6, 0, 255, 255, 55);
  near(3, 7, 138, 38, 214);
}

// A JPEG with an APP1 EXIF segment saying "rotate 90" (orientation 6).
Bytes WithExifOrientation(const Bytes& jpeg, uint16_t orientation) {
  const uint8_t tiff[] = {'M', 'M', 0, 42, 0, 0, 0, 8,  // big-endian TIFF header, IFD at 8
                          0, 1,                         // one entry
                          0x01, 0x12, 0, 3, 0, 0, 0, 1,  // Orientation, SHORT, count 1
                          static_cast<uint8_t>(orientation >> 8), static_cast<uint8_t>(orientation), 0, 0,
                          0, 0, 0, 0};  // no next IFD
  Bytes app1 = {0xFF, 0xE1, 0, 0, 'E', 'x', 'i', 'f', 0, 0};
  app1.insert(app1.end(), std::begin(tiff), std::end(tiff));
  const size_t len = app1.size() - 2;
  app1[2] = static_cast<uint8_t>(len >> 8);
  app1[3] = static_cast<uint8_t>(len);
  Bytes out(jpeg.begin(), jpeg.begin() + 2);
  out.insert(out.end(), app1.begin(), app1.end());
  out.insert(out.end(), jpeg.begin() + 2, jpeg.end());
  return out;
}

TEST(TransformDecodeTest, IgnoresExifOrientationLikePil) {
  const Bytes jpeg = WithExifOrientation(Encode(TestImage(40, 20), ".jpg"), 6);
  // OpenCV alone would rotate it to 20x40.
  cv::Mat rotated = cv::imdecode(cv::Mat(1, static_cast<int>(jpeg.size()), CV_8UC1, const_cast<uint8_t*>(jpeg.data())),
                                 cv::IMREAD_COLOR);
  ASSERT_EQ(rotated.cols, 20);
  TransformPipeline p({{"ImgDecode", {}}, {"ToTensor", {}}});
  EXPECT_EQ(p.ShapeOf(jpeg.data(), static_cast<int64_t>(jpeg.size()), "exif.jpg").dims(),
            (std::vector<int64_t>{3, 20, 40}));
  EXPECT_EQ(DecodeRgb(jpeg).size(), 40u * 20 * 3);
  EXPECT_EQ(DecodeRgb(jpeg), DecodeRgb(Encode(TestImage(40, 20), ".jpg")));
}

// Each kind of bad file: DecodeError (an InvalidArgumentError) naming the file.
void ExpectBadImage(const Bytes& data, const std::string& expect) {
  const std::string path = "/data/train/n01/bad_image.JPEG";
  TransformPipeline p(TrainChain());
  std::vector<float> out(3 * 224 * 224);
  try {
    p.Apply(data.data(), static_cast<int64_t>(data.size()), path, 0, 0, 0, reinterpret_cast<uint8_t*>(out.data()));
    ADD_FAILURE() << "no error; expected '" << expect << "'";
  } catch (const DecodeError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("'" + path + "': ", 0), 0u) << what;
    EXPECT_NE(what.find(expect), std::string::npos) << what;
  }
}

TEST(TransformDecodeTest, BadImagesThrowNamingTheFile) {
  const cv::Mat img = TestImage(64, 48);
  const Bytes jpeg = Encode(img, ".jpg");
  const Bytes png = Encode(img, ".png");

  ExpectBadImage({}, "empty file");
  ExpectBadImage(Bytes{'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0}, "unsupported image format (GIF)");
  const std::string text = "just some text, not an image";
  ExpectBadImage(Bytes(text.begin(), text.end()), "unsupported image format");

  // Truncated: never decoded to a half-grey image.
  ExpectBadImage(Bytes(jpeg.begin(), jpeg.begin() + static_cast<long>(jpeg.size() * 6 / 10)), "truncated JPEG");
  ExpectBadImage(Bytes(jpeg.begin(), jpeg.end() - 2), "truncated JPEG");  // only the EOI marker missing
  ExpectBadImage(Bytes(jpeg.begin(), jpeg.begin() + 100), "truncated");
  const Bytes progressive = Encode(img, ".jpg", {cv::IMWRITE_JPEG_PROGRESSIVE, 1});
  ExpectBadImage(Bytes(progressive.begin(), progressive.begin() + static_cast<long>(progressive.size() * 8 / 10)),
                 "truncated JPEG");
  ExpectBadImage(Bytes(png.begin(), png.begin() + static_cast<long>(png.size() / 2)), "truncated PNG");
  const Bytes bmp = Encode(img, ".bmp");
  ExpectBadImage(Bytes(bmp.begin(), bmp.begin() + static_cast<long>(bmp.size() / 2)), "corrupt or truncated BMP");
  const Bytes ppm = Encode(img, ".ppm");
  ExpectBadImage(Bytes(ppm.begin(), ppm.begin() + static_cast<long>(ppm.size() / 2)), "truncated PNM");

  // Corrupt: a JPEG frame header with precision 99; a PNG whose image data is damaged.
  Bytes bad_jpeg = jpeg;
  for (size_t i = 2; i + 4 < bad_jpeg.size(); ++i) {
    if (bad_jpeg[i] == 0xFF && bad_jpeg[i + 1] == 0xC0) {
      bad_jpeg[i + 4] = 99;
      break;
    }
  }
  ExpectBadImage(bad_jpeg, "corrupt or truncated JPEG");
  Bytes bad_png = png;
  for (size_t i = 8; i + 8 < bad_png.size(); ++i) {
    if (std::memcmp(&bad_png[i], "IDAT", 4) == 0) {
      for (size_t j = i + 8; j < i + 40 && j < bad_png.size(); ++j) bad_png[j] ^= 0x5A;
      break;
    }
  }
  ExpectBadImage(bad_png, "corrupt or truncated PNG");
}

TEST(TransformDecodeTest, DecompressionBombsAreRefusedFromTheHeader) {
  const cv::Mat img = TestImage(16, 16);
  // JPEG: SOF claims 60000 x 60000 (3.6 G pixels).
  Bytes jpeg = Encode(img, ".jpg");
  for (size_t i = 2; i + 8 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xC0) {
      jpeg[i + 5] = 0xEA;
      jpeg[i + 6] = 0x60;
      jpeg[i + 7] = 0xEA;
      jpeg[i + 8] = 0x60;
      break;
    }
  }
  ExpectBadImage(jpeg, "header claims 60000x60000 = 3600000000 pixels");
  ExpectBadImage(jpeg, "refused without decoding");
  // PNG: IHDR claims 100000 x 100000.
  Bytes png = Encode(img, ".png");
  for (int b = 0; b < 2; ++b) {
    const uint32_t v = 100000;
    for (int k = 0; k < 4; ++k) png[16 + 4 * b + k] = static_cast<uint8_t>(v >> (24 - 8 * k));
  }
  ExpectBadImage(png, "PNG header claims 100000x100000");
  // PNM: a text header.
  const std::string pnm = "P6\n20000 20000\n255\n";
  ExpectBadImage(Bytes(pnm.begin(), pnm.end()), "PNM header claims 20000x20000");
  // Just under the limit is a matter of memory, not a refusal: 13000 x 13000 passes the header check.
  const std::string ok = "P5 13000 13000 255\n";
  EXPECT_EQ(ReadImageHeader(reinterpret_cast<const uint8_t*>(ok.data()), static_cast<int64_t>(ok.size()), "x", false)
                .width,
            13000);
}

// ---- Ops -----------------------------------------------------------------------

TEST(TransformOpsTest, FlipsMirrorTheImage) {
  const cv::Mat img = TestImage(13, 7);
  const ImageView view{img.data, img.cols, img.rows, static_cast<int64_t>(img.step)};
  auto run = [&](Specs specs) {
    TransformPipeline p(std::move(specs));
    Bytes out(static_cast<size_t>(13 * 7 * 3));
    p.ApplyToImage(view, "flip", 5, 0, 0, out.data());
    return out;
  };
  const Bytes rgb = Rgb(img);
  auto at = [](const Bytes& b, int x, int y, int c) { return b[(y * 13 + x) * 3 + c]; };
  const Bytes none = run({{"ImgDecode", {}}, {"RandomHorizontalFlip", {{"p", {0}}}}, {"ToUint8", {{"layout", {1}}}}});
  EXPECT_EQ(none, rgb);
  const Bytes h = run({{"ImgDecode", {}}, {"RandomHorizontalFlip", {{"p", {1}}}}, {"ToUint8", {{"layout", {1}}}}});
  const Bytes v = run({{"ImgDecode", {}}, {"RandomVerticalFlip", {{"p", {1}}}}, {"ToUint8", {{"layout", {1}}}}});
  const Bytes hv = run({{"ImgDecode", {}}, {"RandomHorizontalFlip", {{"p", {1}}}}, {"ToUint8", {{"layout", {1}}}},
                        {"RandomVerticalFlip", {{"p", {1}}}}});
  for (int y = 0; y < 7; ++y) {
    for (int x = 0; x < 13; ++x) {
      for (int c = 0; c < 3; ++c) {
        ASSERT_EQ(at(h, x, y, c), at(rgb, 12 - x, y, c));
        ASSERT_EQ(at(v, x, y, c), at(rgb, x, 6 - y, c));
        ASSERT_EQ(at(hv, x, y, c), at(rgb, 12 - x, 6 - y, c));
      }
    }
  }
  // A crop after a flip crops the flipped image: the left 5 columns of the
  // mirror are the right 5 of the image, mirrored.
  TransformPipeline crop({{"ImgDecode", {}}, {"RandomHorizontalFlip", {{"p", {1}}}}, {"CenterCrop", {{"size", {7, 5}}}},
                          {"ToUint8", {{"layout", {1}}}}});
  Bytes c5(7 * 5 * 3);
  crop.ApplyToImage(view, "flip", 0, 0, 0, c5.data());
  for (int y = 0; y < 7; ++y) {
    for (int x = 0; x < 5; ++x) {
      // CenterCrop of width 13 -> 5 starts at round(4.0) = 4 in the flipped image.
      ASSERT_EQ(c5[(y * 5 + x) * 3], at(rgb, 12 - (4 + x), y, 0));
    }
  }
}

TEST(TransformOpsTest, FlipRateFollowsP) {
  TransformPipeline p({{"ImgDecode", {}}, {"RandomHorizontalFlip", {{"p", {0.3}}}}, {"ToTensor", {}}});
  int flips = 0;
  const int n = 4000;
  for (int i = 0; i < n; ++i) flips += p.RandomDraws(10, 10, 7, 0, i)[0].flip ? 1 : 0;
  EXPECT_NEAR(flips / double(n), 0.3, 0.03);  // about 4 standard deviations
}

TEST(TransformOpsTest, ToTensorAndNormalizeComputeInFloat32LikeTorch) {
  cv::Mat img(2, 128, CV_8UC3);
  for (int i = 0; i < 256; ++i) {
    const uint8_t v = static_cast<uint8_t>(i);
    const uint8_t px[3] = {v, static_cast<uint8_t>(255 - i), static_cast<uint8_t>(i / 2)};
    std::memcpy(img.data + 3 * i, px, 3);
  }
  const ImageView view{img.data, img.cols, img.rows, static_cast<int64_t>(img.step)};
  TransformPipeline p({{"ImgDecode", {}},
                       {"ToTensor", {}},
                       {"Normalize", {{"mean", kMean}, {"std", kStd}}},
                       {"Normalize", {{"mean", {0.5}}, {"std", {2}}}}});
  std::vector<float> out(3 * 256);
  p.ApplyToImage(view, "n", 0, 0, 0, reinterpret_cast<uint8_t*>(out.data()));
  for (int i = 0; i < 256; ++i) {
    const uint8_t* px = img.data + 3 * i;
    for (int c = 0; c < 3; ++c) {
      // torch: img.float().div(255), then sub(mean).div(std) per Normalize, all float32.
      float v = static_cast<float>(px[2 - c]) / 255.0f;
      v = (v - static_cast<float>(kMean[c])) / static_cast<float>(kStd[c]);
      v = (v - 0.5f) / 2.0f;
      ASSERT_EQ(out[c * 256 + i], v) << "channel " << c << " pixel " << i;
    }
  }
  // ToUint8 CHW: planes R, G, B.
  TransformPipeline u({{"ImgDecode", {}}, {"ToUint8", {}}});
  Bytes chw(3 * 256);
  u.ApplyToImage(view, "u", 0, 0, 0, chw.data());
  for (int i = 0; i < 256; ++i) {
    for (int c = 0; c < 3; ++c) ASSERT_EQ(chw[c * 256 + i], img.data[3 * i + 2 - c]);
  }
}

TEST(TransformOpsTest, CenterCropPadsSmallImagesWithZerosLikeTorchvision) {
  const cv::Mat img = TestImage(6, 4);
  const ImageView view{img.data, img.cols, img.rows, static_cast<int64_t>(img.step)};
  // Width 6 -> 9: pad left (9-6)//2 = 1, right 2. Height 4 -> 3: crop from round(0.5) = 0.
  TransformPipeline p({{"ImgDecode", {}}, {"CenterCrop", {{"size", {3, 9}}}}, {"ToUint8", {{"layout", {1}}}}});
  Bytes out(3 * 9 * 3);
  p.ApplyToImage(view, "pad", 0, 0, 0, out.data());
  const Bytes rgb = Rgb(img);
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 9; ++x) {
      for (int c = 0; c < 3; ++c) {
        const int expect = (x >= 1 && x < 7) ? rgb[(y * 6 + (x - 1)) * 3 + c] : 0;
        ASSERT_EQ(out[(y * 9 + x) * 3 + c], expect) << x << "," << y;
      }
    }
  }
  // Height 4 -> 3 of a 5-row image: round((5 - 3) / 2) = 1; of a 6-row one round(1.5) = 2 (half to even).
  const cv::Mat tall = TestImage(3, 6);
  TransformPipeline q({{"ImgDecode", {}}, {"CenterCrop", {{"size", {3, 3}}}}, {"ToUint8", {{"layout", {1}}}}});
  Bytes o(27);
  q.ApplyToImage(ImageView{tall.data, 3, 6, static_cast<int64_t>(tall.step)}, "t", 0, 0, 0, o.data());
  EXPECT_EQ(o[0], tall.ptr<uint8_t>(2)[2]);
}

TEST(TransformOpsTest, ResizeFollowsTorchvisionSizes) {
  const Bytes png = Encode(TestImage(500, 375), ".png");
  auto dims = [&](Specs s) {
    TransformPipeline p(std::move(s));
    return p.ShapeOf(png.data(), static_cast<int64_t>(png.size()), "r.png").dims();
  };
  EXPECT_EQ(dims({{"ImgDecode", {}}, {"Resize", {{"size", {256}}}}, {"ToTensor", {}}}),
            (std::vector<int64_t>{3, 256, 341}));  // int(256 * 500 / 375) = 341
  EXPECT_EQ(dims({{"ImgDecode", {}}, {"Resize", {{"size", {256}}, {"max_size", {300}}}}, {"ToTensor", {}}}),
            (std::vector<int64_t>{3, 225, 300}));  // int(300 * 256 / 341) = 225
  EXPECT_EQ(dims({{"ImgDecode", {}}, {"Resize", {{"size", {100, 30}}}}, {"ToTensor", {}}}),
            (std::vector<int64_t>{3, 100, 30}));
}

TEST(TransformOpsTest, ResampleKeepsConstantsAndAverages) {
  cv::Mat flat(40, 50, CV_8UC3, cv::Scalar(10, 200, 77));
  ResampleScratch s;
  for (int f = 0; f <= 5; ++f) {
    Bytes out(17 * 13 * 3);
    const float box[4] = {0, 0, 50, 40};
    Resample(ImageView{flat.data, 50, 40, static_cast<int64_t>(flat.step)}, box, 17, 13, static_cast<Interpolation>(f),
             true, out.data(), 17 * 3, &s);
    for (size_t i = 0; i < out.size(); i += 3) {
      ASSERT_EQ(out[i], 10) << InterpolationName(static_cast<Interpolation>(f));
      ASSERT_EQ(out[i + 1], 200);
      ASSERT_EQ(out[i + 2], 77);
    }
  }
  // A 2x box downscale of a checkerboard of 0 and 255 gives mid-grey (127.5 rounds to 128).
  cv::Mat board(8, 8, CV_8UC3);
  for (int y = 0; y < 8; ++y) {
    for (int x = 0; x < 8; ++x) board.at<cv::Vec3b>(y, x) = cv::Vec3b::all((x + y) % 2 ? 255 : 0);
  }
  Bytes out(4 * 4 * 3);
  const float box[4] = {0, 0, 8, 8};
  Resample(ImageView{board.data, 8, 8, static_cast<int64_t>(board.step)}, box, 4, 4, Interpolation::kBox, true,
           out.data(), 12, &s);
  for (uint8_t v : out) ASSERT_EQ(v, 128);
}

TEST(TransformOpsTest, VectorKernelsEqualThePortableCode) {
  if (ActiveKernels() == Kernels::kPortable) GTEST_SKIP() << "no vector kernels on this CPU or in this build";
  const cv::Mat img = TestImage(301, 233, 9);
  const ImageView view{img.data, img.cols, img.rows, static_cast<int64_t>(img.step)};
  ResampleScratch s;
  struct Case {
    int w, h;
    Interpolation f;
    float box[4];
  };
  const std::vector<Case> cases = {
      {224, 224, Interpolation::kBilinear, {0, 0, 301, 233}},   {97, 61, Interpolation::kBilinear, {0, 0, 301, 233}},
      {224, 224, Interpolation::kBicubic, {10, 5, 250, 200}},   {37, 19, Interpolation::kLanczos, {0, 0, 301, 233}},
      {301, 100, Interpolation::kHamming, {0, 0, 301, 233}},    {500, 400, Interpolation::kBilinear, {0, 0, 301, 233}},
      {33, 29, Interpolation::kBox, {1.5f, 2.25f, 300, 230.5f}}, {7, 5, Interpolation::kBilinear, {0, 0, 301, 233}},
      {290, 60, Interpolation::kBilinear, {0, 0, 301, 233}},    {250, 90, Interpolation::kLanczos, {0, 0, 301, 233}},
  };  // the last two resample vertically first (Pillow 13's order)
  for (const auto& c : cases) {
    Bytes fast(static_cast<size_t>(c.w) * c.h * 3), slow(fast.size());
    Resample(view, c.box, c.w, c.h, c.f, true, fast.data(), c.w * 3, &s);
    ForcePortableKernels(true);
    Resample(view, c.box, c.w, c.h, c.f, true, slow.data(), c.w * 3, &s);
    ForcePortableKernels(false);
    ASSERT_EQ(fast, slow) << c.w << "x" << c.h << " " << InterpolationName(c.f);
  }
  // The float output pass, with and without flips.
  for (bool flip : {false, true}) {
    TransformPipeline p({{"ImgDecode", {}},
                         {"RandomResizedCrop", {{"size", {61, 83}}}},
                         {"RandomHorizontalFlip", {{"p", {flip ? 1.0 : 0.0}}}},
                         {"ToTensor", {}},
                         {"Normalize", {{"mean", kMean}, {"std", kStd}}}});
    std::vector<float> fast(3 * 61 * 83), slow(fast.size());
    p.ApplyToImage(view, "x", 1, 2, 3, reinterpret_cast<uint8_t*>(fast.data()));
    ForcePortableKernels(true);
    p.ApplyToImage(view, "x", 1, 2, 3, reinterpret_cast<uint8_t*>(slow.data()));
    ForcePortableKernels(false);
    ASSERT_EQ(fast, slow);
  }
}

TEST(TransformOpsTest, ResampleWindowEqualsTheWholeResampleCropped) {
  // Windows of every filter's output, computed from just the input they
  // read (a view that starts at ResampleSourceRegion's corner), with and
  // without AVX2: the same bytes as the whole resample there.
  const cv::Mat img = TestImage(301, 233, 4);
  const ImageView whole{img.data, img.cols, img.rows, static_cast<int64_t>(img.step)};
  ResampleScratch s;
  Rng rng(11);
  int checked = 0;
  for (int f = 0; f <= 5; ++f) {
    for (int trial = 0; trial < 12; ++trial) {
      ResampleGeometry g;
      g.src_width = img.cols;
      g.src_height = img.rows;
      g.filter = static_cast<Interpolation>(f);
      g.antialias = trial % 5 != 4;
      // Shrink, enlarge, keep one side, and a fractional box.
      g.out_width = trial % 3 == 0 ? img.cols : 20 + static_cast<int>(rng.Uniform(400));
      g.out_height = trial % 4 == 1 ? img.rows : 20 + static_cast<int>(rng.Uniform(400));
      const bool boxed = trial % 2 == 1;
      g.box[0] = boxed ? 3.5f : 0;
      g.box[1] = boxed ? 1.25f : 0;
      g.box[2] = boxed ? 290.75f : static_cast<float>(img.cols);
      g.box[3] = boxed ? 230 : static_cast<float>(img.rows);
      Bytes full(static_cast<size_t>(g.out_width) * g.out_height * 3);
      Resample(whole, g.box, g.out_width, g.out_height, g.filter, g.antialias, full.data(), g.out_width * 3, &s);
      for (int w = 0; w < 3; ++w) {
        const PixelRect win = testing::RandomRect(rng, g.out_width, g.out_height);
        const PixelRect src = ResampleSourceRegion(g, win, &s);
        ASSERT_GE(src.x, 0);
        ASSERT_GE(src.y, 0);
        ASSERT_LE(src.x + src.width, img.cols);
        ASSERT_LE(src.y + src.height, img.rows);
        // Only the source region, copied out, so a read outside it would
        // show (and trip ASan).
        cv::Mat part = img(cv::Rect(src.x, src.y, src.width, src.height)).clone();
        const ImageView view{part.data, part.cols, part.rows, static_cast<int64_t>(part.step)};
        for (bool vector : {true, false}) {
          ForcePortableKernels(!vector);
          Bytes got(static_cast<size_t>(win.width) * win.height * 3);
          ResampleWindow(view, src.x, src.y, g, win, got.data(), win.width * 3, &s);
          ForcePortableKernels(false);
          for (int y = 0; y < win.height; ++y) {
            ASSERT_EQ(0, std::memcmp(&got[static_cast<size_t>(y) * win.width * 3],
                                     &full[(static_cast<size_t>(win.y + y) * g.out_width + win.x) * 3],
                                     static_cast<size_t>(win.width) * 3))
                << InterpolationName(g.filter) << " " << g.out_width << "x" << g.out_height << " window " << win.x
                << "," << win.y << " " << win.width << "x" << win.height << " row " << y << (vector ? " vector" : "");
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 6 * 12 * 3 * 2);
}

TEST(TransformOpsTest, ResizeThenCropComputesOnlyTheCropWithTheSameBytes) {
  // The pipeline fuses Resize + CenterCrop into one windowed resample and
  // decodes only the input it reads; the result equals cropping the whole
  // resize (a chain without the crop) by hand.
  const cv::Mat img = TestImage(203, 157, 6);
  const Bytes jpeg = Encode(img, ".jpg", {cv::IMWRITE_JPEG_QUALITY, 90});
  const Bytes png = Encode(img, ".png");
  for (int f : {0, 2, 3, 1}) {
    for (const std::vector<double>& size : std::vector<std::vector<double>>{{96}, {120, 70}}) {
      const TransformSpec resize{"Resize", {{"size", size}, {"interpolation", {double(f)}}}};
      const TransformPipeline whole({{"ImgDecode", {}}, resize, {"ToUint8", {{"layout", {1}}}}});
      const TransformPipeline cropped({{"ImgDecode", {}},
                                       resize,
                                       {"CenterCrop", {{"size", {80, 60}}}},
                                       {"CenterCrop", {{"size", {41, 53}}}},
                                       {"ToUint8", {{"layout", {1}}}}});
      for (const Bytes* file : {&jpeg, &png}) {
        const OutputShape ws = whole.ShapeOf(file->data(), static_cast<int64_t>(file->size()), "x");
        const Bytes big = RunPipeline(whole, *file, "x");
        const Bytes got = RunPipeline(cropped, *file, "x");
        ASSERT_EQ(got.size(), 41u * 53 * 3);
        // CenterCrop offsets: round((H - h) / 2) twice, as torchvision.
        const int y0 = static_cast<int>(RoundHalfEven((ws.height - 80) / 2.0)) +
                       static_cast<int>(RoundHalfEven((80 - 41) / 2.0));
        const int x0 = static_cast<int>(RoundHalfEven((ws.width - 60) / 2.0)) +
                       static_cast<int>(RoundHalfEven((60 - 53) / 2.0));
        Bytes want;
        for (int y = 0; y < 41; ++y) {
          const auto row = big.begin() + (static_cast<long>(y0 + y) * ws.width + x0) * 3;
          want.insert(want.end(), row, row + 53 * 3);
        }
        EXPECT_EQ(got, want) << "filter " << f << ", size " << size.size() << (file == &jpeg ? " jpeg" : " png");
      }
    }
  }
}

// ---- Randomness ------------------------------------------------------------------

TEST(TransformDeterminismTest, SameKeySameBytesAcrossThreads) {
  const std::string photo = PhotosDir() + "/baboon.jpg";
  Bytes data = ReadFile(photo);
  if (data.empty()) data = Encode(TestImage(320, 240), ".jpg");
  TransformPipeline p(TrainChain());
  const int n = 24;
  std::vector<Bytes> serial(n);
  for (int i = 0; i < n; ++i) serial[i] = RunPipeline(p, data, photo, 42, 3, i);
  std::vector<Bytes> parallel(n);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = n - 1 - t; i >= 0; i -= 4) parallel[i] = RunPipeline(p, data, photo, 42, 3, i);
    });
  }
  for (auto& t : threads) t.join();
  std::set<Bytes> distinct;
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(serial[i], parallel[i]) << "sample " << i;
    distinct.insert(serial[i]);
  }
  EXPECT_EQ(distinct.size(), static_cast<size_t>(n));  // every sample gets its own crop
  EXPECT_EQ(RunPipeline(p, data, photo, 42, 3, 5), serial[5]);
}

TEST(TransformDeterminismTest, EpochsSeedsAndSamplesChangeTheDraws) {
  TransformPipeline p(TrainChain());
  auto crop = [&](uint64_t seed, int epoch, int64_t sample) {
    const auto d = p.RandomDraws(500, 375, seed, epoch, sample);
    EXPECT_EQ(d.size(), 2u);
    return std::vector<int>{d[0].top, d[0].left, d[0].height, d[0].width, d[1].flip};
  };
  int same_epoch = 0, same_seed = 0;
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(crop(1, 0, i), crop(1, 0, i));
    same_epoch += crop(1, 0, i) == crop(1, 1, i);
    same_seed += crop(1, 0, i) == crop(2, 0, i);
  }
  EXPECT_EQ(same_epoch, 0);
  EXPECT_EQ(same_seed, 0);
  EXPECT_NE(crop(1, 0, 0), crop(1, 0, 1));
}

TEST(TransformDeterminismTest, RandomResizedCropDrawsTorchvisionsDistribution) {
  // Over many draws on a 500x375 image with the default scale and ratio,
  // every crop fits, and the mean area fraction and mean log(aspect) match
  // torchvision's get_params: 0.4339 and 0.0308 over 200000 draws with
  // torch's generator (crops that do not fit are redrawn, so they are not
  // 0.54 and 0). The tolerances are about 5 standard errors for n = 20000.
  TransformPipeline p(TrainChain());
  double sum_log_ratio = 0, sum_scale = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const auto d = p.RandomDraws(500, 375, 11, 0, i)[0];
    ASSERT_GT(d.width, 0);
    ASSERT_GT(d.height, 0);
    ASSERT_LE(d.left + d.width, 500);
    ASSERT_LE(d.top + d.height, 375);
    sum_log_ratio += std::log(double(d.width) / d.height);
    sum_scale += double(d.width) * d.height / (500.0 * 375.0);
  }
  EXPECT_NEAR(sum_log_ratio / n, 0.0308, 0.006);
  EXPECT_NEAR(sum_scale / n, 0.4339, 0.01);
}

TEST(TransformDeterminismTest, NonFixedChainsCheckTheSlotSize) {
  TransformPipeline p({{"ImgDecode", {}}, {"ToTensor", {}}});
  const Bytes a = Encode(TestImage(28, 28), ".png");
  const Bytes b = Encode(TestImage(28, 30), ".png");
  const OutputShape first = p.ShapeOf(a.data(), static_cast<int64_t>(a.size()), "a.png");
  std::vector<float> out(3 * 28 * 28, -1.0f);
  p.Apply(a.data(), static_cast<int64_t>(a.size()), "a.png", 0, 0, 0, first, reinterpret_cast<uint8_t*>(out.data()));
  const std::string e = ErrorOf([&] {
    p.Apply(b.data(), static_cast<int64_t>(b.size()), "mnist/7/b.png", 0, 0, 1, first,
            reinterpret_cast<uint8_t*>(out.data()));
  });
  EXPECT_EQ(e.rfind("'mnist/7/b.png': ", 0), 0u) << e;
  EXPECT_NE(e.find("float32 3x30x28 (CHW)"), std::string::npos) << e;
  EXPECT_NE(e.find("float32 3x28x28 (CHW)"), std::string::npos) << e;
}

TEST(TransformDeterminismTest, DraftDecodeIsCloseToTheFullDecode) {
  // A large photo-like JPEG and a crop that shrinks it 4x or more: the
  // draft decode reduces it in libjpeg; the result stays close.
  cv::Mat big = TestImage(1600, 1200, 3);
  const Bytes jpeg = Encode(big, ".jpg", {cv::IMWRITE_JPEG_QUALITY, 92});
  Specs full = {{"ImgDecode", {}},
                {"RandomResizedCrop", {{"size", {224}}, {"scale", {0.9, 1.0}}}},
                {"ToUint8", {{"layout", {1}}}}};
  Specs draft = full;
  draft[0].args["draft"] = {1};
  TransformPipeline pf(full), pd(draft);
  EXPECT_TRUE(pd.draft());
  for (int i = 0; i < 3; ++i) {
    const Bytes a = RunPipeline(pf, jpeg, "big.jpg", 0, 0, i), b = RunPipeline(pd, jpeg, "big.jpg", 0, 0, i);
    ASSERT_EQ(a.size(), b.size());
    double mad = 0;
    for (size_t k = 0; k < a.size(); ++k) mad += std::abs(int(a[k]) - int(b[k]));
    mad /= a.size();
    EXPECT_LT(mad, 2.0) << "mean absolute difference in 8-bit levels";
    EXPECT_GT(mad, 0.0);  // it did take the reduced path
  }
}

}  // namespace
}  // namespace hdmlp
