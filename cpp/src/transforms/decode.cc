#include "hdmlp/transforms/decode.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include <opencv2/imgcodecs.hpp>

#include "hdmlp/util/binary_io.h"

namespace hdmlp {
namespace {

[[noreturn]] void Fail(const std::string& path, const std::string& what) {
  throw DecodeError("'" + path + "': " + what);
}

uint32_t Be16(const uint8_t* p) { return (uint32_t{p[0]} << 8) | p[1]; }
uint32_t Be32(const uint8_t* p) { return (Be16(p) << 16) | Be16(p + 2); }
uint32_t Le24(const uint8_t* p) { return (uint32_t{p[2]} << 16) | LoadLe16(p); }

bool StartsWith(const uint8_t* data, int64_t size, const char* magic, int64_t n) {
  return size >= n && std::memcmp(data, magic, static_cast<size_t>(n)) == 0;
}

std::string Hex(const uint8_t* data, int64_t size) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (int64_t i = 0; i < size && i < 8; ++i) {
    if (i) out += ' ';
    out += kDigits[data[i] >> 4];
    out += kDigits[data[i] & 15];
  }
  return out;
}

// ---- JPEG ------------------------------------------------------------------

bool IsSof(int m) {
  // SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC).
  return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

// Walks the marker segments. Reads the size from the first SOF; with
// check_complete, goes on through every scan's entropy-coded data to the EOI
// marker. libjpeg itself pads a truncated scan with grey and only warns, so
// this walk is what keeps a truncated file from becoming a half-grey image.
void ReadJpeg(const uint8_t* d, int64_t n, const std::string& path, bool check_complete, ImageHeader* h) {
  int64_t pos = 2;  // after SOI
  bool have_sof = false, have_scan = false;
  while (true) {
    // Find the next marker: 0xFF, any fill 0xFFs, then the code. Stray bytes
    // between segments are skipped as libjpeg does (it warns, PIL ignores).
    while (pos < n && d[pos] != 0xFF) ++pos;
    while (pos < n && d[pos] == 0xFF) ++pos;
    if (pos >= n) {
      if (!have_sof) Fail(path, "truncated or corrupt JPEG: no frame header (SOF) before the end of the file");
      Fail(path, "truncated JPEG: the file ends before its end-of-image marker (EOI)");
    }
    const int m = d[pos++];
    if (m == 0xD9) {  // EOI
      if (!have_scan) Fail(path, "corrupt JPEG: end-of-image marker before any image data");
      return;
    }
    if (m == 0x00 || m == 0x01 || m == 0xD8 || (m >= 0xD0 && m <= 0xD7)) continue;  // no length
    if (pos + 2 > n) Fail(path, "truncated JPEG: the file ends inside a marker segment");
    const int64_t len = Be16(d + pos);
    if (len < 2) Fail(path, "corrupt JPEG: a marker segment has length " + std::to_string(len));
    if (pos + len > n) Fail(path, "truncated JPEG: the file ends inside a marker segment");
    if (IsSof(m) && !have_sof) {
      if (len < 8) Fail(path, "corrupt JPEG: frame header (SOF) too short");
      h->height = static_cast<int>(Be16(d + pos + 3));
      h->width = static_cast<int>(Be16(d + pos + 5));
      h->jpeg_components = d[pos + 7];
      if (h->height == 0) {
        Fail(path, "unsupported JPEG: the height is given by a DNL marker after the first scan");
      }
      if (h->width == 0) Fail(path, "corrupt JPEG: the frame header (SOF) gives a width of 0");
      have_sof = true;
      if (!check_complete) return;
    }
    pos += len;
    if (m == 0xDA) {  // SOS: entropy-coded data follows, up to the next real marker
      if (!have_sof) Fail(path, "corrupt JPEG: scan (SOS) before the frame header (SOF)");
      have_scan = true;
      while (true) {
        const void* ff = std::memchr(d + pos, 0xFF, static_cast<size_t>(n - pos));
        if (ff == nullptr) Fail(path, "truncated JPEG: the file ends inside the compressed image data");
        pos = static_cast<const uint8_t*>(ff) - d;
        int64_t q = pos + 1;
        while (q < n && d[q] == 0xFF) ++q;  // fill bytes
        if (q >= n) Fail(path, "truncated JPEG: the file ends inside the compressed image data");
        const int code = d[q];
        if (code == 0x00 || (code >= 0xD0 && code <= 0xD7)) {  // stuffed byte or restart marker
          pos = q + 1;
          continue;
        }
        break;  // a real marker starts at pos
      }
    }
  }
}

// ---- PNG -------------------------------------------------------------------

void ReadPng(const uint8_t* d, int64_t n, const std::string& path, bool check_complete, ImageHeader* h) {
  if (n < 33 || std::memcmp(d + 12, "IHDR", 4) != 0 || Be32(d + 8) != 13) {
    Fail(path, n < 33 ? "truncated PNG: the file ends inside its header" : "corrupt PNG: no IHDR chunk");
  }
  const uint32_t w = Be32(d + 16), hh = Be32(d + 20);
  if (w == 0 || hh == 0 || w > 0x7fffffffu || hh > 0x7fffffffu) {
    Fail(path, "corrupt PNG: invalid size " + std::to_string(w) + "x" + std::to_string(hh));
  }
  h->width = static_cast<int>(w);
  h->height = static_cast<int>(hh);
  h->gray16 = d[24] == 16 && d[25] == 0;
  if (!check_complete) return;
  // Chunk walk: every chunk up to the last IDAT must be complete. (A missing
  // IEND after complete image data is left to the decoder.)
  int64_t pos = 8;
  bool seen_idat = false;
  while (pos + 8 <= n) {
    const int64_t len = Be32(d + pos);
    const bool idat = std::memcmp(d + pos + 4, "IDAT", 4) == 0;
    if (std::memcmp(d + pos + 4, "IEND", 4) == 0) break;
    if (pos + 12 + len > n) {
      if (idat || !seen_idat) Fail(path, "truncated PNG: the file ends inside the image data");
      break;
    }
    seen_idat = seen_idat || idat;
    pos += 12 + len;
  }
  if (!seen_idat) Fail(path, "truncated PNG: the file ends before the image data (no IDAT chunk)");
}

// ---- BMP, TIFF, WebP, PNM --------------------------------------------------

void ReadBmp(const uint8_t* d, int64_t n, const std::string& path, ImageHeader* h) {
  if (n < 26) Fail(path, "truncated BMP: the file ends inside its header");
  const uint32_t dib = LoadLe32(d + 14);
  int64_t w, hh;
  if (dib == 12) {
    w = LoadLe16(d + 18);
    hh = LoadLe16(d + 20);
  } else {
    w = static_cast<int32_t>(LoadLe32(d + 18));
    hh = static_cast<int32_t>(LoadLe32(d + 22));
    if (hh < 0) hh = -hh;  // top-down bitmap
  }
  if (w <= 0 || hh <= 0 || w > 0x7fffffff || hh > 0x7fffffff) {
    Fail(path, "corrupt BMP: invalid size " + std::to_string(w) + "x" + std::to_string(hh));
  }
  h->width = static_cast<int>(w);
  h->height = static_cast<int>(hh);
}

void ReadTiff(const uint8_t* d, int64_t n, const std::string& path, ImageHeader* h) {
  const bool le = d[0] == 'I';
  auto u16 = [&](int64_t at) { return le ? LoadLe16(d + at) : Be16(d + at); };
  auto u32 = [&](int64_t at) { return le ? LoadLe32(d + at) : Be32(d + at); };
  auto u64 = [&](int64_t at) {
    const uint64_t a = u32(at), b = u32(at + 4);
    return le ? (b << 32) | a : (a << 32) | b;
  };
  const bool big = u16(2) == 43;  // BigTIFF
  const int64_t first = big ? 16 : 8;
  if (n < first) Fail(path, "truncated TIFF: the file ends inside its header");
  const uint64_t ifd = big ? u64(8) : u32(4);
  const int64_t count_size = big ? 8 : 2, entry_size = big ? 20 : 12;
  // Written so that no sum can wrap around (found by tests/fuzz/decode_fuzz.cc).
  if (ifd < static_cast<uint64_t>(first) || ifd > static_cast<uint64_t>(n - count_size)) {
    Fail(path, "truncated or corrupt TIFF: the first image directory is outside the file");
  }
  const uint64_t count = big ? u64(static_cast<int64_t>(ifd)) : u16(static_cast<int64_t>(ifd));
  if (count > (static_cast<uint64_t>(n) - ifd - count_size) / entry_size) {
    Fail(path, "truncated TIFF: the file ends inside the first image directory");
  }
  int64_t w = -1, hh = -1, bits = 1, samples = 1;
  for (uint64_t i = 0; i < count; ++i) {
    const int64_t e = static_cast<int64_t>(ifd + count_size + i * entry_size);
    const uint32_t tag = u16(e), type = u16(e + 2);
    if ((tag == 258 || tag == 277) && type == 3) {  // BitsPerSample (first value), SamplesPerPixel
      (tag == 258 ? bits : samples) = u16(e + (big ? 12 : 8));
      continue;
    }
    if (tag != 256 && tag != 257) continue;
    const int64_t v = e + (big ? 12 : 8);
    int64_t value;
    if (type == 3) {
      value = u16(v);  // SHORT
    } else if (type == 4) {
      value = u32(v);  // LONG
    } else if (type == 16 && big) {  // LONG8: only a BigTIFF entry has room for it (found by decode_fuzz)
      value = static_cast<int64_t>(std::min<uint64_t>(u64(v), uint64_t{1} << 40));
    } else {
      Fail(path, "corrupt TIFF: image size tag of type " + std::to_string(type));
    }
    (tag == 256 ? w : hh) = value;
  }
  if (w <= 0 || hh <= 0 || w > 0x7fffffff || hh > 0x7fffffff) {
    Fail(path, "corrupt TIFF: the first image directory has no valid width and height");
  }
  h->width = static_cast<int>(w);
  h->height = static_cast<int>(hh);
  h->gray16 = bits == 16 && samples == 1;
}

void ReadWebp(const uint8_t* d, int64_t n, const std::string& path, bool check_complete, ImageHeader* h) {
  if (n < 30) Fail(path, "truncated WebP: the file ends inside its header");
  if (check_complete && static_cast<int64_t>(LoadLe32(d + 4)) + 8 > n) {
    Fail(path, "truncated WebP: the file has " + std::to_string(n) + " bytes, its header announces " +
                   std::to_string(LoadLe32(d + 4) + 8ull));
  }
  const uint8_t* c = d + 12;
  if (std::memcmp(c, "VP8 ", 4) == 0) {
    if (d[23] != 0x9d || d[24] != 0x01 || d[25] != 0x2a) Fail(path, "corrupt WebP: bad VP8 frame header");
    h->width = static_cast<int>(LoadLe16(d + 26) & 0x3fff);
    h->height = static_cast<int>(LoadLe16(d + 28) & 0x3fff);
  } else if (std::memcmp(c, "VP8L", 4) == 0) {
    if (d[20] != 0x2f) Fail(path, "corrupt WebP: bad VP8L signature");
    const uint32_t bits = LoadLe32(d + 21);
    h->width = static_cast<int>((bits & 0x3fff) + 1);
    h->height = static_cast<int>(((bits >> 14) & 0x3fff) + 1);
  } else if (std::memcmp(c, "VP8X", 4) == 0) {
    h->width = static_cast<int>(Le24(d + 24) + 1);
    h->height = static_cast<int>(Le24(d + 27) + 1);
  } else {
    Fail(path, "unsupported WebP variant (chunk '" + std::string(reinterpret_cast<const char*>(c), 4) + "')");
  }
  if (h->width <= 0 || h->height <= 0) Fail(path, "corrupt WebP: invalid size");
}

void ReadPnm(const uint8_t* d, int64_t n, const std::string& path, bool check_complete, ImageHeader* h) {
  const int kind = d[1] - '0';  // 1..6
  int64_t pos = 2;
  int64_t values[3] = {0, 0, 1};
  const int needed = (kind == 1 || kind == 4) ? 2 : 3;
  for (int i = 0; i < needed; ++i) {
    while (pos < n) {  // whitespace and comments
      if (d[pos] == '#') {
        while (pos < n && d[pos] != '\n' && d[pos] != '\r') ++pos;
      } else if (d[pos] == ' ' || d[pos] == '\t' || d[pos] == '\n' || d[pos] == '\r' || d[pos] == '\v' ||
                 d[pos] == '\f') {
        ++pos;
      } else {
        break;
      }
    }
    if (pos >= n) Fail(path, "truncated PNM: the file ends inside its header");
    if (d[pos] < '0' || d[pos] > '9') Fail(path, "corrupt PNM: non-numeric header");
    int64_t v = 0;
    while (pos < n && d[pos] >= '0' && d[pos] <= '9') {
      v = v * 10 + (d[pos++] - '0');
      if (v > 0x7fffffff) Fail(path, "corrupt PNM: header value out of range");
    }
    values[i] = v;
  }
  if (values[0] <= 0 || values[1] <= 0 || values[2] <= 0 || values[2] > 65535) {
    Fail(path, "corrupt PNM: invalid header " + std::to_string(values[0]) + " " + std::to_string(values[1]) +
                   " " + std::to_string(values[2]));
  }
  h->width = static_cast<int>(values[0]);
  h->height = static_cast<int>(values[1]);
  h->pnm_kind = kind;
  h->pnm_maxval = static_cast<int>(values[2]);
  h->pnm_data = std::min(pos + 1, n);  // one whitespace byte ends the header
  if (check_complete && kind >= 4 && h->width * int64_t{h->height} <= kMaxImagePixels) {
    // Binary variants: one whitespace byte, then the raster.
    const int64_t w = h->width, hh = h->height, bytes_per_value = values[2] > 255 ? 2 : 1;
    const int64_t raster = kind == 4 ? (w + 7) / 8 * hh : w * hh * (kind == 6 ? 3 : 1) * bytes_per_value;
    if (pos + 1 + raster > n) {
      Fail(path, "truncated PNM: the file has " + std::to_string(n) + " bytes, its header announces " +
                     std::to_string(pos + 1 + raster));
    }
  }
}

// PBM/PGM/PPM as PIL decodes them and convert("RGB") converts them: samples
// scaled from maxval to 255 (or, for PGM with maxval > 255, to 65535 and
// then clipped at 255, PIL's mode I); PBM 1 is black.
void DecodePnm(const uint8_t* d, int64_t n, const ImageHeader& h, const std::string& path, cv::Mat* out) {
  const int kind = h.pnm_kind, w = h.width, hh = h.height, maxval = h.pnm_maxval;
  const int channels = (kind == 3 || kind == 6) ? 3 : 1;
  const bool bitmap = kind == 1 || kind == 4;
  const double out_max = (!bitmap && channels == 1 && maxval > 255) ? 65535.0 : 255.0;
  out->create(hh, w, CV_8UC3);
  int64_t pos = h.pnm_data;
  auto scale = [&](int64_t v) -> uint8_t {
    if (bitmap) return v ? 0 : 255;
    if (v > maxval) Fail(path, "corrupt PNM: a sample is larger than maxval " + std::to_string(maxval));
    const double s = (maxval == out_max) ? double(v) : std::min(out_max, RoundHalfEven(double(v) / maxval * out_max));
    return static_cast<uint8_t>(std::min(255.0, s));
  };
  auto next_ascii = [&]() -> int64_t {  // plain formats: decimal tokens (P1: single digits)
    while (pos < n && (d[pos] == ' ' || d[pos] == '\t' || d[pos] == '\n' || d[pos] == '\r' || d[pos] == '\v' ||
                       d[pos] == '\f' || d[pos] == '#')) {
      if (d[pos] == '#') {
        while (pos < n && d[pos] != '\n' && d[pos] != '\r') ++pos;
      } else {
        ++pos;
      }
    }
    if (pos >= n) Fail(path, "truncated PNM: the file ends before its last sample");
    if (d[pos] < '0' || d[pos] > '9') Fail(path, "corrupt PNM: a sample is not a number");
    if (kind == 1) return d[pos++] - '0';
    int64_t v = 0;
    while (pos < n && d[pos] >= '0' && d[pos] <= '9' && v <= 65535) v = v * 10 + (d[pos++] - '0');
    return v;
  };
  const int bytes_per_sample = maxval > 255 ? 2 : 1;
  for (int y = 0; y < hh; ++y) {
    uint8_t* o = out->ptr<uint8_t>(y);
    const int64_t row_start = pos;
    for (int x = 0; x < w; ++x) {
      uint8_t rgb[3];
      for (int c = 0; c < channels; ++c) {
        int64_t v;
        if (kind <= 3) {
          v = next_ascii();
        } else if (kind == 4) {
          v = (d[row_start + x / 8] >> (7 - x % 8)) & 1;
        } else {
          const uint8_t* p = d + pos;
          v = bytes_per_sample == 2 ? (int64_t{p[0]} << 8) | p[1] : p[0];
          pos += bytes_per_sample;
        }
        rgb[c] = scale(v);
      }
      if (channels == 1) rgb[1] = rgb[2] = rgb[0];
      o[3 * x] = rgb[2];  // BGR
      o[3 * x + 1] = rgb[1];
      o[3 * x + 2] = rgb[0];
    }
    if (kind == 4) pos = row_start + (w + 7) / 8;
  }
}

}  // namespace

double RoundHalfEven(double x) {
  const double f = std::floor(x);
  const double diff = x - f;
  if (diff > 0.5) return f + 1;
  if (diff < 0.5) return f;
  return std::fmod(f, 2.0) == 0 ? f : f + 1;
}

const char* ImageFormatName(ImageFormat format) {
  switch (format) {
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kBmp: return "BMP";
    case ImageFormat::kTiff: return "TIFF";
    case ImageFormat::kWebp: return "WebP";
    case ImageFormat::kPnm: return "PNM";
  }
  return "?";
}

ImageHeader ReadImageHeader(const uint8_t* d, int64_t n, const std::string& path, bool check_complete) {
  if (n <= 0) Fail(path, "empty file (0 bytes): not an image");
  ImageHeader h;
  if (StartsWith(d, n, "\xFF\xD8\xFF", 3)) {
    h.format = ImageFormat::kJpeg;
    ReadJpeg(d, n, path, check_complete, &h);
  } else if (StartsWith(d, n, "\x89PNG\r\n\x1a\n", 8)) {
    h.format = ImageFormat::kPng;
    ReadPng(d, n, path, check_complete, &h);
  } else if (StartsWith(d, n, "BM", 2)) {
    h.format = ImageFormat::kBmp;
    ReadBmp(d, n, path, &h);
  } else if (StartsWith(d, n, "II*\0", 4) || StartsWith(d, n, "MM\0*", 4) || StartsWith(d, n, "II+\0", 4) ||
             StartsWith(d, n, "MM\0+", 4)) {
    h.format = ImageFormat::kTiff;
    ReadTiff(d, n, path, &h);
  } else if (n >= 12 && StartsWith(d, n, "RIFF", 4) && std::memcmp(d + 8, "WEBP", 4) == 0) {
    h.format = ImageFormat::kWebp;
    ReadWebp(d, n, path, check_complete, &h);
  } else if (n >= 2 && d[0] == 'P' && d[1] >= '1' && d[1] <= '6') {
    h.format = ImageFormat::kPnm;
    ReadPnm(d, n, path, check_complete, &h);
  } else {
    std::string what = "unsupported image format";
    if (StartsWith(d, n, "GIF8", 4)) {
      what = "unsupported image format (GIF)";
    } else if (n >= 12 && std::memcmp(d + 4, "ftyp", 4) == 0) {
      what = "unsupported image format (HEIF/AVIF)";
    } else if (StartsWith(d, n, "\xFF\xD8", 2)) {
      what = "corrupt JPEG: no marker after the start-of-image marker";
    }
    Fail(path, what + ": hdmlp decodes JPEG, PNG, BMP, TIFF, WebP and PBM/PGM/PPM files (first bytes: " +
                   Hex(d, n) + ")");
  }
  if (h.width <= 0 || h.height <= 0) {
    Fail(path, std::string("corrupt ") + ImageFormatName(h.format) + ": the header gives a size of " +
                   std::to_string(h.width) + "x" + std::to_string(h.height));
  }
  const int64_t pixels = int64_t{h.width} * h.height;
  if (pixels > kMaxImagePixels) {
    Fail(path, std::string(ImageFormatName(h.format)) + " header claims " + std::to_string(h.width) + "x" +
                   std::to_string(h.height) + " = " + std::to_string(pixels) +
                   " pixels, more than the limit of " + std::to_string(kMaxImagePixels) +
                   " (PIL's decompression-bomb limit): refused without decoding");
  }
  return h;
}

PixelRect DecodedBounds(const ImageHeader& header, const JpegDecodeMode& mode) {
  const int scale = header.format == ImageFormat::kJpeg ? mode.scale : 8;
  return PixelRect{0, 0, JpegScaledSize(header.width, scale), JpegScaledSize(header.height, scale)};
}

PixelRect DecodedBounds(const ImageHeader& header, int reduce) { return DecodedBounds(header, ReducedMode(reduce)); }

bool JpegScaleSupported(const ImageHeader& header, int scale) {
  if (scale < 1 || scale > 8) return false;
  return header.jpeg_components != 4 || scale == 1 || scale == 2 || scale == 4 || scale == 8;
}

namespace {

// The whole image through OpenCV (PNM: hdmlp's own decoder) into *out.
void DecodeWhole(const uint8_t* data, int64_t size, const ImageHeader& header, int reduce, const std::string& path,
                 cv::Mat* out) {  // reduce: 1, 2, 4 or 8
  if (header.format == ImageFormat::kPnm) {
    if (header.pnm_kind >= 4) {  // binary: ReadImageHeader(check_complete) checked the length
      const int64_t w = header.width, h = header.height;
      const int64_t need = header.pnm_kind == 4 ? (w + 7) / 8 * h
                                                : w * h * (header.pnm_kind == 6 ? 3 : 1) *
                                                      (header.pnm_maxval > 255 ? 2 : 1);
      if (header.pnm_data + need > size) Fail(path, "truncated PNM: the file ends inside the image data");
    }
    DecodePnm(data, size, header, path, out);
    return;
  }
  int flags = cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION;
  if (header.gray16) flags = cv::IMREAD_GRAYSCALE | cv::IMREAD_ANYDEPTH | cv::IMREAD_IGNORE_ORIENTATION;
  const PixelRect want = DecodedBounds(header, reduce);
  if (reduce > 1 && header.format == ImageFormat::kJpeg) {
    flags = (reduce == 2   ? cv::IMREAD_REDUCED_COLOR_2
             : reduce == 4 ? cv::IMREAD_REDUCED_COLOR_4
                           : cv::IMREAD_REDUCED_COLOR_8) |
            cv::IMREAD_IGNORE_ORIENTATION;
  }
  const cv::Mat buf(1, static_cast<int>(size), CV_8UC1, const_cast<uint8_t*>(data));
  bool ok = false;
  try {
    // OpenCV 4.6 leaves *dst untouched when the header is refused and returns
    // *dst anyway, so only an empty Mat tells failure reliably: decode into
    // a fresh one.
    out->release();
    ok = !cv::imdecode(buf, flags, out).empty();
  } catch (const cv::Exception&) {
    ok = false;
  }
  const char* name = ImageFormatName(header.format);
  if (!ok) Fail(path, std::string("corrupt or truncated ") + name + ": the decoder failed");
  if (header.gray16 && out->type() == CV_16UC1 && out->cols == want.width && out->rows == want.height) {
    // PIL's I;16 -> RGB: values above 255 clip (no rescaling).
    const cv::Mat gray = *out;
    cv::Mat rgb(gray.rows, gray.cols, CV_8UC3);
    for (int y = 0; y < gray.rows; ++y) {
      const uint16_t* g = gray.ptr<uint16_t>(y);
      uint8_t* o = rgb.ptr<uint8_t>(y);
      for (int x = 0; x < gray.cols; ++x) o[3 * x] = o[3 * x + 1] = o[3 * x + 2] = g[x] > 255 ? 255 : g[x];
    }
    *out = rgb;
  }
  if (out->type() != CV_8UC3 || out->cols != want.width || out->rows != want.height) {
    Fail(path, std::string("corrupt ") + name + ": decoded to " + std::to_string(out->cols) + "x" +
                   std::to_string(out->rows) + " but its header says " + std::to_string(want.width) + "x" +
                   std::to_string(want.height));
  }
}

}  // namespace

void DecodeImage(const uint8_t* data, int64_t size, const ImageHeader& header, int reduce, const PixelRect& region,
                 const std::string& path, DecodedImage* out) {
  DecodeImage(data, size, header, ReducedMode(reduce), region, path, out);
}

void DecodeImage(const uint8_t* data, int64_t size, const ImageHeader& header, const JpegDecodeMode& mode,
                 const PixelRect& region, const std::string& path, DecodedImage* out) {
  const PixelRect bounds = DecodedBounds(header, mode);
  if (!IsInside(region, bounds.width, bounds.height)) {
    throw std::logic_error("DecodeImage: region outside the image");
  }
  const bool jpeg = header.format == ImageFormat::kJpeg;
  if (jpeg && DecodeJpegRegion(data, size, header.width, header.height, mode, region, path, &out->jpeg,
                               &out->view) == JpegDecodeStatus::kDecoded) {
    return;
  }
  // OpenCV: CMYK/YCCK JPEGs at 1/1, 1/2, 1/4 or 1/8, the other formats whole.
  if (jpeg && !JpegScaleSupported(header, mode.scale)) {
    throw std::logic_error("DecodeImage: a CMYK or YCCK JPEG decodes at 1/1, 1/2, 1/4 or 1/8 only");
  }
  DecodeWhole(data, size, header, jpeg ? 8 / mode.scale : 1, path, &out->mat);
  const ImageView whole{out->mat.data, out->mat.cols, out->mat.rows, static_cast<int64_t>(out->mat.step)};
  out->view = SubView(whole, region);
}

}  // namespace hdmlp
