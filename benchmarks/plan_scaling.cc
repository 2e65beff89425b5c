// plan_scaling: what planning the placement costs one rank, against the
// NoPFS-style baseline, side by side in one run (issue #3, "Planning").
//
//   baseline  every rank shuffles the whole dataset for every epoch (an
//             iota vector of F ids, Fisher-Yates with hdmlp::Rng), counts
//             reads and first reads of its own share in arrays over F, and
//             sorts its samples by (count desc, first read asc).
//   hdmlp     PlanPlacement for one rank: only that rank's E*F/N positions
//             of the permutation are evaluated (plan/placement.h).
//
// Each measured case runs in a forked child, so the peak memory of one
// case cannot hide another's: the child resets its high-water mark
// (/proc/self/clear_refs) after building its inputs and reports VmHWM minus
// VmRSS at that point, i.e. the memory the planning itself added. The
// dataset's size array (an input that the index already holds) is not
// counted. Wall and CPU (user + sys) time are both printed: on a shared
// machine the wall time of the threaded planner depends on free cores.
//
// Build: see benchmarks/CMakeLists-snippet.txt, or by hand
//   g++ -std=c++17 -O2 -I cpp/include cpp/src/plan/*.cc benchmarks/plan_scaling.cc -pthread -o /tmp/plan_scaling
// Run:   /tmp/plan_scaling [--threads N] [--baseline-epochs-22k K] [--no-baseline]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "hdmlp/plan/access_plan.h"
#include "hdmlp/plan/placement.h"
#include "hdmlp/util/random.h"

#include "lab/machine_load.h"

namespace {

constexpr int64_t kImageNet1k = 1281167;
constexpr int64_t kImageNet22k = 14197122;
constexpr int kEpochs = 90;
constexpr int64_t kLocalBatch = 32;  // global batch = 32 * ranks
constexpr uint64_t kSeed = 42;

struct Case {
  std::string name;
  int64_t samples;
  int ranks;
  bool baseline;
  int baseline_epochs;  // < kEpochs: measured on this many epochs and scaled
};

struct Result {
  bool ok = false;
  double wall_s = 0;
  double cpu_s = 0;
  double peak_mb = 0;
  bool peak_reset = false;  // the high-water mark could be reset after setup
  int64_t distinct = 0;     // samples the rank reads
  int64_t cached = 0;       // samples placed in classes 1..J
  char error[200] = {0};
};

double KiBField(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(status, line)) {
    if (line.compare(0, n, field) == 0) return std::atof(line.c_str() + n + 1);
  }
  return 0;
}

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

hdmlp::PlanOptions Options(const Case& c) {
  hdmlp::PlanOptions o;
  o.num_samples = c.samples;
  o.batch_size = kLocalBatch * c.ranks;
  o.epochs = kEpochs;
  o.world_size = c.ranks;
  o.seed = kSeed;
  return o;
}

// ImageNet-like JPEG sizes: 40..180 KB, mean about 110 KB.
std::vector<int64_t> Sizes(int64_t n) {
  hdmlp::Rng rng(7);
  std::vector<int64_t> sizes(static_cast<size_t>(n));
  for (int64_t& s : sizes) s = rng.UniformInt(40000, 180000);
  return sizes;
}

// Two cache classes after the staging buffer: 16 GiB of RAM and 64 GiB of
// local disk, so that both fill and part of a rank's share (about 130 GiB in
// both cases) stays on the PFS.
const std::vector<int64_t> kCapacities = {int64_t{4} << 30, int64_t{16} << 30, int64_t{64} << 30};

// The NoPFS-style baseline for `rank`: the whole dataset shuffled every
// epoch. Returns the rank's samples in frequency order (what NoPFS's
// sampler derives its placement from); `epochs` may be fewer than the job's
// to estimate a long run.
std::vector<int64_t> Baseline(const hdmlp::AccessPlan& plan, int rank, int epochs) {
  const int64_t n = plan.options().num_samples;
  const int64_t share = plan.RankEpochSize(rank);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::vector<int32_t> count(static_cast<size_t>(n), 0);
  std::vector<int64_t> first(static_cast<size_t>(n), 0);
  int64_t item = 0;
  for (int e = 0; e < epochs; ++e) {
    hdmlp::Rng rng(hdmlp::DeriveKey({plan.options().seed, static_cast<uint64_t>(e)}));
    for (int64_t i = n - 1; i > 0; --i) {
      std::swap(order[static_cast<size_t>(i)], order[rng.Uniform(static_cast<uint64_t>(i) + 1)]);
    }
    for (int64_t j = 0; j < share; ++j, ++item) {
      const int64_t s = order[static_cast<size_t>(plan.GlobalPosition(rank, j))];
      if (count[static_cast<size_t>(s)]++ == 0) first[static_cast<size_t>(s)] = item;
    }
  }
  std::vector<int64_t> samples;
  for (int64_t s = 0; s < n; ++s) {
    if (count[static_cast<size_t>(s)] > 0) samples.push_back(s);
  }
  std::sort(samples.begin(), samples.end(), [&](int64_t a, int64_t b) {
    const size_t x = static_cast<size_t>(a), y = static_cast<size_t>(b);
    return count[x] != count[y] ? count[x] > count[y] : first[x] < first[y];
  });
  return samples;
}

// Runs one case in a forked child and returns what it measured.
template <typename Setup, typename Work>
Result Measure(Setup setup, Work work) {
  int fds[2];
  if (pipe(fds) != 0) {
    Result r;
    std::snprintf(r.error, sizeof(r.error), "pipe failed");
    return r;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    Result r;
    try {
      auto inputs = setup();
      {
        std::ofstream clear("/proc/self/clear_refs");
        clear << "5";  // reset VmHWM to the current RSS (Linux >= 4.0)
        clear.flush();
        r.peak_reset = static_cast<bool>(clear);
      }
      const double rss0 = KiBField("VmRSS:");
      const double cpu0 = CpuSeconds();
      const double t0 = Now();
      work(inputs, r);
      r.wall_s = Now() - t0;
      r.cpu_s = CpuSeconds() - cpu0;
      r.peak_mb = (KiBField("VmHWM:") - rss0) / 1024.0;
      r.ok = true;
    } catch (const std::exception& e) {
      std::snprintf(r.error, sizeof(r.error), "%s", e.what());
    }
    ssize_t written = write(fds[1], &r, sizeof(r));
    _exit(written == static_cast<ssize_t>(sizeof(r)) ? 0 : 1);
  }
  close(fds[1]);
  Result r;
  if (pid < 0 || read(fds[0], &r, sizeof(r)) != static_cast<ssize_t>(sizeof(r))) {
    r = Result();
    std::snprintf(r.error, sizeof(r.error), "child failed");
  }
  close(fds[0]);
  if (pid > 0) waitpid(pid, nullptr, 0);
  return r;
}

Result RunBaseline(const Case& c) {
  return Measure([&] { return 0; },
                 [&](int, Result& r) {
                   const hdmlp::AccessPlan plan(Options(c));
                   r.distinct = static_cast<int64_t>(Baseline(plan, 0, c.baseline_epochs).size());
                 });
}

Result RunPlanner(const Case& c, int threads) {
  return Measure([&] { return Sizes(c.samples); },
                 [&](const std::vector<int64_t>& sizes, Result& r) {
                   const hdmlp::AccessPlan plan(Options(c));
                   hdmlp::PlanningOptions options;
                   options.threads = threads;
                   const hdmlp::Placement p = hdmlp::PlanPlacement(plan, 0, sizes, kCapacities, options);
                   r.distinct = p.rank_samples;
                   r.cached = p.cached_samples();
                 });
}

void PrintRow(const char* method, const Result& r, const char* note) {
  if (!r.ok) {
    std::printf("  %-28s failed: %s\n", method, r.error);
    return;
  }
  std::printf("  %-28s %9.3f %9.3f %9.1f %11lld %s\n", method, r.wall_s, r.cpu_s, r.peak_mb,
              static_cast<long long>(r.distinct), note);
}

}  // namespace

int main(int argc, char** argv) {
  const hdmlp_bench::LoadSample load_start = hdmlp_bench::SampleLoad();  // the machine before this runs
  int threads = 0;
  int baseline_epochs_22k = 3;
  bool baseline = true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (arg == "--baseline-epochs-22k" && i + 1 < argc) {
      baseline_epochs_22k = std::max(1, std::min(kEpochs, std::atoi(argv[++i])));
    } else if (arg == "--no-baseline") {
      baseline = false;
    } else {
      std::fprintf(stderr, "usage: %s [--threads N] [--baseline-epochs-22k K] [--no-baseline]\n", argv[0]);
      return 2;
    }
  }
  const std::vector<Case> cases = {
      {"ImageNet-1k x 90 epochs, 16 ranks", kImageNet1k, 16, baseline, kEpochs},
      {"ImageNet-22k x 90 epochs, 1024 ranks", kImageNet22k, 1024, baseline, baseline_epochs_22k},
  };
  std::printf("plan_scaling: one rank's placement plan; global batch = %lld x ranks, seed %llu, %ld cores online\n",
              static_cast<long long>(kLocalBatch), static_cast<unsigned long long>(kSeed), sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("peak = memory added by planning (VmHWM after - VmRSS before, sizes[] input excluded)\n\n");
  for (const Case& c : cases) {
    std::printf("%s (F = %lld)\n", c.name.c_str(), static_cast<long long>(c.samples));
    std::printf("  %-28s %9s %9s %9s %11s\n", "method", "wall [s]", "cpu [s]", "peak [MB]", "distinct");
    Result base;
    bool estimated = false;
    if (c.baseline) {
      base = RunBaseline(c);
      if (base.ok && c.baseline_epochs < kEpochs) {
        // Every epoch costs the same (a full shuffle); the final sort is
        // small next to it. Memory does not grow with epochs.
        const double scale = static_cast<double>(kEpochs) / c.baseline_epochs;
        base.wall_s *= scale;
        base.cpu_s *= scale;
        estimated = true;
      }
      char note[120] = "";
      if (estimated) {
        std::snprintf(note, sizeof(note), "ESTIMATE: %d epochs measured, time scaled x%.0f", c.baseline_epochs,
                      static_cast<double>(kEpochs) / c.baseline_epochs);
      }
      PrintRow("baseline (NoPFS shuffle)", base, note);
    }
    const Result one = RunPlanner(c, 1);
    PrintRow("hdmlp PlanPlacement, 1 thr", one, "");
    const Result many = RunPlanner(c, threads);
    char label[64];
    std::snprintf(label, sizeof(label), "hdmlp PlanPlacement, %s thr",
                  threads > 0 ? std::to_string(threads).c_str() : "auto");
    char cached[64];
    std::snprintf(cached, sizeof(cached), "(%lld cached)", static_cast<long long>(many.cached));
    PrintRow(label, many, cached);
    if (c.baseline && base.ok && one.ok && many.ok) {
      std::printf("  ratio baseline / hdmlp: wall %.1fx (1 thr %.1fx), cpu %.1fx, peak memory %.1fx%s\n",
                  base.wall_s / many.wall_s, base.wall_s / one.wall_s, base.cpu_s / one.cpu_s,
                  base.peak_mb / std::max(0.1, many.peak_mb), estimated ? "  (baseline time estimated)" : "");
    }
    if (!one.peak_reset) std::printf("  note: VmHWM could not be reset; peaks include setup\n");
    std::printf("\n");
  }

  // The per-rank cost shrinks with the number of ranks.
  std::printf("ImageNet-22k x 90 epochs, hdmlp PlanPlacement for one rank, by number of ranks\n");
  std::printf("  %-28s %9s %9s %9s %11s\n", "ranks", "wall [s]", "cpu [s]", "peak [MB]", "distinct");
  for (int ranks : {256, 1024, 4096}) {
    const Case c{"", kImageNet22k, ranks, false, kEpochs};
    PrintRow(std::to_string(ranks).c_str(), RunPlanner(c, threads), "");
  }
  hdmlp_bench::PrintLoadSummary(load_start, hdmlp_bench::SampleLoad(), static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  return 0;
}
