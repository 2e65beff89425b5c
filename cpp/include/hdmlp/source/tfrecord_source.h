// TFRecordSource: TFRecord shards, read in place; each record is a sample.
//
// A TFRecord file is a sequence of records, each
//   u64 length (little-endian), u32 masked CRC-32C of those 8 bytes,
//   `length` bytes of payload, u32 masked CRC-32C of the payload
// (crc32c.h says what "masked" is). Shards are given as one file, a
// comma-separated list, a brace pattern or a folder of *.tfrecord,
// *.tfrecords and *.tfrec files (file_list.h). Records keep the shards'
// order: sample i is the i-th record counting through the shards in order.
//
// The index (each record's shard, offset and length) comes, for each shard:
//   - from an index file where one exists and nothing inside the records is
//     needed: "<shard>.idx" or "<shard stem>.tfindex" beside it,
//     "<folder>/../index/<folder name>/<shard name>.idx" (the layout DLIO
//     writes), or "<tfrecord_index>/<shard name>.idx". That is the text format of DALI's and the
//     `tfrecord` package's tfrecord2idx: one line per record, its offset
//     and its whole length (16 + payload). The lines must tile the shard
//     exactly (each record starts where the one before ends, the last ends
//     at the end of the file); an index that does not fails with an error
//     naming it (a stale index of a shard written again);
//   - else by walking the record headers (one small read per record,
//     shards in parallel, each length's CRC checked), or, when labels or the
//     sample come from inside the records, by reading the shard through
//     (each payload's CRC checked too). Such a listing is kept in the user
//     cache directory (listing_cache.h) and used again while every shard
//     has its size and modification time.
//
// Options (SourceOptions):
//   tfrecord_label         an int64_list feature of each record's
//                          tf.train.Example whose first value is the label
//                          (classes "0".."max label", at most kMaxLabel);
//   tfrecord_labels_file   instead, a text file of one integer label per
//                          record, in record order;
//   tfrecord_sample        a bytes_list feature whose first value is the
//                          sample (e.g. "image/encoded"); "" delivers the
//                          whole payload (a serialized tf.train.Example);
//   tfrecord_index         a folder holding "<shard name>.idx" files.
// Without labels every label is 0. tf_example.h parses the Examples.
//
// Checks: Read reads the whole record in one read and checks both CRCs and
// that the length field is the indexed one; a mismatch is an
// InvalidArgumentError naming the shard, the offset and the sample (a
// shard changed after indexing, or damaged), never wrong bytes. While
// indexing, a shard that ends inside a record (cut short) or whose length
// field fails its CRC fails with InvalidArgumentError naming the shard and
// the offset; with ScanOptions::keep_damaged (on_error="skip") the whole
// records before it are used, the rest of the shard is left out and
// damage() says so (such a listing is never cached). A payload that fails
// its CRC while the shard is read through for labels is likewise an error,
// or with keep_damaged that record alone is left out.
//
// Thread-safety: as Source. Non-copyable.
#ifndef HDMLP_SOURCE_TFRECORD_SOURCE_H_
#define HDMLP_SOURCE_TFRECORD_SOURCE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hdmlp/source/file_list.h"
#include "hdmlp/source/image_folder.h"
#include "hdmlp/source/source.h"

namespace hdmlp {

class TFRecordSource : public Source {
 public:
  TFRecordSource(Env* env, const std::string& spec, const SourceOptions& options = {}, const ScanOptions& scan = {});

  std::string Describe(int64_t i) const override;
  SampleIdentity Identity(int64_t i) const override;
  SampleBuffer Read(int64_t i) override;
  Extent ExtentOf(int64_t i) const override;
  std::vector<SampleBuffer> ReadRun(int64_t first, int64_t count) override;

  const std::vector<ListedFile>& shards() const { return shards_; }
  // Shards whose index came from an .idx file, and the files used.
  const std::vector<std::string>& index_files_used() const { return index_files_used_; }

  // The file extensions a folder's shards have.
  static const std::vector<std::string>& Extensions();
  // True when data[0, n) starts with a TFRecord header (a length whose
  // masked CRC-32C matches): how OpenSource recognises a shard by content.
  static bool LooksLikeTFRecord(const uint8_t* data, int64_t n);
  // Parses an index file's text into (offset, whole record length) pairs;
  // InvalidArgumentError naming `path` and the line for anything else.
  static std::vector<std::pair<int64_t, int64_t>> ParseIndexFile(const std::string& text, const std::string& path);

  struct Record {
    uint32_t shard = 0;
    int64_t offset = 0;         // of the record's header
    int64_t length = 0;         // of its payload
    int64_t sample_offset = 0;  // where the sample starts in the payload
  };

 private:
  ReadableFile* ShardFile(uint32_t shard);
  // Checks the record's bytes at `record` (16 + length bytes) and moves the
  // sample to its front; throws naming sample i.
  void CheckRecord(int64_t i, const uint8_t* record) const;

  SourceOptions options_;
  std::vector<ListedFile> shards_;
  std::vector<Record> records_;
  std::vector<std::string> index_files_used_;
  std::vector<std::unique_ptr<ReadableFile>> files_;  // guarded by mu_
  std::mutex mu_;
};

}  // namespace hdmlp

#endif  // HDMLP_SOURCE_TFRECORD_SOURCE_H_
