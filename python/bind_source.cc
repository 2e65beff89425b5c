// Binding of a dataset Source (source/source.h), for `hdmlp pack`, tests
// and tools: the listing and each sample's bytes (copied into Python bytes).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <string>

#include "bindings.h"
#include "hdmlp/env/env.h"
#include "hdmlp/source/source.h"

namespace py = pybind11;

namespace hdmlp::python {
namespace {

const char* FormatName(SampleFormat f) {
  switch (f) {
    case SampleFormat::kEncoded:
      return "encoded";
    case SampleFormat::kRawImage:
      return "raw";
    case SampleFormat::kArray:
      return "array";
  }
  return "encoded";
}

}  // namespace

void BindSource(py::module_& m) {
  m.def("source_kinds", &SourceKinds, "The dataset formats hdmlp reads, by their source= names.");
  m.def("source_option_names", &SourceOptionNames, "The keys of source_options.");
  py::class_<Source>(m, "Source")
      .def(py::init([](const std::string& path, const std::string& kind,
                       const std::map<std::string, std::string>& options, bool use_index_cache, int threads) {
             SourceOptions o;
             o.kind = kind;
             for (const auto& [key, value] : options) SetSourceOption(&o, key, value);
             ScanOptions scan;
             scan.use_cache = use_index_cache;
             scan.threads = threads;
             py::gil_scoped_release release;
             return OpenSource(Env::Default(), path, o, scan);
           }),
           py::arg("path"), py::arg("kind") = "", py::arg("options") = std::map<std::string, std::string>{},
           py::arg("use_index_cache") = true, py::arg("threads") = 0)
      .def("__len__", &Source::size)
      .def_property_readonly("kind", &Source::kind)
      // Names as os.fsdecode gives them: a file name that is not UTF-8 keeps its bytes.
      .def_property_readonly("samples_root", [](const Source& s) { return FsStr(s.SamplesRoot()); })
      .def_property_readonly("classes", [](const Source& s) { return FsStrList(s.classes()); })
      .def_property_readonly("names", [](const Source& s) { return FsStrList(s.names()); })
      .def_property_readonly("labels", &Source::labels)
      .def_property_readonly("sizes", &Source::sizes)
      .def_property_readonly("format", [](const Source& s) { return std::string(FormatName(s.format())); })
      .def("describe", [](const Source& s, int64_t i) { return FsStr(s.Describe(i)); }, py::arg("i"))
      .def(
          "read",
          [](Source& s, int64_t i) {
            SampleBuffer bytes;
            {
              py::gil_scoped_release release;
              bytes = s.Read(i);
            }
            return py::bytes(reinterpret_cast<const char*>(bytes.data.get()), static_cast<size_t>(bytes.size));
          },
          py::arg("i"), "Sample i's bytes (an array source: its array, then its label array)");
}

}  // namespace hdmlp::python
