"""hdmlp's CPU per image against the bare transform pipeline's, on one folder, and where the difference goes.

Issue 23 ("Every core's worth"): on a GPU node the loader's CPU per image
decides how many GPUs a node's cores can feed. This benchmark runs, on the
same generated folder (hdmlp.datasets.make_image_folder, page cache warm),
the same chain and the same number of threads, each in a process of its own
and interleaved over --rounds:

  hdmlp     hdmlp.Job + HDMLPDataLoader (batch --batch-size, the default config:
            the RAM class holds the files after the first epoch), a loop that
            touches each batch as a training step's first op would
  bare      the bare C++ pipeline (TransformPipeline.apply) driven from --threads
            Python threads over the files held in memory: no reading, batching
            or hand-off
  ceiling   benchmarks/transform_ceiling (C++ only: the bare pipeline without
            Python) on the same folder, its threads' CPU clocks

and reports CPU microseconds per image three ways, because they differ:

  steady    the epochs after the first (what a long training run sees): the
            process's CPU over those epochs / their images
  all       every epoch, the first included (reading the files from the page
            cache into the RAM class)
  process   the process's whole life (imports, scanning, compiling the chain,
            the first epoch) / every image delivered

For hdmlp the steady CPU is split by thread (the C++ threads are named, see
cpp/include/hdmlp/util/thread_name.h; CPU from /proc/self/task/*/schedstat, in
nanoseconds): the staging workers (hdmlp-stage-N: read from the RAM class,
decode and augment into the batch), the Python thread (the loop, the hand-off
and making tensors), the RAM class's fill threads (hdmlp-fill-N), the others.
Inside the workers, the job's timers split the chain (transform_cpu_seconds: the
workers' CPU clocks around decode + augment, which other processes do not
stretch) from the rest (reading from the RAM class, claiming, completing): both
in the same process, so a busy machine distorts the split far less than the
ratio between processes. Interleaved rounds keep a shared
machine's load on every system alike; the load average is recorded.

    python benchmarks/cpu_per_image.py --images 4000 --rounds 3 \\
        --json benchmarks/results/cpu_per_image.json --markdown benchmarks/results/cpu_per_image.md
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

if __package__ in (None, ""):  # run as a script: benchmarks/_path.py
    import _path  # noqa: F401
from benchmarks.lab import machine  # noqa: E402
from benchmarks.transform_pipeline import (BUILD_CEILING, CEILING_BINARY, apply_in_threads, consume,  # noqa: E402
                                           files_in_memory, hdmlp_chain, run_ceiling)

SYSTEMS = ("hdmlp", "bare", "ceiling")
# How hdmlp's threads are grouped: by the name's prefix (the Python thread is the process's own id).
GROUPS = (("hdmlp-stage", "staging workers"), ("hdmlp-fill", "RAM class fill"), ("hdmlp-read", "deadline reads"))


def process_cpu() -> float:
    return time.process_time()


def thread_cpu() -> dict[int, tuple[str, float]]:
    """CPU seconds of each living thread of this process, with its name."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                seconds = int(f.read().split()[0]) / 1e9
        except OSError:  # it ended meanwhile
            continue
        out[int(tid)] = (name, seconds)
    return out


def group_of(tid: int, name: str) -> str:
    if tid == os.getpid():
        return "python thread"
    for prefix, group in GROUPS:
        if name.startswith(prefix):
            return group
    return "other threads"


def split_by_thread(before: dict, after: dict, process_seconds: float) -> dict[str, float]:
    """CPU seconds per thread group between two thread_cpu() samples; threads that ended
    meanwhile (the staging workers end with the job's last epoch) are what the process
    spent beyond the living ones."""
    groups: dict[str, float] = {}
    for tid, (name, seconds) in after.items():
        g = group_of(tid, name)
        groups[g] = groups.get(g, 0.0) + seconds - before.get(tid, (name, 0.0))[1]
    ended = process_seconds - sum(groups.values())
    if ended > 0.01:
        gone = {group_of(t, n) for t, (n, _) in before.items() if t not in after}
        g = gone.pop() if len(gone) == 1 else "ended threads"
        groups[g] = groups.get(g, 0.0) + ended
    return groups


def touch_whole_batch(x) -> None:
    float(x.sum())  # bench-peers' consumer: reads all 38 MB of a [64, 3, 224, 224] batch


def run_hdmlp(spec: dict) -> dict:
    cpu_start = process_cpu()
    touch = touch_whole_batch if spec.get("consume") == "sum" else consume
    import hdmlp
    from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder
    job = hdmlp.Job(spec["root"], spec["batch_size"], spec["epochs"], transforms=hdmlp_chain(spec["chain"], 224),
                    seed=1)
    loader = HDMLPDataLoader(HDMLPImageFolder(spec["root"], job))
    epochs = []
    for _ in range(spec["epochs"]):
        t0, c0, w0, n = thread_cpu(), process_cpu(), time.perf_counter(), 0
        for x, y in loader:
            touch(x)
            n += len(y)
        c1, w1 = process_cpu(), time.perf_counter()
        epochs.append({"images": n, "cpu_s": c1 - c0, "wall_s": w1 - w0,
                       "threads": split_by_thread(t0, thread_cpu(), c1 - c0)})
    metrics = job.metrics()
    for e, m in zip(epochs, metrics["epochs"]):
        e["read_s"], e["transform_s"] = m.get("read_seconds", 0.0), m.get("transform_seconds", 0.0)
        e["transform_cpu_s"] = m.get("transform_cpu_seconds", 0.0)  # 0 from a build before the timer
    threads = metrics["staging"]["threads"]
    job.close()
    return {"epochs": epochs, "process_cpu_s": process_cpu() - cpu_start, "threads": threads}


def run_bare(spec: dict) -> dict:
    cpu_start = process_cpu()
    import hdmlp.transforms as T
    paths, files = files_in_memory(spec["root"])
    pipeline = T.compile_pipeline(hdmlp_chain(spec["chain"], 224))
    epochs = []
    for epoch in range(spec["epochs"]):
        c0, w0 = process_cpu(), time.perf_counter()
        apply_in_threads(pipeline, paths, files, epoch, spec["threads"])
        epochs.append({"images": len(files), "cpu_s": process_cpu() - c0, "wall_s": time.perf_counter() - w0})
    return {"epochs": epochs, "process_cpu_s": process_cpu() - cpu_start, "threads": spec["threads"]}


def run_ceiling_here(spec: dict) -> dict:
    out = run_ceiling(dict(spec, system="ceiling"))
    n = spec["images"]
    steady = [{"images": n, "cpu_s": out["cpu_us"][0] * n / 1e6, "wall_s": n / out["rates"][0]}]
    return {"epochs": steady * spec["epochs"], "threads": spec["threads"], "steady_only": True}


def worker_main(spec_path: str) -> None:
    with open(spec_path) as f:
        spec = json.load(f)
    run = {"hdmlp": run_hdmlp, "bare": run_bare, "ceiling": run_ceiling_here}[spec["system"]]
    result = run(spec)
    with open(spec["out"], "w") as f:
        json.dump(result, f)


def run_system(spec: dict, work: str, recorder: machine.LoadRecorder) -> dict:
    path = os.path.join(work, f"{spec['system']}.json")
    spec = dict(spec, out=path)
    with open(path + ".spec", "w") as f:
        json.dump(spec, f)
    with recorder.run(spec["system"]):
        subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", path + ".spec"], check=True)
    with open(path) as f:
        result = json.load(f)
    result["load"] = recorder.last(spec["system"])
    return result


# -- the numbers ----------------------------------------------------------------------

def per_image_us(epochs: list[dict], key: str = "cpu_s") -> float:
    return sum(e[key] for e in epochs) / max(sum(e["images"] for e in epochs), 1) * 1e6


def summarise_run(system: str, r: dict) -> dict:
    epochs = r["epochs"]
    s = {"steady_us": per_image_us(epochs[1:] or epochs),
         "steady_images_per_s": sum(e["images"] for e in epochs[1:]) / max(sum(e["wall_s"] for e in epochs[1:]), 1e-9)}
    if not r.get("steady_only"):
        s["all_us"] = per_image_us(epochs)
        s["process_us"] = r["process_cpu_s"] / sum(e["images"] for e in epochs) * 1e6
    if system == "hdmlp":
        steady = epochs[1:]
        n = sum(e["images"] for e in steady)
        groups: dict[str, float] = {}
        for e in steady:
            for g, sec in e["threads"].items():
                groups[g] = groups.get(g, 0.0) + sec
        s["threads_us"] = {g: sec / n * 1e6 for g, sec in groups.items()}
        s["read_wall_us"] = sum(e["read_s"] for e in steady) / n * 1e6
        s["transform_wall_us"] = sum(e["transform_s"] for e in steady) / n * 1e6
        s["transform_cpu_us"] = sum(e.get("transform_cpu_s", 0.0) for e in steady) / n * 1e6
    return s


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def summarise(rounds: list[dict]) -> dict:
    per_round = [{sys_: summarise_run(sys_, r[sys_]) for sys_ in r} for r in rounds]
    table = {}
    for sys_ in SYSTEMS:
        rows = [pr[sys_] for pr in per_round if sys_ in pr]
        if not rows:
            continue
        keys = [k for k in rows[0] if isinstance(rows[0][k], float)]
        table[sys_] = {k: median([row[k] for row in rows]) for k in keys}
        if "threads_us" in rows[0]:
            groups = sorted({g for row in rows for g in row["threads_us"]})
            table[sys_]["threads_us"] = {g: median([row["threads_us"].get(g, 0.0) for row in rows]) for g in groups}
    ratios = {}
    for other in ("bare", "ceiling"):
        for k in ("steady_us", "all_us", "process_us"):
            vals = [pr["hdmlp"][k] / pr[other][k] for pr in per_round
                    if "hdmlp" in pr and other in pr and k in pr[other]]
            if vals:
                ratios[f"hdmlp/{other} {k}"] = {"median": median(vals), "min": min(vals), "max": max(vals)}
    return {"per_round": per_round, "table": table, "ratios": ratios}


def render(result: dict) -> str:
    t, a = result["table"], result["args"]
    lines = [f"Machine: {machine.describe_facts(result['machine'])}.  ",
             f"Dataset: {result['dataset']['images']} JPEGs from make_image_folder "
             f"({result['dataset']['mean_kb']:.1f} KB mean), page cache warm. Chain {a['chain']}, batch "
             f"{a['batch_size']}, {a['epochs']} epochs per run, {result['threads']} threads everywhere; "
             f"{a['rounds']} rounds, every system in its own process once per round, interleaved; medians over "
             "the rounds. CPU: the process's CPU clock (ceiling: its worker threads' clocks).  ",
             *machine.report_lines(result["load"]), "",
             "| system | steady CPU us/image | all epochs | whole process | steady images/s |",
             "|---|---:|---:|---:|---:|"]
    names = {"hdmlp": "hdmlp (Job + HDMLPDataLoader)", "bare": "bare pipeline, Python threads, files in memory",
             "ceiling": "transform_ceiling (C++), files in memory"}
    for sys_ in SYSTEMS:
        if sys_ not in t:
            continue
        r = t[sys_]
        cell = lambda k: f"{r[k]:.0f}" if k in r else "-"  # noqa: E731
        lines.append(f"| {names[sys_]} | {cell('steady_us')} | {cell('all_us')} | {cell('process_us')} | "
                     f"{r['steady_images_per_s']:.0f} |")
    lines += ["", "| ratio, per round then median | median | range |", "|---|---:|---|"]
    for k, v in result["ratios"].items():
        lines.append(f"| {k} | **{v['median']:.3f}x** | {v['min']:.3f}x to {v['max']:.3f}x |")
    if "hdmlp" in t and "bare" in t:
        h, b = t["hdmlp"], t["bare"]
        th = h["threads_us"]
        stage = th.get("staging workers", 0.0)
        lines += ["", "Where hdmlp's steady CPU per image goes (microseconds per image, medians over the rounds):", "",
                  "| part | us/image | share of hdmlp |", "|---|---:|---:|"]
        chain = h.get("transform_cpu_us", 0.0)
        parts = [("staging workers (hdmlp-stage-N), all", stage),
                 ("  in the chain: decode + augment (the workers' CPU clocks around it)", chain),
                 ("  outside it: reading from the RAM class, claiming, completing, timers", stage - chain),
                 ("    of which reading (the job's read timer, wall clock: an upper bound)", h["read_wall_us"])]
        parts += [(f"{g}", v) for g, v in th.items() if g != "staging workers"]
        for name, v in parts:
            lines.append(f"| {name} | {v:.1f} | {v / h['steady_us'] * 100:.1f}% |")
        lines.append(f"| hdmlp, the whole process | {h['steady_us']:.1f} | 100% |")
        lines += ["", f"The same chain in the bare pipeline's process: {b['steady_us']:.1f} us per image, its "
                  f"process's CPU (Python's thread loop included); hdmlp's chain inside its workers: {chain:.1f}."]
    lines += ["", f"Command: `{result['command']}`"]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=4000)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--chain", choices=["train", "val"], default="train")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--threads", type=int, default=None, help="default: what hdmlp's threads = \"auto\" gives")
    ap.add_argument("--data", default=None, help="dataset folder: generated there once when it does not exist; "
                    "an existing folder (bench-peers' peers/inet-4k) is used as it is")
    ap.add_argument("--consume", choices=["first", "sum"], default="first",
                    help="how hdmlp's loop touches each batch: first = x[:, 0, 0, 0].sum() (64 floats), sum = "
                    "float(x.sum()) over the whole batch, as bench-peers does")
    ap.add_argument("--ceiling-binary", default=CEILING_BINARY, help=f"built by: {BUILD_CEILING}")
    ap.add_argument("--json", default=None)
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker_main(args.worker)
    recorder = machine.LoadRecorder()
    import hdmlp
    from hdmlp.cpu_budget import usable_cpus
    from hdmlp.datasets import make_image_folder
    systems = [s for s in args.systems.split(",") if s]
    threads = args.threads or usable_cpus()
    root = args.data or os.path.join(hdmlp.user_cache_dir(), "datasets", f"bench-{args.images}-10")
    if args.data is None or not os.path.exists(root):  # an existing folder is measured as it is
        make_image_folder(root, num_images=args.images, num_classes=10, seed=0)
    with hdmlp.Job(root, 1, 1) as probe:
        paths = [p for p, _ in probe.samples]
    size = 0
    for p in paths:  # warm the page cache for everyone
        with open(p, "rb") as f:
            size += len(f.read())
    base = {"root": root, "consume": args.consume, "epochs": args.epochs, "batch_size": args.batch_size, "chain": args.chain,
            "images": len(paths), "threads": threads, "ceiling_binary": os.path.abspath(args.ceiling_binary)}
    work = tempfile.mkdtemp(prefix="hdmlp-cpu-per-image-")
    rounds = []
    for r in range(args.rounds):
        rounds.append({})
        for s in systems:
            rounds[-1][s] = run_system(dict(base, system=s), work, recorder)
            print(f"round {r + 1}/{args.rounds} {s:8s} steady {summarise_run(s, rounds[-1][s])['steady_us']:.0f} "
                  f"us/image", flush=True)
    result = summarise(rounds) | {
        "args": vars(args), "threads": threads, "machine": machine.machine_facts(), "load": recorder.finish(),
        "dataset": {"root": root, "images": len(paths), "bytes": size, "mean_kb": size / len(paths) / 1e3},
        "command": "python benchmarks/cpu_per_image.py " + " ".join(sys.argv[1:])}
    machine.publish(result | {"rounds": rounds}, render(result), args.json, args.markdown,
                    "CPU per image: hdmlp against the bare transform pipeline", "benchmarks/cpu_per_image.py")


if __name__ == "__main__":
    main()
