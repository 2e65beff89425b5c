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
//   train, fast     the same with ImgDecode(fast=True): the smallest DCT scale
//                   m/8 that keeps the crop at least 224 px, fast IDCT, no
//                   fancy upsampling (also val, fast and timm, fast)
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
// With --knobs, the fast mode's settings one at a time, on the decode alone
// (DecodeImage of the region a chain decodes, at the scale and with the
// settings named): "train crop exact" (the exact train chain's region),
// "train crop m/8" (fast's region and scale, exact settings), "+ ifast"
// (the fast integer IDCT), "+ no fancy" (replicated chroma, merged with the
// colour conversion), "train crop fast" (both: what fast does); the same for
// the val chain's region; "whole 8/8 + ..." the whole image with each
// setting; "whole m/8" and "whole m/8 fast": the whole image at each DCT
// scale, exact and fast settings (which scales pay: FastJpegScaleUseful).
// --progressive re-encodes every image as a progressive JPEG first.
// --rounds R runs every case R times, round-robin, and prints each round
// and the median (interleaved runs on a shared machine).
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
//                          [--rounds R] [--knobs] [--progressive]
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

#include "lab/machine_load.h"

#include "hdmlp/config/cpu_budget.h"
#include "hdmlp/tools/image_folder_generator.h"
#include "hdmlp/transforms/decode.h"
#include "hdmlp/transforms/resample.h"
#include "hdmlp/transforms/simd.h"
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
  int rounds = 1;
  bool knobs = false;
  bool progressive = false;
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

std::vector<TransformSpec> TrainChain(bool draft, bool fast = false) {
  return {{"ImgDecode", {{"draft", {draft ? 1.0 : 0.0}}, {"fast", {fast ? 1.0 : 0.0}}}},
          {"RandomResizedCrop", {{"size", {224}}}},
          {"RandomHorizontalFlip", {}},
          {"ToTensor", {}},
          {"Normalize", {{"mean", {0.485, 0.456, 0.406}}, {"std", {0.229, 0.224, 0.225}}}}};
}

std::vector<TransformSpec> TimmChain(bool fast = false) {
  return {{"ImgDecode", {{"fast", {fast ? 1.0 : 0.0}}}},
          {"RandomResizedCrop", {{"size", {224}}}},
          {"RandomHorizontalFlip", {}},
          {"TrivialAugmentWide", {}},
          {"ToTensor", {}},
          {"Normalize", {{"mean", {0.485, 0.456, 0.406}}, {"std", {0.229, 0.224, 0.225}}}},
          {"RandomErasing", {{"p", {0.25}}}}};
}

std::vector<TransformSpec> ValChain(bool fast = false) {
  return {{"ImgDecode", {{"fast", {fast ? 1.0 : 0.0}}}},
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
    } else if (a == "--rounds") {
      opt.rounds = std::atoi(value());
    } else if (a == "--knobs") {
      opt.knobs = true;
    } else if (a == "--progressive") {
      opt.progressive = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--root DIR] [--images N] [--passes P] [--threads T] [--min-side S] [--max-side S] "
                   "[--only SUBSTRING] [--case NAME]... [--no-single-thread] [--rounds R] [--knobs] [--progressive]\n",
                   argv[0]);
      return 2;
    }
  }
  if (opt.root.empty()) {
    opt.root = "/tmp/hdmlp_transform_ceiling_" + std::to_string(opt.min_side) + "_" + std::to_string(opt.max_side);
  }
  if (opt.images < 1 || opt.passes < 1 || opt.threads < 1 || opt.rounds < 1) {
    std::fprintf(stderr, "--images, --passes, --threads and --rounds must be positive\n");
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
    if (opt.progressive) {  // the same pixels as a progressive JPEG of quality 90
      const cv::Mat buf(1, static_cast<int>(files[i].size()), CV_8UC1, files[i].data());
      const cv::Mat img = cv::imdecode(buf, cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION);
      std::vector<uint8_t> enc;
      cv::imencode(".jpg", img, enc, {cv::IMWRITE_JPEG_QUALITY, 90, cv::IMWRITE_JPEG_PROGRESSIVE, 1});
      files[i].assign(enc.begin(), enc.end());
    }
    const auto h = hdmlp::ReadImageHeader(reinterpret_cast<const uint8_t*>(files[i].data()),
                                          static_cast<int64_t>(files[i].size()), paths[i], false);
    pixels += int64_t{h.width} * h.height;
  }
  int64_t bytes = 0;
  for (const auto& f : files) bytes += static_cast<int64_t>(f.size());
  std::printf("folder %s: %d %sJPEGs, %.1f KB and %.0f kpixels on average (generated now: %lld)\n",
              opt.root.c_str(), opt.images, opt.progressive ? "progressive " : "", bytes / 1024.0 / opt.images,
              pixels / 1000.0 / opt.images, static_cast<long long>(gen.files_written));

  const hdmlp::TransformPipeline train(TrainChain(false)), train_draft(TrainChain(true)), val(ValChain()),
      timm(TimmChain()), train_fast(TrainChain(false, true)), val_fast(ValChain(true)), timm_fast(TimmChain(true));
  // The scales the draft and fast chains decode at (the plans Apply makes).
  const int64_t n = int64_t{opt.images} * opt.passes;
  std::vector<hdmlp::ImageHeader> headers(files.size());
  for (int i = 0; i < opt.images; ++i) {
    headers[i] = hdmlp::ReadImageHeader(reinterpret_cast<const uint8_t*>(files[i].data()),
                                        static_cast<int64_t>(files[i].size()), paths[i], false);
  }
  auto scales = [&](const hdmlp::TransformPipeline& p, const char* name) {
    int count[9] = {};
    for (int64_t item = 0; item < n; ++item) {
      const auto& h = headers[static_cast<size_t>(item % opt.images)];
      ++count[p.PlanJpegDecode(h.width, h.height, 0, static_cast<int>(item / opt.images), item % opt.images,
                               h.jpeg_components)
                  .mode.scale];
    }
    std::printf("%s decodes at scale", name);
    for (int m = 8; m >= 1; --m) {
      if (count[m]) std::printf(" %d/8: %d", m, count[m]);
    }
    std::printf(" (of %lld)\n", static_cast<long long>(n));
  };
  scales(train_draft, "train, draft");
  scales(train_fast, "train, fast");
  scales(val_fast, "val, fast");

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
  // --knobs: the decode alone, of the region a chain's plan decodes, in a
  // given mode (the plan's scale, or 8/8).
  auto region_decode = [&](const hdmlp::TransformPipeline& p, bool keep_scale,
                           std::function<void(hdmlp::JpegDecodeMode*)> settings) {
    return [&, keep_scale, settings](int64_t item) {
      const int i = static_cast<int>(item % opt.images);
      const auto& h = headers[static_cast<size_t>(i)];
      const hdmlp::JpegDecodePlan plan =
          p.PlanJpegDecode(h.width, h.height, 0, static_cast<int>(item / opt.images), i, h.jpeg_components);
      hdmlp::JpegDecodeMode mode;
      if (keep_scale) mode.scale = plan.mode.scale;
      settings(&mode);
      const hdmlp::PixelRect region =
          keep_scale ? plan.region : hdmlp::DecodedBounds(h, mode);  // else the whole image at 8/8
      thread_local hdmlp::DecodedImage m;
      hdmlp::DecodeImage(reinterpret_cast<const uint8_t*>(files[i].data()), static_cast<int64_t>(files[i].size()), h,
                         mode, region, paths[i], &m);
    };
  };
  auto exact_region = [&](const hdmlp::TransformPipeline& p) {  // the exact chain's region, exact settings
    return [&](int64_t item) {
      const int i = static_cast<int>(item % opt.images);
      const auto& h = headers[static_cast<size_t>(i)];
      const auto plan = p.PlanJpegDecode(h.width, h.height, 0, static_cast<int>(item / opt.images), i);
      thread_local hdmlp::DecodedImage m;
      hdmlp::DecodeImage(reinterpret_cast<const uint8_t*>(files[i].data()), static_cast<int64_t>(files[i].size()), h,
                         plan.mode, plan.region, paths[i], &m);
    };
  };
  auto whole_at = [&](int scale, bool fast) {
    return [&, scale, fast](int64_t item) {
      const int i = static_cast<int>(item % opt.images);
      const auto& h = headers[static_cast<size_t>(i)];
      const hdmlp::JpegDecodeMode mode = fast ? hdmlp::FastJpegMode(scale) : [&] {
        hdmlp::JpegDecodeMode e;
        e.scale = scale;
        return e;
      }();
      thread_local hdmlp::DecodedImage m;
      hdmlp::DecodeImage(reinterpret_cast<const uint8_t*>(files[i].data()), static_cast<int64_t>(files[i].size()), h,
                         mode, hdmlp::DecodedBounds(h, mode), paths[i], &m);
    };
  };
  auto none = [](hdmlp::JpegDecodeMode*) {};
  auto ifast = [](hdmlp::JpegDecodeMode* m) { m->fast_idct = true; };
  auto no_fancy = [](hdmlp::JpegDecodeMode* m) { m->fancy_upsampling = false; };
  auto all_fast = [](hdmlp::JpegDecodeMode* m) { *m = hdmlp::FastJpegMode(m->scale); };

  std::vector<Case> cases = {{"decode", decode},
                             {"decode, cv::imdecode", imdecode},
                             {"train", chain(train)},
                             {"train, draft", chain(train_draft)},
                             {"train, fast", chain(train_fast)},
                             {"val", chain(val)},
                             {"val, fast", chain(val_fast)},
                             {"timm", chain(timm)},
                             {"timm, fast", chain(timm_fast)},
                             {"train after decode", after(train)},
                             {"val after decode", after(val)},
                             {"timm after decode", after(timm)}};
  std::vector<std::string> knob_names;  // owns the generated names
  if (opt.knobs) {
    cases.push_back({"knobs: train crop exact", exact_region(train)});
    cases.push_back({"knobs: train crop m/8", region_decode(train_fast, true, none)});
    cases.push_back({"knobs: train crop m/8 + ifast", region_decode(train_fast, true, ifast)});
    cases.push_back({"knobs: train crop m/8 + no fancy", region_decode(train_fast, true, no_fancy)});
    cases.push_back({"knobs: train crop fast", region_decode(train_fast, true, all_fast)});
    cases.push_back({"knobs: val region exact", exact_region(val)});
    cases.push_back({"knobs: val region m/8", region_decode(val_fast, true, none)});
    cases.push_back({"knobs: val region m/8 + ifast", region_decode(val_fast, true, ifast)});
    cases.push_back({"knobs: val region m/8 + no fancy", region_decode(val_fast, true, no_fancy)});
    cases.push_back({"knobs: val region fast", region_decode(val_fast, true, all_fast)});
    cases.push_back({"knobs: whole 8/8 + ifast", region_decode(train, false, ifast)});
    cases.push_back({"knobs: whole 8/8 + no fancy", region_decode(train, false, no_fancy)});
    knob_names.reserve(16);
    for (int m = 8; m >= 1; --m) {
      for (bool fast : {false, true}) {
        knob_names.push_back("knobs: whole " + std::to_string(m) + "/8" + (fast ? " fast" : ""));
        cases.push_back({knob_names.back().c_str(), whole_at(m, fast)});
      }
    }
  }

  Run(max_threads, std::min<int64_t>(n, 64), cases[1].work);  // warm-up: caches, scratch buffers
  std::printf("vector kernels: %s\n", hdmlp::KernelsName(hdmlp::ActiveKernels()));
  // Every selected case on 1 and --threads threads, --rounds times
  // round-robin; CPU us/image per round, then the median.
  struct Row {
    const Case* c;
    int threads;
    std::vector<double> ips, cpu_us;
  };
  std::vector<Row> rows;
  for (const Case& c : cases) {
    if (!selected(c.name)) continue;
    if (opt.single_thread || max_threads == 1) rows.push_back({&c, 1, {}, {}});
    if (max_threads > 1) rows.push_back({&c, max_threads, {}, {}});
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  const hdmlp::CpuBudget budget = hdmlp::ReadCpuBudget();
  std::printf("CPU budget: %s\n", budget.Describe().c_str());
  std::printf("\n%-38s %8s %12s %12s %14s %14s\n", "case", "threads", "images/s", "per core", "CPU us/image",
              "others (cores)");
  for (int round = 0; round < opt.rounds; ++round) {
    if (opt.rounds > 1) std::printf("-- round %d of %d\n", round + 1, opt.rounds);
    for (Row& row : rows) {
      const hdmlp_bench::LoadSample before = hdmlp_bench::SampleLoad();
      const Result r = Run(row.threads, n, row.c->work);
      const auto load = hdmlp_bench::Usage(before, hdmlp_bench::SampleLoad(), budget.UsableCpus(), false);
      row.ips.push_back(r.items / r.wall_s);
      row.cpu_us.push_back(r.cpu_s / r.items * 1e6);
      std::printf("%-38s %8d %12.0f %12.0f %14.0f %9.2f%s\n", row.c->name, row.threads, row.ips.back(),
                  row.ips.back() / row.threads, row.cpu_us.back(), load.other_cores, load.busy ? " busy" : "");
      std::fflush(stdout);
    }
  }
  if (opt.rounds > 1) {
    std::printf("\nmedians of %d rounds\n", opt.rounds);
    for (const Row& row : rows) {
      const double ips = median(row.ips);
      std::printf("%-38s %8d %12.0f %12.0f %14.0f\n", row.c->name, row.threads, ips, ips / row.threads,
                  median(row.cpu_us));
    }
  }
  hdmlp_bench::PrintLoadSummary(start, hdmlp_bench::SampleLoad(), budget.UsableCpus());
  return 0;
}
