#include "hdmlp/transforms/op_registry.h"

#include "hdmlp/transforms/ops/auto_augment.h"
#include "hdmlp/transforms/ops/center_crop.h"
#include "hdmlp/transforms/ops/color_jitter.h"
#include "hdmlp/transforms/ops/gaussian_blur.h"
#include "hdmlp/transforms/ops/grayscale.h"
#include "hdmlp/transforms/ops/img_decode.h"
#include "hdmlp/transforms/ops/normalize.h"
#include "hdmlp/transforms/ops/pad.h"
#include "hdmlp/transforms/ops/rand_augment.h"
#include "hdmlp/transforms/ops/random_affine.h"
#include "hdmlp/transforms/ops/random_crop.h"
#include "hdmlp/transforms/ops/random_erasing.h"
#include "hdmlp/transforms/ops/random_flip.h"
#include "hdmlp/transforms/ops/random_resized_crop.h"
#include "hdmlp/transforms/ops/random_rotation.h"
#include "hdmlp/transforms/ops/resize.h"
#include "hdmlp/transforms/ops/to_tensor.h"
#include "hdmlp/transforms/ops/trivial_augment_wide.h"

namespace hdmlp {
namespace {

struct Entry {
  const char* name;
  OpFactory make;
};

// One line per op: its name in specs (torchvision's class name) and factory.
constexpr Entry kOps[] = {
    {"ImgDecode", &ImgDecodeOp::Create},
    {"Resize", &ResizeOp::Create},
    {"CenterCrop", &CenterCropOp::Create},
    {"RandomResizedCrop", &RandomResizedCropOp::Create},
    {"RandomHorizontalFlip", &RandomFlipOp::Create},
    {"RandomVerticalFlip", &RandomFlipOp::Create},
    {"ToTensor", &ToTensorOp::Create},
    {"Normalize", &NormalizeOp::Create},
    {"ToUint8", &ToTensorOp::Create},
    {"ColorJitter", &ColorJitterOp::Create},
    {"Grayscale", &GrayscaleOp::Create},
    {"RandomGrayscale", &GrayscaleOp::Create},
    {"GaussianBlur", &GaussianBlurOp::Create},
    {"Pad", &PadOp::Create},
    {"RandomCrop", &RandomCropOp::Create},
    {"RandomRotation", &RandomRotationOp::Create},
    {"RandomAffine", &RandomAffineOp::Create},
    {"TrivialAugmentWide", &TrivialAugmentWideOp::Create},
    {"RandAugment", &RandAugmentOp::Create},
    {"AutoAugment", &AutoAugmentOp::Create},
    {"RandomErasing", &RandomErasingOp::Create},
};

}  // namespace

OpFactory FindOp(const std::string& name) {
  for (const Entry& e : kOps) {
    if (name == e.name) return e.make;
  }
  return nullptr;
}

std::vector<std::string> OpNames() {
  std::vector<std::string> out;
  for (const Entry& e : kOps) out.push_back(e.name);
  return out;
}

}  // namespace hdmlp
