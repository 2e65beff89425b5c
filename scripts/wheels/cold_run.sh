#!/usr/bin/env bash
# scripts/dev.sh wheels-cold [OUT]: the whole wheel build and test as a new machine runs them. Every
# wheel of `scripts/dev.sh wheels` is built from a new, empty HDMLP_WHEEL_CACHE (a folder under
# /var/tmp, removed afterwards; HDMLP_KEEP_COLD_CACHE=1 keeps it), then each is tested by
# `wheel-test` on its suite, whose chroots are made from scratch in that cache too. About an hour on
# 2 cores: a job for a periodic CI run (weekly, say), beside the cheap `wheel-cold-check` that
# every CI run does. Prints the wall and CPU time of each part and the load average, and appends
# one line to $HDMLP_WHEEL_CACHE/cold-runs.tsv (the usual cache, not the cold one).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
HERE=$ROOT/scripts/wheels
source "$HERE/common.sh"
need_root wheels-cold
OUT=$(realpath -m "${1:-dist}")
declare -A SUITE=([cp311]=bookworm [cp313]=trixie [cp314]=sid)

cpu_seconds() {  # cpu_seconds VAR: user + system seconds of this shell's finished children so far.
  # bash's `times` sees them only when it runs in this shell, not in a $(...) subshell.
  times > "$cold/.times"
  printf -v "$1" '%s' "$(tail -1 "$cold/.times" | awk '{ for (i = 1; i <= 2; i++) { split($i, a, /[ms]/);
    s += a[1] * 60 + a[2] } } END { printf "%.0f", s }')"
}
load() { cut -d' ' -f1-3 /proc/loadavg; }

summary=()
timed() {  # timed LABEL CMD...: runs CMD; logs its wall and CPU seconds and the load averages
  local label=$1; shift
  local t0=$SECONDS c0 c1 l0 rc=0 line
  cpu_seconds c0; l0=$(load)
  "$@" || rc=$?
  cpu_seconds c1
  line="$label: $((SECONDS - t0)) s wall, $((c1 - c0)) s CPU; load average $l0 at the start, $(load) at the end"
  [[ $rc -eq 0 ]] || line+="; FAILED (exit $rc)"
  summary+=("$line")
  log "$line"
  return "$rc"
}

main() {
  cold=$(mktemp -d /var/tmp/hdmlp-wheels-cold.XXXXXX)  # a global: the EXIT trap reads it
  [[ ${HDMLP_KEEP_COLD_CACHE:-0} == 1 ]] || trap 'rm -rf "$cold"' EXIT
  log "cold run: every wheel from an empty cache ($cold) on $(nproc) cores, then wheel-test of each"
  local start=$SECONDS rc=0 wheel tag result
  timed "scripts/dev.sh wheels from an empty cache" env HDMLP_WHEEL_CACHE="$cold" "$HERE/build.sh" "$cold/dist" || rc=$?
  if [[ $rc -eq 0 ]]; then
    mkdir -p "$OUT" && cp "$cold"/dist/*.whl "$OUT/"
    for wheel in "$cold"/dist/hdmlp-*-manylinux*.whl; do
      tag=$(basename "$wheel" | cut -d- -f3)
      [[ -n ${SUITE[$tag]:-} ]] || { log "cold run: no test suite for $tag; $(basename "$wheel") not tested"; continue; }
      timed "wheel-test $(basename "$wheel") ${SUITE[$tag]} (its chroot made cold)" \
        env HDMLP_WHEEL_CACHE="$cold" "$HERE/test.sh" "$wheel" "${SUITE[$tag]}" || rc=$?
    done
  fi
  result=$([[ $rc -eq 0 ]] && echo passed || echo "FAILED (exit $rc)")
  mkdir -p "$CACHE"
  printf '%s\t%s\t%d cores\t%s\n' "$(date -u +%FT%TZ)" "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo -)" \
    "$(nproc)" "$(IFS=';'; echo "${summary[*]}"); $result" >> "$CACHE/cold-runs.tsv"
  log "cold run $result in $((SECONDS - start)) s:"
  printf '  %s\n' "${summary[@]}" >&2
  return "$rc"
}

main "$@"; exit  # one line: an edit of this file while it runs cannot run more of it
