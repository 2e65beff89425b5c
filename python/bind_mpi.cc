// MPI loaded at run time (transport/mpi_fabric.h): which library hdmlp uses
// or would use, and why; where it looks; the launcher the environment names.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "hdmlp/transport/mpi_fabric.h"
#include "hdmlp/transport/mpi_launcher.h"

namespace py = pybind11;

namespace hdmlp::python {

void BindMpi(py::module_& m) {
  m.def("set_mpi_search_dirs", &MpiFabric::SetSearchDirs, py::arg("dirs"),
        "Folders searched for each MPI ABI's library before the dynamic loader's own search");
  m.def("mpi_describe", &MpiFabric::Describe, py::call_guard<py::gil_scoped_release>(),
        "One line: the MPI loaded and why, or which would be and why (loads it locally, never initialises it)");
  m.def("mpi_initialized", &MpiFabric::LoadedAndInitialized, py::call_guard<py::gil_scoped_release>(),
        "True when an MPI library is loaded in this process and initialised (never loads one)");
  m.def(
      "mpi_info",
      []() -> py::object {
        MpiFabric* fabric = MpiFabric::IfLoaded();
        if (fabric == nullptr) return py::none();
        const FabricInfo& i = fabric->info();
        py::dict d;
        d["library"] = i.library;
        d["abi"] = i.abi;
        d["path"] = FsStr(i.path);
        d["why"] = i.why;
        d["module"] = FsStr(i.module);
        return std::move(d);
      },
      "The MPI this process loaded (library, abi, path, why, module), or None while none is loaded");
  m.def(
      "mpi_launcher",
      []() -> py::object {
        const MpiLauncher l = DetectMpiLauncher();
        if (!l.present) return py::none();
        py::dict d;
        d["name"] = l.name;
        d["abis"] = l.abis;
        d["world_size"] = l.world_size;
        return std::move(d);
      },
      "The MPI launcher this process's environment names (name, abis, world_size), or None");
}

}  // namespace hdmlp::python
