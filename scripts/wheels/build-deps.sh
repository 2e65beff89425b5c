#!/usr/bin/env bash
# Builds, inside the bullseye build chroot (glibc 2.31), the C and C++ libraries that
# hdmlp's wheels carry, each with only the parts hdmlp calls, as static PIC archives
# under $PREFIX. Called by scripts/wheels/build.sh, which mounts:
#   /src              the unpacked Debian source packages (Debian's patches applied)
#   /build            scratch space
#   /opt/hdmlp-deps   the install prefix (kept between runs)
# What each library leaves out, and why, is in docs/install.md ("What the wheel carries").
set -euo pipefail
PREFIX=/opt/hdmlp-deps
JOBS=${HDMLP_BUILD_JOBS:-$(nproc)}
export CFLAGS="-O2 -fPIC -ffile-prefix-map=/src=. -ffile-prefix-map=/build=."
export CXXFLAGS="$CFLAGS"
export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig
CMAKE_COMMON=(-G Ninja -Wno-dev -Wno-deprecated -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$PREFIX -DCMAKE_INSTALL_LIBDIR=lib
              -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_SHARED_LIBS=OFF -DCMAKE_PREFIX_PATH=$PREFIX
              -DCMAKE_FIND_LIBRARY_SUFFIXES=.a)

log() { printf '[hdmlp deps] %s\n' "$*" >&2; }
HDMLP_WHEEL_CACHE_HINT=${HDMLP_WHEEL_CACHE_HINT:-the wheel cache}
HDMLP_SCRATCH_HINT=${HDMLP_SCRATCH_HINT:-scratch}

# Cross-compiling (HDMLP_CROSS=aarch64-linux-gnu, scripts/wheels/arch.sh) changes only the
# environment the recipes below run in, never their text (which the stamps hash, so that the
# x86-64 libraries are not rebuilt for it): CMake gets the target's toolchain file, autoconf its
# --host through the host_alias variable (configure reads it from the environment), zlib its
# CHOST. The target's test programs run through qemu-user (scripts/wheels/binfmt.sh).
# -ffp-contract=off: GCC fuses a * b + c into one instruction on aarch64 by default, which rounds
# differently; x86-64's baseline has no FMA, so this keeps the libraries' float arithmetic the same.
XXHASH_RECIPE=build_xxhash
if [[ -n ${HDMLP_CROSS:-} ]]; then
  export CC=$HDMLP_CROSS-gcc CXX=$HDMLP_CROSS-g++ AR=$HDMLP_CROSS-ar RANLIB=$HDMLP_CROSS-ranlib
  export STRIP=$HDMLP_CROSS-strip NM=$HDMLP_CROSS-nm CHOST=$HDMLP_CROSS host_alias=$HDMLP_CROSS
  export CFLAGS="$CFLAGS -ffp-contract=off" CXXFLAGS="$CXXFLAGS -ffp-contract=off"
  export PKG_CONFIG_LIBDIR=$PREFIX/lib/pkgconfig:/usr/lib/$HDMLP_CROSS/pkgconfig:/usr/share/pkgconfig
  CMAKE_COMMON+=(-DCMAKE_TOOLCHAIN_FILE=/hdmlp/scripts/wheels/$HDMLP_CROSS.cmake)
  XXHASH_RECIPE=build_xxhash_portable
fi

# Each step runs once; its stamp records the source folder it was built from and the
# recipe (the build function's text), so a change of either rebuilds that library.
# SOURCE_DATE_EPOCH is the source package's own date (its debian/changelog's, as Debian's
# reproducible builds set it), so the dates libraries embed (libjpeg-turbo's build, OpenCV's
# timestamp) depend on the sources only, not on the day or the checkout they were built from.
step() {
  local name=$1 src=$2; shift 2
  local stamp=$PREFIX/.built-$name want
  SOURCE_DATE_EPOCH=$(dpkg-parsechangelog -l "/src/$src/debian/changelog" -S Timestamp)
  export SOURCE_DATE_EPOCH
  want="$src $(declare -f "$1" | sha256sum | cut -c1-16) date=$SOURCE_DATE_EPOCH"
  if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then return; fi
  log "building $name from $src"
  local start=$SECONDS
  rm -rf "/build/$name"
  mkdir -p "/build/$name"
  cp -a "/src/$src/." "/build/$name/"
  (cd "/build/$name" && "$@") 2>"/build/$name.log" || {
    tail -40 "/build/$name.log" >&2
    log "building $name failed (its errors: $HDMLP_WHEEL_CACHE_HINT/$HDMLP_SCRATCH_HINT/$name.log)"
    exit 1
  }
  echo "$want" > "$stamp"
  log "$name built in $((SECONDS - start)) s"
}

build_zlib() {
  ./configure --static --prefix=$PREFIX >/dev/null
  make -j"$JOBS" libz.a >/dev/null
  make install >/dev/null
}

build_jpeg() {  # libjpeg-turbo with its SIMD code (nasm), the libjpeg 6.2 ABI as Debian's
  # (its own GNUInstallDirs takes a relative CMAKE_INSTALL_LIBDIR from the source folder: absolute here)
  cmake -S . -B out "${CMAKE_COMMON[@]}" -DCMAKE_INSTALL_LIBDIR=$PREFIX/lib -DENABLE_SHARED=OFF -DENABLE_STATIC=ON -DWITH_TURBOJPEG=OFF \
    -DWITH_SIMD=ON -DREQUIRE_SIMD=ON >/dev/null
  cmake --build out -j"$JOBS" >/dev/null
  cmake --install out >/dev/null
}

build_png() {
  cmake -S . -B out "${CMAKE_COMMON[@]}" -DPNG_SHARED=OFF -DPNG_STATIC=ON -DPNG_TESTS=OFF -DPNG_EXECUTABLES=OFF \
    -DZLIB_ROOT=$PREFIX >/dev/null
  cmake --build out -j"$JOBS" >/dev/null
  cmake --install out >/dev/null
}

build_webp() {  # the decoder and encoder libraries only, no tools
  cmake -S . -B out "${CMAKE_COMMON[@]}" -DWEBP_BUILD_ANIM_UTILS=OFF -DWEBP_BUILD_CWEBP=OFF -DWEBP_BUILD_DWEBP=OFF \
    -DWEBP_BUILD_GIF2WEBP=OFF -DWEBP_BUILD_IMG2WEBP=OFF -DWEBP_BUILD_VWEBP=OFF -DWEBP_BUILD_WEBPINFO=OFF \
    -DWEBP_BUILD_WEBPMUX=OFF -DWEBP_BUILD_EXTRAS=OFF >/dev/null
  cmake --build out -j"$JOBS" >/dev/null
  cmake --install out >/dev/null
}

build_tiff() {  # uncompressed, LZW, PackBits, Deflate and JPEG TIFFs; no JBIG, LZMA, ZSTD, WebP or LERC
  cmake -S . -B out "${CMAKE_COMMON[@]}" -Dtiff-tools=OFF -Dtiff-tests=OFF -Dtiff-contrib=OFF -Dtiff-docs=OFF \
    -Dcxx=OFF -Djbig=OFF -Dlzma=OFF -Dzstd=OFF -Dwebp=OFF -Dlerc=OFF -Dlibdeflate=OFF -Djpeg=ON -Dzlib=ON \
    -Dpixarlog=ON -Dold-jpeg=OFF -DZLIB_ROOT=$PREFIX >/dev/null
  cmake --build out -j"$JOBS" >/dev/null
  cmake --install out >/dev/null
}

build_xxhash() {  # libxxhash.a with the x86 dispatch (SSE2/AVX2/AVX-512 chosen at run time, as Debian's), headers
  # (the Makefile would also build the CLI and a shared library)
  cc $CFLAGS -c xxhash.c -o xxhash.o
  cc $CFLAGS -c xxh_x86dispatch.c -o xxh_x86dispatch.o
  ar rcsD libxxhash.a xxhash.o xxh_x86dispatch.o
  install -m 644 libxxhash.a $PREFIX/lib/
  install -m 644 xxhash.h xxh3.h xxh_x86dispatch.h $PREFIX/include/
}

build_xxhash_portable() {  # libxxhash.a without the x86 dispatch (other CPUs: XXH3's own vector code), headers
  $CC $CFLAGS -c xxhash.c -o xxhash.o
  $AR rcsD libxxhash.a xxhash.o
  install -m 644 libxxhash.a $PREFIX/lib/
  install -m 644 xxhash.h xxh3.h $PREFIX/include/
}

build_libconfig() {  # the C and C++ parsers; no examples, no docs
  ./configure --prefix=$PREFIX --disable-shared --enable-static --with-pic --disable-examples >/dev/null
  make -C lib -j"$JOBS" >/dev/null
  make -C lib install >/dev/null
}

build_hdf5() {  # the C library only (thread-safe like Debian's), deflate through zlib; no tools, HL, C++ or Fortran
  # Autotools: 1.10's CMake checks cannot read their try_run output with CMake 3.31.
  ./configure --prefix=$PREFIX --disable-shared --enable-static --with-pic --enable-threadsafe --disable-hl \
    --disable-cxx --disable-fortran --disable-java --disable-tests --disable-tools --with-zlib=$PREFIX \
    --without-szlib --disable-parallel >/dev/null
  # The library keeps a summary of this configure run (H5check_version prints it) with its date,
  # user, host and kernel: blanked, so that the wheel does not depend on when and where it was built.
  sed -i -e 's/^\( *Configured on:\).*/\1 -/' -e 's/^\( *Configured by:\).*/\1 -/' \
    -e 's/^\( *Uname information:\).*/\1 -/' src/libhdf5.settings
  make -j"$JOBS" >/dev/null
  make install >/dev/null
}

build_opencv() {  # core, imgproc and imgcodecs with the JPEG, PNG, TIFF and WebP codecs; nothing else
  cmake -S . -B out "${CMAKE_COMMON[@]}" -DBUILD_LIST=core,imgproc,imgcodecs \
    -DBUILD_TESTS=OFF -DBUILD_PERF_TESTS=OFF -DBUILD_EXAMPLES=OFF -DBUILD_DOCS=OFF -DBUILD_opencv_apps=OFF \
    -DBUILD_JAVA=OFF -DBUILD_opencv_python3=OFF -DBUILD_opencv_python2=OFF -DOPENCV_GENERATE_PKGCONFIG=OFF \
    -DBUILD_ZLIB=OFF -DBUILD_JPEG=OFF -DBUILD_PNG=OFF -DBUILD_TIFF=OFF -DBUILD_WEBP=OFF -DBUILD_OPENJPEG=OFF \
    -DWITH_JPEG=ON -DWITH_PNG=ON -DWITH_TIFF=ON -DWITH_WEBP=ON \
    -DZLIB_ROOT=$PREFIX -DJPEG_INCLUDE_DIR=$PREFIX/include -DJPEG_LIBRARY=$PREFIX/lib/libjpeg.a \
    -DWITH_OPENJPEG=OFF -DWITH_JASPER=OFF -DWITH_OPENEXR=OFF -DWITH_IMGCODEC_HDR=OFF -DWITH_IMGCODEC_SUNRASTER=OFF \
    -DWITH_IMGCODEC_PXM=OFF -DWITH_IMGCODEC_PFM=OFF -DWITH_GDAL=OFF -DWITH_GDCM=OFF \
    -DWITH_IPP=OFF -DWITH_ITT=OFF -DWITH_OPENCL=OFF -DWITH_LAPACK=OFF -DWITH_EIGEN=OFF -DWITH_PROTOBUF=OFF \
    -DWITH_QUIRC=OFF -DWITH_ADE=OFF -DWITH_FFMPEG=OFF -DWITH_GSTREAMER=OFF -DWITH_GTK=OFF -DWITH_QT=OFF \
    -DWITH_V4L=OFF -DWITH_1394=OFF -DWITH_VA=OFF -DWITH_VA_INTEL=OFF -DWITH_CUDA=OFF -DWITH_VTK=OFF \
    -DWITH_OPENVX=OFF -DWITH_HALIDE=OFF -DWITH_ONNX=OFF -DWITH_VULKAN=OFF -DWITH_TBB=OFF -DWITH_OPENMP=OFF \
    -DWITH_PTHREADS_PF=ON -DWITH_CAROTENE=OFF -DCV_TRACE=OFF -DOPENCV_ENABLE_NONFREE=OFF \
    -DENABLE_PRECOMPILED_HEADERS=OFF >/build/opencv-configure.log 2>&1 || {
    grep -A8 "CMake Error" /build/opencv-configure.log >&2; return 1; }
  # cv::getBuildInformation() names the build machine's kernel: left out (see build_hdf5).
  sed -i '/"    Host: /d' out/modules/core/version_string.inc
  cmake --build out -j"$JOBS" >/dev/null
  cmake --install out >/dev/null
}

main() {
  mkdir -p $PREFIX/lib $PREFIX/include
  # cmake, ninja and pybind11 from PyPI, pinned (bullseye's cmake 3.18 is older than hdmlp needs).
  if ! cmp -s /hdmlp/scripts/wheels/build-tools.txt $PREFIX/.build-tools 2>/dev/null; then
    log "installing the build tools (scripts/wheels/build-tools.txt)"
    python3 -m pip install -q --disable-pip-version-check --no-cache-dir -r /hdmlp/scripts/wheels/build-tools.txt
    cp /hdmlp/scripts/wheels/build-tools.txt $PREFIX/.build-tools
  fi
  step zlib "$HDMLP_SRC_zlib" build_zlib
  step jpeg "$HDMLP_SRC_jpeg" build_jpeg
  step png "$HDMLP_SRC_png" build_png
  step webp "$HDMLP_SRC_webp" build_webp
  step tiff "$HDMLP_SRC_tiff" build_tiff
  step xxhash "$HDMLP_SRC_xxhash" "$XXHASH_RECIPE"
  step libconfig "$HDMLP_SRC_libconfig" build_libconfig
  step hdf5 "$HDMLP_SRC_hdf5" build_hdf5
  step opencv "$HDMLP_SRC_opencv" build_opencv
  log "all dependencies are in $PREFIX"
}

main; exit  # one line: an edit of this file while it runs cannot run more of it
