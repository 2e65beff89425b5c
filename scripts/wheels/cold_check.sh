#!/usr/bin/env bash
# scripts/dev.sh wheel-cold-check: the parts of `scripts/dev.sh wheels` and `wheel-test` that only a
# machine with an empty $HDMLP_WHEEL_CACHE runs, checked in well under a minute with the chroots
# that a warm cache holds. CI runs it in `scripts/dev.sh wheel-check`. A warm cache skips both
# of these, so without this check a broken cold build passes CI on a machine that built before:
#
#   1. Bind sources on an empty cache. build.sh runs with a new, empty HDMLP_WHEEL_CACHE that holds
#      only a link to the cached build chroot (debootstrap is the one step left out), and stops after
#      its chroot steps (HDMLP_WHEEL_CHROOT_CHECK). Every folder it binds must exist by then, made
#      by build.sh itself: `chroot.sh run` refuses a missing bind source.
#   2. First installs under chroot.sh's mounts. `chroot.sh make` installs the packages with
#      `chroot.sh run`, whose mounts are in place while every maintainer script runs; a mount over
#      a file that a script replaces fails there ("Device or resource busy"). So in each cached
#      chroot (the build chroot with build.sh's binds, the test chroots with test.sh's), on an
#      in-memory overlay, every installed package is set back to "unpacked" and `dpkg --configure
#      -a` runs all their post-install scripts and triggers again, as on a first install.
#
# A chroot that the cache lacks is skipped with that said (the wheel build and tests then make it
# from scratch, which is the cold path itself). `scripts/dev.sh wheels-cold` is the full cold run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
HERE=$ROOT/scripts/wheels
source "$HERE/common.sh"
need_root wheel-cold-check

# The post-install scripts of every package in the chroot again, as on a first install (dpkg
# passes no previous version to a package that has no Config-Version).
REPLAY='
  sed -i -e "s/^Status: install ok installed$/Status: install ok unpacked/" -e "/^Config-Version:/d" /var/lib/dpkg/status
  n=$(grep -c "^Status: install ok unpacked$" /var/lib/dpkg/status || true)
  if ! DEBIAN_FRONTEND=noninteractive dpkg --configure -a >/tmp/hdmlp-replay.log 2>&1; then
    grep -B2 -iE "busy|read-only|error processing|returned error|^E:" /tmp/hdmlp-replay.log | head -30
    echo "first-install replay: dpkg --configure -a failed after a cold install of the $n packages above"
    exit 1
  fi
  left=$(grep -c "^Status: install ok \(unpacked\|half-configured\|triggers-\)" /var/lib/dpkg/status || true)
  [ "$left" = 0 ] || { echo "first-install replay: $left packages left unconfigured"; exit 1; }
  echo "$n packages configured as on a first install"
'

main() {  # globals, not locals: the EXIT trap reads $tmp after main returns
  start=$SECONDS
  fail=0
  tmp=$(mktemp -d /var/tmp/hdmlp-cold-check.XXXXXX)
  trap 'rm -rf "$tmp"' EXIT

  # 1 and 2 for the build chroot: build.sh on an empty cache. The Debian mirror is an address that
  # refuses connections, so that a build.sh that went past its chroot steps fails here at once
  # instead of downloading.
  build_chroot=$CACHE/chroot-bullseye-build
  if [[ -f $build_chroot/.hdmlp-chroot ]]; then
    mkdir -p "$tmp/cache"
    ln -s "$build_chroot" "$tmp/cache/chroot-bullseye-build"
    log "cold check: build.sh on an empty cache (the build chroot's mounts and binds, its packages' post-install scripts)"
    # x86-64's build chroot only: the aarch64 cross chroot is the same bullseye with the cross
    # packages added by the same chroot.sh run (build.sh's setup_build_chroot).
    if ! HDMLP_WHEEL_ARCHS=x86_64 HDMLP_WHEEL_CACHE=$tmp/cache HDMLP_CHROOT_EPHEMERAL=1 HDMLP_DEBIAN_MIRROR=http://127.0.0.1:9/debian \
         HDMLP_WHEEL_CHROOT_CHECK=$REPLAY "$HERE/build.sh" "$tmp/out" >"$tmp/build.log" 2>&1; then
      tail -30 "$tmp/build.log" >&2
      log "cold check FAILED: scripts/wheels/build.sh's chroot steps on an empty cache (above)"
      fail=1
    else
      grep -v '^\[hdmlp\] chroot .* is ready (cached)$' "$tmp/build.log" >&2 || true
    fi
  else
    log "cold check: no cached build chroot in $CACHE; skipped (a wheel build makes it cold)"
  fi

  # 2 for the test chroots (wheel-test, sdist-test), with test.sh's binds.
  mkdir -p "$tmp/wheels"
  for suite in bookworm trixie; do
    dir=$CACHE/chroot-$suite-test
    if [[ ! -f $dir/.hdmlp-chroot ]]; then
      log "cold check: no cached $suite test chroot in $CACHE; skipped (wheel-test makes it cold)"
      continue
    fi
    log "cold check: the $suite test chroot's post-install scripts under chroot.sh's mounts"
    if ! HDMLP_CHROOT_EPHEMERAL=1 HDMLP_CHROOT_BINDS="$tmp/wheels:/wheels:ro $HERE:/smoke:ro" \
         "$HERE/chroot.sh" run "$dir" bash -euc "$REPLAY" >"$tmp/$suite.log" 2>&1; then
      cat "$tmp/$suite.log" >&2
      log "cold check FAILED: a first install in the $suite test chroot (above)"
      fail=1
    else
      cat "$tmp/$suite.log" >&2
    fi
  done

  if [[ $fail -ne 0 ]]; then
    log "cold check FAILED: scripts/dev.sh wheels or wheel-test would fail on a machine without $CACHE ($((SECONDS - start)) s)"
    exit 1
  fi
  log "cold check passed ($((SECONDS - start)) s)"
}

main "$@"; exit  # one line: an edit of this file while it runs cannot run more of it
