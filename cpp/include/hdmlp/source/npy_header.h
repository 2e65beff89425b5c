// NpyHeader: the header of a NumPy .npy file, parsed without Python.
//
// An .npy file is the magic "\x93NUMPY", a major and a minor version byte, a
// little-endian header length (2 bytes in version 1, 4 in versions 2 and 3),
// then that many bytes of a Python dict literal
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 64, 64), }
// padded with spaces to a 16- or 64-byte boundary and ended by a newline,
// then the array's elements. This parses exactly that literal (strings in
// either quote, True/False, a tuple of integers); a structured dtype (descr
// a list), an object array or anything else is refused with the reason.
//
// Thread-safety: reentrant.
#ifndef HDMLP_SOURCE_NPY_HEADER_H_
#define HDMLP_SOURCE_NPY_HEADER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hdmlp {

struct NpyHeader {
  std::string descr;         // as stored: "<f4", "|u1", ">i8", "<U10", ...
  std::string dtype;         // numpy's name where hdmlp delivers it as an array ("float32"), else ""
  int64_t element_size = 0;  // bytes per element (from descr)
  bool byte_swapped = false; // the elements are in the other byte order than this machine's
  bool fortran_order = false;
  std::vector<int64_t> shape;
  int64_t header_size = 0;   // bytes before the elements
  int64_t data_bytes = 0;    // elements x element_size

  // Why the array cannot be delivered as hdmlp array samples ("" when it can).
  std::string ArrayProblem() const;
};

// Bytes that always hold the magic, the versions and the header length.
constexpr size_t kNpyPreamble = 12;

// Parses the header at the start of data[0, n). Returns true with *out
// filled; false with *error for anything that is not a valid header. When n
// is too short for the whole header, returns false with *needed set to the
// bytes required (and *error empty): read that much and call again.
bool ParseNpyHeader(const uint8_t* data, size_t n, NpyHeader* out, std::string* error, size_t* needed);

}  // namespace hdmlp

#endif  // HDMLP_SOURCE_NPY_HEADER_H_
