#include "hdmlp/source/regular_file.h"

#include "hdmlp/errors.h"

namespace hdmlp {

FileInfo RequireRegularFile(Env* env, const std::string& path, const std::string& what) {
  const FileInfo info = env->Stat(path);
  if (info.exists && info.kind != FileKind::kRegular && info.kind != FileKind::kDirectory) {
    throw InvalidArgumentError(what + " is " + FileKindName(info.kind) +
                               ", not a regular file: a reader of a FIFO, socket or device may wait forever or never "
                               "reach its end, so hdmlp reads regular files only; replace it by the file it stands "
                               "for (or copy the data into a file)");
  }
  return info;
}

}  // namespace hdmlp
