// StorageClass: one level of a rank's local cache hierarchy.
//
// A storage class keeps the bytes of the samples the placement assigned to
// it (placement.h). The set of samples and their sizes is fixed when the
// class is made, so a class can lay out its space once: the memory class
// preallocates a single arena and never allocates per sample; the
// filesystem class keeps one file per sample in a folder of its own.
//
// Contract: Store(slot) is called at most once per slot at a time (the
// CacheHierarchy's per-sample state guarantees it) and may fail (false), for
// a full or unwritable disk: the sample then stays on the PFS. Read(slot)
// is only called after a successful Store and returns false, never wrong
// bytes, if what it finds is not what was stored: a filesystem class keeps
// a checksum (util/checksum.h) after each file's bytes and verifies it on
// every read; a file that does not match is removed, counted in
// dropped_corrupt() and reported once through corruption_warning(). A class
// that can no longer write reports why through warning(). After Release()
// a class stores nothing more: a Store racing with it either finishes
// before the folder is removed or does not write at all.
// A class that holds its samples in memory also lends them in place
// (StoredBytes): a stored slot is never rewritten or moved, so the pointer
// stays valid, and its bytes unchanged, for the class's life.
// Thread-safety: Store and Read on different slots may run concurrently;
// Read and StoredBytes of one slot may run concurrently with other Reads of it.
#ifndef HDMLP_CACHE_STORAGE_CLASS_H_
#define HDMLP_CACHE_STORAGE_CLASS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hdmlp/env/env.h"
#include "hdmlp/util/sample_buffer.h"

namespace hdmlp {

class StorageClass {
 public:
  StorageClass(std::string name, std::string backend) : name_(std::move(name)), backend_(std::move(backend)) {}
  StorageClass(const StorageClass&) = delete;
  StorageClass& operator=(const StorageClass&) = delete;
  virtual ~StorageClass() = default;

  const std::string& name() const { return name_; }
  const std::string& backend() const { return backend_; }

  // slot: position of the sample in this class's list; size: the bytes the
  // placement planned for it (the caller stores nothing of another size).
  virtual bool Store(int64_t slot, int64_t sample, const uint8_t* data, int64_t size) = 0;
  virtual bool Read(int64_t slot, int64_t sample, int64_t size, SampleBuffer* out) = 0;
  // The bytes of a stored slot where the class keeps them, or null when it
  // can only copy them out (Read). Only called after a successful Store.
  virtual const uint8_t* StoredBytes(int64_t /*slot*/) const { return nullptr; }
  // Removes what the class keeps on disk; also run by the destructor.
  virtual void Release() {}

  // Empty while the class works; else why it stopped storing.
  std::string warning() const;
  // Empty until a stored file was found changed; then the first such file.
  std::string corruption_warning() const;
  // Stored files found changed and dropped, so far.
  int64_t dropped_corrupt() const { return dropped_.load(); }

 protected:
  void SetWarning(const std::string& warning);
  void SetCorruptionWarning(const std::string& warning);
  std::atomic<int64_t> dropped_{0};

 private:
  const std::string name_;
  const std::string backend_;
  mutable std::mutex warning_mu_;
  std::string warning_;
  std::string corruption_warning_;
};

// RAM: one arena holding every planned sample back to back.
std::unique_ptr<StorageClass> MakeMemoryClass(const std::string& name, const std::vector<int64_t>& planned_sizes);

// Local disk: the folder <path>/hdmlp-job-<host>-<pid>-<random>, removed by
// Release(). The class holds an flock on the folder's ".lock" file for its
// whole life (the folder is made under a temporary name, locked, then
// renamed, so a folder under the final name always has its lock). Making a
// class removes the folders under `path` whose lock nobody holds: jobs that
// are gone, whatever host or PID namespace made them; a folder without a
// lock file (an older hdmlp's) only once it is an hour old. Throws IOError
// if the folder cannot be made (the caller then gives the class no
// samples).
std::unique_ptr<StorageClass> MakeFilesystemClass(Env* env, const std::string& name, const std::string& path);

// The folder a filesystem class made (for tests).
std::string FilesystemClassFolder(const StorageClass& filesystem_class);

}  // namespace hdmlp

#endif  // HDMLP_CACHE_STORAGE_CLASS_H_
