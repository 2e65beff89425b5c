"""The slim wheel against the development build: the same training chain, side by side.

    python benchmarks/wheel_speed.py --other /tmp/slim-venv/bin/python [--other NAME=PYTHON ...] [--images 2000] [--rounds 5]

Runs hdmlp's C++ ImageNet training chain (ImgDecode, RandomResizedCrop(224), flip, ToTensor,
Normalize) over one generated folder of JPEGs (files in the page cache), once per round in each
interpreter: this one (the development build in .venv, linked against Debian's shared
OpenCV, libjpeg-turbo, ...) and ``--other`` (a virtual environment with a wheel from
``scripts/dev.sh wheels`` installed: everything built in bullseye and linked statically).
Rounds alternate A, B, B, A, ... so that drift in the machine's load falls on both. Reports
each side's images/s per round and its CPU seconds per 1,000 images (user + system of the whole
process, all epochs: steadier than images/s when other work shares the machine), the medians and
their ratios, the load average, and writes
``--json`` (default benchmarks/results/wheel_speed.json) and a Markdown table beside it.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
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
print(json.dumps({"rates": rates, "images": n, "file": hdmlp.__file__, "build": hdmlp.build_info()}))
"""


def run(python: str, data: str, threads: int, epochs: int) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([python, "-c", WORKER, data, str(threads), str(epochs)], capture_output=True, text=True,
                         check=True, cwd=tempfile.gettempdir())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    result["cpu_per_1000"] = cpu / (result["images"] * epochs) * 1000
    result["rate"] = statistics.median(result["rates"][1:] or result["rates"])  # the first epoch warms up
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--other", required=True, action="append",
                    help="python of the environment with the wheel installed; repeat as NAME=PYTHON for more sides")
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
    sides = {"development build": sys.executable}
    for i, other in enumerate(args.other):
        name, _, python = other.rpartition("=") if "=" in other else ("slim wheel" if i == 0 else f"other {i}", "", other)
        sides[name] = python
    rounds: dict[str, list[float]] = {k: [] for k in sides}
    cpu: dict[str, list[float]] = {k: [] for k in sides}
    info: dict[str, dict] = {}
    load_before = os.getloadavg()
    order = list(sides)
    for r in range(args.rounds):
        for name in (order if r % 2 == 0 else order[::-1]):
            res = run(sides[name], data, args.threads, args.epochs)
            rounds[name].append(res["rate"])
            cpu[name].append(res["cpu_per_1000"])
            info[name] = {"python": sides[name], "hdmlp": res["file"], "build": res["build"]}
            print(f"round {r}: {name:18s} {res['rate']:8.1f} images/s, {res['cpu_per_1000']:.3f} CPU s per 1,000",
                  flush=True)
    load_after = os.getloadavg()
    med = {k: statistics.median(v) for k, v in rounds.items()}
    cpu_med = {k: statistics.median(v) for k, v in cpu.items()}
    base = "development build"
    ratios = {k: med[k] / med[base] for k in sides if k != base}
    # CPU per image, as a speed: development build's CPU / this side's (above 1: this side is cheaper).
    cpu_ratios = {k: cpu_med[base] / cpu_med[k] for k in sides if k != base}
    first = next(iter(ratios))
    ratio = ratios[first]
    result = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": platform.node(), "cpus": os.cpu_count(),
              "images": args.images, "threads": args.threads, "epochs_per_run": args.epochs,
              "load_before": load_before, "load_after": load_after, "rounds": rounds, "median": med,
              "cpu_per_1000": cpu, "cpu_per_1000_median": cpu_med, "ratio_slim_to_dev": ratio,
              "ratios_images_per_s": ratios, "ratios_by_cpu": cpu_ratios, "sides": info,
              "command": "python benchmarks/wheel_speed.py " + shlex.join(sys.argv[1:])}
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    lines = ["| build | images/s per round | median | CPU s per 1,000 images per round | median | "
             "against the development build (images/s; by CPU) |", "|---|---|---|---|---|---|"]
    for k, v in rounds.items():
        vs = "1" if k == base else f"{ratios[k]:.3f}; {cpu_ratios[k]:.3f}"
        lines.append(f"| {k} | {', '.join(f'{x:.0f}' for x in v)} | {med[k]:.0f} | "
                     f"{', '.join(f'{x:.3f}' for x in cpu[k])} | {cpu_med[k]:.3f} | {vs} |")
    lines += ["", f"{first} / development build: **{ratio:.3f}** in images/s, **{cpu_ratios[first]:.3f}** by CPU per image "
              f"({args.images} JPEGs, {args.threads} threads, training chain, batch 64; load average "
              f"{load_before[0]:.2f} before, {load_after[0]:.2f} after).",
              "", f"Command: `{result['command']}`"]
    with open(os.path.splitext(args.json)[0] + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
