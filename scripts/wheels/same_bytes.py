"""The same bytes on every CPU: per-batch hashes of hdmlp's transform chains, to compare machines.

    python same_bytes.py run DATA OUT.json [--epochs 2] [--batch-size 32]
    python same_bytes.py compare A.json B.json [...]

``run`` makes hdmlp Jobs over the image folder DATA, seed 2024, and records the SHA-256 of
every batch (its samples' bytes and its labels) of each chain, epoch by epoch:

- ``train``: ImgDecode, RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize;
- ``val``: ImgDecode, Resize(256), CenterCrop(224), ToTensor, Normalize;
- ``timm``: ImgDecode, RandomResizedCrop(224, bicubic), RandomHorizontalFlip, RandAugment(2, 9),
  ToTensor, Normalize, RandomErasing(0.25, value="random") (timm's rand-m9 recipe);
- ``train-fast``: the training chain with ImgDecode(fast=True) (libjpeg-turbo's fast IDCT);
- ``filters``: Resize to 3 sizes with each of PIL's six filters, ToUint8 (the resampler's kernels).

It then runs the same in a child process with HDMLP_SIMD=portable and records whether the
portable code gave the same hashes as the CPU's vector kernels (AVX2, NEON). ``compare`` checks
that every file holds the same hashes, and prints the first differing batches; it exits 1 if any
differ. ``scripts/dev.sh same-bytes`` runs ``run`` in each wheel's test chroot (aarch64 ones under
emulation) on one folder and then ``compare``. Standard library, NumPy and hdmlp only.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import time

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
SEED = 2024


def chains() -> dict:
    import hdmlp.transforms as T
    norm = T.Normalize(MEAN, STD)
    out = {
        "train": [T.ImgDecode(), T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), norm],
        "val": [T.ImgDecode(), T.Resize(256), T.CenterCrop(224), T.ToTensor(), norm],
        "timm": [T.ImgDecode(), T.RandomResizedCrop(224, interpolation=3), T.RandomHorizontalFlip(),
                 T.RandAugment(num_ops=2, magnitude=9), T.ToTensor(), norm, T.RandomErasing(p=0.25, value="random")],
        "train-fast": [T.ImgDecode(fast=True), T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), norm],
    }
    for f, name in enumerate(["nearest", "lanczos", "bilinear", "bicubic", "box", "hamming"]):
        for size in ((97, 61), (224, 224), (411, 333)):
            out[f"filters/{name}/{size[0]}x{size[1]}"] = [T.ImgDecode(), T.Resize(size, interpolation=f), T.ToUint8()]
    return out


def hash_chain(data: str, chain: list, epochs: int, batch_size: int, limit: int | None) -> list[list]:
    import numpy as np
    import hdmlp
    import hdmlp.numpy as hnp
    rows = []
    with hdmlp.Job(data, batch_size=batch_size, epochs=epochs, transforms=chain, seed=SEED) as job:
        for epoch in range(epochs):
            for b, (samples, labels) in enumerate(hnp.batches(job, epoch)):
                if limit is not None and b >= limit:
                    break  # the job ends the epoch cleanly
                h = hashlib.sha256(np.ascontiguousarray(samples).tobytes())
                h.update(np.asarray(labels, dtype=np.int64).tobytes())
                rows.append([epoch, b, h.hexdigest()])
    return rows


def run_all(data: str, epochs: int, batch_size: int) -> dict:
    import hdmlp
    out = {}
    for name, chain in chains().items():
        t = time.perf_counter()
        # The resize sweep's 18 chains read the first 2 batches of one epoch each.
        sweep = name.startswith("filters/")
        out[name] = hash_chain(data, chain, 1 if sweep else epochs, batch_size, 2 if sweep else None)
        print(f"  {name}: {len(out[name])} batches in {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
    return {"hdmlp": hdmlp.__version__, "build": hdmlp.build_info(), "chains": out}


def cmd_run(args: argparse.Namespace) -> int:
    t = time.perf_counter()
    mine = run_all(args.data, args.epochs, args.batch_size)
    result = {"machine": platform.machine(), "python": platform.python_version(), "data": args.data,
              "epochs": args.epochs, "batch_size": args.batch_size, "seed": SEED, **mine}
    if os.environ.get("HDMLP_SIMD") != "portable" and not args.no_portable:
        print("the same with HDMLP_SIMD=portable:", file=sys.stderr, flush=True)
        portable_json = args.out + ".portable"
        subprocess.run([sys.executable, __file__, "run", args.data, portable_json, "--epochs", str(args.epochs),
                        "--batch-size", str(args.batch_size), "--no-portable"],
                       env=dict(os.environ, HDMLP_SIMD="portable"), check=True)
        with open(portable_json) as f:
            portable = json.load(f)
        os.remove(portable_json)
        result["portable_kernels"] = portable["build"].get("simd")
        result["portable_equal"] = portable["chains"] == mine["chains"]
    result["seconds"] = round(time.perf_counter() - t, 1)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    n = sum(len(v) for v in mine["chains"].values())
    print(f"{platform.machine()}: {n} batches hashed, kernels {mine['build'].get('simd')}"
          + (f", portable code equal: {result['portable_equal']}" if "portable_equal" in result else "")
          + f" ({result['seconds']} s)")
    return 0 if result.get("portable_equal", True) else 1


def cmd_compare(args: argparse.Namespace) -> int:
    runs = []
    for path in args.files:
        with open(path) as f:
            runs.append((path, json.load(f)))
    base_path, base = runs[0]
    bad = 0
    for path, other in runs[1:]:
        for name, rows in base["chains"].items():
            theirs = other["chains"].get(name)
            if theirs == rows:
                continue
            bad += 1
            diff = [(a, b) for a, b in zip(rows, theirs or [])] if theirs else []
            first = next(((a[0], a[1]) for a, b in diff if a != b), None)
            print(f"DIFFER {name}: {base_path} ({base['machine']}) vs {path} ({other['machine']}); "
                  f"{sum(a != b for a, b in diff)} of {len(rows)} batches differ, first at (epoch, batch) {first}")
    for path, run in runs:
        if run.get("portable_equal") is False:
            bad += 1
            print(f"DIFFER {path}: the portable code and the {run['build'].get('simd')} kernels")
    total = sum(len(v) for v in base["chains"].values())
    machines = ", ".join(f"{r['machine']} ({r['build'].get('simd')})" for _, r in runs)
    print(("ALL EQUAL" if bad == 0 else "NOT EQUAL") + f": {len(base['chains'])} chains, {total} batches, on {machines}")
    return 0 if bad == 0 else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("data")
    r.add_argument("out")
    r.add_argument("--epochs", type=int, default=2)
    r.add_argument("--batch-size", type=int, default=32)
    r.add_argument("--no-portable", action="store_true", help=argparse.SUPPRESS)
    c = sub.add_parser("compare")
    c.add_argument("files", nargs="+")
    args = ap.parse_args()
    return cmd_run(args) if args.cmd == "run" else cmd_compare(args)


if __name__ == "__main__":
    sys.exit(main())
