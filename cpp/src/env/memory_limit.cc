#include "hdmlp/env/memory_limit.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

#include "hdmlp/env/cgroup.h"
#include "hdmlp/env/text_file.h"

namespace hdmlp {
namespace {

// "Key: 123 kB" lines of /proc files, in bytes; -1 when missing.
int64_t KbField(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) == 0) {
      long long kb = -1;
      if (std::sscanf(line.c_str() + key.size(), " %lld", &kb) == 1 && kb >= 0) return kb * 1024;
    }
  }
  return -1;
}

// A number in a cgroup file ("max", a huge v1 value: none, -1).
int64_t CgroupNumber(const std::string& path) {
  std::string text;
  if (!ReadTextFile(path, &text)) return -1;
  long long v = -1;
  if (std::sscanf(text.c_str(), "%lld", &v) != 1 || v < 0 || v >= (int64_t{1} << 60)) return -1;
  return v;
}

// A "key value" line of memory.stat, -1 when missing.
int64_t StatField(const std::string& path, const std::string& key) {
  std::string text;
  if (!ReadTextFile(path, &text)) return -1;
  std::istringstream in(text);
  std::string k;
  long long v;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return -1;
}

// The tightest headroom along this process's cgroup path, v2 then v1.
void CgroupLimit(MemoryLimit* best) {
  for (const CgroupLevel& level : CgroupLevels("memory")) {
    const std::string& dir = level.dir;
    const bool v2 = level.v2;
    const int64_t limit = CgroupNumber(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes"));
    if (limit < 0) continue;
    int64_t usage = CgroupNumber(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes"));
    // The working set: the page cache the kernel can drop first is not in the way.
    const int64_t inactive = StatField(dir + "/memory.stat", v2 ? "inactive_file" : "total_inactive_file");
    if (usage >= 0 && inactive > 0) usage = std::max<int64_t>(0, usage - inactive);
    if (usage < 0) usage = 0;
    const int64_t headroom = std::max<int64_t>(0, limit - usage);
    if (best->available < 0 || headroom < best->available) {
      best->available = headroom, best->limit = limit, best->used = usage;
      best->what = "the memory limit of cgroup '" + dir + "' (" + (v2 ? "memory.max" : "memory.limit_in_bytes") + ")";
      best->raise = "ask for more memory for the job (Slurm: --mem or --mem-per-cpu; a container's --memory)";
    }
  }
}

}  // namespace

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024 && u < 5) v /= 1024, ++u;
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", v, units[u]);
  return text;
}

std::string MemoryLimit::Describe() const {
  if (available < 0) return "no limit hdmlp can see";
  return FormatBytes(available) + " under " + what + " of " + FormatBytes(limit) + " (" +
         FormatBytes(std::max<int64_t>(used, 0)) + " of it in use)";
}

MemoryLimit ReadMemoryLimit() {
  MemoryLimit best;
  struct rlimit as;
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    std::string status;
    ReadTextFile("/proc/self/status", &status);
    const int64_t used = std::max<int64_t>(KbField(status, "VmSize:"), 0);
    const auto limit = static_cast<int64_t>(std::min<rlim_t>(as.rlim_cur, rlim_t{1} << 62));
    best.available = std::max<int64_t>(0, limit - used), best.limit = limit, best.used = used;
    best.what = "this process's address-space limit (RLIMIT_AS, ulimit -v)";
    best.raise = "raise the address-space limit (ulimit -v, or the batch system's setting that sets it)";
  }
  CgroupLimit(&best);
  std::string meminfo;
  if (ReadTextFile("/proc/meminfo", &meminfo)) {
    const int64_t available = KbField(meminfo, "MemAvailable:"), total = KbField(meminfo, "MemTotal:");
    if (available >= 0 && total > 0 && (best.available < 0 || available < best.available)) {
      best.available = available, best.limit = total, best.used = total - available;
      best.what = "the memory available on this machine (MemAvailable of MemTotal)";
      best.raise = "run where more memory is free (other processes hold the rest)";
    }
  }
  return best;
}

}  // namespace hdmlp
