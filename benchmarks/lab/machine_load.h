// machine_load.h: the C++ benchmarks' record of what else the machine was
// doing, by the same rule as benchmarks/lab/machine.py (read that file's
// docstring): the load averages, the CPU time of other processes (all CPUs'
// busy time from /proc/stat minus this process's own, children included) and
// the hypervisor's steal, and a warning when other processes took more than a
// tenth of a core during a measurement, or the 1-minute load average was above
// 0.25 per core when the benchmark started. Header-only, for benchmarks.
#ifndef HDMLP_BENCHMARKS_MACHINE_LOAD_H_
#define HDMLP_BENCHMARKS_MACHINE_LOAD_H_

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <string>

namespace hdmlp_bench {

constexpr double kBusyOtherCores = 0.10;
constexpr double kBusyLoadPerCore = 0.25;
constexpr double kMinOtherSeconds = 0.05;  // fewer ticks than this: too short to judge

struct LoadSample {
  double wall_s = 0;
  long long busy_ticks = 0;  // all CPUs: user + nice + system + irq + softirq
  long long steal_ticks = 0;
  double own_cpu_s = 0;      // this process and its reaped children
  double load[3] = {0, 0, 0};
};

inline LoadSample SampleLoad() {
  LoadSample s;
  s.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  std::ifstream stat("/proc/stat");
  std::string cpu;
  long long v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (stat >> cpu && cpu == "cpu") {
    for (long long& x : v) stat >> x;
  }
  s.busy_ticks = v[0] + v[1] + v[2] + v[5] + v[6];
  s.steal_ticks = v[7];
  std::ifstream loadavg("/proc/loadavg");
  loadavg >> s.load[0] >> s.load[1] >> s.load[2];
  for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    rusage u{};
    getrusage(who, &u);
    s.own_cpu_s += u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
  }
  return s;
}

struct LoadUsage {
  double wall_s, other_cpu_s, steal_s, other_cores;
  bool busy;
  std::string why;
};

inline LoadUsage Usage(const LoadSample& a, const LoadSample& b, int cores, bool judge_start_load) {
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  LoadUsage u{};
  u.wall_s = std::max(b.wall_s - a.wall_s, 1e-9);
  u.other_cpu_s = std::max(0.0, (b.busy_ticks - a.busy_ticks) / tick - (b.own_cpu_s - a.own_cpu_s));
  u.steal_s = (b.steal_ticks - a.steal_ticks) / tick;
  u.other_cores = (u.other_cpu_s + u.steal_s) / u.wall_s;
  std::ostringstream why;
  why << std::fixed << std::setprecision(2);
  if (u.other_cores > kBusyOtherCores && u.other_cpu_s + u.steal_s > kMinOtherSeconds) why << "other processes used " << u.other_cores << " cores on average";
  if (judge_start_load && a.load[0] > kBusyLoadPerCore * cores) {
    why << (why.str().empty() ? "" : "; ") << "the 1-minute load average was " << a.load[0] << " at the start";
  }
  u.why = why.str();
  u.busy = !u.why.empty();
  return u;
}

// "load average 0.12/0.30/0.41 -> 1.90/0.80/0.52; other processes 0.4 CPU s in 20 s (0.02 cores)"
inline void PrintLoadSummary(const LoadSample& start, const LoadSample& end, int cores) {
  const LoadUsage u = Usage(start, end, cores, true);
  std::printf("\nload average %.2f/%.2f/%.2f at the start, %.2f/%.2f/%.2f at the end; other processes used "
              "%.1f CPU s in %.0f s (%.2f cores, steal %.1f s)\n",
              start.load[0], start.load[1], start.load[2], end.load[0], end.load[1], end.load[2], u.other_cpu_s,
              u.wall_s, u.other_cores, u.steal_s);
  if (u.busy) {
    std::printf("WARNING: the machine was busy during this benchmark (%s): these numbers are provisional; re-run "
                "on a quiet machine before quoting them.\n",
                u.why.c_str());
  }
}

}  // namespace hdmlp_bench

#endif  // HDMLP_BENCHMARKS_MACHINE_LOAD_H_
