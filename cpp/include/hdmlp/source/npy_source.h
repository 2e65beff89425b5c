// NpySource: NumPy .npy and .npz files, one sample each.
//
// The files are given as one file, a comma-separated list, a brace pattern
// or a folder of *.npy and *.npz files (file_list.h), sorted by name. Each
// file is a sample, delivered (SourceOptions::npy_as) as
//   "array"  its array's elements (SampleFormat::kArray, as the HDF5 source
//            delivers arrays): every file must hold the first file's dtype
//            and shape (int8..uint64, float32, float64; C order), converted
//            to this machine's byte order. An .npz's array is its member
//            npz_member ("": its first member; "x" is DLIO's); a stored
//            member is read in place, a deflated one (np.savez_compressed)
//            is inflated with zlib. Labels: an .npz's member
//            npz_label_member, an integer array of one element (DLIO's "y"
//            holds one per sample); else every label is 0.
//   "bytes"  the whole file as stored (SampleFormat::kEncoded), for files
//            whose shapes differ (DLIO's unet3d files do) or that a
//            Python transform loads itself (np.load(io.BytesIO(b))).
// Each file's header is read when the source opens (files in parallel); the
// listing is kept in the user cache directory (listing_cache.h) and used
// again while every file has its size and modification time.
//
// Errors, each naming the file: a bad .npy header, a damaged zip directory
// or a file cut short (shorter than its header says, or a zip without its
// end record) fail the open with InvalidArgumentError, and so do a dtype or
// shape that differs from the first file's in "array" mode (which suggests
// "bytes"). A member that does not inflate, or whose CRC-32 does not match,
// fails its Read with InvalidArgumentError naming the file and the member.
//
// Thread-safety: as Source. Non-copyable.
#ifndef HDMLP_SOURCE_NPY_SOURCE_H_
#define HDMLP_SOURCE_NPY_SOURCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hdmlp/source/file_list.h"
#include "hdmlp/source/image_folder.h"
#include "hdmlp/source/source.h"

namespace hdmlp {

class NpySource : public Source {
 public:
  NpySource(Env* env, const std::string& spec, const SourceOptions& options = {}, const ScanOptions& scan = {});

  SampleFormat format() const override { return arrays_ ? SampleFormat::kArray : SampleFormat::kEncoded; }
  const ArraySpec* sample_array() const override { return arrays_ ? &spec_ : nullptr; }
  std::string Describe(int64_t i) const override;
  SampleIdentity Identity(int64_t i) const override;
  SampleBuffer Read(int64_t i) override;

  static const std::vector<std::string>& Extensions();

  // Where a file's array lies (array mode).
  struct Entry {
    bool npz = false;
    uint16_t method = 0;       // npz: 0 stored, 8 deflate
    uint32_t crc32 = 0;        // npz: the member's CRC-32
    int64_t offset = 0;        // .npy: the elements; .npz: the member's data
    int64_t stored_size = 0;   // .npz: the member's bytes in the file
    int64_t member_size = 0;   // .npz: the member's bytes (an .npy file) once inflated
    int64_t header_size = 0;   // the .npy header before the elements
    bool byte_swapped = false;
    std::string member;        // .npz: the member's name
  };

 private:
  SampleBuffer ReadArray(int64_t i);
  SampleBuffer ReadMember(int64_t i, ReadableFile* file);

  bool arrays_ = true;
  ArraySpec spec_;
  std::vector<ListedFile> files_;
  std::vector<Entry> entries_;
};

}  // namespace hdmlp

#endif  // HDMLP_SOURCE_NPY_SOURCE_H_
