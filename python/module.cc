// hdmlp._core: the thin pybind11 layer over the C++ core.
//
// Each concept is bound in its own file (bind_*.cc); this file only maps the
// core's exceptions to Python's and calls the binders. The Python package
// `hdmlp` wraps these bindings with typed, documented functions; user code
// never imports _core directly.
#include <pybind11/pybind11.h>

#include <pybind11/stl.h>

#include "bindings.h"
#include "hdmlp/build_info.h"
#include "hdmlp/errors.h"

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
  m.doc() = "hdmlp C++ core (internal; use the hdmlp package)";

  static py::exception<hdmlp::ConfigError> config_error(m, "ConfigError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    // Messages name files, whose names need not be UTF-8: decoded as
    // os.fsdecode does, never failing.
    const auto set = [](PyObject* type, const char* what) {
      PyObject* message = PyUnicode_DecodeFSDefault(what);
      if (message == nullptr) return;  // the decode error is what Python sees
      PyErr_SetObject(type, message);
      Py_DECREF(message);
    };
    try {
      if (p) std::rethrow_exception(p);
    } catch (const hdmlp::ConfigError& e) {
      set(config_error.ptr(), e.what());
    } catch (const hdmlp::NotFoundError& e) {
      set(PyExc_FileNotFoundError, e.what());
    } catch (const hdmlp::NotADirectoryError& e) {
      set(PyExc_NotADirectoryError, e.what());
    } catch (const hdmlp::AllocationError& e) {
      set(PyExc_MemoryError, e.what());
    } catch (const hdmlp::TypeError& e) {
      set(PyExc_TypeError, e.what());
    } catch (const hdmlp::InvalidArgumentError& e) {
      set(PyExc_ValueError, e.what());
    } catch (const hdmlp::IOError& e) {
      set(PyExc_OSError, e.what());
    } catch (const hdmlp::ClosedError& e) {
      set(PyExc_RuntimeError, e.what());
    } catch (const hdmlp::InterruptedError& e) {
      set(PyExc_KeyboardInterrupt, e.what());
    } catch (const hdmlp::Error& e) {
      set(PyExc_RuntimeError, e.what());
    }
  });

  m.def("build_info", &hdmlp::BuildInfo, "(component, version) pairs this build was compiled against");

  hdmlp::python::BindArrays(m);  // first: the others return its arrays
  hdmlp::python::BindConfig(m);
  hdmlp::python::BindTools(m);
  hdmlp::python::BindState(m);
  hdmlp::python::BindJob(m);
  hdmlp::python::BindMpi(m);
  hdmlp::python::BindTransforms(m);
  hdmlp::python::BindSim(m);
  hdmlp::python::BindSource(m);
}
