// ImageFolderIndex: what a dataset holds, in torchvision's ImageFolder order.
//
// A dataset is a folder root/<class>/.../<file>. Classes are the immediate
// sub-folders of root (symbolic links followed), sorted by name; a class's
// label is its position in that order. Inside a class, files are found by a
// recursive walk and ordered exactly as torchvision.datasets.ImageFolder does
// (directories by their path string, then file names, byte-wise), and kept
// when their lower-cased name ends in one of kImageExtensions. Sample i of
// the index is the same file as torchvision's `samples[i]`.
//
// ScanImageFolder lists the classes in parallel and keeps the result in an
// on-disk index cache (see index_cache.h), so a restart over a million files
// does not walk the dataset again unless a folder changed.
//
// Every sample's size and modification time are recorded at scan time: the
// job delivers the dataset as it was then, and a read that finds a file
// with another size or time reports it (cache/cache_hierarchy.h). Any
// source of samples exposes the same two facts per sample.
//
// Errors: a missing root -> NotFoundError, root not a directory ->
// NotADirectoryError, no class folder or a class folder without a valid
// file -> InvalidArgumentError; a file with an image extension that is not
// a regular file (a FIFO, socket or device, which could block a reader or
// never end) -> InvalidArgumentError naming them; each names the path.
// Thread-safety: an ImageFolderIndex is immutable after the scan and may be
// read from any thread.
#ifndef HDMLP_SOURCE_IMAGE_FOLDER_H_
#define HDMLP_SOURCE_IMAGE_FOLDER_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "hdmlp/env/env.h"
#include "hdmlp/util/interrupt.h"

namespace hdmlp {

// torchvision.datasets.folder.IMG_EXTENSIONS.
extern const std::vector<std::string> kImageExtensions;

struct ImageFolderIndex {
  std::string root;                    // as given by the user
  std::vector<std::string> classes;    // sorted; label = position
  std::vector<std::string> relpaths;   // sample i: path relative to root
  std::vector<int32_t> labels;         // sample i: class index
  std::vector<int64_t> sizes;          // sample i: bytes at scan time (a hint)
  std::vector<int64_t> mtimes_ns;      // sample i: modification time at scan time (ns since 1970)
  bool from_cache = false;             // true when loaded from the index cache

  int64_t size() const { return static_cast<int64_t>(relpaths.size()); }
  std::string Path(int64_t i) const { return JoinPath(root, relpaths[static_cast<size_t>(i)]); }
  // A hash of classes, paths, labels and sizes: equal on every rank that
  // sees the same dataset.
  uint64_t Fingerprint() const;
};

struct ScanOptions {
  int threads = 0;              // 0: a sensible number for I/O-bound listing
  bool use_cache = true;
  std::string cache_dir;        // empty: UserCacheDir()/index
  Env* cache_env = nullptr;     // the cache lives on local disk: nullptr is Env::Default()
  InterruptCheck interrupt;     // polled between folders, on the calling thread
  // on_error="skip" (the Job sets it with skip_bad_samples, Python's skip
  // with a Python chain sets it alone): a container cut short (a tar shard without its end)
  // keeps the samples before the cut and reports the rest in
  // Source::damage() instead of failing the open.
  bool keep_damaged = false;

  // `threads`, or for 0 twice the cores (4 to 16): listing and indexing wait on the storage.
  int ListingThreads() const {
    return threads > 0 ? threads : static_cast<int>(std::clamp(2u * std::thread::hardware_concurrency(), 4u, 16u));
  }
};

ImageFolderIndex ScanImageFolder(Env* env, const std::string& root, const ScanOptions& options = {});

bool HasImageExtension(const std::string& file_name);

}  // namespace hdmlp

#endif  // HDMLP_SOURCE_IMAGE_FOLDER_H_
