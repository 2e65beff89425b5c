#include "hdmlp/env/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <random>
#include <thread>

#include "hdmlp/errors.h"

namespace hdmlp {
namespace {

[[noreturn]] void ThrowErrno(const std::string& what, const std::string& path, int err) {
  std::string msg = what + " '" + path + "': " + std::strerror(err);
  if (err == ENOENT) throw NotFoundError(msg);
  if (err == ENOTDIR) throw NotADirectoryError(msg);
  throw IOError(msg);
}

FileKind KindOf(mode_t mode) {
  if (S_ISREG(mode)) return FileKind::kRegular;
  if (S_ISDIR(mode)) return FileKind::kDirectory;
  if (S_ISFIFO(mode)) return FileKind::kFifo;
  if (S_ISSOCK(mode)) return FileKind::kSocket;
  if (S_ISCHR(mode)) return FileKind::kCharDevice;
  if (S_ISBLK(mode)) return FileKind::kBlockDevice;
  if (S_ISLNK(mode)) return FileKind::kSymlink;
  return FileKind::kOther;
}

FileInfo InfoOf(const struct stat& st) {
  FileInfo info;
  info.exists = true;
  info.kind = KindOf(st.st_mode);
  info.is_dir = info.kind == FileKind::kDirectory;
  info.size = st.st_size;
  info.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  info.uid = static_cast<int64_t>(st.st_uid);
  return info;
}

// What is at `path` itself, for messages: "a symbolic link", "a directory", ...
std::string WhatIsAt(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return "something";
  return FileKindName(KindOf(st.st_mode)) + std::string(st.st_uid == ::geteuid() ? "" : " of another user");
}

class PosixFile : public ReadableFile {
 public:
  PosixFile(const std::string& path, int fd) : ReadableFile(path), fd_(fd) {}
  ~PosixFile() override { ::close(fd_); }

  FileInfo Info() override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) ThrowErrno("cannot stat", path(), errno);
    return InfoOf(st);
  }

  int64_t ReadUpTo(int64_t offset, uint8_t* dst, int64_t n) override {
    int64_t done = 0;
    while (done < n) {
      ssize_t got = ::pread(fd_, dst + done, static_cast<size_t>(n - done), offset + done);
      if (got < 0) {
        if (errno == EINTR) continue;
        ThrowErrno("cannot read", path(), errno);
      }
      if (got == 0) break;
      done += got;
    }
    return done;
  }

 private:
  int fd_;
};

class PosixFileLock : public FileLock {
 public:
  explicit PosixFileLock(int fd) : fd_(fd) {}
  ~PosixFileLock() override { ::close(fd_); }  // closing the last descriptor releases the lock

 private:
  int fd_;
};

// What ::stat or ::lstat says of `path`; no FileInfo where nothing is there.
FileInfo StatWith(int (*stat_call)(const char*, struct stat*), const std::string& path) {
  struct stat st;
  if (stat_call(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return FileInfo();
    ThrowErrno("cannot stat", path, errno);
  }
  return InfoOf(st);
}

class PosixEnv : public Env {
 public:
  FileInfo Stat(const std::string& path) override { return StatWith(::stat, path); }
  FileInfo LinkStat(const std::string& path) override { return StatWith(::lstat, path); }

  std::vector<DirEntry> ListDir(const std::string& path) override {
    DIR* dir = ::opendir(path.c_str());
    if (dir == nullptr) ThrowErrno("cannot list directory", path, errno);
    std::vector<DirEntry> entries;
    const int dfd = ::dirfd(dir);
    errno = 0;
    while (struct dirent* e = ::readdir(dir)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      DirEntry entry;
      entry.name = e->d_name;
      if (e->d_type == DT_DIR) {
        entry.is_dir = true;
      } else if (e->d_type == DT_LNK || e->d_type == DT_UNKNOWN) {
        struct stat st;
        entry.is_dir = ::fstatat(dfd, e->d_name, &st, 0) == 0 && S_ISDIR(st.st_mode);
      }
      entries.push_back(std::move(entry));
      errno = 0;
    }
    const int err = errno;
    ::closedir(dir);
    if (err != 0) ThrowErrno("cannot list directory", path, err);
    return entries;
  }

  std::unique_ptr<ReadableFile> OpenForRead(const std::string& path) override {
    int fd;
    // O_NONBLOCK: opening a FIFO would otherwise wait for a writer forever.
    do {
      fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) ThrowErrno("cannot open", path, errno);
    auto file = std::make_unique<PosixFile>(path, fd);
    const FileKind kind = file->Info().kind;
    if (kind != FileKind::kRegular) {
      throw IOError("cannot read '" + path + "': it is " + FileKindName(kind) +
                    ", not a regular file (hdmlp reads regular files only)");
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return file;
  }

  void WriteFileAtomic(const std::string& path, const void* data, int64_t n) override {
    // Unique per process and call, and not guessable: two writers never
    // share a temporary file, and nobody can plant one in advance. O_EXCL |
    // O_NOFOLLOW: whatever is at the name (a symbolic link to another file)
    // fails the write instead of being written through.
    static std::atomic<uint64_t> counter{0};
    thread_local std::mt19937_64 random{std::random_device()() ^ (static_cast<uint64_t>(::getpid()) << 32)};
    char suffix[24];
    std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(random()));
    std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1)) + "." +
                      suffix;
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      const int err = errno;
      if (err == EEXIST || err == ELOOP) {
        throw IOError("cannot create '" + tmp + "': " + WhatIsAt(tmp) +
                      " is already at this new temporary name (planted there?); hdmlp never writes through it");
      }
      ThrowErrno("cannot create", tmp, err);
    }
    ::fchmod(fd, 0600);  // whatever the umask: the user's alone
    const auto* p = static_cast<const uint8_t*>(data);
    int64_t done = 0;
    while (done < n) {
      ssize_t put = ::write(fd, p + done, static_cast<size_t>(n - done));
      if (put < 0) {
        if (errno == EINTR) continue;
        const int err = errno;
        ::close(fd);
        ::unlink(tmp.c_str());
        ThrowErrno("cannot write", tmp, err);
      }
      done += put;
    }
    if (::close(fd) != 0) {
      const int err = errno;
      ::unlink(tmp.c_str());
      ThrowErrno("cannot write", tmp, err);
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      const int err = errno;
      ::unlink(tmp.c_str());
      ThrowErrno("cannot rename into", path, err);
    }
  }

  void CreateDirs(const std::string& path) override {
    std::string partial;
    size_t pos = 0;
    while (pos != std::string::npos) {
      pos = path.find('/', pos + 1);
      partial = path.substr(0, pos);
      if (partial.empty()) continue;
      if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) ThrowErrno("cannot create directory", partial, errno);
    }
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      throw NotADirectoryError("cannot create directory '" + path + "': a file of that name is in the way");
    }
  }

  void CreatePrivateDir(const std::string& path) override {
    if (::mkdir(path.c_str(), 0700) != 0) {
      const int err = errno;
      if (err == EEXIST) {
        throw IOError("cannot create the private folder '" + path + "': " + WhatIsAt(path) +
                      " is already there, and hdmlp never reuses or follows what it finds at a new folder's path");
      }
      ThrowErrno("cannot create directory", path, err);
    }
    // Opened without following a link: the folder just made, or nothing.
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) ThrowErrno("cannot open the new folder", path, errno);
    struct stat st;
    const bool ours = ::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid();
    const bool private_mode = ours && ::fchmod(fd, 0700) == 0;  // whatever the umask
    ::close(fd);
    if (!private_mode) {
      throw IOError("cannot make the folder '" + path + "' private (mode 0700, owned by this user): it was replaced "
                    "while being made, or its file system does not keep modes");
    }
  }

  void Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) ThrowErrno("cannot rename '" + from + "' to", to, errno);
  }

  void RenameNoReplace(const std::string& from, const std::string& to) override {
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return;
    const int err = errno;
    if (err == EEXIST) {
      throw IOError("cannot rename '" + from + "' to '" + to + "': " + WhatIsAt(to) +
                    " is already there, and hdmlp never replaces what it finds at its folder's path");
    }
    if (err != EINVAL && err != ENOSYS) ThrowErrno("cannot rename '" + from + "' to", to, err);
    // A file system without RENAME_NOREPLACE: look first (a narrow race, in a folder whose parent the
    // user chose).
    struct stat st;
    if (::lstat(to.c_str(), &st) == 0) {
      throw IOError("cannot rename '" + from + "' to '" + to + "': " + WhatIsAt(to) +
                    " is already there, and hdmlp never replaces what it finds at its folder's path");
    }
    Rename(from, to);
  }

  void RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) ThrowErrno("cannot remove", path, errno);
  }

  void RemoveTree(const std::string& path) override {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    if (ec && ec != std::errc::no_such_file_or_directory) {
      throw IOError("cannot remove folder '" + path + "': " + ec.message());
    }
  }

  std::unique_ptr<FileLock> TryLockFile(const std::string& path, bool create) override {
    int fd;
    do {
      fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), 0600);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) ThrowErrno("cannot open lock file", path, errno);
    int rc;
    do {
      rc = ::flock(fd, LOCK_EX | LOCK_NB);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      const int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK) return nullptr;
      ThrowErrno("cannot lock", path, err);
    }
    return std::make_unique<PosixFileLock>(fd);
  }
};

}  // namespace

int64_t NowRealtimeNs() {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

const char* FileKindName(FileKind kind) {
  switch (kind) {
    case FileKind::kMissing:
      return "missing";
    case FileKind::kRegular:
      return "a regular file";
    case FileKind::kDirectory:
      return "a directory";
    case FileKind::kFifo:
      return "a FIFO (named pipe)";
    case FileKind::kSocket:
      return "a socket";
    case FileKind::kCharDevice:
      return "a character device";
    case FileKind::kBlockDevice:
      return "a block device";
    case FileKind::kSymlink:
      return "a symbolic link";
    case FileKind::kOther:
      break;
  }
  return "not a regular file";
}

void ReadableFile::ReadExact(int64_t offset, uint8_t* dst, int64_t n) {
  const int64_t got = ReadUpTo(offset, dst, n);
  if (got < n) {
    throw IOError("file '" + path() + "' is shorter than expected (" + std::to_string(offset + got) + " of " +
                  std::to_string(offset + n) + " bytes): it changed while being read");
  }
}

Env* Env::Default() {
  static PosixEnv* env = new PosixEnv();  // never destroyed: threads may outlive static destruction
  return env;
}

std::string Env::ReadWholeFile(const std::string& path) {
  auto file = OpenForRead(path);
  // One byte more than stat says, so that the end of the file is seen.
  std::string data(static_cast<size_t>(std::max<int64_t>(file->Size(), 0) + 1), '\0');
  int64_t done = 0;
  for (;;) {
    const int64_t got = file->ReadUpTo(done, reinterpret_cast<uint8_t*>(data.data()) + done,
                                       static_cast<int64_t>(data.size()) - done);
    done += got;
    if (done < static_cast<int64_t>(data.size())) break;  // short read: the end
    data.resize(data.size() * 2);
  }
  data.resize(static_cast<size_t>(done));
  return data;
}

std::string JoinPath(const std::string& base, const std::string& rel) {
  if (base.empty()) return rel;
  if (!rel.empty() && rel[0] == '/') return rel;
  if (base.back() == '/') return base + rel;
  return base + "/" + rel;
}

// ---------------------------------------------------------------------------

struct ThrottledEnvCounters {
  std::atomic<int64_t> files_opened{0};
  std::atomic<int64_t> reads{0};
  std::atomic<int64_t> bytes_written{0};
  std::atomic<int64_t> reads_in_flight{0};
  std::atomic<int64_t> max_reads_in_flight{0};
};

class ThrottledEnv::ThrottledFile : public ReadableFile {
 public:
  ThrottledFile(std::unique_ptr<ReadableFile> base, double mbps, std::shared_ptr<ThrottledEnvCounters> counters)
      : ReadableFile(base->path()), base_(std::move(base)), mbps_(mbps), counters_(std::move(counters)) {}
  FileInfo Info() override { return base_->Info(); }
  int64_t ReadUpTo(int64_t offset, uint8_t* dst, int64_t n) override {
    const auto start = std::chrono::steady_clock::now();
    const int64_t now_in_flight = counters_->reads_in_flight.fetch_add(1) + 1;
    int64_t max = counters_->max_reads_in_flight.load();
    while (now_in_flight > max && !counters_->max_reads_in_flight.compare_exchange_weak(max, now_in_flight)) {
    }
    int64_t got = 0;
    try {
      got = base_->ReadUpTo(offset, dst, n);
    } catch (...) {
      counters_->reads_in_flight.fetch_sub(1);
      throw;
    }
    if (got > 0) counters_->reads.fetch_add(1);  // a read that finds the end is not one
    if (mbps_ > 0) {
      const auto budget = std::chrono::duration<double>(static_cast<double>(got) / (mbps_ * 1e6));
      std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(budget));
    }
    counters_->reads_in_flight.fetch_sub(1);
    return got;
  }

 private:
  std::unique_ptr<ReadableFile> base_;
  double mbps_;
  std::shared_ptr<ThrottledEnvCounters> counters_;
};

ThrottledEnv::ThrottledEnv(Env* base, Options options)
    : base_(base), options_(std::move(options)), counters_(std::make_shared<ThrottledEnvCounters>()) {}

FileInfo ThrottledEnv::Stat(const std::string& path) { return base_->Stat(path); }
FileInfo ThrottledEnv::LinkStat(const std::string& path) { return base_->LinkStat(path); }
std::vector<DirEntry> ThrottledEnv::ListDir(const std::string& path) { return base_->ListDir(path); }
namespace {
bool Below(const std::string& path, const std::string& prefix) {
  return !prefix.empty() && path.compare(0, prefix.size(), prefix) == 0;
}
}  // namespace

void ThrottledEnv::WriteFileAtomic(const std::string& path, const void* data, int64_t n) {
  if (Below(path, options_.read_only_prefix)) {
    throw IOError("cannot write '" + path + "': Permission denied (injected by ThrottledEnv)");
  }
  if (options_.write_quota_bytes >= 0 &&
      counters_->bytes_written.fetch_add(n) + n > options_.write_quota_bytes) {
    throw IOError("cannot write '" + path + "': No space left on device (injected by ThrottledEnv)");
  }
  base_->WriteFileAtomic(path, data, n);
}
void ThrottledEnv::CreateDirs(const std::string& path) {
  if (Below(path, options_.read_only_prefix)) {
    throw IOError("cannot create directory '" + path + "': Permission denied (injected by ThrottledEnv)");
  }
  base_->CreateDirs(path);
}
void ThrottledEnv::CreatePrivateDir(const std::string& path) {
  if (Below(path, options_.read_only_prefix)) {
    throw IOError("cannot create directory '" + path + "': Permission denied (injected by ThrottledEnv)");
  }
  base_->CreatePrivateDir(path);
}
void ThrottledEnv::Rename(const std::string& from, const std::string& to) {
  if (Below(to, options_.read_only_prefix)) {
    throw IOError("cannot rename into '" + to + "': Permission denied (injected by ThrottledEnv)");
  }
  base_->Rename(from, to);
}
void ThrottledEnv::RenameNoReplace(const std::string& from, const std::string& to) {
  if (Below(to, options_.read_only_prefix)) {
    throw IOError("cannot rename into '" + to + "': Permission denied (injected by ThrottledEnv)");
  }
  base_->RenameNoReplace(from, to);
}
void ThrottledEnv::RemoveFile(const std::string& path) { base_->RemoveFile(path); }
void ThrottledEnv::RemoveTree(const std::string& path) { base_->RemoveTree(path); }
std::unique_ptr<FileLock> ThrottledEnv::TryLockFile(const std::string& path, bool create) {
  return base_->TryLockFile(path, create);
}
int64_t ThrottledEnv::files_opened() const { return counters_->files_opened.load(); }
int64_t ThrottledEnv::max_reads_in_flight() const { return counters_->max_reads_in_flight.load(); }
int64_t ThrottledEnv::reads() const { return counters_->reads.load(); }

std::unique_ptr<ReadableFile> ThrottledEnv::OpenForRead(const std::string& path) {
  counters_->files_opened.fetch_add(1);
  if (options_.read_latency_s > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(options_.read_latency_s));
  }
  for (const auto& failing : options_.failing_paths) {
    if (failing == path) throw IOError("cannot read '" + path + "': injected failure (ThrottledEnv)");
  }
  return std::make_unique<ThrottledFile>(base_->OpenForRead(path), options_.read_bandwidth_mbps, counters_);
}

}  // namespace hdmlp
