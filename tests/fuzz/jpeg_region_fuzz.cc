// libFuzzer target: DecodeJpegRegion, the libjpeg-turbo region decoder, on
// any bytes and any region, DCT scale (1/8 .. 8/8) and decode settings (the
// fast IDCT, fancy upsampling: ImgDecode(fast=True)'s) the input picks (its
// first 9 bytes).
// A JPEG is either decoded or refused with a DecodeError.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "hdmlp/transforms/decode.h"
#include "hdmlp/transforms/jpeg_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 9) return 0;
  uint16_t box[4];
  std::memcpy(box, data, sizeof box);
  hdmlp::JpegDecodeMode mode;
  mode.scale = 1 + (data[8] & 7);
  mode.fast_idct = (data[8] & 8) != 0;
  mode.fancy_upsampling = (data[8] & 16) == 0;
  data += 9;
  size -= 9;
  try {
    const hdmlp::ImageHeader header = hdmlp::ReadImageHeader(data, static_cast<int64_t>(size), "fuzz.jpg", true);
    if (header.format != hdmlp::ImageFormat::kJpeg) return 0;
    const hdmlp::PixelRect bounds = hdmlp::DecodedBounds(header, mode);
    if (static_cast<int64_t>(bounds.width) * bounds.height > 4096 * 4096) return 0;  // memory, not bugs
    hdmlp::PixelRect region;
    region.x = box[0] % bounds.width;
    region.y = box[1] % bounds.height;
    region.width = 1 + box[2] % (bounds.width - region.x);
    region.height = 1 + box[3] % (bounds.height - region.y);
    hdmlp::JpegScratch scratch;
    hdmlp::ImageView view;
    hdmlp::DecodeJpegRegion(data, static_cast<int64_t>(size), header.width, header.height, mode, region, "fuzz.jpg",
                            &scratch, &view);
  } catch (const hdmlp::DecodeError&) {
  }
  return 0;
}
