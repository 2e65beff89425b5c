// BinaryWriter / BinaryReader: little-endian records of fixed-size numbers
// and length-prefixed strings, for the index files the sources keep (a
// pack's index, the index caches). LoadLe16/32/64: one little-endian number
// of a file format's bytes (zip, TFRecord, BMP, ...), on any machine.
//
// Every read is bounds-checked and returns false instead of reading past
// the end, so a truncated or corrupt file is refused, never misread. The
// reader views memory it does not own. Plain values; one thread each.
#ifndef HDMLP_UTIL_BINARY_IO_H_
#define HDMLP_UTIL_BINARY_IO_H_

#include <cstdint>
#include <cstring>
#include <string>

namespace hdmlp {

inline uint16_t LoadLe16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t LoadLe32(const uint8_t* p) { return LoadLe16(p) | (static_cast<uint32_t>(LoadLe16(p + 2)) << 16); }
inline uint64_t LoadLe64(const uint8_t* p) { return LoadLe32(p) | (static_cast<uint64_t>(LoadLe32(p + 4)) << 32); }

class BinaryWriter {
 public:
  void U32(uint32_t v) { Raw(&v, sizeof v); }
  void U64(uint64_t v) { Raw(&v, sizeof v); }
  void I32(int32_t v) { Raw(&v, sizeof v); }
  void I64(int64_t v) { Raw(&v, sizeof v); }
  void Str(const std::string& s) {
    U64(s.size());
    out_.append(s);
  }
  void Raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  const std::string& data() const { return out_; }

 private:
  std::string out_;
};

class BinaryReader {
 public:
  BinaryReader(const char* data, size_t size) : data_(data), end_(size) {}
  bool U32(uint32_t* v) { return Raw(v, sizeof *v); }
  bool U64(uint64_t* v) { return Raw(v, sizeof *v); }
  bool I32(int32_t* v) { return Raw(v, sizeof *v); }
  bool I64(int64_t* v) { return Raw(v, sizeof *v); }
  bool Str(std::string* s) {
    uint64_t n;
    if (!U64(&n) || n > end_ - pos_) return false;
    s->assign(data_ + pos_, n);
    pos_ += n;
    return true;
  }
  // A count of items of at least min_item_bytes each that can still fit.
  bool Count(uint64_t* n, size_t min_item_bytes) { return U64(n) && *n <= (end_ - pos_) / min_item_bytes; }
  bool Raw(void* p, size_t n) {
    if (n > end_ - pos_) return false;
    std::memcpy(p, data_ + pos_, n);
    pos_ += n;
    return true;
  }
  bool AtEnd() const { return pos_ == end_; }
  size_t position() const { return pos_; }

 private:
  const char* data_;
  size_t end_;
  size_t pos_ = 0;
};

}  // namespace hdmlp

#endif  // HDMLP_UTIL_BINARY_IO_H_
