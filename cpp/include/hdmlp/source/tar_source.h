// TarSource: WebDataset tar shards, read in place.
//
// A WebDataset shard is a plain tar file whose members are grouped into
// samples by key: "dir/n0153.jpg" and "dir/n0153.cls" are members "jpg" and
// "cls" of sample "dir/n0153" (the key is the path up to the first dot of
// its file name; members of one sample follow each other). Shards are
// given as one .tar file, a comma-separated list, a brace pattern
// ("shard-{000..009}.tar") or a folder of .tar files (sorted by name).
//
// The index (for each sample its shard, the offset and size of its sample
// member, its label) is made once by walking the tar headers (ustar, GNU
// long names and pax path records; one small read per member, shards in
// parallel) and kept in the user cache directory (<cache>/index/tar-*.idx,
// listing_cache.h), keyed by the shards' absolute paths and the options; it
// is used again only while every shard has the size and modification time it
// had. Nothing is unpacked: a sample is one pread of its member's bytes, and
// each shard is opened once and kept open (O(shards) opens).
//
// Options (SourceOptions): tar_sample_ext, the member holding the sample
// ("" picks the first member with an image extension; "jpg;png" tries each
// in turn), and tar_label_ext ("cls"), a member holding the label as a
// decimal integer. Without label members every label is 0. Classes are
// "0".."max label", the largest label being at most kMaxLabel (source.h).
//
// Errors: a sample without a sample member, a key with two members of one
// extension, or a label member that is not an integer up to kMaxLabel,
// fails the index with InvalidArgumentError naming the shard and the key.
// A shard must end with the end-of-archive zero blocks: one cut short (the
// file ends inside a header or a member, or where the next header or the
// end should be, 0 bytes included) or whose header claims more bytes than
// the file holds fails the index with InvalidArgumentError naming the
// shard and the offset; with ScanOptions::keep_damaged (on_error="skip")
// the whole samples before the cut are indexed instead, the sample the cut
// falls in is left out, and damage() says so (such a listing is never
// cached), naming in damaged_samples() every sample not delivered: the one
// the cut fell in, and those after it as the shard's last whole listing in
// the index cache had them (where there is one; else the unknown rest is one
// entry). A label member must hold digits with at most whitespace around
// them: a NUL or any other byte fails the index naming the member. A shard truncated after indexing makes the reads past its end
// fail with InvalidArgumentError naming the shard, the member and the
// offset, never a short or wrong read. A shard that is not a regular file
// (a FIFO) is refused when the source opens.
//
// Thread-safety: as Source. Non-copyable.
#ifndef HDMLP_SOURCE_TAR_SOURCE_H_
#define HDMLP_SOURCE_TAR_SOURCE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hdmlp/source/file_list.h"
#include "hdmlp/source/image_folder.h"
#include "hdmlp/source/source.h"

namespace hdmlp {

class TarSource : public Source {
 public:
  TarSource(Env* env, const std::string& spec, const SourceOptions& options = {}, const ScanOptions& scan = {});

  std::string Describe(int64_t i) const override;
  SampleIdentity Identity(int64_t i) const override;
  SampleBuffer Read(int64_t i) override;
  void ReadRange(int64_t i, int64_t offset, int64_t n, uint8_t* dst) override;
  Extent ExtentOf(int64_t i) const override;
  std::vector<SampleBuffer> ReadRun(int64_t first, int64_t count) override;

  // The shards as given, expanded (a list, a brace pattern or a folder).
  static std::vector<std::string> ListShards(Env* env, const std::string& spec);

  struct Entry {
    uint32_t shard = 0;
    int64_t offset = 0;  // of the sample member's data
    std::string member;  // the sample member's name in the tar
  };

 private:
  ReadableFile* ShardFile(uint32_t shard);

  std::vector<std::string> paths_;
  std::vector<ListedFile> shards_;  // each as it was when listed
  std::vector<Entry> entries_;
  std::vector<std::unique_ptr<ReadableFile>> files_;  // guarded by mu_
  std::mutex mu_;
};

}  // namespace hdmlp

#endif  // HDMLP_SOURCE_TAR_SOURCE_H_
