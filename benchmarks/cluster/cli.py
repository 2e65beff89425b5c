"""``python -m benchmarks cluster``: an hdmlp job on an emulated cluster, one JSON report.

    python -m benchmarks cluster --nodes 3 --ranks-per-node 2 --json out.json
    python -m benchmarks cluster --nodes 3 --ranks-per-node 2 --launcher slurm --slurm-mpi pmix --json out.json
    python -m benchmarks cluster --nodes 4 --ranks-per-node 2 --link-mbit 1000 --node-mem-mb 4000 \\
        --pfs netfs --pfs-mbit 200 --pfs-open-delay-ms 2 --images 2000 --epochs 3 --json out.json

Builds the cluster (benchmarks/lab/cluster/emulation.py), generates the dataset
once (hdmlp.datasets.make_image_folder, in hdmlp's user cache), runs one mpirun
of rank.py per distribution scheme, and writes per epoch and rank images/s,
stall and reads by source, per link the bytes carried, PFS bytes against the
dataset's size, and whether every sample arrived exactly once. Skips (exit 0,
with the reason) where the machine cannot run the emulation.

Two more modes, issue 22's goals (benchmarks/cluster/goals.py; ``--help`` after the mode):
``python -m benchmarks cluster vs-dataloader ...`` (hdmlp against DistributedSampler +
DataLoader on a bandwidth-capped PFS) and ``python -m benchmarks cluster scale ...``
(start-up and the placement exchange on 2, 4, 8 nodes). ``python -m benchmarks
cluster validate-sim ...`` (benchmarks/cluster/validate_sim.py) runs the
simulator against a measured job on the cluster. ``python -m benchmarks cluster
slurm-tests`` runs tests/python/test_cluster.py under Debian's Slurm (srun
--mpi=pmix, srun --mpi=pmi2, mpirun inside salloc) and under mpirun, and records
the results (docs/cluster.md, "Slurm").
"""
from __future__ import annotations

import argparse
import os
import sys

from benchmarks.lab.cluster import emulation, report
from benchmarks.lab.service import install_signal_handlers
from benchmarks.cluster.commands import dataset, write_config, write_json


def slurm_tests(argv: list[str]) -> int:
    """``python -m benchmarks cluster slurm-tests [--modes pmix,pmi2,mpirun] [--markdown PATH]``: installs
    Debian's Slurm and munge when missing, then runs tests/python/test_cluster.py once per way of starting
    ranks under Slurm (HDMLP_CLUSTER_LAUNCHER=slurm:<mode>) and once under mpirun, and writes each run's
    result (passed, failed, skipped and why, seconds, the load average) to the Markdown file."""
    import subprocess
    import time

    from benchmarks.lab.cluster import slurm
    p = argparse.ArgumentParser(prog="python -m benchmarks cluster slurm-tests")
    p.add_argument("--modes", default="pmix,pmi2,mpirun", help="comma-separated: pmix, pmi2, mpirun")
    p.add_argument("--markdown", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                      "results", "slurm_cluster.md"))
    args = p.parse_args(argv)
    reason = emulation.unavailable_reason()
    if reason:
        print(f"[cluster] skipped: the emulated cluster cannot run on this machine: {reason}")
        return 0
    slurm.ensure_tools()
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    pytest = os.path.join(os.path.dirname(sys.executable), "pytest")
    rows = []
    for launcher in [f"slurm:{m}" for m in args.modes.split(",")] + ["mpirun"]:
        load = open("/proc/loadavg").read().split()[:3]
        t = time.perf_counter()
        proc = subprocess.run([pytest, "-q", "-rfEs", "-p", "no:cacheprovider", "tests/python/test_cluster.py"],
                              cwd=repo, capture_output=True, text=True, env=dict(os.environ, HDMLP_CLUSTER_LAUNCHER=launcher))
        seconds = time.perf_counter() - t
        with open(args.markdown[:-3] + f"-{launcher.replace(':', '-')}.log", "w") as log:
            log.write(proc.stdout + proc.stderr)  # pytest's whole output, beside the report
        lines = proc.stdout.strip().splitlines()
        summary = lines[-1] if lines else proc.stderr.strip()[-300:]
        # "SKIPPED [1] tests/python/test_cluster.py:335: needs Slurm: ..." -> "skipped (test_cluster.py:335): needs Slurm: ..."
        skipped = ["skipped ({}): {}".format(*line.split("] ", 1)[-1].split(": ", 1)).replace("tests/python/", "")
                   for line in lines if line.startswith("SKIPPED")]
        failed = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
        print(f"[cluster] {launcher}: {summary}")
        rows.append((launcher, summary, skipped, failed, seconds, load))
    with open(args.markdown, "w") as f:
        f.write("# tests/python/test_cluster.py under Debian's Slurm on the emulated cluster\n\n"
                f"`python -m benchmarks cluster slurm-tests --modes {args.modes}`, "
                f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: 3 nodes x 2 ranks, Slurm "
                f"{subprocess.run(['dpkg-query', '-W', '-f', '${Version}', 'slurmd'], capture_output=True, text=True).stdout.strip()}, "
                "each mode its own cluster (docs/cluster.md, \"Slurm\").\n\n"
                "| ranks started by | result | seconds | load average at the start |\n|---|---|---|---|\n")
        for launcher, summary, skipped, failed, seconds, load in rows:
            f.write(f"| `{launcher}` | {summary} | {seconds:.0f} | {' / '.join(load)} |\n")
        for launcher, summary, skipped, failed, seconds, load in rows:
            for line in skipped + failed:
                f.write(f"\n- `{launcher}`: {line}")
        f.write("\n")
    print(f"[cluster] wrote {args.markdown}")
    return 0 if all("failed" not in r[1] and "error" not in r[1] for r in rows) else 1


def main(argv: list[str] | None = None) -> int:
    given = list(argv if argv is not None else sys.argv[2:])
    if given[:1] == ["validate-sim"]:
        from benchmarks.cluster import validate_sim  # issue 24: the simulator against a measured run
        return validate_sim.main(given[1:])
    if given[:1] == ["slurm-tests"]:  # issue 35: the cluster tests under Debian's Slurm
        return slurm_tests(given[1:])
    if given[:1] in (["vs-dataloader"], ["scale"]):
        from benchmarks.cluster import goals  # issue 22's goals 2 and 4 (benchmarks/cluster/goals.py)
        return goals.main(given)
    p = argparse.ArgumentParser(prog="python -m benchmarks cluster", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--ranks-per-node", type=int, default=2)
    p.add_argument("--link-mbit", type=float, help="each node's link rate, both ways (tc tbf); default unshaped")
    p.add_argument("--node-mem-mb", type=int, help="cgroup v1 memory limit per node; default none")
    p.add_argument("--node-cpus", type=int, help="CPUs per node (cgroup v1 cpuset); default all")
    p.add_argument("--pfs", choices=["auto", "local", "netfs"], default="auto",
                   help="auto, netfs: the network file server (benchmarks/lab/netfs.py); local: a stand-in without a link")
    p.add_argument("--pfs-open-delay-ms", type=float, default=0.0, help="the PFS server's delay per open/stat")
    p.add_argument("--pfs-read-delay-ms", type=float, default=0.0, help="the PFS server's delay per read")
    p.add_argument("--pfs-mbit", type=float, help="the PFS server's link rate")
    p.add_argument("--images", type=int, default=600)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--data", help="use this dataset folder instead of generating one")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32, help="global batch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--schemes", default="uniform", help="comma-separated: uniform, local, partial_local")
    p.add_argument("--ram-share", type=float, default=0.5,
                   help="each node's RAM class as a share of the dataset (default %(default)s: 2 nodes hold it)")
    p.add_argument("--step-ms", type=float, default=0.0, help="the consumer's simulated training step per batch")
    p.add_argument("--timeout-s", type=float, default=60.0, help="hdmlp's timeout_s")
    p.add_argument("--timeout", type=float, default=1200, help="seconds one mpirun may run")
    p.add_argument("--mca", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                   help="an Open MPI MCA parameter for mpirun (repeatable)")
    p.add_argument("--launcher", choices=["mpirun", "slurm"], default="mpirun",
                   help="mpirun: Open MPI's mpirun with the emulation's launch agent; slurm: Debian's Slurm "
                        "(slurmctld on a head node, slurmd on every node; installed when missing)")
    p.add_argument("--slurm-mpi", choices=["pmix", "pmi2", "mpirun"], default="pmix",
                   help="with --launcher slurm: srun --mpi=pmix, srun --mpi=pmi2, or mpirun inside salloc")
    p.add_argument("--rank-env", action="append", default=[], metavar="NAME=VALUE",
                   help="a variable for every rank (repeatable), e.g. HDMLP_MPI_LIBRARY=/path/libmpi.so.12")
    p.add_argument("--json", required=True, help="where the report goes")
    args = p.parse_args(argv)

    reason = emulation.unavailable_reason()
    if reason:
        print(f"[cluster] skipped: the emulated cluster cannot run on this machine: {reason}")
        return 0
    root, files, total = dataset(args)
    install_signal_handlers()
    result = {"command": "python -m benchmarks cluster " + " ".join(sys.argv[2:] if argv is None else argv),
              "jobs": [], "links_by_scheme": {}}
    with emulation.EmulatedCluster(args.nodes, args.ranks_per_node, root, link_mbit=args.link_mbit,
                                   node_mem_mb=args.node_mem_mb, node_cpus=args.node_cpus, pfs=args.pfs,
                                   pfs_open_delay_ms=args.pfs_open_delay_ms,
                                   pfs_read_delay_ms=args.pfs_read_delay_ms, pfs_mbit=args.pfs_mbit,
                                   launcher=args.launcher, slurm_mode=args.slurm_mpi,
                                   rank_env=dict(v.split("=", 1) for v in args.rank_env)) as cluster:
        config = os.path.join(cluster.work, "hdmlp.cfg")
        result["hdmlp_config"] = write_config(config, total, args.ram_share, args.ranks_per_node)
        for scheme in args.schemes.split(","):
            spec = {"epochs": args.epochs, "batch_size": args.batch_size, "seed": args.seed, "schemes": [scheme],
                    "config": config, "timeout_s": args.timeout_s, "step_ms": args.step_ms}
            mca = [a for name, value in args.mca for a in ("--mca", name, value)]
            if cluster.slurm is not None and cluster.slurm.mode != "mpirun":  # srun: as Open MPI's variables
                spec["env"] = {f"OMPI_MCA_{name}": value for name, value in args.mca}
                mca = []
            run = report.run_ranks(cluster, spec, timeout=args.timeout, mpirun_args=mca)
            failed = [r.get("error") if r else "wrote no report" for r in run["ranks"] if r is None or r.get("error")]
            if run["returncode"] != 0 or failed:
                print(f"[cluster] {scheme}: mpirun exit {run['returncode']}; errors: {failed}\n"
                      f"{run['stderr'][-2000:]}", file=sys.stderr)
                result["jobs"].append({"scheme": scheme, "status": "error", "errors": failed,
                                       "stderr": run["stderr"][-4000:]})
                continue
            merged = report.merge(cluster, run, files, total, cluster.pfs.over_network)
            job = merged["jobs"][0]
            job.update(status="ok", links=merged["links"], pfs_link_bytes=merged["pfs_link_bytes"],
                       pfs_link_bytes_x_dataset=merged["pfs_link_bytes_x_dataset"],
                       node_to_node_bytes=merged["node_to_node_bytes"], seconds=merged["seconds"])
            result.update(cluster=merged["cluster"], dataset=merged["dataset"] | {"path": root},
                          ranks=merged["ranks"])
            result["jobs"].append(job)
            once = all(e["ok"] for e in job["exactly_once"])
            print(f"[cluster] {scheme}: " + " ".join(f"{e['img_per_s']:.0f}" for e in job["epochs"])
                  + f" img/s per epoch; PFS {job['pfs_bytes_x_dataset']:.2f}x the dataset (hdmlp)"
                  + (f", {job['pfs_link_bytes_x_dataset']:.2f}x on the links" if job["pfs_link_bytes"] else "")
                  + f"; {job['node_to_node_bytes'] / 1e6:.1f} MB between nodes; exactly once: {once}")
    write_json(args.json, result)
    return 0 if all(j.get("status") == "ok" for j in result["jobs"]) else 1
