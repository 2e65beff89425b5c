// What a C library that rounds the last bit of sin, cos, tan, atan, exp, log
// or expf differently (another CPU's glibc) can do to a sample: every result
// of hdmlp/transforms/libm.h is shifted by 1 and 2 units in the last place,
// up and down, and the transforms' outputs compared with the unshifted ones
// (docs/transforms.md, "The same bytes on every CPU"). The bounds:
//   - resampling weights (Hamming, Lanczos), GaussianBlur's kernel, and the
//     bilinear/bicubic rotations, affine maps and shears: each 8-bit value
//     moves by at most 1 level;
//   - RandomErasing's normal values: each float32 moves by at most 1 ulp;
//   - geometry drawn through exp/log (RandomResizedCrop's and RandomErasing's
//     boxes) and nearest-neighbour sampling of rotated or sheared images:
//     at most 1 in 1000 draws or values differ, a crop side by at most 1 pixel;
//   - the training, validation and timm chains (RandAugment, RandomErasing
//     with random values): the sums above, and no difference is measured.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hdmlp/util/random.h"
#include "hdmlp/transforms/libm.h"
#include "hdmlp/transforms/resample.h"
#include "hdmlp/transforms/transform_pipeline.h"
#include "test_util.h"

namespace hdmlp {
namespace {

constexpr int kShifts[] = {-2, -1, 1, 2};
// Samples per chain (fewer under the sanitizers: the point here is values, not memory or threads).
constexpr int kSamples = testing::kSanitizedBuild ? 2 : 6;

// Resets the shift when a test ends, whatever way.
struct ShiftGuard {
  ~ShiftGuard() { libm::ShiftResultsForTesting(0); }
};

// A photo-like BGR image: gradients, a few edges and noise.
std::vector<uint8_t> Photo(int w, int h, uint64_t seed) {
  std::vector<uint8_t> img(static_cast<size_t>(w) * h * 3);
  Rng rng(seed);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &img[(static_cast<size_t>(y) * w + x) * 3];
      const int edge = ((x / 17 + y / 23) % 3) * 40;
      p[0] = static_cast<uint8_t>((x * 200) / w + edge / 2 + static_cast<int>(rng.Uniform(16)));
      p[1] = static_cast<uint8_t>((y * 180) / h + static_cast<int>(rng.Uniform(24)));
      p[2] = static_cast<uint8_t>(60 + edge + static_cast<int>(rng.Uniform(32)));
    }
  }
  return img;
}

struct Diff {
  int64_t values = 0;      // compared
  int64_t differing = 0;   // values that are not equal
  double max_levels = 0;   // the largest difference, in levels (uint8) or ulps (float)
  void Add(const Diff& d) {
    values += d.values;
    differing += d.differing;
    max_levels = std::max(max_levels, d.max_levels);
  }
};

Diff CompareBytes(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  Diff d;
  d.values = static_cast<int64_t>(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) {
      ++d.differing;
      d.max_levels = std::max(d.max_levels, std::fabs(double{a[i]} - double{b[i]}));
    }
  }
  return d;
}

// Floats, in units in the last place of the first.
Diff CompareFloats(const std::vector<float>& a, const std::vector<float>& b) {
  Diff d;
  d.values = static_cast<int64_t>(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) {
      ++d.differing;
      const float ulp = std::nextafter(std::fabs(a[i]), INFINITY) - std::fabs(a[i]);
      d.max_levels = std::max(d.max_levels, std::fabs(double{a[i]} - double{b[i]}) / ulp);
    }
  }
  return d;
}

using Specs = std::vector<TransformSpec>;

// The chain's uint8 output for `samples` samples of two photos, with the
// libm results shifted by `ulps`.
std::vector<uint8_t> RunBytes(const Specs& specs, int ulps, int samples) {
  libm::ShiftResultsForTesting(ulps);
  TransformPipeline p(specs);
  std::vector<uint8_t> out;
  for (int s = 0; s < samples; ++s) {
    const int w = 320 + 37 * (s % 3), h = 240 + 29 * (s % 4);
    const std::vector<uint8_t> img = Photo(w, h, 100 + s);
    // Room for any output of this image (an expanding rotation's grows to at most (w + h)^2 pixels).
    std::vector<uint8_t> dst(static_cast<size_t>(w + h) * (w + h) * 3 * sizeof(float));
    const OutputShape shape =
        p.ApplyToImage(ImageView{img.data(), w, h, int64_t{w} * 3}, "photo", 7, s % 2, s, dst.data());
    out.insert(out.end(), dst.begin(), dst.begin() + shape.bytes());
  }
  libm::ShiftResultsForTesting(0);
  return out;
}

std::vector<float> RunFloats(const Specs& specs, int ulps, int samples) {
  const std::vector<uint8_t> bytes = RunBytes(specs, ulps, samples);
  std::vector<float> f(bytes.size() / sizeof(float));
  std::memcpy(f.data(), bytes.data(), f.size() * sizeof(float));
  return f;
}

Diff ShiftedBytes(const Specs& specs, int samples) {
  const std::vector<uint8_t> base = RunBytes(specs, 0, samples);
  Diff all;
  for (int u : kShifts) all.Add(CompareBytes(base, RunBytes(specs, u, samples)));
  return all;
}

TEST(LibmBoundsTest, ResamplingWeightsMoveAValueByAtMostOneLevel) {
  ShiftGuard guard;
  const int w = 301, h = 233;
  const std::vector<uint8_t> img = Photo(w, h, 3);
  const ImageView view{img.data(), w, h, int64_t{w} * 3};
  const int sizes[][2] = {{224, 224}, {97, 61}, {37, 19}, {500, 400}, {290, 60}, {250, 90}, {301, 120}, {64, 233}};
  ResampleScratch s;
  Diff all;
  for (Interpolation f : {Interpolation::kHamming, Interpolation::kLanczos}) {
    for (const auto& size : sizes) {
      const float box[4] = {0, 0, static_cast<float>(w), static_cast<float>(h)};
      std::vector<uint8_t> base(static_cast<size_t>(size[0]) * size[1] * 3), shifted(base.size());
      Resample(view, box, size[0], size[1], f, true, base.data(), size[0] * 3, &s);
      for (int u : kShifts) {
        libm::ShiftResultsForTesting(u);
        Resample(view, box, size[0], size[1], f, true, shifted.data(), size[0] * 3, &s);
        libm::ShiftResultsForTesting(0);
        const Diff d = CompareBytes(base, shifted);
        EXPECT_LE(d.max_levels, 1) << InterpolationName(f) << " " << size[0] << "x" << size[1] << " shift " << u;
        all.Add(d);
      }
    }
  }
  std::printf("resampling: %lld of %lld values differ, by at most %g\n", static_cast<long long>(all.differing),
              static_cast<long long>(all.values), all.max_levels);
}

TEST(LibmBoundsTest, BlurRotationsAndShearsMoveAValueByAtMostOneLevel) {
  ShiftGuard guard;
  const std::vector<Specs> chains = {
      {{"ImgDecode", {}}, {"GaussianBlur", {{"kernel_size", {9}}, {"sigma", {0.5, 3.0}}}}, {"ToUint8", {}}},
      {{"ImgDecode", {}}, {"GaussianBlur", {{"kernel_size", {23, 5}}, {"sigma", {4.0}}}}, {"ToUint8", {}}},
      {{"ImgDecode", {}}, {"RandomRotation", {{"degrees", {-40, 40}}, {"interpolation", {2}}}}, {"ToUint8", {}}},
      {{"ImgDecode", {}},
       {"RandomRotation", {{"degrees", {-40, 40}}, {"interpolation", {3}}, {"expand", {1}}}},
       {"ToUint8", {}}},
      {{"ImgDecode", {}},
       {"RandomAffine", {{"degrees", {-20, 20}}, {"shear", {-15, 15, -10, 10}}, {"interpolation", {2}}}},
       {"ToUint8", {}}},
      {{"ImgDecode", {}}, {"TrivialAugmentWide", {{"interpolation", {2}}}}, {"ToUint8", {}}},
  };
  for (const Specs& chain : chains) {
    const Diff d = ShiftedBytes(chain, kSamples);
    EXPECT_LE(d.max_levels, 1) << chain[1].op;
    std::printf("%s: %lld of %lld values differ, by at most %g\n", chain[1].op.c_str(),
                static_cast<long long>(d.differing), static_cast<long long>(d.values), d.max_levels);
  }
}

TEST(LibmBoundsTest, NearestSamplingOfRotationsAndShearsRarelyMovesAPixel) {
  ShiftGuard guard;
  const std::vector<Specs> chains = {
      {{"ImgDecode", {}}, {"RandomRotation", {{"degrees", {-40, 40}}}}, {"ToUint8", {}}},
      {{"ImgDecode", {}}, {"RandomAffine", {{"degrees", {-20, 20}}, {"shear", {-15, 15}}}}, {"ToUint8", {}}},
      {{"ImgDecode", {}}, {"RandAugment", {{"num_ops", {2}}, {"magnitude", {9}}}}, {"ToUint8", {}}},
  };
  for (const Specs& chain : chains) {
    const Diff d = ShiftedBytes(chain, kSamples);
    EXPECT_LE(d.differing * 1000, d.values) << chain[1].op;
    std::printf("%s (nearest): %lld of %lld values differ\n", chain[1].op.c_str(),
                static_cast<long long>(d.differing), static_cast<long long>(d.values));
  }
}

TEST(LibmBoundsTest, CropAndErasingBoxesRarelyChangeAndThenByOnePixel) {
  ShiftGuard guard;
  const TransformPipeline crop({{"ImgDecode", {}}, {"RandomResizedCrop", {{"size", {224}}}}, {"ToTensor", {}}});
  const TransformPipeline erase(
      {{"ImgDecode", {}}, {"ToTensor", {}}, {"RandomErasing", {{"p", {1.0}}, {"value", {0}}}}});
  const int draws = testing::kSanitizedBuild ? 300 : 3000;
  int64_t compared = 0, changed = 0;
  for (const TransformPipeline* p : {&crop, &erase}) {
    for (int i = 0; i < draws; ++i) {
      const int w = 200 + (i * 37) % 900, h = 150 + (i * 53) % 700;
      const std::vector<RandomDraw> base = p->RandomDraws(w, h, 11, i % 3, i);
      for (int u : kShifts) {
        libm::ShiftResultsForTesting(u);
        const std::vector<RandomDraw> shifted = p->RandomDraws(w, h, 11, i % 3, i);
        libm::ShiftResultsForTesting(0);
        ASSERT_EQ(base.size(), shifted.size());
        for (size_t k = 0; k < base.size(); ++k) {
          ++compared;
          const std::vector<DrawValue>& a = base[k].values;
          const std::vector<DrawValue>& b = shifted[k].values;
          bool same = a.size() == b.size();
          for (size_t v = 0; same && v < a.size(); ++v) same = a[v].name == b[v].name && a[v].value == b[v].value;
          if (same) continue;
          ++changed;
          ASSERT_EQ(a.size(), b.size());
          for (size_t v = 0; v < a.size(); ++v) {
            if (a[v].name == "height" || a[v].name == "width") EXPECT_LE(std::fabs(a[v].value - b[v].value), 1);
          }
        }
      }
    }
  }
  EXPECT_LE(changed * 1000, compared);
  std::printf("boxes: %lld of %lld draws changed\n", static_cast<long long>(changed),
              static_cast<long long>(compared));
}

TEST(LibmBoundsTest, ErasingNoiseMovesAValueByAtMostOneUlp) {
  ShiftGuard guard;
  const Specs chain = {{"ImgDecode", {}},
                       {"CenterCrop", {{"size", {200}}}},
                       {"ToTensor", {}},
                       {"RandomErasing", {{"p", {1.0}}, {"random", {1}}, {"scale", {0.3, 0.6}}}}};
  const std::vector<float> base = RunFloats(chain, 0, kSamples);
  Diff all;
  for (int u : kShifts) {
    const Diff d = CompareFloats(base, RunFloats(chain, u, kSamples));
    EXPECT_LE(d.max_levels, 1) << "shift " << u;
    all.Add(d);
  }
  std::printf("erasing noise: %lld of %lld values differ, by at most %g ulp\n",
              static_cast<long long>(all.differing), static_cast<long long>(all.values), all.max_levels);
}

TEST(LibmBoundsTest, TheThreeChainsOfTheCrossCpuCheck) {
  // The chains benchmarks/same_bytes.py compares across CPUs.
  ShiftGuard guard;
  const std::vector<double> mean = {0.485, 0.456, 0.406}, std = {0.229, 0.224, 0.225};
  const std::vector<std::pair<std::string, Specs>> chains = {
      {"train",
       {{"ImgDecode", {}},
        {"RandomResizedCrop", {{"size", {224}}}},
        {"RandomHorizontalFlip", {}},
        {"ToTensor", {}},
        {"Normalize", {{"mean", mean}, {"std", std}}}}},
      {"val",
       {{"ImgDecode", {}},
        {"Resize", {{"size", {256}}}},
        {"CenterCrop", {{"size", {224}}}},
        {"ToTensor", {}},
        {"Normalize", {{"mean", mean}, {"std", std}}}}},
      {"timm",
       {{"ImgDecode", {}},
        {"RandomResizedCrop", {{"size", {224}}, {"interpolation", {3}}}},
        {"RandomHorizontalFlip", {}},
        {"RandAugment", {{"num_ops", {2}}, {"magnitude", {9}}}},
        {"ToTensor", {}},
        {"Normalize", {{"mean", mean}, {"std", std}}},
        {"RandomErasing", {{"p", {0.25}}, {"random", {1}}}}}},
  };
  for (const auto& [name, specs] : chains) {
    const std::vector<float> base = RunFloats(specs, 0, 2 * kSamples);
    Diff all;
    for (int u : kShifts) all.Add(CompareFloats(base, RunFloats(specs, u, 2 * kSamples)));
    // A float output value comes from an 8-bit level (a table) or from the noise: no single
    // libm bit flips more than one level of one value, or one ulp of a noise value, here.
    EXPECT_LE(all.differing * 1000, all.values) << name;
    std::printf("%s chain: %lld of %lld values differ\n", name.c_str(), static_cast<long long>(all.differing),
                static_cast<long long>(all.values));
  }
}

}  // namespace
}  // namespace hdmlp
