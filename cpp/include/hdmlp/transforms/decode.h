// Image decoding for the transform pipeline: what torchvision's ImageFolder
// loader does (PIL's Image.open(f).convert("RGB")), with OpenCV.
//
// Rules (docs/transforms.md has the details and the reasons):
//   - The format is recognised by content, never by the file name: JPEG, PNG,
//     BMP, TIFF, WebP and PBM/PGM/PPM, i.e. the formats of torchvision's
//     IMG_EXTENSIONS. Anything else (GIF, HEIC, a text file, ...) is an
//     "unsupported" DecodeError.
//   - The header is read before anything is decoded: an image of more than
//     kMaxImagePixels pixels (PIL's decompression-bomb limit,
//     2 * Image.MAX_IMAGE_PIXELS) is refused without allocating it.
//   - Truncated files are refused, never padded with grey: a JPEG must reach
//     its EOI marker after its last scan, a PNG its last IDAT chunk, a BMP,
//     PNM or WebP must hold the bytes its header announces, and the decoder
//     must succeed.
//   - Grayscale, palette, CMYK and alpha images become 3-channel 8-bit, alpha
//     dropped, as convert("RGB") does. As in PIL, 16-bit RGB keeps the high
//     byte, while 16-bit grayscale (PIL mode I;16) is clipped at 255, not
//     rescaled; PBM/PGM/PPM are decoded here with PIL's rules (values scaled
//     from maxval; above 255 clipped like I;16). EXIF orientation is NOT applied, as in
//     PIL's Image.open (torchvision's default loader never calls
//     ImageOps.exif_transpose).
//   - Pixels are returned in OpenCV's BGR order; the pipeline writes RGB.
//   - A caller that needs only part of the image (a crop) asks for that
//     region: a JPEG is then decoded only as far as the region needs.
//
// Every error is a DecodeError (an InvalidArgumentError, Python: ValueError)
// whose message starts with the path given for errors.
//
// Thread-safety: all functions are reentrant; call them from any thread.
#ifndef HDMLP_TRANSFORMS_DECODE_H_
#define HDMLP_TRANSFORMS_DECODE_H_

#include <cstdint>
#include <string>

#include <opencv2/core.hpp>

#include "hdmlp/errors.h"
#include "hdmlp/transforms/image_view.h"
#include "hdmlp/transforms/jpeg_decode.h"

namespace hdmlp {

// A file that is not a valid image: corrupt, truncated, empty, of an
// unsupported format, or too large (Python: ValueError).
class DecodeError : public InvalidArgumentError {
 public:
  using InvalidArgumentError::InvalidArgumentError;
};

// PIL's default Image.MAX_IMAGE_PIXELS is 89478485; PIL raises
// DecompressionBombError above twice that, and so do we.
inline constexpr int64_t kMaxImagePixels = 178956970;

// Python's (and PIL's) round() on a double: half to even, whatever the FPU
// rounding mode. Shared by the decoder and the ops that mirror torchvision.
double RoundHalfEven(double x);

enum class ImageFormat { kJpeg, kPng, kBmp, kTiff, kWebp, kPnm };
const char* ImageFormatName(ImageFormat format);

struct ImageHeader {
  ImageFormat format = ImageFormat::kJpeg;
  int width = 0;
  int height = 0;
  bool gray16 = false;      // PNG or TIFF with one 16-bit channel
  int pnm_kind = 0;         // PNM: 1..6 for P1..P6
  int pnm_maxval = 0;       // PNM: maxval (1 for P1/P4)
  int64_t pnm_data = 0;     // PNM: offset of the first sample
  int jpeg_components = 0;  // JPEG: colour components in the frame header (1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK)
};

// Reads the format and the size from the first bytes. With check_complete,
// also checks that the file is not truncated (for a JPEG: walks its markers
// to the EOI, a few microseconds per 100 KB). Throws DecodeError for an
// empty, unsupported, truncated, malformed or too large image.
ImageHeader ReadImageHeader(const uint8_t* data, int64_t size, const std::string& path_for_errors,
                            bool check_complete);

// The size of the image as DecodeImage delivers it: the header's, or for a
// JPEG decoded at scale/8, JpegScaledSize of each side.
PixelRect DecodedBounds(const ImageHeader& header, const JpegDecodeMode& mode);
// The same for the exact mode at 1/reduce (1, 2, 4 or 8).
PixelRect DecodedBounds(const ImageHeader& header, int reduce);

// Whether DecodeImage can decode this JPEG at scale/8 with the fast
// settings: every scale for 1 and 3 components; CMYK and YCCK JPEGs go
// through OpenCV, which offers 1/1, 1/2, 1/4 and 1/8 and the exact settings.
bool JpegScaleSupported(const ImageHeader& header, int scale);

// A decoded region and the memory that holds it. Keep one per thread and
// pass it to every DecodeImage call: the memory is reused, and `view` is
// valid until the next call.
struct DecodedImage {
  ImageView view;  // 8-bit BGR pixels of the region asked for
  JpegScratch jpeg;
  cv::Mat mat;
};

// Decodes `region` (inside DecodedBounds(header, mode)) to 8-bit BGR: the
// pixels a decode of the whole image in the same mode has there. The mode
// (jpeg_decode.h; the default is exact) applies to JPEGs only: the other
// formats are always decoded exactly and whole. A JPEG is decoded by
// libjpeg-turbo directly, doing only the work the region needs
// (jpeg_decode.h). CMYK and YCCK JPEGs (whose mode must satisfy
// JpegScaleSupported; its speed settings are ignored) and the other formats
// are decoded whole by OpenCV (PBM/PGM/PPM by hdmlp), and the region is a
// view of the result. `header` must come from ReadImageHeader on the same
// bytes. Throws DecodeError when the decoder fails or yields another size
// than the header's.
void DecodeImage(const uint8_t* data, int64_t size, const ImageHeader& header, const JpegDecodeMode& mode,
                 const PixelRect& region, const std::string& path_for_errors, DecodedImage* out);
// The same in the exact mode at 1/reduce (1, 2, 4 or 8; JPEG only, else 1).
void DecodeImage(const uint8_t* data, int64_t size, const ImageHeader& header, int reduce, const PixelRect& region,
                 const std::string& path_for_errors, DecodedImage* out);

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_DECODE_H_
