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
// The settings are those of OpenCV's (and PIL's) decode: ISLOW IDCT, fancy
// upsampling, output in BGR order (JCS_EXT_BGR; the pipeline's last pass
// writes RGB). tests/cpp/jpeg_decode_test.cc checks rectangle against whole
// decode, pixel for pixel, over every chroma subsampling, progressive and
// restart-marker files, and every DCT scale.
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

enum class JpegDecodeStatus {
  kDecoded,
  kFourChannel,  // CMYK or YCCK: not decoded here (the caller uses OpenCV's conversion)
};

// Decodes `region` of the JPEG scaled by 1/reduce (reduce 1, 2, 4 or 8:
// libjpeg's DCT scaling; the scaled image is ceil(width / reduce) x
// ceil(height / reduce)), in the scaled image's coordinates. On kDecoded,
// *view shows the region's BGR pixels, held in *scratch until its next use.
// `width` and `height` are the size the caller read from the header; a
// region outside the scaled image is a programming error (std::logic_error).
// Throws DecodeError (decode.h), naming path_for_errors and libjpeg's
// reason, when libjpeg fails or the size differs from the header's.
// libjpeg's warnings (e.g. corrupt entropy-coded data) are silent, as in PIL.
JpegDecodeStatus DecodeJpegRegion(const uint8_t* data, int64_t size, int width, int height, int reduce,
                                  const PixelRect& region, const std::string& path_for_errors,
                                  JpegScratch* scratch, ImageView* view);

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_JPEG_DECODE_H_
