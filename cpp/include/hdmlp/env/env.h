// Env: every access hdmlp makes to storage goes through this interface.
//
// Following LevelDB's Env, the core never calls the OS directly for file
// access. Env::Default() is the POSIX implementation; tests and benchmarks
// wrap it (ThrottledEnv) to inject slow or failing storage without touching
// the code under test. Paths are plain strings as the OS takes them.
//
// Contract: methods throw hdmlp::NotFoundError for a missing path,
// hdmlp::NotADirectoryError where a directory was required, and
// hdmlp::IOError for any other failure; every message names the path.
// Thread-safety: all methods may be called from many threads at once; so
// may a ReadableFile's (the sources keep a shard open and pread it from
// every staging thread).
#ifndef HDMLP_ENV_ENV_H_
#define HDMLP_ENV_ENV_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hdmlp {

struct FileInfo {
  bool exists = false;
  bool is_dir = false;      // follows symbolic links
  int64_t size = 0;
  int64_t mtime_ns = 0;
};

struct DirEntry {
  std::string name;
  bool is_dir = false;  // follows symbolic links, as Python's os.scandir does
};

class ReadableFile {
 public:
  virtual ~ReadableFile() = default;
  // Size of the open file (not of the path, which may change meanwhile).
  virtual int64_t Size() = 0;
  // Reads exactly n bytes at offset into dst or throws IOError.
  virtual void ReadExact(int64_t offset, uint8_t* dst, int64_t n) = 0;
};

class Env {
 public:
  Env() = default;
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;
  virtual ~Env() = default;

  // The process-wide POSIX environment; never deleted.
  static Env* Default();

  virtual FileInfo Stat(const std::string& path) = 0;
  virtual std::vector<DirEntry> ListDir(const std::string& path) = 0;
  virtual std::unique_ptr<ReadableFile> OpenForRead(const std::string& path) = 0;
  // Writes the whole file under a temporary name, then renames it into place,
  // so a reader never sees a half-written file.
  virtual void WriteFileAtomic(const std::string& path, const void* data, int64_t n) = 0;
  virtual void CreateDirs(const std::string& path) = 0;
  virtual void RemoveFile(const std::string& path) = 0;  // a missing file is fine
  // Removes a folder and everything in it; a missing folder is fine.
  virtual void RemoveTree(const std::string& path) = 0;

  // Convenience: the whole file in a string.
  std::string ReadWholeFile(const std::string& path);
};

// Wraps another Env and slows or breaks its reads, for tests and benchmarks.
// Counts every read so tests can check how often each file was fetched.
class ThrottledEnv : public Env {
 public:
  struct Options {
    double read_latency_s = 0;        // added to every OpenForRead
    double read_bandwidth_mbps = 0;   // 0: unlimited; else per-reader MB/s
    std::vector<std::string> failing_paths;  // reads of these throw IOError
    int64_t write_quota_bytes = -1;          // >= 0: writes past this many bytes fail as on a full disk
    std::string read_only_prefix;            // non-empty: creating or writing below it fails (EACCES)
  };
  ThrottledEnv(Env* base, Options options);

  FileInfo Stat(const std::string& path) override;
  std::vector<DirEntry> ListDir(const std::string& path) override;
  std::unique_ptr<ReadableFile> OpenForRead(const std::string& path) override;
  void WriteFileAtomic(const std::string& path, const void* data, int64_t n) override;
  void CreateDirs(const std::string& path) override;
  void RemoveFile(const std::string& path) override;
  void RemoveTree(const std::string& path) override;

  int64_t files_opened() const;
  int64_t reads() const;  // ReadExact calls on files it opened

 private:
  class ThrottledFile;
  Env* base_;
  Options options_;
  std::shared_ptr<struct ThrottledEnvCounters> counters_;
};

// Joins two path parts the way Python's os.path.join does for relative parts.
std::string JoinPath(const std::string& base, const std::string& rel);

}  // namespace hdmlp

#endif  // HDMLP_ENV_ENV_H_
