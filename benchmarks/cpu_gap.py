"""Where hdmlp's process spends CPU beyond its bare pipeline's, part by part, per 1,000 images.

The loop is bench-peers' (../shared/bench-peers/bench_hdmlp.py): hdmlp.Job(transforms=[train chain]) +
HDMLPDataLoader with the default config, batch 64, 3 epochs, each batch touched with float(x.sum()),
CPU counted from the loader's construction to its teardown. The bare pipeline is bench-peers'
ceiling_hdmlp (hdmlp's TransformPipeline on 2 threads over the files held in memory, one output buffer
per thread, no reading, batching, hand-off or Python). Each run is one process under

    perf record -k CLOCK_MONOTONIC -e cpu-clock -F 999

(a software clock: it works in VMs without hardware counters, where `perf stat -e instructions` says
"not supported"), and the samples are split by phase (construction, epoch 1, the later epochs,
teardown; the worker prints the phases' clock marks), by thread (hdmlp names its threads:
hdmlp-stage-N the staging workers, hdmlp-fill-N the RAM class's fill threads, hdmlp-read the deadline
reads; the main thread; the others are the training side's OpenMP threads) and by library. The job's
own CPU clocks split the workers' time between the chain (transform_cpu_seconds) and the rest. Page
faults and context switches come from getrusage per phase. Several builds (--python NAME=PATH) and
rounds run interleaved; the table gives medians.

    python benchmarks/cpu_gap.py --data S/peers/inet-4k --ceiling S/peers/build/ceiling_hdmlp \\
        --python new=.venv/bin/python --python base=../hdmlp-base/.venv/bin/python --rounds 3 \\
        --json benchmarks/results/cpu_gap.json --markdown benchmarks/results/cpu_gap.md
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


# -- the worker: bench-peers' hdmlp loop, with phase marks --------------------------------------


def worker(a) -> None:
    import resource
    mono = lambda: time.clock_gettime(time.CLOCK_MONOTONIC)  # noqa: E731

    def usage():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return {"cpu": r.ru_utime + r.ru_stime, "minflt": r.ru_minflt, "majflt": r.ru_majflt,
                "nvcsw": r.ru_nvcsw, "nivcsw": r.ru_nivcsw}
    import hdmlp
    import hdmlp.transforms as T
    from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    chain = [T.ImgDecode(), T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(mean, std)]
    marks, uses = [mono()], [usage()]
    job = hdmlp.Job(a.data, a.bs, a.epochs, transforms=chain, seed=1)
    loader = HDMLPDataLoader(HDMLPImageFolder(a.data, job))
    images = 0
    for _ in range(a.epochs):
        marks.append(mono())
        uses.append(usage())
        for x, y in loader:
            float(x.sum())
            images += len(y)
    marks.append(mono())
    uses.append(usage())
    metrics = job.metrics()
    job.close()
    del loader, job
    marks.append(mono())
    uses.append(usage())
    print("GAP " + json.dumps({"marks": marks, "usage": uses, "images": images,
                               "workers": metrics["staging"]["threads"],
                               "transform_cpu_s": [e["transform_cpu_seconds"] for e in metrics["epochs"]],
                               "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")}), flush=True)


# -- splitting perf's samples ----------------------------------------------------------------------

SAMPLE = re.compile(r"^\s*(.+?)\s+(\d+)\s+([\d.]+):\s+([0-9a-f]+)\s+(.*)\((.*)\)\s*$")


def samples(perf_data: str):
    out = subprocess.run(["perf", "script", "-i", perf_data, "-F", "comm,tid,time,ip,sym,dso", "-G"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    for line in out.splitlines():
        m = SAMPLE.match(line)
        if m:
            comm, tid, t, _, sym, dso = m.groups()
            yield comm.strip(), int(tid), float(t), sym.strip(), os.path.basename(dso)


def part_of(who: str, dso: str, sym: str) -> str:
    """The table's row for one sample of a thread group."""
    if who == "stage":
        return "workers"  # split later with the job's chain clock
    if who == "fill":
        return "RAM class fill (page faults of its memory, copies)"
    if who == "read":
        return "reading the files (read(2) from the page cache)"
    if "libgomp" in dso:
        return "consumer: OpenMP threads waiting (spinning) between operations"
    if "libtorch_cpu" in dso and who in ("main", "omp"):
        return "consumer: torch's x.sum() over the batch (memory bandwidth)"
    if who == "omp":
        return "consumer: OpenMP threads, other"
    return "Python, PyTorch and hdmlp per batch (main thread: iteration, hand-off, tensors, waits)"


def split(perf_data: str, gap: dict, freq: float) -> dict[str, dict[str, float]]:
    """CPU seconds per (phase, part)."""
    marks = gap["marks"]
    phases = ["construction"] + [f"epoch {i + 1}" for i in range(len(marks) - 3)] + ["teardown"]
    main_tid = None
    out: dict[str, dict[str, float]] = collections.defaultdict(lambda: collections.defaultdict(float))
    for comm, tid, t, sym, dso in samples(perf_data):
        if main_tid is None:
            main_tid = tid  # the first sample is the process's own thread (imports)
        if t < marks[0] or t >= marks[-1]:
            continue
        phase = next(phases[i] for i in range(len(phases)) if t < marks[i + 1])
        who = ("main" if tid == main_tid else "stage" if comm.startswith("hdmlp-stage") else
               "fill" if comm.startswith("hdmlp-fill") else "read" if comm.startswith("hdmlp-read") else
               "hdmlp-other" if comm.startswith("hdmlp") else "omp")
        out[phase][part_of(who, dso, sym)] += 1 / freq
        if who == "stage":
            out[phase]["workers: kernel"] += 1 / freq if "kernel" in dso else 0.0
    return {p: dict(v) for p, v in out.items()}


def run(name: str, argv: list[str], work: str, freq: float, use_perf: bool) -> dict:
    data = os.path.join(work, f"{name}.perf")
    cmd = (["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-e", "cpu-clock", "-F", str(int(freq)), "-o", data,
            "--"] if use_perf else []) + argv
    with open("/proc/loadavg") as f:
        load = float(f.read().split()[0])
    p = subprocess.run(cmd, cwd="/tmp", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{name} failed:\n{p.stdout[-3000:]}")
    res = {"name": name, "load": load}
    for line in p.stdout.splitlines():
        if line.startswith("GAP "):
            res["gap"] = json.loads(line[4:])
        elif line.startswith("{"):  # ceiling_hdmlp
            res["bare"] = json.loads(line)
    if use_perf and "gap" in res:
        res["parts"] = split(data, res["gap"], freq)
    if os.path.exists(data):
        os.unlink(data)
    return res


def per_1k(r: dict) -> dict[str, float]:
    """One hdmlp run: CPU seconds per 1,000 images by row, construction to teardown."""
    g = r["gap"]
    k = g["images"] / 1000
    u = g["usage"]
    rows: dict[str, float] = collections.defaultdict(float)
    total_cpu = u[-1]["cpu"] - u[0]["cpu"]
    rows["total (getrusage, construction to teardown)"] = total_cpu / k
    if "parts" not in r:
        return dict(rows)
    chain = sum(g["transform_cpu_s"])
    workers = sum(p.get("workers", 0.0) for p in r["parts"].values())
    rows["workers: the chain (decode + augment, the job's thread clocks)"] = chain / k
    first_kernel = r["parts"].get("epoch 1", {}).get("workers: kernel", 0.0)
    later = [r["parts"][p].get("workers: kernel", 0.0) for p in r["parts"] if p.startswith("epoch") and p != "epoch 1"]
    faults = max(first_kernel - (statistics.mean(later) if later else 0.0), 0.0)
    rows["workers: first touch of new batch memory (epoch 1's extra kernel time)"] = faults / k
    rows["workers: outside the chain (claims, completion, timers, the rest)"] = (workers - chain - faults) / k
    for phase, parts in r["parts"].items():
        for part, sec in parts.items():
            if part.startswith("workers"):
                continue
            rows[part] += sec / k
    rows["perf samples in all (should be close to the total)"] = sum(
        v for p in r["parts"].values() for kk, v in p.items() if kk != "workers: kernel") / k
    rows["page faults per image"] = (u[-1]["minflt"] - u[0]["minflt"]) / g["images"]
    rows["context switches per image"] = (u[-1]["nvcsw"] + u[-1]["nivcsw"] - u[0]["nvcsw"] - u[0]["nivcsw"]) / \
        g["images"]
    by_phase = {}
    for i, phase in enumerate(["construction"] + [f"epoch {j + 1}" for j in range(len(g["marks"]) - 3)] +
                              ["teardown"]):
        by_phase[phase] = u[i + 1]["cpu"] - u[i]["cpu"]
    for phase, sec in by_phase.items():
        rows[f"phase: {phase} (CPU s, not per 1k)"] = sec
    return dict(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="the ImageFolder (bench-peers' peers/inet-4k)")
    ap.add_argument("--ceiling", help="bench-peers' ceiling_hdmlp binary (the bare pipeline)")
    ap.add_argument("--python", action="append", default=[], help="NAME=PATH of a build's Python (repeat)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--bs", type=int, default=64)
    ap.add_argument("--freq", type=float, default=999)
    ap.add_argument("--json", default=None)
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    if not a.data or not a.python:
        ap.error("--data and at least one --python NAME=PATH are needed")
    use_perf = shutil.which("perf") is not None
    builds = dict(p.split("=", 1) for p in a.python)
    systems = {name: [os.path.abspath(py), os.path.abspath(__file__), "--worker", "--data", a.data, "--epochs",
                      str(a.epochs), "--bs", str(a.bs)] for name, py in builds.items()}
    if a.ceiling:
        systems["bare"] = [os.path.abspath(a.ceiling), a.data, "--chain", "train", "--threads", "2", "--passes",
                           str(a.epochs)]
    for root, _, files in os.walk(a.data):  # page cache warm for everyone
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                fh.read()
    work = tempfile.mkdtemp(prefix="hdmlp-cpu-gap-")
    runs = []
    for rnd in range(a.rounds):
        for name, argv in systems.items():
            r = run(name, argv, work, a.freq, use_perf)
            r["round"] = rnd + 1
            runs.append(r)
            total = per_1k(r).get("total (getrusage, construction to teardown)") if "gap" in r else \
                r["bare"]["cpu_s_per_1k"]
            print(f"round {rnd + 1} {name:6s} {total:.3f} CPU s per 1k images (load {r['load']:.2f})", flush=True)
    table: dict[str, dict[str, float]] = {}
    for name in systems:
        rs = [r for r in runs if r["name"] == name]
        if name == "bare":
            table[name] = {"total (bare pipeline's threads, its passes)": statistics.median(
                r["bare"]["cpu_s_per_1k"] for r in rs)}
            continue
        rows = [per_1k(r) for r in rs]
        table[name] = {k: statistics.median(row.get(k, 0.0) for row in rows) for k in rows[0]}
    loads = [r["load"] for r in runs]
    result = {"table": table, "runs": runs, "perf": use_perf, "load_min": min(loads), "load_max": max(loads),
              "command": "python benchmarks/cpu_gap.py " + " ".join(sys.argv[1:]),
              "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    text = render(result)
    print("\n" + text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(TITLE + text + "\n")


TITLE = ("# Where hdmlp's CPU beyond its bare pipeline goes\n\nGenerated by `benchmarks/cpu_gap.py`; do not edit. "
         "Each column is one build's process (bench-peers' loop: train chain, batch 64, 3 epochs, each batch "
         "summed), construction to teardown; `bare` is bench-peers' ceiling_hdmlp on the same folder. What the "
         "rows mean: benchmarks/README.md, \"CPU per image against the bare pipeline and the peers\".\n\n")


def render(result: dict) -> str:
    t = result["table"]
    names = [n for n in t if n != "bare"]
    keys = list(dict.fromkeys(k for n in names for k in t[n]))
    lines = ["| CPU s per 1,000 images (medians) | " + " | ".join(names) + (" | bare |" if "bare" in t else " |"),
             "|---|" + "---:|" * (len(names) + ("bare" in t))]
    for k in keys:
        fmt = "{:.1f}" if "per image" in k else "{:.2f}" if "phase" in k else "{:.3f}"
        cells = [fmt.format(t[n].get(k, 0.0)) for n in names]
        bare = ""
        if "bare" in t:
            bare = " | " + ("{:.3f}".format(next(iter(t["bare"].values()))) if k.startswith("total") else "")
        lines.append(f"| {k} | " + " | ".join(cells) + bare + " |")
    if "bare" in t:
        bare = next(iter(t["bare"].values()))
        for n in names:
            total = t[n]["total (getrusage, construction to teardown)"]
            chain = t[n].get("workers: the chain (decode + augment, the job's thread clocks)")
            lines.append(f"| {n}: gap to bare = {total - bare:.3f} ({total / bare:.3f}x)" +
                         (f"; of it the chain in the workers beyond the bare pipeline's (memory traffic of batch "
                          f"rows, caches shared with the consumer, noise): {chain - bare:.3f}" if chain else "") +
                         " |" + " |" * (len(names) + 1))
    lines += ["", f"{result['when']}; load average (1 min) at the runs' starts {result['load_min']:.2f} to "
              f"{result['load_max']:.2f}; perf: {'yes' if result['perf'] else 'not installed (totals only)'}.",
              "", f"Command: `{result['command']}`"]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
