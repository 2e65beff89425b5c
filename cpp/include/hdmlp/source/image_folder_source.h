// ImageFolderSource: a folder root/<class>/.../<file> as a Source.
//
// The listing is ScanImageFolder's (image_folder.h): torchvision's
// ImageFolder order, classes and labels, cached in the index cache. Sample i
// is one file, opened and read whole on every Read (one open per sample:
// what a parallel file system is worst at; see pack_source.h), to its end,
// whatever size stat reports (files under /proc say 0). Sizes and
// modification times are the scan's (Identity); a read takes the bytes it
// finds, and ReadIdentified says what it found, so a file changed since the
// scan is noticed (source_reader.h).
//
// Thread-safety: as Source. Non-copyable.
#ifndef HDMLP_SOURCE_IMAGE_FOLDER_SOURCE_H_
#define HDMLP_SOURCE_IMAGE_FOLDER_SOURCE_H_

#include <string>

#include "hdmlp/source/image_folder.h"
#include "hdmlp/source/source.h"

namespace hdmlp {

class ImageFolderSource : public Source {
 public:
  ImageFolderSource(Env* env, const std::string& root, const ScanOptions& scan = {});

  // The file of sample i (root joined with its relative path).
  std::string Path(int64_t i) const { return JoinPath(root_, index_.names[static_cast<size_t>(i)]); }
  std::string Describe(int64_t i) const override { return Path(i); }
  SampleIdentity Identity(int64_t i) const override;
  SampleBuffer Read(int64_t i) override;
  SampleBuffer ReadIdentified(int64_t i, SampleIdentity* found) override;
  void ReadRange(int64_t i, int64_t offset, int64_t n, uint8_t* dst) override;

 private:
  std::vector<int64_t> mtimes_ns_;  // sample i: its file's time at scan
};

}  // namespace hdmlp

#endif  // HDMLP_SOURCE_IMAGE_FOLDER_SOURCE_H_
