#include "hdmlp/source/file_list.h"

#include <limits.h>
#include <stdlib.h>

#include <algorithm>

#include "hdmlp/errors.h"
#include "hdmlp/source/regular_file.h"
#include "hdmlp/source/source.h"

namespace hdmlp {

std::string AsciiLower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

bool HasExtension(const std::string& name, const std::vector<std::string>& extensions) {
  const std::string lower = AsciiLower(name);
  for (const auto& ext : extensions) {
    if (lower.size() > ext.size() && lower.compare(lower.size() - ext.size(), ext.size(), ext) == 0) return true;
  }
  return false;
}

std::vector<ListedFile> ListDatasetFiles(Env* env, const std::string& spec, const std::string& what,
                                         const std::vector<std::string>& extensions) {
  std::vector<std::string> paths;
  std::string names;
  for (const auto& ext : extensions) names += (names.empty() ? "" : ", ") + ext;
  if (spec.find('{') != std::string::npos || spec.find(',') != std::string::npos) {
    paths = ExpandBraces(spec);
  } else {
    const FileInfo info = env->Stat(spec);
    if (!info.exists) throw NotFoundError(what + " '" + spec + "' does not exist");
    if (info.is_dir) {
      for (const auto& e : env->ListDir(spec)) {
        if (!e.is_dir && HasExtension(e.name, extensions)) paths.push_back(JoinPath(spec, e.name));
      }
      std::sort(paths.begin(), paths.end());
      if (paths.empty()) {
        throw NotFoundError("folder '" + spec + "' holds no " + what + " (no file named *" + names +
                            "); name the files with a list or a brace pattern instead");
      }
    } else {
      paths.push_back(spec);
    }
  }
  if (paths.empty()) throw NotFoundError("'" + spec + "' names no " + what);
  std::vector<ListedFile> files;
  for (const auto& p : paths) {
    const std::string from = p == spec ? "" : " (from '" + spec + "')";
    const FileInfo info = RequireRegularFile(env, p, what + " '" + p + "'" + from);
    if (!info.exists) throw NotFoundError(what + " '" + p + "'" + from + " does not exist");
    if (info.is_dir) throw InvalidArgumentError(what + " '" + p + "'" + from + " is a directory");
    ListedFile f;
    f.path = p;
    char buf[PATH_MAX];
    f.absolute = ::realpath(p.c_str(), buf) != nullptr ? std::string(buf) : p;
    f.size = info.size;
    f.mtime_ns = info.mtime_ns;
    files.push_back(std::move(f));
  }
  return files;
}

bool RecentlyModified(const std::vector<ListedFile>& files) {
  const int64_t now = NowRealtimeNs();
  for (const auto& f : files) {
    if (f.mtime_ns > now - 2'000'000'000LL) return true;
  }
  return false;
}

}  // namespace hdmlp
