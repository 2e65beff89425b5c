#include "hdmlp/config/cpu_budget.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <utility>

#include "hdmlp/env/cgroup.h"
#include "hdmlp/env/text_file.h"
#include "hdmlp/errors.h"

namespace hdmlp {
namespace {

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\n") - b + 1);
}

bool ParseNonNegative(const std::string& text, long long* value) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 18) return false;
  *value = std::stoll(text);
  return true;
}

// The affinity mask through the system call; every online CPU if it fails.
std::vector<int> AffinityCpus() {
  for (int size = 1024; size <= (1 << 20); size *= 4) {
    cpu_set_t* set = CPU_ALLOC(size);
    if (set == nullptr) break;
    const size_t bytes = CPU_ALLOC_SIZE(size);
    CPU_ZERO_S(bytes, set);
    if (sched_getaffinity(0, bytes, set) == 0) {
      std::vector<int> cpus;
      for (int c = 0; c < size; ++c) {
        if (CPU_ISSET_S(c, bytes, set)) cpus.push_back(c);
      }
      CPU_FREE(set);
      return cpus;
    }
    const int err = errno;
    CPU_FREE(set);
    if (err != EINVAL) break;  // EINVAL: the kernel's mask is larger; try again
  }
  std::vector<int> cpus;
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  for (long c = 0; c < std::max(1L, online); ++c) cpus.push_back(static_cast<int>(c));
  return cpus;
}

// A fake root's affinity: the Cpus_allowed_list line of its proc/self/status.
std::vector<int> StatusCpus(const std::string& root) {
  std::string status;
  if (ReadTextFile(root + "/proc/self/status", &status)) {
    for (const std::string& line : SplitText(status, '\n')) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0) return ParseCpuList(Trim(line.substr(18)));
    }
  }
  return {0};
}

// The quota in CPUs set in one cgroup directory, or 0 for none.
double QuotaIn(const std::string& dir, bool v2, std::string* source) {
  std::string text;
  if (v2) {
    if (!ReadTextFile(dir + "/cpu.max", &text)) return 0;
    std::istringstream in(text);
    std::string max, period;
    in >> max >> period;
    long long q = 0, p = 0;
    if (max == "max" || !ParseNonNegative(max, &q) || !ParseNonNegative(period, &p) || q == 0 || p == 0) return 0;
    *source = dir + "/cpu.max";
    return static_cast<double>(q) / static_cast<double>(p);
  }
  std::string period_text;
  if (!ReadTextFile(dir + "/cpu.cfs_quota_us", &text) || !ReadTextFile(dir + "/cpu.cfs_period_us", &period_text)) return 0;
  long long q = 0, p = 0;  // a quota of -1 means none, and fails to parse here
  if (!ParseNonNegative(Trim(text), &q) || !ParseNonNegative(Trim(period_text), &p) || q == 0 || p == 0) return 0;
  *source = dir + "/cpu.cfs_quota_us";
  return static_cast<double>(q) / static_cast<double>(p);
}

}  // namespace

int CpuBudget::UsableCpus() const {
  int n = std::max<int>(1, static_cast<int>(cpus.size()));
  if (quota_cpus > 0) n = std::min(n, std::max(1, static_cast<int>(std::ceil(quota_cpus - 1e-9))));
  return n;
}

std::string CpuBudget::Describe() const {
  std::ostringstream os;
  os << UsableCpus() << " CPUs (affinity " << FormatCpuList(cpus);
  if (quota_cpus > 0) os << "; cgroup quota " << quota_cpus << " CPUs from " << quota_source;
  os << ")";
  return os.str();
}

CpuBudget ReadCpuBudget(const std::string& root) {
  CpuBudget b;
  b.cpus = root.empty() ? AffinityCpus() : StatusCpus(root);
  if (b.cpus.empty()) b.cpus = {0};
  for (const CgroupLevel& level : CgroupLevels("cpu", root)) {
    std::string source;
    const double q = QuotaIn(level.dir, level.v2, &source);
    if (q > 0 && (b.quota_cpus == 0 || q < b.quota_cpus)) b.quota_cpus = q, b.quota_source = source;
  }
  return b;
}

std::vector<int> ParseCpuList(const std::string& text) {
  std::vector<int> cpus;
  const auto bad = [&](const std::string& why) {
    return InvalidArgumentError("bad CPU list \"" + text + "\": " + why + " (expected e.g. \"0-3,8\")");
  };
  const std::string trimmed = Trim(text);
  if (trimmed.empty()) throw bad("it is empty");
  for (const std::string& part : SplitText(trimmed, ',')) {
    const size_t dash = part.find('-');
    long long lo = 0, hi = 0;
    if (!ParseNonNegative(part.substr(0, dash), &lo) ||
        !ParseNonNegative(dash == std::string::npos ? part : part.substr(dash + 1), &hi)) {
      throw bad("\"" + part + "\" is not a CPU number or a range a-b");
    }
    if (hi < lo || hi > (1 << 20)) throw bad("\"" + part + "\" is not an ascending range of CPU numbers");
    for (long long c = lo; c <= hi; ++c) cpus.push_back(static_cast<int>(c));
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]) + (j > i ? "-" + std::to_string(cpus[j]) : "");
    i = j + 1;
  }
  return out;
}

bool CpuListsIntersect(const std::vector<int>& a, const std::vector<int>& b) {
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    if (a[i] == b[j]) return true;
    a[i] < b[j] ? ++i : ++j;
  }
  return false;
}

int ThreadsPerRank(int cpus, int ranks) { return std::max(1, cpus / std::max(1, ranks)); }

}  // namespace hdmlp
