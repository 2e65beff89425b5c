// One binder per concept of the core; module.cc calls them in order.
#ifndef HDMLP_PYTHON_BINDINGS_H_
#define HDMLP_PYTHON_BINDINGS_H_

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

namespace hdmlp::python {

// Paths and messages as Python's os.fsdecode makes them: a file name that
// is not valid UTF-8 keeps its bytes as surrogates, as in os.listdir.
inline pybind11::str FsStr(const std::string& s) {
  return pybind11::reinterpret_steal<pybind11::str>(
      PyUnicode_DecodeFSDefaultAndSize(s.data(), static_cast<Py_ssize_t>(s.size())));
}

inline pybind11::list FsStrList(const std::vector<std::string>& v) {
  pybind11::list out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = FsStr(v[i]);
  return out;
}

void BindArrays(pybind11::module_& m);  // bind_arrays.cc: OwnedBuffer (buffer protocol, DLPack), SharedMemory
void BindConfig(pybind11::module_& m);  // bind_config.cc
void BindTools(pybind11::module_& m);   // bind_tools.cc
void BindJob(pybind11::module_& m);     // bind_job.cc
void BindMpi(pybind11::module_& m);     // bind_mpi.cc: MPI loaded at run time
void BindTransforms(pybind11::module_& m);  // bind_transforms.cc
void BindSim(pybind11::module_& m);         // bind_sim.cc
void BindSource(pybind11::module_& m);      // bind_source.cc
void BindState(pybind11::module_& m);       // bind_state.cc

}  // namespace hdmlp::python

#endif  // HDMLP_PYTHON_BINDINGS_H_
