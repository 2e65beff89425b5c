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
// OpenForRead opens regular files only: a FIFO, socket or device (which
// could block a reader forever, or never end) is refused with an IOError
// naming its kind, without waiting for a writer.
// Files and folders hdmlp writes are its user's alone: WriteFileAtomic makes
// files of mode 0600 and CreatePrivateDir folders of mode 0700, whatever the
// umask; neither follows a symbolic link or reuses what it finds at its path
// (a temporary file is opened with O_EXCL | O_NOFOLLOW). Caches on a scratch
// disk that several users share keep their samples from the others.
// Thread-safety: all methods may be called from many threads at once; so
// may a ReadableFile's (not copyable; the sources keep a shard open and
// pread it from every staging thread).
#ifndef HDMLP_ENV_ENV_H_
#define HDMLP_ENV_ENV_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hdmlp {

// What a path is, following symbolic links (LinkStat: kSymlink for a link itself).
enum class FileKind { kMissing, kRegular, kDirectory, kFifo, kSocket, kCharDevice, kBlockDevice, kSymlink, kOther };
// "a FIFO", "a socket", ...: for messages.
const char* FileKindName(FileKind kind);

struct FileInfo {
  bool exists = false;
  bool is_dir = false;      // follows symbolic links
  FileKind kind = FileKind::kMissing;
  int64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t uid = -1;  // the owner (-1: unknown)
};

// The system clock now, in nanoseconds since the Unix epoch: the clock of mtime_ns.
int64_t NowRealtimeNs();

struct DirEntry {
  std::string name;
  bool is_dir = false;  // follows symbolic links, as Python's os.scandir does
};

class ReadableFile {
 public:
  explicit ReadableFile(std::string path) : path_(std::move(path)) {}
  ReadableFile(const ReadableFile&) = delete;
  ReadableFile& operator=(const ReadableFile&) = delete;
  virtual ~ReadableFile() = default;
  const std::string& path() const { return path_; }
  // Size and modification time of the open file (not of the path, which may
  // change meanwhile), as fstat reports them.
  virtual FileInfo Info() = 0;
  int64_t Size() { return Info().size; }
  // Reads up to n bytes at offset into dst; returns how many were read, fewer
  // than n only at the end of the file (0 there). Throws IOError.
  virtual int64_t ReadUpTo(int64_t offset, uint8_t* dst, int64_t n) = 0;
  // Reads exactly n bytes at offset into dst or throws IOError.
  void ReadExact(int64_t offset, uint8_t* dst, int64_t n);

 private:
  const std::string path_;
};

// An exclusive advisory lock (flock) on a file, held until destroyed. A lock
// belongs to the open file: another process (or another open of the same
// file) cannot take it meanwhile, and it is released when the holder dies,
// however it dies. Not copyable.
class FileLock {
 public:
  FileLock() = default;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  virtual ~FileLock() = default;
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
  // What is at `path` itself: a symbolic link is kSymlink, not what it points to.
  virtual FileInfo LinkStat(const std::string& path) = 0;
  virtual std::vector<DirEntry> ListDir(const std::string& path) = 0;
  virtual std::unique_ptr<ReadableFile> OpenForRead(const std::string& path) = 0;
  // Writes the whole file under a temporary name, then renames it into place,
  // so a reader never sees a half-written file. The file has mode 0600; the
  // temporary name is new (PID, counter and a random part) and opened with
  // O_EXCL | O_NOFOLLOW: whatever is planted there is an IOError, never
  // written through.
  virtual void WriteFileAtomic(const std::string& path, const void* data, int64_t n) = 0;
  // Makes `path` and the folders above it that are missing (mode 0755 less
  // the umask); an existing folder is fine.
  virtual void CreateDirs(const std::string& path) = 0;
  // Makes the folder `path` (its parent exists) for this user alone: mode
  // 0700 whatever the umask. Anything already at `path` (a folder, a file, a
  // symbolic link) is an IOError naming it: such a folder is never reused.
  virtual void CreatePrivateDir(const std::string& path) = 0;
  // Renames a file or folder atomically (both paths on one file system).
  virtual void Rename(const std::string& from, const std::string& to) = 0;
  // As Rename, but anything already at `to` (a folder, a symbolic link) is
  // an IOError naming it, and stays as it was.
  virtual void RenameNoReplace(const std::string& from, const std::string& to) = 0;
  virtual void RemoveFile(const std::string& path) = 0;  // a missing file is fine
  // Removes a folder and everything in it; a missing folder is fine.
  virtual void RemoveTree(const std::string& path) = 0;
  // Takes the lock of `path` without waiting (creating the file when
  // `create`); nullptr when somebody else holds it. Throws NotFoundError when
  // the file is missing and !create, IOError for other failures.
  virtual std::unique_ptr<FileLock> TryLockFile(const std::string& path, bool create) = 0;

  // Convenience: the whole file in a string, read to its end (whatever size
  // stat reports: files under /proc say 0).
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
  FileInfo LinkStat(const std::string& path) override;
  std::vector<DirEntry> ListDir(const std::string& path) override;
  std::unique_ptr<ReadableFile> OpenForRead(const std::string& path) override;
  void WriteFileAtomic(const std::string& path, const void* data, int64_t n) override;
  void CreateDirs(const std::string& path) override;
  void CreatePrivateDir(const std::string& path) override;
  void Rename(const std::string& from, const std::string& to) override;
  void RenameNoReplace(const std::string& from, const std::string& to) override;
  void RemoveFile(const std::string& path) override;
  void RemoveTree(const std::string& path) override;
  std::unique_ptr<FileLock> TryLockFile(const std::string& path, bool create) override;

  int64_t files_opened() const;
  int64_t reads() const;  // reads (ReadExact or ReadUpTo calls that found bytes) of files it opened
  // The most ReadUpTo calls on files it opened that were under way at once
  // (each one's bandwidth sleep included): how many reads a loader keeps in flight.
  int64_t max_reads_in_flight() const;

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
