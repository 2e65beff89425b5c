// transform_ceiling: this machine's ceiling for the per-sample work of a
// training loader (issue #5, "Speed"): the bare C++ pipeline on all cores,
// with no reading, batching or Python, over a generated ImageNet-like folder.
//
//   decode          the whole image through DecodeImage (libjpeg-turbo called
//                   directly), nothing else
//   decode, cv::imdecode  the same image through OpenCV's imdecode, which
//                   hdmlp used before (same pixels)
//   train           ImgDecode + RandomResizedCrop(224) + RandomHorizontalFlip
//                   + ToTensor + Normalize: the standard ImageNet training chain
//   train, draft    the same with ImgDecode(draft=True): libjpeg's 1/2, 1/4,
//                   1/8 DCT scaling when the crop is shrunk by 2x or more
//   val             ImgDecode + Resize(256) + CenterCrop(224) + ToTensor +
//                   Normalize
//   timm            ImgDecode + RandomResizedCrop(224) + RandomHorizontalFlip
//                   + TrivialAugmentWide + ToTensor + Normalize +
//                   RandomErasing(p=0.25): the timm-style training chain
//
//   ... after decode  the train, val and timm chains on images decoded beforehand
//                   (TransformPipeline::ApplyToImage): the per-image cost of
//                   everything after the decode
//
// Every file is read into memory first. Each case runs on 1 thread and on
// --threads threads (default: the CPUs this process may use, what
// threads = "auto" gives) over the same items (image i of pass p is sample i
// of epoch p, so crops differ between passes); it prints
// images/s, images/s per core, and the CPU microseconds per image measured
// with the threads' CPU clocks, which a busy shared machine distorts less
// than wall time. The load average and the CPU other processes took during
// each case are recorded too (machine_load.h); a case during which others
// took more than a tenth of a core is marked busy.
//
// CMake (under HDMLP_BUILD_BENCHMARKS in CMakeLists.txt):
//   add_executable(transform_ceiling ${CMAKE_CURRENT_SOURCE_DIR}/benchmarks/transform_ceiling.cc)
//   target_link_libraries(transform_ceiling PRIVATE hdmlp_core)
//   target_compile_options(transform_ceiling PRIVATE -Wall -Wextra)
// By hand:
//   g++ -std=c++17 -O2 -I cpp/include -I /usr/include/opencv4 benchmarks/transform_ceiling.cc
//     cpp/src/transforms/*.cc cpp/src/transforms/ops/*.cc cpp/src/tools/*.cc cpp/src/config/cpu_budget.cc
//     cpp/src/errors.cc -lopencv_core -lopencv_imgproc -lopencv_imgcodecs -ljpeg
//     -pthread -o /tmp/transform_ceiling
// Run:
//   /tmp/transform_ceiling [--images N] [--passes P] [--threads T] [--min-side S --max-side S] [--root DIR]
//                          [--only SUBSTRING] [--case NAME]... [--no-single-thread]
// (--case train --case val: only those cases, by exact name; --no-single-thread:
// only on --threads threads. benchmarks/transform_pipeline.py runs it so, as
// its "ceiling" system, on its own folder.)
// The folder (generated once, under /tmp by default) has ImageNet-like
// 250..500-pixel sides; --min-side 800 --max-side 1600 shows the draft
// decode on large photos.
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "machine_load.h"

#include "hdmlp/config/cpu_budget.h"
#include "hdmlp/tools/image_folder_generator.h"
#include "hdmlp/transforms/decode.h"
#include "hdmlp/transforms/resample.h"
#include "hdmlp/transforms/transform_pipeline.h"

namespace {

using hdmlp::TransformSpec;

struct Options {
  std::string root;  // default: /tmp/hdmlp_transform_ceiling_<min>_<max>
  int min_side = 250, max_side = 500;  // the generator's ImageNet-like default
  int images = 500;
  int passes = 2;
  int threads = hdmlp::ReadCpuBudget().UsableCpus();  // what threads = "auto" gives
  std::string only;                // run only the cases whose name contains this
  std::vector<std::string> cases;  // --case NAME (repeatable): only these; empty: every case
  bool single_thread = true;       // also run each case on 1 thread
};

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct Result {
  double wall_s = 0;
  double cpu_s = 0;
  int64_t items = 0;
};

// Runs work(item) for items [0, n) on `threads` threads sharing a counter.
Result Run(int threads, int64_t n, const std::function<void(int64_t)>& work) {
  std::atomic<int64_t> next{0};
  std::vector<double> cpu(static_cast<size_t>(threads), 0.0);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const double c0 = ThreadCpuSeconds();
      for (int64_t i; (i = next.fetch_add(1)) < n;) work(i);
      cpu[t] = ThreadCpuSeconds() - c0;
    });
  }
  for (auto& th : pool) th.join();
  Result r;
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (double c : cpu) r.cpu_s += c;
  r.items = n;
  return r;
}

std::vector<TransformSpec> TrainChain(bool draft) {
  return {{"ImgDecode", {{"draft", {draft ? 1.0 : 0.0}}}},
          {"RandomResizedCrop", {{"size", {224}}}},
          {"RandomHorizontalFlip", {}},
          {"ToTensor", {}},
          {"Normalize", {{"mean", {0.485, 0.456, 0.406}}, {"std", {0.229, 0.224, 0.225}}}}};
}

std::vector<TransformSpec> TimmChain() {
  return {{"ImgDecode", {}},
          {"RandomResizedCrop", {{"size", {224}}}},
          {"RandomHorizontalFlip", {}},
          {"TrivialAugmentWide", {}},
          {"ToTensor", {}},
          {"Normalize", {{"mean", {0.485, 0.456, 0.406}}, {"std", {0.229, 0.224, 0.225}}}},
          {"RandomErasing", {{"p", {0.25}}}}};
}

std::vector<TransformSpec> ValChain() {
  return {{"ImgDecode", {}},
          {"Resize", {{"size", {256}}}},
          {"CenterCrop", {{"size", {224}}}},
          {"ToTensor", {}},
          {"Normalize", {{"mean", {0.485, 0.456, 0.406}}, {"std", {0.229, 0.224, 0.225}}}}};
}

}  // namespace

int main(int argc, char** argv) {
  const hdmlp_bench::LoadSample start = hdmlp_bench::SampleLoad();  // before this benchmark loads the machine
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--root") {
      opt.root = value();
    } else if (a == "--images") {
      opt.images = std::atoi(value());
    } else if (a == "--passes") {
      opt.passes = std::atoi(value());
    } else if (a == "--threads") {
      opt.threads = std::atoi(value());
    } else if (a == "--min-side") {
      opt.min_side = std::atoi(value());
    } else if (a == "--max-side") {
      opt.max_side = std::atoi(value());
    } else if (a == "--only") {
      opt.only = value();
    } else if (a == "--case") {
      opt.cases.push_back(value());
    } else if (a == "--no-single-thread") {
      opt.single_thread = false;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--root DIR] [--images N] [--passes P] [--threads T] [--min-side S] [--max-side S] "
                   "[--only SUBSTRING] [--case NAME]... [--no-single-thread]\n",
                   argv[0]);
      return 2;
    }
  }
  if (opt.root.empty()) {
    opt.root = "/tmp/hdmlp_transform_ceiling_" + std::to_string(opt.min_side) + "_" + std::to_string(opt.max_side);
  }
  if (opt.images < 1 || opt.passes < 1 || opt.threads < 1) {
    std::fprintf(stderr, "--images, --passes and --threads must be positive\n");
    return 2;
  }
  cv::setNumThreads(0);

  hdmlp::ImageFolderSpec spec;
  spec.root = opt.root;
  spec.num_images = opt.images;
  spec.num_classes = std::min(10, opt.images);
  spec.min_side = opt.min_side;
  spec.max_side = opt.max_side;
  const auto gen = hdmlp::GenerateImageFolder(spec);
  std::vector<std::string> files(static_cast<size_t>(opt.images));
  std::vector<std::string> paths(files.size());
  int64_t pixels = 0;
  for (int i = 0; i < opt.images; ++i) {
    paths[i] = opt.root + "/" + hdmlp::GeneratedRelativePath(i, spec.num_classes);
    std::ifstream in(paths[i], std::ios::binary);
    files[i].assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    const auto h = hdmlp::ReadImageHeader(reinterpret_cast<const uint8_t*>(files[i].data()),
                                          static_cast<int64_t>(files[i].size()), paths[i], false);
    pixels += int64_t{h.width} * h.height;
  }
  std::printf("folder %s: %d JPEGs, %.1f KB and %.0f kpixels on average (generated now: %lld)\n",
              opt.root.c_str(), opt.images, gen.total_bytes / 1024.0 / opt.images, pixels / 1000.0 / opt.images,
              static_cast<long long>(gen.files_written));

  const hdmlp::TransformPipeline train(TrainChain(false)), train_draft(TrainChain(true)), val(ValChain()),
      timm(TimmChain());
  // How often the draft chain reduces the decode (same crops as Apply).
  int reduced[4] = {0, 0, 0, 0};  // 1, 2, 4, 8
  for (int p = 0; p < opt.passes; ++p) {
    for (int i = 0; i < opt.images; ++i) {
      const auto h = hdmlp::ReadImageHeader(reinterpret_cast<const uint8_t*>(files[i].data()),
                                            static_cast<int64_t>(files[i].size()), paths[i], false);
      const auto d = train_draft.RandomDraws(h.width, h.height, 0, p, i)[0];
      int k = 0;
      for (int f : {8, 4, 2}) {
        if (d.width >= 224 * f && d.height >= 224 * f) {
          k = f == 8 ? 3 : f == 4 ? 2 : 1;
          break;
        }
      }
      ++reduced[k];
    }
  }
  const int64_t n = int64_t{opt.images} * opt.passes;
  std::printf("draft decodes at scale 1/1: %d, 1/2: %d, 1/4: %d, 1/8: %d of %lld\n", reduced[0], reduced[1],
              reduced[2], reduced[3], static_cast<long long>(n));

  const int max_threads = opt.threads;
  std::vector<std::vector<float>> out(static_cast<size_t>(max_threads + 1));
  thread_local std::vector<float> tls_out;
  const int64_t out_floats = train.output().bytes() / 4;

  auto decode = [&](int64_t item) {
    const int i = static_cast<int>(item % opt.images);
    thread_local hdmlp::DecodedImage m;
    const auto* d = reinterpret_cast<const uint8_t*>(files[i].data());
    const auto size = static_cast<int64_t>(files[i].size());
    const auto h = hdmlp::ReadImageHeader(d, size, paths[i], true);
    hdmlp::DecodeImage(d, size, h, 1, hdmlp::DecodedBounds(h, 1), paths[i], &m);
  };
  auto imdecode = [&](int64_t item) {  // the decoder hdmlp used before it called libjpeg itself
    const int i = static_cast<int>(item % opt.images);
    thread_local cv::Mat m;
    const cv::Mat buf(1, static_cast<int>(files[i].size()), CV_8UC1, files[i].data());
    cv::imdecode(buf, cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION, &m);
  };
  auto chain = [&](const hdmlp::TransformPipeline& p) {
    return [&](int64_t item) {
      const int i = static_cast<int>(item % opt.images);
      const int epoch = static_cast<int>(item / opt.images);
      tls_out.resize(static_cast<size_t>(out_floats));
      p.Apply(reinterpret_cast<const uint8_t*>(files[i].data()), static_cast<int64_t>(files[i].size()), paths[i],
              0, epoch, i, reinterpret_cast<uint8_t*>(tls_out.data()));
    };
  };
  struct Case {
    const char* name;
    std::function<void(int64_t)> work;
  };
  // Decoded images for the after-decode cases (at most 200, to bound memory).
  const auto selected = [&](const std::string& name) {
    if (!opt.only.empty() && name.find(opt.only) == std::string::npos) return false;
    return opt.cases.empty() || std::find(opt.cases.begin(), opt.cases.end(), name) != opt.cases.end();
  };
  const bool any_after = selected("train after decode") || selected("val after decode") ||
                         selected("timm after decode");
  const int n_decoded = any_after ? std::min(opt.images, 200) : 0;
  std::vector<cv::Mat> decoded(static_cast<size_t>(n_decoded));
  for (int i = 0; i < n_decoded; ++i) {
    const cv::Mat buf(1, static_cast<int>(files[i].size()), CV_8UC1, files[i].data());
    decoded[i] = cv::imdecode(buf, cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION);
  }
  auto after = [&](const hdmlp::TransformPipeline& p) {
    return [&](int64_t item) {
      const int i = static_cast<int>(item % n_decoded);
      const int epoch = static_cast<int>(item / n_decoded);
      const cv::Mat& m = decoded[i];
      tls_out.resize(static_cast<size_t>(out_floats));
      p.ApplyToImage(hdmlp::ImageView{m.data, m.cols, m.rows, static_cast<int64_t>(m.step)}, paths[i], 0, epoch,
                     i, reinterpret_cast<uint8_t*>(tls_out.data()));
    };
  };
  const Case cases[] = {{"decode", decode},
                        {"decode, cv::imdecode", imdecode},
                        {"train", chain(train)},
                        {"train, draft", chain(train_draft)},
                        {"val", chain(val)},
                        {"timm", chain(timm)},
                        {"train after decode", after(train)},
                        {"val after decode", after(val)},
                        {"timm after decode", after(timm)}};

  Run(max_threads, std::min<int64_t>(n, 64), cases[1].work);  // warm-up: caches, scratch buffers
  std::printf("AVX2 kernels: %s\n", hdmlp::ResampleUsesAvx2() ? "yes" : "no");
  const hdmlp::CpuBudget budget = hdmlp::ReadCpuBudget();
  std::printf("CPU budget: %s\n", budget.Describe().c_str());
  std::printf("\n%-20s %8s %12s %12s %14s %14s\n", "case", "threads", "images/s", "per core", "CPU us/image",
              "others (cores)");
  for (const Case& c : cases) {
    if (!selected(c.name)) continue;
    std::vector<int> thread_counts;
    if (opt.single_thread || max_threads == 1) thread_counts.push_back(1);
    if (max_threads > 1) thread_counts.push_back(max_threads);
    for (int t : thread_counts) {
      const hdmlp_bench::LoadSample before = hdmlp_bench::SampleLoad();
      const Result r = Run(t, n, c.work);
      const auto load = hdmlp_bench::Usage(before, hdmlp_bench::SampleLoad(), budget.UsableCpus(), false);
      const double ips = r.items / r.wall_s;
      std::printf("%-20s %8d %12.0f %12.0f %14.0f %9.2f%s\n", c.name, t, ips, ips / t, r.cpu_s / r.items * 1e6,
                  load.other_cores, load.busy ? " busy" : "");
    }
  }
  hdmlp_bench::PrintLoadSummary(start, hdmlp_bench::SampleLoad(), budget.UsableCpus());
  return 0;
}
