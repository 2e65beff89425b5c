# Sourced by the wheel scripts: everything that differs between the wheels' CPU architectures,
# in one place. Every wheel is built on an x86-64 machine: x86_64 natively in the bullseye
# chroot, aarch64 by Debian's cross compiler (crossbuild-essential-arm64) in a bullseye chroot
# with arm64 as a second dpkg architecture (its MPI headers and glibc come from there), never under
# emulation. docs/install.md, "Building the wheels".
WHEEL_ARCHS_ALL=(x86_64 aarch64)

# arch_vars ARCH sets, for ARCH x86_64 or aarch64:
#   DEB_ARCH         Debian's name for it (amd64, arm64)
#   TRIPLET          the GNU triplet: Debian's multiarch folder and CPython's SOABI suffix
#   BUILD_CHROOT     the build chroot, under $CACHE
#   CROSS            empty for the native build, else the cross compiler's triplet
#   CROSS_PACKAGES   what the cross build adds to the chroot (the :arm64 packages are the target's)
#   CROSS_HEADER_PACKAGES  the target's packages only unpacked there (under /opt/cross-headers)
#   ARCH_DIR         suffix of the per-architecture folders under $CACHE (deps, scratch, out, python)
#   MPI_CMAKE        CMake arguments naming the target's MPI headers, for hdmlp/_mpi's modules
#                    (FindMPI cannot run an arm64 mpicc); nothing links libmpi (cmake/MpiModules.cmake)
#   PLATFORM_TAG     the tag of the wheel before auditwheel (auditwheel replaces it with manylinux_*)
arch_vars() {
  case $1 in
    x86_64)
      DEB_ARCH=amd64 TRIPLET=x86_64-linux-gnu CROSS="" ARCH_DIR=""
      BUILD_CHROOT=chroot-bullseye-build
      CROSS_PACKAGES=()
      CROSS_HEADER_PACKAGES=()
      MPI_CMAKE=()
      ;;
    aarch64)
      DEB_ARCH=arm64 TRIPLET=aarch64-linux-gnu CROSS=aarch64-linux-gnu ARCH_DIR=-aarch64
      BUILD_CHROOT=chroot-bullseye-cross-arm64
      CROSS_PACKAGES=(crossbuild-essential-arm64 libopenmpi-dev:arm64)
      # libmpich-dev:arm64 cannot be installed beside the build machine's compiler (it needs
      # cpp:arm64): only its files are unpacked, under /opt/cross-headers.
      CROSS_HEADER_PACKAGES=(libmpich-dev:arm64)
      MPI_CMAKE=(-DHDMLP_OPENMPI_INCLUDE_DIR=/usr/lib/aarch64-linux-gnu/openmpi/include
                 -DHDMLP_MPICH_INCLUDE_DIR=/opt/cross-headers/usr/include/aarch64-linux-gnu/mpich)
      ;;
    *)
      echo "unknown wheel architecture '$1' (known: ${WHEEL_ARCHS_ALL[*]})" >&2
      exit 2
      ;;
  esac
  PLATFORM_TAG=linux_$1
}

# The architecture of a wheel file, from its name (…-linux_ARCH.whl, …-manylinux_2_31_ARCH.whl).
wheel_arch() {
  local name=${1##*/}
  name=${name%.whl}
  local arch
  for arch in "${WHEEL_ARCHS_ALL[@]}"; do
    [[ $name == *_"$arch" ]] && { echo "$arch"; return; }
  done
  echo "unknown"
}
