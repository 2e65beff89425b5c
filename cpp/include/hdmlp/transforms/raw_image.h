// Raw images: decoded pixels as `hdmlp pack --raw` stores them, and the
// transform chain's entry point for them (no decode).
//
// Layout of a raw sample (little-endian): "HRAW", u32 height, u32 width,
// u32 channels (1: grey, 3: RGB), then height x width x channels bytes,
// row-major (HWC). The pixels are what PIL's Image.convert("RGB") (or "L"
// for grey images) gives, i.e. what the chain's ImgDecode would decode, so
// a chain over a raw pack writes what it writes over the encoded files.
//
// ApplyToRawImage runs everything after ImgDecode on those pixels (a grey
// image counts as RGB with three equal channels, as PIL converts it) through
// TransformPipeline::ApplyToImage, with the same randomness and the same
// "expected shape" check as TransformPipeline::Apply.
//
// Errors: a sample that is not a raw image, or whose size does not match
// its header, throws DecodeError naming path_for_errors; nothing is written.
// Thread-safety: free functions; each thread keeps one scratch buffer of
// the largest image it converted.
#ifndef HDMLP_TRANSFORMS_RAW_IMAGE_H_
#define HDMLP_TRANSFORMS_RAW_IMAGE_H_

#include <cstdint>
#include <string>

#include "hdmlp/transforms/transform_pipeline.h"

namespace hdmlp {

inline constexpr int64_t kRawImageHeaderBytes = 16;

struct RawImage {
  int height = 0;
  int width = 0;
  int channels = 0;
  const uint8_t* pixels = nullptr;
};

// Checks the header against the size; throws DecodeError when they disagree.
RawImage ParseRawImage(const uint8_t* data, int64_t size, const std::string& path_for_errors);

// The shape the chain writes for this raw image.
OutputShape RawImageShape(const TransformPipeline& pipeline, const uint8_t* data, int64_t size,
                          const std::string& path_for_errors);

// As TransformPipeline::Apply with an expected shape, for a raw image.
OutputShape ApplyToRawImage(const TransformPipeline& pipeline, const uint8_t* data, int64_t size,
                            const std::string& path_for_errors, uint64_t seed, int epoch, int64_t sample,
                            const OutputShape& expected, uint8_t* dst);

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_RAW_IMAGE_H_
