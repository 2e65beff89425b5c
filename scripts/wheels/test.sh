#!/usr/bin/env bash
# scripts/dev.sh wheel-test WHEEL SUITE: installs WHEEL into a fresh virtual environment inside a
# chroot of the Debian SUITE (bookworm: Python 3.11, Open MPI 4.1; trixie: Python 3.13, Open MPI
# 5.0) with `pip install WHEEL numpy` and nothing else, then runs scripts/wheels/smoke_test.py
# there, from outside any checkout.
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

usage() { echo "usage: scripts/dev.sh wheel-test WHEEL SUITE   (SUITE: bookworm for cp311, trixie for cp313)" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
WHEEL=$(realpath "$1")
SUITE=$2
[[ -f $WHEEL && $WHEEL == *.whl ]] || { echo "wheel-test: $1 is not a wheel file" >&2; exit 2; }
need_root wheel-test
declare -A SUITE_PYTHON=([bookworm]=311 [trixie]=313)
[[ -n ${SUITE_PYTHON[$SUITE]:-} ]] || { echo "wheel-test: SUITE must be bookworm or trixie, got '$SUITE'" >&2; exit 2; }
name=$(basename "$WHEEL")
tag=$(echo "$name" | cut -d- -f3)
if [[ $tag != "cp${SUITE_PYTHON[$SUITE]}" ]]; then
  echo "wheel-test: $name is for CPython ${tag#cp} but $SUITE's Python is ${SUITE_PYTHON[$SUITE]}:" \
       "test cp311 wheels on bookworm and cp313 wheels on trixie" >&2
  exit 2
fi

start=$SECONDS
chroot_dir=$CACHE/chroot-$SUITE-test
"$HERE/chroot.sh" make "$SUITE" "$chroot_dir" python3 python3-venv openmpi-bin ca-certificates
log "testing $name in a fresh $SUITE environment"
rc=0
HDMLP_CHROOT_EPHEMERAL=1 HDMLP_CHROOT_BINDS="$(dirname "$WHEEL"):/wheels:ro $HERE:/smoke:ro" "$HERE/chroot.sh" run "$chroot_dir" bash -euc '
  cd /tmp
  python3 -m venv /tmp/venv
  t=$SECONDS
  /tmp/venv/bin/pip install -q --disable-pip-version-check --no-cache-dir "/wheels/$1" numpy
  echo "pip install $1 numpy: $((SECONDS - t)) s; hdmlp installed: $(du -sk /tmp/venv/lib/python3*/site-packages/hdmlp* |
    awk "{s += \$1} END {printf \"%.1f MB\", s / 1024}")"
  PATH=/tmp/venv/bin:$PATH /tmp/venv/bin/python /smoke/smoke_test.py
' hdmlp-wheel-test "$name" || rc=$?
result=$([[ $rc -eq 0 ]] && echo passed || echo "FAILED (exit $rc)")
line=$(printf '%s\t%s\t%s\t%s\t%d s\t%s' "$(date -u +%F)" "$name" "$SUITE" "$(stat -c %s "$WHEEL")" \
       $((SECONDS - start)) "$result")
echo "$line" >> "$CACHE/results.tsv"
log "wheel-test $name on $SUITE: $result ($((SECONDS - start)) s)"
exit $rc
