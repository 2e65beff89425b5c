#!/usr/bin/env bash
# Builds hdmlp's libFuzzer targets (tests/fuzz: the config parser, the JPEG
# region decoder, every image decoder, the index-cache reader, the tar and
# pack index readers, the TFRecord and NumPy readers) with clang, ASan and UBSan, and runs each for SECONDS (default 10) on its seed corpus
# plus what earlier runs found (kept in build/fuzz/corpus).
#
#   scripts/fuzz.sh [SECONDS]    scripts/dev.sh test runs it with 7; `make fuzz` with 300
#
# A target that crashes, leaks, trips UBSan or runs out of time or memory
# fails the run; the input is left in build/fuzz/artifacts. Fix the bug, then
# add the input to tests/fuzz/corpus/<target>/ so it is checked every run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=${1:-10}
build=build/fuzz
targets=(${HDMLP_FUZZ_TARGETS:-config jpeg_region decode index_cache tar_index pack_index record_formats})

if ! command -v clang++ >/dev/null; then
  echo "scripts/fuzz.sh: clang++ is missing: apt-get install clang libclang-rt-dev (scripts/dev.sh setup does)" >&2
  exit 1
fi
if [[ ! -f $build/build.ninja ]]; then
  CC=clang CXX=clang++ cmake -S tests/fuzz -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" -j 2 | { grep -v "^\[\|^ninja: no work" || true; }

export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp
mkdir -p "$build/artifacts"
status=0
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t"
  log=$build/$t.log
  if "$build/${t}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$build/artifacts/$t-" "$build/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    printf '[hdmlp] fuzz %-12s %8s runs in %s s, no finding\n' "$t" "${runs:-?}" "$seconds" >&2
  else
    status=1
    grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$log" | head -8 >&2 || tail -20 "$log" >&2
    echo "[hdmlp] fuzz $t FAILED (log: $log): fix the bug, then add the input from $build/artifacts to tests/fuzz/corpus/$t/" >&2
  fi
done
exit $status
