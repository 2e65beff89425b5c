// RequireRegularFile: every source names a FIFO, socket or device among its
// files before it reads anything.
//
// A reader of a FIFO waits for a writer that may never come; a socket or a
// character device never ends, or ends at once: a pack shard that is a FIFO
// was reported as "truncated ... ends at byte 0". The sources check each file
// they will read (the path given, a pack's index and shards, each HDF5 file of
// a folder, each tar shard) with one stat when they are opened, as the image
// folder's scan does for its files, and refuse the first that is not a
// regular file (following symbolic links) with an InvalidArgumentError naming
// it, its kind and what to do. A missing file is left to the caller (its own
// NotFoundError says which dataset it belongs to).
//
// Thread-safety: stateless; safe from any thread.
#ifndef HDMLP_SOURCE_REGULAR_FILE_H_
#define HDMLP_SOURCE_REGULAR_FILE_H_

#include <string>

#include "hdmlp/env/env.h"

namespace hdmlp {

// `what` names the file for the message, its path included: "shard
// '/data/p/shard-00000.hdmlp-shard' of pack '/data/p/index.hdmlp-pack'",
// "HDF5 file '/data/h5/a.h5'". Returns the file's stat.
FileInfo RequireRegularFile(Env* env, const std::string& path, const std::string& what);

}  // namespace hdmlp

#endif  // HDMLP_SOURCE_REGULAR_FILE_H_
