// IndexCache: the scan of an image folder, kept on local disk between runs.
//
// Datasets often live on read-only, slow shared storage, so the cache is kept
// in the user's cache directory, one file per dataset, named after a hash of
// the dataset's absolute path. An entry records the modification time of
// every directory the scan visited; adding, removing or renaming a file or
// folder changes its parent's time, so the entry is used only when every
// recorded directory still has its recorded time (one stat per directory,
// not per file). Files edited in place are not detected: their recorded
// sizes are hints only, and readers always use the size they find.
//
// Load returns false (never throws) for a missing, stale or corrupt entry;
// Store ignores a cache directory it cannot write (caching is an
// optimisation, never a reason to fail a job).
// Thread-safety: concurrent calls are safe; the last writer wins atomically.
#ifndef HDMLP_SOURCE_INDEX_CACHE_H_
#define HDMLP_SOURCE_INDEX_CACHE_H_

#include <cstdint>
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
  void Store(const std::string& absolute_root, const ImageFolderIndex& index,
             const std::vector<ScannedDirectory>& directories);

 private:
  Env* env_;
  Env* dataset_env_;
  std::string cache_dir_;
};

}  // namespace hdmlp

#endif  // HDMLP_SOURCE_INDEX_CACHE_H_
