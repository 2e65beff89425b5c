// libFuzzer target: ReadImageHeader and DecodeImage for every format hdmlp
// reads (JPEG, PNG, BMP, TIFF, WebP, PBM/PGM/PPM) on any bytes. An image is
// either decoded to its header's size or refused with a DecodeError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "hdmlp/transforms/decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const hdmlp::ImageHeader header = hdmlp::ReadImageHeader(data, static_cast<int64_t>(size), "fuzz.img", true);
    const hdmlp::PixelRect bounds = hdmlp::DecodedBounds(header, 1);
    if (static_cast<int64_t>(bounds.width) * bounds.height > 4096 * 4096) return 0;  // memory, not bugs
    hdmlp::DecodedImage image;
    hdmlp::DecodeImage(data, static_cast<int64_t>(size), header, 1, bounds, "fuzz.img", &image);
    if (image.view.width != bounds.width || image.view.height != bounds.height) __builtin_trap();
  } catch (const hdmlp::DecodeError&) {
  }
  return 0;
}
