// DecodeJpegRegion: decode one rectangle of a JPEG with libjpeg-turbo,
// skipping the work outside it, and get the very pixels a whole decode has
// there.
//
// A training chain's RandomResizedCrop keeps on average under half of an
// image, so decoding the whole image wastes work. libjpeg-turbo can skip
// most of it while keeping every kept pixel exact:
//   - rows below the rectangle are never decoded (the decode stops after its
//     last row);
//   - rows above it are only entropy-decoded (jpeg_skip_scanlines: no IDCT,
//     upsampling or colour conversion; the library re-creates the context
//     rows that fancy upsampling needs, so the first kept row is exact);
//   - columns left and right of it skip the IDCT, upsampling and colour
//     conversion (jpeg_crop_scanline). The library moves the left edge down
//     to an iMCU boundary and treats both edges of the cropped band as image
//     edges, which changes the edge columns' chroma upsampling; so the band
//     is widened by kJpegCropMargin pixels on each side, and only its inner
//     part is returned.
// The default settings (JpegDecodeMode{}) are those of OpenCV's (and PIL's)
// decode: ISLOW IDCT, fancy upsampling, output in BGR order (JCS_EXT_BGR; the
// pipeline's last pass writes RGB). ImgDecode(draft/fast) asks for a DCT
// scale and, for fast, libjpeg's faster settings; a rectangle then has the
// pixels a whole decode with the same mode has there.
// tests/cpp/jpeg_decode_test.cc checks rectangle against whole decode, pixel
// for pixel, over every chroma subsampling, progressive and restart-marker
// files, every DCT scale and every mode.
//
// Thread-safety: reentrant; a JpegScratch belongs to one thread at a time.
#ifndef HDMLP_TRANSFORMS_JPEG_DECODE_H_
#define HDMLP_TRANSFORMS_JPEG_DECODE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hdmlp/transforms/image_view.h"

namespace hdmlp {

// Pixels decoded beyond each side of a cropped band, then dropped.
inline constexpr int kJpegCropMargin = 4;

// Memory reused from call to call (rows of the decoded band).
struct JpegScratch {
  std::vector<uint8_t> pixels;
};

// How libjpeg decodes. The default is the exact decode (PIL's and OpenCV's
// settings); the other values trade accuracy for speed (docs/transforms.md,
// "Fast decoding", has the measured effect of each).
struct JpegDecodeMode {
  // Decode at scale/8 of the full size (libjpeg's DCT scaling, 1..8): the
  // image becomes JpegScaledSize(width, scale) x JpegScaledSize(height,
  // scale), and its pixel i covers the full-size pixels [8i/scale,
  // 8(i+1)/scale).
  int scale = 8;
  // JDCT_IFAST instead of JDCT_ISLOW for blocks decoded at 8x8 (libjpeg's
  // scaled IDCTs are ISLOW-style whatever this says).
  bool fast_idct = false;
  // false: subsampled chroma is replicated instead of interpolated (for
  // 4:2:0 and 4:2:2 at 8/8, libjpeg then merges it with the colour
  // conversion).
  bool fancy_upsampling = true;

  bool exact() const { return scale == 8 && !fast_idct && fancy_upsampling; }
};

// The size of a side of `size` pixels decoded at scale/8: ceil(size * scale / 8).
inline int JpegScaledSize(int size, int scale) { return static_cast<int>((int64_t{size} * scale + 7) / 8); }

// The mode of a 1/reduce decode (reduce 1, 2, 4 or 8; anything else is a
// programming error, std::logic_error).
JpegDecodeMode ReducedMode(int reduce);

// ImgDecode(fast=True)'s mode at scale/8: the speed settings that measurably
// paid on this project's benchmarks (docs/transforms.md, "Fast decoding").
JpegDecodeMode FastJpegMode(int scale);
// Whether ImgDecode(fast=True) decodes at scale/8 (1..7) when that is the
// smallest scale that keeps enough pixels: false for a scale that measured
// slower than the next larger useful one (true for 1, 2 and 4 only).
bool FastJpegScaleUseful(int scale);

enum class JpegDecodeStatus {
  kDecoded,
  kFourChannel,  // CMYK or YCCK: not decoded here (the caller uses OpenCV's conversion)
};

// Decodes `region` of the JPEG in `mode` (its scale: the scaled image is
// JpegScaledSize(width, mode.scale) x JpegScaledSize(height, mode.scale)), in
// the scaled image's coordinates. On kDecoded,
// *view shows the region's BGR pixels, held in *scratch until its next use.
// `width` and `height` are the size the caller read from the header; a
// region outside the scaled image is a programming error (std::logic_error).
// Throws DecodeError (decode.h), naming path_for_errors and libjpeg's
// reason, when libjpeg fails or the size differs from the header's.
// libjpeg's warnings (e.g. corrupt entropy-coded data) are silent, as in PIL.
JpegDecodeStatus DecodeJpegRegion(const uint8_t* data, int64_t size, int width, int height,
                                  const JpegDecodeMode& mode, const PixelRect& region,
                                  const std::string& path_for_errors, JpegScratch* scratch, ImageView* view);
// The same in the exact mode scaled by 1/reduce (1, 2, 4 or 8).
JpegDecodeStatus DecodeJpegRegion(const uint8_t* data, int64_t size, int width, int height, int reduce,
                                  const PixelRect& region, const std::string& path_for_errors,
                                  JpegScratch* scratch, ImageView* view);

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_JPEG_DECODE_H_
