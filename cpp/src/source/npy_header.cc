#include "hdmlp/source/npy_header.h"

#include <cstring>
#include <limits>

#include "hdmlp/util/binary_io.h"

namespace hdmlp {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr int64_t kMaxHeader = 1 << 20;

// A tiny reader of the header's Python literal.
class Literal {
 public:
  Literal(const char* p, size_t n) : p_(p), end_(p + n) {}

  void Space() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  bool Take(char c) {
    Space();
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }
  bool Peek(char c) {
    Space();
    return p_ < end_ && *p_ == c;
  }
  bool String(std::string* s) {
    Space();
    if (p_ >= end_ || (*p_ != '\'' && *p_ != '"')) return false;
    const char quote = *p_++;
    s->clear();
    while (p_ < end_ && *p_ != quote) {
      if (*p_ == '\\') return false;  // no escapes in a valid header
      s->push_back(*p_++);
    }
    if (p_ >= end_) return false;
    ++p_;
    return true;
  }
  bool Bool(bool* v) {
    Space();
    if (end_ - p_ >= 4 && std::memcmp(p_, "True", 4) == 0) {
      p_ += 4;
      *v = true;
      return true;
    }
    if (end_ - p_ >= 5 && std::memcmp(p_, "False", 5) == 0) {
      p_ += 5;
      *v = false;
      return true;
    }
    return false;
  }
  bool Int(int64_t* v) {
    Space();
    if (p_ >= end_ || *p_ < '0' || *p_ > '9') return false;
    int64_t x = 0;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') {
      if (x > (std::numeric_limits<int64_t>::max() - 9) / 10) return false;
      x = x * 10 + (*p_++ - '0');
    }
    if (p_ < end_ && (*p_ == 'L' || *p_ == 'l')) ++p_;  // Python 2's long
    *v = x;
    return true;
  }
  bool Tuple(std::vector<int64_t>* out) {
    out->clear();
    if (!Take('(')) return false;
    while (!Take(')')) {
      int64_t v;
      if (!Int(&v)) return false;
      out->push_back(v);
      if (!Take(',') && !Peek(')')) return false;
    }
    return true;
  }
  bool AtEnd() {
    Space();
    return p_ >= end_;
  }

 private:
  const char* p_;
  const char* end_;
};

bool LittleEndianMachine() {
  const uint16_t one = 1;
  uint8_t first;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

// numpy's name for a kind and size hdmlp delivers as arrays, or "".
std::string DtypeName(char kind, int64_t size) {
  if (kind == 'f' && size == 4) return "float32";
  if (kind == 'f' && size == 8) return "float64";
  if ((kind == 'i' || kind == 'u') && (size == 1 || size == 2 || size == 4 || size == 8)) {
    return std::string(kind == 'i' ? "int" : "uint") + std::to_string(size * 8);
  }
  return "";
}

// The header's dict: descr, fortran_order and shape into *out; "" or what is wrong.
std::string ReadHeaderDict(Literal lit, NpyHeader* out) {
  bool has_descr = false, has_order = false, has_shape = false;
  if (!lit.Take('{')) return "its header is not a dict literal";
  while (!lit.Take('}')) {
    std::string key;
    if (!lit.String(&key) || !lit.Take(':')) {
      return "its header is not a dict literal of descr, fortran_order and shape";
    }
    if (key == "descr") {
      if (lit.Peek('[')) return "it holds a structured dtype (descr is a list of fields); hdmlp reads plain arrays";
      if (!lit.String(&out->descr)) return "its descr is not a string";
      has_descr = true;
    } else if (key == "fortran_order") {
      if (!lit.Bool(&out->fortran_order)) return "its fortran_order is not True or False";
      has_order = true;
    } else if (key == "shape") {
      if (!lit.Tuple(&out->shape)) return "its shape is not a tuple of non-negative integers";
      has_shape = true;
    } else {
      return "its header has an unknown key '" + key + "'";
    }
    if (!lit.Take(',') && !lit.Peek('}')) return "its header is not a dict literal (a ',' or '}' is missing)";
  }
  if (!lit.AtEnd() || !has_descr || !has_order || !has_shape) {
    return "its header lacks descr, fortran_order or shape, or has bytes after the dict";
  }
  return "";
}

// The element size, dtype and byte order of out->descr; "" or what is wrong.
std::string ReadDescr(NpyHeader* out) {
  const std::string& d = out->descr;
  if (d.size() >= 2 && d[1] == 'O') return "it holds Python objects (descr '" + d + "'), which only pickle can read";
  if (d.size() < 3 || (d[0] != '<' && d[0] != '>' && d[0] != '|' && d[0] != '=')) {
    return "its descr '" + d + "' is not a byte order, a kind and a size";
  }
  int64_t size = 0;
  for (size_t i = 2; i < d.size(); ++i) {
    if (d[i] < '0' || d[i] > '9' || size > (1 << 20)) {
      size = -1;
      break;
    }
    size = size * 10 + (d[i] - '0');
  }
  const char kind = d[1];
  if (kind == 'U') size *= 4;  // characters of UCS-4
  if (size <= 0 || kind == 'O') {
    return "its descr '" + d + "' has no fixed element size (object arrays hold Python objects)";
  }
  out->element_size = size;
  out->dtype = DtypeName(kind, size);
  out->byte_swapped = size > 1 && ((d[0] == '>' && LittleEndianMachine()) || (d[0] == '<' && !LittleEndianMachine()));
  return "";
}

}  // namespace

std::string NpyHeader::ArrayProblem() const {
  if (dtype.empty()) {
    return "its dtype '" + descr + "' is not one hdmlp delivers as an array (int8..uint64, float32, float64)";
  }
  if (fortran_order) return "it is stored in Fortran (column-major) order; save it in C order (np.ascontiguousarray)";
  return "";
}

bool ParseNpyHeader(const uint8_t* data, size_t n, NpyHeader* out, std::string* error, size_t* needed) {
  *out = NpyHeader();
  error->clear();
  *needed = 0;
  if (n < 8) {
    if (n > 0 && std::memcmp(data, kMagic, n < 6 ? n : 6) != 0) {
      *error = "it does not start with NumPy's magic \\x93NUMPY";
      return false;
    }
    *needed = kNpyPreamble;
    return false;
  }
  if (std::memcmp(data, kMagic, 6) != 0) {
    *error = "it does not start with NumPy's magic \\x93NUMPY: not an .npy file";
    return false;
  }
  const int major = data[6];
  if (major < 1 || major > 3) {
    *error = "its format version is " + std::to_string(major) + "." + std::to_string(data[7]) +
             "; hdmlp reads versions 1 to 3";
    return false;
  }
  const size_t preamble = major == 1 ? 10 : 12;
  if (n < preamble) {
    *needed = preamble;
    return false;
  }
  const int64_t length = major >= 2 ? LoadLe32(data + 8) : LoadLe16(data + 8);
  if (length > kMaxHeader) {
    *error = "its header claims " + std::to_string(length) + " bytes, more than an .npy header has";
    return false;
  }
  const size_t total = preamble + static_cast<size_t>(length);
  if (n < total) {
    *needed = total;
    return false;
  }
  *error = ReadHeaderDict(Literal(reinterpret_cast<const char*>(data + preamble), static_cast<size_t>(length)), out);
  if (error->empty()) *error = ReadDescr(out);
  if (!error->empty()) return false;
  int64_t elements = 1;
  for (int64_t dim : out->shape) {
    if (dim != 0 && elements > std::numeric_limits<int64_t>::max() / dim / out->element_size) {
      *error = "its shape is too large";
      return false;
    }
    elements *= dim;
  }
  out->header_size = static_cast<int64_t>(total);
  out->data_bytes = elements * out->element_size;
  return true;
}

}  // namespace hdmlp
