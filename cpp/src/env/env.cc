#include "hdmlp/env/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
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

class PosixFile : public ReadableFile {
 public:
  PosixFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixFile() override { ::close(fd_); }

  int64_t Size() override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) ThrowErrno("cannot stat", path_, errno);
    return st.st_size;
  }

  void ReadExact(int64_t offset, uint8_t* dst, int64_t n) override {
    int64_t done = 0;
    while (done < n) {
      ssize_t got = ::pread(fd_, dst + done, static_cast<size_t>(n - done), offset + done);
      if (got < 0) {
        if (errno == EINTR) continue;
        ThrowErrno("cannot read", path_, errno);
      }
      if (got == 0) {
        throw IOError("file '" + path_ + "' is shorter than expected (" + std::to_string(offset + done) +
                      " of " + std::to_string(offset + n) + " bytes): it changed while being read");
      }
      done += got;
    }
  }

 private:
  std::string path_;
  int fd_;
};

class PosixEnv : public Env {
 public:
  FileInfo Stat(const std::string& path) override {
    FileInfo info;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) return info;
      ThrowErrno("cannot stat", path, errno);
    }
    info.exists = true;
    info.is_dir = S_ISDIR(st.st_mode);
    info.size = st.st_size;
    info.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    return info;
  }

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
    do {
      fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) ThrowErrno("cannot open", path, errno);
    return std::make_unique<PosixFile>(path, fd);
  }

  void WriteFileAtomic(const std::string& path, const void* data, int64_t n) override {
    std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                      std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()) % 100000);
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) ThrowErrno("cannot create", tmp, errno);
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
};

}  // namespace

Env* Env::Default() {
  static PosixEnv* env = new PosixEnv();  // never destroyed: threads may outlive static destruction
  return env;
}

std::string Env::ReadWholeFile(const std::string& path) {
  auto file = OpenForRead(path);
  std::string data(static_cast<size_t>(file->Size()), '\0');
  file->ReadExact(0, reinterpret_cast<uint8_t*>(data.data()), static_cast<int64_t>(data.size()));
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
};

class ThrottledEnv::ThrottledFile : public ReadableFile {
 public:
  ThrottledFile(std::unique_ptr<ReadableFile> base, double mbps, std::shared_ptr<ThrottledEnvCounters> counters)
      : base_(std::move(base)), mbps_(mbps), counters_(std::move(counters)) {}
  int64_t Size() override { return base_->Size(); }
  void ReadExact(int64_t offset, uint8_t* dst, int64_t n) override {
    counters_->reads.fetch_add(1);
    const auto start = std::chrono::steady_clock::now();
    base_->ReadExact(offset, dst, n);
    if (mbps_ > 0) {
      const auto budget = std::chrono::duration<double>(static_cast<double>(n) / (mbps_ * 1e6));
      std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(budget));
    }
  }

 private:
  std::unique_ptr<ReadableFile> base_;
  double mbps_;
  std::shared_ptr<ThrottledEnvCounters> counters_;
};

ThrottledEnv::ThrottledEnv(Env* base, Options options)
    : base_(base), options_(std::move(options)), counters_(std::make_shared<ThrottledEnvCounters>()) {}

FileInfo ThrottledEnv::Stat(const std::string& path) { return base_->Stat(path); }
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
void ThrottledEnv::RemoveFile(const std::string& path) { base_->RemoveFile(path); }
void ThrottledEnv::RemoveTree(const std::string& path) { base_->RemoveTree(path); }
int64_t ThrottledEnv::files_opened() const { return counters_->files_opened.load(); }
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
