"""Scaling of the training chain: images/s against staging threads (ranks on one node: ranks_per_node.py).

One sweep over a generated ImageNet-like folder (page cache warm), each point a
process of its own (benchmarks/transform_pipeline.py's worker), the points
interleaved over --rounds rounds: hdmlp with the training chain (ImgDecode,
RandomResizedCrop(224), flip, ToTensor, Normalize) and a config whose staging
buffer runs N threads, beside the bare C++ pipeline on N Python threads (no
reading, batching or hand-off); N = 1, 2, 4, ... up to twice the usable CPUs
(--threads). run_point also starts ranks under mpirun, for ranks_per_node.py.

It reports images/s (steady: the epochs after the first; for ranks the sum over
the ranks), the speed-up over one thread, images/s per thread, the CPU
microseconds per image, and where throughput stops growing (the first point
beyond which no point adds --knee, default 10%, or more). With it the
machine's facts: usable and online cores, affinity, cgroup quota, memory,
L3, and a cheap memcpy bandwidth for 1 and all usable threads, since the
decode's working set and the batch writes meet the memory bandwidth first
on large machines. The load of the machine is recorded for every point
(benchmarks/lab/machine.py).

    python benchmarks/scaling.py --images 2000 --epochs 3 --rounds 2 \\
        --json benchmarks/results/scaling.json --markdown benchmarks/results/scaling.md
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
if __package__ in (None, ""):  # run as a script: benchmarks/_path.py
    import _path  # noqa: F401
from benchmarks.lab import machine  # noqa: E402
from benchmarks import transform_pipeline as tp  # noqa: E402


def staging_config(path: str, threads: int) -> str:
    with open(path, "w") as f:
        f.write(f"# benchmarks/scaling.py: {threads} staging threads, nothing cached.\n"
                f"storage_classes = ( {{ capacity = 256; threads = {threads}; }} );\n")
    return path


def run_point(spec: dict, ranks: int, work: str, recorder: machine.LoadRecorder, name: str, timeout: float,
              mpirun: bool | None = None) -> dict:
    """One process (or `ranks` under mpirun) of transform_pipeline's worker; the result, summed over ranks.
    mpirun: start even one rank under mpirun (default: only several)."""
    spec = dict(spec, out=os.path.join(work, "result.json"))
    spec_path = os.path.join(work, "spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    for old in os.listdir(work):
        if old.startswith("result.json"):
            os.remove(os.path.join(work, old))
    cmd = [sys.executable, os.path.abspath(tp.__file__), "--worker", spec_path]
    if ranks > 1 if mpirun is None else mpirun:
        launcher = shutil.which("mpirun")
        if launcher is None:
            return {"status": "error", "error": "mpirun not found (Debian's openmpi-bin)"}
        cmd = [launcher, "-np", str(ranks), "--oversubscribe", "--bind-to", "none"] + \
            (["--allow-run-as-root"] if os.geteuid() == 0 else []) + cmd
    log = os.path.join(work, name.replace("/", "-").replace(" ", "_") + ".log")
    with open(log, "w") as f, recorder.run(name):
        try:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout,
                                cwd=os.path.dirname(HERE)).returncode
        except subprocess.TimeoutExpired:
            rc = "timed out"
    files = [spec["out"]] if ranks == 1 else [f"{spec['out']}.rank{r}" for r in range(ranks)]
    if rc != 0 or not all(os.path.exists(p) for p in files):
        with open(log) as f:
            tail = (f.read().strip().splitlines() or [f"exit status {rc}"])[-1]
        return {"status": "error", "error": f"exit status {rc}: {tail}", "load": recorder.last(name)}
    results = []
    for p in files:
        with open(p) as f:
            results.append(json.load(f))
    if any(r["status"] != "ok" for r in results):
        return next(r for r in results if r["status"] != "ok") | {"load": recorder.last(name)}
    # Ranks run side by side but not in lockstep: their steady epochs' images over the
    # time from the first rank's start of epoch 1 to the last rank's end.
    later = [span for r in results for span in (r["spans"][1:] or r["spans"])]
    steady = sum(n for _, _, n in later) / (max(e for _, e, _ in later) - min(b for b, _, _ in later))
    return {"status": "ok", "steady": steady,
            "cpu_us_per_image": statistics.mean(tp.steady(r["cpu_us"]) for r in results),
            "threads": [r.get("threads") for r in results], "load": recorder.last(name)}


def knee(points: list[tuple[int, float]], gain: float) -> int | None:
    """The first x beyond which no later point adds `gain` or more to its images/s (None: still growing
    at the last point, or fewer than two points)."""
    for i, (x, ips) in enumerate(points[:-1]):
        if all(later < ips * (1 + gain) for _, later in points[i + 1:]):
            return x
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--threads", default=None, help="comma-separated staging thread counts (default: 1, 2, 4, ... "
                                                    "up to twice the usable CPUs)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--knee", type=float, default=0.10, help="growth below which throughput has stopped growing")
    ap.add_argument("--data", default=None)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--json", default=None)
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args()

    recorder = machine.LoadRecorder()  # first: the load before this benchmark does anything
    import hdmlp
    from hdmlp.cpu_budget import usable_cpus
    from hdmlp.datasets import make_image_folder

    usable = usable_cpus()
    if args.threads:
        thread_counts = sorted({int(t) for t in args.threads.split(",")})
    else:
        thread_counts, n = [], 1
        while n <= 2 * usable:
            thread_counts.append(n)
            n *= 2
        thread_counts = sorted(set(thread_counts) | {usable})
    root = args.data or os.path.join(hdmlp.user_cache_dir(), "datasets", f"bench-{args.images}-{args.classes}")
    make_image_folder(root, num_images=args.images, num_classes=args.classes, seed=0)
    with hdmlp.Job(root, 1, 1) as probe:
        paths = [p for p, _ in probe.samples]
    for p in paths:
        with open(p, "rb") as f:
            f.read()
    facts = machine.machine_facts(bandwidth=True)
    print(machine.describe_facts(facts))

    work = tempfile.mkdtemp(prefix="hdmlp-scaling-")
    base = {"root": root, "epochs": args.epochs, "batch_size": args.batch_size, "size": args.size,
            "images": len(paths), "chain": "train"}
    rounds: list[dict] = []
    try:
        for r in range(args.rounds):
            point: dict[str, dict] = {}
            for n in thread_counts:
                cfg = staging_config(os.path.join(work, f"threads-{n}.cfg"), n)
                for system, spec in (("hdmlp", dict(base, system="hdmlp", config=cfg)),
                                     ("bare", dict(base, system="bare", threads=n))):
                    key = f"{system} threads={n}"
                    point[key] = run_point(spec, 1, work, recorder, key, args.timeout)
                    report(r, args.rounds, key, point[key])
            rounds.append(point)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load = recorder.finish()

    def series(prefix: str, xs: list[int]) -> list[dict]:
        out = []
        for x in xs:
            rs = [rd[f"{prefix}={x}"] for rd in rounds if rd[f"{prefix}={x}"]["status"] == "ok"]
            if not rs:
                first = rounds[0][f"{prefix}={x}"]
                out.append({"x": x, "status": first["status"], "error": first.get("error")})
                continue
            out.append({"x": x, "status": "ok", "images_per_s": statistics.median(q["steady"] for q in rs),
                        "rounds": [q["steady"] for q in rs],
                        "cpu_us_per_image": statistics.median(q["cpu_us_per_image"] for q in rs),
                        "threads": rs[0]["threads"]})
        return out

    result = {"command": "python benchmarks/scaling.py " + " ".join(sys.argv[1:]), "machine": facts, "load": load,
              "args": vars(args), "dataset": {"images": len(paths)},
              "threads": {"hdmlp": series("hdmlp threads", thread_counts), "bare": series("bare threads", thread_counts)},
              "rounds": rounds}
    for s in result["threads"].values():
        ok = [(p["x"], p["images_per_s"]) for p in s if p["status"] == "ok"]
        for p in s:
            if p["status"] == "ok" and ok:
                p["speedup"] = p["images_per_s"] / ok[0][1]
        if s:
            s.append({"knee": knee(ok, args.knee)})
    machine.publish(result, render(result), args.json, args.markdown,
                    "Scaling of the training chain: staging threads", "benchmarks/scaling.py", load)


def report(r: int, rounds: int, key: str, res: dict) -> None:
    shown = f"{res['steady']:7.0f} img/s, {res['cpu_us_per_image']:.0f} CPU us/image" if res["status"] == "ok" \
        else f"{res['status']}: {res.get('error')}"
    busy = f" [busy: others used {res['load']['other_cores']:.2f} cores]" if res.get("load", {}).get("busy") else ""
    print(f"round {r + 1}/{rounds} {key:22s} {shown}{busy}", flush=True)


def render(result: dict) -> str:
    a = result["args"]
    lines = [f"Machine: {machine.describe_facts(result['machine'])}.  ",
             f"Training chain over {result['dataset']['images']} generated ImageNet-like JPEGs (page cache warm), "
             f"batch {a['batch_size']}, {a['epochs']} epochs per point (images/s: the epochs after the first), "
             f"{a['rounds']} round(s) interleaved, medians.  "]
    lines += [line + "  " for line in machine.report_lines(result["load"])]
    for title, rows, what in (("hdmlp, staging threads", result["threads"]["hdmlp"], "threads"),
                              ("bare C++ pipeline, threads", result["threads"]["bare"], "threads")):
        lines += ["", f"**{title}**", "", f"| {what} | images/s | per round | speed-up | per {what[:-1]} | "
                                          "CPU us/image |", "|---:|---:|---|---:|---:|---:|"]
        for p in rows:
            if "knee" in p:
                lines += ["", f"Throughput stops growing at {p['knee']} {what} (no point beyond adds "
                              f"{a['knee']:.0%} or more)." if p["knee"] else
                          f"Throughput still grows by {a['knee']:.0%} or more up to the last point."]
            elif p["status"] != "ok":
                lines.append(f"| {p['x']} | {p['status']} | {p.get('error') or ''} | | | |")
            else:
                lines.append(f"| {p['x']} | {p['images_per_s']:.0f} | {', '.join(f'{x:.0f}' for x in p['rounds'])} | "
                             f"{p['speedup']:.2f}x | {p['images_per_s'] / p['x']:.0f} | "
                             f"{p['cpu_us_per_image']:.0f} |")
    lines += ["", f"Command: `{result['command']}`"]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
