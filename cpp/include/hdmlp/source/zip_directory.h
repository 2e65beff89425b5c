// ZipDirectory: the members of a zip archive (an .npz is one), read from its
// central directory, so that each member can be read in place.
//
// The end-of-central-directory record is looked for in the archive's last
// 64 KiB + 22 bytes; Zip64 (the end record's Zip64 twin and the Zip64
// extra fields of entries and local headers, which numpy.savez always
// writes) is understood. Only what reading a member needs is kept: its
// name, method (0 stored, 8 deflate), sizes, CRC-32 and where its data
// starts (from its local header, whose extra field may differ from the
// central directory's). Multi-disk and encrypted archives are refused.
//
// Errors: Read throws InvalidArgumentError naming the file and what is
// wrong (no end record: not a zip, or cut short; a directory or a member
// outside the file), IOError when the storage fails.
//
// Thread-safety: a ZipDirectory is a plain value once read.
#ifndef HDMLP_SOURCE_ZIP_DIRECTORY_H_
#define HDMLP_SOURCE_ZIP_DIRECTORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hdmlp/env/env.h"

namespace hdmlp {

struct ZipMember {
  std::string name;
  uint16_t method = 0;  // 0 stored, 8 deflate
  uint16_t flags = 0;
  uint32_t crc32 = 0;
  int64_t compressed_size = 0;
  int64_t size = 0;
  int64_t local_header_offset = 0;
  int64_t data_offset = -1;  // filled by ZipDirectory::Read
};

class ZipDirectory {
 public:
  // Reads the directory of the archive `file` of `size` bytes, and each
  // member's data offset. `path` names the file in messages.
  static ZipDirectory Read(ReadableFile* file, int64_t size, const std::string& path);

  const std::vector<ZipMember>& members() const { return members_; }
  // The member called `name`, or nullptr.
  const ZipMember* Find(const std::string& name) const;

 private:
  std::vector<ZipMember> members_;
};

}  // namespace hdmlp

#endif  // HDMLP_SOURCE_ZIP_DIRECTORY_H_
