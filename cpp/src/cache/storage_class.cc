#include "hdmlp/cache/storage_class.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <new>
#include <random>
#include <shared_mutex>
#include <unordered_set>

#include "hdmlp/errors.h"
#include "hdmlp/util/checksum.h"
#include "hdmlp/util/huge_pages.h"

namespace hdmlp {

std::string StorageClass::warning() const {
  std::lock_guard<std::mutex> lock(warning_mu_);
  return warning_;
}

void StorageClass::SetWarning(const std::string& warning) {
  std::lock_guard<std::mutex> lock(warning_mu_);
  if (warning_.empty()) warning_ = warning;
}

std::string StorageClass::corruption_warning() const {
  std::lock_guard<std::mutex> lock(warning_mu_);
  return corruption_warning_;
}

void StorageClass::SetCorruptionWarning(const std::string& warning) {
  std::lock_guard<std::mutex> lock(warning_mu_);
  if (corruption_warning_.empty()) corruption_warning_ = warning;
}

namespace {

class MemoryClass : public StorageClass {
 public:
  MemoryClass(const std::string& name, const std::vector<int64_t>& sizes)
      : StorageClass(name, "memory"), offsets_(sizes.size() + 1, 0) {
    for (size_t i = 0; i < sizes.size(); ++i) offsets_[i + 1] = offsets_[i] + sizes[i];
    // Left uninitialised: the kernel commits pages as samples arrive.
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(offsets_.back(), 1));
    arena_.reset(new uint8_t[bytes]);
    prefaulted_ = std::vector<std::atomic<bool>>(bytes / kStretch + 1);
  }

  bool Store(int64_t slot, int64_t, const uint8_t* data, int64_t size) override {
    if (size != PlannedSize(slot)) return false;  // the file changed since the scan
    PrefaultStretches(offsets_[static_cast<size_t>(slot)], size);
    std::memcpy(arena_.get() + offsets_[static_cast<size_t>(slot)], data, static_cast<size_t>(size));
    return true;
  }

  bool Read(int64_t slot, int64_t, int64_t, SampleBuffer* out) override {
    *out = SampleBuffer::Allocate(PlannedSize(slot));
    std::memcpy(out->data.get(), arena_.get() + offsets_[static_cast<size_t>(slot)], static_cast<size_t>(out->size));
    return true;
  }

  const uint8_t* StoredBytes(int64_t slot) const override { return arena_.get() + offsets_[static_cast<size_t>(slot)]; }

 private:
  int64_t PlannedSize(int64_t slot) const {
    return offsets_[static_cast<size_t>(slot) + 1] - offsets_[static_cast<size_t>(slot)];
  }

  // Samples arrive in about the order of their slots, so the arena fills from
  // its start: the first sample stored in each stretch faults the stretch in.
  void PrefaultStretches(int64_t offset, int64_t size) {
    for (int64_t s = offset / kStretch; s <= (offset + size) / kStretch; ++s) {
      bool expected = false;
      const int64_t begin = s * kStretch;
      if (begin < offsets_.back() && prefaulted_[static_cast<size_t>(s)].compare_exchange_strong(expected, true)) {
        PrefaultForWrite(arena_.get() + begin, static_cast<size_t>(std::min(kStretch, offsets_.back() - begin)));
      }
    }
  }

  static constexpr int64_t kStretch = int64_t{8} << 20;
  std::vector<int64_t> offsets_;
  std::unique_ptr<uint8_t[]> arena_;
  std::vector<std::atomic<bool>> prefaulted_;  // one flag per stretch
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
// A folder is made under this prefix, locked, then renamed to its final
// name: a folder under the final name always has its lock file.
constexpr const char* kNewFolderPrefix = ".hdmlp-new-";
constexpr const char* kLockFile = ".lock";
// Folders without a lock file (made by an older hdmlp, or by a job that
// crashed while making one) are removed once they are this old.
constexpr int64_t kUnlockedFolderAgeNs = int64_t{3600} * 1000000000;

bool StartsWith(const std::string& s, const char* prefix) {
  return s.compare(0, std::strlen(prefix), prefix) == 0;
}

// Removes the folders of this user's jobs that are gone: a live job holds
// the lock of its folder (an flock, released by the kernel however the job
// ends), so a folder whose lock can be taken is nobody's, whatever host or
// PID namespace made it. Another user's folders (root's sweep included) and
// anything that is not a folder (a symbolic link planted under the prefix)
// are left alone, without an error.
void RemoveStaleFolders(Env* env, const std::string& path) {
  std::vector<DirEntry> entries;
  try {
    entries = env->ListDir(path);
  } catch (const Error&) {
    return;
  }
  for (const auto& entry : entries) {
    if (!entry.is_dir) continue;
    const bool made = StartsWith(entry.name, kFolderPrefix);
    if (!made && !StartsWith(entry.name, kNewFolderPrefix)) continue;
    const std::string folder = JoinPath(path, entry.name);
    const std::string lock_path = JoinPath(folder, kLockFile);
    try {
      const FileInfo itself = env->LinkStat(folder);
      if (itself.kind != FileKind::kDirectory || itself.uid != static_cast<int64_t>(::geteuid())) continue;
      // A folder being made (or left half made by a crash), or one of an
      // older hdmlp without a lock: only an old one is surely nobody's.
      if (!made || !env->Stat(lock_path).exists) {
        const FileInfo info = env->Stat(folder);
        if (info.exists && NowRealtimeNs() - info.mtime_ns > kUnlockedFolderAgeNs) env->RemoveTree(folder);
        continue;
      }
      const std::unique_ptr<FileLock> lock = env->TryLockFile(lock_path, /*create=*/false);
      if (lock == nullptr) continue;  // a live job's
      env->RemoveTree(folder);        // holding its lock: no job can be using it
    } catch (const Error&) {
      // Removed by another sweeper meanwhile, or leftovers we cannot remove:
      // not our failure.
    }
  }
}

class FilesystemClass : public StorageClass {
 public:
  FilesystemClass(Env* env, const std::string& name, const std::string& path)
      : StorageClass(name, "filesystem"), env_(env) {
    RemoveStaleFolders(env, path);
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, "%ld-%08x", static_cast<long>(::getpid()),
                  static_cast<unsigned>(std::random_device()()));
    const std::string unique = HostName() + "-" + suffix;
    folder_ = JoinPath(path, std::string(kFolderPrefix) + unique);
    const std::string making = JoinPath(path, std::string(kNewFolderPrefix) + unique);
    bool made = false;
    try {
      // The class's folder may be shared (a node's scratch disk); the job's own is private (mode 0700,
      // its files 0600) and new: anything found at its path, a folder or a symbolic link, is refused.
      env_->CreateDirs(path);
      env_->CreatePrivateDir(making);
      made = true;
      lock_ = env_->TryLockFile(JoinPath(making, kLockFile), /*create=*/true);
      if (lock_ == nullptr) throw IOError("cannot lock '" + JoinPath(making, kLockFile) + "'");
      env_->RenameNoReplace(making, folder_);
    } catch (const Error& e) {
      lock_.reset();
      try {
        if (made) env_->RemoveTree(making);  // only what this job made: never what it found there
      } catch (const Error&) {
      }
      throw IOError("storage class '" + name + "': cannot create its folder under '" + path + "' (" + e.what() +
                    "); its samples stay on the PFS");
    }
  }
  ~FilesystemClass() override { Release(); }

  // A file holds the sample's bytes and then their checksum (8 bytes), so a
  // file changed behind hdmlp's back (a failing disk, another process) is
  // never served.
  bool Store(int64_t, int64_t sample, const uint8_t* data, int64_t size) override {
    // Shared with other stores, exclusive with Release: nothing is written
    // into the folder once its removal has begun.
    std::shared_lock<std::shared_mutex> gate(gate_);
    if (released_ || broken_.load()) return false;
    try {
      std::unique_ptr<uint8_t[]> file(new uint8_t[static_cast<size_t>(size) + sizeof(uint64_t)]);
      std::memcpy(file.get(), data, static_cast<size_t>(size));
      const uint64_t sum = Checksum64(data, static_cast<size_t>(size));
      std::memcpy(file.get() + size, &sum, sizeof sum);
      env_->WriteFileAtomic(FileOf(sample), file.get(), size + static_cast<int64_t>(sizeof sum));
      {
        std::lock_guard<std::mutex> lock(drop_mu_);
        dropped_samples_.erase(sample);  // a new file: a change to it is a new drop
      }
      return true;
    } catch (const std::bad_alloc&) {
      return false;  // the sample stays on the PFS
    } catch (const Error& e) {
      broken_ = true;
      SetWarning("storage class '" + name() + "' stopped caching: " + e.what() +
                 "; the samples it has not stored are read from the PFS");
      return false;
    }
  }

  bool Read(int64_t, int64_t sample, int64_t size, SampleBuffer* out) override {
    const std::string path = FileOf(sample);
    SampleBuffer bytes;
    try {
      auto file = env_->OpenForRead(path);
      const auto stored = size + static_cast<int64_t>(sizeof(uint64_t));
      if (file->Size() != stored) return Drop(sample, path, "has " + std::to_string(file->Size()) + " bytes, not " +
                                                  std::to_string(stored));
      bytes = SampleBuffer::Allocate(stored);
      file->ReadExact(0, bytes.data.get(), stored);
    } catch (const std::bad_alloc&) {
      return false;
    } catch (const Error&) {
      return false;  // e.g. removed: never hand out wrong bytes
    }
    uint64_t sum;
    std::memcpy(&sum, bytes.data.get() + size, sizeof sum);
    if (sum != Checksum64(bytes.data.get(), static_cast<size_t>(size))) return Drop(sample, path, "does not match its checksum");
    bytes.size = size;
    *out = std::move(bytes);
    return true;
  }

  void Release() override {
    std::unique_lock<std::shared_mutex> gate(gate_);
    if (released_) return;
    released_ = true;
    try {
      env_->RemoveTree(folder_);
    } catch (const Error&) {
    }
    lock_.reset();
  }

  const std::string& folder() const { return folder_; }

 private:
  std::string FileOf(int64_t sample) const { return JoinPath(folder_, std::to_string(sample) + ".bin"); }

  // A cached file that is not what was stored: removed, counted, and the
  // caller reads the sample from the dataset's storage. Two readers that
  // find the same file changed (an epoch's last reads overlap the next
  // epoch's first) count it once.
  bool Drop(int64_t sample, const std::string& path, const std::string& why) {
    try {
      env_->RemoveFile(path);
    } catch (const Error&) {
    }
    {
      std::lock_guard<std::mutex> lock(drop_mu_);
      if (!dropped_samples_.insert(sample).second) return false;
    }
    if (dropped_.fetch_add(1) == 0) {
      SetCorruptionWarning("storage class '" + name() + "': the cached file '" + path + "' " + why +
                           ": it was changed after hdmlp wrote it (a failing disk, or another process); it was "
                           "dropped and its sample read from the dataset's storage instead (metrics()[\"classes\"] "
                           "counts such files in dropped_corrupt)");
    }
    return false;
  }

  Env* env_;
  std::string folder_;
  std::unique_ptr<FileLock> lock_;
  std::shared_mutex gate_;
  bool released_ = false;  // guarded by gate_
  std::atomic<bool> broken_{false};
  std::mutex drop_mu_;
  std::unordered_set<int64_t> dropped_samples_;  // dropped since last stored; guarded by drop_mu_
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
