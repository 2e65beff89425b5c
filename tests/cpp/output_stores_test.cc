// The float32 output pass writes a large output (a 224x224 batch row) with
// non-temporal stores when the row is 32-byte aligned (a batch's memory), and
// with plain stores otherwise: both, and the portable code, give the same bytes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "hdmlp/transforms/resample.h"
#include "hdmlp/transforms/simd.h"
#include "hdmlp/transforms/transform_pipeline.h"

namespace hdmlp {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes TestJpeg(int w, int h) {
  cv::Mat img(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      img.at<cv::Vec3b>(y, x) = cv::Vec3b(static_cast<uint8_t>((x * 7 + y) % 256), static_cast<uint8_t>((y * 5) % 256),
                                          static_cast<uint8_t>((x * y) % 251));
    }
  }
  Bytes out;
  cv::imencode(".jpg", img, out, {cv::IMWRITE_JPEG_QUALITY, 90});
  return out;
}

// The pipeline's output for `jpeg` written at `offset` bytes past a 64-byte aligned address.
Bytes OutputAt(const TransformPipeline& p, const Bytes& jpeg, size_t offset, int epoch) {
  const OutputShape s = p.ShapeOf(jpeg.data(), static_cast<int64_t>(jpeg.size()), "img");
  const size_t bytes = static_cast<size_t>(s.bytes());
  std::unique_ptr<uint8_t, decltype(&std::free)> memory(
      static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + offset + 63) / 64 * 64)), &std::free);
  uint8_t* dst = memory.get() + offset;
  p.Apply(jpeg.data(), static_cast<int64_t>(jpeg.size()), "img", 3, epoch, 7, s, dst);
  return Bytes(dst, dst + bytes);
}

TEST(OutputStoresTest, StreamedPlainAndPortableOutputsAreEqual) {
  const std::vector<double> mean = {0.485, 0.456, 0.406}, std_dev = {0.229, 0.224, 0.225};
  const std::vector<std::vector<TransformSpec>> chains = {
      {{"ImgDecode", {}}, {"RandomResizedCrop", {{"size", {224}}}}, {"RandomHorizontalFlip", {}}, {"ToTensor", {}},
       {"Normalize", {{"mean", mean}, {"std", std_dev}}}},
      {{"ImgDecode", {}}, {"Resize", {{"size", {256}}}}, {"CenterCrop", {{"size", {224}}}}, {"ToTensor", {}}},
      // Under the size that streams (32x32 floats: 12 KB), and a width that is not whole vectors.
      {{"ImgDecode", {}}, {"Resize", {{"size", {32}}}}, {"CenterCrop", {{"size", {32}}}}, {"ToTensor", {}}},
      {{"ImgDecode", {}}, {"Resize", {{"size", {300}}}}, {"CenterCrop", {{"size", {299}}}}, {"ToTensor", {}}}};
  const Bytes jpeg = TestJpeg(400, 333);
  for (const auto& chain : chains) {
    const TransformPipeline p(chain);
    for (int epoch = 0; epoch < 4; ++epoch) {  // both flips
      const Bytes aligned = OutputAt(p, jpeg, 0, epoch);   // streamed where large and whole vectors
      const Bytes shifted = OutputAt(p, jpeg, 4, epoch);   // not 32-byte aligned: plain stores
      ASSERT_EQ(aligned.size(), shifted.size());
      EXPECT_EQ(0, std::memcmp(aligned.data(), shifted.data(), aligned.size())) << chain[1].op << " epoch " << epoch;
      ForcePortableKernels(true);
      const Bytes portable = OutputAt(p, jpeg, 0, epoch);
      ForcePortableKernels(false);
      EXPECT_EQ(0, std::memcmp(aligned.data(), portable.data(), aligned.size())) << chain[1].op << " epoch " << epoch;
    }
  }
}

}  // namespace
}  // namespace hdmlp
