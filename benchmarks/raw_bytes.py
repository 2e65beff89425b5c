"""Raw-bytes loading: hdmlp against torch.utils.data.DataLoader, side by side.

Both read the same ImageNet-like folder and deliver each file's bytes as a
uint8 tensor with its label; the DataLoader runs over a Dataset that reads
the files itself, with num_workers 0, 1 and 2. Every system reads every
epoch in full. Two storage settings:

  warm   the folder is in the page cache (what a local SSD or RAM gives)
  slow   every file open costs --latency-ms more (a remote file system's
         per-file latency), injected the same way into both systems

Prints images/s per system and the ratio of hdmlp to the best DataLoader
setting, and writes the table as JSON with --json.

    python benchmarks/raw_bytes.py --images 2000 --epochs 2
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

if __package__ in (None, ""):  # run as a script: benchmarks/_path.py
    import _path  # noqa: F401
from benchmarks.lab import machine  # noqa: E402

import torch
from torch.utils.data import DataLoader, Dataset

import hdmlp
from hdmlp.datasets import make_image_folder
from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder


class RawFileDataset(Dataset):
    """The baseline: ImageFolder's file list, each item read whole."""

    def __init__(self, samples, latency_s: float):
        self.samples = samples
        self.latency_s = latency_s

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, label = self.samples[i]
        if self.latency_s:
            time.sleep(self.latency_s)
        with open(path, "rb") as f:
            data = f.read()
        return torch.frombuffer(bytearray(data), dtype=torch.uint8), label


def collate(batch):
    return [b for b, _ in batch], torch.tensor([lbl for _, lbl in batch], dtype=torch.int64)


def run_torch(samples, batch_size, epochs, workers, latency_s):
    ds = RawFileDataset(samples, latency_s)
    loader = DataLoader(ds, batch_size=batch_size, shuffle=True, num_workers=workers, collate_fn=collate,
                        persistent_workers=workers > 0)
    times = []
    for _ in range(epochs):
        t = time.perf_counter()
        n = sum(len(lbl) for _, lbl in loader)
        times.append(time.perf_counter() - t)
        assert n == len(samples)
    return times


def run_hdmlp(root, batch_size, epochs, latency_s, config):
    storage = hdmlp.ThrottledStorage(latency_s=latency_s) if latency_s else None
    t0 = time.perf_counter()
    job = hdmlp.Job(root, batch_size, epochs, seed=0, config_path=config, storage=storage)
    startup = time.perf_counter() - t0
    loader = HDMLPDataLoader(HDMLPImageFolder(root, job))
    times = []
    for _ in range(epochs):
        t = time.perf_counter()
        n = sum(len(lbl) for _, lbl in loader)
        times.append(time.perf_counter() - t)
        assert n == len(job)
    stall = sum(e["stall_seconds"] for e in job.metrics()["epochs"])
    job.close()
    times[0] += startup
    return times, stall


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--images", type=int, default=2000)
    p.add_argument("--classes", type=int, default=20)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--latency-ms", type=float, default=2.0, help="per-file latency of the 'slow' setting")
    p.add_argument("--settings", default="warm,slow")
    p.add_argument("--config", default=None, help="hdmlp config (default: hdmlp's default.cfg)")
    p.add_argument("--data", default=None)
    p.add_argument("--json", default=None, help="write the results as JSON here")
    p.add_argument("--markdown", default=None, help="write the results as a Markdown table here")
    args = p.parse_args()
    recorder = machine.LoadRecorder()  # first: the load before this benchmark does anything

    root = args.data or os.path.join(hdmlp.user_cache_dir(), "datasets", f"bench-{args.images}-{args.classes}")
    make_image_folder(root, num_images=args.images, num_classes=args.classes, seed=0)
    with hdmlp.Job(root, 1, 1) as probe:
        samples, total_mb = probe.samples, sum(os.path.getsize(s) for s, _ in probe.samples) / 1e6
    # Warm the page cache once so the first system measured is not penalised.
    for path, _ in samples:
        with open(path, "rb") as f:
            f.read()

    results = {"machine": f"{platform.node()} {os.cpu_count()} cores", "images": len(samples),
               "dataset_mb": round(total_mb, 1), "batch_size": args.batch_size, "epochs": args.epochs,
               "settings": {}}
    print(f"{len(samples)} files, {total_mb:.0f} MB, batch {args.batch_size}, {args.epochs} epochs, "
          f"{os.cpu_count()} cores")
    for setting in args.settings.split(","):
        latency = args.latency_ms / 1000 if setting == "slow" else 0.0
        rows = {}
        for workers in (0, 1, 2):
            with recorder.run(f"{setting}: torch w{workers}"):
                times = run_torch(samples, args.batch_size, args.epochs, workers, latency)
            rows[f"torch DataLoader num_workers={workers}"] = len(samples) * args.epochs / sum(times)
        with recorder.run(f"{setting}: hdmlp"):
            times, stall = run_hdmlp(root, args.batch_size, args.epochs, latency, args.config)
        rows["hdmlp"] = len(samples) * args.epochs / sum(times)
        best_name = max((k for k in rows if k != "hdmlp"), key=rows.get)
        ratio = rows["hdmlp"] / rows[best_name]
        print(f"\n[{setting}{f', {args.latency_ms} ms per file' if latency else ''}]")
        for name, ips in rows.items():
            print(f"  {name:34s} {ips:9.0f} img/s")
        print(f"  hdmlp / best DataLoader ({best_name}): {ratio:.2f}x   (hdmlp stall {stall:.2f} s)")
        results["settings"][setting] = {"img_per_s": rows, "ratio_vs_best": ratio, "best_baseline": best_name,
                                        "latency_ms": latency * 1000}
    results["load"] = recorder.finish()
    print(machine.summary_line(results["load"]))
    machine.print_warnings(results["load"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(to_markdown(results, " ".join(["python", "benchmarks/raw_bytes.py"] + sys.argv[1:])))


def to_markdown(results, command):
    lines = [f"<!-- generated by: {command} -->",
             f"Machine: {results['machine']}; {results['images']} files, {results['dataset_mb']} MB, "
             f"batch {results['batch_size']}, {results['epochs']} epochs per system.  "]
    lines += [line + "  " for line in machine.report_lines(results["load"])] + ["",
             "| setting | system | img/s | vs best DataLoader |", "|---|---|---:|---:|"]
    for setting, r in results["settings"].items():
        best = r["img_per_s"][r["best_baseline"]]
        label = setting + (f" ({r['latency_ms']:g} ms/file)" if r["latency_ms"] else "")
        for name, ips in r["img_per_s"].items():
            lines.append(f"| {label} | {name} | {ips:.0f} | {ips / best:.2f}x |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
