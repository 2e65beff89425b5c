# CMake toolchain of the aarch64 wheels (scripts/wheels/arch.sh): Debian's cross compiler in the
# bullseye build chroot. Libraries come from the dependencies' prefix (CMAKE_PREFIX_PATH) and
# from dpkg's arm64 architecture (/usr/lib/aarch64-linux-gnu: glibc, Open MPI); CMake searches
# the multiarch folder of CMAKE_LIBRARY_ARCHITECTURE only, never the build machine's x86-64 one.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
