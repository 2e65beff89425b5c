#!/usr/bin/env bash
# hdmlp's one entry point for a fresh Debian machine (see README.md).
#
#   scripts/dev.sh demo [hdmlp demo options]   set up, then run the demo job
#   scripts/dev.sh test                        set up, then run every test (C++, sanitizers,
#                                              fuzz targets for 7 s each, a wheel test, pytest)
#   scripts/dev.sh setup                       set up only
#   scripts/dev.sh wheels [OUT]                slim manylinux_2_31 wheels for CPython 3.11, 3.13 and 3.14, x86-64
#                                              and aarch64 (dist/), built in bullseye chroots (scripts/wheels/build.sh)
#   scripts/dev.sh wheel-test WHEEL SUITE      install WHEEL in a fresh chroot of a Debian SUITE (bookworm
#                                              for cp311, trixie for cp313, sid for cp314; arm64 under qemu-user
#                                              for an aarch64 wheel) and run the smoke test there;
#                                              SUITE-MPI (e.g. bookworm-mpich, trixie-openmpi, bookworm-pypi-mpich,
#                                              bookworm-impi, bookworm-nompi): the wheel with that MPI
#                                              (scripts/wheels/mpi_test.sh)
#   scripts/dev.sh wheel-test-mpi W311 W313 [MD]  every MPI suite with these cp311 and cp313 wheels, one
#                                              table (benchmarks/results/mpi_wheels.md; mpi_suites.sh)
#   scripts/dev.sh same-bytes WHEEL...         do the wheels (and this build) give the same batches? (same_bytes.sh)
#   scripts/dev.sh sdist [OUT]                 the source distribution (dist/)
#   scripts/dev.sh sdist-test SDIST [SUITE]    pip install SDIST in a fresh chroot without hdmlp's libraries:
#                                              the build must stop with one message naming them all
#   scripts/dev.sh bench-setup                 set up, plus the benchmarks' DALI, FFCV and SPDL baselines
#   scripts/dev.sh dlio-setup                  set up, plus DLIO (MLPerf Storage's engine) in a venv of its own
#                                              (docs/dlio.md); prints the venv's path
#   scripts/dev.sh ctest | pytest [ARGS]       set up, then only the C++ or only the Python tests
#   scripts/dev.sh wheel-check                 set up, then only the cross-release wheel test of `test`
#   scripts/dev.sh wheel-cold-check            what only an empty wheel cache runs, checked on the cached
#                                              chroots in under a minute (part of wheel-check)
#   scripts/dev.sh wheels-cold [OUT]           every wheel built and tested from a new, empty cache, timed
#                                              (about an hour on 2 cores: for a periodic CI run)
#   scripts/dev.sh help                        this text
#
# Setting up is idempotent: Debian packages are installed only when missing,
# .venv is made once, Python dependencies are installed when pyproject.toml
# or constraints/dev.txt changes, and the package is rebuilt (incrementally) only when its sources
# change. A second run starts in seconds. A new checkout (a clean clone, as CI
# makes) links its .venv to the dependencies an earlier one installed for the
# same pyproject.toml (venv_cache below; HDMLP_VENV_CACHE=0 turns it off).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

DEBIAN_PACKAGES=(build-essential pkg-config python3-venv python3-dev libopenmpi-dev openmpi-bin
                 libconfig++-dev libopencv-dev libjpeg-dev libgtest-dev opencv-doc libxxhash-dev
                 # HDF5 sources (and zlib, which it brings).
                 libhdf5-dev
                 # The fuzz targets (tests/fuzz): clang with libFuzzer and its sanitizers.
                 clang libclang-rt-dev
                 # The emulated parallel file system of the benchmarks and its tests.
                 sshfs openssh-server fuse3 vmtouch iproute2
                 # netfs, the emulated PFS's own network file system (benchmarks/lab/netfs), and the cluster's.
                 libfuse3-dev
                 # Compiled objects are reused across checkouts and clean clones (use_ccache).
                 ccache)
# Pinned: these releases install from local disk on the project's machines.
PY_BUILD=(scikit-build-core pybind11 cmake ninja)

log() { printf '[hdmlp] %s\n' "$*" >&2; }

# Installs those of the Debian packages "$2"... that are missing, saying they are for "$1".
install_missing() {
  local what=$1 missing=() pkg sudo=()
  shift
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
  done
  [[ ${#missing[@]} -eq 0 ]] && return
  log "installing Debian packages$what: ${missing[*]}"
  [[ $(id -u) -ne 0 ]] && sudo=(sudo)
  "${sudo[@]}" apt-get update -q
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

install_debian_packages() {
  local wanted=() pkg
  for pkg in "${DEBIAN_PACKAGES[@]}"; do
    # python3-venv/python3-dev are only needed when python3 cannot make a venv.
    if [[ $pkg == python3-venv || $pkg == python3-dev ]] &&
       python3 -c 'import venv, sysconfig, os; assert os.path.exists(sysconfig.get_paths()["include"] + "/Python.h")' 2>/dev/null; then
      continue
    fi
    wanted+=("$pkg")
  done
  install_missing "" "${wanted[@]}"
}

sources_hash() {
  find cpp python hdmlp configs cmake CMakeLists.txt pyproject.toml -type f \
       ! -name '*.pyc' ! -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-32
}

# pip, without the warnings this machine's pip.conf prints for index folders it lacks.
pip_quiet() {
  .venv/bin/python -m pip -q --disable-pip-version-check "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
}

# The requirements of one of pyproject.toml's extras, one per line (ranges: the exact releases come
# from CONSTRAINTS, passed with -c wherever they are installed).
CONSTRAINTS=constraints/dev.txt
extra_requirements() {
  .venv/bin/python -c 'import sys, tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"][sys.argv[1]]))' "$1"
}

# A clean clone (as CI makes) would install the same Python dependencies again: about 150 s,
# most of it writing torch's files. So the installed dependencies are kept once per
# pyproject.toml and Python (HDMLP_VENV_CACHE, default ~/.cache/hdmlp/venvs/PY-HASH: .venv as it
# was before hdmlp went in), and a new .venv is made of hard links to their files, its scripts'
# first lines pointed at it. Nothing writes into an installed file (pip and Python replace
# files), so the checkouts never change the kept copy. HDMLP_VENV_CACHE=0 turns this off; where
# hard links cannot be made (another file system) the dependencies are installed as before.
venv_cache() {
  [[ ${HDMLP_VENV_CACHE:-} == 0 ]] && return 0
  local py  # the interpreter the venvs link to: its version and where it lives
  py=$(python3 -c 'import hashlib, os, sys
print(sys.version.split()[0] + "-" + hashlib.sha256(os.path.realpath(sys.executable).encode()).hexdigest()[:8])')
  printf '%s/venvs/%s-%s' "${HDMLP_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hdmlp}" "$py" "$1"
}

# Rewrites the scripts in folder $3 whose first lines name the venv at $1 to name the one at $2.
repoint_scripts() {
  local from=$1 to=$2 f
  for f in "$3"/*; do
    [[ -f $f && ! -L $f ]] || continue
    if head -c 2 "$f" | grep -q '#!' && head -n 3 "$f" | grep -qF "$from/bin/"; then
      sed -i "1,3s|$from/bin/|$to/bin/|g" "$f"  # a new file: the hard link to the other copy is gone
    fi
  done
  # `source .venv/bin/activate` (a batch script's way in) must name this venv, not the one it was copied from.
  for f in "$3"/activate "$3"/activate.csh "$3"/activate.fish; do
    [[ -f $f ]] && sed -i -E "s@^(VIRTUAL_ENV=|setenv VIRTUAL_ENV |set -gx VIRTUAL_ENV )\"[^\"]*\"@\1\"$to\"@" "$f"
  done
  return 0
}

setup_python() {
  local deps_want deps_have cached
  deps_want=$(cat pyproject.toml "$CONSTRAINTS" | sha256sum | cut -c1-32)
  cached=$(venv_cache "$deps_want")
  if [[ ! -x .venv/bin/python && -n $cached && -f $cached/.hdmlp-deps ]]; then
    log "making .venv from the Python dependencies installed before ($cached)"
    if cp -al "$cached" .venv 2>/dev/null && repoint_scripts "$cached" "$ROOT/.venv" .venv/bin &&
       .venv/bin/python -P -c 'import torch, pytest' 2>/dev/null; then
      :
    else
      log "the kept dependencies did not work here; installing them afresh"
      rm -rf .venv
    fi
  fi
  if [[ ! -x .venv/bin/python ]]; then
    log "creating .venv"
    python3 -m venv .venv
  fi
  deps_have=$(cat .venv/.hdmlp-deps 2>/dev/null || true)
  if [[ $deps_want != "$deps_have" ]]; then
    log "installing Python dependencies (torch installs from local disk; a few minutes the first time)"
    pip_quiet install "${PY_BUILD[@]}"
    # The test extra's requirements, read from pyproject.toml, at the releases of constraints/dev.txt.
    mapfile -t extra < <(extra_requirements test)
    pip_quiet install -c "$CONSTRAINTS" "${extra[@]}"
    echo "$deps_want" > .venv/.hdmlp-deps
    if [[ -n $cached && ! -e $cached ]] && ! .venv/bin/python -P -c 'import hdmlp' 2>/dev/null; then
      local tmp="$cached.tmp.$$"
      mkdir -p "$(dirname "$cached")"
      if cp -al .venv "$tmp" 2>/dev/null; then
        repoint_scripts "$ROOT/.venv" "$cached" "$tmp/bin"
        mv -T "$tmp" "$cached" 2>/dev/null || rm -rf "$tmp"  # another checkout may have kept one first
      else
        rm -rf "$tmp"
      fi
    fi
  fi
  mpich_wheel >/dev/null || true  # kept in the user's cache; the tests of other MPIs use it
  local src_want src_have
  src_want=$(sources_hash)
  src_have=$(cat .venv/.hdmlp-build 2>/dev/null || true)
  if [[ $src_want != "$src_have" ]] || ! .venv/bin/python -P -c 'import hdmlp._core' 2>/dev/null; then
    log "building and installing hdmlp (the first build compiles about 150 files: several minutes)"
    # The C++ tests are built in the same tree as the module, so the core is
    # compiled once for both (run_ctest runs them from there). pip is verbose so that
    # ninja's [done/total] counter can be shown as the build goes (build_progress).
    local mpi_defines=() mpich
    if mpich=$(mpich_wheel); then  # the MPICH and standard-ABI modules (hdmlp/_mpi) need its headers
      mpi_defines=(-Ccmake.define.HDMLP_MPICH_INCLUDE_DIR="$mpich/include"
                   -Ccmake.define.HDMLP_MPI_ABI_INCLUDE_DIR="$mpich/include")
    fi
    .venv/bin/python -m pip -v --disable-pip-version-check install --no-build-isolation --no-deps \
      -Cbuild.verbose=false -Ccmake.define.HDMLP_BUILD_TESTS=ON "${mpi_defines[@]}" "$ROOT" 2>&1 | build_progress
    echo "$src_want" > .venv/.hdmlp-build
  fi
}

# MPICH from its PyPI wheel (pinned: MPICH_WHEEL), unpacked once into the user's cache: its mpi.h and
# mpi_abi.h build hdmlp's MPICH and standard-ABI modules here (the host keeps Debian's Open MPI: installing
# Debian's mpich would switch mpirun), and its libmpi.so.12 and Hydra mpiexec run the MPICH tests
# (tests/python/test_mpi_runtime.py). Prints the folder (bin, lib, include); fails when it cannot be had.
MPICH_WHEEL=mpich==5.0.2
mpich_wheel() {
  local dir=${XDG_CACHE_HOME:-$HOME/.cache}/hdmlp/mpich/${MPICH_WHEEL#*==}
  if [[ ! -f $dir/include/mpi_abi.h || ! -x $dir/bin/mpiexec ]]; then
    local tmp="$dir.tmp.$$"
    rm -rf "$tmp" && mkdir -p "$tmp"
    log "MPICH's wheel ($MPICH_WHEEL) for the MPICH modules' headers and the MPICH tests, into $dir"
    if ! .venv/bin/python -m pip download -q --disable-pip-version-check --no-deps --only-binary :all: \
           -d "$tmp" "$MPICH_WHEEL" >/dev/null 2>&1 ||
       ! .venv/bin/python - "$tmp" <<'PY'
import glob, os, stat, sys, zipfile
tmp = sys.argv[1]
with zipfile.ZipFile(glob.glob(os.path.join(tmp, "mpich-*.whl"))[0]) as z:
    for info in z.infolist():
        parts = info.filename.split("/")
        if len(parts) < 4 or parts[1] != "data" or info.is_dir():  # mpich-X.data/data/{bin,lib,include}/...
            continue
        target = os.path.join(tmp, "unpacked", *parts[2:])
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(info) as src, open(target, "wb") as dst:
            dst.write(src.read())
        if parts[2] == "bin" or info.external_attr >> 16 & stat.S_IXUSR:
            os.chmod(target, 0o755)
PY
    then
      rm -rf "$tmp"
      log "could not get $MPICH_WHEEL from PyPI: hdmlp is built with its Open MPI module only"
      return 1
    fi
    # libmpi.so and libmpi_abi.so are links in the wheel's RECORD, stored as files: keep them as they are.
    rm -rf "$dir" && mkdir -p "$(dirname "$dir")" && mv "$tmp/unpacked" "$dir" && rm -rf "$tmp"
  fi
  echo "$dir"
}

# Reads pip -v's output; prints ninja's progress about every tenth of the build, and the
# whole log when the build fails (the last 80 lines, plus where the rest is).
build_progress() {
  local logfile=build/pip-build.log
  mkdir -p build
  : > "$logfile"
  local last=-1 line done total step
  while IFS= read -r line; do
    printf '%s\n' "$line" >> "$logfile"
    if [[ $line =~ ^[[:space:]]*\[([0-9]+)/([0-9]+)\] ]]; then
      done=${BASH_REMATCH[1]} total=${BASH_REMATCH[2]}
      step=$((done * 10 / total))
      if [[ $step -ne $last ]]; then
        last=$step
        log "  compiled $done of $total"
      fi
    fi
  done
  if ! grep -q "Successfully installed hdmlp" "$logfile"; then
    tail -80 "$logfile" >&2
    log "building hdmlp failed; the whole log is in $logfile"
    return 1
  fi
}

# Every build here (the package, the C++ tests, the sanitizer and fuzz builds) goes through
# ccache, keyed on paths relative to the checkout: a clean clone of the same sources (as CI
# makes) recompiles only what changed. The objects are the same as without it.
# HDMLP_CCACHE=0, or a launcher of the caller's own, turns this off.
use_ccache() {
  [[ ${HDMLP_CCACHE:-1} != 0 ]] && command -v ccache >/dev/null || return 0
  [[ -z ${CMAKE_CXX_COMPILER_LAUNCHER:-} && -z ${CMAKE_C_COMPILER_LAUNCHER:-} ]] || return 0
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=true
}

setup() {
  install_debian_packages
  use_ccache
  setup_python
  export PATH="$ROOT/.venv/bin:$PATH"
}

# The optional baselines of the benchmarks (pyproject.toml's bench extra: DALI, FFCV);
# never part of setup or test. FFCV compiles against libturbojpeg (pkg-config).
setup_bench() {
  setup
  # libturbojpeg0-dev: ffcv compiles against it; libavfilter8, libavdevice59: spdl loads FFmpeg's libraries.
  install_missing " for the baselines" libturbojpeg0-dev libavfilter8 libavdevice59
  mapfile -t extra < <(extra_requirements bench)
  log "installing the benchmarks' baselines: ${extra[*]}"
  pip_quiet install -c "$CONSTRAINTS" "${extra[@]}"
}

# DLIO and its dependencies (scripts/dlio-requirements.txt) in a venv of their own, never in .venv:
# ~/.cache/hdmlp/dlio/REQHASH (HDMLP_DLIO_VENV overrides), shared by every checkout, made once.
# It starts as hard links to .venv's kept dependencies (venv_cache: torch and torchvision are
# already there) where it can. hdmlp itself is not installed there: the DLIO runs of the tests and
# of benchmarks/mlperf_storage.py put the checkout's built package on PYTHONPATH (docs/dlio.md).
dlio_venv() {
  printf '%s' "${HDMLP_DLIO_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/hdmlp/dlio/$(sha256sum scripts/dlio-requirements.txt | cut -c1-16)}"
}

setup_dlio() {
  setup
  local venv tmp cached
  venv=$(dlio_venv)
  if [[ -f $venv/.hdmlp-dlio ]]; then
    log "DLIO's venv is there: $venv"
    echo "$venv"
    return
  fi
  tmp="$venv.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$(dirname "$venv")"
  cached=$(venv_cache "$(cat pyproject.toml "$CONSTRAINTS" | sha256sum | cut -c1-32)")
  if [[ -n $cached && -f $cached/.hdmlp-deps ]] && cp -al "$cached" "$tmp" 2>/dev/null; then
    log "making DLIO's venv from the Python dependencies kept for .venv ($cached)"
    repoint_scripts "$cached" "$tmp" "$tmp/bin"
  else
    log "making DLIO's venv"
    python3 -m venv "$tmp"
  fi
  local pip=("$tmp/bin/python" -m pip -q --disable-pip-version-check)
  log "installing dlio-benchmark 2.0.0 (--no-deps: it declares nvidia-dali-cuda110, which only NVIDIA's index serves)"
  "${pip[@]}" install --no-deps dlio-benchmark==2.0.0
  log "installing DLIO's dependencies (scripts/dlio-requirements.txt; TensorFlow's CPU wheel: a few minutes)"
  # pip then warns that dlio-benchmark's declared nvidia-dali-cuda110, tensorflow (tensorflow-cpu is
  # installed) and torchaudio (never imported) are missing: expected, so not shown.
  "${pip[@]}" install -r scripts/dlio-requirements.txt 2>&1 |
    { grep -v -e "is ignored: it is neither" -e "dependency resolver does not currently take" \
              -e "^dlio-benchmark .* requires" || true; }
  # DLIO's TFRecord generator calls `tfrecord2idx`, a script of NVIDIA DALI (which installs only from
  # NVIDIA's index). The tfrecord package's tool writes the same index (offset and length per record).
  printf '#!/bin/sh\n# DALI'"'"'s tfrecord2idx for DLIO, from the tfrecord package (scripts/dev.sh dlio-setup)\nexec "$(dirname "$0")/python" -m tfrecord.tools.tfrecord2idx "$@"\n' \
    > "$tmp/bin/tfrecord2idx"
  chmod +x "$tmp/bin/tfrecord2idx"
  # (tfrecord apart: its protobuf module clashes with TensorFlow's in one process; its tool runs alone.)
  { "$tmp/bin/python" -c 'import dlio_benchmark.main, torch, tensorflow, mpi4py' &&
    "$tmp/bin/python" -c 'import tfrecord.tools.tfrecord2idx'; } >/dev/null 2>&1 || {
    log "DLIO's venv does not import dlio_benchmark.main, torch, tensorflow, mpi4py or tfrecord; it is left in $tmp"
    return 1; }
  date -u +%FT%TZ > "$tmp/.hdmlp-dlio"
  repoint_scripts "$tmp" "$venv" "$tmp/bin"
  mv -T "$tmp" "$venv" 2>/dev/null || rm -rf "$tmp"  # another checkout may have made it first
  log "DLIO's venv: $venv"
  echo "$venv"
}

run_ctest() {
  log "C++ tests (GoogleTest via ctest)"
  # The package's own build tree (build/<wheel tag>, see setup_python) already
  # holds the core and the tests; this only rebuilds tests that changed since.
  local dir
  dir=$(ls -d build/cp3*/ 2>/dev/null | head -1)
  if [[ -z $dir || ! -f $dir/CMakeCache.txt ]] || ! grep -q "^HDMLP_BUILD_TESTS:[A-Z]*=ON" "$dir/CMakeCache.txt"; then
    dir=build/tests
    cmake -S . -B "$dir" -G Ninja -DHDMLP_BUILD_TESTS=ON -DHDMLP_BUILD_PYTHON=OFF \
          -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  fi
  cmake --build "$dir" --target hdmlp_tests -j 2
  ctest --test-dir "$dir" --output-on-failure -j 2
}

run_sanitized() {
  log "C++ tests under ASan+UBSan and TSan (make sanitize)"
  make -s sanitize
}

run_fuzz() {
  log "fuzz targets, briefly (scripts/fuzz.sh; longer: make fuzz)"
  scripts/fuzz.sh "${HDMLP_FUZZ_SECONDS:-7}"
}

# One cross-release wheel test (docs/install.md): the cp313 wheel, built in bullseye, installed
# and smoke-tested in a fresh trixie environment; then the sdist's build on a bookworm without
# hdmlp's libraries must stop with the one message that names them all. The chroots, the dependencies' build and a
# ccache of hdmlp's objects are cached in $HDMLP_WHEEL_CACHE, so after the first run this takes
# a few minutes. It is bounded: past HDMLP_WHEEL_CHECK_MINUTES (default 30: a cold cache
# builds OpenCV and the others first) it is skipped, with that said; a failure fails the run.
# HDMLP_WHEEL_CHECK=0 skips it; where the machine cannot (no root, no debootstrap), it says so.
run_wheel_check() {
  log "wheel check: the cp313 wheel built in bullseye, tested in trixie (scripts/dev.sh wheels / wheel-test)"
  if [[ ${HDMLP_WHEEL_CHECK:-1} == 0 ]]; then
    log "wheel check skipped: HDMLP_WHEEL_CHECK=0"
    return
  fi
  if [[ $(id -u) -ne 0 ]]; then
    log "wheel check skipped: it needs root (debootstrap, chroot, mount namespaces)"
    return
  fi
  if ! unshare --mount true 2>/dev/null; then
    log "wheel check skipped: this machine does not allow mount namespaces (unshare --mount)"
    return
  fi
  # A warm cache skips what a new machine runs first (the chroots' package installs, empty
  # folders): that part, on the cached chroots, in under a minute (scripts/wheels/cold_check.sh).
  scripts/wheels/cold_check.sh
  local out=build/ci-wheels minutes=${HDMLP_WHEEL_CHECK_MINUTES:-30} rc=0
  rm -rf "$out"
  # Not --foreground: a timeout ends the whole build (its compilers in the chroot too).
  HDMLP_WHEEL_ONLY=3.13 HDMLP_WHEEL_ARCHS=x86_64 timeout "${minutes}m" scripts/wheels/build.sh "$out" || rc=$?
  if [[ $rc -eq 124 ]]; then
    log "wheel check SKIPPED: building the wheel took more than $minutes minutes (a cold cache builds the"
    log "dependencies first; the next run reuses them). Run scripts/dev.sh wheels to finish it."
    return
  fi
  [[ $rc -eq 0 ]] || { log "wheel check FAILED: scripts/dev.sh wheels exited $rc"; return "$rc"; }
  scripts/wheels/test.sh "$(ls "$out"/hdmlp-*-cp313-cp313-manylinux*.whl)" trixie
  build_sdist "$out" >/dev/null
  scripts/wheels/sdist_test.sh "$(ls "$out"/hdmlp-*.tar.gz)" bookworm >/dev/null
}

run_pytest() {
  log "Python tests (pytest)"
  # Not "python -m pytest": that puts the checkout first on sys.path, shadowing the installed package.
  # (pytest's 5, no test found, is a failure here too.)
  .venv/bin/pytest -q "$@"
}

# The source distribution: what `pip install hdmlp-*.tar.gz` builds from (docs/install.md).
build_sdist() {
  local out=${1:-dist}
  mapfile -t tools < <(extra_requirements wheel)
  pip_quiet install -c "$CONSTRAINTS" "${tools[@]}"
  log "building the sdist (python -m build --sdist)"
  .venv/bin/python -m build --sdist --no-isolation --outdir "$out" "$ROOT" >/dev/null
  ls -l "$out"/hdmlp-*.tar.gz
}

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

cmd=${1:-}
[[ $# -gt 0 ]] && shift
case "$cmd" in
  setup) setup ;;
  bench-setup) setup_bench ;;
  dlio-setup) setup_dlio ;;
  demo) setup; exec .venv/bin/hdmlp demo "$@" ;;
  test) setup; run_ctest; run_sanitized; run_fuzz; run_wheel_check; run_pytest "$@" ;;
  wheel-check) setup; run_wheel_check ;;
  ctest) setup; run_ctest ;;
  pytest) setup; run_pytest "$@" ;;
  wheels|wheel) setup; exec scripts/wheels/build.sh "$@" ;;
  wheel-test) [[ ${2:-} == *-* ]] && exec scripts/wheels/mpi_test.sh "$@"; exec scripts/wheels/test.sh "$@" ;;
  wheel-test-mpi) exec scripts/wheels/mpi_suites.sh "$@" ;;
  wheel-cold-check) exec scripts/wheels/cold_check.sh ;;
  wheels-cold) setup; exec scripts/wheels/cold_run.sh "$@" ;;
  same-bytes) setup; exec scripts/wheels/same_bytes.sh "$@" ;;
  sdist-test) exec scripts/wheels/sdist_test.sh "$@" ;;
  sdist) setup; build_sdist "$@" ;;
  help|-h|--help) usage ;;
  *) usage >&2; echo "scripts/dev.sh: unknown command '${cmd}'" >&2; exit 2 ;;
esac
