#include "hdmlp/cache/storage_class.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "hdmlp/errors.h"

namespace hdmlp {

std::string StorageClass::warning() const {
  std::lock_guard<std::mutex> lock(warning_mu_);
  return warning_;
}

void StorageClass::SetWarning(const std::string& warning) {
  std::lock_guard<std::mutex> lock(warning_mu_);
  if (warning_.empty()) warning_ = warning;
}

namespace {

class MemoryClass : public StorageClass {
 public:
  MemoryClass(const std::string& name, const std::vector<int64_t>& sizes)
      : StorageClass(name, "memory"), offsets_(sizes.size() + 1, 0) {
    for (size_t i = 0; i < sizes.size(); ++i) offsets_[i + 1] = offsets_[i] + sizes[i];
    // Left uninitialised: the kernel commits pages as samples arrive.
    arena_.reset(new uint8_t[static_cast<size_t>(std::max<int64_t>(offsets_.back(), 1))]);
  }

  bool Store(int64_t slot, int64_t, const uint8_t* data, int64_t size) override {
    if (size != PlannedSize(slot)) return false;  // the file changed since the scan
    std::memcpy(arena_.get() + offsets_[static_cast<size_t>(slot)], data, static_cast<size_t>(size));
    return true;
  }

  bool Read(int64_t slot, int64_t, int64_t, SampleBuffer* out) override {
    *out = SampleBuffer::Allocate(PlannedSize(slot));
    std::memcpy(out->data.get(), arena_.get() + offsets_[static_cast<size_t>(slot)], static_cast<size_t>(out->size));
    return true;
  }

 private:
  int64_t PlannedSize(int64_t slot) const {
    return offsets_[static_cast<size_t>(slot) + 1] - offsets_[static_cast<size_t>(slot)];
  }

  std::vector<int64_t> offsets_;
  std::unique_ptr<uint8_t[]> arena_;
};

std::string HostName() {
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) != 0) return "host";
  std::string s(host);
  for (char& c : s) {
    if (c == '-' || c == '/') c = '_';
  }
  return s;
}

constexpr const char* kFolderPrefix = "hdmlp-job-";

// Removes folders of earlier jobs on this host whose process no longer runs.
void RemoveStaleFolders(Env* env, const std::string& path, const std::string& host) {
  std::vector<DirEntry> entries;
  try {
    entries = env->ListDir(path);
  } catch (const Error&) {
    return;
  }
  const std::string prefix = std::string(kFolderPrefix) + host + "-";
  for (const auto& entry : entries) {
    if (!entry.is_dir || entry.name.compare(0, prefix.size(), prefix) != 0) continue;
    const long pid = std::strtol(entry.name.c_str() + prefix.size(), nullptr, 10);
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // still running
    try {
      env->RemoveTree(JoinPath(path, entry.name));
    } catch (const Error&) {
      // Somebody else's leftovers we cannot remove are not our failure.
    }
  }
}

class FilesystemClass : public StorageClass {
 public:
  FilesystemClass(Env* env, const std::string& name, const std::string& path)
      : StorageClass(name, "filesystem"), env_(env) {
    const std::string host = HostName();
    RemoveStaleFolders(env, path, host);
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, "%ld-%08x", static_cast<long>(::getpid()),
                  static_cast<unsigned>(std::random_device()()));
    folder_ = JoinPath(path, std::string(kFolderPrefix) + host + "-" + suffix);
    try {
      env_->CreateDirs(folder_);
    } catch (const Error& e) {
      throw IOError("storage class '" + name + "': cannot create its folder under '" + path + "' (" + e.what() +
                    "); its samples stay on the PFS");
    }
  }
  ~FilesystemClass() override { Release(); }

  bool Store(int64_t, int64_t sample, const uint8_t* data, int64_t size) override {
    if (broken_.load()) return false;
    try {
      env_->WriteFileAtomic(FileOf(sample), data, size);
      return true;
    } catch (const Error& e) {
      broken_ = true;
      SetWarning("storage class '" + name() + "' stopped caching: " + e.what() +
                 "; the samples it has not stored are read from the PFS");
      return false;
    }
  }

  bool Read(int64_t, int64_t sample, int64_t size, SampleBuffer* out) override {
    try {
      auto file = env_->OpenForRead(FileOf(sample));
      if (file->Size() != size) return false;  // not what was stored: never hand out wrong bytes
      *out = SampleBuffer::Allocate(size);
      file->ReadExact(0, out->data.get(), size);
      return true;
    } catch (const Error&) {
      return false;
    }
  }

  void Release() override {
    if (released_.exchange(true)) return;
    try {
      env_->RemoveTree(folder_);
    } catch (const Error&) {
    }
  }

  const std::string& folder() const { return folder_; }

 private:
  std::string FileOf(int64_t sample) const { return JoinPath(folder_, std::to_string(sample) + ".bin"); }

  Env* env_;
  std::string folder_;
  std::atomic<bool> broken_{false};
  std::atomic<bool> released_{false};
};

}  // namespace

std::unique_ptr<StorageClass> MakeMemoryClass(const std::string& name, const std::vector<int64_t>& planned_sizes) {
  return std::make_unique<MemoryClass>(name, planned_sizes);
}

std::unique_ptr<StorageClass> MakeFilesystemClass(Env* env, const std::string& name, const std::string& path) {
  return std::make_unique<FilesystemClass>(env, name, path);
}

std::string FilesystemClassFolder(const StorageClass& filesystem_class) {
  const auto* fs = dynamic_cast<const FilesystemClass*>(&filesystem_class);
  return fs != nullptr ? fs->folder() : "";
}

}  // namespace hdmlp
