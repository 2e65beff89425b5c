# hdmlp_require(<found-variable> <key> [detail]) records a missing library;
# hdmlp_report_missing() then stops with one message that lists every missing
# library with the package that provides it on Debian/Ubuntu (apt), Fedora/RHEL
# (dnf), Spack and conda-forge. One message at the end, not one per library, so
# a user on a bare machine installs everything in one go, and CMake's own lines
# do not bury it.

# key -> "what|apt|dnf|spack|conda-forge"
set(_HDMLP_LIB_pkg-config "pkg-config|pkg-config|pkgconf-pkg-config|pkgconf|pkg-config")
set(_HDMLP_LIB_libconfig++ "libconfig++ (the configuration file parser)|libconfig++-dev|libconfig-devel|libconfig|libconfig")
set(_HDMLP_LIB_opencv "OpenCV (core, imgproc, imgcodecs)|libopencv-dev|opencv-devel|opencv+imgproc+imgcodecs|libopencv")
set(_HDMLP_LIB_mpi "the headers of an MPI (Open MPI 4 or 5, or MPICH), for hdmlp's MPI modules (no MPI library is linked)|libopenmpi-dev openmpi-bin|openmpi-devel, then: module load mpi/openmpi-x86_64|openmpi|openmpi")
set(_HDMLP_LIB_libjpeg-turbo "libjpeg-turbo 1.5 or later|libjpeg-dev|libjpeg-turbo-devel|libjpeg-turbo|libjpeg-turbo")
set(_HDMLP_LIB_hdf5 "the HDF5 C library|libhdf5-dev|hdf5-devel|hdf5|hdf5")
set(_HDMLP_LIB_zlib "zlib|zlib1g-dev|zlib-devel|zlib|zlib")
set(_HDMLP_LIB_xxhash "xxHash (checksums of the filesystem cache)|libxxhash-dev|xxhash-devel|xxhash|xxhash")
set(_HDMLP_LIB_python "Python 3.11 or later with its headers (Python.h)|python3-dev|python3-devel|python|python")
set(_HDMLP_LIB_pybind11 "pybind11 (pip install . brings it)|pybind11-dev|pybind11-devel|py-pybind11|pybind11")
set(_HDMLP_LIB_gtest "GoogleTest (only for HDMLP_BUILD_TESTS)|libgtest-dev|gtest-devel|googletest|gtest")

set(HDMLP_MISSING_LIBRARIES "")

function(hdmlp_require found key)
  if(NOT ${found})
    if(NOT DEFINED _HDMLP_LIB_${key})
      message(FATAL_ERROR "hdmlp_require: unknown library key '${key}'")
    endif()
    set(entry "${key}")
    if(ARGC GREATER 2 AND NOT "${ARGV2}" STREQUAL "")
      set(entry "${key}|${ARGV2}")
    endif()
    set(HDMLP_MISSING_LIBRARIES ${HDMLP_MISSING_LIBRARIES} "${entry}" PARENT_SCOPE)
  endif()
endfunction()

function(hdmlp_report_missing)
  if(NOT HDMLP_MISSING_LIBRARIES)
    return()
  endif()
  list(LENGTH HDMLP_MISSING_LIBRARIES count)
  set(msg "\n   ===== hdmlp: ${count} missing build dependencies =====\n")
  set(apt "")
  set(dnf "")
  set(spack "")
  set(conda "")
  foreach(entry IN LISTS HDMLP_MISSING_LIBRARIES)
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 key)
    list(LENGTH parts n)
    set(info "${_HDMLP_LIB_${key}}")
    string(REPLACE "|" ";" fields "${info}")
    list(GET fields 0 what)
    list(GET fields 1 p_apt)
    list(GET fields 2 p_dnf)
    list(GET fields 3 p_spack)
    list(GET fields 4 p_conda)
    string(APPEND msg "  - ${what}\n      apt: ${p_apt}   dnf: ${p_dnf}   spack: ${p_spack}   conda-forge: ${p_conda}\n")
    if(n GREATER 1)
      list(GET parts 1 detail)
      string(APPEND msg "      (${detail})\n")
    endif()
    string(REGEX REPLACE ",.*" "" p_dnf "${p_dnf}")
    list(APPEND apt ${p_apt})
    list(APPEND dnf ${p_dnf})
    list(APPEND spack ${p_spack})
    list(APPEND conda ${p_conda})
  endforeach()
  list(JOIN apt " " apt)
  list(JOIN dnf " " dnf)
  list(JOIN spack " " spack)
  string(REGEX REPLACE "\\+[a-z+]*" "" spack_load "${spack}")
  list(JOIN conda " " conda)
  string(APPEND msg " All at once:\n"
                    "  Debian/Ubuntu:  sudo apt-get install ${apt}\n"
                    "  Fedora/RHEL:    sudo dnf install ${dnf}   (EPEL and CRB/PowerTools on RHEL)\n"
                    "  Spack:          spack install ${spack}; spack load ${spack_load}\n"
                    "  conda-forge:    conda install -c conda-forge ${conda}\n"
                    " On a cluster, `module load` the same libraries instead (e.g. module load openmpi hdf5 opencv).\n"
                    " Libraries in a non-standard prefix: set CMAKE_PREFIX_PATH (and PKG_CONFIG_PATH) to it.\n"
                    " A prebuilt wheel needs none of these: see docs/install.md.\n"
                    "   =====")
  message(FATAL_ERROR "${msg}")
endfunction()
