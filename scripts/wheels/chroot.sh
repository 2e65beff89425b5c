#!/usr/bin/env bash
# Debian chroots for building and testing hdmlp's wheels (scripts/dev.sh wheels / wheel-test).
#
#   scripts/wheels/chroot.sh make SUITE DIR PKG...   debootstrap DIR (reused while SUITE and PKGs match)
#   scripts/wheels/chroot.sh run DIR CMD...          run CMD inside DIR as root
#
# `run` enters a private mount namespace (unshare -m): /proc, /dev, /dev/shm, /sys and the
# host's resolv.conf are mounted there and vanish with the namespace, whatever way the
# command ends, so nothing is left mounted on the host. Extra binds: HDMLP_CHROOT_BINDS,
# "HOSTDIR:DIR_IN_CHROOT[:ro]" separated by spaces; every HOSTDIR must exist (the caller makes
# it: `run` stops with its name before mounting anything otherwise), and no bind, ours or the
# caller's, may cover a path that a Debian package in the chroot owns or writes: a package's
# maintainer script that replaces it fails with "Device or resource busy" (scripts/wheels/
# cold_check.sh tests this). So the host's CA bundle, which pip needs where a proxy
# re-signs TLS, is a copy in a tmpfs at /run/hdmlp-host (PIP_CERT, SSL_CERT_FILE), not a bind
# over the chroot's own /etc/ssl/certs/ca-certificates.crt. HDMLP_CHROOT_EPHEMERAL=1 runs on an overlay of
# DIR whose changes live in memory and vanish with the command: DIR stays as debootstrap left it,
# so every run starts from the same clean system (what wheel-test and sdist-test need).
#
# The Debian mirror is the one this machine's apt uses (HDMLP_DEBIAN_MIRROR overrides it).
# HDMLP_CHROOT_ARCH=arm64 makes an arm64 chroot (`make`): its programs run through qemu-user, so
# `make` and `run` of one must be inside scripts/wheels/binfmt.sh run.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

debian_mirror() {
  if [[ -n ${HDMLP_DEBIAN_MIRROR:-} ]]; then echo "$HDMLP_DEBIAN_MIRROR"; return; fi
  local uri
  uri=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -1 || true)
  [[ -z $uri ]] && uri=$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | grep -v security | head -1 || true)
  if [[ -z $uri ]]; then
    echo "chroot.sh: no Debian mirror in /etc/apt/sources.list{,.d}; set HDMLP_DEBIAN_MIRROR" >&2
    exit 2
  fi
  echo "$uri"
}

make_chroot() {
  local suite=$1 dir=$2; shift 2
  local want
  local arch=${HDMLP_CHROOT_ARCH:-}
  # The machine's own architecture keeps the hash it always had.
  want=$(printf '%s\n' "$suite" ${arch:+"arch=$arch"} "$@" | sha256sum | cut -c1-16)
  if [[ -f $dir/.hdmlp-chroot && $(cat "$dir/.hdmlp-chroot") == "$want" ]]; then
    log "chroot $dir ($suite) is ready (cached)"
    return
  fi
  command -v debootstrap >/dev/null || {
    log "installing debootstrap"
    # A new machine may have no package lists yet (a container image's are removed).
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >/dev/null 2>&1 || {
      apt-get update -q >/dev/null
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >/dev/null
    }
  }
  [[ $(id -u) -eq 0 ]] || { echo "chroot.sh: debootstrap needs root" >&2; exit 2; }
  local mirror tmp
  mirror=$(debian_mirror)
  tmp=$dir.partial
  rm -rf "$tmp" "$dir"
  mkdir -p "$(dirname "$dir")"
  log "debootstrap $suite into $dir (from $mirror; a few minutes)"
  local start=$SECONDS
  # minbase first, then apt-get inside: debootstrap's own --include resolves dependencies
  # poorly (it fails configuring libltdl-dev for libopenmpi-dev on bullseye).
  debootstrap --variant=minbase ${arch:+--arch "$arch"} "$suite" "$tmp" "$mirror" >"$tmp.log" 2>&1 || {
    tail -20 "$tmp.log" >&2
    echo "chroot.sh: debootstrap $suite failed (log: $tmp.log)" >&2
    exit 1
  }
  # apt inside the chroot uses the same mirror for later installs.
  echo "deb $mirror $suite main" > "$tmp/etc/apt/sources.list"
  # A mirror that is a snapshot (a frozen copy) serves testing's and sid's Release files past their
  # Valid-Until date, which apt refuses; their signatures are still checked.
  echo 'Acquire::Check-Valid-Until "false";' > "$tmp/etc/apt/apt.conf.d/99hdmlp-valid-until"
  if [[ $# -gt 0 ]]; then
    echo ready > "$tmp/.hdmlp-chroot"
    run_in_chroot "$tmp" sh -c "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
      --no-install-recommends $* && apt-get clean" >>"$tmp.log" 2>&1 || {
      tail -20 "$tmp.log" >&2
      echo "chroot.sh: installing $* in the $suite chroot failed (log: $tmp.log)" >&2
      exit 1
    }
  fi
  mv "$tmp" "$dir"
  rm -f "$tmp.log"
  echo "$want" > "$dir/.hdmlp-chroot"
  log "chroot $dir ready in $((SECONDS - start)) s"
}

# The host's CA bundle, as the chroot sees it (a copy; see the top of this file).
HOST_CA=/run/hdmlp-host/ca-certificates.crt

# check_binds DIR: every HDMLP_CHROOT_BINDS entry is well formed, its source exists, and its
# target is nothing that a package installed in chroot DIR lists as its own.
check_binds() {
  local dir=$1 lists=("$1"/var/lib/dpkg/info/*.list) b src dst mode
  for b in ${HDMLP_CHROOT_BINDS:-}; do
    IFS=: read -r src dst mode <<<"$b"
    if [[ -z $src || $dst != /* || ( -n ${mode:-} && $mode != ro ) ]]; then
      echo "chroot.sh run: HDMLP_CHROOT_BINDS entry '$b' is not HOSTDIR:/DIR_IN_CHROOT[:ro]" >&2
      exit 2
    fi
    if [[ ! -e $src ]]; then
      echo "chroot.sh run: the bind source $src (for $dst) does not exist; the caller must create it" \
           "before the chroot runs" >&2
      exit 2
    fi
    if [[ -e ${lists[0]} ]] && grep -qxF -- "$dst" "${lists[@]}"; then
      echo "chroot.sh run: the bind target $dst belongs to a Debian package in $dir; bind elsewhere" \
           "(the package's maintainer scripts may replace it)" >&2
      exit 2
    fi
  done
}

run_in_chroot() {
  local dir=$1; shift
  [[ -f $dir/.hdmlp-chroot ]] || { echo "chroot.sh: $dir is not a chroot made by chroot.sh make" >&2; exit 2; }
  check_binds "$dir"
  # The inner script runs in a new mount namespace; its mounts die with it.
  HDMLP_CHROOT_DIR=$dir HDMLP_HOST_CA=$HOST_CA unshare --mount --propagation private -- bash -euc '
    d=$HDMLP_CHROOT_DIR
    if [[ ${HDMLP_CHROOT_EPHEMERAL:-0} == 1 ]]; then
      scratch=/mnt  # a tmpfs over it, in this namespace only: nothing is left on the host
      mount -t tmpfs -o size=16g tmpfs "$scratch"
      mkdir -p "$scratch/upper" "$scratch/work" "$scratch/root"
      mount -t overlay overlay -o "lowerdir=$d,upperdir=$scratch/upper,workdir=$scratch/work" "$scratch/root"
      d=$scratch/root
    fi
    mount -t proc proc "$d/proc"
    mount --rbind /dev "$d/dev"
    mkdir -p "$d/dev/shm" && mount -t tmpfs -o size=4g tmpfs "$d/dev/shm"
    mount --rbind /sys "$d/sys"
    mount -t tmpfs tmpfs "$d/tmp"
    [[ -f /etc/resolv.conf ]] && cp -L /etc/resolv.conf "$d/etc/resolv.conf" 2>/dev/null || true
    # The host'"'"'s trust store (it may hold a proxy'"'"'s CA that pip needs to reach PyPI): a copy
    # in a tmpfs of its own, where no package looks; the chroot'"'"'s ca-certificates keeps its files.
    ca_dir=$(dirname "$HDMLP_HOST_CA")
    mkdir -p "$d$ca_dir" && mount -t tmpfs -o size=8m,mode=0755 tmpfs "$d$ca_dir"
    for bundle in /etc/ssl/certs/ca-certificates.crt "$d/etc/ssl/certs/ca-certificates.crt"; do
      [[ -f $bundle ]] && { cp -L "$bundle" "$d$HDMLP_HOST_CA"; break; }  # else the chroot'"'"'s own
    done
    mount -o remount,ro,bind "$d$ca_dir"
    for b in ${HDMLP_CHROOT_BINDS:-}; do
      IFS=: read -r src dst mode <<<"$b"
      mkdir -p "$d$dst"
      mount --bind "$src" "$d$dst"
      [[ ${mode:-} == ro ]] && mount -o remount,bind,ro "$d$dst"
    done
    exec chroot "$d" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      LANG=C.UTF-8 TERM=dumb PIP_CERT="$HDMLP_HOST_CA" SSL_CERT_FILE="$HDMLP_HOST_CA" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-} "$@"
  ' hdmlp-chroot "$@"
}

main() {
  local cmd=${1:-}
  [[ $# -gt 0 ]] && shift
  case "$cmd" in
    make) make_chroot "$@" ;;
    run) run_in_chroot "$@" ;;
    mirror) debian_mirror ;;
    *) echo "usage: scripts/wheels/chroot.sh {make SUITE DIR PKG...|run DIR CMD...|mirror}" >&2; exit 2 ;;
  esac
}

# One line: bash reads a script as it runs it, and a `run` lasts as long as its command (a build:
# half an hour), so an edit of this file meanwhile would otherwise run the new file's text from
# the old offset when the command ends.
main "$@"; exit
