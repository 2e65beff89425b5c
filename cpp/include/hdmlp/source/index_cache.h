// IndexCache: the scan of an image folder, kept on local disk between runs.
//
// Datasets often live on read-only, slow shared storage, so the cache is kept
// in the user's cache directory, one file per dataset, named after a hash of
// the dataset's absolute path. An entry records the modification time of
// every directory the scan visited; adding, removing or renaming a file or
// folder changes its parent's time, so the entry is used only when every
// recorded directory still has its recorded time (one stat per directory,
// not per file). Files edited in place are not detected here: their
// recorded sizes and modification times are those of the scan, and a read
// that finds others reports the file as changed (cache_hierarchy.h).
//
// Load returns false (never throws) for a missing, stale or corrupt entry;
// Store ignores a cache directory it cannot write (caching is an
// optimisation, never a reason to fail a job).
// Thread-safety: concurrent calls are safe; the last writer wins atomically.
#ifndef HDMLP_SOURCE_INDEX_CACHE_H_
#define HDMLP_SOURCE_INDEX_CACHE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "hdmlp/env/env.h"
#include "hdmlp/source/image_folder.h"

namespace hdmlp {

struct ScannedDirectory {
  std::string relpath;  // "" for the root
  int64_t mtime_ns = 0;
};

class IndexCache {
 public:
  // cache_env holds the cache files; dataset_env is asked for folder times.
  IndexCache(Env* cache_env, Env* dataset_env, std::string cache_dir);

  // The cache file that holds the entry for this dataset root.
  std::string EntryPath(const std::string& absolute_root) const;

  bool Load(const std::string& absolute_root, ImageFolderIndex* index);
  // The decoding half of Load, on an entry's bytes (for the fuzzer):
  // fresh(relpath, mtime_ns) says whether a recorded directory still has
  // its time. False for anything malformed, never a crash or a throw.
  static bool Decode(const std::string& data, const std::string& absolute_root,
                     const std::function<bool(const std::string&, int64_t)>& fresh, ImageFolderIndex* index);
  // The checksum an entry ends with, over all bytes before it.
  static uint64_t Checksum(const char* data, size_t size);
  // An entry's bytes (what Store writes; Decode reads them back).
  static std::string Encode(const std::string& absolute_root, const ImageFolderIndex& index,
                            const std::vector<ScannedDirectory>& directories);
  void Store(const std::string& absolute_root, const ImageFolderIndex& index,
             const std::vector<ScannedDirectory>& directories);

 private:
  Env* env_;
  Env* dataset_env_;
  std::string cache_dir_;
};

}  // namespace hdmlp

#endif  // HDMLP_SOURCE_INDEX_CACHE_H_
