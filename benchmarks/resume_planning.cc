// resume_planning: what planning the placement costs a resumed job, against
// planning the whole job, side by side in one run (issue 14).
//
// A job resumed at epoch e of E plans its storage classes for what is left
// (plan/resume_point.h): CountRankAccesses evaluates only the positions from
// the resume point on. This measures PlanPlacement for one rank of an
// ImageNet-1k job (90 epochs, 8 and 64 ranks, global batch 32 per rank, a
// cache for a quarter of what the rank reads per epoch) started at epoch 0
// and resumed 100 batches into epochs 30, 60 and 89: the counting alone and
// the whole PlanPlacement, median of 5 runs. Both follow the reads left (and
// the distinct samples among them), not the epochs done.
//
// Build: cmake -DHDMLP_BUILD_BENCHMARKS=ON (build/resume_planning), or by hand
//   g++ -std=c++17 -O2 -I cpp/include cpp/src/plan/*.cc cpp/src/errors.cc
//       benchmarks/resume_planning.cc -pthread -o /tmp/resume_planning      (one line)
// Run:   /tmp/resume_planning [--threads N]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "hdmlp/plan/access_plan.h"
#include "hdmlp/plan/placement.h"

namespace {

constexpr int64_t kSamples = 1281167;
constexpr int kEpochs = 90;
constexpr int64_t kLocalBatch = 32;  // global batch = 32 * ranks

struct Timing {
  double count_s = 0;  // CountRankAccesses alone
  double plan_s = 0;   // PlanPlacement (counting included)
  int64_t reads = 0;   // reads the rank has left
  int64_t distinct = 0;
};

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

Timing Measure(int ranks, int epoch, int threads) {
  hdmlp::PlanOptions o;
  o.num_samples = kSamples;
  o.batch_size = kLocalBatch * ranks;
  o.epochs = kEpochs;
  o.world_size = ranks;
  o.seed = 42;
  if (epoch > 0) o.start = hdmlp::ResumePoint{epoch, o.batch_size * 100, ranks};  // 100 batches into the epoch
  const hdmlp::AccessPlan plan(o);
  hdmlp::PlanningOptions planning;
  planning.threads = threads;
  Timing t;
  auto start = std::chrono::steady_clock::now();
  const std::vector<hdmlp::SampleUse> uses = hdmlp::CountRankAccesses(plan, 0, planning);
  t.count_s = Since(start);
  t.distinct = static_cast<int64_t>(uses.size());
  t.reads = kEpochs * plan.RankEpochSize(0) - plan.StartItem(0);
  const std::vector<int64_t> sizes(static_cast<size_t>(kSamples), 110000);  // ~110 kB, ImageNet's mean
  // A cache for a quarter of what one rank reads per epoch.
  const std::vector<int64_t> capacities = {0, plan.RankEpochSize(0) / 4 * 110000};
  start = std::chrono::steady_clock::now();
  hdmlp::PlanPlacement(plan, 0, sizes, capacities, planning);
  t.plan_s = Since(start);
  return t;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--threads N]\n", argv[0]);
      return 2;
    }
  }
  std::printf("ImageNet-1k (%lld samples), %d epochs, global batch 32 per rank, rank 0, %d planning thread(s); "
              "median of 5\n", static_cast<long long>(kSamples), kEpochs, threads);
  std::printf("%5s  %-22s %12s %12s %10s %10s %12s\n", "ranks", "start", "reads left", "distinct", "count s",
              "plan s", "vs whole job");
  for (const int ranks : {8, 64}) {
    double whole = 0;
    for (const int epoch : {0, 30, 60, 89}) {
      std::vector<double> count, plan;
      Timing t;
      for (int r = 0; r < 5; ++r) {
        t = Measure(ranks, epoch, threads);
        count.push_back(t.count_s);
        plan.push_back(t.plan_s);
      }
      const double p = Median(plan);
      if (epoch == 0) whole = p;
      std::printf("%5d  %-22s %12lld %12lld %10.3f %10.3f %11.2fx\n", ranks,
                  epoch == 0 ? "epoch 0 (whole job)" : ("epoch " + std::to_string(epoch) + ", batch 100").c_str(),
                  static_cast<long long>(t.reads), static_cast<long long>(t.distinct), Median(count), p, p / whole);
    }
  }
  return 0;
}
