#include "hdmlp/env/cgroup.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "hdmlp/env/text_file.h"

namespace hdmlp {
namespace {

bool Has(const std::string& list, const std::string& controller) {
  const std::vector<std::string> names = SplitText(list, ',');
  return std::find(names.begin(), names.end(), controller) != names.end();
}

// This process's cgroup paths: "0::/path" (v2) and "N:cpu,cpuacct:/path" (v1).
struct CgroupPaths {
  bool has_v2 = false, has_v1 = false;
  std::string v2, v1;
};

CgroupPaths ReadCgroupPaths(const std::string& controller, const std::string& root) {
  CgroupPaths paths;
  std::string text;
  if (!ReadTextFile(root + "/proc/self/cgroup", &text)) return paths;
  for (const std::string& line : SplitText(text, '\n')) {
    const size_t a = line.find(':'), z = a == std::string::npos ? a : line.find(':', a + 1);
    if (z == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, z - a - 1);
    std::string path = line.substr(z + 1);
    path.erase(path.find_last_not_of(" \t") + 1);
    path.erase(0, path.find_first_not_of(" \t"));
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      paths.v2 = path, paths.has_v2 = true;
    } else if (Has(controllers, controller)) {
      paths.v1 = path, paths.has_v1 = true;
    }
  }
  return paths;
}

}  // namespace

std::vector<CgroupLevel> CgroupLevels(const std::string& controller, const std::string& root) {
  std::vector<CgroupLevel> levels;
  const CgroupPaths paths = ReadCgroupPaths(controller, root);
  std::string text;
  if (!(paths.has_v2 || paths.has_v1) || !ReadTextFile(root + "/proc/self/mountinfo", &text)) return levels;
  for (const std::string& line : SplitText(text, '\n')) {
    // id parent major:minor root mount-point options [optional...] - fstype source super-options
    std::istringstream in(line);
    std::vector<std::string> f;
    for (std::string w; in >> w;) f.push_back(w);
    const auto dash = std::find(f.begin(), f.end(), "-");
    if (f.size() < 5 || dash == f.end() || f.end() - dash < 4) continue;
    const bool v2 = dash[1] == "cgroup2";
    if (!(v2 && paths.has_v2) && !(dash[1] == "cgroup" && paths.has_v1 && Has(dash[3], controller))) continue;
    const std::string& mount_root = f[3];
    std::string rel = v2 ? paths.v2 : paths.v1;
    if (mount_root != "/" && rel.rfind(mount_root, 0) == 0) rel = rel.substr(mount_root.size());
    const std::string top = root + f[4];
    std::string dir = top + (rel == "/" ? "" : rel);
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) dir = top;
    for (;;) {
      levels.push_back({dir, v2});
      if (dir.size() <= top.size()) break;
      const size_t slash = dir.rfind('/');
      if (slash == std::string::npos || slash < top.size()) break;
      dir = dir.substr(0, std::max(slash, top.size()));
    }
  }
  return levels;
}

}  // namespace hdmlp
