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
#                                              for an aarch64 wheel) and run the smoke test there
#   scripts/dev.sh same-bytes WHEEL...         do the wheels (and this build) give the same batches? (same_bytes.sh)
#   scripts/dev.sh sdist [OUT]                 the source distribution (dist/)
#   scripts/dev.sh sdist-test SDIST [SUITE]    pip install SDIST in a fresh chroot without hdmlp's libraries:
#                                              the build must stop with one message naming them all
#   scripts/dev.sh bench-setup                 set up, plus the benchmarks' DALI and FFCV baselines
#   scripts/dev.sh ctest | pytest [ARGS]       set up, then only the C++ or only the Python tests
#   scripts/dev.sh wheel-check                 set up, then only the cross-release wheel test of `test`
#   scripts/dev.sh help                        this text
#
# Setting up is idempotent: Debian packages are installed only when missing,
# .venv is made once, Python dependencies are installed when pyproject.toml
# changes, and the package is rebuilt (incrementally) only when its sources
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
                 # netfs, the emulated PFS's own network file system (benchmarks/netfs), and the cluster's.
                 libfuse3-dev
                 # Compiled objects are reused across checkouts and clean clones (use_ccache).
                 ccache)
# Pinned: these releases install from local disk on the project's machines.
PY_BUILD=(scikit-build-core pybind11 cmake ninja)

log() { printf '[hdmlp] %s\n' "$*" >&2; }

install_debian_packages() {
  local missing=()
  for pkg in "${DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
  done
  # python3-venv/python3-dev are only needed when python3 cannot make a venv.
  if python3 -c 'import venv, sysconfig, os; assert os.path.exists(sysconfig.get_paths()["include"] + "/Python.h")' 2>/dev/null; then
    local keep=()
    for pkg in "${missing[@]}"; do [[ $pkg == python3-venv || $pkg == python3-dev ]] || keep+=("$pkg"); done
    missing=("${keep[@]}")
  fi
  [[ ${#missing[@]} -eq 0 ]] && return
  log "installing Debian packages: ${missing[*]}"
  local sudo=()
  [[ $(id -u) -ne 0 ]] && sudo=(sudo)
  "${sudo[@]}" apt-get update -q
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

sources_hash() {
  find cpp python hdmlp configs cmake CMakeLists.txt pyproject.toml -type f \
       ! -name '*.pyc' ! -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-32
}

# pip, without the warnings this machine's pip.conf prints for index folders it lacks.
pip_quiet() {
  .venv/bin/python -m pip -q --disable-pip-version-check "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
}

# The requirements of one of pyproject.toml's extras, one per line (the one list of pins).
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
}

setup_python() {
  local deps_want deps_have cached
  deps_want=$(sha256sum pyproject.toml | cut -c1-32)
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
    # The test extra's requirements, read from pyproject.toml.
    mapfile -t extra < <(extra_requirements test)
    pip_quiet install "${extra[@]}"
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
  local src_want src_have
  src_want=$(sources_hash)
  src_have=$(cat .venv/.hdmlp-build 2>/dev/null || true)
  if [[ $src_want != "$src_have" ]] || ! .venv/bin/python -P -c 'import hdmlp._core' 2>/dev/null; then
    log "building and installing hdmlp (the first build compiles about 150 files: several minutes)"
    # The C++ tests are built in the same tree as the module, so the core is
    # compiled once for both (run_ctest runs them from there). pip is verbose so that
    # ninja's [done/total] counter can be shown as the build goes (build_progress).
    .venv/bin/python -m pip -v --disable-pip-version-check install --no-build-isolation --no-deps \
      -Cbuild.verbose=false -Ccmake.define.HDMLP_BUILD_TESTS=ON "$ROOT" 2>&1 | build_progress
    echo "$src_want" > .venv/.hdmlp-build
  fi
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
  if ! dpkg-query -W -f='${Status}' libturbojpeg0-dev 2>/dev/null | grep -q "ok installed"; then
    log "installing Debian packages: libturbojpeg0-dev (for ffcv)"
    local sudo=()
    [[ $(id -u) -ne 0 ]] && sudo=(sudo)
    "${sudo[@]}" apt-get update -q
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends libturbojpeg0-dev
  fi
  mapfile -t extra < <(extra_requirements bench)
  log "installing the benchmarks' baselines: ${extra[*]}"
  pip_quiet install "${extra[@]}"
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
  local rc=0
  # Not "python -m pytest": that puts the checkout first on sys.path, shadowing the installed package.
  .venv/bin/pytest -q "$@" || rc=$?
  # pytest's 5 means it found no test: that is a failure here too.
  return "$rc"
}

# The source distribution: what `pip install hdmlp-*.tar.gz` builds from (docs/install.md).
build_sdist() {
  local out=${1:-dist}
  mapfile -t tools < <(extra_requirements wheel)
  pip_quiet install "${tools[@]}"
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
  demo) setup; exec .venv/bin/hdmlp demo "$@" ;;
  test) setup; run_ctest; run_sanitized; run_fuzz; run_wheel_check; run_pytest "$@" ;;
  wheel-check) setup; run_wheel_check ;;
  ctest) setup; run_ctest ;;
  pytest) setup; run_pytest "$@" ;;
  wheels|wheel) setup; exec scripts/wheels/build.sh "$@" ;;
  wheel-test) exec scripts/wheels/test.sh "$@" ;;
  same-bytes) setup; exec scripts/wheels/same_bytes.sh "$@" ;;
  sdist-test) exec scripts/wheels/sdist_test.sh "$@" ;;
  sdist) setup; build_sdist "$@" ;;
  help|-h|--help) usage ;;
  *) usage >&2; echo "scripts/dev.sh: unknown command '${cmd}'" >&2; exit 2 ;;
esac
