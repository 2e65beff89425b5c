#include "hdmlp/util/phase_timer.h"

#include <time.h>

namespace hdmlp {
namespace {

double Seconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

double ThreadCpuSeconds() { return Seconds(CLOCK_THREAD_CPUTIME_ID); }

double ProcessCpuSeconds() { return Seconds(CLOCK_PROCESS_CPUTIME_ID); }

PhaseTimer::PhaseTimer()
    : started_at_(Seconds(CLOCK_REALTIME)),
      lap_wall_(std::chrono::steady_clock::now()),
      lap_cpu_(ThreadCpuSeconds()),
      lap_process_cpu_(ProcessCpuSeconds()) {}

void PhaseTimer::Lap(const std::string& name) {
  const auto wall = std::chrono::steady_clock::now();
  const double cpu = ThreadCpuSeconds(), process_cpu = ProcessCpuSeconds();
  phases_.push_back({name, std::chrono::duration<double>(wall - lap_wall_).count(), cpu - lap_cpu_,
                     process_cpu - lap_process_cpu_});
  lap_wall_ = wall;
  lap_cpu_ = cpu;
  lap_process_cpu_ = process_cpu;
}

}  // namespace hdmlp
