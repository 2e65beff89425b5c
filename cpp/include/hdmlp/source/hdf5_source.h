// Hdf5Source: arrays in HDF5 files, read through the HDF5 C library.
//
// Two layouts:
//   one file   a sample dataset [N, ...] (SourceOptions::hdf5_samples,
//              "data") and optionally a label dataset (hdf5_labels,
//              "label"): [N] of integers gives the labels (classes
//              "0".."max"); any other shape [N, ...] gives each sample a
//              label array, read with the sample.
//   a folder   of .h5/.hdf5 files (sorted by name), one sample each: the
//              sample dataset is the whole array (CosmoFlow's layout), and
//              the label dataset, when present, the sample's label array.
//              Every file must have the first file's shapes and types.
// Samples are arrays (SampleFormat::kArray): Read returns the sample's
// elements in the stored type converted to this machine's byte order, then
// its label array's. Chunked and compressed (any filter the library has)
// datasets work.
//
// Storage: every byte comes through Env. HDF5 reads go through a small
// virtual file driver ("hdmlp_env") that reads with Env's ReadableFile.
// The library holds one global lock (Debian builds it thread-safe; hdmlp
// adds its own lock for builds that are not), so hdmlp reads the bytes a
// sample needs outside that lock, in parallel: a contiguous dataset's row
// directly at its file offset (no library call at all), a chunked one's
// chunks at the addresses the library reports, a folder's whole file; the
// library then decodes them from memory. The single file is opened once.
//
// Errors: a missing dataset names the file, the dataset and the datasets
// the file has; an unsupported type or shape, or a file of the folder that
// differs from the first, says what and where (InvalidArgumentError); a
// sample the library cannot read or decode (a corrupt file or chunk) raises
// InvalidArgumentError naming the file, the dataset and the sample, with
// the library's reason.
//
// Thread-safety: as Source. Non-copyable.
#ifndef HDMLP_SOURCE_HDF5_SOURCE_H_
#define HDMLP_SOURCE_HDF5_SOURCE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hdmlp/source/source.h"

namespace hdmlp {

class Hdf5Source : public Source {
 public:
  Hdf5Source(Env* env, const std::string& path, const SourceOptions& options = {}, const ScanOptions& scan = {});
  ~Hdf5Source() override;

  SampleFormat format() const override { return SampleFormat::kArray; }
  const ArraySpec* sample_array() const override { return &sample_spec_; }
  const ArraySpec* label_array() const override { return has_label_array_ ? &label_spec_ : nullptr; }
  std::string SamplesRoot() const override { return folder_ ? root_ : ""; }
  std::string Describe(int64_t i) const override;
  SampleBuffer Read(int64_t i) override;

  // Reads so far that needed the library (not the direct path).
  int64_t library_reads() const { return library_reads_.load(); }

  struct Dataset;  // internal: an open HDF5 dataset and what hdmlp knows of it

 private:
  void ReadFromFile(int64_t i, uint8_t* dst);
  void ReadFromFolder(int64_t i, uint8_t* dst);
  void ReadRow(Dataset& d, ReadableFile* direct, int64_t row, uint8_t* dst, const std::string& what);

  SourceOptions options_;
  bool folder_ = false;
  std::vector<std::string> files_;  // the folder's files; else the one file
  ArraySpec sample_spec_;
  ArraySpec label_spec_;
  bool has_label_array_ = false;
  // One file: the open file and datasets, and a direct handle for the
  // reads that bypass the library.
  int64_t file_id_ = -1;
  std::unique_ptr<Dataset> samples_;
  std::unique_ptr<Dataset> labels_;
  std::unique_ptr<ReadableFile> direct_;
  int64_t direct_size_ = 0;
  std::atomic<int64_t> library_reads_{0};
};

}  // namespace hdmlp

#endif  // HDMLP_SOURCE_HDF5_SOURCE_H_
