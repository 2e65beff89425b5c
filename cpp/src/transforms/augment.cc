#include "hdmlp/transforms/augment.h"

#include <cmath>

#include "hdmlp/transforms/libm.h"

namespace hdmlp {

const char* AugmentOpName(AugmentOp op) {
  switch (op) {
    case AugmentOp::kIdentity: return "Identity";
    case AugmentOp::kShearX: return "ShearX";
    case AugmentOp::kShearY: return "ShearY";
    case AugmentOp::kTranslateX: return "TranslateX";
    case AugmentOp::kTranslateY: return "TranslateY";
    case AugmentOp::kRotate: return "Rotate";
    case AugmentOp::kBrightness: return "Brightness";
    case AugmentOp::kColor: return "Color";
    case AugmentOp::kContrast: return "Contrast";
    case AugmentOp::kSharpness: return "Sharpness";
    case AugmentOp::kPosterize: return "Posterize";
    case AugmentOp::kSolarize: return "Solarize";
    case AugmentOp::kAutoContrast: return "AutoContrast";
    case AugmentOp::kEqualize: return "Equalize";
    case AugmentOp::kInvert: return "Invert";
  }
  return "?";
}

bool AugmentCommutesWithFlips(AugmentOp op) {
  switch (op) {
    case AugmentOp::kShearX:
    case AugmentOp::kShearY:
    case AugmentOp::kTranslateX:
    case AugmentOp::kTranslateY:
    case AugmentOp::kRotate:
    case AugmentOp::kSharpness:
      return false;
    default:
      return true;
  }
}

TransformFilter FilterOf(Interpolation interpolation) {
  switch (interpolation) {
    case Interpolation::kBilinear: return TransformFilter::kBilinear;
    case Interpolation::kBicubic: return TransformFilter::kBicubic;
    default: return TransformFilter::kNearest;
  }
}

void ApplyAugmentOp(AugmentOp op, double magnitude, TransformFilter filter, const uint8_t fill_rgb[3],
                    const ImageView& in, const MutableImageView& out) {
  constexpr double kRadToDeg = 180.0 / M_PI;  // Python's math.degrees
  double m[6];
  switch (op) {
    case AugmentOp::kShearX:
      InverseAffineMatrix(0, 0, 0.0, 0, 0, 1.0, libm::Atan(magnitude) * kRadToDeg, 0.0, m);
      AffineTransform(in, m, filter, fill_rgb, out);
      return;
    case AugmentOp::kShearY:
      InverseAffineMatrix(0, 0, 0.0, 0, 0, 1.0, 0.0, libm::Atan(magnitude) * kRadToDeg, m);
      AffineTransform(in, m, filter, fill_rgb, out);
      return;
    case AugmentOp::kTranslateX:
    case AugmentOp::kTranslateY: {
      const double t = std::trunc(magnitude);  // int(magnitude)
      const bool x = op == AugmentOp::kTranslateX;
      InverseAffineMatrix(in.width * 0.5, in.height * 0.5, 0.0, x ? t : 0, x ? 0 : t, 1.0, 0.0, 0.0, m);
      AffineTransform(in, m, filter, fill_rgb, out);
      return;
    }
    case AugmentOp::kRotate:
      Rotate(in, PlanRotation(in.width, in.height, magnitude, false, false, 0, 0), filter, fill_rgb, out);
      return;
    case AugmentOp::kBrightness: AdjustBrightness(in, 1.0 + magnitude, out); return;
    case AugmentOp::kColor: AdjustSaturation(in, 1.0 + magnitude, out); return;
    case AugmentOp::kContrast: AdjustContrast(in, 1.0 + magnitude, out); return;
    case AugmentOp::kSharpness: AdjustSharpness(in, 1.0 + magnitude, out); return;
    case AugmentOp::kPosterize: Posterize(in, static_cast<int>(magnitude), out); return;
    case AugmentOp::kSolarize: Solarize(in, magnitude, out); return;
    case AugmentOp::kAutoContrast: AutoContrast(in, out); return;
    case AugmentOp::kEqualize: Equalize(in, out); return;
    case AugmentOp::kInvert: Invert(in, out); return;
    case AugmentOp::kIdentity: break;
  }
  for (int y = 0; y < in.height; ++y) {
    std::copy(in.data + y * in.stride, in.data + y * in.stride + int64_t{in.width} * 3, out.data + y * out.stride);
  }
}

double TorchLinspace(double start, double end, int steps, int index) {
  const float s = static_cast<float>(start), e = static_cast<float>(end);
  if (steps == 1) return s;
  const float step = (e - s) / static_cast<float>(steps - 1);
  if (index < steps / 2) return std::fma(step, static_cast<float>(index), s);
  return std::fma(-step, static_cast<float>(steps - index - 1), e);
}

double StandardMagnitude(AugmentOp op, int bin, int num_bins, int width, int height, bool* signed_op) {
  *signed_op = true;
  switch (op) {
    case AugmentOp::kShearX:
    case AugmentOp::kShearY: return TorchLinspace(0.0, 0.3, num_bins, bin);
    case AugmentOp::kTranslateX: return TorchLinspace(0.0, 150.0 / 331.0 * width, num_bins, bin);
    case AugmentOp::kTranslateY: return TorchLinspace(0.0, 150.0 / 331.0 * height, num_bins, bin);
    case AugmentOp::kRotate: return TorchLinspace(0.0, 30.0, num_bins, bin);
    case AugmentOp::kBrightness:
    case AugmentOp::kColor:
    case AugmentOp::kContrast:
    case AugmentOp::kSharpness: return TorchLinspace(0.0, 0.9, num_bins, bin);
    default: break;
  }
  *signed_op = false;
  switch (op) {
    case AugmentOp::kPosterize: {
      // 8 - (arange(num_bins) / ((num_bins - 1) / 4)).round().int(), in float32
      const float q = static_cast<float>(bin) / static_cast<float>((num_bins - 1) / 4.0);
      return 8 - static_cast<int>(std::nearbyint(q));
    }
    case AugmentOp::kSolarize: return TorchLinspace(255.0, 0.0, num_bins, bin);
    default: return 0.0;
  }
}

}  // namespace hdmlp
