// Source: what a dataset holds and how one sample is read.
//
// Every dataset format lives behind this interface: an image folder
// (image_folder_source.h), an hdmlp pack (pack_source.h), HDF5 files
// (hdf5_source.h), WebDataset tar shards (tar_source.h), TFRecord shards
// (tfrecord_source.h) and NumPy files (npy_source.h). The plan, the
// placement, the caches, the peer transport, the transforms, the metrics and
// the simulator see only a Source: a sample count, each sample's size (exact,
// or a hint where the format cannot know it without reading), label and
// name, the class names, a fingerprint, and Read(i). Adding a format is one
// class, its tests and one line in OpenSource's table (SourceKinds below).
//
// A sample is one of three formats (SampleFormat):
//   kEncoded   an encoded image file's bytes (JPEG, PNG, ...), as stored;
//   kRawImage  decoded 8-bit pixels with a small header (packs made with
//              --raw; raw_image.h says the layout): the transforms skip the
//              decode;
//   kArray     one array of sample_array()'s dtype and shape (HDF5, NumPy), followed
//              by the sample's label array when label_array() is set; Read
//              returns exactly sample_array()->bytes() (+ label bytes).
//
// Errors: opening throws NotFoundError / NotADirectoryError / IOError for
// storage and InvalidArgumentError for content that is not the format (each
// naming the file). Read throws IOError when the storage fails and
// InvalidArgumentError when the sample's bytes are corrupt (a truncated
// shard, a member cut short, an HDF5 chunk that does not decode): never
// wrong bytes. Every message names the file and the sample or offset.
//
// Thread-safety: a Source is immutable after it is opened, apart from its
// open-file table and counters; Read and ReadRange may be called from any
// number of threads at once. Non-copyable.
#ifndef HDMLP_SOURCE_SOURCE_H_
#define HDMLP_SOURCE_SOURCE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hdmlp/env/env.h"
#include "hdmlp/source/image_folder.h"
#include "hdmlp/util/sample_buffer.h"

namespace hdmlp {

enum class SampleFormat { kEncoded, kRawImage, kArray };

// The element type and shape of an array sample (or of a label array).
struct ArraySpec {
  std::string dtype;           // numpy's names: "float32", "int16", "uint8", ...
  std::vector<int64_t> shape;  // one sample's, without the batch dimension
  int64_t element_size = 0;

  int64_t elements() const;
  int64_t bytes() const { return elements() * element_size; }
  std::string ToString() const;  // "float32[4, 64, 64, 64]"
};

// Which source to open and the options of each format.
struct SourceOptions {
  std::string kind;  // "" picks from the path; else "folder", "pack", "hdf5", "tar", "tfrecord" or "npy"
  // HDF5: the dataset holding the samples, and the one holding the labels
  // ("" or absent: every label is 0).
  std::string hdf5_samples = "data";
  std::string hdf5_labels = "label";
  // WebDataset: the member extension holding the sample ("": the first
  // member with an image extension) and the one holding the label.
  std::string tar_sample_ext;
  std::string tar_label_ext = "cls";
  // TFRecord (tfrecord_source.h): the int64_list feature holding the label,
  // or a text file of one label per record; the bytes_list feature holding
  // the sample ("": the whole serialized record); a folder of .idx files.
  std::string tfrecord_label;
  std::string tfrecord_labels_file;
  std::string tfrecord_sample;
  std::string tfrecord_index;
  // NumPy .npy/.npz files (npy_source.h): "array" (each file one array of
  // the first file's dtype and shape) or "bytes" (each file's bytes as
  // stored); an .npz's member holding the sample ("": its first) and the
  // one holding an integer label ("": every label is 0).
  std::string npy_as = "array";
  std::string npz_member;
  std::string npz_label_member;
};

// Sets option `key` (a field name of SourceOptions other than kind:
// "hdf5_samples", "tar_label_ext", "tfrecord_label", "npy_as", ...) of
// *options; an unknown key throws InvalidArgumentError listing the known ones.
void SetSourceOption(SourceOptions* options, const std::string& key, const std::string& value);

// The keys SetSourceOption knows, in its table's order.
std::vector<std::string> SourceOptionNames();

// What a sample was when the source was indexed, for detecting a change
// (size and modification time of its file where it has its own file; the
// container's otherwise; 0 where unknown).
struct SampleIdentity {
  int64_t size = 0;
  int64_t mtime_ns = 0;
};

// The largest label a source accepts where classes are "0".."max label"
// (tar .cls members, HDF5 integer labels): the class list is dense, so a
// label of 2^31 would cost gigabytes of class names. A larger one is an
// InvalidArgumentError naming the file and the sample.
constexpr int32_t kMaxLabel = (1 << 20) - 1;

// The listing every source fills when it opens.
struct SampleIndex {
  std::vector<std::string> classes;  // label = position
  std::vector<std::string> names;    // sample i: its relative name (a folder's relpath)
  std::vector<int32_t> labels;       // sample i: class index (0 without classes)
  std::vector<int64_t> sizes;        // sample i: bytes Read returns (a hint for folders)
};

class Source {
 public:
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;
  virtual ~Source() = default;

  // "folder", "pack", "hdf5", "tar", "tfrecord" or "npy".
  const std::string& kind() const { return kind_; }
  // The path the source was opened with, as given.
  const std::string& root() const { return root_; }
  int64_t size() const { return static_cast<int64_t>(index_.names.size()); }
  const std::vector<std::string>& classes() const { return index_.classes; }
  const std::vector<std::string>& names() const { return index_.names; }
  const std::vector<int32_t>& labels() const { return index_.labels; }
  const std::vector<int64_t>& sizes() const { return index_.sizes; }
  // True when the listing came from the index cache instead of a scan.
  bool from_cache() const { return from_cache_; }
  // Where the sample's relative names are rooted for users (Python's
  // `samples`): the folder for a folder, the folder a pack was made from.
  virtual std::string SamplesRoot() const { return root_; }

  // A hash of kind, classes, names, labels and sizes: equal on every rank
  // that opens the same dataset.
  uint64_t Fingerprint() const;

  virtual SampleFormat format() const { return SampleFormat::kEncoded; }
  // kArray only: each sample's array, and its label array if labels are arrays.
  virtual const ArraySpec* sample_array() const { return nullptr; }
  virtual const ArraySpec* label_array() const { return nullptr; }

  // Sample i for messages: its file first, then where in it, unquoted
  // ("/data/pack/shard-00003.hdmlp-shard at offset 4096 (sample 17, 'cls/a.jpg')").
  virtual std::string Describe(int64_t i) const = 0;
  virtual SampleIdentity Identity(int64_t i) const { return {index_.sizes[static_cast<size_t>(i)], 0}; }

  // The whole sample.
  virtual SampleBuffer Read(int64_t i) = 0;
  // The whole sample, and what Identity(i) is now, as the read found it (a
  // folder: the open file's size and time); by default the indexed
  // identity, i.e. no change is seen.
  virtual SampleBuffer ReadIdentified(int64_t i, SampleIdentity* found) {
    *found = Identity(i);
    return Read(i);
  }
  // Bytes [offset, offset + n) of the sample into dst; the default reads
  // the whole sample.
  virtual void ReadRange(int64_t i, int64_t offset, int64_t n, uint8_t* dst);

  // Where sample i lies when it shares a file with other samples (packs,
  // tar shards): the file's number and the byte range; file -1 otherwise.
  // Samples i and i + 1 of one file lie in increasing order.
  struct Extent {
    int64_t file = -1;
    int64_t offset = 0;
    int64_t size = 0;
  };
  virtual Extent ExtentOf(int64_t) const { return {}; }
  // Reads samples first .. first + count - 1, which lie in one file in that
  // order (ExtentOf), with one read of the bytes from the first's start to
  // the last's end, each checked as Read checks it. The default reads each.
  virtual std::vector<SampleBuffer> ReadRun(int64_t first, int64_t count);

  // Files this source opened on the dataset's storage so far (its scan
  // excluded): O(samples) for a folder, O(shards) for a pack or tars.
  int64_t files_opened() const { return files_opened_.load(std::memory_order_relaxed); }

  // With ScanOptions::keep_damaged: one message per damaged container the
  // open left (partly) out, naming the file, the offset and what was lost.
  const std::vector<std::string>& damage() const { return damage_; }
  // The samples those damages left out: one line per sample known by name
  // (the one a cut fell in, those an earlier listing had after it), and one
  // per container whose lost rest nothing lists ("... and whatever followed").
  // Each counts as one skipped sample.
  const std::vector<std::string>& damaged_samples() const { return damaged_samples_; }

 protected:
  Source(std::string kind, Env* env, std::string root) : kind_(std::move(kind)), env_(env), root_(std::move(root)) {}
  std::unique_ptr<ReadableFile> Open(const std::string& path);
  // Throws InvalidArgumentError when i is outside [0, size()).
  void CheckSample(int64_t i) const;
  // Packs and tar shards, whose samples lie in numbered files (ExtentOf),
  // read them alike:
  // - ReadRange's check: bytes [offset, offset + n) lie inside sample i
  //   (InvalidArgumentError naming it otherwise).
  void CheckRange(int64_t i, int64_t offset, int64_t n) const;
  // - ReadRun: when the samples lie in order in one file that holds all of
  //   them (file_size(file) bytes when the source opened), one read of the
  //   bytes from the first's start to the last's end, cut into the samples,
  //   each passed to `check` (which throws for a bad one); else sample by
  //   sample (a sample past a truncated file's end then fails alone).
  std::vector<SampleBuffer> ReadExtentRun(int64_t first, int64_t count,
                                          const std::function<int64_t(int64_t file)>& file_size,
                                          const std::function<ReadableFile*(int64_t file)>& open_file,
                                          const std::function<void(int64_t, const SampleBuffer&)>& check);

  std::string kind_;
  Env* env_;
  std::string root_;
  SampleIndex index_;
  bool from_cache_ = false;
  std::vector<std::string> damage_;
  std::vector<std::string> damaged_samples_;
  std::atomic<int64_t> files_opened_{0};
};

// Opens the source at `path`: options.kind, or else what the path is —
// a folder of class folders (folder), a pack's index file or a folder holding
// one (pack), an .h5/.hdf5 file or a folder of them (hdf5), a .tar file, a
// comma-separated list of them or a brace pattern "shard-{000..009}.tar"
// (tar). Anything else gets an InvalidArgumentError (NotFoundError for a
// missing path) that lists what is supported.
std::unique_ptr<Source> OpenSource(Env* env, const std::string& path, const SourceOptions& options = {},
                                   const ScanOptions& scan = {});

// The formats OpenSource knows by name (options.kind), in its table's order.
// Adding a format is one Source class in source/ plus one line in that table
// (source.cc's kSources); finding it from a path alone is one more test in
// its Detect, and each option of its own a field of SourceOptions plus one
// line in kSourceOptions.
std::vector<std::string> SourceKinds();

// Reads n bytes at offset of `file` into dst as up to `pieces` reads of at
// least 512 KiB each, at once on their own threads: a store where a request
// costs round trips (a remote file system) serves a large read faster as
// several in flight. Rethrows the first piece's error.
void ReadInPieces(ReadableFile* file, int64_t offset, int64_t n, uint8_t* dst, int pieces = 8);

// "shard-{000..002}.tar" -> shard-000.tar, shard-001.tar, shard-002.tar (the
// width of the first bound is kept); several braces multiply; commas in
// `pattern` separate independent patterns. A pattern without braces is
// itself. Throws InvalidArgumentError for a malformed range.
std::vector<std::string> ExpandBraces(const std::string& pattern);

}  // namespace hdmlp

#endif  // HDMLP_SOURCE_SOURCE_H_
