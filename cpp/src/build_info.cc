#include "hdmlp/build_info.h"

#include "hdmlp/transport/mpi_fabric.h"

#include <cstdio>  // jpeglib.h needs FILE

#include <jpeglib.h>
#include <libconfig.h++>
#include <opencv2/core/version.hpp>

#include "hdmlp/transforms/simd.h"

namespace hdmlp {
namespace {

#define HDMLP_STR2(x) #x
#define HDMLP_STR(x) HDMLP_STR2(x)

// The MPI ABIs this build has a module for (MPI itself is loaded at run time).
std::string MpiAbis() {
  std::string s;
  for (const auto& abi : MpiFabric::ModuleAbis()) s += (s.empty() ? "" : ", ") + abi;
  return s.empty() ? "none (" + MpiFabric::ModuleDir() + " has no module)" : s;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> BuildInfo() {
  return {
      {"mpi_abis", MpiAbis()},
#if defined(LIBJPEG_TURBO_VERSION)
      {"libjpeg-turbo", HDMLP_STR(LIBJPEG_TURBO_VERSION)},
#else
      {"libjpeg-turbo", "unknown (libjpeg " + std::to_string(JPEG_LIB_VERSION) + ")"},
#endif
      {"opencv", CV_VERSION},
      {"libconfig++", std::to_string(LIBCONFIGXX_VER_MAJOR) + "." + std::to_string(LIBCONFIGXX_VER_MINOR) + "." +
                          std::to_string(LIBCONFIGXX_VER_REVISION)},
#if defined(__clang__)
      {"compiler", "clang " __clang_version__},
#elif defined(__GNUC__)
      {"compiler", "gcc " __VERSION__},
#else
      {"compiler", "unknown"},
#endif
      // The transforms' kernels on this CPU (the same bytes from each: transforms/simd.h).
      {"simd", std::string(KernelsName(ActiveKernels())) + " (built: " + CompiledKernels() + ")"},
  };
}

}  // namespace hdmlp
