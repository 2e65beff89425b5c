// FileList: the files of a dataset made of several files (TFRecord shards,
// .npy/.npz files), as a user names them, and what each was when listed.
//
// A dataset is given as one file, a comma-separated list, a brace pattern
// ("train-{00000..01023}.tfrecord", source.h's ExpandBraces) or a folder
// (its files whose names end with one of the format's extensions, sorted
// by name; sub-folders are not entered). Every file must exist and be a
// regular file: a FIFO, a socket or a device is refused here, before
// anything is read (RequireRegularFile, regular_file.h).
//
// Errors name the file, the spec it came from and what to do:
// NotFoundError for a missing file or a folder without such files,
// InvalidArgumentError for a folder or a non-regular file in a list.
//
// Thread-safety: reentrant.
#ifndef HDMLP_SOURCE_FILE_LIST_H_
#define HDMLP_SOURCE_FILE_LIST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hdmlp/env/env.h"

namespace hdmlp {

struct ListedFile {
  std::string path;      // as given or joined to the folder
  std::string absolute;  // realpath, for cache keys ("" when it cannot be resolved)
  int64_t size = 0;
  int64_t mtime_ns = 0;
};

// `what` names one file in messages ("TFRecord shard", "NumPy file");
// `extensions` are lower-case with their dot (".tfrecord").
std::vector<ListedFile> ListDatasetFiles(Env* env, const std::string& spec, const std::string& what,
                                         const std::vector<std::string>& extensions);

// `s` with its ASCII letters in lower case (names, extensions, option values).
std::string AsciiLower(std::string s);

// True when `name` ends with one of `extensions`, ignoring case.
bool HasExtension(const std::string& name, const std::vector<std::string>& extensions);

// True when a file was modified in the last two seconds: a listing of it is
// not cached, since a change within the file system's time resolution would
// not be seen.
bool RecentlyModified(const std::vector<ListedFile>& files);

}  // namespace hdmlp

#endif  // HDMLP_SOURCE_FILE_LIST_H_
