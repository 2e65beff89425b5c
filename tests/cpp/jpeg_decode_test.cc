// Tests of DecodeJpegRegion (transforms/jpeg_decode.h) and of the pipeline's
// use of it: a rectangle decoded on its own has exactly the pixels of the
// whole image's decode there, for every chroma subsampling, progressive and
// restart-marker files, odd sizes and every DCT scale; the whole decode is
// OpenCV's (the decoder hdmlp used before, whose parity with PIL
// tests/python/test_transforms.py checks); and the pipeline's results equal
// those it computes from a whole decoded image. ImgDecode(fast=True): the
// same region-against-whole property at every DCT scale with the fast
// settings, the scale it chooses, what it computes from the scaled image,
// its determinism and its errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <jpeglib.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "hdmlp/transforms/decode.h"
#include "hdmlp/transforms/jpeg_decode.h"
#include "hdmlp/transforms/resample.h"
#include "hdmlp/transforms/transform_pipeline.h"
#include "hdmlp/util/random.h"
#include "test_util.h"

namespace hdmlp {
namespace {

using Bytes = std::vector<uint8_t>;

struct Encoding {
  const char* name;
  int h_samp = 2, v_samp = 2;  // luma sampling factors: 2x2 is 4:2:0
  bool gray = false;
  bool progressive = false;
  int restart_rows = 0;
  int quality = 90;
};

const Encoding kEncodings[] = {
    {"4:2:0", 2, 2},          {"4:4:4", 1, 1},       {"4:2:2", 2, 1}, {"4:4:0", 1, 2},
    {"4:1:1", 4, 1},          {"gray", 1, 1, true},  {"4:2:0 progressive", 2, 2, false, true},
    {"4:2:2 progressive", 2, 1, false, true},        {"4:2:0 restarts", 2, 2, false, false, 1},
    {"4:4:4 q100", 1, 1, false, false, 0, 100},
};

// Colours that change fast in every direction, so chroma upsampling and the
// IDCT both matter at every edge of a rectangle.
Bytes TestPixels(int w, int h, uint64_t seed) {
  Bytes rgb(static_cast<size_t>(w) * h * 3);
  Rng rng(seed);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &rgb[(static_cast<size_t>(y) * w + x) * 3];
      p[0] = static_cast<uint8_t>((x * 7 + y * 3) & 255);
      p[1] = static_cast<uint8_t>(((x / 5) % 2 ? 200 : 40) + rng.Uniform(16));
      p[2] = static_cast<uint8_t>((y * 11) ^ (x * 2));
    }
  }
  return rgb;
}

struct EncodeError {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
};

Bytes EncodeJpeg(const Bytes& rgb, int w, int h, const Encoding& e) {
  jpeg_compress_struct c;
  EncodeError err;
  c.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = [](j_common_ptr ci) { std::longjmp(reinterpret_cast<EncodeError*>(ci->err)->jump, 1); };
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  jpeg_create_compress(&c);
  if (setjmp(err.jump)) {
    jpeg_destroy_compress(&c);
    std::free(out);
    ADD_FAILURE() << "libjpeg could not encode " << e.name;
    return {};
  }
  jpeg_mem_dest(&c, &out, &out_size);
  c.image_width = static_cast<JDIMENSION>(w);
  c.image_height = static_cast<JDIMENSION>(h);
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, e.quality, TRUE);
  if (e.gray) {
    jpeg_set_colorspace(&c, JCS_GRAYSCALE);
  } else {
    c.comp_info[0].h_samp_factor = e.h_samp;
    c.comp_info[0].v_samp_factor = e.v_samp;
    for (int i = 1; i < 3; ++i) c.comp_info[i].h_samp_factor = c.comp_info[i].v_samp_factor = 1;
  }
  if (e.progressive) jpeg_simple_progression(&c);
  c.restart_in_rows = e.restart_rows;
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(&rgb[static_cast<size_t>(c.next_scanline) * w * 3]);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  Bytes bytes(out, out + out_size);
  std::free(out);
  return bytes;
}

// OpenCV's decode of the whole image at 1/reduce (BGR).
cv::Mat OpenCvDecode(const Bytes& jpeg, int reduce) {
  const int flags = reduce == 1   ? cv::IMREAD_COLOR
                    : reduce == 2 ? cv::IMREAD_REDUCED_COLOR_2
                    : reduce == 4 ? cv::IMREAD_REDUCED_COLOR_4
                                  : cv::IMREAD_REDUCED_COLOR_8;
  const cv::Mat buf(1, static_cast<int>(jpeg.size()), CV_8UC1, const_cast<uint8_t*>(jpeg.data()));
  return cv::imdecode(buf, flags | cv::IMREAD_IGNORE_ORIENTATION);
}

// The first row or pixel where view differs from whole's rectangle r, or "".
std::string Compare(const ImageView& view, const cv::Mat& whole, const PixelRect& r) {
  if (view.width != r.width || view.height != r.height) {
    return "size " + std::to_string(view.width) + "x" + std::to_string(view.height);
  }
  for (int y = 0; y < r.height; ++y) {
    const uint8_t* got = view.data + y * view.stride;
    const uint8_t* want = whole.ptr<uint8_t>(r.y + y) + 3 * r.x;
    if (std::memcmp(got, want, static_cast<size_t>(r.width) * 3) != 0) {
      for (int x = 0; x < r.width * 3; ++x) {
        if (got[x] != want[x]) return "pixel (" + std::to_string(r.x + x / 3) + ", " + std::to_string(r.y + y) + ")";
      }
    }
  }
  return "";
}

TEST(JpegDecodeTest, RegionsEqualTheWholeDecodeForEverySubsamplingAndScale) {
  const int w = 203, h = 157;  // not multiples of any MCU size
  const Bytes rgb = TestPixels(w, h, 5);
  int checked = 0;
  for (const Encoding& e : kEncodings) {
    const Bytes jpeg = EncodeJpeg(rgb, w, h, e);
    ASSERT_FALSE(jpeg.empty());
    for (int reduce : {1, 2, 4, 8}) {
      const cv::Mat whole = OpenCvDecode(jpeg, reduce);
      const int dw = (w + reduce - 1) / reduce, dh = (h + reduce - 1) / reduce;
      ASSERT_EQ(whole.cols, dw);
      ASSERT_EQ(whole.rows, dh);
      JpegScratch scratch;
      ImageView view;
      // The whole image, then rectangles: random ones, and ones at each edge,
      // one pixel wide or tall, and starting on and just past iMCU boundaries.
      std::vector<PixelRect> rects = {{0, 0, dw, dh}, {0, 0, 1, 1}, {dw - 1, dh - 1, 1, 1}, {0, 0, dw, 1},
                                      {0, dh - 1, dw, 1}, {dw / 2, 0, 1, dh}, {std::min(16, dw - 1), 0, 1, dh},
                                      {std::min(17, dw - 1), std::min(17, dh - 1), dw - std::min(17, dw - 1),
                                       dh - std::min(17, dh - 1)}};
      Rng rng(static_cast<uint64_t>(reduce) * 1000 + static_cast<uint64_t>(&e - kEncodings));
      for (int i = 0; i < 40; ++i) rects.push_back(testing::RandomRect(rng, dw, dh));
      for (const PixelRect& r : rects) {
        ASSERT_EQ(DecodeJpegRegion(jpeg.data(), static_cast<int64_t>(jpeg.size()), w, h, reduce, r, "t.jpg",
                                   &scratch, &view),
                  JpegDecodeStatus::kDecoded);
        const std::string diff = Compare(view, whole, r);
        ASSERT_EQ(diff, "") << e.name << ", 1/" << reduce << ", rect x=" << r.x << " y=" << r.y << " w=" << r.width
                            << " h=" << r.height;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 10 * 4 * 48);
}

TEST(JpegDecodeTest, RealPhotosRegionsEqualTheWholeDecode) {
  // OpenCV's sample photos: encoders, quantisation and subsampling of the wild.
  const char* dir = std::getenv("HDMLP_TEST_PHOTOS");
  const std::string photos = dir ? dir : "/usr/share/doc/opencv-doc/examples/data";
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(photos, ec)) {
    if (entry.path().extension() == ".jpg") files.push_back(entry.path().string());
  }
  if (files.empty()) GTEST_SKIP() << "no OpenCV sample photos in " << photos;
  std::sort(files.begin(), files.end());
  for (const std::string& path : files) {
    std::ifstream in(path, std::ios::binary);
    const Bytes jpeg{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const ImageHeader header = ReadImageHeader(jpeg.data(), static_cast<int64_t>(jpeg.size()), path, true);
    const cv::Mat whole = OpenCvDecode(jpeg, 1);
    ASSERT_EQ(whole.cols, header.width) << path;
    JpegScratch scratch;
    ImageView view;
    Rng rng(7);
    for (int i = 0; i < 20; ++i) {
      const PixelRect r = testing::RandomRect(rng, whole.cols, whole.rows);
      if (DecodeJpegRegion(jpeg.data(), static_cast<int64_t>(jpeg.size()), header.width, header.height, 1, r, path,
                           &scratch, &view) != JpegDecodeStatus::kDecoded) {
        break;  // a CMYK photo: OpenCV's
      }
      ASSERT_EQ(Compare(view, whole, r), "") << path << " rect " << r.x << "," << r.y << " " << r.width << "x"
                                             << r.height;
    }
  }
}

TEST(JpegDecodeTest, CmykIsLeftToOpenCvAndDecodeImageFallsBack) {
  // OpenCV writes no CMYK JPEG; libjpeg does.
  const int w = 40, h = 30;
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  jpeg_mem_dest(&c, &out, &out_size);
  c.image_width = w;
  c.image_height = h;
  c.input_components = 4;
  c.in_color_space = JCS_CMYK;
  jpeg_set_defaults(&c);
  jpeg_start_compress(&c, TRUE);
  Bytes row(static_cast<size_t>(w) * 4);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &row[static_cast<size_t>(x) * 4];
      p[0] = static_cast<uint8_t>(x * 6);
      p[1] = static_cast<uint8_t>(y * 8);
      p[2] = 100;
      p[3] = 200;
    }
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  const Bytes jpeg(out, out + out_size);
  std::free(out);

  JpegScratch scratch;
  ImageView view;
  EXPECT_EQ(DecodeJpegRegion(jpeg.data(), static_cast<int64_t>(jpeg.size()), w, h, 1, PixelRect{0, 0, w, h},
                             "cmyk.jpg", &scratch, &view),
            JpegDecodeStatus::kFourChannel);
  const ImageHeader header = ReadImageHeader(jpeg.data(), static_cast<int64_t>(jpeg.size()), "cmyk.jpg", true);
  DecodedImage decoded;
  const PixelRect r{5, 7, 20, 11};
  DecodeImage(jpeg.data(), static_cast<int64_t>(jpeg.size()), header, 1, r, "cmyk.jpg", &decoded);
  EXPECT_EQ(Compare(decoded.view, OpenCvDecode(jpeg, 1), r), "");
}

TEST(JpegDecodeTest, ErrorsNameTheFileAndTheReason) {
  const int w = 64, h = 48;
  Bytes jpeg = EncodeJpeg(TestPixels(w, h, 1), w, h, kEncodings[0]);
  JpegScratch scratch;
  ImageView view;
  // A Huffman table segment cut short: libjpeg's fatal error, not a crash.
  Bytes bad = jpeg;
  for (size_t i = 2; i + 4 < bad.size(); ++i) {
    if (bad[i] == 0xFF && bad[i + 1] == 0xC4) {
      bad[i + 4] = 0xFF;  // table class/id 0xFF: invalid
      break;
    }
  }
  try {
    DecodeJpegRegion(bad.data(), static_cast<int64_t>(bad.size()), w, h, 1, PixelRect{0, 0, w, h}, "dir/bad.jpg",
                     &scratch, &view);
    FAIL() << "no error";
  } catch (const DecodeError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("'dir/bad.jpg': corrupt or truncated JPEG: the decoder failed (", 0), 0u) << m;
    EXPECT_GT(m.size(), std::string("'dir/bad.jpg': corrupt or truncated JPEG: the decoder failed ()").size()) << m;
  }
  // A size that disagrees with the caller's header.
  try {
    DecodeJpegRegion(jpeg.data(), static_cast<int64_t>(jpeg.size()), w + 1, h, 1, PixelRect{0, 0, w, h}, "x.jpg",
                     &scratch, &view);
    FAIL() << "no error";
  } catch (const DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("64x48"), std::string::npos) << e.what();
  }
  // A rectangle outside the image is the caller's bug.
  EXPECT_THROW(DecodeJpegRegion(jpeg.data(), static_cast<int64_t>(jpeg.size()), w, h, 1, PixelRect{1, 0, w, h},
                                "x.jpg", &scratch, &view),
               std::logic_error);
  EXPECT_THROW(DecodeJpegRegion(jpeg.data(), static_cast<int64_t>(jpeg.size()), w, h, 3, PixelRect{0, 0, 1, 1},
                                "x.jpg", &scratch, &view),
               std::logic_error);
}

// ---- The pipeline decodes only what it reads, and computes the same --------

std::vector<float> RunOnBytes(const TransformPipeline& p, const Bytes& data, int epoch, int64_t sample) {
  std::vector<float> out(static_cast<size_t>(p.output().bytes() / 4));
  p.Apply(data.data(), static_cast<int64_t>(data.size()), "img.jpg", 3, epoch, sample,
          reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

std::vector<float> RunOnWhole(const TransformPipeline& p, const cv::Mat& whole, int epoch, int64_t sample) {
  std::vector<float> out(static_cast<size_t>(p.output().bytes() / 4));
  p.ApplyToImage(ImageView{whole.data, whole.cols, whole.rows, static_cast<int64_t>(whole.step)}, "img.jpg", 3, epoch,
                 sample, reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

TEST(JpegDecodeTest, PipelineResultsEqualThoseFromTheWholeImage) {
  const std::vector<double> mean = {0.485, 0.456, 0.406}, std_dev = {0.229, 0.224, 0.225};
  const std::vector<std::vector<TransformSpec>> chains = {
      // RandomResizedCrop: the crop box is decoded.
      {{"ImgDecode", {}}, {"RandomResizedCrop", {{"size", {64}}}}, {"RandomHorizontalFlip", {}}, {"ToTensor", {}},
       {"Normalize", {{"mean", mean}, {"std", std_dev}}}},
      // Crops only, nothing resampled: the final view is decoded.
      {{"ImgDecode", {}}, {"CenterCrop", {{"size", {90, 70}}}}, {"CenterCrop", {{"size", {41}}}},
       {"RandomVerticalFlip", {}}, {"ToTensor", {}}},
      // A crop after the resize, and a zero-padding crop before it: whole image.
      {{"ImgDecode", {}}, {"Resize", {{"size", {80}}}}, {"CenterCrop", {{"size", {64}}}}, {"ToTensor", {}}},
      {{"ImgDecode", {}}, {"CenterCrop", {{"size", {180, 260}}}}, {"Resize", {{"size", {50}}}},
       {"RandomResizedCrop", {{"size", {32}}}}, {"ToTensor", {}}},
      // A crop whose size is the output size: RandomResizedCrop resamples nothing.
      {{"ImgDecode", {}}, {"RandomResizedCrop", {{"size", {150}}, {"scale", {1.0, 1.0}}, {"ratio", {1.0, 1.0}}}},
       {"ToTensor", {}}},
  };
  const int w = 203, h = 157;
  const Bytes rgb = TestPixels(w, h, 9);
  for (const Encoding& e : {kEncodings[0], kEncodings[2], kEncodings[6]}) {
    const Bytes jpeg = EncodeJpeg(rgb, w, h, e);
    const cv::Mat whole = OpenCvDecode(jpeg, 1);
    for (size_t c = 0; c < chains.size(); ++c) {
      const TransformPipeline p(chains[c]);
      for (int64_t sample = 0; sample < 12; ++sample) {
        EXPECT_EQ(RunOnBytes(p, jpeg, 1, sample), RunOnWhole(p, whole, 1, sample))
            << e.name << ", chain " << c << ", sample " << sample;
      }
    }
  }
}

TEST(JpegDecodeTest, DraftDecodesTheReducedHullOfTheCrop) {
  // The draft path decodes only the hull of the crop in the 1/d image; the
  // result must equal resampling that hull's box out of the whole 1/d decode.
  const int w = 1203, h = 957;
  const Bytes jpeg = EncodeJpeg(TestPixels(w, h, 4), w, h, kEncodings[0]);
  const TransformPipeline p({{"ImgDecode", {{"draft", {1}}}},
                             {"RandomResizedCrop", {{"size", {100}}}},
                             {"ToUint8", {{"layout", {1}}}}});
  int reduced = 0;
  for (int64_t sample = 0; sample < 16; ++sample) {
    const auto draws = p.RandomDraws(w, h, 3, 0, sample);
    ASSERT_EQ(draws.size(), 1u);
    const auto& b = draws[0];
    int d = 1;
    for (int k : {8, 4, 2}) {
      if (b.width >= 100 * k && b.height >= 100 * k) {
        d = k;
        break;
      }
    }
    if (d == 1) continue;
    ++reduced;
    const cv::Mat small = OpenCvDecode(jpeg, d);
    // The same arithmetic as TransformPipeline::MakePlan.
    const double x0 = b.left / double(d), y0 = b.top / double(d);
    const double x1 = (b.left + b.width) / double(d), y1 = (b.top + b.height) / double(d);
    const int hx0 = static_cast<int>(std::floor(x0)), hy0 = static_cast<int>(std::floor(y0));
    const int hx1 = std::min(small.cols, static_cast<int>(std::ceil(x1)));
    const int hy1 = std::min(small.rows, static_cast<int>(std::ceil(y1)));
    const ImageView hull{small.ptr<uint8_t>(hy0) + 3 * hx0, hx1 - hx0, hy1 - hy0, static_cast<int64_t>(small.step)};
    const float hull_box[4] = {static_cast<float>(x0 - hx0), static_cast<float>(y0 - hy0),
                               static_cast<float>(x1 - hx0), static_cast<float>(y1 - hy0)};
    Bytes want(100 * 100 * 3);
    ResampleScratch scratch;
    Resample(hull, hull_box, 100, 100, Interpolation::kBilinear, true, want.data(), 300, &scratch);
    for (size_t i = 0; i < want.size(); i += 3) std::swap(want[i], want[i + 2]);  // BGR -> RGB
    Bytes got(want.size());
    p.Apply(jpeg.data(), static_cast<int64_t>(jpeg.size()), "big.jpg", 3, 0, sample, got.data());
    EXPECT_EQ(got, want) << "sample " << sample << ", 1/" << d;
  }
  EXPECT_GT(reduced, 3);
}

// ---- ImgDecode(fast=True) ------------------------------------------------------

// libjpeg's plain whole decode in `mode` (no skipped rows, no cropped
// columns), BGR: the reference for the region decode.
cv::Mat ReferenceDecode(const Bytes& jpeg, const JpegDecodeMode& mode) {
  jpeg_decompress_struct c;
  EncodeError err;
  c.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = [](j_common_ptr ci) { std::longjmp(reinterpret_cast<EncodeError*>(ci->err)->jump, 1); };
  jpeg_create_decompress(&c);
  cv::Mat out;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&c);
    ADD_FAILURE() << "libjpeg could not decode";
    return {};
  }
  jpeg_mem_src(&c, jpeg.data(), static_cast<unsigned long>(jpeg.size()));
  jpeg_read_header(&c, TRUE);
  c.out_color_space = JCS_EXT_BGR;
  c.scale_num = static_cast<unsigned int>(mode.scale);
  c.scale_denom = 8;
  c.dct_method = mode.fast_idct ? JDCT_IFAST : JDCT_ISLOW;
  c.do_fancy_upsampling = mode.fancy_upsampling ? TRUE : FALSE;
  jpeg_start_decompress(&c);
  out.create(static_cast<int>(c.output_height), static_cast<int>(c.output_width), CV_8UC3);
  while (c.output_scanline < c.output_height) {
    JSAMPROW row = out.ptr<uint8_t>(static_cast<int>(c.output_scanline));
    jpeg_read_scanlines(&c, &row, 1);
  }
  jpeg_finish_decompress(&c);
  jpeg_destroy_decompress(&c);
  return out;
}

TEST(FastDecodeTest, RegionsEqualTheWholeDecodeAtEveryScaleAndSetting) {
  // Skipped rows and cropped columns must not change a pixel with the fast
  // settings either (box upsampling merged with the colour conversion, the
  // fast IDCT, libjpeg's scaled IDCTs) or any single one of them.
  // Every scale with the exact and the fast settings; each fast setting
  // alone at 8/8 and 4/8.
  const int w = 203, h = 157;
  const Bytes rgb = TestPixels(w, h, 11);
  std::vector<JpegDecodeMode> modes;
  for (int scale = 1; scale <= 8; ++scale) {
    modes.push_back(ReducedMode(1));
    modes.back().scale = scale;
    modes.push_back(FastJpegMode(scale));
  }
  for (int scale : {8, 4}) {
    modes.push_back(ReducedMode(8 / scale));
    modes.back().fast_idct = true;
    modes.push_back(ReducedMode(8 / scale));
    modes.back().fancy_upsampling = false;
  }
  int checked = 0;
  for (const Encoding& e : kEncodings) {
    const Bytes jpeg = EncodeJpeg(rgb, w, h, e);
    ASSERT_FALSE(jpeg.empty());
    {
      for (size_t k = 0; k < modes.size(); ++k) {
        const JpegDecodeMode& mode = modes[k];
        const int scale = mode.scale;
        const cv::Mat whole = ReferenceDecode(jpeg, mode);
        const int dw = JpegScaledSize(w, scale), dh = JpegScaledSize(h, scale);
        ASSERT_EQ(whole.cols, dw);
        ASSERT_EQ(whole.rows, dh);
        std::vector<PixelRect> rects = {{0, 0, dw, dh}, {dw - 1, dh - 1, 1, 1}, {dw / 2, 1, 1, dh - 1}};
        Rng rng(k * 100 + static_cast<uint64_t>(&e - kEncodings));
        for (int i = 0; i < 8; ++i) rects.push_back(testing::RandomRect(rng, dw, dh));
        JpegScratch scratch;
        ImageView view;
        for (const PixelRect& r : rects) {
          ASSERT_EQ(DecodeJpegRegion(jpeg.data(), static_cast<int64_t>(jpeg.size()), w, h, mode, r, "t.jpg",
                                     &scratch, &view),
                    JpegDecodeStatus::kDecoded);
          ASSERT_EQ(Compare(view, whole, r), "")
              << e.name << ", " << scale << "/8, ifast " << mode.fast_idct << ", fancy " << mode.fancy_upsampling
              << ", rect x=" << r.x << " y=" << r.y << " w=" << r.width << " h=" << r.height;
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 10 * 20 * 11);
}

// The smallest scale m/8 allowed by `allowed` with w * m / 8 >= ow and
// h * m / 8 >= oh, else 8.
template <typename Allowed>
int SmallestScale(int w, int h, int ow, int oh, Allowed allowed) {
  for (int m = 1; m < 8; ++m) {
    if (allowed(m) && int64_t{w} * m >= int64_t{ow} * 8 && int64_t{h} * m >= int64_t{oh} * 8) return m;
  }
  return 8;
}

TEST(FastDecodeTest, ChoosesTheSmallestScaleThatKeepsTheOutputsResolution) {
  // ImgDecode + Resize((oh, ow)) reads the whole image, so the scale follows
  // from the sizes alone: the smallest allowed m/8 with w * m / 8 >= ow and
  // h * m / 8 >= oh. Draft allows 1/8, 1/4, 1/2 (PIL's draft rule, given
  // here by hand); fast the scales FastJpegScaleUseful names, and for a CMYK
  // JPEG (OpenCV's decode) only those of them that are powers of two.
  struct Case {
    int w, h, ow, oh;
    int draft;
  };
  const Case cases[] = {
      {448, 448, 224, 224, 4},   {449, 449, 224, 224, 4},   {447, 447, 224, 224, 8},   {300, 300, 224, 224, 8},
      {600, 600, 224, 224, 4},   {900, 900, 224, 224, 2},   {895, 900, 224, 224, 4},   {1792, 1792, 224, 224, 1},
      {1791, 1792, 224, 224, 2}, {2000, 600, 224, 224, 4},  {300, 300, 400, 400, 8},   {224, 224, 224, 224, 8},
      {500, 375, 341, 256, 8},   {1203, 957, 321, 256, 4},  {4000, 3000, 64, 48, 1},   {1000, 800, 250, 100, 2},
  };
  auto power_of_two = [](int m) { return m == 1 || m == 2 || m == 4; };
  int scaled = 0;
  for (const Case& c : cases) {
    const std::vector<TransformSpec> chain = {{"ImgDecode", {}},
                                              {"Resize", {{"size", {double(c.oh), double(c.ow)}}}},
                                              {"ToUint8", {}}};
    auto with = [&](const char* option) {
      std::vector<TransformSpec> s = chain;
      if (option) s[0].args[option] = {1};
      return s;
    };
    const TransformPipeline exact(with(nullptr)), fast(with("fast")), draft(with("draft"));
    const std::string what = std::to_string(c.w) + "x" + std::to_string(c.h) + " -> " + std::to_string(c.ow) + "x" +
                             std::to_string(c.oh);
    const JpegDecodePlan f = fast.PlanJpegDecode(c.w, c.h, 1, 0, 0);
    const int same_size = c.w == c.ow && c.h == c.oh;  // Resize returns the image as it is: nothing to scale
    EXPECT_EQ(f.mode.scale, same_size ? 8 : SmallestScale(c.w, c.h, c.ow, c.oh, FastJpegScaleUseful)) << what;
    EXPECT_EQ(fast.PlanJpegDecode(c.w, c.h, 1, 0, 0, 4).mode.scale,
              same_size ? 8 : SmallestScale(c.w, c.h, c.ow, c.oh, [&](int m) {
                return FastJpegScaleUseful(m) && power_of_two(m);
              }))
        << what << ", CMYK";
    EXPECT_EQ(draft.PlanJpegDecode(c.w, c.h, 1, 0, 0).mode.scale, c.draft) << what << ", draft";
    EXPECT_TRUE(exact.PlanJpegDecode(c.w, c.h, 1, 0, 0).mode.exact()) << what;
    scaled += f.mode.scale < 8;
    // Fast's settings apply at every scale; draft keeps the exact ones.
    const JpegDecodeMode want = FastJpegMode(f.mode.scale);
    EXPECT_EQ(f.mode.fast_idct, want.fast_idct);
    EXPECT_EQ(f.mode.fancy_upsampling, want.fancy_upsampling);
    EXPECT_FALSE(f.mode.exact());
    const JpegDecodeMode d = draft.PlanJpegDecode(c.w, c.h, 1, 0, 0).mode;
    EXPECT_TRUE(!d.fast_idct && d.fancy_upsampling);
    // The whole scaled image is decoded (Resize reads all of it).
    EXPECT_EQ(f.region.x, 0);
    EXPECT_EQ(f.region.width, JpegScaledSize(c.w, f.mode.scale)) << what;
    EXPECT_EQ(f.region.height, JpegScaledSize(c.h, f.mode.scale)) << what;
  }
  EXPECT_GE(scaled, 10);
}

TEST(FastDecodeTest, RandomResizedCropScalesFollowEachCropBox) {
  // The crop box is drawn on the full-size image exactly as in the exact
  // mode; the scale follows from that box and the 224 output; the region is
  // the box's hull in the scaled image.
  const std::vector<TransformSpec> exact = {{"ImgDecode", {}}, {"RandomResizedCrop", {{"size", {224}}}},
                                            {"ToUint8", {}}};
  std::vector<TransformSpec> fast_specs = exact;
  fast_specs[0].args["fast"] = {1};
  const TransformPipeline pe(exact), pf(fast_specs);
  int seen[9] = {};
  for (const auto& [w, h] : std::vector<std::pair<int, int>>{{500, 375}, {1600, 1200}, {3000, 2000}}) {
    for (int64_t sample = 0; sample < 200; ++sample) {
      const auto draws = pf.RandomDraws(w, h, 5, 2, sample);
      ASSERT_EQ(draws.size(), 1u);
      const auto& b = draws[0];
      const auto e = pe.RandomDraws(w, h, 5, 2, sample)[0];
      ASSERT_TRUE(b.top == e.top && b.left == e.left && b.width == e.width && b.height == e.height);
      const int want = b.width == 224 && b.height == 224
                           ? 8  // nothing to resize
                           : SmallestScale(b.width, b.height, 224, 224, FastJpegScaleUseful);
      const JpegDecodePlan plan = pf.PlanJpegDecode(w, h, 5, 2, sample);
      ASSERT_EQ(plan.mode.scale, want) << w << "x" << h << " box " << b.width << "x" << b.height;
      ++seen[want];
      const double m = want / 8.0;
      EXPECT_EQ(plan.region.x, static_cast<int>(std::floor(b.left * m)));
      EXPECT_EQ(plan.region.y, static_cast<int>(std::floor(b.top * m)));
      EXPECT_EQ(plan.region.x + plan.region.width,
                std::min(JpegScaledSize(w, want), static_cast<int>(std::ceil((b.left + b.width) * m))));
      EXPECT_EQ(plan.region.y + plan.region.height,
                std::min(JpegScaledSize(h, want), static_cast<int>(std::ceil((b.top + b.height) * m))));
    }
  }
  // The sizes cover 8/8 (crops below 448), 4/8, 2/8 and 1/8.
  for (int m : {1, 2, 4, 8}) EXPECT_GT(seen[m], 0) << m << "/8";
}

// What the fast train and validation chains must compute: the first resize
// reads the full-size input's box, mapped onto the scaled whole image (a
// plain libjpeg decode in the fast mode), from the hull of that box.
Bytes FastReference(const cv::Mat& scaled, int scale, const PixelRect& full_box, int out_w, int out_h,
                    const PixelRect& window) {
  const double m = scale / 8.0;
  const double x0 = full_box.x * m, y0 = full_box.y * m;
  const double x1 = (full_box.x + full_box.width) * m, y1 = (full_box.y + full_box.height) * m;
  const int hx0 = static_cast<int>(std::floor(x0)), hy0 = static_cast<int>(std::floor(y0));
  const int hx1 = std::min(scaled.cols, static_cast<int>(std::ceil(x1)));
  const int hy1 = std::min(scaled.rows, static_cast<int>(std::ceil(y1)));
  const ImageView hull{scaled.ptr<uint8_t>(hy0) + 3 * hx0, hx1 - hx0, hy1 - hy0, static_cast<int64_t>(scaled.step)};
  const float box[4] = {static_cast<float>(x0 - hx0), static_cast<float>(y0 - hy0), static_cast<float>(x1 - hx0),
                        static_cast<float>(y1 - hy0)};
  Bytes resized(static_cast<size_t>(out_w) * out_h * 3);
  ResampleScratch scratch;
  Resample(hull, box, out_w, out_h, Interpolation::kBilinear, true, resized.data(), int64_t{out_w} * 3, &scratch);
  Bytes want;  // the window, RGB
  for (int y = window.y; y < window.y + window.height; ++y) {
    for (int x = window.x; x < window.x + window.width; ++x) {
      const uint8_t* p = &resized[(static_cast<size_t>(y) * out_w + x) * 3];
      want.insert(want.end(), {p[2], p[1], p[0]});
    }
  }
  return want;
}

TEST(FastDecodeTest, ComputesTheResizeFromTheScaledImage) {
  const int w = 1203, h = 957;
  const Bytes jpeg = EncodeJpeg(TestPixels(w, h, 4), w, h, kEncodings[0]);
  const TransformPipeline train({{"ImgDecode", {{"fast", {1}}}},
                                 {"RandomResizedCrop", {{"size", {100}}}},
                                 {"ToUint8", {{"layout", {1}}}}});
  const TransformPipeline val({{"ImgDecode", {{"fast", {1}}}},
                               {"Resize", {{"size", {256}}}},
                               {"CenterCrop", {{"size", {224}}}},
                               {"ToUint8", {{"layout", {1}}}}});
  std::vector<cv::Mat> scaled(9);  // the whole image decoded at m/8, as needed
  int scales_seen = 0;
  for (int64_t sample = 0; sample < 24; ++sample) {
    const auto b = train.RandomDraws(w, h, 3, 0, sample)[0];
    const int m = train.PlanJpegDecode(w, h, 3, 0, sample).mode.scale;
    if (scaled[m].empty()) {
      scaled[m] = ReferenceDecode(jpeg, FastJpegMode(m));
      ++scales_seen;
    }
    const Bytes want = FastReference(scaled[m], m, PixelRect{b.left, b.top, b.width, b.height}, 100, 100,
                                     PixelRect{0, 0, 100, 100});
    Bytes got(want.size());
    train.Apply(jpeg.data(), static_cast<int64_t>(jpeg.size()), "big.jpg", 3, 0, sample, got.data());
    EXPECT_EQ(got, want) << "sample " << sample << ", " << m << "/8";
  }
  EXPECT_GE(scales_seen, 2);
  // Resize(256): 1203x957 -> 321x256, from the scaled image; the centre crop
  // is its window, decoded only as far as its taps reach.
  const JpegDecodePlan vp = val.PlanJpegDecode(w, h, 0, 0, 0);
  const int vm = vp.mode.scale;
  ASSERT_EQ(vm, SmallestScale(w, h, 321, 256, FastJpegScaleUseful));
  ASSERT_LT(vm, 8);
  EXPECT_LT(vp.region.width, JpegScaledSize(w, vm));
  if (scaled[vm].empty()) scaled[vm] = ReferenceDecode(jpeg, FastJpegMode(vm));
  const Bytes want = FastReference(scaled[vm], vm, PixelRect{0, 0, w, h}, 321, 256, PixelRect{48, 16, 224, 224});
  Bytes got(want.size());
  val.Apply(jpeg.data(), static_cast<int64_t>(jpeg.size()), "big.jpg", 0, 0, 0, got.data());
  EXPECT_EQ(got, want);
}

TEST(FastDecodeTest, SameBytesOnAnyNumberOfThreads) {
  const int w = 640, h = 480;
  const Bytes jpeg = EncodeJpeg(TestPixels(w, h, 8), w, h, kEncodings[0]);
  const TransformPipeline p({{"ImgDecode", {{"fast", {1}}}},
                             {"RandomResizedCrop", {{"size", {64}}}},
                             {"RandomHorizontalFlip", {}},
                             {"ToTensor", {}}});
  const int n = 48;
  std::vector<std::vector<float>> one(n), four(n);
  for (int i = 0; i < n; ++i) one[i] = RunOnBytes(p, jpeg, 2, i);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < n; i += 4) four[i] = RunOnBytes(p, jpeg, 2, i);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < n; ++i) EXPECT_EQ(one[i], four[i]) << "sample " << i;
  EXPECT_NE(one[0], one[1]);  // the samples' crops differ
}

TEST(FastDecodeTest, BadJpegsFailAsInTheExactMode) {
  const int w = 640, h = 480;
  const Bytes jpeg = EncodeJpeg(TestPixels(w, h, 1), w, h, kEncodings[0]);
  Bytes bad_table = jpeg;  // an invalid Huffman table id: libjpeg's fatal error
  for (size_t i = 2; i + 4 < bad_table.size(); ++i) {
    if (bad_table[i] == 0xFF && bad_table[i + 1] == 0xC4) {
      bad_table[i + 4] = 0xFF;
      break;
    }
  }
  const Bytes truncated(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(jpeg.size() / 2));
  const std::vector<TransformSpec> exact = {{"ImgDecode", {}}, {"Resize", {{"size", {100}}}},
                                            {"CenterCrop", {{"size", {100}}}}, {"ToTensor", {}}};
  std::vector<TransformSpec> fast_specs = exact;
  fast_specs[0].args["fast"] = {1};
  const TransformPipeline pe(exact), pf(fast_specs);
  ASSERT_LT(pf.PlanJpegDecode(w, h, 3, 0, 0).mode.scale, 8);
  auto error = [](const TransformPipeline& p, const Bytes& data) -> std::string {
    std::vector<float> out(static_cast<size_t>(p.output().bytes() / 4), -1.0f);
    try {
      p.Apply(data.data(), static_cast<int64_t>(data.size()), "dir/bad.jpg", 3, 0, 0,
              reinterpret_cast<uint8_t*>(out.data()));
    } catch (const DecodeError& e) {
      for (float v : out) {
        if (v != -1.0f) return "wrote into dst before failing";
      }
      return e.what();
    }
    return "no error";
  };
  for (const Bytes* bad : {static_cast<const Bytes*>(&bad_table), &truncated}) {
    const std::string e = error(pe, *bad), f = error(pf, *bad);
    EXPECT_EQ(e.rfind("'dir/bad.jpg': ", 0), 0u) << e;
    EXPECT_EQ(f, e);
  }
}

}  // namespace
}  // namespace hdmlp
