"""What the emulated cluster's commands share (cli.py, goals.py, validate_sim.py).

The dataset they generate once into hdmlp's user cache, the job options they all take, the
hdmlp configuration a run uses (each node's RAM class a share of the dataset), the check
that the emulation can run here, and how a result is published (the load warning, the JSON,
the Markdown report). Nothing here starts a cluster.
"""
from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable

from benchmarks.lab import machine
from benchmarks.lab.cluster import emulation, report


def dataset(args: argparse.Namespace) -> tuple[str, dict, int]:
    """The dataset folder (``--data``, or one generated from ``--images`` and ``--classes``), its files
    and their total bytes."""
    import hdmlp
    from hdmlp.datasets import make_image_folder
    root = args.data or os.path.join(hdmlp.user_cache_dir(), "datasets", f"bench-{args.images}-{args.classes}")
    if not args.data:
        make_image_folder(root, num_images=args.images, num_classes=args.classes, seed=0)
    files = report.dataset_files(root)
    return root, files, sum(os.path.getsize(os.path.join(root, f)) for f in files)


def job_options(p: argparse.ArgumentParser, batch_help: str | None = None, scheme_help: str | None = None) -> None:
    """The dataset and job options the goals' and the simulator's commands take."""
    p.add_argument("--images", type=int, default=1200)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--data", help="use this dataset folder instead of generating one")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32, help=batch_help)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--scheme", default="uniform", help=scheme_help)
    p.add_argument("--ram-share", type=float, default=0.3, help="each node's RAM class as a share of the dataset")


def write_config(path: str, dataset_bytes: int, ram_share: float, ranks_per_node: int) -> str:
    """Each node's RAM class holds ram_share of the dataset, split evenly between its ranks (fixed MB)."""
    per_rank_mb = max(0.01, ram_share * dataset_bytes / 2**20 / ranks_per_node)
    text = (f"# python -m benchmarks cluster: each node's RAM class holds {ram_share:.0%} of the dataset, "
            f"{per_rank_mb:.2f} MB per rank\n"
            "storage_classes = ( { capacity = 16; threads = \"auto\"; },\n"
            f"  {{ backend = \"memory\"; capacity = {per_rank_mb:.3f}; threads = 2; }} );\n")
    with open(path, "w") as f:
        f.write(text)
    return text


def skipped(tag: str) -> bool:
    """Says why and returns True where this machine cannot run the emulated cluster."""
    reason = emulation.unavailable_reason()
    if reason:
        print(f"[cluster {tag}] skipped: the emulated cluster cannot run on this machine: {reason}")
    return reason is not None


def write_json(path: str, result: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"[cluster] wrote {path}")


def publish(args: argparse.Namespace, result: dict, markdown: Callable[[dict], str], tag: str) -> None:
    """The load warning, the JSON, and the Markdown report where --markdown asks for it."""
    machine.print_warnings(result["load"])
    write_json(args.json, result)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(result))
        print(f"[cluster {tag}] wrote {args.markdown}")
