// PackSource: an hdmlp pack, a few large shard files and one index.
//
// `hdmlp pack SRC DST` (hdmlp/pack.py) writes DST/shard-NNNNN.hdmlp-shard
// files, each a 32-byte header ("HDMLPSH1", the pack's id, the shard's
// number) followed by samples back to back, and DST/index.hdmlp-pack, which
// lists for every sample its shard, offset, size, label, CRC-32 and original
// relative path, plus the class names, the folder the pack was made from
// and each shard's size. Layout (little-endian):
//   "HDMLPPK1" u32 version=1 u32 format (0 encoded files, 1 raw pixels)
//   u64 pack id, str source root, str source kind,
//   u64 classes {str}, u64 shards {str name, u64 size},
//   u64 samples {u32 shard, u64 offset, u64 size, i32 label, u32 crc32, str name},
//   u32 crc32 of everything before it.   (str = u64 length + bytes)
// Samples keep the order, names and labels of the source they came from,
// so a pack of an image folder has that folder's `samples`, `classes` and
// `class_to_idx`.
//
// Reading: sample i is one pread at its offset. Each shard is opened once
// (on first use) and kept open, so the dataset's storage sees O(shards)
// opens, not O(samples): on a parallel file system, where every open costs
// round trips to a metadata server, that is the point of packing.
//
// Checks, never wrong bytes: the index's own CRC; each shard's header
// (pack id and number: "index does not match its shards" names the shard);
// a shard larger than the index says is refused when the pack is opened; a
// shard shorter than it says makes the samples past its end fail when read
// (InvalidArgumentError naming the shard, the offset and the sample); every
// sample's CRC-32 is checked after reading (a changed shard).
//
// Thread-safety: as Source; shards are opened under a mutex, preads run
// concurrently. Non-copyable.
#ifndef HDMLP_SOURCE_PACK_SOURCE_H_
#define HDMLP_SOURCE_PACK_SOURCE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hdmlp/source/source.h"

namespace hdmlp {

inline constexpr char kPackIndexName[] = "index.hdmlp-pack";

class PackSource : public Source {
 public:
  // path: the pack's folder or its index file.
  PackSource(Env* env, const std::string& path);

  SampleFormat format() const override { return format_; }
  std::string SamplesRoot() const override { return source_root_.empty() ? dir_ : source_root_; }
  std::string Describe(int64_t i) const override;
  SampleIdentity Identity(int64_t i) const override;
  SampleBuffer Read(int64_t i) override;
  void ReadRange(int64_t i, int64_t offset, int64_t n, uint8_t* dst) override;
  Extent ExtentOf(int64_t i) const override;
  std::vector<SampleBuffer> ReadRun(int64_t first, int64_t count) override;

  int64_t num_shards() const { return static_cast<int64_t>(shards_.size()); }
  const std::string& source_kind() const { return source_kind_; }

 private:
  struct Shard {
    std::string path;
    int64_t indexed_size = 0;  // what the index says
    int64_t size = 0;          // what the file has
    int64_t mtime_ns = 0;
    std::unique_ptr<ReadableFile> file;  // opened on first use, guarded by mu_
  };
  struct Entry {
    uint32_t shard = 0;
    uint32_t crc = 0;
    int64_t offset = 0;
  };

  ReadableFile* ShardFile(uint32_t shard);
  void ReadChecked(int64_t i, int64_t offset, int64_t n, uint8_t* dst);
  void CheckCrc(int64_t i, const SampleBuffer& bytes) const;

  std::string dir_;
  std::string index_path_;
  std::string source_root_;
  std::string source_kind_;
  uint64_t pack_id_ = 0;
  SampleFormat format_ = SampleFormat::kEncoded;
  std::vector<Shard> shards_;
  std::vector<Entry> entries_;
  std::mutex mu_;
};

}  // namespace hdmlp

#endif  // HDMLP_SOURCE_PACK_SOURCE_H_
