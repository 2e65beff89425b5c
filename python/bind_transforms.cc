// Bindings of the transform pipeline. hdmlp.transforms builds the specs;
// apply() is for tests and single images (the loader calls the C++ pipeline
// from its workers). Each result owns its memory and exports it through the
// buffer protocol, so numpy.asarray / torch.frombuffer view it without a copy.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "hdmlp/transforms/transform_pipeline.h"

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

}  // namespace

void BindTransforms(py::module_& m) {
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

  py::class_<TransformPipeline, std::shared_ptr<TransformPipeline>>(m, "TransformPipeline")
      .def(py::init(&MakePipeline), py::arg("specs"),
           "Validate a chain of (op, {arg: [numbers]}) specs; ValueError names the transform at fault.")
      .def_property_readonly(
          "output_shape",
          [](const TransformPipeline& p) {
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
          },
          "{channels, height, width, fixed, dtype, layout, shape, nbytes}; sizes are None when not fixed.")
      .def_property_readonly("draft", &TransformPipeline::draft)
      .def_property_readonly("fast", &TransformPipeline::fast)
      .def(
          "jpeg_decode_plan",
          [](const TransformPipeline& p, int width, int height, uint64_t seed, int epoch, int64_t sample,
             int components) {
            const JpegDecodePlan plan = p.PlanJpegDecode(width, height, seed, epoch, sample, components);
            py::dict d;
            d["scale"] = py::make_tuple(plan.mode.scale, 8);
            d["region"] = py::make_tuple(plan.region.x, plan.region.y, plan.region.width, plan.region.height);
            d["fast_idct"] = plan.mode.fast_idct;
            d["fancy_upsampling"] = plan.mode.fancy_upsampling;
            return d;
          },
          py::arg("width"), py::arg("height"), py::arg("seed") = 0, py::arg("epoch") = 0, py::arg("sample") = 0,
          py::arg("components") = 3,
          "How apply() decodes a JPEG of that size for this sample: {scale: (m, 8), region: (x, y, w, h) in the "
          "scaled image, fast_idct, fancy_upsampling}.")
      .def(
          "shape_of",
          [](const TransformPipeline& p, const py::object& data, const std::string& path) {
            BytesView bytes(data);
            OutputShape s;
            {
              py::gil_scoped_release release;
              s = p.ShapeOf(bytes.data(), bytes.size(), path);
            }
            return Dims(s);
          },
          py::arg("data"), py::arg("path"), "The shape apply() gives for this image, from its header alone.")
      .def(
          "random_draws",
          [](const TransformPipeline& p, int width, int height, uint64_t seed, int epoch, int64_t sample) {
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
          },
          py::arg("width"), py::arg("height"), py::arg("seed") = 0, py::arg("epoch") = 0, py::arg("sample") = 0,
          "The random decisions apply() makes for an image of that size, in chain order: one dict per op that "
          "drew something, {index, op, ...its values} (RandomResizedCrop: top, left, height, width; flips: flip; "
          "the others: see docs/transforms.md).")
      .def(
          "apply",
          [](const TransformPipeline& p, const py::object& data, const std::string& path, uint64_t seed, int epoch,
             int64_t sample) {
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
          },
          py::arg("data"), py::arg("path"), py::arg("seed") = 0, py::arg("epoch") = 0, py::arg("sample") = 0,
          "Decode and transform one image: (buffer, shape). Random parameters depend only on "
          "(seed, epoch, sample). ValueError names the file for a bad image.");
}

}  // namespace hdmlp::python
