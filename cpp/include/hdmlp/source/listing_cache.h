// ListingCache: a source's index of a set of files (TFRecord shards, NumPy
// files), kept on local disk between runs.
//
// Making such an index reads every file's headers (or, for labels inside
// the records, every byte), which on a parallel file system takes long; a
// second start should not. An entry is one file in the cache directory
// (ScanOptions::cache_dir, default <user cache>/index), named after a hash
// of the format, its options and the files' absolute paths. It records each
// file's size and modification time and is used again only while every file
// still has them; its bytes end with a checksum, so a torn or corrupt entry
// is ignored, never misread. What the index holds is the source's own
// payload (bytes it encodes and decodes itself).
//
// Load returns false (never throws) for a missing, stale or corrupt entry
// (LoadLast for a missing or corrupt one);
// Store ignores a cache directory it cannot write (caching is an
// optimisation, never a reason to fail a job), and stores nothing while a
// file was modified in the last two seconds (RecentlyModified).
// Thread-safety: concurrent calls are safe; the last writer wins atomically.
#ifndef HDMLP_SOURCE_LISTING_CACHE_H_
#define HDMLP_SOURCE_LISTING_CACHE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hdmlp/source/file_list.h"
#include "hdmlp/source/image_folder.h"

namespace hdmlp {

class ListingCache {
 public:
  // kind: "tfrecord", "npy", "tar"; options_key: every option the index depends on.
  ListingCache(const ScanOptions& scan, const std::string& kind, const std::string& options_key,
               const std::vector<ListedFile>& files);

  bool Load(std::string* payload) const;
  // The payload as a job last stored it for these files, whatever their sizes and
  // times are now: what a file held before it was damaged.
  bool LoadLast(std::string* payload) const { return Read(false, payload); }
  void Store(const std::string& payload) const;
  const std::string& path() const { return path_; }

 private:
  std::string Header() const;
  bool Read(bool exact, std::string* payload) const;

  Env* env_;
  bool enabled_;
  std::string kind_;
  std::string path_;
  std::vector<ListedFile> files_;
};

}  // namespace hdmlp

#endif  // HDMLP_SOURCE_LISTING_CACHE_H_
