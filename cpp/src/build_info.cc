#include "hdmlp/build_info.h"

#include <cstdio>  // jpeglib.h needs FILE

#include <jpeglib.h>
#include <libconfig.h++>
#include <mpi.h>
#include <opencv2/core/version.hpp>

#include "hdmlp/transforms/simd.h"

namespace hdmlp {
namespace {

#define HDMLP_STR2(x) #x
#define HDMLP_STR(x) HDMLP_STR2(x)

std::string MpiVersion() {
  std::string standard = "MPI " + std::to_string(MPI_VERSION) + "." + std::to_string(MPI_SUBVERSION);
#if defined(OMPI_MAJOR_VERSION)
  return "Open MPI " + std::to_string(OMPI_MAJOR_VERSION) + "." + std::to_string(OMPI_MINOR_VERSION) + "." +
         std::to_string(OMPI_RELEASE_VERSION) + " (" + standard + ")";
#elif defined(MPICH_VERSION)
  return std::string("MPICH ") + MPICH_VERSION + " (" + standard + ")";
#else
  return standard;
#endif
}

}  // namespace

std::vector<std::pair<std::string, std::string>> BuildInfo() {
  return {
      {"mpi", MpiVersion()},
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
