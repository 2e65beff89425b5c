// CpuBudget: how many CPUs this process may actually use, for sizing thread
// pools (a config's `threads = "auto"`).
//
// Two limits apply, whichever is tighter: the affinity mask (taskset, numactl,
// or an MPI launcher binding ranks to cores: sched_getaffinity(2)) and the
// CPU quota of the process's cgroup (a container's or a batch job's CPU
// limit: cgroup v2 `cpu.max`, or v1 `cpu.cfs_quota_us / cpu.cfs_period_us`,
// the tightest along the path from the process's cgroup up to the mount). A
// quota of 1.5 CPUs allows 2 threads, as the Go and Java runtimes count it.
// Ranks of one node that share CPUs then split them (ThreadsPerRank).
//
// Nothing here fails: a cgroup file that is missing or unreadable means no
// limit from it, and an unreadable affinity means every online CPU.
//
// Thread-safety: free functions without shared state.
#ifndef HDMLP_CONFIG_CPU_BUDGET_H_
#define HDMLP_CONFIG_CPU_BUDGET_H_

#include <string>
#include <vector>

namespace hdmlp {

struct CpuBudget {
  std::vector<int> cpus;      // the affinity mask's CPU numbers, ascending; never empty
  double quota_cpus = 0;      // the cgroup quota in CPUs; 0 when there is none
  std::string quota_source;   // the file the quota came from; empty when none

  // min(cpus.size(), ceil(quota_cpus)), at least 1.
  int UsableCpus() const;
  // "2 CPUs (affinity 0-1; cgroup quota 1.5 CPUs from /sys/fs/cgroup/cpu.max)".
  std::string Describe() const;
};

// This process's budget. `root` "" reads the real machine (sched_getaffinity,
// /proc/self/{cgroup,mountinfo} and the cgroup files they point to); any other
// value is a directory holding fake copies at the same paths below it, for
// tests: <root>/proc/self/status (its Cpus_allowed_list line stands in for
// sched_getaffinity), <root>/proc/self/cgroup, <root>/proc/self/mountinfo, and
// the cgroup files under <root><mount point>.
CpuBudget ReadCpuBudget(const std::string& root = "");

// "0-3,8,10-11" -> {0, 1, 2, 3, 8, 10, 11} (sorted, without repeats), the
// kernel's cpu list format. Throws InvalidArgumentError naming the text.
std::vector<int> ParseCpuList(const std::string& text);
// The inverse: {0, 1, 2, 3, 8} -> "0-3,8".
std::string FormatCpuList(const std::vector<int>& cpus);
bool CpuListsIntersect(const std::vector<int>& a, const std::vector<int>& b);

// Threads for each of `ranks` processes that share `cpus` CPUs: cpus / ranks
// rounded down (each rank's consumer and Python need a share too), at least 1.
int ThreadsPerRank(int cpus, int ranks);

}  // namespace hdmlp

#endif  // HDMLP_CONFIG_CPU_BUDGET_H_
