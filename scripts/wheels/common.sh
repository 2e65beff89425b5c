# Sourced by the wheel scripts (build.sh, test.sh, sdist_test.sh, chroot.sh): what they share.
# Sets CACHE, the folder that keeps chroots, dependency builds and a ccache between runs.
CACHE=${HDMLP_WHEEL_CACHE:-/var/cache/hdmlp-wheels}

log() { printf '[hdmlp] %s\n' "$*" >&2; }

# need_root WHO: debootstrap, chroot and mount namespaces need root; say so and stop otherwise.
need_root() {
  [[ $(id -u) -eq 0 ]] || { echo "$1: needs root (debootstrap, chroot, mount namespaces)" >&2; exit 2; }
}
