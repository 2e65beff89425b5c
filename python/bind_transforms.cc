// Bindings of the transform pipeline. hdmlp.transforms builds the specs;
// apply() is for tests and single images (the loader calls the C++ pipeline
// from its workers). Each result owns its memory and exports it through the
// buffer protocol, so numpy.asarray / torch.frombuffer view it without a copy.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "hdmlp/transforms/transform_pipeline.h"
#include "hdmlp/util/parallel_for.h"

namespace py = pybind11;

namespace hdmlp::python {
namespace {

using PySpec = std::pair<std::string, std::map<std::string, std::vector<double>>>;

// One transformed sample: C-contiguous, 3-D, float32 ("f") or uint8 ("B").
struct TransformOutput {
  std::unique_ptr<uint64_t[]> data;  // 8-byte aligned for float32
  OutputShape shape;
};

py::tuple Dims(const OutputShape& s) {
  const auto d = s.dims();
  return py::make_tuple(d[0], d[1], d[2]);
}

// A contiguous read-only view of any bytes-like object, released on scope exit.
class BytesView {
 public:
  explicit BytesView(const py::object& obj) {
    if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_SIMPLE) != 0) throw py::error_already_set();
  }
  ~BytesView() { PyBuffer_Release(&view_); }
  BytesView(const BytesView&) = delete;
  BytesView& operator=(const BytesView&) = delete;
  const uint8_t* data() const { return static_cast<const uint8_t*>(view_.buf); }
  int64_t size() const { return static_cast<int64_t>(view_.len); }

 private:
  Py_buffer view_{};
};

std::shared_ptr<TransformPipeline> MakePipeline(const std::vector<PySpec>& specs) {
  std::vector<TransformSpec> out;
  out.reserve(specs.size());
  for (const auto& [op, args] : specs) out.push_back(TransformSpec{op, args});
  return std::make_shared<TransformPipeline>(std::move(out));
}

py::dict OutputShapeDict(const TransformPipeline& p) {
  const OutputShape& s = p.output();
  py::dict d;
  d["channels"] = s.channels;
  d["height"] = s.fixed ? py::object(py::int_(s.height)) : py::object(py::none());
  d["width"] = s.fixed ? py::object(py::int_(s.width)) : py::object(py::none());
  d["fixed"] = s.fixed;
  d["dtype"] = s.type == OutputType::kFloat32 ? "float32" : "uint8";
  d["layout"] = s.chw ? "CHW" : "HWC";
  d["shape"] = s.fixed ? py::object(Dims(s)) : py::object(py::none());
  d["nbytes"] = s.fixed ? py::object(py::int_(s.bytes())) : py::object(py::none());
  return d;
}

py::dict JpegDecodePlanDict(const TransformPipeline& p, int width, int height, uint64_t seed, int epoch,
                            int64_t sample, int components) {
  const JpegDecodePlan plan = p.PlanJpegDecode(width, height, seed, epoch, sample, components);
  py::dict d;
  d["scale"] = py::make_tuple(plan.mode.scale, 8);
  d["region"] = py::make_tuple(plan.region.x, plan.region.y, plan.region.width, plan.region.height);
  d["fast_idct"] = plan.mode.fast_idct;
  d["fancy_upsampling"] = plan.mode.fancy_upsampling;
  return d;
}

py::tuple ShapeOf(const TransformPipeline& p, const py::object& data, const std::string& path) {
  BytesView bytes(data);
  OutputShape s;
  {
    py::gil_scoped_release release;
    s = p.ShapeOf(bytes.data(), bytes.size(), path);
  }
  return Dims(s);
}

py::list RandomDrawsList(const TransformPipeline& p, int width, int height, uint64_t seed, int epoch, int64_t sample) {
  py::list out;
  for (const auto& d : p.RandomDraws(width, height, seed, epoch, sample)) {
    py::dict e;
    e["index"] = d.index;
    e["op"] = p.specs()[d.index].op;
    for (const DrawValue& v : d.values) {
      switch (v.kind) {
        case DrawValue::Kind::kInt: e[v.name.c_str()] = static_cast<int64_t>(v.value); break;
        case DrawValue::Kind::kBool: e[v.name.c_str()] = v.value != 0; break;
        case DrawValue::Kind::kFloat: e[v.name.c_str()] = v.value; break;
        case DrawValue::Kind::kText: e[v.name.c_str()] = v.text; break;
      }
    }
    out.append(e);
  }
  return out;
}

py::tuple Apply(const TransformPipeline& p, const py::object& data, const std::string& path, uint64_t seed,
                int epoch, int64_t sample) {
  BytesView bytes(data);
  auto out = std::make_unique<TransformOutput>();
  {
    py::gil_scoped_release release;
    const OutputShape s = p.ShapeOf(bytes.data(), bytes.size(), path);
    out->data.reset(new uint64_t[static_cast<size_t>((s.bytes() + 7) / 8)]);
    out->shape = p.Apply(bytes.data(), bytes.size(), path, seed, epoch, sample, s,
                         reinterpret_cast<uint8_t*>(out->data.get()));
  }
  py::tuple shape = Dims(out->shape);
  return py::make_tuple(py::cast(std::move(out)), shape);
}

void ApplyRows(const TransformPipeline& p, const py::list& samples, const std::vector<std::string>& paths,
               uint64_t seed, int epoch, const std::vector<int64_t>& ids, const py::object& out, int threads) {
  const OutputShape& shape = p.output();
  if (!shape.fixed) throw py::value_error("apply_rows needs a chain whose output size is fixed");
  const auto n = static_cast<int64_t>(samples.size());
  if (static_cast<int64_t>(paths.size()) != n || static_cast<int64_t>(ids.size()) != n) {
    throw py::value_error("apply_rows: samples, paths and ids differ in length");
  }
  Py_buffer target{};
  if (PyObject_GetBuffer(out.ptr(), &target, PyBUF_WRITABLE) != 0) throw py::error_already_set();
  const std::unique_ptr<Py_buffer, void (*)(Py_buffer*)> release_target(&target, PyBuffer_Release);
  if (static_cast<int64_t>(target.len) < n * shape.bytes()) {
    throw py::value_error("apply_rows: out holds " + std::to_string(target.len) + " bytes, not the " +
                          std::to_string(n * shape.bytes()) + " of " + std::to_string(n) + " rows");
  }
  std::vector<std::unique_ptr<BytesView>> views;
  views.reserve(static_cast<size_t>(n));
  for (const auto& s : samples) views.push_back(std::make_unique<BytesView>(py::reinterpret_borrow<py::object>(s)));
  auto* rows = static_cast<uint8_t*>(target.buf);
  py::gil_scoped_release release;
  ParallelFor(n, threads, [&](int64_t i) {
    const auto k = static_cast<size_t>(i);
    p.Apply(views[k]->data(), views[k]->size(), paths[k], seed, epoch, ids[k], rows + i * shape.bytes());
  });
}

std::vector<std::array<int64_t, 5>> CropDraws(const TransformPipeline& p, const std::vector<std::array<int, 2>>& sizes,
                                              uint64_t seed, int epoch, const std::vector<int64_t>& ids) {
  if (sizes.size() != ids.size()) throw py::value_error("crop_draws: sizes and ids differ in length");
  std::vector<std::array<int64_t, 5>> out(sizes.size(), std::array<int64_t, 5>{-1, -1, -1, -1, 0});
  py::gil_scoped_release release;
  for (size_t i = 0; i < sizes.size(); ++i) {
    for (const RandomDraw& d : p.RandomDraws(sizes[i][0], sizes[i][1], seed, epoch, ids[i])) {
      const std::string& op = p.specs()[d.index].op;
      if (op == "RandomResizedCrop") {
        out[i] = {d.top, d.left, d.height, d.width, out[i][4]};
      } else if (op == "RandomHorizontalFlip") {
        out[i][4] = d.flip;
      }
    }
  }
  return out;
}

void BindTransformOutput(py::module_& m) {
  py::class_<TransformOutput>(m, "TransformOutput", py::buffer_protocol())
      .def_property_readonly("shape", [](const TransformOutput& o) { return Dims(o.shape); })
      .def_property_readonly("dtype", [](const TransformOutput& o) {
        return o.shape.type == OutputType::kFloat32 ? "float32" : "uint8";
      })
      .def_property_readonly("nbytes", [](const TransformOutput& o) { return o.shape.bytes(); })
      .def_buffer([](TransformOutput& o) {
        const bool f = o.shape.type == OutputType::kFloat32;
        const auto d = o.shape.dims();
        const py::ssize_t item = f ? 4 : 1;
        return py::buffer_info(o.data.get(), item, f ? "f" : "B", 3, {d[0], d[1], d[2]},
                               {d[1] * d[2] * item, d[2] * item, item});
      });
}

}  // namespace

void BindTransforms(py::module_& m) {
  BindTransformOutput(m);
  py::class_<TransformPipeline, std::shared_ptr<TransformPipeline>>(m, "TransformPipeline")
      .def(py::init(&MakePipeline), py::arg("specs"),
           "Validate a chain of (op, {arg: [numbers]}) specs; ValueError names the transform at fault.")
      .def_property_readonly("output_shape", &OutputShapeDict,
                             "{channels, height, width, fixed, dtype, layout, shape, nbytes}; sizes are None when "
                             "not fixed.")
      .def_property_readonly("draft", &TransformPipeline::draft)
      .def_property_readonly("fast", &TransformPipeline::fast)
      .def("jpeg_decode_plan", &JpegDecodePlanDict, py::arg("width"), py::arg("height"), py::arg("seed") = 0,
           py::arg("epoch") = 0, py::arg("sample") = 0, py::arg("components") = 3,
           "How apply() decodes a JPEG of that size for this sample: {scale: (m, 8), region: (x, y, w, h) in the "
           "scaled image, fast_idct, fancy_upsampling}.")
      .def("shape_of", &ShapeOf, py::arg("data"), py::arg("path"),
           "The shape apply() gives for this image, from its header alone.")
      .def("random_draws", &RandomDrawsList, py::arg("width"), py::arg("height"), py::arg("seed") = 0,
           py::arg("epoch") = 0, py::arg("sample") = 0,
           "The random decisions apply() makes for an image of that size, in chain order: one dict per op that "
           "drew something, {index, op, ...its values} (RandomResizedCrop: top, left, height, width; flips: flip; "
           "the others: see docs/transforms.md).")
      .def("apply", &Apply, py::arg("data"), py::arg("path"), py::arg("seed") = 0, py::arg("epoch") = 0,
           py::arg("sample") = 0,
           "Decode and transform one image: (buffer, shape). Random parameters depend only on "
           "(seed, epoch, sample). ValueError names the file for a bad image.")
      .def("apply_rows", &ApplyRows, py::arg("samples"), py::arg("paths"), py::arg("seed"), py::arg("epoch"),
           py::arg("ids"), py::arg("out"), py::arg("threads"),
           "apply() of many images on `threads` threads, row i into out[i] (a writable buffer of len(samples) "
           "rows of the fixed output size), without the GIL. The first bad image raises its ValueError.")
      .def("crop_draws", &CropDraws, py::arg("sizes"), py::arg("seed"), py::arg("epoch"), py::arg("ids"),
           "random_draws' RandomResizedCrop box and horizontal flip for many images of (width, height): one "
           "(top, left, height, width, flip) per image, -1 where the chain drew no box.");
}

}  // namespace hdmlp::python
