// Binding of JobState (job/job_state.h): the position and identity behind
// job.state_dict(). hdmlp/state.py turns it into the user's dict and back.
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "hdmlp/job/job_state.h"

namespace py = pybind11;

namespace hdmlp::python {

void BindState(py::module_& m) {
  py::class_<JobState>(m, "JobState")
      .def(py::init<>())
      .def_readonly_static("VERSION", &JobState::kVersion)
      .def_readwrite("version", &JobState::version)
      .def_readwrite("seed", &JobState::seed)
      .def_readwrite("epoch", &JobState::epoch)
      .def_readwrite("batches", &JobState::batches)
      .def_readwrite("position", &JobState::position)
      .def_readwrite("order_world_size", &JobState::order_world_size)
      .def_readwrite("batch_size", &JobState::batch_size)
      .def_readwrite("distr_scheme", &JobState::distr_scheme)
      .def_readwrite("exchange_fraction", &JobState::exchange_fraction)
      .def_readwrite("shuffle", &JobState::shuffle)
      .def_readwrite("drop_last", &JobState::drop_last)
      .def_readwrite("samples", &JobState::samples)
      .def_readwrite("fingerprint", &JobState::fingerprint)
      .def_readwrite("world_size", &JobState::world_size)
      .def_readwrite("epochs", &JobState::epochs)
      .def("__repr__", [](const JobState& s) { return "JobState(" + DescribeState(s) + ")"; });
}

}  // namespace hdmlp::python
