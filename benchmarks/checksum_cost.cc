// checksum_cost: what the checksum of a filesystem storage class costs
// (issue 13: "well under 5% of the raw-bytes rate"), side by side in one run.
//
//   raw read   what a cached file's read cost before: open, fstat, allocate,
//              pread the whole file (page cache warm);
//   checked    FilesystemClass::Read, the production path: the same read of
//              the file (its bytes and the 8-byte XXH3 after them) and the
//              checksum verified.
// Both read the same files, ImageNet-like sizes (40..180 KB), file by file
// in alternating order over several repeats; the overhead is the median of
// the per-repeat ratios. Times are the thread's CPU time (steadier than
// the wall clock on a shared machine; the reads are from the page cache, so
// CPU time is their cost). Also printed: XXH3 alone on a cached buffer, and
// what it costs at hdmlp's raw-bytes delivery rate.
//
// Build: cmake -S . -B build/bench -G Ninja -DHDMLP_BUILD_BENCHMARKS=ON -DHDMLP_BUILD_PYTHON=OFF
//        cmake --build build/bench --target checksum_cost
// Run:   build/bench/checksum_cost [--files 800] [--repeats 7] [--raw-rate-mbps 2000] [--raw-rate-samples 19878]
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "hdmlp/cache/storage_class.h"
#include "hdmlp/env/env.h"
#include "hdmlp/util/checksum.h"
#include "hdmlp/util/random.h"

#include "lab/machine_load.h"

namespace {

// CPU time of this thread: on a shared, loaded machine far steadier than
// the wall clock, which also counts the time other processes ran.
double Now() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int files = 800, repeats = 7;
  // hdmlp's raw-bytes rate, warm, on this 2-core machine (results/raw_bytes.md):
  // 19878 samples/s of ~100 KB, about 2000 MB/s.
  double raw_rate_mbps = 2000, raw_rate_samples = 19878, cores = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--files")) files = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--repeats")) repeats = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--raw-rate-mbps")) raw_rate_mbps = std::atof(argv[i + 1]);
    if (!std::strcmp(argv[i], "--raw-rate-samples")) raw_rate_samples = std::atof(argv[i + 1]);
  }
  const std::string dir = std::filesystem::temp_directory_path() / ("hdmlp_checksum_cost_" + std::to_string(::getpid()));
  hdmlp::Env* env = hdmlp::Env::Default();
  auto cls = hdmlp::MakeFilesystemClass(env, "filesystem", dir);
  const std::string folder = hdmlp::FilesystemClassFolder(*cls);
  hdmlp::Rng rng(3);
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (int i = 0; i < files; ++i) {
    const int64_t size = rng.UniformInt(40000, 180000);
    std::vector<uint8_t> bytes(static_cast<size_t>(size));
    for (auto& b : bytes) b = static_cast<uint8_t>(rng.Uniform(256));
    if (!cls->Store(i, i, bytes.data(), size)) {
      std::fprintf(stderr, "cannot store into %s\n", folder.c_str());
      return 1;
    }
    sizes.push_back(size);
    total += size;
  }
  const double load_start = hdmlp_bench::SampleLoad().load[0];
  // The raw read of one cached file, as it was before the checksum, and the
  // checked read; both timed file by file, alternating which goes first, so
  // that the two see the same moment's load (the machine is shared).
  const auto raw_read = [&](int i) {
    const double t = Now();
    auto file = env->OpenForRead(folder + "/" + std::to_string(i) + ".bin");
    const int64_t size = file->Size();
    hdmlp::SampleBuffer out = hdmlp::SampleBuffer::Allocate(size);
    file->ReadExact(0, out.data.get(), size);
    return Now() - t;
  };
  const auto checked_read = [&](int i) {
    const double t = Now();
    hdmlp::SampleBuffer out;
    if (!cls->Read(i, i, sizes[static_cast<size_t>(i)], &out)) std::abort();
    return Now() - t;
  };
  for (int i = 0; i < files; ++i) raw_read(i), checked_read(i);  // warm the page cache
  std::vector<double> raw, checked, ratio;
  for (int r = 0; r < repeats; ++r) {
    double a = 0, b = 0;
    for (int i = 0; i < files; ++i) {
      if ((i + r) % 2 == 0) {
        a += raw_read(i);
        b += checked_read(i);
      } else {
        b += checked_read(i);
        a += raw_read(i);
      }
    }
    raw.push_back(a);
    checked.push_back(b);
    ratio.push_back(b / a);
  }
  // The hash alone, on a buffer of a file's size that stays in the cache
  // (as a file's bytes are, right after its read).
  std::vector<uint8_t> buffer(110000, 7);
  std::vector<double> hash_s;
  uint64_t sink = 0;
  for (int r = 0; r < repeats; ++r) {
    const double t = Now();
    for (int i = 0; i < 1000; ++i) sink ^= hdmlp::Checksum64(buffer.data(), buffer.size());
    hash_s.push_back(Now() - t);
  }
  const double mb = static_cast<double>(total) / 1e6;
  std::printf("# generated by: build/bench/checksum_cost --files %d --repeats %d\n", files, repeats);
  std::printf("# machine: 2 cores, load average %.2f at start, %.2f at end; page cache warm\n", load_start, hdmlp_bench::SampleLoad().load[0]);
  std::printf("filesystem class reads of %d files (%.1f MB, 40..180 KB each), median of %d interleaved repeats\n",
              files, mb, repeats);
  std::printf("  (CPU time of the reading thread)\n");
  std::printf("  raw read (before)        %7.1f MB/s  %6.1f us/file\n", mb / Median(raw),
              Median(raw) / files * 1e6);
  std::printf("  read + XXH3 verified     %7.1f MB/s  %6.1f us/file\n", mb / Median(checked),
              Median(checked) / files * 1e6);
  std::printf("  overhead of the checksum: %+.1f%% (median ratio; range %+.1f%% .. %+.1f%%)\n",
              (Median(ratio) - 1) * 100, (*std::min_element(ratio.begin(), ratio.end()) - 1) * 100,
              (*std::max_element(ratio.begin(), ratio.end()) - 1) * 100);
  const double hash_gbps = 0.11 / Median(hash_s);
  std::printf("  XXH3 alone on a 110 KB buffer in the cache: %.1f GB/s (one core)%s\n", hash_gbps,
              sink == 42 ? " " : "");
  std::printf("  at hdmlp's raw-bytes rate of %.0f MB/s (results/raw_bytes.md), checksumming every byte costs "
              "%.1f%% of one core\n",
              raw_rate_mbps, raw_rate_mbps / (hash_gbps * 1e3) * 100);
  const double extra_us = (Median(checked) - Median(raw)) / files * 1e6;
  const double budget_us = cores / raw_rate_samples * 1e6;
  std::printf("  per sample: +%.2f us of CPU for the checked read, against the %.0f us of CPU hdmlp spends per "
              "sample at %.0f samples/s on %.0f cores: %.1f%%\n",
              extra_us, budget_us, raw_rate_samples, cores, extra_us / budget_us * 100);
  cls->Release();
  std::filesystem::remove_all(dir);
  return 0;
}
