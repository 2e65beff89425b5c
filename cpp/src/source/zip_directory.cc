#include "hdmlp/source/zip_directory.h"

#include <algorithm>
#include <cstring>

#include "hdmlp/errors.h"
#include "hdmlp/util/binary_io.h"

namespace hdmlp {
namespace {

constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint32_t kZip64EndSignature = 0x06064b50;
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr uint32_t kEntrySignature = 0x02014b50;
constexpr uint32_t kLocalSignature = 0x04034b50;
constexpr int64_t kEndSize = 22;
constexpr int64_t kMaxComment = 65535;
constexpr int64_t kMaxDirectory = int64_t{1} << 30;


// The end-of-central-directory record, found in the file's last bytes: the
// tail read, its offset in the file, and the record's offset in the tail.
struct EndRecord {
  std::vector<uint8_t> tail;
  int64_t tail_offset = 0;
  int64_t end = -1;
};

// The end record is usually the file's last 22 bytes (numpy writes no comment), after a central
// directory of a few hundred: 1 KiB first, the whole 64 KiB a comment may take only when the end
// record is not there.
EndRecord FindEndRecord(ReadableFile* file, int64_t size, const std::string& bad) {
  EndRecord r;
  int64_t tail_size = 0;
  for (const int64_t want : {std::min(size, kEndSize + 1024), std::min(size, kEndSize + kMaxComment)}) {
    if (want <= tail_size) break;
    tail_size = want;
    r.tail.resize(static_cast<size_t>(tail_size));
    r.tail_offset = size - tail_size;
    file->ReadExact(r.tail_offset, r.tail.data(), tail_size);
    for (int64_t i = tail_size - kEndSize; i >= 0; --i) {
      if (LoadLe32(&r.tail[static_cast<size_t>(i)]) == kEndSignature &&
          i + kEndSize + LoadLe16(&r.tail[static_cast<size_t>(i) + 20]) == tail_size) {
        r.end = i;
        return r;
      }
    }
  }
  throw InvalidArgumentError(bad + "no end-of-central-directory record in its last bytes (not a zip/.npz "
                                   "file, or cut short: copy it again)");
}

// The Zip64 extra field holds, in order, the values stored as 0xFFFFFFFF.
void ApplyZip64Extra(const uint8_t* x, size_t extra_len, ZipMember* m) {
  size_t xpos = 0;
  while (xpos + 4 <= extra_len) {
    const uint16_t id = LoadLe16(x + xpos), len = LoadLe16(x + xpos + 2);
    if (xpos + 4 + len > extra_len) break;
    if (id == 0x0001) {
      size_t f = xpos + 4;
      const size_t fend = f + len;
      auto take = [&](int64_t* v) {
        if (static_cast<uint64_t>(*v) == 0xffffffffu && f + 8 <= fend) {
          *v = static_cast<int64_t>(LoadLe64(x + f));
          f += 8;
        }
      };
      take(&m->size);
      take(&m->compressed_size);
      take(&m->local_header_offset);
    }
    xpos += 4 + len;
  }
}

}  // namespace

const ZipMember* ZipDirectory::Find(const std::string& name) const {
  for (const auto& m : members_) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

ZipDirectory ZipDirectory::Read(ReadableFile* file, int64_t size, const std::string& path) {
  const std::string bad = "'" + path + "' is not a readable zip archive: ";
  if (size < kEndSize) {
    throw InvalidArgumentError(bad + "it has " + std::to_string(size) +
                               " bytes, fewer than a zip's end record (an empty or cut-short file)");
  }
  // The end record is usually the file's last 22 bytes (numpy writes no comment), after a central
  // directory of a few hundred: 1 KiB first, the whole 64 KiB a comment may take only when the end
  // record is not there.
  const EndRecord found = FindEndRecord(file, size, bad);
  const std::vector<uint8_t>& tail = found.tail;
  const int64_t tail_offset = found.tail_offset, end = found.end;
  const uint8_t* e = &tail[static_cast<size_t>(end)];
  if (LoadLe16(e + 4) != 0 || LoadLe16(e + 6) != 0) throw InvalidArgumentError(bad + "it spans several disks");
  uint64_t count = LoadLe16(e + 10);
  uint64_t dir_size = LoadLe32(e + 12);
  uint64_t dir_offset = LoadLe32(e + 16);
  // Zip64: a locator just before the end record points at the Zip64 end record.
  if (end >= 20 && LoadLe32(&tail[static_cast<size_t>(end - 20)]) == kZip64LocatorSignature) {
    const uint64_t z64 = LoadLe64(&tail[static_cast<size_t>(end - 20) + 8]);
    if (z64 > static_cast<uint64_t>(size) - 56) throw InvalidArgumentError(bad + "its Zip64 end record lies outside the file");
    uint8_t rec[56];
    file->ReadExact(static_cast<int64_t>(z64), rec, 56);
    if (LoadLe32(rec) != kZip64EndSignature) throw InvalidArgumentError(bad + "its Zip64 end record is missing");
    count = LoadLe64(rec + 32);
    dir_size = LoadLe64(rec + 40);
    dir_offset = LoadLe64(rec + 48);
  }
  if (dir_offset > static_cast<uint64_t>(size) || dir_size > static_cast<uint64_t>(size) - dir_offset ||
      dir_size > static_cast<uint64_t>(kMaxDirectory)) {
    throw InvalidArgumentError(bad + "its central directory (" + std::to_string(dir_size) + " bytes at offset " +
                               std::to_string(dir_offset) + ") lies outside its " + std::to_string(size) +
                               " bytes (cut short: copy it again)");
  }
  std::vector<uint8_t> dir(static_cast<size_t>(dir_size));
  if (dir_size == 0) {
    // An empty archive: no entries to read (an empty member list is refused by the caller).
  } else if (static_cast<int64_t>(dir_offset) >= tail_offset) {
    std::memcpy(dir.data(), &tail[static_cast<size_t>(static_cast<int64_t>(dir_offset) - tail_offset)], dir.size());
  } else {
    file->ReadExact(static_cast<int64_t>(dir_offset), dir.data(), static_cast<int64_t>(dir_size));
  }
  ZipDirectory out;
  size_t pos = 0;
  for (uint64_t k = 0; k < count; ++k) {
    if (dir.size() - pos < 46 || LoadLe32(&dir[pos]) != kEntrySignature) {
      throw InvalidArgumentError(bad + "its central directory entry " + std::to_string(k) + " is damaged");
    }
    const uint8_t* p = &dir[pos];
    ZipMember m;
    m.flags = LoadLe16(p + 8);
    m.method = LoadLe16(p + 10);
    m.crc32 = LoadLe32(p + 16);
    m.compressed_size = LoadLe32(p + 20);
    m.size = LoadLe32(p + 24);
    const size_t name_len = LoadLe16(p + 28), extra_len = LoadLe16(p + 30), comment_len = LoadLe16(p + 32);
    m.local_header_offset = LoadLe32(p + 42);
    if (dir.size() - pos - 46 < name_len + extra_len + comment_len) {
      throw InvalidArgumentError(bad + "its central directory entry " + std::to_string(k) + " runs past its end");
    }
    m.name.assign(reinterpret_cast<const char*>(p + 46), name_len);
    ApplyZip64Extra(p + 46 + name_len, extra_len, &m);
    if (m.flags & 0x1) throw InvalidArgumentError(bad + "its member '" + m.name + "' is encrypted");
    if (m.size < 0 || m.compressed_size < 0 || m.local_header_offset < 0 ||
        m.local_header_offset > size - 30) {
      throw InvalidArgumentError(bad + "its member '" + m.name + "' lies outside the file (cut short: copy it again)");
    }
    out.members_.push_back(std::move(m));
    pos += 46 + name_len + extra_len + comment_len;
  }
  for (auto& m : out.members_) {
    uint8_t local[30];
    file->ReadExact(m.local_header_offset, local, 30);
    if (LoadLe32(local) != kLocalSignature) {
      throw InvalidArgumentError(bad + "the local header of member '" + m.name + "' at offset " +
                                 std::to_string(m.local_header_offset) + " is missing");
    }
    m.data_offset = m.local_header_offset + 30 + LoadLe16(local + 26) + LoadLe16(local + 28);
    if (m.data_offset > size || m.compressed_size > size - m.data_offset) {
      throw InvalidArgumentError(bad + "member '" + m.name + "' (" + std::to_string(m.compressed_size) +
                                 " bytes at offset " + std::to_string(m.data_offset) + ") runs past the end of its " +
                                 std::to_string(size) + " bytes (cut short: copy it again)");
    }
  }
  return out;
}

}  // namespace hdmlp
