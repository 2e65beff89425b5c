// Bindings of hdmlp's arrays (owned_buffer.h) and of the shared memory its
// Python transform workers write into.
//
// DLPack: OwnedBuffer.__dlpack__ exports a capsule in either form of the
// protocol. With max_version >= (1, 0) (the 2023 protocol: NumPy 2, JAX,
// PyTorch 2.4+, CuPy 13) it is a "dltensor_versioned" capsule holding a
// DLManagedTensorVersioned of version 1.0; otherwise (older consumers, e.g.
// TensorFlow's tf.experimental.dlpack) a legacy "dltensor" capsule holding a
// DLManagedTensor. The managed tensor holds a reference to the array's
// memory; its deleter drops it, so the memory lives until the consumer frees
// its tensor, and a capsule never consumed frees it when it is collected.
// copy=True exports a copy (flagged IS_COPIED); copy=False and None never
// copy. The device is always the CPU (kDLCPU, 0): batches live in host
// memory, pinned or not.
//
// The DLPack structs below are the protocol's C ABI (dlpack.h, v1.0), which
// is stable by design; Debian's libdlpack-dev is 0.6, older than the
// versioned form, so they are declared here.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bindings.h"
#include "hdmlp/errors.h"
#include "hdmlp/staging/shared_memory.h"
#include "hdmlp/util/random.h"
#include "owned_buffer.h"

namespace py = pybind11;

namespace hdmlp::python {
namespace {

// ---- the DLPack ABI, v1.0 --------------------------------------------------
enum DLDeviceType : int32_t { kDLCPU = 1 };
struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
enum DLDataTypeCode : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBool = 6 };
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
constexpr uint64_t kDLPackFlagIsCopied = 1ULL << 1;
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

// ---- element types ---------------------------------------------------------
struct ElementType {
  const char* format;  // buffer protocol
  int itemsize;
  DLDataTypeCode code;
  const char* name;    // numpy's
};

constexpr ElementType kElementTypes[] = {
    {"B", 1, kDLUInt, "uint8"},    {"b", 1, kDLInt, "int8"},      {"H", 2, kDLUInt, "uint16"},
    {"h", 2, kDLInt, "int16"},     {"I", 4, kDLUInt, "uint32"},   {"i", 4, kDLInt, "int32"},
    {"Q", 8, kDLUInt, "uint64"},   {"q", 8, kDLInt, "int64"},     {"e", 2, kDLFloat, "float16"},
    {"f", 4, kDLFloat, "float32"}, {"d", 8, kDLFloat, "float64"}, {"?", 1, kDLBool, "bool"},
};

const ElementType& ElementOf(const OwnedBuffer& b) {
  for (const auto& t : kElementTypes) {
    if (std::strcmp(t.format, b.format) == 0) return t;
  }
  throw std::logic_error(std::string("OwnedBuffer with an unknown format ") + b.format);
}

const ElementType& ElementNamed(const std::string& name) {
  for (const auto& t : kElementTypes) {
    if (name == t.name) return t;
  }
  std::string known;
  for (const auto& t : kElementTypes) known += (known.empty() ? "" : ", ") + std::string(t.name);
  throw InvalidArgumentError("dtype " + name + " is not one hdmlp's arrays hold (" + known + ")");
}

std::vector<py::ssize_t> ShapeOf(const OwnedBuffer& b) {
  return b.shape.empty() ? std::vector<py::ssize_t>{b.count} : b.shape;
}

// ---- DLPack export ---------------------------------------------------------
template <typename Managed>
struct ExportContext {
  std::shared_ptr<void> owner;  // keeps the memory alive
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  Managed managed{};
};

template <typename Managed>
void DeleteExport(Managed* self) {
  delete static_cast<ExportContext<Managed>*>(self->manager_ctx);
}

template <typename Managed>
Managed* MakeExport(const OwnedBuffer& b, std::shared_ptr<void> owner, void* data) {
  const ElementType& type = ElementOf(b);
  auto ctx = std::make_unique<ExportContext<Managed>>();
  ctx->owner = std::move(owner);
  for (py::ssize_t d : ShapeOf(b)) ctx->shape.push_back(static_cast<int64_t>(d));
  ctx->strides.resize(ctx->shape.size());
  int64_t stride = 1;
  for (size_t i = ctx->shape.size(); i-- > 0;) {
    ctx->strides[i] = stride;
    stride *= ctx->shape[i];
  }
  DLTensor& t = ctx->managed.dl_tensor;
  t.data = data;
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = static_cast<int32_t>(ctx->shape.size());
  t.dtype = DLDataType{type.code, static_cast<uint8_t>(type.itemsize * 8), 1};
  t.shape = ctx->shape.data();
  t.strides = ctx->strides.data();
  t.byte_offset = 0;
  ctx->managed.manager_ctx = ctx.get();
  ctx->managed.deleter = &DeleteExport<Managed>;
  return &ctx.release()->managed;
}

// A capsule's destructor: frees the tensor unless a consumer took it (and
// renamed the capsule "used_..."), keeping any exception being raised.
template <typename Managed>
void DestroyCapsule(PyObject* capsule, const char* name, const char* used_name) {
  if (PyCapsule_IsValid(capsule, used_name)) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  auto* managed = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
  if (managed == nullptr) {
    PyErr_WriteUnraisable(capsule);
  } else if (managed->deleter != nullptr) {
    managed->deleter(managed);
  }
  PyErr_Restore(type, value, traceback);
}

void DestroyLegacyCapsule(PyObject* capsule) {
  DestroyCapsule<DLManagedTensor>(capsule, "dltensor", "used_dltensor");
}
void DestroyVersionedCapsule(PyObject* capsule) {
  DestroyCapsule<DLManagedTensorVersioned>(capsule, "dltensor_versioned", "used_dltensor_versioned");
}

int64_t BytesOf(const OwnedBuffer& b) { return static_cast<int64_t>(b.count) * b.itemsize; }

py::object Dlpack(const OwnedBuffer& b, const py::object& stream, const py::object& max_version,
                  const py::object& dl_device, const py::object& copy) {
  (void)stream;  // host memory: nothing to synchronise with
  if (!dl_device.is_none()) {
    const auto device = dl_device.cast<std::pair<int, int>>();
    if (device.first != kDLCPU || device.second != 0) {
      PyErr_SetString(PyExc_BufferError, ("hdmlp arrays live in host memory (device (1, 0)); they cannot be "
                                          "exported to device (" + std::to_string(device.first) + ", " +
                                          std::to_string(device.second) + ")").c_str());
      throw py::error_already_set();
    }
  }
  std::shared_ptr<void> owner = b.owner;
  void* data = b.ptr;
  const bool copied = !copy.is_none() && copy.cast<bool>();
  if (copied) {
    const int64_t bytes = BytesOf(b);
    const size_t rounded = static_cast<size_t>((std::max<int64_t>(bytes, 1) + 63) / 64 * 64);
    void* memory = std::aligned_alloc(64, rounded);
    if (memory == nullptr) throw std::bad_alloc();
    std::memcpy(memory, b.ptr, static_cast<size_t>(bytes));
    owner = std::shared_ptr<void>(memory, std::free);
    data = memory;
  }
  bool versioned = false;
  if (!max_version.is_none()) {
    const auto version = max_version.cast<std::pair<int, int>>();
    versioned = version.first >= 1;
  }
  if (versioned) {
    DLManagedTensorVersioned* managed = MakeExport<DLManagedTensorVersioned>(b, std::move(owner), data);
    managed->version = DLPackVersion{1, 0};
    managed->flags = copied ? kDLPackFlagIsCopied : 0;
    PyObject* capsule = PyCapsule_New(managed, "dltensor_versioned", &DestroyVersionedCapsule);
    if (capsule == nullptr) {
      managed->deleter(managed);
      throw py::error_already_set();
    }
    return py::reinterpret_steal<py::object>(capsule);
  }
  DLManagedTensor* managed = MakeExport<DLManagedTensor>(b, std::move(owner), data);
  PyObject* capsule = PyCapsule_New(managed, "dltensor", &DestroyLegacyCapsule);
  if (capsule == nullptr) {
    managed->deleter(managed);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(capsule);
}

// ---- shared memory ---------------------------------------------------------

// A SharedMemory segment (staging/shared_memory.h) for Python, with the
// arrays made on it counted: the owner of a pool of segments reads views()
// to know when one may be written again. Views keep the mapping alive.
class PySharedMemory {
 public:
  explicit PySharedMemory(std::unique_ptr<SharedMemory> memory) : memory_(std::move(memory)) {}

  const SharedMemory& memory() const { return *memory_; }
  int64_t views() const { return views_->load(); }

  OwnedBuffer View(int64_t offset, const std::vector<py::ssize_t>& shape, const std::string& dtype) const {
    const ElementType& type = ElementNamed(dtype);
    int64_t count = 1;
    for (py::ssize_t d : shape) {
      if (d < 0) throw InvalidArgumentError("a view's shape has a negative dimension");
      count *= d;
    }
    if (offset < 0 || offset % type.itemsize != 0 || offset + count * type.itemsize > memory_->size()) {
      throw InvalidArgumentError("a view of " + std::to_string(count * type.itemsize) + " bytes at offset " +
                                 std::to_string(offset) + " does not fit a shared memory segment of " +
                                 std::to_string(memory_->size()) + " bytes (or is misaligned for " + dtype + ")");
    }
    views_->fetch_add(1);
    OwnedBuffer b;
    b.ptr = memory_->data() + offset;
    // The deleter holds the mapping (so it outlives every view) and counts
    // the view out when its last export is gone, on whatever thread that is.
    b.owner = std::shared_ptr<void>(b.ptr, [memory = memory_, views = views_](void*) { views->fetch_sub(1); });
    b.count = static_cast<py::ssize_t>(count);
    b.itemsize = type.itemsize;
    b.format = type.format;
    b.shape = shape;
    return b;
  }

 private:
  std::shared_ptr<SharedMemory> memory_;
  std::shared_ptr<std::atomic<int64_t>> views_ = std::make_shared<std::atomic<int64_t>>(0);
};

}  // namespace

const char* BufferFormatOf(const std::string& dtype) { return ElementNamed(dtype).format; }

void BindArrays(py::module_& m) {
  py::class_<OwnedBuffer>(m, "OwnedBuffer", py::buffer_protocol(),
                          "hdmlp's array: C-contiguous host memory exported without a copy through the buffer "
                          "protocol and DLPack; the memory lives while any view of it does.")
      .def_buffer([](OwnedBuffer& b) {
        const std::vector<py::ssize_t> shape = ShapeOf(b);
        std::vector<py::ssize_t> strides(shape.size());
        py::ssize_t stride = b.itemsize;
        for (size_t i = shape.size(); i-- > 0;) {
          strides[i] = stride;
          stride *= shape[i];
        }
        return py::buffer_info(b.ptr, b.itemsize, b.format, static_cast<py::ssize_t>(shape.size()), shape, strides,
                               /*readonly=*/false);
      })
      .def_property_readonly("shape", [](const OwnedBuffer& b) { return py::tuple(py::cast(ShapeOf(b))); })
      .def_property_readonly("ndim", [](const OwnedBuffer& b) { return ShapeOf(b).size(); })
      .def_property_readonly(
          "dtype", [](const OwnedBuffer& b) { return py::module_::import("numpy").attr("dtype")(ElementOf(b).name); },
          "the element type, a numpy.dtype (so that numpy and JAX read it as an array's)")
      .def_property_readonly("nbytes", &BytesOf)
      .def_property_readonly("address", [](const OwnedBuffer& b) { return reinterpret_cast<uintptr_t>(b.ptr); })
      .def("__len__", [](const OwnedBuffer& b) { return ShapeOf(b).at(0); })
      // list(labels), `for y in labels`, labels.tolist(): Python numbers (nested lists past one
      // dimension), as a NumPy array's; the memoryview reads the buffer in place.
      .def("tolist", [](py::object self) { return py::memoryview(self).attr("tolist")(); },
           "The elements as Python numbers (nested lists for more than one dimension), as numpy's tolist.")
      .def("__iter__", [](py::object self) { return py::iter(py::memoryview(self).attr("tolist")()); })
      .def("__dlpack__", &Dlpack, py::kw_only(), py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
           py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
           "A DLPack capsule of this array (versioned when max_version >= (1, 0)); no copy unless copy=True.")
      .def("__dlpack_device__", [](const OwnedBuffer&) { return py::make_tuple(static_cast<int>(kDLCPU), 0); })
      .def("__repr__", [](const OwnedBuffer& b) {
        std::string shape;
        for (py::ssize_t d : ShapeOf(b)) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
        return "hdmlp.OwnedBuffer(shape=(" + shape + (ShapeOf(b).size() == 1 ? "," : "") + "), dtype=" +
               ElementOf(b).name + ")";
      });

  py::class_<PySharedMemory>(m, "SharedMemory",
                             "An anonymous shared memory segment (memfd) for hdmlp's Python transform workers.")
      .def(py::init([](int64_t bytes, const std::string& name) {
             return std::make_unique<PySharedMemory>(SharedMemory::Create(bytes, name));
           }),
           py::arg("nbytes"), py::arg("name") = "hdmlp")
      .def_static(
          "attach", [](int fd, int64_t bytes) { return std::make_unique<PySharedMemory>(SharedMemory::Attach(fd, bytes)); },
          py::arg("fd"), py::arg("nbytes"), "Maps a segment received from another process; takes and closes fd.")
      .def_property_readonly("fd", [](const PySharedMemory& s) { return s.memory().fd(); },
                             "the memfd (-1 for an attached segment)")
      .def_property_readonly("nbytes", [](const PySharedMemory& s) { return s.memory().size(); })
      .def_property_readonly("address",
                             [](const PySharedMemory& s) { return reinterpret_cast<uintptr_t>(s.memory().data()); })
      .def_property_readonly("views", &PySharedMemory::views, "views of this segment still alive (with their exports)")
      .def("view", &PySharedMemory::View, py::arg("offset"), py::arg("shape"), py::arg("dtype") = "uint8",
           "An OwnedBuffer of `shape` and `dtype` at byte `offset`, keeping the segment mapped.");

  m.def(
      "derive_key",
      [](const std::vector<uint64_t>& words) { return DeriveKey(words.data(), words.size()); }, py::arg("words"),
      "hdmlp's key derivation (util/random.h: SplitMix64's finaliser folded over the words), as the C++ side "
      "derives every random stream");
}

}  // namespace hdmlp::python
