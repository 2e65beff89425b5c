"""The simulator against a measured run on an emulated cluster (issue 24's check of the physical reading).

    python -m benchmarks cluster validate-sim --nodes 4 --images 1200 --epochs 3 --pfs-mbit 100 \\
        --compute-mbps 12 --json benchmarks/results/sim_vs_cluster.json \\
        --markdown benchmarks/results/sim_vs_cluster.md

In one emulated cluster of ``--nodes`` nodes with one rank each, whose PFS is
the netfs server behind a ``--pfs-mbit`` link (benchmarks/lab/cluster/emulation.py):

1. calibrates the PFS as a node sees it: node 1's mount of the server read by
   1, 2, 4, 8 threads (``hdmlp.simulate.measure_machine`` on the dataset's
   files), and writes the config both sides use (``write_config``: a staging
   buffer, a RAM class holding ``--ram-share`` of the dataset per node, the
   PFS table, ``b_fs`` its largest rate);
2. runs the hdmlp job for real (benchmarks/lab/cluster/rank.py): every rank's
   training step is a device computing s_k / c per sample (``--compute-mbps``,
   sleeping to deadlines) and ends in a barrier of all ranks (gloo), as a
   DDP step ends in its gradient allreduce; an epoch's time is the slowest
   rank's, ``--repeats`` times, the median per epoch;
3. simulates the same job (policy ``hdmlp``, physical reading, the same
   config, seed, global batch and the files' real sizes, ``--nodes`` nodes);
4. reports measured against predicted per epoch, with the error.

The simulator's node is the rank here (one rank per node). Skips (exit 0,
with the reason) where the emulated cluster cannot run.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from benchmarks.lab import machine
from benchmarks.lab.cluster import emulation, report
from benchmarks.lab.service import install_signal_handlers
from benchmarks.cluster.commands import dataset, job_options, publish, skipped

GOAL = 0.15  # the one-node validation's goal (docs/simulator.md, "Validation")
BARRIER_PORT = 29517


def measured_epochs(run: dict) -> list[float]:
    """Per epoch, the slowest rank's seconds (with a barrier per step the ranks end an epoch together)."""
    epochs = [[e["seconds"] for e in r["runs"][0]["epochs"]] for r in run["ranks"]]
    return [max(per_rank) for per_rank in zip(*epochs)]


def epoch_parts(run: dict) -> list[dict]:
    """Per epoch, the most any rank waited for batches (stall) and the steps it took."""
    epochs = [r["runs"][0]["epochs"] for r in run["ranks"]]
    return [{"stall_s": max(e["stall_seconds"] for e in per_rank), "steps": per_rank[0]["steps"]}
            for per_rank in zip(*epochs)]


def barrier_seconds(run: dict) -> float:
    """One step barrier's own cost, timed alone before the job (the median over the ranks)."""
    return statistics.median(r["runs"][0]["barrier_probe_seconds"] for r in run["ranks"])


def compare(measured: list[float], predicted: list[float]) -> list[dict]:
    """Rows of (epoch, measured, predicted, relative error of the prediction)."""
    if len(measured) != len(predicted):
        raise ValueError(f"{len(measured)} measured epochs against {len(predicted)} predicted")
    return [{"epoch": e, "measured_s": m, "predicted_s": s, "error": (s - m) / m}
            for e, (m, s) in enumerate(zip(measured, predicted))]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks cluster validate-sim", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=4)
    job_options(p, batch_help="global batch")
    p.add_argument("--pfs-mbit", type=float, default=100.0, help="the PFS server's link")
    p.add_argument("--pfs-open-delay-ms", type=float, default=0.0)
    p.add_argument("--compute-mbps", type=float, default=12.0, help="c, each rank's training speed [MB/s]")
    p.add_argument("--staging-threads", type=int, default=4)
    p.add_argument("--memory-threads", type=int, default=2)
    p.add_argument("--min-seconds", type=float, default=1.0, help="least time per PFS calibration point")
    p.add_argument("--repeats", type=int, default=1, help="real runs; the median epoch time is compared")
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--json", required=True)
    p.add_argument("--markdown")
    args = p.parse_args(argv)
    if args.scheme != "uniform":
        p.error(f"--scheme {args.scheme}: the simulator's hdmlp policy shuffles globally; use uniform")
    if skipped("validate-sim"):
        return 0
    from hdmlp.simulate import measure_machine, simulate, write_config

    rec = machine.LoadRecorder()
    root, files, total = dataset(args)
    install_signal_handlers()
    result = {"command": "python -m benchmarks cluster validate-sim " + " ".join(argv),
              "machine": machine.machine_facts(), "goal": GOAL}
    with emulation.EmulatedCluster(args.nodes, 1, root, pfs="netfs", pfs_mbit=args.pfs_mbit,
                                   pfs_open_delay_ms=args.pfs_open_delay_ms) as cluster:
        mount = os.path.join(cluster.node_folder(1), "pfs")
        t = time.perf_counter()
        with rec.run("calibration"):
            measured = measure_machine(threads=(1, 2, 4, 8), dataset=mount, pfs_files=len(files),
                                       min_seconds=args.min_seconds)
        result["calibration"] = {"seconds": time.perf_counter() - t, "pfs": measured["pfs"],
                                 "memory": measured["memory"]}
        config = os.path.join(cluster.work, "validate.cfg")
        ram_mb = args.ram_share * total / 2**20
        result["config"] = write_config(config, measured, staging_mb=16, staging_threads=args.staging_threads,
                                        memory_capacity_mb=round(ram_mb, 3), memory_threads=args.memory_threads)
        spec = {"epochs": args.epochs, "batch_size": args.batch_size, "seed": args.seed, "schemes": [args.scheme],
                "config": config, "timeout_s": 60.0, "compute_mbps": args.compute_mbps, "hash": False,
                "barrier": {"addr": cluster.address(1), "port": BARRIER_PORT, "ifname": "mpi0"}}
        runs, parts, barriers = [], [], []
        for k in range(args.repeats):
            with rec.run(f"hdmlp-{k}"):
                run = report.run_ranks(cluster, spec, timeout=args.timeout)
            failed = [r.get("error") if r else "no report" for r in run["ranks"] if r is None or r.get("error")]
            if run["returncode"] != 0 or failed:
                print(f"[cluster validate-sim] the job failed: {failed}\n{run['stderr'][-3000:]}", file=sys.stderr)
                return 1
            runs.append(measured_epochs(run))
            parts.append(epoch_parts(run))
            barriers.append(barrier_seconds(run))
            print(f"[cluster validate-sim] run {k}: epochs " + " ".join(f"{x:.2f}" for x in runs[-1]) + " s")
        result["cluster"] = cluster.describe()
        real = [statistics.median(e) for e in zip(*runs)]
        sim = simulate(config, nodes=args.nodes, batch_size=args.batch_size, epochs=args.epochs,
                       compute_mbps=args.compute_mbps, policies="hdmlp", seed=args.seed, dataset=root)
        predicted = sim["policies"]["hdmlp"]["epochs"]
    result["load"] = rec.finish()
    result.update(dataset={"path": root, "files": len(files), "bytes": total}, runs=runs,
                  rows=compare(real, predicted))
    barrier = statistics.median(barriers)
    result["barrier_probe_seconds"] = barrier
    for r in result["rows"]:
        e = r["epoch"]
        r["stall_s"] = statistics.median(p[e]["stall_s"] for p in parts)
        # The model has no term for the step's synchronisation: add the barriers' cost, timed alone.
        r["steps"] = parts[0][e]["steps"]
        r["predicted_with_barriers_s"] = r["predicted_s"] + r["steps"] * barrier
        r["error_with_barriers"] = (r["predicted_with_barriers_s"] - r["measured_s"]) / r["measured_s"]
    result["worst_error"] = max(abs(r["error"]) for r in result["rows"])
    result["worst_error_with_barriers"] = max(abs(r["error_with_barriers"]) for r in result["rows"])
    for r in result["rows"]:
        print(f"[cluster validate-sim] epoch {r['epoch']}: measured {r['measured_s']:.2f} s, "
              f"predicted {r['predicted_s']:.2f} s ({100 * r['error']:+.1f}%)")
    publish(args, result, markdown, "validate-sim")
    return 0


def markdown(result: dict) -> str:
    c, ds = result["cluster"], result["dataset"]
    pfs = ", ".join(f"{t}: {bw:.1f}" for t, bw in result["calibration"]["pfs"])
    lines = ["# The simulator against an emulated cluster (issue 24, physical reading)", "",
             f"Generated by: `{result['command']}`", "", *machine.report_lines(result["load"]), "",
             f"Machine: {machine.describe_facts(result['machine'])}", "",
             f"Cluster: {c.get('nodes')} nodes x 1 rank; PFS: {json.dumps(c.get('pfs'))}. "
             f"Dataset: {ds['files']} files, {ds['bytes'] / 1e6:.1f} MB. "
             f"Calibrated PFS table (readers: aggregate MB/s, one node's mount): {pfs} "
             f"({result['calibration']['seconds']:.1f} s).", "",
             "Config (both sides):", "", "```", result["config"].strip(), "```", "",
             f"One step barrier, timed alone before the job: {1000 * result['barrier_probe_seconds']:.2f} ms "
             "(median of the ranks and runs).", "",
             "| epoch | measured s (median of runs) | runs | stall s | predicted s | error | "
             "predicted + barriers s | error |", "|---:|---:|---|---:|---:|---:|---:|---:|"]
    for r in result["rows"]:
        runs = " / ".join(f"{run[r['epoch']]:.2f}" for run in result["runs"])
        lines.append(f"| {r['epoch']} | {r['measured_s']:.2f} | {runs} | {r['stall_s']:.2f} | "
                     f"{r['predicted_s']:.2f} | {100 * r['error']:+.1f}% | {r['predicted_with_barriers_s']:.2f} | "
                     f"{100 * r['error_with_barriers']:+.1f}% |")
    lines += ["", f"Largest error: {100 * result['worst_error']:.1f}%; with the barriers' cost added "
              f"({r['steps']} steps an epoch x the barrier timed alone) "
              f"{100 * result['worst_error_with_barriers']:.1f}% (goal: {100 * result['goal']:.0f}%, the one-node "
              "validation's). Stall: the most any rank waited for batches in the epoch (median of runs)."]
    return "\n".join(lines) + "\n"
