#include "hdmlp/transforms/jpeg_decode.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <stdexcept>
#include <string>

#include <jpeglib.h>

#include "hdmlp/transforms/decode.h"

namespace hdmlp {
namespace {

// libjpeg reports a fatal error by calling error_exit, which must not
// return: it longjmps back to DecodeJpegRegion, which destroys the
// decompressor and throws. No C++ object lives in the frames it jumps over
// (only libjpeg's).
struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void ErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings (corrupt data libjpeg decodes anyway, extra bytes between
// markers) are silent, as PIL silences them.
void EmitMessage(j_common_ptr, int) {}

// Destroys the decompressor on every way out of DecodeJpegRegion. Built
// before setjmp, in the frame the longjmp returns to, so it is never
// skipped.
class DecompressGuard {
 public:
  explicit DecompressGuard(jpeg_decompress_struct* cinfo) : cinfo_(cinfo) {}
  ~DecompressGuard() { jpeg_destroy_decompress(cinfo_); }
  DecompressGuard(const DecompressGuard&) = delete;
  DecompressGuard& operator=(const DecompressGuard&) = delete;

 private:
  jpeg_decompress_struct* cinfo_;
};

}  // namespace

JpegDecodeMode ReducedMode(int reduce) {
  if (reduce != 1 && reduce != 2 && reduce != 4 && reduce != 8) {
    throw std::logic_error("ReducedMode: reduce must be 1, 2, 4 or 8");
  }
  JpegDecodeMode mode;
  mode.scale = 8 / reduce;
  return mode;
}

JpegDecodeMode FastJpegMode(int scale) {
  JpegDecodeMode mode;
  mode.scale = scale;
  mode.fast_idct = true;
  mode.fancy_upsampling = false;
  return mode;
}

// libjpeg-turbo 2.1 has SIMD code for the 8x8, 4x4, 2x2 (and trivial 1x1)
// IDCTs only; its 3x3, 5x5, 6x6 and 7x7 ones (and the 10x10 to 14x14 ones
// that upscale the chroma of a 4:2:0 image at those scales) are plain C. On
// the ImageNet-like folder a whole decode at 7/8, 6/8 and 5/8 costs 42%,
// 24% and 14% more CPU than at 8/8, and one at 3/8 6% more than at 4/8
// (docs/transforms.md), more than the smaller resize saves after it.
bool FastJpegScaleUseful(int scale) { return scale == 1 || scale == 2 || scale == 4; }

JpegDecodeStatus DecodeJpegRegion(const uint8_t* data, int64_t size, int width, int height, int reduce,
                                  const PixelRect& region, const std::string& path, JpegScratch* scratch,
                                  ImageView* view) {
  return DecodeJpegRegion(data, size, width, height, ReducedMode(reduce), region, path, scratch, view);
}

JpegDecodeStatus DecodeJpegRegion(const uint8_t* data, int64_t size, int width, int height,
                                  const JpegDecodeMode& mode, const PixelRect& region, const std::string& path,
                                  JpegScratch* scratch, ImageView* view) {
  if (mode.scale < 1 || mode.scale > 8) throw std::logic_error("DecodeJpegRegion: scale must be 1..8 (eighths)");
  const int out_w = JpegScaledSize(width, mode.scale), out_h = JpegScaledSize(height, mode.scale);
  if (!IsInside(region, out_w, out_h)) {
    throw std::logic_error("DecodeJpegRegion: region outside the image");
  }
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = ErrorExit;
  err.pub.emit_message = EmitMessage;
  err.message[0] = '\0';
  jpeg_create_decompress(&cinfo);
  DecompressGuard guard(&cinfo);
  if (setjmp(err.jump)) {
    throw DecodeError("'" + path + "': corrupt or truncated JPEG: the decoder failed (" + err.message + ")");
  }
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  if (cinfo.num_components == 4) return JpegDecodeStatus::kFourChannel;
  if (static_cast<int>(cinfo.image_width) != width || static_cast<int>(cinfo.image_height) != height) {
    throw DecodeError("'" + path + "': corrupt JPEG: libjpeg reads its size as " +
                      std::to_string(cinfo.image_width) + "x" + std::to_string(cinfo.image_height) +
                      " but its first frame header says " + std::to_string(width) + "x" + std::to_string(height));
  }
  cinfo.out_color_space = JCS_EXT_BGR;
  cinfo.scale_num = static_cast<unsigned int>(mode.scale);
  cinfo.scale_denom = 8;
  cinfo.dct_method = mode.fast_idct ? JDCT_IFAST : JDCT_ISLOW;
  cinfo.do_fancy_upsampling = mode.fancy_upsampling ? TRUE : FALSE;
  jpeg_start_decompress(&cinfo);
  if (static_cast<int>(cinfo.output_width) != out_w || static_cast<int>(cinfo.output_height) != out_h ||
      cinfo.output_components != 3) {
    throw DecodeError("'" + path + "': corrupt JPEG: libjpeg decodes it to " + std::to_string(cinfo.output_width) +
                      "x" + std::to_string(cinfo.output_height) + "x" + std::to_string(cinfo.output_components) +
                      " instead of " + std::to_string(out_w) + "x" + std::to_string(out_h) + "x3");
  }
  // The band of columns to decode: the region and a margin, as libjpeg
  // aligns it (its left edge moves down to an iMCU boundary).
  JDIMENSION band_x = static_cast<JDIMENSION>(region.x > kJpegCropMargin ? region.x - kJpegCropMargin : 0);
  JDIMENSION band_w =
      static_cast<JDIMENSION>(std::min(out_w, region.x + region.width + kJpegCropMargin)) - band_x;
  if (band_x > 0 || static_cast<int>(band_w) < out_w) jpeg_crop_scanline(&cinfo, &band_x, &band_w);
  if (region.y > 0) jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(region.y));
  const int64_t stride = int64_t{band_w} * 3;
  scratch->pixels.resize(static_cast<size_t>(stride * region.height));
  uint8_t* base = scratch->pixels.data();
  const JDIMENSION end = static_cast<JDIMENSION>(region.y + region.height);
  JSAMPROW rows[16];
  while (cinfo.output_scanline < end) {
    const JDIMENSION first = cinfo.output_scanline;
    const JDIMENSION n = std::min<JDIMENSION>(16, end - first);
    for (JDIMENSION i = 0; i < n; ++i) rows[i] = base + (first - region.y + i) * stride;
    if (jpeg_read_scanlines(&cinfo, rows, n) == 0) {
      throw DecodeError("'" + path + "': corrupt or truncated JPEG: the decoder stopped at row " +
                        std::to_string(first));
    }
  }
  // Rows below the region are never decoded: abort instead of finishing.
  jpeg_abort_decompress(&cinfo);
  *view = ImageView{base + int64_t{region.x - static_cast<int>(band_x)} * 3, region.width, region.height, stride};
  return JpegDecodeStatus::kDecoded;
}

}  // namespace hdmlp
