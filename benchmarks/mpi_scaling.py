"""hdmlp on 1, 2 and 4 MPI ranks against DataLoader + DistributedSampler, side by side.

Every system reads the same ImageNet-like folder through the same slow store
(a per-file latency injected the same way into all of them) for a few
epochs, each rank delivering raw bytes. Reports images/s over all ranks, the
bytes read from the store over the job (all ranks), and for hdmlp the share
of reads by source.

    python benchmarks/mpi_scaling.py --images 400 --epochs 3 --latency-ms 4

(Ranks are oversubscribed on small machines; the store latency, not the
CPU, dominates.)
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

if __package__ in (None, ""):  # run as a script: benchmarks/_path.py
    import _path  # noqa: F401
from benchmarks.lab import machine  # noqa: E402


def worker(args):
    import torch
    from torch.utils.data import DataLoader, Dataset
    from torch.utils.data.distributed import DistributedSampler

    import hdmlp

    if args.worker == "hdmlp":
        job = hdmlp.Job(args.data, args.batch_size, args.epochs, seed=0,
                        storage=hdmlp.ThrottledStorage(latency_s=args.latency_ms / 1000))
        rank, world = job.rank, job.world_size
        t = time.perf_counter()
        n = 0
        for e in range(args.epochs):
            for ids, _, _ in job.epoch_batches(e):
                n += len(ids)
        seconds = time.perf_counter() - t
        m = job.metrics()
        sources = {}
        for ep in m["epochs"]:
            for k, v in ep["reads"].items():
                sources[k] = sources.get(k, 0) + v["count"]
        out = {"samples": n, "seconds": seconds, "store_bytes": m["pfs_bytes"], "sources": sources}
        job.close()
    else:
        rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
        world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
        samples = json.load(open(args.samples_json))

        class Slow(Dataset):
            def __len__(self):
                return len(samples)

            def __getitem__(self, i):
                time.sleep(args.latency_ms / 1000)
                with open(samples[i][0], "rb") as f:
                    return torch.frombuffer(bytearray(f.read()), dtype=torch.uint8), samples[i][1]

        sampler = DistributedSampler(Slow(), num_replicas=world, rank=rank, shuffle=True, seed=0)
        loader = DataLoader(Slow(), batch_size=max(1, args.batch_size // world), sampler=sampler,
                            collate_fn=lambda b: ([x for x, _ in b], [y for _, y in b]))
        t = time.perf_counter()
        n = 0
        nbytes = 0
        for e in range(args.epochs):
            sampler.set_epoch(e)
            for xs, _ in loader:
                n += len(xs)
                nbytes += sum(x.numel() for x in xs)
        out = {"samples": n, "seconds": time.perf_counter() - t, "store_bytes": nbytes, "sources": {"pfs": n}}
    with open(os.path.join(args.out, f"{args.worker}-{rank}.json"), "w") as f:
        json.dump(out, f)


def launch(system, n, args, out, samples_json):
    cmd = [shutil.which("mpirun") or "mpirun", "--oversubscribe", "-np", str(n)]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    cmd += [sys.executable, __file__, "--worker", system, "--data", args.data, "--out", out,
            "--samples-json", samples_json, "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
            "--latency-ms", str(args.latency_ms)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    ranks = [json.load(open(os.path.join(out, f"{system}-{r}.json"))) for r in range(n)]
    samples = sum(r["samples"] for r in ranks)
    seconds = max(r["seconds"] for r in ranks)
    sources = {}
    for r in ranks:
        for k, v in r["sources"].items():
            sources[k] = sources.get(k, 0) + v
    return {"img_per_s": samples / seconds, "store_bytes": sum(r["store_bytes"] for r in ranks), "sources": sources}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--images", type=int, default=400)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--latency-ms", type=float, default=4.0)
    p.add_argument("--ranks", default="1,2,4")
    p.add_argument("--json")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--samples-json", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)

    recorder = machine.LoadRecorder()  # first: the load before this benchmark does anything
    import hdmlp
    from hdmlp.datasets import make_image_folder

    args.data = os.path.join(hdmlp.user_cache_dir(), "datasets", f"bench-{args.images}-10")
    make_image_folder(args.data, num_images=args.images, num_classes=10, seed=0)
    with hdmlp.Job(args.data, 1, 1) as probe:
        samples = probe.samples
    total = sum(os.path.getsize(s) for s, _ in samples)
    results = {}
    with tempfile.TemporaryDirectory() as out:
        samples_json = os.path.join(out, "samples.json")
        with open(samples_json, "w") as f:
            json.dump(samples, f)
        for n in map(int, args.ranks.split(",")):
            for system in ("hdmlp", "torch"):
                with recorder.run(f"{system} x{n}"):
                    results[f"{system} x{n}"] = launch(system, n, args, out, samples_json)
                results[f"{system} x{n}"]["load"] = recorder.last(f"{system} x{n}")
    load = recorder.finish()
    print(f"{len(samples)} files, {total / 1e6:.0f} MB, {args.epochs} epochs, {args.latency_ms} ms per file; "
          f"{os.cpu_count()} cores (ranks oversubscribed)")
    print(f"{'system':34s} {'img/s':>8s} {'store MB':>9s} {'x dataset':>9s}  reads by source")
    for name, r in results.items():
        label = name.replace("torch", "DataLoader+DistributedSampler").replace(" x", ", ranks ")
        total_reads = sum(r["sources"].values())
        shares = ", ".join(f"{k} {v / total_reads:.0%}" for k, v in sorted(r["sources"].items()))
        print(f"{label:34s} {r['img_per_s']:8.0f} {r['store_bytes'] / 1e6:9.1f} {r['store_bytes'] / total:9.2f}  {shares}")
    for n in map(int, args.ranks.split(",")):
        print(f"ranks {n}: hdmlp / DataLoader = {results[f'hdmlp x{n}']['img_per_s'] / results[f'torch x{n}']['img_per_s']:.1f}x")
    print(machine.summary_line(load))
    machine.print_warnings(load)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"dataset_bytes": total, "load": load, "args": {k: v for k, v in vars(args).items() if v is not None},
                       "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
