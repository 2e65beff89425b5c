"""MPI loaded at run time against the direct link it replaced: the same measurements, side by side.

    python benchmarks/mpi_runtime_cost.py --make-baseline /tmp/hdmlp-d8d2416          # once: main at d8d2416
    python benchmarks/mpi_runtime_cost.py --baseline /tmp/hdmlp-d8d2416/.venv/bin/python [--rounds 7]

``--make-baseline DIR`` checks out the baseline commit (``--ref``, default d8d2416: main before issue
35, whose hdmlp._core links libmpi.so.40) as a git worktree in DIR and runs its ``scripts/dev.sh
setup``, which builds it into DIR/.venv. The measurement runs this checkout's .venv (hdmlp
loading MPI at run time) and the baseline's interpreter in alternating rounds (A B B A ...), so
that drift in the machine's load falls on both, and reports medians and candidate / baseline
ratios (the goal: each within 2%):

- ``import hdmlp``: seconds in a fresh interpreter (the baseline's import loads Open MPI's
  libraries with the module; the candidate's loads none);
- a 2-rank job under ``mpirun -np 2`` (Open MPI): 1,000 files of 20-180 KB (page-cached), each
  rank's RAM class holding 55% of the dataset, ``uniform``, 6 epochs of batches of 32 and no
  transforms, so that from the second epoch on about half of every rank's samples come from
  the other rank's cache: the job's images/s over epochs 2-6 and the peer transport's
  throughput (bytes received from the peer per second of those epochs, both ranks), and CPU
  seconds per 1,000 images (all threads of both ranks: steadier than wall time when other work
  shares the machine).

Writes ``--json`` (default benchmarks/results/mpi_runtime_cost.json) and a Markdown report beside
it, with the load average (benchmarks/lab/machine.py) and whether the machine was busy.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if __package__ in (None, ""):  # run as a script: benchmarks/_path.py
    import _path  # noqa: F401

from benchmarks.lab import machine  # noqa: E402

IMPORT = "import time; t = time.perf_counter(); import hdmlp; print(time.perf_counter() - t)"

RANK = r"""
import json, resource, sys, time
import hdmlp
data, config, out, epochs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with hdmlp.Job(data, batch_size=32, epochs=epochs, seed=1, config_path=config, timeout_s=120) as job:
    per = []
    for e in range(epochs):
        t = time.perf_counter()
        n = 0
        for b in job.batches(e):
            n += len(b.samples)
        per.append({"seconds": time.perf_counter() - t, "samples": n})
    m = job.metrics()
ru = resource.getrusage(resource.RUSAGE_SELF)
remote = [{"count": ep["reads"].get("remote", {}).get("count", 0), "bytes": ep["reads"].get("remote", {}).get("bytes", 0)}
          for ep in m["epochs"]]
with open(f"{out}/rank{m['rank']}.json", "w") as f:
    json.dump({"rank": m["rank"], "epochs": per, "remote": remote, "cpu_seconds": ru.ru_utime + ru.ru_stime,
               "transport": m["transport"], "mpi": m.get("mpi")}, f)
"""


def make_baseline(folder: str, ref: str) -> str:
    """A worktree of ``ref`` at ``folder`` with its .venv built; returns its Python."""
    if not os.path.isdir(folder):
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", folder, ref], check=True)
    subprocess.run([os.path.join(folder, "scripts", "dev.sh"), "setup"], check=True)
    python = os.path.join(folder, ".venv", "bin", "python")
    print(f"baseline ({ref}): {python}\n  remove with: git -C {ROOT} worktree remove --force {folder}")
    return python


def dataset(root: str) -> int:
    rng = random.Random(35)
    total = 0
    for i in range(1000):
        path = os.path.join(root, f"class_{i % 4}", f"img_{i:04d}.jpg")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = rng.randbytes(rng.randint(20_000, 180_000))
        with open(path, "wb") as f:
            f.write(data)
        total += len(data)
    return total


def import_seconds(python: str, n: int) -> list[float]:
    return [float(subprocess.run([python, "-c", IMPORT], capture_output=True, text=True, check=True, cwd="/").stdout)
            for _ in range(n)]


def job_round(python: str, data: str, config: str, work: str, epochs: int = 6) -> dict:
    out = tempfile.mkdtemp(dir=work)
    script = os.path.join(work, "rank.py")
    with open(script, "w") as f:
        f.write(RANK)
    cmd = ["mpirun", "--oversubscribe", "-np", "2", python, script, data, config, out, str(epochs)]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd="/",
                          env=dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1"))
    if proc.returncode != 0:
        raise RuntimeError(f"the 2-rank job failed ({python}): {proc.stderr[-2000:]}")
    ranks = [json.load(open(os.path.join(out, f"rank{r}.json"))) for r in range(2)]
    shutil.rmtree(out, ignore_errors=True)
    steady = range(1, epochs)  # caches are full after the first epoch
    seconds = sum(max(r["epochs"][e]["seconds"] for r in ranks) for e in steady)
    samples = sum(r["epochs"][e]["samples"] for r in ranks for e in steady)
    remote_bytes = sum(r["remote"][e]["bytes"] for r in ranks for e in steady)
    all_samples = sum(ep["samples"] for r in ranks for ep in r["epochs"])
    return {"images_per_s": samples / seconds, "peer_mb_per_s": remote_bytes / seconds / 1e6,
            "remote_share": sum(r["remote"][e]["count"] for r in ranks for e in steady) / samples,
            "cpu_s_per_1000": 1000 * sum(r["cpu_seconds"] for r in ranks) / all_samples,
            "mpi": ranks[0]["mpi"], "transport": ranks[0]["transport"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", help="the baseline's Python (hdmlp linking libmpi), e.g. DIR/.venv/bin/python")
    p.add_argument("--make-baseline", metavar="DIR", help="make the baseline in DIR (a git worktree of --ref) and exit")
    p.add_argument("--ref", default="d8d2416", help="the baseline commit (default %(default)s)")
    p.add_argument("--candidate", default=os.path.join(ROOT, ".venv", "bin", "python"),
                   help="the Python with hdmlp loading MPI at run time (default: this checkout's .venv)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--imports", type=int, default=10, help="fresh interpreters per side and round")
    p.add_argument("--json", default=os.path.join(HERE, "results", "mpi_runtime_cost.json"))
    args = p.parse_args(argv)
    if args.make_baseline:
        make_baseline(os.path.abspath(args.make_baseline), args.ref)
        return 0
    if not args.baseline:
        p.error("--baseline PYTHON is needed (make one with --make-baseline DIR)")
    if shutil.which("mpirun") is None:
        print("mpi_runtime_cost: needs Open MPI's mpirun")
        return 2
    sides = {"baseline": args.baseline, "candidate": args.candidate}
    rec = machine.LoadRecorder()
    work = tempfile.mkdtemp(prefix="hdmlp-mpi-cost-")
    data = os.path.join(work, "data")
    total = dataset(data)
    config = os.path.join(work, "peers.cfg")
    with open(config, "w") as f:
        f.write("storage_classes = ( { capacity = 16; threads = 2; },\n"
                f"  {{ backend = \"memory\"; capacity = {0.55 * total / 2**20:.3f}; threads = 2; }} );\n")
    for python in sides.values():  # warm: page cache, the interpreters' own files
        import_seconds(python, 2)
        job_round(python, data, config, work, epochs=2)
    rounds: dict[str, list[dict]] = {name: [] for name in sides}
    order = []
    for r in range(args.rounds):
        for name in (("baseline", "candidate") if r % 2 == 0 else ("candidate", "baseline")):
            with rec.run(name):
                imports = import_seconds(sides[name], args.imports)
                job = job_round(sides[name], data, config, work)
            job["import_s"] = statistics.median(imports)
            rounds[name].append(job)
            order.append(name)
            print(f"round {r + 1} {name}: import {job['import_s'] * 1e3:.1f} ms, {job['images_per_s']:.0f} img/s, "
                  f"peers {job['peer_mb_per_s']:.1f} MB/s ({100 * job['remote_share']:.0f}% of reads), "
                  f"{job['cpu_s_per_1000']:.2f} CPU s / 1000 images", flush=True)
    load = rec.finish()
    shutil.rmtree(work, ignore_errors=True)
    keys = ("import_s", "images_per_s", "peer_mb_per_s", "cpu_s_per_1000")
    medians = {name: {k: statistics.median(x[k] for x in rounds[name]) for k in keys} for name in sides}
    ratio = {k: medians["candidate"][k] / medians["baseline"][k] for k in keys}
    result = {"command": "python benchmarks/mpi_runtime_cost.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "ref": args.ref, "sides": sides,
              "machine": machine.machine_facts(), "rounds": rounds, "order": order, "medians": medians,
              "candidate_over_baseline": ratio, "load": load,
              "mpi": {name: rounds[name][0]["mpi"] for name in sides}}
    goal = {"import_s": "<= 1.02 (lower is better)", "images_per_s": ">= 0.98", "peer_mb_per_s": ">= 0.98",
            "cpu_s_per_1000": "<= 1.02 (lower is better)"}
    names = {"import_s": "`import hdmlp` (s, median of fresh interpreters)",
             "images_per_s": "2-rank job, epochs 2-6 (images/s)",
             "peer_mb_per_s": "peer transport, epochs 2-6 (MB/s received from the peer)",
             "cpu_s_per_1000": "2-rank job, CPU s per 1,000 images (both ranks, all threads)"}
    lines = [f"# MPI loaded at run time against the direct link ({args.ref})", "",
             f"`{result['command']}`, {result['date']}, {args.rounds} rounds alternating A B B A, "
             f"{args.imports} fresh interpreters per side and round. Baseline: `{args.baseline}` (main at "
             f"{args.ref}: hdmlp._core links libmpi.so.40). Candidate: `{args.candidate}` (MPI loaded at run "
             f"time: {rounds['candidate'][0]['mpi']['library'] if rounds['candidate'][0]['mpi'] else '?'}, "
             f"{rounds['candidate'][0]['mpi']['why'] if rounds['candidate'][0]['mpi'] else ''}).", "",
             "| measure | baseline | candidate | candidate / baseline | goal |", "|---|---|---|---|---|"]
    for k in keys:
        lines.append(f"| {names[k]} | {medians['baseline'][k]:.4g} | {medians['candidate'][k]:.4g} | "
                     f"**{ratio[k]:.3f}** | {goal[k]} |")
    lines += ["", f"Peers served {100 * statistics.median(x['remote_share'] for x in rounds['candidate']):.0f}% of "
                  "the reads of epochs 2-6.", ""] + machine.report_lines(load)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    machine.write_results(args.json, result, args.json[:-5] + ".md" if args.json.endswith(".json") else None,
                          "\n".join(lines))
    print("\n".join(lines))
    machine.print_warnings(load)
    return 0


if __name__ == "__main__":
    sys.exit(main())
