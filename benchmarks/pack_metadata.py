"""Packs on a metadata-bound PFS (issue 22, goal 1), on one node.

    .venv/bin/python benchmarks/pack_metadata.py [--images 2000] [--rate-mbit 1000] [--open-delay-ms 10]
        [--read-delay-ms 1] [--repeats 2] [--json OUT.json] [--markdown OUT.md]

Serves a folder of ImageNet-like JPEGs and an hdmlp pack of the same images through the
emulated PFS (benchmarks/lab/pfs.py with its netfs server: ``--rate-mbit`` on the link, every
metadata request (stat, open, readdir) ``--open-delay-ms`` and every read request
``--read-delay-ms``, up to 64 requests in flight, reads of up to 1 MiB in one request) and
measures, from a cold store, side by side and interleaved over ``--repeats``:

- hdmlp's first epoch over the folder and over the pack, both with hdmlp's default
  configuration, each in its own process (``formats.run_system``; start-up apart);
- a plain parallel reader of the pack's shard files, no hdmlp: a thread pool issuing 1 MiB
  preads over every shard (16 and 32 threads; the faster is the ceiling);
- a plain parallel reader of the folder's files: the folder listed (os.walk), then a thread
  pool of 32 reading every file once (what any loader could get from the folder).

``--metadata-slots N`` lets the server handle only N metadata requests at once (a metadata
server busy with other clients): then the folder is bound by N / delay opens a second.

Goal: the pack's first epoch at least 5x the folder's and at least 90% of the plain reader.
The machine is shared: the load is recorded (benchmarks/lab/machine.py) and the report says so.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

if __package__ in (None, ""):  # run as a script: benchmarks/_path.py
    import _path  # noqa: F401

from benchmarks import formats  # noqa: E402
from benchmarks.lab import machine, pfs, service  # noqa: E402

log = formats.log


def plain_reader_mb_s(files: list[str], threads: int, chunk: int | None) -> float:
    """MB/s of `threads` threads reading these files once: in `chunk`-byte preads spread over all
    files (chunk given), or each file whole, one file per task (chunk None)."""
    def whole(path):
        with open(path, "rb", buffering=0) as f:
            return len(f.read())

    t = time.perf_counter()
    if chunk is None:
        with ThreadPoolExecutor(threads) as pool:
            total = sum(pool.map(whole, files))
        return total / (time.perf_counter() - t) / 1e6
    fds = [os.open(path, os.O_RDONLY) for path in files]
    try:
        work = [(fd, o) for fd in fds for o in range(0, os.fstat(fd).st_size, chunk)]
        with ThreadPoolExecutor(threads) as pool:
            total = sum(pool.map(lambda w: len(os.pread(w[0], chunk, w[1])), work))
        return total / (time.perf_counter() - t) / 1e6
    finally:
        for fd in fds:
            os.close(fd)


def run(args) -> dict:
    data = formats.prepare_images(args)
    folder_files = sorted(os.path.join(d, f) for d, _, fs in os.walk(data["folder"]) for f in fs)
    shards = sorted(os.path.join(data["pack"], f) for f in os.listdir(data["pack"]) if f.endswith(".hdmlp-shard"))
    dataset_mb = sum(os.path.getsize(f) for f in folder_files) / 1e6
    result = {"images": args.images, "dataset_mb": dataset_mb, "shards": len(shards), "rate_mbit": args.rate_mbit,
              "open_delay_ms": args.open_delay_ms, "read_delay_ms": args.read_delay_ms, "pfs_kind": args.pfs,
              "metadata_slots": args.metadata_slots,
              "uptime_start": formats.uptime(), "repeats": []}
    kw = dict(open_delay_ms=args.open_delay_ms, read_delay_ms=args.read_delay_ms,
              metadata_slots=args.metadata_slots or None) if args.pfs == "netfs" else {}
    with pfs.EmulatedPFS(data["base"], rate_mbit=args.rate_mbit, delay_ms=args.read_delay_ms / 2, log=log,
                         kind=args.pfs, **kw) as store:
        pfs.drop_page_cache(data["probe"])
        result["raw_mb_s"] = formats.link_raw_mb_s([store.local_path(p) for p in data["probe"]])
        log(f"link: raw {result['raw_mb_s']:.1f} MB/s (4 readers, sequential 1 MiB reads)")
        mounted_shards = [store.local_path(s) for s in shards]
        for rep in range(args.repeats):
            r = {}
            for threads in (16, 32):
                pfs.drop_page_cache(shards)
                r[f"plain_pack_{threads}t_mb_s"] = plain_reader_mb_s(mounted_shards, threads, 1 << 20)
            pfs.drop_page_cache(folder_files)
            with _recorder.run(f"plain-folder-{rep}"):
                t = time.perf_counter()
                listed = [os.path.join(d, f) for d, _, fs in os.walk(store.local_path(data["folder"])) for f in fs]
                r["plain_folder_mb_s"] = plain_reader_mb_s(listed, 32, None)
                r["plain_folder_mb_s_with_listing"] = dataset_mb / (time.perf_counter() - t)
            r["plain_pack_mb_s"] = max(r["plain_pack_16t_mb_s"], r["plain_pack_32t_mb_s"])
            log(f"[{rep}] plain readers: pack {r['plain_pack_16t_mb_s']:.1f} (16 threads) / "
                f"{r['plain_pack_32t_mb_s']:.1f} (32) MB/s, folder {r['plain_folder_mb_s']:.1f} MB/s (32 threads)")
            for fmt in ("folder", "pack"):
                spec = {"name": f"hdmlp-raw-{fmt}", "system": "hdmlp-raw", "path": store.local_path(data[fmt]),
                        "batch_size": args.batch_size, "epochs": 1, "workers": 0, "config": None}
                pfs.drop_page_cache(folder_files if fmt == "folder" else shards)
                wire0 = store.wire_bytes()
                s = formats.run_system(spec, args.work, args.timeout)
                s["wire_bytes"] = store.wire_bytes() - wire0
                if s["status"] == "ok":
                    e = s["epochs"][0]
                    s["img_per_s"] = e["samples"] / e["seconds"]
                    s["mb_per_s"] = dataset_mb / e["seconds"]
                    log(f"[{rep}] hdmlp {fmt:6s} {s['img_per_s']:7.0f} img/s {s['mb_per_s']:6.1f} MB/s, "
                        f"{s['files_opened']} files opened, start-up {s['startup_seconds']:.1f} s")
                else:
                    log(f"[{rep}] hdmlp {fmt} failed: {s['error'][-300:]}")
                r[f"hdmlp_{fmt}"] = s
            if r["hdmlp_folder"]["status"] == "ok" and r["hdmlp_pack"]["status"] == "ok":
                r["pack_vs_folder"] = r["hdmlp_pack"]["img_per_s"] / r["hdmlp_folder"]["img_per_s"]
                r["pack_vs_plain"] = r["hdmlp_pack"]["mb_per_s"] / r["plain_pack_mb_s"]
                log(f"[{rep}] pack / folder {r['pack_vs_folder']:.2f}x, pack / plain reader {r['pack_vs_plain']:.0%}")
            result["repeats"].append(r)
        result["server_stats"] = store.netfs_stats()
    ok = [r for r in result["repeats"] if "pack_vs_folder" in r]
    if ok:
        result["median_pack_vs_folder"] = statistics.median(r["pack_vs_folder"] for r in ok)
        result["median_pack_vs_plain"] = statistics.median(r["pack_vs_plain"] for r in ok)
        result["goal_met"] = result["median_pack_vs_folder"] >= 5 and result["median_pack_vs_plain"] >= 0.9
    result["uptime_end"] = formats.uptime()
    return result


def markdown(r: dict, command: str, load: dict) -> str:
    lines = ["# Packs on a metadata-bound PFS (issue 22, goal 1), one node", "",
             f"Written by `{command}`. The machine (2 cores) is shared with other work: the numbers are "
             "provisional until re-measured on a quiet machine.", ""]
    lines += [line + "  " for line in machine.report_lines(load)] + [""]
    lines += [f"- load at start: `{r['uptime_start']}`", f"- load at end: `{r['uptime_end']}`",
              f"- {r['images']} ImageNet-like JPEGs, {r['dataset_mb']:.1f} MB; the pack: {r['shards']} shards",
              f"- emulated PFS ({r['pfs_kind']}): {r['rate_mbit']:g} Mbit/s link, +{r['open_delay_ms']:g} ms per "
              f"metadata request ({r['metadata_slots'] or 'any number'} at a time), +{r['read_delay_ms']:g} ms "
              f"per read request; raw {r['raw_mb_s']:.1f} MB/s "
              "(4 readers, sequential 1 MiB reads)",
              "- hdmlp: default configuration, raw bytes, first epoch from a cold store (start-up apart), "
              "each run in its own process", ""]
    lines += ["| repeat | plain pack reader MB/s (16 / 32 threads) | plain folder reader MB/s (32 threads) | "
              "hdmlp folder img/s (MB/s) | hdmlp pack img/s (MB/s) | pack / folder | pack / plain reader | "
              "start-up s (folder / pack) |", "|---|---|---|---|---|---|---|---|"]
    for i, x in enumerate(r["repeats"]):
        f, p = x["hdmlp_folder"], x["hdmlp_pack"]
        cell = lambda s: f"{s['img_per_s']:.0f} ({s['mb_per_s']:.1f})" if s["status"] == "ok" else "failed"  # noqa
        lines.append(f"| {i} | {x['plain_pack_16t_mb_s']:.1f} / {x['plain_pack_32t_mb_s']:.1f} | "
                     f"{x['plain_folder_mb_s']:.1f} | {cell(f)} | {cell(p)} | "
                     f"{x.get('pack_vs_folder', float('nan')):.2f}x | {x.get('pack_vs_plain', float('nan')):.0%} | "
                     f"{f.get('startup_seconds', float('nan')):.1f} / {p.get('startup_seconds', float('nan')):.1f} |")
    if "median_pack_vs_folder" in r:
        lines += ["", f"Median: pack / folder **{r['median_pack_vs_folder']:.2f}x** (goal >= 5x), pack / plain "
                  f"reader **{r['median_pack_vs_plain']:.0%}** (goal >= 90%): goal "
                  f"{'met' if r['goal_met'] else 'not met'}."]
    return "\n".join(lines)


_recorder: machine.LoadRecorder


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=2000)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--shard-mb", type=float, default=16)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--rate-mbit", type=float, default=1000)
    p.add_argument("--open-delay-ms", type=float, default=10)
    p.add_argument("--read-delay-ms", type=float, default=1)
    p.add_argument("--pfs", choices=pfs.KINDS, default="netfs")
    p.add_argument("--metadata-slots", type=int, default=0,
                   help="metadata requests the PFS serves at once (0: no limit, the delay is a pure latency)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--work", default=os.path.join(os.path.expanduser("~"), ".cache", "hdmlp", "bench-formats"))
    p.add_argument("--timeout", type=float, default=1200)
    p.add_argument("--json")
    p.add_argument("--markdown")
    args = p.parse_args(argv)
    global _recorder
    _recorder = machine.LoadRecorder()
    formats.recorder = _recorder
    reason = pfs.unavailable_reason(log=log, kind=args.pfs)
    if reason:
        log(f"the emulated PFS cannot run here: {reason}")
        return 1
    service.install_signal_handlers()
    os.makedirs(args.work, exist_ok=True)
    result = run(args)
    command = "python benchmarks/pack_metadata.py " + " ".join(argv)
    load = _recorder.finish()
    text = markdown(result, command, load)
    machine.write_results(args.json, {"command": command, "result": result, "load": load}, args.markdown, text)
    print(text)
    machine.print_warnings(load, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
