#include "hdmlp/transforms/raw_image.h"

#include <cstring>
#include <vector>

#include "hdmlp/transforms/decode.h"

namespace hdmlp {

RawImage ParseRawImage(const uint8_t* data, int64_t size, const std::string& path) {
  if (size < kRawImageHeaderBytes || std::memcmp(data, "HRAW", 4) != 0) {
    throw DecodeError("'" + path + "' is not a raw image (no HRAW header): was the pack made with --raw?");
  }
  uint32_t h, w, c;
  std::memcpy(&h, data + 4, 4);
  std::memcpy(&w, data + 8, 4);
  std::memcpy(&c, data + 12, 4);
  if (h < 1 || w < 1 || (c != 1 && c != 3) || int64_t{h} * w > kMaxImagePixels ||
      kRawImageHeaderBytes + int64_t{h} * w * c != size) {
    throw DecodeError("'" + path + "': raw image header " + std::to_string(w) + "x" + std::to_string(h) + "x" +
                      std::to_string(c) + " does not match its " + std::to_string(size) + " bytes");
  }
  return RawImage{static_cast<int>(h), static_cast<int>(w), static_cast<int>(c), data + kRawImageHeaderBytes};
}

OutputShape RawImageShape(const TransformPipeline& pipeline, const uint8_t* data, int64_t size,
                          const std::string& path) {
  const RawImage image = ParseRawImage(data, size, path);
  return pipeline.ShapeOfImage(image.width, image.height);
}

OutputShape ApplyToRawImage(const TransformPipeline& pipeline, const uint8_t* data, int64_t size,
                            const std::string& path, uint64_t seed, int epoch, int64_t sample,
                            const OutputShape& expected, uint8_t* dst) {
  const RawImage image = ParseRawImage(data, size, path);
  const OutputShape shape = pipeline.ShapeOfImage(image.width, image.height);
  if (!shape.SameAs(expected)) {
    throw InvalidArgumentError("'" + path + "' transforms to " + shape.ToString() + ", but the batch holds " +
                               expected.ToString() + ": give the chain a fixed output size (e.g. a crop)");
  }
  // The pipeline takes BGR (OpenCV's order).
  thread_local std::vector<uint8_t> bgr;
  const int64_t pixels = int64_t{image.width} * image.height;
  bgr.resize(static_cast<size_t>(pixels * 3));
  const uint8_t* src = image.pixels;
  uint8_t* out = bgr.data();
  if (image.channels == 3) {
    for (int64_t p = 0; p < pixels; ++p, src += 3, out += 3) {
      out[0] = src[2];
      out[1] = src[1];
      out[2] = src[0];
    }
  } else {
    for (int64_t p = 0; p < pixels; ++p, out += 3) out[0] = out[1] = out[2] = src[p];
  }
  const ImageView view{bgr.data(), image.width, image.height, int64_t{image.width} * 3};
  return pipeline.ApplyToImage(view, path, seed, epoch, sample, dst);
}

}  // namespace hdmlp
