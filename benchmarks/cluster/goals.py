"""Issue 22's cluster goals 2 and 4, as modes of ``python -m benchmarks cluster``.

    python -m benchmarks cluster vs-dataloader --nodes 4 --ranks-per-node 2 --images 1200 --epochs 3 \\
        --pfs-mbit 100 --ram-share 0.3 --json benchmarks/results/cluster_vs_dataloader.json \\
        --markdown benchmarks/results/cluster_vs_dataloader.md
    python -m benchmarks cluster scale --nodes-list 2,4,8 --images 1200 \\
        --json benchmarks/results/cluster_scale.json --markdown benchmarks/results/cluster_scale.md

``vs-dataloader`` (goal 2): in one emulated cluster whose PFS is netfs with a
bandwidth cap, hdmlp's job (each node's RAM class ``ram_share`` of the
dataset, below the dataset and above a quarter of it) and then torchvision's
ImageFolder + DistributedSampler + DataLoader over the same files, both
delivering raw file bytes, by the same rank script (rank.py). Compares PFS
bytes (the loaders' own counts, the netfs server's and the storage links'),
epoch times, stall per rank and the whole job's time; checks exactly once
for both. netfs opens files with direct I/O, so no node's page cache helps
the DataLoader's later epochs (as on a PFS without a client cache).

``scale`` (goal 4): the same hdmlp job on 2, 4, 8 nodes of one rank:
start-up (Job construction, which includes the placement exchange, to the
first batch) and the bytes of the compute links during start-up (see
docs/cluster.md for what that holds), with the Job's start-up by phase
(``metrics()["startup"]``: wall, the constructing thread's CPU and the
process's CPU, per rank) and how far apart the ranks reached ``hdmlp.Job``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from benchmarks.lab import machine
from benchmarks.lab.cluster import emulation, report
from benchmarks.lab.service import install_signal_handlers
from benchmarks.cluster.commands import dataset, job_options, publish, skipped, write_config


def _server_bytes(cluster) -> int | None:
    stats = cluster.pfs.stats() if hasattr(cluster.pfs, "stats") else None
    return None if stats is None else int(stats.get("bytes_served", 0))


def _side(cluster, run: dict, files: dict, total: int, server_bytes: int | None) -> dict:
    """One loader's numbers from one run of run_ranks."""
    failed = [r.get("error") if r else "no report" for r in run["ranks"] if r is None or r.get("error")]
    if run["returncode"] != 0 or failed:
        return {"status": "error", "returncode": run["returncode"], "errors": failed, "stderr": run["stderr"][-4000:]}
    merged = report.merge(cluster, run, files, total, cluster.pfs.over_network)
    job = merged["jobs"][0]
    per_rank_job = [r["runs"][0]["startup_seconds"] + sum(e["seconds"] for e in r["runs"][0]["epochs"])
                    for r in run["ranks"]]
    stall = {r["rank"]: [round(e["stall_seconds"], 3) for e in r["runs"][0]["epochs"]] for r in run["ranks"]}
    return {
        "status": "ok", "loader": job["scheme"],
        "job_seconds": max(per_rank_job), "mpirun_seconds": run["seconds"],
        "startup_seconds": job["startup_seconds"],
        "epoch_seconds": [e["seconds"] for e in job["epochs"]],
        "epoch_img_per_s": [e["img_per_s"] for e in job["epochs"]],
        "stall_share_by_epoch": [e["stall_share"] for e in job["epochs"]],
        "stall_seconds_by_rank": stall,
        "reads_by_source_by_epoch": [e["reads_by_source"] for e in job["epochs"]],
        "exactly_once": all(e["ok"] for e in job["exactly_once"]), "exactly_once_by_epoch": job["exactly_once"],
        "loader_pfs_bytes": job["pfs_bytes"], "loader_pfs_bytes_x_dataset": job["pfs_bytes_x_dataset"],
        "server_bytes": server_bytes, "server_bytes_x_dataset": None if server_bytes is None else server_bytes / total,
        "pfs_link_bytes": merged["pfs_link_bytes"], "pfs_link_bytes_x_dataset": merged["pfs_link_bytes_x_dataset"],
        "node_to_node_bytes": merged["node_to_node_bytes"], "epochs": job["epochs"],
    }


def vs_dataloader(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks cluster vs-dataloader",
                                description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--ranks-per-node", type=int, default=2)
    job_options(p, batch_help="global batch (the DataLoader's is this / ranks)",
                 scheme_help="hdmlp's distribution scheme (uniform shuffles globally, as DistributedSampler does)")
    p.add_argument("--pfs-mbit", type=float, default=100.0, help="the PFS server's bandwidth (the bottleneck)")
    p.add_argument("--pfs-open-delay-ms", type=float, default=0.0)
    p.add_argument("--link-mbit", type=float, help="each node's link; default unshaped")
    p.add_argument("--num-workers", type=int, default=1, help="the DataLoader's workers per rank")
    p.add_argument("--step-ms", type=float, default=0.0, help="simulated training step per batch (both sides)")
    p.add_argument("--timeout", type=float, default=1200)
    p.add_argument("--json", required=True)
    p.add_argument("--markdown")
    args = p.parse_args(argv)
    if skipped("vs-dataloader"):
        return 0
    if not 0.25 < args.ram_share < 1.0:
        print(f"[cluster vs-dataloader] note: --ram-share {args.ram_share} is outside goal 2's (0.25, 1) "
              "(RAM per node below the dataset, above a quarter of it)")
    rec = machine.LoadRecorder()
    root, files, total = dataset(args)
    install_signal_handlers()
    command = "python -m benchmarks cluster vs-dataloader " + " ".join(argv)
    result = {"command": command, "machine": machine.machine_facts(), "goal": {
        "pfs_bytes_x_dataset_at_most": 1.05, "dataloader_job_over_hdmlp_job_at_least": 3.0}}
    with emulation.EmulatedCluster(args.nodes, args.ranks_per_node, root, link_mbit=args.link_mbit, pfs="netfs",
                                   pfs_open_delay_ms=args.pfs_open_delay_ms, pfs_mbit=args.pfs_mbit) as cluster:
        config = os.path.join(cluster.work, "hdmlp.cfg")
        result["hdmlp_config"] = write_config(config, total, args.ram_share, args.ranks_per_node)
        base = {"epochs": args.epochs, "batch_size": args.batch_size, "seed": args.seed, "step_ms": args.step_ms}
        sides = {}
        for name, spec in (("hdmlp", dict(base, schemes=[args.scheme], config=config, timeout_s=60.0)),
                           ("dataloader", dict(base, loader="dataloader", num_workers=args.num_workers))):
            before = _server_bytes(cluster)
            with rec.run(name):
                run = report.run_ranks(cluster, spec, timeout=args.timeout)
            after = _server_bytes(cluster)
            sides[name] = _side(cluster, run, files, total, None if before is None else after - before)
            s = sides[name]
            if s["status"] != "ok":
                print(f"[cluster vs-dataloader] {name} failed: {s['errors']}\n{s['stderr'][-2000:]}", file=sys.stderr)
            else:
                print(f"[cluster vs-dataloader] {name}: job {s['job_seconds']:.1f} s, epochs "
                      + " ".join(f"{x:.1f}" for x in s["epoch_seconds"])
                      + f" s; PFS {s['server_bytes_x_dataset']:.2f}x the dataset (server), "
                      f"{s['pfs_link_bytes_x_dataset']:.2f}x (links); exactly once: {s['exactly_once']}")
        result.update(cluster=cluster.describe(), dataset={"path": root, "files": len(files), "bytes": total},
                      sides=sides)
    result["load"] = rec.finish()
    h, d = sides.get("hdmlp", {}), sides.get("dataloader", {})
    if h.get("status") == "ok" and d.get("status") == "ok":
        result["summary"] = {
            "hdmlp_pfs_bytes_x_dataset": h["server_bytes_x_dataset"],
            "dataloader_pfs_bytes_x_dataset": d["server_bytes_x_dataset"],
            "dataloader_job_over_hdmlp_job": d["job_seconds"] / h["job_seconds"],
            "pfs_goal_met": h["server_bytes_x_dataset"] <= 1.05,
            "speed_goal_met": d["job_seconds"] / h["job_seconds"] >= 3.0,
        }
    publish(args, result, markdown_vs, "vs-dataloader")
    return 0 if "summary" in result else 1


def markdown_vs(result: dict) -> str:
    c, ds = result["cluster"], result["dataset"]
    lines = ["# hdmlp against DistributedSampler + DataLoader on an emulated cluster (issue 22, goal 2)", "",
             f"Generated by: `{result['command']}`", "", *machine.report_lines(result["load"]), "",
             f"Machine: {machine.describe_facts(result['machine'])}", "",
             f"Cluster: {c.get('nodes')} nodes x {c.get('ranks_per_node')} ranks; PFS: {json.dumps(c.get('pfs'))}. "
             f"Dataset: {ds['files']} files, {ds['bytes'] / 1e6:.1f} MB.", "",
             "hdmlp config: `" + result["hdmlp_config"].strip().splitlines()[0].lstrip("# ") + "`", "",
             "| | whole job [s] | start-up [s] | epoch times [s] | stall share per epoch | PFS bytes x dataset "
             "(server / links / loader) | exactly once |",
             "|---|---|---|---|---|---|---|"]
    for name, s in result["sides"].items():
        if s["status"] != "ok":
            lines.append(f"| {name} | failed: {s['errors']} | | | | | |")
            continue
        lines.append(f"| {name} ({s['loader']}) | {s['job_seconds']:.1f} | {s['startup_seconds']:.2f} | "
                     + " / ".join(f"{x:.1f}" for x in s["epoch_seconds"]) + " | "
                     + " / ".join(f"{x:.0%}" for x in s["stall_share_by_epoch"]) + " | "
                     + f"{s['server_bytes_x_dataset']:.3f} / {s['pfs_link_bytes_x_dataset']:.3f} / "
                       f"{s['loader_pfs_bytes_x_dataset']:.3f} | {s['exactly_once']} |")
    lines += ["", "Stall seconds per rank and epoch:", ""]
    for name, s in result["sides"].items():
        if s["status"] == "ok":
            lines.append(f"- {name}: " + "; ".join(f"rank {r}: " + " / ".join(f"{x:.1f}" for x in v)
                                                  for r, v in s["stall_seconds_by_rank"].items()))
    if "summary" in result:
        sm = result["summary"]
        lines += ["", f"Goal: hdmlp's PFS bytes at most 1.05x the dataset: {sm['hdmlp_pfs_bytes_x_dataset']:.3f}x "
                      f"({'met' if sm['pfs_goal_met'] else 'not met'}); the DataLoader's whole job at least 3x "
                      f"hdmlp's: {sm['dataloader_job_over_hdmlp_job']:.2f}x "
                      f"({'met' if sm['speed_goal_met'] else 'not met'})."]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if argv[:1] == ["vs-dataloader"]:
        return vs_dataloader(argv[1:])
    if argv[:1] == ["scale"]:
        return scale(argv[1:])
    raise SystemExit(f"unknown cluster goal {argv[:1]}: choose vs-dataloader or scale")


def exchange_model(cached: list[int], reads: list[int]) -> dict:
    """The planning benchmark's model (benchmarks/peer_directory.cc) of the placement exchange, per rank.

    Offers and queries are 8 bytes an entry, answers 4: a rank sends 8 x (samples it caches + distinct samples it
    reads) + 4 x (queries it answers as a home), its own messages included. Over all ranks the queries answered
    equal the reads, so the mean is 8 x mean cached + 12 x mean reads, exactly. Exchanging whole placements
    (allgather) would cost every rank 8 x all ranks' cached samples."""
    n = len(cached)
    return {"mean_sent_bytes": (8 * sum(cached) + 12 * sum(reads)) / n, "allgather_bytes_per_rank": 8 * sum(cached)}


def startup_phases(jobs: list[dict], rank_files: list[dict]) -> dict:
    """Per phase of the Job's start-up, over the ranks: the most wall seconds, and the mean wall, thread CPU and
    process CPU seconds; and when the ranks got to ``hdmlp.Job`` against the first (``arrival``): its
    ``collectives`` say when MPI's start (phase ``communicator``) and the start-up check ended on each rank,
    in seconds after the last rank began its Job's constructor (``started_at``; the nodes share one clock)."""
    phases: dict[str, dict] = {}
    for name in jobs[0]["metrics"]["startup"]["phases"]:
        per_rank = [j["metrics"]["startup"]["phases"][name] for j in jobs]
        phases[name] = {"wall_max": max(p["wall_seconds"] for p in per_rank),
                        **{f"{k}_mean": sum(p[f"{k}_seconds"] for p in per_rank) / len(per_rank)
                           for k in ("wall", "cpu", "process_cpu")}}
    first_main = min(r["main_at"] for r in rank_files)
    arrival = {"import_seconds_mean": sum(r["imported_at"] - r["main_at"] for r in rank_files) / len(rank_files),
               "called_after_first_main": [round(j["called_at"] - first_main, 3) for j in jobs],
               "called_spread_seconds": max(j["called_at"] for j in jobs) - min(j["called_at"] for j in jobs)}
    startups = [j["metrics"]["startup"] for j in jobs]
    last_start = max(s["started_at"] for s in startups)

    def ends(upto: str) -> list[float]:
        out = []
        for s in startups:
            names = list(s["phases"])
            through = sum(s["phases"][k]["wall_seconds"] for k in names[:names.index(upto) + 1])
            out.append(round(s["started_at"] + through - last_start, 4))
        return out
    arrival["constructor_start_spread_seconds"] = last_start - min(s["started_at"] for s in startups)
    arrival["collectives"] = {"communicator_ends_after_last_start": ends("communicator"),
                              "startup_check_ends_after_last_start": ends("startup_check")}
    return {"phases": phases, "arrival": arrival}


def scale(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks cluster scale", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes-list", default="2,4,8")
    job_options(p)
    p.add_argument("--timeout", type=float, default=1200)
    p.add_argument("--json", required=True)
    p.add_argument("--markdown")
    args = p.parse_args(argv)
    if skipped("scale"):
        return 0
    rec = machine.LoadRecorder()
    root, files, total = dataset(args)
    install_signal_handlers()
    result = {"command": "python -m benchmarks cluster scale " + " ".join(argv), "machine": machine.machine_facts(),
              "dataset": {"path": root, "files": len(files), "bytes": total}, "runs": []}
    for n in [int(x) for x in args.nodes_list.split(",")]:
        with emulation.EmulatedCluster(n, 1, root, pfs="netfs") as cluster:
            config = os.path.join(cluster.work, "hdmlp.cfg")
            write_config(config, total, args.ram_share, 1)
            spec = {"epochs": args.epochs, "batch_size": args.batch_size, "seed": args.seed,
                    "schemes": [args.scheme], "config": config, "timeout_s": 60.0}
            with rec.run(f"{n} nodes"):
                run = report.run_ranks(cluster, spec, timeout=args.timeout)
        failed = [r.get("error") if r else "no report" for r in run["ranks"] if r is None or r.get("error")]
        if run["returncode"] != 0 or failed:
            print(f"[cluster scale] {n} nodes failed: {failed}\n{run['stderr'][-2000:]}", file=sys.stderr)
            result["runs"].append({"nodes": n, "status": "error", "errors": failed})
            continue
        jobs = [r["runs"][0] for r in run["ranks"]]
        cached = [sum(c["planned_samples"] or 0 for c in j["classes"]) for j in jobs]
        reads = [len({i for e in j["epochs"] for i in e["ids"]}) for j in jobs]
        ex = [j["metrics"]["placement_exchange"] for j in jobs]
        model = exchange_model(cached, reads)
        measured_mean = sum(e["sent_bytes"] + e["self_bytes"] for e in ex) / n
        row = {"nodes": n, "status": "ok",
               "startup_seconds": [round(j["startup_seconds"], 3) for j in jobs],
               "first_batch_seconds": [round(j["first_batch_seconds"], 3) for j in jobs],
               "exchange": ex, "cached_samples": cached, "distinct_reads": reads,
               "exchange_seconds_max": max(e["seconds"] for e in ex),
               "sent_bytes_per_rank_max": max(e["sent_bytes"] for e in ex),
               "sent_plus_self_bytes_mean": measured_mean, "model": model,
               "measured_over_model": measured_mean / model["mean_sent_bytes"] if model["mean_sent_bytes"] else None,
               "exactly_once": all(e["ok"] for e in report.exactly_once(run["ranks"], 0, files)),
               "startup": [j["metrics"]["startup"] for j in jobs], **startup_phases(jobs, run["ranks"])}
        result["runs"].append(row)
        print(f"[cluster scale] {n} nodes: first batch after {max(row['first_batch_seconds']):.2f} s (Job "
              f"{max(row['startup_seconds']):.2f} s, exchange {row['exchange_seconds_max'] * 1e3:.1f} ms); exchange "
              f"sent per rank at most {row['sent_bytes_per_rank_max'] / 1e3:.1f} kB (to others), mean sent+self "
              f"{measured_mean / 1e3:.1f} kB vs the model's {model['mean_sent_bytes'] / 1e3:.1f} kB; allgather would "
              f"be {model['allgather_bytes_per_rank'] / 1e3:.1f} kB; exactly once: {row['exactly_once']}")
        top = sorted(row["phases"].items(), key=lambda kv: -kv[1]["wall_mean"])[:4]
        print(f"[cluster scale] {n} nodes: start-up phases, mean wall / thread CPU / process CPU [ms]: " + "; ".join(
            f"{k} {p['wall_mean'] * 1e3:.0f}/{p['cpu_mean'] * 1e3:.0f}/{p['process_cpu_mean'] * 1e3:.0f}"
            for k, p in top) + f"; ranks called hdmlp.Job within {row['arrival']['called_spread_seconds']:.2f} s")
    result["load"] = rec.finish()
    publish(args, result, markdown_scale, "scale")
    return 0 if all(r["status"] == "ok" for r in result["runs"]) else 1


def markdown_scale(result: dict) -> str:
    ds = result["dataset"]
    lines = ["# Start-up and placement exchange on 2 to 8 emulated nodes (issue 22, goal 4)", "",
             f"Generated by: `{result['command']}`", "", *machine.report_lines(result["load"]), "",
             f"Machine: {machine.describe_facts(result['machine'])}", "",
             f"Dataset: {ds['files']} files, {ds['bytes'] / 1e6:.1f} MB; 1 rank per node; netfs PFS without delays.",
             "", "| nodes | Job construction [s] (max) | to first batch [s] (max) | exchange [ms] (max) | "
                 "sent to others per rank [kB] (max) | sent+self per rank [kB] (mean) | model [kB] | "
                 "measured / model | allgather per rank [kB] | exactly once |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["runs"]:
        if r["status"] != "ok":
            lines.append(f"| {r['nodes']} | failed: {r['errors']} |||||||||")
            continue
        m = r["model"]
        lines.append(f"| {r['nodes']} | {max(r['startup_seconds']):.2f} | {max(r['first_batch_seconds']):.2f} | "
                     f"{r['exchange_seconds_max'] * 1e3:.1f} | {r['sent_bytes_per_rank_max'] / 1e3:.1f} | "
                     f"{r['sent_plus_self_bytes_mean'] / 1e3:.1f} | {m['mean_sent_bytes'] / 1e3:.1f} | "
                     f"{r['measured_over_model']:.3f} | {m['allgather_bytes_per_rank'] / 1e3:.1f} | "
                     f"{r['exactly_once']} |")
    ok = [r for r in result["runs"] if r["status"] == "ok" and "phases" in r]
    if ok:
        lines += ["", "Job construction by phase (`metrics()[\"startup\"]`), in ms, mean over the ranks: wall "
                      "(the most of any rank in brackets), the constructing thread's CPU, and the process's CPU "
                      "(all its threads: the scan's and placement's helpers, MPI's own threads).", "",
                  "| phase | " + " | ".join(f"{r['nodes']} nodes: wall (max) | CPU thread | CPU process" for r in ok)
                  + " |", "|---|" + "---|---|---|" * len(ok)]
        for name in ok[0]["phases"]:
            cells = []
            for r in ok:
                p = r["phases"][name]
                cells += [f"{p['wall_mean'] * 1e3:.1f} ({p['wall_max'] * 1e3:.1f})", f"{p['cpu_mean'] * 1e3:.1f}",
                          f"{p['process_cpu_mean'] * 1e3:.1f}"]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        totals = []
        for r in ok:
            walls = [s["wall_seconds"] for s in r["startup"]]
            totals += [f"{sum(walls) / len(walls) * 1e3:.1f} ({max(walls) * 1e3:.1f})",
                       f"{sum(s['cpu_seconds'] for s in r['startup']) / len(walls) * 1e3:.1f}",
                       f"{sum(s['process_cpu_seconds'] for s in r['startup']) / len(walls) * 1e3:.1f}"]
        lines.append("| **all phases** | " + " | ".join(totals) + " |")
        lines += ["", "When the ranks called `hdmlp.Job`, in s after the first rank's script began (in rank order), "
                      "with the mean time the ranks' scripts took to import hdmlp; and when MPI's start (phase "
                      "`communicator`) and the start-up check ended, in s after the last rank began constructing "
                      "its Job (earliest to latest rank):", ""]
        for r in ok:
            a = r["arrival"]
            c = a["collectives"]
            span = lambda xs: f"{min(xs):.3f} to {max(xs):.3f}"
            lines.append(f"- {r['nodes']} nodes: called {', '.join(f'{t:.2f}' for t in a['called_after_first_main'])} "
                         f"(spread {a['called_spread_seconds']:.2f} s; import {a['import_seconds_mean']:.2f} s); "
                         f"constructors began within {a['constructor_start_spread_seconds']:.3f} s; MPI's start "
                         f"ended {span(c['communicator_ends_after_last_start'])} s and the check "
                         f"{span(c['startup_check_ends_after_last_start'])} s after the last began")
    return "\n".join(lines) + "\n"
