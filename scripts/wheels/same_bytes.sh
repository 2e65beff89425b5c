#!/usr/bin/env bash
# scripts/dev.sh same-bytes WHEEL... : do these wheels give the same batches? (docs/transforms.md,
# "The same bytes on every CPU")
#
# Generates one folder of 200 ImageNet-like JPEGs (hdmlp.datasets, seed 36) with the development
# .venv, then runs scripts/wheels/same_bytes.py over it with each wheel, installed in a fresh test
# chroot of its CPython's suite (cp311: bookworm, cp313: trixie, cp314: sid) and architecture (an
# aarch64 wheel in an arm64 chroot under qemu-user, scripts/wheels/binfmt.sh), and with the
# development build itself; then compares every run's per-batch hashes of the training, validation
# and timm chains over 2 epochs, the fast-decode chain and the 18 resize chains, and each run's
# portable code against its vector kernels. Writes OUT/same_bytes.json and OUT/same_bytes.md
# (OUT: HDMLP_SAME_BYTES_OUT, default benchmarks/results); exits 1 if anything differs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
HERE=$ROOT/scripts/wheels
source "$HERE/common.sh"
source "$HERE/arch.sh"
main() {
  [[ $# -ge 1 ]] || { echo "usage: scripts/dev.sh same-bytes WHEEL..." >&2; exit 2; }
  OUT=$(realpath -m "${HDMLP_SAME_BYTES_OUT:-$ROOT/benchmarks/results}")
  WORK=$CACHE/same-bytes
  DATA=$WORK/data
  mkdir -p "$WORK/runs" "$OUT"
  rm -f "$WORK"/runs/*.json
  declare -A SUITE=([cp311]=bookworm [cp313]=trixie [cp314]=sid)

  log "the image folder: $DATA (200 JPEGs, and 40 other files: PNG, WebP, TIFF, BMP, PPM, grayscale, CMYK)"
  (cd /tmp && "$ROOT/.venv/bin/python" -c 'import sys; from hdmlp.datasets import make_image_folder as m; m(sys.argv[1], num_images=200, num_classes=8, seed=36, threads=2)' "$DATA")
  # A class of other formats, written from the first 40 JPEGs by Pillow (the test extra's), once.
  if [[ ! -f $DATA/formats/.done ]]; then
    (cd /tmp && "$ROOT/.venv/bin/python" - "$DATA" <<'PY'
import pathlib, sys
from PIL import Image
root = pathlib.Path(sys.argv[1])
out = root / "formats"
out.mkdir(exist_ok=True)
kinds = [("png", "RGB", {}), ("png", "L", {}), ("png", "RGBA", {}), ("webp", "RGB", {"quality": 80}),
         ("webp", "RGB", {"lossless": True}), ("tiff", "RGB", {"compression": "tiff_lzw"}), ("bmp", "RGB", {}),
         ("ppm", "RGB", {}), ("jpg", "L", {"quality": 90}), ("jpg", "CMYK", {"quality": 90}),
         ("jpg", "RGB", {"quality": 92, "progressive": True}), ("jpg", "RGB", {"quality": 95, "subsampling": 0})]
for i, src in enumerate(sorted(root.glob("n*/*.JPEG"))[:40]):
    ext, mode, opts = kinds[i % len(kinds)]
    img = Image.open(src).convert(mode)
    img.save(out / f"{i:03d}_{mode}.{ext}", **opts)
(out / ".done").write_text("40\n")
PY
    )
  fi

  start=$SECONDS
  runs=()
  log "same_bytes.py with the development build ($ROOT/.venv)"
  (cd /tmp && "$ROOT/.venv/bin/python" "$HERE/same_bytes.py" run "$DATA" "$WORK/runs/0-development-build.json")
  runs+=("$WORK/runs/0-development-build.json")
  rc=0
  for wheel in "$@"; do
    name=$(basename "$wheel")
    tag=$(echo "$name" | cut -d- -f3)
    suite=${SUITE[$tag]:-}
    [[ -n $suite ]] || { echo "same-bytes: no test suite for $name (cp311, cp313, cp314)" >&2; exit 2; }
    json=$WORK/runs/${name%.whl}.json
    "$HERE/test.sh" --same-bytes "$DATA" "$json" "$wheel" "$suite" || rc=$?
    [[ -f $json ]] && runs+=("$json")
  done
  [[ $rc -eq 0 ]] || log "a run failed (exit $rc); comparing those that finished"
  compare=$("$ROOT/.venv/bin/python" "$HERE/same_bytes.py" compare "${runs[@]}") || rc=1
  echo "$compare"
  "$ROOT/.venv/bin/python" - "$OUT" "$((SECONDS - start))" "$compare" "${runs[@]}" <<'EOF'
import json, os, sys, time
out, seconds, compare, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
runs = []
for p in paths:
    with open(p) as f:
        r = json.load(f)
    runs.append({"run": os.path.basename(p)[:-5], "machine": r["machine"], "python": r["python"],
                 "simd": r["build"].get("simd"), "portable_equal": r.get("portable_equal"),
                 "batches": sum(len(v) for v in r["chains"].values()), "seconds": r.get("seconds"),
                 "chains": r["chains"]})
result = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "load_average": os.getloadavg(), "seconds": seconds,
          "verdict": compare.strip().splitlines()[-1], "compare": compare, "runs": runs}
with open(os.path.join(out, "same_bytes.json"), "w") as f:
    json.dump(result, f, indent=1)
base = runs[0]["chains"]
lines = ["# The same bytes on every CPU", "",
         f"`scripts/dev.sh same-bytes` on {result['date']} (load average {result['load_average'][0]:.1f}, "
         f"{seconds} s): {result['verdict']}", "",
         "| run | machine | Python | kernels | portable code equal | batches | equal to the first run |",
         "|---|---|---|---|---|---|---|"]
for r in runs:
    same = "yes" if r["chains"] == base else "NO"
    lines.append(f"| {r['run']} | {r['machine']} | {r['python']} | {r['simd']} | {r['portable_equal']} | "
                 f"{r['batches']} | {same} |")
lines += ["", "Chains (scripts/wheels/same_bytes.py): " + ", ".join(n for n in base if not n.startswith("filters/"))
          + f", and {sum(n.startswith('filters/') for n in base)} resize chains (6 filters x 3 sizes).", ""]
with open(os.path.join(out, "same_bytes.md"), "w") as f:
    f.write("\n".join(lines))
EOF
  log "same-bytes: $OUT/same_bytes.md"
  exit $rc
}

main "$@"; exit  # one line: an edit of this file while it runs cannot run more of it
