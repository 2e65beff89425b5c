#!/usr/bin/env bash
# Runs aarch64 programs on this x86-64 machine through qemu-user and the kernel's binfmt_misc,
# for the aarch64 wheels (scripts/dev.sh wheels builds HDF5 with it, wheel-test runs its arm64
# chroots with it), and leaves the machine's binfmt state as it found it.
#
#   scripts/wheels/binfmt.sh run CMD...   run CMD with an aarch64 handler registered
#   scripts/wheels/binfmt.sh state        print the state: binfmt_misc mounted or not, its status,
#                                         the registered handlers (one line each)
#   scripts/wheels/binfmt.sh qemu         fetch qemu-aarch64 into the cache; print its path
#
# `run` records the state first and works in a private mount namespace (unshare -m):
#   - binfmt_misc not mounted on the machine: it is mounted in that namespace only, and the
#     handler registered there; when the namespace's last process ends, the mount and with it
#     every handler registered through it go away (the kernel frees them with the last mount),
#     whatever way the command ended (a kill -9 included);
#   - mounted: an aarch64 handler that is already registered and enabled (Debian's
#     qemu-user-static, say) is used as it is; otherwise one of hdmlp's own, named
#     hdmlp-qemu-aarch64-PID, is registered and removed again when CMD ends (a trap, also on
#     Ctrl-C and SIGTERM); a disabled binfmt_misc (status 0) is enabled for CMD and disabled again.
# Then it compares the state with the one recorded, and fails if they differ. Handlers are
# per process (the PID in the name), so runs at the same time do not remove each other's.
#
# qemu-aarch64 comes from Debian 13's qemu-user package (statically linked), unpacked into
# $HDMLP_WHEEL_CACHE/qemu (never installed: no package scripts run).
# HDMLP_QEMU_AARCH64=PATH uses another interpreter (the tests register /bin/true: cheap).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/common.sh"

BINFMT=/proc/sys/fs/binfmt_misc
# ELF, 64-bit, little-endian, executable or shared object, machine 183 (EM_AARCH64): Debian's
# qemu-user-static's magic and mask (/usr/lib/binfmt.d/qemu-aarch64.conf).
MAGIC='\x7f\x45\x4c\x46\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
MASK='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'
MAGIC_HEX=7f454c460201010000000000000000000200b700

mounted() { awk '$3 == "binfmt_misc" {found = 1} END {exit !found}' /proc/self/mounts; }

state() {
  if ! mounted; then
    echo "binfmt_misc not mounted"
    return
  fi
  echo "binfmt_misc mounted, status $(cat "$BINFMT/status")"
  local f
  for f in "$BINFMT"/*; do
    case ${f##*/} in register | status) continue ;; esac
    echo "handler ${f##*/}: $(head -1 "$f"), $(sed -n 's/^interpreter //p' "$f")"
  done
}

# The path of qemu-aarch64, fetched once: Debian 13's qemu-user (10.0, statically linked), from a
# private package list (the machine's apt configuration is left alone); 7.2, bookworm's, failed a
# package's post-install script in a trixie chroot now and then.
QEMU_SUITE=trixie
qemu_path() {
  if [[ -n ${HDMLP_QEMU_AARCH64:-} ]]; then echo "$HDMLP_QEMU_AARCH64"; return; fi
  local dir=$CACHE/qemu
  if [[ ! -x $dir/qemu-aarch64 ]]; then
    log "fetching qemu-user ($QEMU_SUITE's package, unpacked into $dir; never installed)"
    local mirror apt=$dir.partial/apt
    mirror=$("$HERE/chroot.sh" mirror)
    rm -rf "$dir.partial" && mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$dir.partial/deb"
    echo "deb [arch=amd64] $mirror $QEMU_SUITE main" > "$apt/sources.list"
    local opts=(-q -o Dir::Etc::SourceList="$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
                -o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" -o Debug::NoLocking=1
                -o APT::Sandbox::User=root -o Dir::State::status=/dev/null -o APT::Architectures::=amd64)
    { apt-get "${opts[@]}" update && (cd "$dir.partial/deb" && apt-get "${opts[@]}" download qemu-user); } \
      >"$dir.partial/apt.log" 2>&1 || {
      tail -5 "$dir.partial/apt.log" >&2
      echo "binfmt.sh: could not fetch qemu-user from $mirror ($QEMU_SUITE)" >&2
      exit 1
    }
    dpkg -x "$dir.partial"/deb/*.deb "$dir.partial/x"
    cp "$dir.partial/x/usr/bin/qemu-aarch64" "$dir.partial/"
    dpkg-deb -f "$dir.partial"/deb/*.deb Version > "$dir.partial/version"
    rm -rf "$dir.partial/x" "$dir.partial/deb" "$apt" "$dir"
    mv "$dir.partial" "$dir"
  fi
  echo "$dir/qemu-aarch64"
}

# Inside the private namespace: make sure an aarch64 handler is there, then run CMD.
name="" enabled_it=0  # what inner() changed, for its trap
inner() {
  # Not mounted on the machine: mounted in this namespace only, and gone with it.
  mounted || mount -t binfmt_misc binfmt_misc "$BINFMT"
  local have=""
  if [[ $(cat "$BINFMT/status") == enabled ]]; then
    local f
    for f in "$BINFMT"/*; do
      case ${f##*/} in register | status) continue ;; esac
      if [[ $(head -1 "$f") == enabled ]] && grep -qx "magic $MAGIC_HEX" "$f"; then have=${f##*/}; break; fi
    done
  fi
  cleanup() {
    [[ -n $name && -e $BINFMT/$name ]] && echo -1 > "$BINFMT/$name"
    [[ $enabled_it == 1 ]] && echo 0 > "$BINFMT/status"
    return 0
  }
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  if [[ -z $have ]]; then
    if [[ $(cat "$BINFMT/status") != enabled ]]; then
      echo 1 > "$BINFMT/status"
      enabled_it=1
    fi
    name=hdmlp-qemu-aarch64-$$
    # F: the kernel opens the interpreter now, so it works inside chroots that lack it.
    printf ':%s:M::%s:%s:%s:F\n' "$name" "$MAGIC" "$MASK" "$QEMU" > "$BINFMT/register"
  fi
  "$@"
}

run() {
  [[ $# -gt 0 ]] || { echo "usage: scripts/wheels/binfmt.sh run CMD..." >&2; exit 2; }
  need_root "binfmt.sh run"
  QEMU=$(qemu_path)
  [[ -f $QEMU ]] || { echo "binfmt.sh: no interpreter at $QEMU" >&2; exit 2; }
  local before after rc=0
  before=$(state)
  QEMU=$QEMU unshare --mount --propagation private -- "$HERE/binfmt.sh" _inner "$@" || rc=$?
  after=$(state)
  if [[ $before != "$after" ]]; then
    printf 'binfmt.sh: the binfmt state changed; before:\n%s\nafter:\n%s\n' "$before" "$after" >&2
    [[ $rc -ne 0 ]] || rc=3
  fi
  return "$rc"
}

main() {
  local cmd=${1:-}
  [[ $# -gt 0 ]] && shift
  case "$cmd" in
    run) run "$@" ;;
    _inner) inner "$@" ;;
    state) state ;;
    qemu) qemu_path ;;
    *) echo "usage: scripts/wheels/binfmt.sh {run CMD...|state|qemu}" >&2; exit 2 ;;
  esac
}

main "$@"; exit  # one line: an edit of this file while it runs cannot run more of it
