// hdmlp._nvjpeg: the GPU's batched JPEG decoder (NvjpegBatchDecoder) for hdmlp.device_decode.
//
// Built only where CMake finds the CUDA toolkit's nvJPEG (or HDMLP_NVJPEG_ROOT), as a module of its own, so
// that hdmlp._core never links CUDA. Inputs and outputs are plain addresses: the caller (hdmlp/nvjpeg.py)
// holds the host tensors of file bytes and the device tensor the planes go to, and passes the CUDA stream
// the work goes on. Both calls run without the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "hdmlp/device/nvjpeg_batch_decoder.h"

namespace py = pybind11;

namespace {

std::vector<hdmlp::EncodedJpeg> Files(const std::vector<uintptr_t>& addresses, const std::vector<size_t>& sizes) {
  if (addresses.size() != sizes.size()) throw py::value_error("addresses and sizes differ in length");
  std::vector<hdmlp::EncodedJpeg> files(addresses.size());
  for (size_t i = 0; i < files.size(); ++i) {
    files[i].data = reinterpret_cast<const uint8_t*>(addresses[i]);
    files[i].size = sizes[i];
  }
  return files;
}

}  // namespace

PYBIND11_MODULE(_nvjpeg, m) {
  m.doc() = "nvJPEG's batched decoder for hdmlp.device_decode (see hdmlp/nvjpeg.py)";
  py::class_<hdmlp::NvjpegBatchDecoder>(m, "BatchDecoder")
      .def(py::init([](const std::string& backend) {
             const hdmlp::NvjpegBackend wanted = hdmlp::ParseNvjpegBackend(backend);
             py::gil_scoped_release release;
             return std::make_unique<hdmlp::NvjpegBatchDecoder>(wanted);
           }),
           py::arg("backend") = "auto",
           "Starts nvJPEG with `backend` ('auto' tries hardware, gpu_hybrid, default) in the calling thread's "
           "current CUDA context. RuntimeError names each backend's failure when none starts.")
      .def_property_readonly("backend",
                             [](const hdmlp::NvjpegBatchDecoder& d) { return hdmlp::NvjpegBackendName(d.backend()); })
      .def_property_readonly("hardware_engines", &hdmlp::NvjpegBatchDecoder::hardware_engines)
      .def_property_readonly("hardware_cores_per_engine", &hdmlp::NvjpegBatchDecoder::hardware_cores_per_engine)
      .def(
          "probe",
          [](hdmlp::NvjpegBatchDecoder& d, const std::vector<uintptr_t>& addresses, const std::vector<size_t>& sizes) {
            const std::vector<hdmlp::EncodedJpeg> files = Files(addresses, sizes);
            std::vector<hdmlp::JpegProbe> probes;
            {
              py::gil_scoped_release release;
              probes = d.Probe(files);
            }
            std::vector<std::tuple<int, int, bool>> out;
            out.reserve(probes.size());
            for (const auto& p : probes) out.emplace_back(p.height, p.width, p.decodable);
            return out;
          },
          py::arg("addresses"), py::arg("sizes"),
          "(height, width, decodable) of each file (host addresses and byte counts), from its header.")
      .def(
          "decode",
          [](hdmlp::NvjpegBatchDecoder& d, const std::vector<uintptr_t>& addresses, const std::vector<size_t>& sizes,
             const std::vector<std::pair<int, int>>& shapes, const std::vector<uintptr_t>& outputs, uintptr_t stream) {
            const std::vector<hdmlp::EncodedJpeg> files = Files(addresses, sizes);
            if (shapes.size() != files.size() || outputs.size() != files.size()) {
              throw py::value_error("decode: addresses, shapes and outputs differ in length");
            }
            std::vector<hdmlp::JpegProbe> probes(files.size());
            std::vector<uint8_t*> out(files.size());
            for (size_t i = 0; i < files.size(); ++i) {
              probes[i].height = shapes[i].first;
              probes[i].width = shapes[i].second;
              probes[i].components = 3;
              probes[i].decodable = true;
              out[i] = reinterpret_cast<uint8_t*>(outputs[i]);
            }
            py::gil_scoped_release release;
            d.Decode(files, probes, out, reinterpret_cast<void*>(stream));
          },
          py::arg("addresses"), py::arg("sizes"), py::arg("shapes"), py::arg("outputs"), py::arg("stream"),
          "Decodes each file into 3 planes of height x width bytes at outputs[i] (device addresses), enqueued on "
          "`stream` (a cudaStream_t as an int). Every file must be one probe() called decodable.");
}
