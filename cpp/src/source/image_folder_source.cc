#include "hdmlp/source/image_folder_source.h"

#include "hdmlp/env/deadline_reader.h"
#include "hdmlp/errors.h"

namespace hdmlp {

ImageFolderSource::ImageFolderSource(Env* env, const std::string& root, const ScanOptions& scan)
    : Source("folder", env, root) {
  ImageFolderIndex folder = ScanImageFolder(env, root, scan);
  index_.classes = std::move(folder.classes);
  index_.names = std::move(folder.relpaths);
  index_.labels = std::move(folder.labels);
  index_.sizes = std::move(folder.sizes);
  mtimes_ns_ = std::move(folder.mtimes_ns);
  from_cache_ = folder.from_cache;
}

SampleIdentity ImageFolderSource::Identity(int64_t i) const {
  const auto k = static_cast<size_t>(i);
  return {index_.sizes[k], k < mtimes_ns_.size() ? mtimes_ns_[k] : 0};
}

SampleBuffer ImageFolderSource::Read(int64_t i) {
  SampleIdentity found;
  return ReadIdentified(i, &found);
}

SampleBuffer ImageFolderSource::ReadIdentified(int64_t i, SampleIdentity* found) {
  CheckSample(i);
  auto file = Open(Path(i));
  FileContents contents = ReadToEnd(file.get());
  *found = {contents.info.size, contents.info.mtime_ns};
  return std::move(contents.bytes);
}

void ImageFolderSource::ReadRange(int64_t i, int64_t offset, int64_t n, uint8_t* dst) {
  CheckSample(i);
  auto file = Open(Path(i));
  if (offset < 0 || n < 0 || offset + n > file->Size()) {
    throw InvalidArgumentError("bytes [" + std::to_string(offset) + ", " + std::to_string(offset + n) +
                               ") are outside '" + Path(i) + "' (" + std::to_string(file->Size()) + " bytes)");
  }
  file->ReadExact(offset, dst, n);
}

}  // namespace hdmlp
