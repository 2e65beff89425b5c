"""Dataset formats over the emulated PFS: an image folder against an hdmlp pack and WebDataset
tar shards of the same images, and HDF5 arrays against h5py in a DataLoader.

    .venv/bin/python benchmarks/formats.py images  [--images 1000] [--json ...] [--markdown ...]
    .venv/bin/python benchmarks/formats.py max-side [--images 500]
    .venv/bin/python benchmarks/formats.py hdf5    [--samples 512 --side 64]
    .venv/bin/python benchmarks/formats.py all

``images`` runs two links side by side in one run, each with every system in its own process
(first epoch, a cold store): the default link of ``python -m benchmarks`` (200 Mbit/s, 1 ms
each way: bandwidth-bound) and a link shaped like a busy metadata server (1 Gbit/s, 2.5 ms
each way, i.e. 5 ms per round trip; every open costs round trips). Systems: hdmlp reading the
folder, the pack and the tar shards, each as raw bytes and with the ImageNet training chain in
C++, and torchvision ``ImageFolder`` + ``DataLoader`` (2 workers) over the folder, raw and with
the same chain, as the baseline. hdmlp runs with its default configuration for every format.
Reported: images/s and MB/s of the first epoch, its share of the link's raw bandwidth
(one large file read sequentially by 4 readers through the same mount), and the files each
system opened on the store.

``max-side`` (a warm local store, CPU-bound): the training chain over the full-size folder
against the same chain over a pack made with ``hdmlp pack --max-side 256``.

``hdf5``: a CosmoFlow-like folder of one-sample HDF5 files (``full``: 4 x side^3 int16,
``unitPar``: 4 float32; made by :func:`make_cosmoflow`) over the emulated PFS, read by hdmlp
against h5py inside a ``DataLoader`` with 0, 1 and 2 workers.

``--pfs netfs`` (the default) or ``--pfs sshfs`` picks the emulated PFS's file server
(benchmarks/lab/pfs.py); the results before netfs existed were measured with sshfs.

The machine these run on is shared: ``uptime``'s load average is recorded with each run, and
numbers are provisional until re-measured on a quiet machine.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if __package__ in (None, ""):  # run as a script: benchmarks/_path.py
    import _path  # noqa: F401

from benchmarks.lab import machine  # noqa: E402
from benchmarks.lab import pfs, service  # noqa: E402

# name: (Mbit/s, ms added each way); a round trip costs twice the delay.
LINKS = {"bandwidth": (200.0, 1.0), "metadata": (1000.0, 2.5), "metadata-10ms": (1000.0, 5.0),
         "metadata-20ms": (1000.0, 10.0)}


def log(*a) -> None:
    print(*a, flush=True)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


# -- datasets ----------------------------------------------------------------------

def make_tars(folder: str, out: str, shard_mb: float) -> None:
    """The folder's samples as WebDataset shards of about shard_mb each (key.jpg + key.cls)."""
    import hdmlp._core as core

    if os.path.isdir(out) and os.path.exists(os.path.join(out, ".done")):
        return
    os.makedirs(out, exist_ok=True)
    src = core.Source(folder)
    shard, size, tar = 0, 0, None
    for i in range(len(src)):
        data = src.read(i)
        if tar is None or size + len(data) > shard_mb * 2**20:
            if tar is not None:
                tar.close()
            tar = tarfile.open(os.path.join(out, f"shard-{shard:03d}.tar"), "w")
            shard, size = shard + 1, 0
        key = f"{i:07d}"
        for name, payload in ((f"{key}.jpg", data), (f"{key}.cls", str(src.labels[i]).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
        size += len(data) + 1536
    tar.close()
    open(os.path.join(out, ".done"), "w").close()


def make_cosmoflow(out: str, samples: int = 512, side: int = 64, seed: int = 0) -> str:
    """A CosmoFlow-like dataset: one HDF5 file per sample, ``full`` [4, side, side, side] int16
    (smooth random fields, as counts of particles) and ``unitPar`` [4] float32. Deterministic
    and idempotent."""
    import h5py
    import numpy as np

    os.makedirs(out, exist_ok=True)
    done = os.path.join(out, f".done-{samples}-{side}-{seed}")
    if os.path.exists(done):
        return out
    rng = np.random.default_rng(seed)
    for i in range(samples):
        field = rng.poisson(3.0, (4, side, side, side)).astype(np.int16)
        with h5py.File(os.path.join(out, f"univ_{i:05d}.h5"), "w") as f:
            f["full"] = field
            f["unitPar"] = rng.standard_normal(4).astype(np.float32)
    open(done, "w").close()
    return out


# -- one system, in its own process ---------------------------------------------------------

def _chain():
    import hdmlp.transforms as T
    return [T.ImgDecode(), T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
            T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]


def _torch_chain():
    from torchvision import transforms as TV
    return TV.Compose([TV.RandomResizedCrop(224), TV.RandomHorizontalFlip(), TV.ToTensor(),
                       TV.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])


class _H5Dataset:
    """h5py in a DataLoader: opens the sample's file in __getitem__, as CosmoFlow's loaders do."""

    def __init__(self, root: str) -> None:
        self.files = sorted(os.path.join(root, f) for f in os.listdir(root) if f.endswith(".h5"))

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int):
        import h5py
        import torch
        with h5py.File(self.files[i], "r") as f:
            return torch.from_numpy(f["full"][...]), torch.from_numpy(f["unitPar"][...])


def run_one(spec: dict) -> dict:
    """Reads the first `epochs` epochs with one system; returns per epoch seconds and samples."""
    import torch

    system, path, batch = spec["system"], spec["path"], spec["batch_size"]
    out = {"system": system, "epochs": []}
    if system.startswith("hdmlp"):
        import hdmlp
        kw = {}
        if spec.get("config"):
            kw["config_path"] = spec["config"]
        if spec.get("source_options"):
            kw["source_options"] = spec["source_options"]
        t0 = time.perf_counter()
        job = hdmlp.Job(path, batch, spec["epochs"], seed=0, transforms=_chain() if "train" in system else None,
                        **kw)
        out["startup_seconds"] = time.perf_counter() - t0
        for e in range(spec["epochs"]):
            t, n, nbytes = time.perf_counter(), 0, 0
            for ids, _labels, samples in job.epoch_batches(e):
                n += len(ids)
                if isinstance(samples, list):
                    nbytes += sum(len(s) for s in samples)
            out["epochs"].append({"seconds": time.perf_counter() - t, "samples": n})
        m = job.metrics()
        out["files_opened"] = m["source"]["files_opened"]
        out["store_bytes"] = m["pfs_bytes"]
        out["dataset_bytes"] = sum(job.sample_sizes)
        job.close()
        return out
    from torch.utils.data import DataLoader
    workers = spec["workers"]
    if system.startswith("h5py"):
        dataset = _H5Dataset(path)
        collate = None
    else:
        from torchvision.datasets import ImageFolder
        if "train" in system:
            dataset = ImageFolder(path, transform=_torch_chain())
            collate = None
        else:
            dataset = ImageFolder(path, loader=lambda p: open(p, "rb").read())
            collate = list
    g = torch.Generator()
    g.manual_seed(0)
    loader = DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=workers, collate_fn=collate,
                        generator=g, persistent_workers=False)
    t0 = time.perf_counter()
    for _ in range(spec["epochs"]):
        t, n = time.perf_counter(), 0
        for batch_ in loader:
            n += len(batch_[0]) if not isinstance(batch_, list) or collate is None else len(batch_)
        out["epochs"].append({"seconds": time.perf_counter() - t, "samples": n})
    out["startup_seconds"] = 0.0
    out["files_opened"] = len(dataset) * spec["epochs"]
    out["wall_seconds"] = time.perf_counter() - t0
    return out


# The machine's load over the whole run and each system's process (benchmarks/lab/machine.py); made in main(), or
# set by a benchmark that runs these systems inside its own recording (pack_metadata.py).
recorder: machine.LoadRecorder | None = None


def run_system(spec: dict, work: str, timeout: float) -> dict:
    spec_path = os.path.join(work, f"{spec['name']}.spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    cache = tempfile.mkdtemp(prefix="cache-", dir=work)  # a first run: no index cache to reuse
    env = dict(os.environ, HDMLP_CACHE_DIR=cache)
    t = time.perf_counter()
    runs = recorder or machine.LoadRecorder()
    with runs.run(spec["name"]):
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "_run", spec_path], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        return {"status": "error", "error": (proc.stderr or proc.stdout).strip()[-800:],
                "load": runs.last(spec["name"])}
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["load"] = runs.last(spec["name"])
    result["process_seconds"] = time.perf_counter() - t
    result["status"] = "ok"
    return result


# -- scenarios --------------------------------------------------------------------

def prepare_images(args) -> dict:
    from hdmlp.datasets import make_image_folder
    from hdmlp.pack import pack

    base = os.path.join(args.work, f"images-{args.images}")
    folder = os.path.join(base, "folder")
    make_image_folder(folder, num_images=args.images, num_classes=args.classes, seed=0)
    pack(folder, os.path.join(base, "pack"), shard_size=int(args.shard_mb * 2**20), progress=False)
    make_tars(folder, os.path.join(base, "tars"), args.shard_mb)
    probe = os.path.join(base, "link-probe")  # incompressible files to measure the link with
    os.makedirs(probe, exist_ok=True)
    for k in range(4):
        path = os.path.join(probe, f"probe-{k}.bin")
        if not os.path.exists(path) or os.path.getsize(path) != 16 << 20:
            with open(path, "wb") as f:
                f.write(os.urandom(16 << 20))
    # hdmlp's default configuration without coalescing, to measure what coalescing does.
    import hdmlp
    no_coalesce = os.path.join(base, "no-coalesce.cfg")
    with open(hdmlp.default_config_path()) as f, open(no_coalesce, "w") as out:
        out.write(f.read() + "\ncoalesce_kb = 0;\n")
    return {"base": base, "folder": folder, "pack": os.path.join(base, "pack"), "tar": os.path.join(base, "tars"),
            "probe": [os.path.join(probe, f"probe-{k}.bin") for k in range(4)], "no_coalesce": no_coalesce}


def link_raw_mb_s(mount_files: list[str], readers: int = 4) -> float:
    """The link's raw bandwidth as a loader sees it: large files read sequentially (1 MiB reads)
    by `readers` threads at once through the mount."""
    from concurrent.futures import ThreadPoolExecutor

    def read(path):
        n = 0
        with open(path, "rb", buffering=0) as f:
            while chunk := f.read(1 << 20):
                n += len(chunk)
        return n

    t = time.perf_counter()
    with ThreadPoolExecutor(readers) as pool:
        total = sum(pool.map(read, mount_files))
    return total / (time.perf_counter() - t) / 1e6


def plain_pack_reader_mb_s(shards: list[str], threads: int = 8, chunk: int = 512 << 10) -> float:
    """What a plain parallel reader gets from the pack's shards through the mount: `threads` Python
    threads issuing `chunk`-byte preads over every shard at once (no hdmlp). Over sshfs this is the
    emulation's ceiling for a pack: sshfs serves at most 10 FUSE requests at a time (libfuse's
    default worker limit), each at most 128 KiB and one round trip, whatever the reader asks."""
    from concurrent.futures import ThreadPoolExecutor

    fds = [os.open(path, os.O_RDONLY) for path in shards]
    try:
        t = time.perf_counter()
        work = [(fd, o) for fd in fds for o in range(0, os.fstat(fd).st_size, chunk)]
        with ThreadPoolExecutor(threads) as pool:
            total = sum(pool.map(lambda w: len(os.pread(w[0], chunk, w[1])), work))
        return total / (time.perf_counter() - t) / 1e6
    finally:
        for fd in fds:
            os.close(fd)


def _median_run(runs: list[dict]) -> dict:
    """The run with the median img/s, with every repeat's img/s beside it."""
    ok = sorted((r for r in runs if r["status"] == "ok"), key=lambda r: r["img_per_s"])
    if not ok:
        return runs[-1]
    median = dict(ok[len(ok) // 2])
    median["repeats_img_per_s"] = [round(r["img_per_s"], 1) for r in runs if r["status"] == "ok"]
    return median


def scenario_images(args) -> dict:
    data = prepare_images(args)
    systems = [("hdmlp-raw", "folder"), ("hdmlp-raw", "pack"), ("hdmlp-raw-nocoalesce", "pack"), ("hdmlp-raw", "tar"),
               ("hdmlp-train", "folder"), ("hdmlp-train", "pack"), ("hdmlp-train", "tar"),
               ("torch-raw", "folder"), ("torch-train", "folder")]
    if args.systems:
        systems = [s for s in systems if f"{s[0]}/{s[1]}" in args.systems]
    result = {"scenario": "images", "uptime_start": uptime(), "images": args.images, "repeats": args.repeats,
              "pfs_kind": args.pfs,
              "dataset_mb": sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(data["folder"])
                                for f in fs) / 1e6, "links": {}}
    for link in args.links:
        rate, delay = LINKS[link]
        runs = {}
        with pfs.EmulatedPFS(data["base"], rate_mbit=rate, delay_ms=delay, log=log, kind=args.pfs) as store:
            raw = link_raw_mb_s([store.local_path(s) for s in data["probe"]])
            log(f"[{link}] {rate:g} Mbit/s, {delay:g} ms each way: raw {raw:.1f} MB/s with 4 sequential readers")
            shards = sorted(os.path.join(data["pack"], f) for f in os.listdir(data["pack"])
                            if f.endswith(".hdmlp-shard"))
            pfs.drop_page_cache(shards)
            plain = plain_pack_reader_mb_s([store.local_path(f) for f in shards])
            log(f"[{link}] a plain reader (8 threads, 512 KiB preads) reads the pack's shards at {plain:.1f} MB/s")
            # Repeats interleave the systems, so each sees the same changes of load.
            for system, fmt in [s for _ in range(args.repeats) for s in systems]:
                name = f"{system}/{fmt}"
                spec = {"name": name.replace("/", "-"), "system": system, "path": store.local_path(data[fmt]),
                        "batch_size": args.batch_size, "epochs": 1, "workers": args.workers,
                        "config": data["no_coalesce"] if "nocoalesce" in system else None}
                pfs.drop_page_cache([data[fmt]])
                wire0 = store.wire_bytes()
                r = run_system(spec, args.work, args.timeout)
                r["wire_bytes"] = store.wire_bytes() - wire0
                if r["status"] == "ok":
                    e = r["epochs"][0]
                    r["img_per_s"] = e["samples"] / e["seconds"]
                    r["mb_per_s"] = result["dataset_mb"] / e["seconds"]
                    r["share_of_link"] = r["mb_per_s"] / raw
                    log(f"  {name:20s} {r['img_per_s']:7.0f} img/s {r['mb_per_s']:6.1f} MB/s "
                        f"({r['share_of_link']:.0%} of the link), {r['files_opened']} files opened, "
                        f"start-up {r['startup_seconds']:.1f} s")
                else:
                    log(f"  {name:20s} failed: {r['error'].splitlines()[-1]}")
                runs.setdefault(name, []).append(r)
        result["links"][link] = {"rate_mbit": rate, "delay_ms_each_way": delay, "raw_mb_s": raw,
                                 "plain_pack_reader_mb_s": plain,
                                 "systems": {name: _median_run(rs) for name, rs in runs.items()}}
    result["uptime_end"] = uptime()
    return result


def scenario_max_side(args) -> dict:
    from hdmlp.pack import pack

    data = prepare_images(args)
    small = os.path.join(data["base"], "pack-256")
    pack(data["folder"], small, max_side=256, quality=90, progress=False)
    result = {"scenario": "max-side", "uptime_start": uptime(), "images": args.images, "systems": {}}
    for name, system, path in (("hdmlp-train/folder", "hdmlp-train", data["folder"]),
                               ("hdmlp-train/pack-256", "hdmlp-train", small),
                               ("torch-train/folder", "torch-train", data["folder"])):
        # Warm: every file in the page cache, two epochs, the second counted.
        subprocess.run(["vmtouch", "-tq", path], check=False)
        spec = {"name": name.replace("/", "-"), "system": system, "path": path, "batch_size": args.batch_size,
                "epochs": 2, "workers": args.workers}
        r = run_system(spec, args.work, args.timeout)
        if r["status"] == "ok":
            e = r["epochs"][-1]
            r["img_per_s"] = e["samples"] / e["seconds"]
            log(f"  {name:22s} {r['img_per_s']:7.0f} img/s (second epoch, warm)")
        result["systems"][name] = r
    sizes = {k: sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(p) for f in fs) / 1e6
             for k, p in (("folder", data["folder"]), ("pack-256", small))}
    result["dataset_mb"] = sizes
    result["uptime_end"] = uptime()
    return result


def scenario_hdf5(args) -> dict:
    base = os.path.join(args.work, f"cosmoflow-{args.samples}-{args.side}")
    make_cosmoflow(os.path.join(base, "data"), args.samples, args.side)
    data = os.path.join(base, "data")
    mb = sum(os.path.getsize(os.path.join(data, f)) for f in os.listdir(data)) / 1e6
    rate, delay = LINKS[args.hdf5_link]
    result = {"scenario": "hdf5", "uptime_start": uptime(), "samples": args.samples, "side": args.side,
              "dataset_mb": mb, "rate_mbit": rate, "delay_ms_each_way": delay, "systems": {}}
    with pfs.EmulatedPFS(base, rate_mbit=rate, delay_ms=delay, log=log, kind=args.pfs) as store:
        files = sorted(os.listdir(data))
        raw = link_raw_mb_s([store.local_path(os.path.join(data, f)) for f in files[:16]])
        result["raw_mb_s"] = raw
        for name, system, workers in (("hdmlp", "hdmlp", 0), ("h5py DataLoader w0", "h5py", 0),
                                      ("h5py DataLoader w1", "h5py", 1), ("h5py DataLoader w2", "h5py", 2)):
            spec = {"name": name.replace(" ", "-"), "system": system, "path": store.local_path(data),
                    "batch_size": args.hdf5_batch, "epochs": 1, "workers": workers,
                    "source_options": {"hdf5_samples": "full", "hdf5_labels": "unitPar"}}
            pfs.drop_page_cache([data])
            r = run_system(spec, args.work, args.timeout)
            if r["status"] == "ok":
                e = r["epochs"][0]
                r["samples_per_s"] = e["samples"] / e["seconds"]
                r["mb_per_s"] = mb / e["seconds"]
                log(f"  {name:20s} {r['samples_per_s']:7.1f} samples/s {r['mb_per_s']:6.1f} MB/s "
                    f"({r['mb_per_s'] / raw:.0%} of the link)")
            else:
                log(f"  {name:20s} failed: {r['error'].splitlines()[-1]}")
            result["systems"][name] = r
    result["uptime_end"] = uptime()
    return result


# -- reporting ----------------------------------------------------------------------

def markdown(results: list[dict], command: str, load: dict | None = None) -> str:
    lines = ["# Dataset formats over the emulated PFS", "",
             f"Written by `{command}`. Provisional: measured on a 2-core machine shared with other "
             "work (load averages below); re-measure on a quiet machine.", ""]
    if load:
        lines += [line + "  " for line in machine.report_lines(load)] + [""]
    for r in results:
        lines += [f"## {r['scenario']}", "", f"- load at start: `{r['uptime_start']}`",
                  f"- load at end: `{r['uptime_end']}`", ""]
        if r["scenario"] == "images":
            lines.insert(len(lines) - 1, f"- the emulated PFS's server: {r.get('pfs_kind', 'sshfs')}")
            lines.insert(len(lines) - 1, f"- {r['images']} ImageNet-like JPEGs, {r['dataset_mb']:.1f} MB; first "
                                         "epoch of each system from a cold store, each in its own process; "
                                         f"{r.get('repeats', 1)} interleaved repeat(s), the median shown "
                                         "(every repeat's img/s in the last column)")
            for link, l in r["links"].items():
                lines += [f"### {link} link: {l['rate_mbit']:g} Mbit/s, {l['delay_ms_each_way']:g} ms each way "
                          f"(raw {l['raw_mb_s']:.1f} MB/s: 4 readers, sequential 1 MiB reads)", ""]
                if "plain_pack_reader_mb_s" in l:
                    lines += [f"A plain parallel reader (8 threads, 512 KiB preads, no hdmlp) reads the pack's "
                              f"shards at {l['plain_pack_reader_mb_s']:.1f} MB/s through the same mount.", ""]
                lines += ["| system / format | img/s | MB/s | share of link | vs folder (same system) | "
                          "files opened | start-up s | repeats img/s |", "|---|---|---|---|---|---|---|---|"]
                for name, s in l["systems"].items():
                    if s["status"] != "ok":
                        lines.append(f"| {name} | failed | | | | | | |")
                        continue
                    base = l["systems"].get(name.split("/")[0].replace("-nocoalesce", "") + "/folder", {})
                    vs = f"{s['img_per_s'] / base['img_per_s']:.2f}x" if base.get("status") == "ok" else ""
                    lines.append(f"| {name} | {s['img_per_s']:.0f} | {s['mb_per_s']:.1f} | {s['share_of_link']:.0%} "
                                 f"| {vs} | {s['files_opened']} | {s['startup_seconds']:.1f} | "
                                 f"{', '.join(f'{x:.0f}' for x in s.get('repeats_img_per_s', []))} |")
                lines.append("")
        elif r["scenario"] == "max-side":
            lines += [f"- {r['images']} images: folder {r['dataset_mb']['folder']:.1f} MB, pack-256 "
                      f"{r['dataset_mb']['pack-256']:.1f} MB; warm page cache, second epoch", "",
                      "| system | img/s | vs hdmlp over the full-size folder |", "|---|---|---|"]
            base = r["systems"].get("hdmlp-train/folder", {})
            for name, s in r["systems"].items():
                if s.get("status") == "ok":
                    vs = f"{s['img_per_s'] / base['img_per_s']:.2f}x" if base.get("status") == "ok" else ""
                    lines.append(f"| {name} | {s['img_per_s']:.0f} | {vs} |")
            lines.append("")
        else:
            lines += [f"- {r['samples']} samples of int16[4, {r['side']}, {r['side']}, {r['side']}] + float32[4], "
                      f"one HDF5 file each ({r['dataset_mb']:.0f} MB); {r['rate_mbit']:g} Mbit/s, "
                      f"{r['delay_ms_each_way']:g} ms each way (raw {r['raw_mb_s']:.1f} MB/s)", "",
                      "| system | samples/s | MB/s | share of link | vs best h5py DataLoader |", "|---|---|---|---|---|"]
            best = max((s["samples_per_s"] for n, s in r["systems"].items()
                        if n.startswith("h5py") and s.get("status") == "ok"), default=None)
            for name, s in r["systems"].items():
                if s.get("status") == "ok":
                    vs = f"{s['samples_per_s'] / best:.2f}x" if best else ""
                    lines.append(f"| {name} | {s['samples_per_s']:.1f} | {s['mb_per_s']:.1f} | "
                                 f"{s['mb_per_s'] / r['raw_mb_s']:.0%} | {vs} |")
            lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "_run":
        with open(argv[1]) as f:
            print(json.dumps(run_one(json.load(f))))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", choices=["images", "max-side", "hdf5", "all"])
    p.add_argument("--images", type=int, default=1000)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers of the baseline (default 2)")
    p.add_argument("--shard-mb", type=float, default=16, help="MiB per pack shard and tar shard (default 16)")
    p.add_argument("--links", nargs="+", choices=list(LINKS), default=["bandwidth", "metadata"])
    p.add_argument("--repeats", type=int, default=1, help="images: runs of each system, interleaved (median)")
    p.add_argument("--systems", nargs="+", help="images: only these (e.g. hdmlp-raw/folder hdmlp-raw/pack)")
    p.add_argument("--samples", type=int, default=512, help="hdf5: samples (default 512)")
    p.add_argument("--side", type=int, default=64, help="hdf5: a sample is int16[4, side, side, side] (default 64)")
    p.add_argument("--hdf5-batch", type=int, default=8)
    p.add_argument("--hdf5-link", choices=list(LINKS), default="metadata")
    p.add_argument("--pfs", choices=pfs.KINDS, default=pfs.DEFAULT_KIND,
                   help="the emulated PFS's file server: netfs (default; every metadata request and every "
                        "read costs one round trip, many in flight) or sshfs (about 10 requests of "
                        "128 KiB in flight; the results before netfs used it)")
    p.add_argument("--work", default=os.path.join(os.path.expanduser("~"), ".cache", "hdmlp", "bench-formats"))
    p.add_argument("--timeout", type=float, default=1200)
    p.add_argument("--json", help="write the results here")
    p.add_argument("--markdown", help="write a markdown report here")
    args = p.parse_args(argv)
    global recorder
    recorder = machine.LoadRecorder()  # first: the load before this benchmark does anything
    reason = pfs.unavailable_reason(log=log, kind=args.pfs)
    if reason and args.scenario != "max-side":
        log(f"the emulated PFS cannot run here: {reason}")
        return 1
    service.install_signal_handlers()
    os.makedirs(args.work, exist_ok=True)
    scenarios = ["images", "max-side", "hdf5"] if args.scenario == "all" else [args.scenario]
    results = []
    for s in scenarios:
        log(f"== {s} ({uptime()})")
        results.append({"images": scenario_images, "max-side": scenario_max_side, "hdf5": scenario_hdf5}[s](args))
    command = "python benchmarks/formats.py " + " ".join(argv)
    load = recorder.finish()
    text = markdown(results, command, load)
    machine.write_results(args.json, {"command": command, "results": results, "load": load}, args.markdown, text)
    print(text)
    machine.print_warnings(load, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
