// OwnedBuffer: an n-dimensional, C-contiguous array of host memory that
// Python (and any framework) sees without a copy.
//
// Every array hdmlp hands to Python is one: a batch the C++ workers wrote,
// one sample's file bytes, the labels and ids, and the batches of hdmlp's
// Python transform workers (in shared memory). It exports its memory through
// the buffer protocol (numpy.asarray, memoryview, torch.frombuffer) and
// through DLPack (__dlpack__ / __dlpack_device__, bind_arrays.cc:
// numpy.from_dlpack, torch.from_dlpack, jax.dlpack, tf.experimental.dlpack,
// CuPy). `owner` keeps the memory alive; every export (a memoryview, a
// DLPack capsule and the tensor made from it) holds a reference to it, so the
// memory goes back to its pool (BatchPool, or a shared-memory segment's
// holder) only after the last consumer let go of it.
//
// Thread-safety: an OwnedBuffer is immutable after construction; its owner
// may be released on any thread (a DLPack consumer's deleter runs where the
// consumer frees its tensor), so owners are plain C++ objects that need no
// Python lock to free.
#ifndef HDMLP_PYTHON_OWNED_BUFFER_H_
#define HDMLP_PYTHON_OWNED_BUFFER_H_

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

namespace hdmlp::python {

struct OwnedBuffer {
  std::shared_ptr<void> owner;
  void* ptr = nullptr;
  pybind11::ssize_t count = 0;     // elements
  pybind11::ssize_t itemsize = 1;  // bytes per element
  // The buffer-protocol format of one element: "B", "b", "H", "h", "I", "i",
  // "Q", "q", "e", "f", "d" or "?" (struct module codes, native size).
  const char* format = "B";
  std::vector<pybind11::ssize_t> shape;  // empty: one dimension of `count` items
};

// The format of numpy's dtype `dtype` ("uint8", "float32", ...); InvalidArgumentError for one
// hdmlp's arrays do not hold (bind_arrays.cc).
const char* BufferFormatOf(const std::string& dtype);

}  // namespace hdmlp::python

#endif  // HDMLP_PYTHON_OWNED_BUFFER_H_
