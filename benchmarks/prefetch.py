"""Clairvoyant prefetching over a slow store, side by side.

Every system reads the same ImageNet-like folder through the same slow
storage (a per-file latency and a per-reader bandwidth, injected the same
way into all of them) for several epochs:

  hdmlp, prefetch on    the default storage hierarchy (staging + RAM class)
  hdmlp, prefetch off   only the staging buffer: every epoch from the store
  torch DataLoader      a Dataset reading the files, num_workers 0 and 2

Prints seconds per epoch and the bytes each system read from the slow store
over the job, and writes JSON/Markdown with --json/--markdown.

    python benchmarks/prefetch.py --images 600 --epochs 3 --latency-ms 5 --mbps 50
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

if __package__ in (None, ""):  # run as a script: benchmarks/_path.py
    import _path  # noqa: F401
from benchmarks.lab import machine  # noqa: E402

import torch
from torch.utils.data import DataLoader, Dataset

import hdmlp
from hdmlp.datasets import make_image_folder
from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder


class SlowFileDataset(Dataset):
    def __init__(self, samples, latency_s, mbps):
        self.samples, self.latency_s, self.mbps = samples, latency_s, mbps

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, label = self.samples[i]
        start = time.perf_counter()
        time.sleep(self.latency_s)
        with open(path, "rb") as f:
            data = f.read()
        if self.mbps:
            left = len(data) / (self.mbps * 1e6) - (time.perf_counter() - start - self.latency_s)
            if left > 0:
                time.sleep(left)
        return torch.frombuffer(bytearray(data), dtype=torch.uint8), label


def collate(batch):
    return [b for b, _ in batch], torch.tensor([lbl for _, lbl in batch])


def epoch_seconds(loader, epochs):
    """Seconds of each full pass over the loader."""
    times = []
    for _ in range(epochs):
        t = time.perf_counter()
        for _ in loader:
            pass
        times.append(time.perf_counter() - t)
    return times


def run_torch(samples, total_bytes, args, workers):
    loader = DataLoader(SlowFileDataset(samples, args.latency_ms / 1000, args.mbps), batch_size=args.batch_size,
                        shuffle=True, num_workers=workers, collate_fn=collate, persistent_workers=workers > 0)
    return epoch_seconds(loader, args.epochs), total_bytes * args.epochs


def run_hdmlp(root, args, config):
    storage = hdmlp.ThrottledStorage(latency_s=args.latency_ms / 1000, mbps=args.mbps)
    t0 = time.perf_counter()
    job = hdmlp.Job(root, args.batch_size, args.epochs, seed=0, config_path=config, storage=storage)
    startup = time.perf_counter() - t0
    times = epoch_seconds(HDMLPDataLoader(HDMLPImageFolder(root, job)), args.epochs)
    times[0] += startup
    m = job.metrics()
    job.close()
    return times, m["pfs_bytes"]  # every read of the slow store: staging and prefetching


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--images", type=int, default=600)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--latency-ms", type=float, default=5.0)
    p.add_argument("--mbps", type=float, default=50.0, help="per-reader bandwidth of the slow store")
    p.add_argument("--json")
    p.add_argument("--markdown")
    args = p.parse_args()
    recorder = machine.LoadRecorder()  # first: the load before this benchmark does anything

    root = os.path.join(hdmlp.user_cache_dir(), "datasets", f"bench-{args.images}-{args.classes}")
    make_image_folder(root, num_images=args.images, num_classes=args.classes, seed=0)
    with hdmlp.Job(root, 1, 1) as probe:
        samples = probe.samples
    total = sum(os.path.getsize(s) for s, _ in samples)

    with tempfile.TemporaryDirectory() as tmp:
        off = os.path.join(tmp, "off.cfg")
        with open(off, "w") as f:
            f.write("storage_classes = ( { capacity = 256; threads = 4; } );\n")
        on = os.path.join(tmp, "on.cfg")
        with open(on, "w") as f:
            f.write("storage_classes = ( { capacity = 256; threads = 4; },\n"
                    "  { backend = \"memory\"; capacity = 2048; threads = 2; } );\n")
        rows = {}
        for name, config in (("hdmlp, prefetch on (RAM class)", on), ("hdmlp, prefetch off (staging only)", off)):
            with recorder.run(name):
                rows[name] = run_hdmlp(root, args, config)
        for w in (0, 2):
            with recorder.run(f"torch DataLoader num_workers={w}"):
                rows[f"torch DataLoader num_workers={w}"] = run_torch(samples, total, args, w)
    load = recorder.finish()

    print(f"{len(samples)} files, {total / 1e6:.0f} MB; slow store: {args.latency_ms} ms per file, "
          f"{args.mbps} MB/s per reader; batch {args.batch_size}; {os.cpu_count()} cores")
    header = "system".ljust(36) + "".join(f"epoch {e} s".rjust(11) for e in range(args.epochs)) + "   store MB"
    print(header)
    for name, (times, read) in rows.items():
        print(name.ljust(36) + "".join(f"{t:11.2f}" for t in times) + f"{read / 1e6:11.1f}")
    on_t, off_t = rows["hdmlp, prefetch on (RAM class)"][0], rows["hdmlp, prefetch off (staging only)"][0]
    best_torch = min((r[0] for k, r in rows.items() if k.startswith("torch")), key=sum)
    print(f"\nfirst epoch, on / off: {on_t[0] / off_t[0]:.2f}x the time;  later epochs, off / on: "
          f"{sum(off_t[1:]) / max(sum(on_t[1:]), 1e-9):.1f}x faster;  whole job vs best DataLoader: "
          f"{sum(best_torch) / sum(on_t):.1f}x faster")
    print(machine.summary_line(load))
    machine.print_warnings(load)
    result = {"args": vars(args), "dataset_bytes": total, "load": load,
              "systems": {k: {"epoch_seconds": t, "store_bytes": b} for k, (t, b) in rows.items()}}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(f"<!-- generated by: python benchmarks/prefetch.py {' '.join(sys.argv[1:])} -->\n")
            f.write(f"{len(samples)} files, {total / 1e6:.0f} MB; slow store {args.latency_ms} ms/file, "
                    f"{args.mbps} MB/s per reader; {os.cpu_count()} cores.  \n")
            f.write("".join(line + "  \n" for line in machine.report_lines(load)) + "\n")
            f.write("| system | " + " | ".join(f"epoch {e} s" for e in range(args.epochs)) + " | MB from the store |\n")
            f.write("|---|" + "---:|" * (args.epochs + 1) + "\n")
            for name, (times, read) in rows.items():
                f.write(f"| {name} | " + " | ".join(f"{t:.2f}" for t in times) + f" | {read / 1e6:.1f} |\n")


if __name__ == "__main__":
    main()
