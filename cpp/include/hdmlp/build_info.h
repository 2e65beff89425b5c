// BuildInfo: what this build of hdmlp was compiled against, from the
// libraries' own version macros at compile time (`hdmlp --version`). A
// user comparing it with what is installed at run time can tell which
// system library a wheel expects.
// Thread-safety: safe from any thread (it lists the MPI modules' folder).
#ifndef HDMLP_BUILD_INFO_H_
#define HDMLP_BUILD_INFO_H_

#include <string>
#include <utility>
#include <vector>

namespace hdmlp {

// (component, version) pairs: "mpi_abis" (the MPI ABIs this build has a
// module for; MPI itself is loaded at run time, transport/mpi_fabric.h),
// "libjpeg-turbo", "opencv", "libconfig++", "compiler", and "simd", the
// transforms' vector kernels on this CPU (chosen at run time).
std::vector<std::pair<std::string, std::string>> BuildInfo();

}  // namespace hdmlp

#endif  // HDMLP_BUILD_INFO_H_
