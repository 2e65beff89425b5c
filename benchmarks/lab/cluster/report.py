"""Runs rank.py across an emulated cluster and merges what the ranks and the links saw.

:func:`run_ranks` runs one mpirun of ``rank.py`` and returns the ranks' files,
mpirun's output and each link's bytes carried during the run. :func:`merge`
turns that into the JSON of ``python -m benchmarks cluster``: per job (scheme)
and epoch the job's images/s and per rank its images/s, stall and reads by
source; per node the bytes each link carried; PFS bytes against the dataset's
size; and whether every sample arrived exactly once with the bytes of its file
on disk (by content hashes).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time

RANK_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rank.py")


def dataset_files(root: str) -> dict[str, str]:
    """{path relative to root: sha256[:16] of its bytes} for every file of the dataset."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()[:16]
    return out


def run_ranks(cluster, spec: dict, timeout: float = 300, mpirun_args: list[str] = (), during=None,
              python: str = sys.executable) -> dict:
    """One mpirun of rank.py on every node with ``spec`` (``data`` defaults to the cluster's PFS path).
    ``during(proc, out)``, if given, runs while mpirun does (``out``: the folder the ranks write to).

    Returns ``{"returncode", "stdout", "stderr", "seconds", "ranks": [rank files, by rank; None where a rank
    wrote none], "links": {node: bytes carried during the run}, "died": {rank: time it killed itself}}``."""
    out = tempfile.mkdtemp(prefix="ranks-", dir=cluster.work)
    spec = dict(spec, out=out)
    spec.setdefault("data", cluster.pfs_path)
    spec_path = os.path.join(out, "spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    before = cluster.link_bytes()
    t = time.perf_counter()
    proc = cluster.run([python, RANK_SCRIPT, spec_path], env=spec.get("env"), timeout=timeout, mpirun_args=mpirun_args,
                       during=None if during is None else lambda p: during(p, out))
    seconds = time.perf_counter() - t
    after = cluster.link_bytes()
    world = cluster.nodes * cluster.ranks_per_node
    ranks = []
    for r in range(world):
        path = os.path.join(out, f"rank{r}.json")
        ranks.append(json.load(open(path)) if os.path.exists(path) else None)
    died = {}
    for r in range(world):
        path = os.path.join(out, f"died{r}")
        if os.path.exists(path):
            died[r] = float(open(path).read())
    shutil.rmtree(out, ignore_errors=True)
    links = {node: {k: after[node][k] - before[node][k] for k in after[node]} for node in after}
    return {"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr, "seconds": seconds,
            "ranks": ranks, "links": links, "died": died}


def exactly_once(ranks: list[dict], run_index: int, files: dict[str, str]) -> list[dict]:
    """Per epoch of job ``run_index``: whether each file of the dataset arrived exactly once across ranks with its
    own bytes; counts of missing, duplicated and wrong samples."""
    paths = ranks[0]["runs"][run_index]["paths"]
    epochs = len(ranks[0]["runs"][run_index]["epochs"])
    out = []
    for e in range(epochs):
        seen: dict[str, int] = {}
        wrong = 0
        for r in ranks:
            ep = r["runs"][run_index]["epochs"][e]
            for i, h in zip(ep["ids"], ep["hashes"]):
                p = paths[i]
                seen[p] = seen.get(p, 0) + 1
                wrong += files.get(p) != h
        missing = [p for p in files if p not in seen]
        duplicated = [p for p, n in seen.items() if n > 1]
        out.append({"epoch": e, "ok": not missing and not duplicated and not wrong, "samples": sum(seen.values()),
                    "missing": len(missing), "duplicated": len(duplicated), "wrong_bytes": wrong})
    return out


def merge(cluster, run: dict, files: dict[str, str], dataset_bytes: int, over_network: bool) -> dict:
    """The report of one run of run_ranks (every rank finished): per job, per epoch, per rank, per link."""
    ranks = run["ranks"]
    jobs = []
    for j, first in enumerate(ranks[0]["runs"]):
        epochs = []
        for e in range(len(first["epochs"])):
            per_rank = []
            for r in ranks:
                ep = r["runs"][j]["epochs"][e]
                per_rank.append({"rank": r["rank"], "host": r["host"], "samples": len(ep["ids"]),
                                 "seconds": round(ep["seconds"], 4), "img_per_s": ep["img_per_s"],
                                 "stall_seconds": round(ep["stall_seconds"], 4), "reads": ep.get("reads", {}),
                                 **{k: ep[k] for k in ("cpu_seconds", "classes") if k in ep}})
            seconds = max(p["seconds"] for p in per_rank)
            samples = sum(p["samples"] for p in per_rank)
            sources: dict[str, int] = {}
            for p in per_rank:
                for src, v in p["reads"].items():
                    sources[src] = sources.get(src, 0) + v["count"]
            epochs.append({"epoch": e, "samples": samples, "seconds": seconds,
                           "img_per_s": samples / seconds if seconds else None,
                           "stall_share": sum(p["stall_seconds"] for p in per_rank) / max(
                               sum(p["seconds"] for p in per_rank), 1e-9),
                           "reads_by_source": sources, "per_rank": per_rank})
        pfs_bytes = sum(r["runs"][j]["metrics"]["pfs_bytes"] for r in ranks)
        jobs.append({
            "scheme": first["scheme"], "seed": ranks[0]["seed"],
            "startup_seconds": max(r["runs"][j]["startup_seconds"] for r in ranks),
            "epochs": epochs, "exactly_once": exactly_once(ranks, j, files),
            "pfs_bytes": pfs_bytes, "pfs_bytes_x_dataset": pfs_bytes / dataset_bytes,
            "remote_reads": sum(r["runs"][j]["metrics"]["remote_reads"] or 0 for r in ranks),
            "requests_served": sum(r["runs"][j]["metrics"]["requests_served"] or 0 for r in ranks),
            "classes": {r["rank"]: r["runs"][j]["classes"] for r in ranks},
        })
    links = run["links"]
    pfs_link = sum(v["from_pfs"] for v in links.values())
    return {
        "cluster": cluster.describe(),
        "dataset": {"files": len(files), "bytes": dataset_bytes},
        "ranks": [{"rank": r["rank"], "host": r["host"], "mem_available_bytes": r["mem_available_bytes"]}
                  for r in ranks],
        "jobs": jobs,
        "links": links,
        "pfs_link_bytes": pfs_link if over_network else None,
        "pfs_link_bytes_x_dataset": pfs_link / dataset_bytes if over_network else None,
        "node_to_node_bytes": sum(v["from_nodes"] for v in links.values()),
        "seconds": run["seconds"],
    }
