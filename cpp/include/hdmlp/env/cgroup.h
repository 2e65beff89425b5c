// CgroupLevels: the cgroup directories whose limits apply to this process
// for one controller ("memory", "cpu"), for the limits read there (memory in
// env/memory_limit.h, the CPU quota in config/cpu_budget.h).
//
// For the cgroup v2 hierarchy and the v1 one that holds the controller
// (from /proc/self/mountinfo), this process's cgroup (from
// /proc/self/cgroup) and every level above it up to the mount's top: a
// limit set at any of them applies. A cgroup path that is not visible
// (another cgroup namespace) falls back to the mount point itself. `root`
// prefixes every path read ("" on a machine; tests point it at a fake tree).
//
// Thread-safety: reentrant.
#ifndef HDMLP_ENV_CGROUP_H_
#define HDMLP_ENV_CGROUP_H_

#include <string>
#include <vector>

namespace hdmlp {

struct CgroupLevel {
  std::string dir;  // with root prefixed
  bool v2 = false;
};

// Mounts in /proc/self/mountinfo's order, each from the process's cgroup upwards.
std::vector<CgroupLevel> CgroupLevels(const std::string& controller, const std::string& root = "");

}  // namespace hdmlp

#endif  // HDMLP_ENV_CGROUP_H_
