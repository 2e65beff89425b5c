// ImageView and PixelRect: how the transforms pass pixels around without
// owning them.
//
// An ImageView points at 8-bit, 3-channel pixels someone else owns (a decoded
// image, a scratch buffer); it is valid only as long as that memory is. A
// PixelRect names a rectangle of an image in its pixel coordinates. Both are
// plain values, safe to copy and to share between threads.
#ifndef HDMLP_TRANSFORMS_IMAGE_VIEW_H_
#define HDMLP_TRANSFORMS_IMAGE_VIEW_H_

#include <cstdint>

namespace hdmlp {

// A read-only 3-channel 8-bit image: `height` rows of width * 3 bytes,
// `stride` bytes apart.
struct ImageView {
  const uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  int64_t stride = 0;
};

// Columns [x, x + width) and rows [y, y + height) of an image.
struct PixelRect {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
};

// Whether r is a non-empty rectangle inside a width x height image.
inline bool IsInside(const PixelRect& r, int width, int height) {
  return r.x >= 0 && r.y >= 0 && r.width >= 1 && r.height >= 1 && r.x + r.width <= width &&
         r.y + r.height <= height;
}

// The part of v that r names (r must lie inside v).
inline ImageView SubView(const ImageView& v, const PixelRect& r) {
  return ImageView{v.data + r.y * v.stride + int64_t{r.x} * 3, r.width, r.height, v.stride};
}

}  // namespace hdmlp

#endif  // HDMLP_TRANSFORMS_IMAGE_VIEW_H_
