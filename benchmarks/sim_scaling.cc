// sim_scaling: what simulating a job costs (issue #7, "Scale").
//
// Runs hdmlp::sim::Simulate for one workload and prints wall time (planning
// the caches and the event loop separately), CPU time, events and the peak
// memory of the process (VmHWM), one line per run. Used for the scaling
// table of docs/simulator.md, e.g. the target case
//
//   build/<dir>/sim_scaling --config configs/sim_fits_all_nodes.cfg
//       --nodes 1024 --samples 1281167 --epochs 90 --batch-size 32768 --policy hdmlp
//
// Every flag: --config, --nodes, --samples, --sample-mb (0.11), --sample-std-mb
// (0.05), --epochs, --batch-size (global), --compute-mbps (130),
// --preprocess-mbps (0), --policy (hdmlp), --seed (0), --threads (0: auto),
// --decompose (1; 0: the event-by-event loop throughout, the reference).
#include <malloc.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "hdmlp/config/config.h"
#include "hdmlp/errors.h"
#include "hdmlp/sim/model.h"
#include "hdmlp/sim/simulator.h"

#include "lab/machine_load.h"

namespace {

double PeakMb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
  return -1;
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  const hdmlp_bench::LoadSample load_start = hdmlp_bench::SampleLoad();  // the machine before this runs
  // Planning builds and frees a few MB of buffers per node, on two threads:
  // with glibc's defaults each is handed back to the kernel and faulted in
  // again for the next node (a fifth of the planning time at 1024 nodes).
  // Keep freed memory in the process instead (the peak does not grow: the
  // next node reuses it). `hdmlp simulate` gets the same from
  // GLIBC_TUNABLES=glibc.malloc.trim_threshold=536870912:glibc.malloc.mmap_threshold=33554432.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  std::string config_path = "configs/sim_fits_all_nodes.cfg";
  std::string policy = "hdmlp";
  hdmlp::sim::Workload w;
  int64_t samples = 1281167;
  double mean_mb = 0.11, std_mb = 0.05;
  int threads = 0;
  bool decompose = true;
  w.nodes = 16;
  w.epochs = 90;
  w.batch_size = 0;
  w.compute_mbps = 130;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* v = argv[i + 1];
    if (flag == "--config") config_path = v;
    else if (flag == "--nodes") w.nodes = std::atoi(v);
    else if (flag == "--samples") samples = std::atoll(v);
    else if (flag == "--sample-mb") mean_mb = std::atof(v);
    else if (flag == "--sample-std-mb") std_mb = std::atof(v);
    else if (flag == "--epochs") w.epochs = std::atoi(v);
    else if (flag == "--batch-size") w.batch_size = std::atoll(v);
    else if (flag == "--compute-mbps") w.compute_mbps = std::atof(v);
    else if (flag == "--preprocess-mbps") w.preprocess_mbps = std::atof(v);
    else if (flag == "--policy") policy = v;
    else if (flag == "--seed") w.seed = std::strtoull(v, nullptr, 10);
    else if (flag == "--threads") threads = std::atoi(v);
    else if (flag == "--decompose") decompose = std::atoi(v) != 0;
    else {
      std::fprintf(stderr, "sim_scaling: unknown flag %s (see the comment at the top of the source)\n", argv[i]);
      return 2;
    }
  }
  if (w.batch_size == 0) w.batch_size = 32 * static_cast<int64_t>(w.nodes);
  try {
    const hdmlp::Config config = hdmlp::Config::LoadFile(config_path);
    w.sizes = hdmlp::sim::NormalSampleSizes(samples, mean_mb, std_mb, w.seed);
    const double base_mb = PeakMb();
    hdmlp::sim::SimulationOptions options;
    options.threads = threads;
    options.decompose = decompose;
    const double cpu0 = CpuSeconds();
    const hdmlp::sim::SimulationResult r = hdmlp::sim::Simulate(config, w, hdmlp::sim::ParsePolicy(policy), options);
    std::printf("policy=%s nodes=%d samples=%lld epochs=%d batch=%lld: predicted %.3f s (stall %.3f s); "
                "planning %.1f s + events %.1f s wall, %.1f s cpu; %lld events, %lld cached copies, "
                "%lld global batches decomposed (%.1f s of the events, %lld copies still to fill then); "
                "peak %.0f MB (sizes alone %.0f MB)\n",
                policy.c_str(), w.nodes, static_cast<long long>(samples), w.epochs,
                static_cast<long long>(w.batch_size), r.seconds, r.stall_seconds, r.planning_seconds,
                r.simulation_seconds, CpuSeconds() - cpu0, static_cast<long long>(r.events),
                static_cast<long long>(r.cached_samples), static_cast<long long>(r.decomposed_batches),
                r.decomposed_seconds, static_cast<long long>(r.decomposed_unfilled),
                PeakMb(), base_mb);
  } catch (const hdmlp::Error& e) {
    std::fprintf(stderr, "sim_scaling: %s\n", e.what());
    return 1;
  }
  hdmlp_bench::PrintLoadSummary(load_start, hdmlp_bench::SampleLoad(), static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  return 0;
}
