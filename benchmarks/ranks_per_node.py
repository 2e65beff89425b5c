"""Ranks per node: one rank with N staging threads against N ranks with one thread each, side by side.

On a node with N usable cores a job can run one rank with N staging threads
or N ranks (one per GPU) with the cores split between them. Both do the same
work, so N ranks should deliver about what one rank does; the difference is
what running several ranks costs (MPI's progress, hdmlp's serving threads,
the placement exchange, the peer transport, a Python loop per rank).

Points, each a process tree of its own (benchmarks/transform_pipeline.py's
worker with the training chain), interleaved over --rounds rounds:

  1 rank x N threads      the baseline, without mpirun (as a single-process job runs)
  1 rank x N, mpirun      the same under mpirun -np 1 (what MPI alone costs)
  N ranks x 1 thread      mpirun -np N, the staging threads set to 1
  N ranks x auto          mpirun -np N, threads = "auto" (the usable CPUs split between the ranks)

under two configs: "staging" (a staging buffer only: no cache, no peers; what
MPI and the extra processes cost) and "default" (configs/default.cfg: the RAM
and disk caches, whose samples the ranks fetch from each other after the
first epoch). It reports images/s (steady: the epochs after the first, summed
over the ranks), CPU microseconds per image (each rank's CPU over its images,
averaged over the ranks), the ratio to the baseline of the same config for
both, and the load of the machine for every point (benchmarks/lab/machine.py): on
a shared machine the CPU per image is the steadier of the two numbers.

    python benchmarks/ranks_per_node.py --images 1000 --epochs 3 --rounds 3 \\
        --json benchmarks/results/ranks_per_node.json --markdown benchmarks/results/ranks_per_node.md

--builds before=DIR,after= puts two builds into the same interleaved rounds
(DIR: a folder holding an installed hdmlp package, put first on PYTHONPATH;
empty: the installed one), to compare a change side by side on a shared
machine.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile

if __package__ in (None, ""):  # run as a script: benchmarks/_path.py
    import _path  # noqa: F401
from benchmarks.lab import machine  # noqa: E402
from benchmarks import scaling  # noqa: E402


def config_with_threads(base_path: str, out_path: str, threads: str) -> str:
    """`base_path` with its first storage class's (the staging buffer's) threads set to `threads`."""
    with open(base_path) as f:
        text = f.read()
    staging = text.index("storage_classes")
    head, tail = text[:staging], text[staging:]
    tail, n = re.subn(r"threads\s*=\s*[^;]+;", f"threads = {threads};", tail, count=1)
    if n != 1:
        raise SystemExit(f"{base_path}: no staging threads setting to replace")
    with open(out_path, "w") as f:
        f.write(f"# benchmarks/ranks_per_node.py: {base_path} with staging threads = {threads}\n" + head + tail)
    return out_path


def points(cores: int) -> list[tuple[str, int, bool, str]]:
    """(name, ranks, under mpirun, staging threads) of every point; the first is the baseline."""
    return [(f"1 rank x {cores} threads", 1, False, str(cores)),
            (f"1 rank x {cores} threads, mpirun", 1, True, str(cores)),
            (f"{cores} ranks x 1 thread", cores, True, "1"),
            (f"{cores} ranks x auto", cores, True, '"auto"')]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64, help="global batch (split between the ranks)")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--cores", type=int, default=None, help="N (default: the usable CPUs)")
    ap.add_argument("--configs", default="staging,default", help="comma-separated: staging, default")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--builds", default="", help="compare builds side by side: comma-separated NAME=DIR, DIR a folder "
                                                 "holding an installed hdmlp package put first on PYTHONPATH (an "
                                                 "empty DIR: the installed one), e.g. before=/tmp/old,after=")
    ap.add_argument("--data", default=None)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--json", default=None)
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args()

    recorder = machine.LoadRecorder()  # first: the load before this benchmark does anything
    import hdmlp
    from hdmlp.cpu_budget import usable_cpus
    from hdmlp.datasets import make_image_folder

    cores = args.cores or usable_cpus()
    if cores < 2:
        raise SystemExit("ranks per node needs at least 2 usable CPUs (pass --cores 2 to oversubscribe one)")
    root = args.data or os.path.join(hdmlp.user_cache_dir(), "datasets", f"bench-{args.images}-{args.classes}")
    make_image_folder(root, num_images=args.images, num_classes=args.classes, seed=0)
    with hdmlp.Job(root, 1, 1) as probe:
        paths = [p for p, _ in probe.samples]
    for p in paths:  # the page cache warm: every point reads from memory
        with open(p, "rb") as f:
            f.read()
    facts = machine.machine_facts()
    print(machine.describe_facts(facts))

    work = tempfile.mkdtemp(prefix="hdmlp-ranks-")
    base = {"root": root, "epochs": args.epochs, "batch_size": args.batch_size, "size": args.size,
            "images": len(paths), "chain": "train", "system": "hdmlp"}
    bases = {"staging": scaling.staging_config(os.path.join(work, "staging-base.cfg"), 1),
             "default": hdmlp.default_config_path()}
    configs = [c for c in args.configs.split(",") if c]
    for c in configs:
        if c not in bases:
            raise SystemExit(f"--configs: unknown config '{c}' (expected staging or default)")
    builds = [tuple(b.split("=", 1)) for b in args.builds.split(",") if b] or [("", "")]
    rounds: list[dict] = []
    pythonpath = os.environ.get("PYTHONPATH")
    try:
        for r in range(args.rounds):
            row: dict[str, dict] = {}
            for build, folder in builds:
                if folder:
                    os.environ["PYTHONPATH"] = os.pathsep.join([folder] + ([pythonpath] if pythonpath else []))
                elif pythonpath is None:
                    os.environ.pop("PYTHONPATH", None)
                else:
                    os.environ["PYTHONPATH"] = pythonpath
                for c in configs:
                    for name, ranks, mpirun, threads in points(cores):
                        key = label(build, c, name)
                        cfg = config_with_threads(bases[c], os.path.join(work, f"{c}-{threads.strip(chr(34))}.cfg"),
                                                  threads)
                        row[key] = scaling.run_point(dict(base, config=cfg), ranks, work, recorder, key,
                                                     args.timeout, mpirun=mpirun)
                        scaling.report(r, args.rounds, key, row[key])
            rounds.append(row)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load = recorder.finish()

    table = []
    for (build, _), c in [(b, c) for b in builds for c in configs]:
        baseline = None
        for name, ranks, mpirun, threads in points(cores):
            key = label(build, c, name)
            ok = [rd[key] for rd in rounds if rd[key]["status"] == "ok"]
            if not ok:
                table.append({"build": build, "config": c, "point": name, "status": "error",
                              "error": rounds[0][key].get("error")})
                continue
            entry = {"build": build, "config": c, "point": name, "ranks": ranks, "status": "ok",
                     "images_per_s": statistics.median(q["steady"] for q in ok),
                     "rounds": [q["steady"] for q in ok],
                     "cpu_us_per_image": statistics.median(q["cpu_us_per_image"] for q in ok),
                     "cpu_rounds": [q["cpu_us_per_image"] for q in ok],
                     "threads": ok[0]["threads"],
                     "other_cores": [q["load"]["other_cores"] for q in ok]}
            if baseline is None:
                baseline = entry
            entry["ratio"] = entry["images_per_s"] / baseline["images_per_s"]
            entry["cpu_ratio"] = entry["cpu_us_per_image"] / baseline["cpu_us_per_image"]
            table.append(entry)
    result = {"command": "python benchmarks/ranks_per_node.py " + " ".join(sys.argv[1:]), "machine": facts,
              "load": load, "args": vars(args), "cores": cores, "dataset": {"images": len(paths)}, "table": table,
              "rounds": rounds}
    machine.publish(result, render(result), args.json, args.markdown,
                    "Ranks per node: one rank with N threads against N ranks", "benchmarks/ranks_per_node.py", load)


def label(build: str, config: str, point: str) -> str:
    return f"{build + ' ' if build else ''}{config}: {point}"


def render(result: dict) -> str:
    a = result["args"]
    lines = [f"Machine: {machine.describe_facts(result['machine'])}.  ",
             f"Training chain over {result['dataset']['images']} generated ImageNet-like JPEGs (page cache warm), "
             f"global batch {a['batch_size']}, {a['epochs']} epochs per point (images/s: the epochs after the "
             f"first, summed over the ranks), {a['rounds']} round(s) interleaved, medians; ratios against the "
             f"first row of the same config.  "]
    lines += [line + "  " for line in machine.report_lines(result["load"])]
    lines += ["", "| build, config | point | threads per rank | images/s | per round | ratio | CPU us/image | "
                  "per round | CPU ratio | others' cores |", "|---|---|---|---:|---|---:|---:|---|---:|---|"]
    for p in result["table"]:
        where = label(p["build"], p["config"], "")[:-2]
        if p["status"] != "ok":
            lines.append(f"| {where} | {p['point']} | | error | {p.get('error') or ''} | | | | | |")
            continue
        lines.append(f"| {where} | {p['point']} | {', '.join(str(t) for t in p['threads'])} | "
                     f"{p['images_per_s']:.0f} | {', '.join(f'{x:.0f}' for x in p['rounds'])} | {p['ratio']:.2f}x | "
                     f"{p['cpu_us_per_image']:.0f} | {', '.join(f'{x:.0f}' for x in p['cpu_rounds'])} | "
                     f"{p['cpu_ratio']:.2f}x | {', '.join(f'{x:.2f}' for x in p['other_cores'])} |")
    lines += ["", f"Command: `{result['command']}`"]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
