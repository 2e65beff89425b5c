// Bindings for the tools: the generated image folder.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "hdmlp/tools/image_folder_generator.h"

namespace py = pybind11;

namespace hdmlp::python {

void BindTools(py::module_& m) {
  m.def(
      "generate_image_folder",
      [](const std::filesystem::path& root, int num_images, int num_classes, uint64_t seed, int min_side,
         int max_side, int min_quality, int max_quality,
         const std::optional<std::vector<std::filesystem::path>>& photos, int threads) {
        ImageFolderSpec spec;
        spec.root = root.string();
        spec.num_images = num_images;
        spec.num_classes = num_classes;
        spec.seed = seed;
        spec.min_side = min_side;
        spec.max_side = max_side;
        spec.min_quality = min_quality;
        spec.max_quality = max_quality;
        if (photos) {
          for (const auto& photo : *photos) spec.photos.push_back(photo.string());
        }
        spec.threads = threads;
        GeneratedFolder result;
        {
          // Generation is seconds of pure C++ work; other Python threads
          // (a progress bar, a second loader) should run meanwhile.
          py::gil_scoped_release release;
          result = GenerateImageFolder(spec);
        }
        py::dict out;
        out["files_written"] = result.files_written;
        out["files_kept"] = result.files_kept;
        out["total_bytes"] = result.total_bytes;
        return out;
      },
      py::arg("root"), py::arg("num_images") = 500, py::arg("num_classes") = 10, py::arg("seed") = 0,
      py::arg("min_side") = 250, py::arg("max_side") = 500, py::arg("min_quality") = 85,
      py::arg("max_quality") = 95, py::arg("photos") = py::none(), py::arg("threads") = 0,
      "Generate (or verify) a deterministic ImageNet-like folder root/<wnid>/<wnid>_<index>.JPEG; "
      "returns {files_written, files_kept, total_bytes}.");
}

}  // namespace hdmlp::python
