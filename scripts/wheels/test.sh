#!/usr/bin/env bash
# scripts/dev.sh wheel-test WHEEL SUITE: installs WHEEL into a fresh virtual environment inside a
# chroot of the Debian SUITE (bookworm: Python 3.11, Open MPI 4.1; trixie: Python 3.13, Open MPI
# 5.0; sid: Python 3.14) with `pip install WHEEL numpy` and nothing else, then runs
# scripts/wheels/smoke_test.py there, from outside any checkout. An aarch64 wheel is tested in an
# arm64 chroot of SUITE, whose programs run through qemu-user (scripts/wheels/binfmt.sh, which
# leaves the machine's binfmt_misc as it found it).
#
#   scripts/wheels/test.sh WHEEL SUITE                        the smoke test
#   scripts/wheels/test.sh --same-bytes DATA OUT WHEEL SUITE  same_bytes.py run over the image folder
#                                                             DATA, its hashes written to OUT (a .json)
#
# The suite's base system (python3, python3-venv, openmpi-bin) is cached under
# $HDMLP_WHEEL_CACHE; the virtual environment lives in the chroot's private /tmp and is new on
# every run, so no run sees what an earlier one installed. Prints one result line and appends
# it to $HDMLP_WHEEL_CACHE/results.tsv.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
HERE=$ROOT/scripts/wheels
source "$HERE/common.sh"
source "$HERE/arch.sh"

usage() {
  echo "usage: scripts/dev.sh wheel-test WHEEL SUITE   (SUITE: bookworm for cp311, trixie for cp313, sid for cp314)" >&2
  exit 2
}
main() {
  MODE=smoke
  if [[ ${1:-} == --same-bytes ]]; then
    [[ $# -eq 5 ]] || usage
    MODE=same-bytes DATA=$(realpath "$2") OUT_JSON=$(realpath -m "$3")
    shift 3
    [[ -d $DATA ]] || { echo "wheel-test: $DATA is not a folder" >&2; exit 2; }
  fi
  [[ $# -eq 2 ]] || usage
  WHEEL=$(realpath "$1")
  SUITE=$2
  [[ -f $WHEEL && $WHEEL == *.whl ]] || { echo "wheel-test: $1 is not a wheel file" >&2; exit 2; }
  need_root wheel-test
  declare -A SUITE_PYTHON=([bookworm]=3.11 [trixie]=3.13 [sid]=3.14)
  [[ -n ${SUITE_PYTHON[$SUITE]:-} ]] || { echo "wheel-test: SUITE must be bookworm, trixie or sid, got '$SUITE'" >&2; exit 2; }
  PY=${SUITE_PYTHON[$SUITE]}
  name=$(basename "$WHEEL")
  tag=$(echo "$name" | cut -d- -f3)
  if [[ $tag != "cp${PY/./}" ]]; then
    echo "wheel-test: $name is for CPython ${tag#cp} but $SUITE's Python is $PY:" \
         "test cp311 wheels on bookworm, cp313 wheels on trixie and cp314 wheels on sid" >&2
    exit 2
  fi
  arch=$(wheel_arch "$name")
  [[ $arch != unknown ]] || { echo "wheel-test: $name is for none of ${WHEEL_ARCHS_ALL[*]}" >&2; exit 2; }
  arch_vars "$arch"

  # The test chroot of the build machine's architecture is as it always was; an arm64 one is
  # another folder, made and entered through qemu-user.
  chroot_dir=$CACHE/chroot-$SUITE-test
  emulate=()
  if [[ $DEB_ARCH != amd64 ]]; then
    chroot_dir=$CACHE/chroot-$SUITE-test-$DEB_ARCH
    emulate=("$HERE/binfmt.sh" run)
  fi
  # Python: the suite's python3 where that is the version tested (bookworm, trixie), else the
  # versioned package (sid moves on to newer CPythons).
  packages=(python3 python3-venv openmpi-bin ca-certificates)
  python=python3
  if [[ $SUITE == sid ]]; then
    packages=("python$PY" "python$PY-venv" openmpi-bin ca-certificates)
    python=python$PY
  fi

  start=$SECONDS
  binds="$(dirname "$WHEEL"):/wheels:ro $HERE:/smoke:ro"
  if [[ $MODE == same-bytes ]]; then
    mkdir -p "$(dirname "$OUT_JSON")"
    binds="$binds $DATA:/data:ro $(dirname "$OUT_JSON"):/out"
    script='PATH=/tmp/venv/bin:$PATH /tmp/venv/bin/python /smoke/same_bytes.py run /data "/out/$3"'
    what="same_bytes.py"
  else
    # mpirun's 2 ranks under qemu-user take minutes on a busy machine.
    script="PATH=/tmp/venv/bin:\$PATH HDMLP_SMOKE_MPI_TIMEOUT=${emulate:+1200} /tmp/venv/bin/python /smoke/smoke_test.py"
    what="the smoke test"
  fi
  rc=0
  "${emulate[@]}" env HDMLP_CHROOT_ARCH="${emulate:+$DEB_ARCH}" bash -euc '
    "$1/chroot.sh" make "$2" "$3" "${@:4}"
  ' _ "$HERE" "$SUITE" "$chroot_dir" "${packages[@]}" || rc=$?
  if [[ $rc -eq 0 ]]; then
    log "$what of $name in a fresh $SUITE ($DEB_ARCH${emulate:+, under qemu-user}) environment"
    "${emulate[@]}" env HDMLP_CHROOT_EPHEMERAL=1 HDMLP_CHROOT_BINDS="$binds" "$HERE/chroot.sh" run "$chroot_dir" bash -euc '
      cd /tmp
      "$2" -m venv /tmp/venv
      t=$SECONDS
      /tmp/venv/bin/pip install -q --disable-pip-version-check --no-cache-dir "/wheels/$1" numpy
      echo "pip install $1 numpy: $((SECONDS - t)) s; hdmlp installed: $(du -sk /tmp/venv/lib/python3*/site-packages/hdmlp* |
        awk "{s += \$1} END {printf \"%.1f MB\", s / 1024}")"
      eval "$4"
    ' hdmlp-wheel-test "$name" "$python" "$(basename "${OUT_JSON:-none}")" "$script" || rc=$?
  fi
  result=$([[ $rc -eq 0 ]] && echo passed || echo "FAILED (exit $rc)")
  line=$(printf '%s\t%s\t%s\t%s\t%d s\t%s' "$(date -u +%F)" "$name" "$SUITE${emulate:+ ($DEB_ARCH, qemu-user)}" \
         "$(stat -c %s "$WHEEL")" $((SECONDS - start)) "$what: $result")
  echo "$line" >> "$CACHE/results.tsv"
  log "wheel-test $name on $SUITE: $what $result ($((SECONDS - start)) s)"
  exit $rc
}

main "$@"; exit  # one line: an edit of this file while it runs cannot run more of it
