#!/usr/bin/env bash
# scripts/dev.sh sdist-test SDIST [SUITE]: `pip install SDIST` in a fresh chroot of a Debian SUITE
# (default bookworm) that has a compiler and Python's headers but none of hdmlp's libraries, and
# checks that the build stops with the one message that lists every missing library with its
# apt, dnf, Spack and conda-forge names, and that nothing of CMake's own follows it.
# (The build against the libraries is what `pip install .` does in scripts/dev.sh setup.)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
HERE=$PWD/scripts/wheels
source "$HERE/common.sh"
[[ $# -ge 1 && -f $1 && $1 == *.tar.gz ]] || { echo "usage: scripts/dev.sh sdist-test SDIST [SUITE]" >&2; exit 2; }
SDIST=$(realpath "$1")
SUITE=${2:-bookworm}
need_root sdist-test
chroot_dir=$CACHE/chroot-$SUITE-test
"$HERE/chroot.sh" make "$SUITE" "$chroot_dir" python3 python3-venv openmpi-bin ca-certificates
printf '[hdmlp] pip install %s in a fresh %s with a compiler and no libraries\n' "$(basename "$SDIST")" "$SUITE" >&2
out=$(HDMLP_CHROOT_EPHEMERAL=1 HDMLP_CHROOT_BINDS="$(dirname "$SDIST"):/sdist:ro" "$HERE/chroot.sh" run "$chroot_dir" \
  bash -euc '
    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
       build-essential python3-dev) >/tmp/apt.log 2>&1 || { tail -20 /tmp/apt.log; exit 3; }
    python3 -m venv /tmp/venv
    cd /tmp && /tmp/venv/bin/pip install --disable-pip-version-check --no-cache-dir "/sdist/$1" 2>&1 && exit 4 || exit 0
  ' hdmlp-sdist-test "$(basename "$SDIST")") || { rc=$?; echo "$out" | tail -40 >&2;
  echo "sdist-test: the chroot step failed (exit $rc: 3 = apt-get, 4 = the install succeeded without libraries)" >&2; exit 1; }
msg=$(echo "$out" | sed 's/^[[:space:]│]*//' | tr -s ' \n' ' ')
fail=0
for want in "missing build dependencies" "sudo apt-get install pkg-config libconfig++-dev libopencv-dev libopenmpi-dev" \
            "libjpeg-dev libhdf5-dev libxxhash-dev" "sudo dnf install pkgconf-pkg-config libconfig-devel opencv-devel" \
            "spack install pkgconf libconfig opencv+imgproc+imgcodecs openmpi" \
            "conda install -c conda-forge pkg-config libconfig libopencv openmpi" \
            "Open MPI's runtime without its development files"; do
  if [[ $msg != *"$want"* ]]; then echo "sdist-test: the build's message lacks: $want" >&2; fail=1; fi
done
tail_part=${msg#*All at once:}
if [[ $tail_part == *"CMake Error"* ]]; then echo "sdist-test: CMake errors follow the message" >&2; fail=1; fi
if [[ $fail -ne 0 ]]; then echo "$out" | tail -60 >&2; exit 1; fi
echo "$out" | sed -n '/missing build dependencies/,/=====$/p' | head -40
printf '[hdmlp] sdist-test %s on %s: passed (one message, every missing library)\n' "$(basename "$SDIST")" "$SUITE" >&2
