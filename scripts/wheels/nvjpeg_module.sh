#!/usr/bin/env bash
# scripts/wheels/nvjpeg_module.sh OUT [PYTHON_INCLUDE_DIR ...]: hdmlp._nvjpeg (hdmlp/device/nvjpeg.py) built from
# NVIDIA's nvJPEG and CUDA runtime wheels, for a machine whose hdmlp came from a wheel without it (the
# wheels from scripts/dev.sh wheels never hold it) and that has no CUDA toolkit to build it with.
#
# The wheels (nvidia-nvjpeg, nvidia-cuda-runtime, nvidia-cuda-crt, CUDA 13: their headers and
# libnvjpeg.so.13) are fetched from PyPI once, into $HDMLP_NVJPEG_CACHE (~/.cache/hdmlp/nvjpeg). The
# module is compiled with pybind11 from the development .venv, for the CPython whose include folders
# are given (default: the .venv's), and needs only glibc, libstdc++ and libnvjpeg.so.13 at run time:
# copy OUT/_nvjpeg.*.so into the installed hdmlp/ folder, and install the nvidia-nvjpeg wheel there
# (or have the CUDA toolkit) so that hdmlp/device/nvjpeg.py finds libnvjpeg.so.13. docs/gpu.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=$(realpath -m "${1:?usage: scripts/wheels/nvjpeg_module.sh OUT [PYTHON_INCLUDE_DIR ...]}")
shift
PY=.venv/bin/python
[[ -x $PY ]] || { echo "no .venv: run scripts/dev.sh setup first" >&2; exit 2; }
CACHE=${HDMLP_NVJPEG_CACHE:-$HOME/.cache/hdmlp/nvjpeg}
CUDA=$CACHE/nvidia/cu13
if [[ ! -f $CUDA/include/nvjpeg.h || ! -f $CUDA/lib/libnvjpeg.so.13 || ! -f $CUDA/include/crt/host_defines.h ]]; then
  mkdir -p "$CACHE/wheels"
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$CACHE/wheels" \
    "nvidia-nvjpeg>=13,<14" "nvidia-cuda-runtime>=13,<14" "nvidia-cuda-crt>=13,<14"
  for w in "$CACHE"/wheels/*.whl; do "$PY" -m zipfile -e "$w" "$CACHE"; done
fi
if [[ $# -eq 0 ]]; then
  set -- "$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
fi
includes=()
for dir in "$@"; do includes+=(-isystem "$dir"); done
ver=$(sed -n 's/^#define PY_VERSION[[:space:]]*"\([0-9]*\)\.\([0-9]*\).*/\1\2/p' "$1/patchlevel.h")
[[ -n $ver ]] || { echo "$1/patchlevel.h: no PY_VERSION (not a CPython include folder?)" >&2; exit 2; }
mkdir -p "$OUT"
module=$OUT/_nvjpeg.cpython-$ver-x86_64-linux-gnu.so
flags=(-std=c++17 -O2 -Wall -Wextra -fPIC -fvisibility=hidden -I cpp/include -isystem "$CUDA/include"
       -isystem "$("$PY" -c 'import pybind11; print(pybind11.get_include())')" "${includes[@]}")
objects=$(mktemp -d)
trap 'rm -rf "$objects"' EXIT
g++ "${flags[@]}" -c cpp/src/device/nvjpeg_batch_decoder.cc -o "$objects/decoder.o" &
g++ "${flags[@]}" -c python/nvjpeg/module.cc -o "$objects/module.o"
wait $!
g++ -shared "$objects/decoder.o" "$objects/module.o" "$CUDA/lib/libnvjpeg.so.13" -o "$module"
strip --strip-unneeded "$module"
cp "$CACHE"/wheels/nvidia_nvjpeg-*.whl "$OUT"/
echo "$module (and the nvidia-nvjpeg wheel beside it)"
