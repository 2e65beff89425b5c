// One binder per concept of the core; module.cc calls them in order.
#ifndef HDMLP_PYTHON_BINDINGS_H_
#define HDMLP_PYTHON_BINDINGS_H_

#include <pybind11/pybind11.h>

namespace hdmlp::python {

void BindArrays(pybind11::module_& m);  // bind_arrays.cc: OwnedBuffer (buffer protocol, DLPack), SharedMemory
void BindConfig(pybind11::module_& m);  // bind_config.cc
void BindTools(pybind11::module_& m);   // bind_tools.cc
void BindJob(pybind11::module_& m);     // bind_job.cc
void BindTransforms(pybind11::module_& m);  // bind_transforms.cc
void BindSim(pybind11::module_& m);         // bind_sim.cc
void BindSource(pybind11::module_& m);      // bind_source.cc
void BindState(pybind11::module_& m);       // bind_state.cc

}  // namespace hdmlp::python

#endif  // HDMLP_PYTHON_BINDINGS_H_
