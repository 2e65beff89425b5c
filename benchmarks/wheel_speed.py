"""The slim wheel against the development build: the same training chain, side by side.

    python benchmarks/wheel_speed.py --other /tmp/slim-venv/bin/python [--images 2000] [--rounds 5]

Runs hdmlp's C++ ImageNet training chain (ImgDecode, RandomResizedCrop(224), flip, ToTensor,
Normalize) over one generated folder of JPEGs (files in the page cache), once per round in each
interpreter: this one (the development build in .venv, linked against Debian's shared
OpenCV, libjpeg-turbo, ...) and ``--other`` (a virtual environment with a wheel from
``scripts/dev.sh wheels`` installed: everything built in bullseye and linked statically).
Rounds alternate A, B, B, A, ... so that drift in the machine's load falls on both. Reports
each side's images/s per round, the medians and their ratio, the load average, and writes
``--json`` (default benchmarks/results/wheel_speed.json) and a Markdown table beside it.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

WORKER = r"""
import json, sys, time
import hdmlp, hdmlp.transforms as T
data, threads, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
chain = [T.ImgDecode(), T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
         T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]
rates = []
with hdmlp.Job(data, batch_size=64, epochs=epochs, transforms=chain, seed=1, num_workers=threads) as job:
    for epoch in range(epochs):
        n, t = 0, time.perf_counter()
        for batch in job.batches(epoch):
            n += len(batch.ids)
        rates.append(n / (time.perf_counter() - t))
print(json.dumps({"rates": rates, "file": hdmlp.__file__, "build": hdmlp.build_info()}))
"""


def run(python: str, data: str, threads: int, epochs: int) -> dict:
    out = subprocess.run([python, "-c", WORKER, data, str(threads), str(epochs)], capture_output=True, text=True,
                         check=True, cwd=tempfile.gettempdir())
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["rate"] = statistics.median(result["rates"][1:] or result["rates"])  # the first epoch warms up
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--other", required=True, help="python of the environment with the wheel installed")
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=3, help="epochs per run; the first is not counted")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--data", help="folder to use (default: generated under a temporary folder)")
    ap.add_argument("--json", default=os.path.join(HERE, "results", "wheel_speed.json"))
    args = ap.parse_args()

    from hdmlp.datasets import make_image_folder
    data = args.data or os.path.join(tempfile.gettempdir(), f"hdmlp-wheel-speed-{args.images}")
    make_image_folder(data, num_images=args.images, num_classes=10, seed=0)
    for root, _, files in os.walk(data):  # into the page cache
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                fh.read()
    sides = {"development build": sys.executable, "slim wheel": args.other}
    rounds: dict[str, list[float]] = {k: [] for k in sides}
    info: dict[str, dict] = {}
    load_before = os.getloadavg()
    order = list(sides)
    for r in range(args.rounds):
        for name in (order if r % 2 == 0 else order[::-1]):
            res = run(sides[name], data, args.threads, args.epochs)
            rounds[name].append(res["rate"])
            info[name] = {"python": sides[name], "hdmlp": res["file"], "build": res["build"]}
            print(f"round {r}: {name:18s} {res['rate']:8.1f} images/s", flush=True)
    load_after = os.getloadavg()
    med = {k: statistics.median(v) for k, v in rounds.items()}
    ratio = med["slim wheel"] / med["development build"]
    result = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": platform.node(), "cpus": os.cpu_count(),
              "images": args.images, "threads": args.threads, "epochs_per_run": args.epochs,
              "load_before": load_before, "load_after": load_after, "rounds": rounds, "median": med,
              "ratio_slim_to_dev": ratio, "sides": info,
              "command": "python benchmarks/wheel_speed.py " + " ".join(sys.argv[1:])}
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    lines = ["| build | images/s per round | median |", "|---|---|---|"]
    for k, v in rounds.items():
        lines.append(f"| {k} | {', '.join(f'{x:.0f}' for x in v)} | {med[k]:.0f} |")
    lines += ["", f"Slim wheel / development build: **{ratio:.3f}** ({args.images} JPEGs, {args.threads} threads, "
              f"training chain, batch 64; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after).",
              "", f"Command: `{result['command']}`"]
    with open(os.path.splitext(args.json)[0] + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
