// PhaseTimer: wall and CPU seconds of the consecutive phases of one thread's
// work, such as a Job's start-up (docs/cluster.md explains start-up time on
// several nodes with it).
//
// The clock starts when the timer is made; each Lap(name) ends the phase
// under way as `name` and starts the next, so the phases add up to the time
// from construction to the last lap. Per phase it keeps the wall seconds
// (steady clock), the calling thread's CPU seconds (CLOCK_THREAD_CPUTIME_ID)
// and the process's CPU seconds (CLOCK_PROCESS_CPUTIME_ID: every thread of
// the process, so also the helper threads a phase runs in parallel, MPI's own
// threads, and whatever else the process runs at the time). Wall well above
// CPU is waiting: for I/O, for other ranks, or for cores other processes hold.
//
// Thread-safety: none; one thread laps (the one whose CPU time is measured).
// Read phases() once the laps are done.
#ifndef HDMLP_UTIL_PHASE_TIMER_H_
#define HDMLP_UTIL_PHASE_TIMER_H_

#include <chrono>
#include <string>
#include <vector>

namespace hdmlp {

// The calling thread's CPU seconds (a system call, well under a microsecond).
// Wall seconds on the steady clock since `start`.
inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double ThreadCpuSeconds();
// The whole process's CPU seconds, all its threads together.
double ProcessCpuSeconds();

struct PhaseTime {
  std::string name;
  double wall_seconds = 0;
  double cpu_seconds = 0;          // the lapping thread's
  double process_cpu_seconds = 0;  // all the process's threads
};

class PhaseTimer {
 public:
  PhaseTimer();

  // Ends the phase under way as `name` and starts the next one.
  void Lap(const std::string& name);

  const std::vector<PhaseTime>& phases() const { return phases_; }
  // When the timer was made, in seconds since the Unix epoch (the system
  // clock, comparable between the processes of one machine).
  double started_at() const { return started_at_; }

 private:
  double started_at_;
  std::chrono::steady_clock::time_point lap_wall_;
  double lap_cpu_;
  double lap_process_cpu_;
  std::vector<PhaseTime> phases_;
};

}  // namespace hdmlp

#endif  // HDMLP_UTIL_PHASE_TIMER_H_
