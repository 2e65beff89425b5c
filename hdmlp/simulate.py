"""The performance model and simulator (issue #7), and calibration.

``simulate`` predicts how long a training job's data loading takes on any
cluster described by a config file in the runtime's own format, under hdmlp
and under the policies of seed 001's comparison (see docs/simulator.md)::

    result = hdmlp.simulate.simulate("configs/sim_fits_all_nodes.cfg", nodes=8, batch_size=256,
                                     epochs=3, compute_mbps=130, samples=100_000, sample_mb=0.11)
    result["policies"]["hdmlp"]["seconds"]

``calibrate`` measures this machine (RAM, a local folder, the dataset's
storage) by thread count and writes a config the runtime and the simulator
both read. The ``hdmlp simulate`` and ``hdmlp calibrate`` commands wrap both
(:func:`add_subcommands`).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import socket
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from hdmlp import _core
from hdmlp.job import ThrottledStorage

__all__ = ["POLICIES", "MODELS", "THESIS_ARTIFACTS", "simulate", "format_results", "measure_machine",
           "write_config", "calibrate",
           "add_subcommands"]

#: Every policy the simulator knows, in the order it reports them.
POLICIES: tuple[str, ...] = tuple(_core.policy_names())

#: The two readings of the model (docs/simulator.md, "Two readings"); the first is the default.
MODELS: tuple[str, ...] = ("physical", "thesis")

#: Artifacts of the thesis's simulator that ``model="thesis"`` reproduces unless named in ``without``.
THESIS_ARTIFACTS: tuple[str, ...] = ("full-class-rate", "locality-never-reorders", "staging-copies-lower-shards")


def _positive(name: str, value: Any, kind: type = int, most: int | float | None = None) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else int):
        raise TypeError(f"{name} must be {'a number' if kind is float else 'an int'}, got {value!r}")
    if kind is float and not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    if value <= 0 or (most is not None and value > most):
        raise ValueError(f"{name} must be > 0" + (f" and at most {most}" if most is not None else "") +
                         f", got {value!r}")
    return kind(value)


def simulate(config: str | os.PathLike[str], nodes: int, batch_size: int, epochs: int, compute_mbps: float,
             preprocess_mbps: float = 0.0, policies: str | Sequence[str] = "all", seed: int = 0,
             samples: int | None = None, sample_mb: float | None = None, sample_std_mb: float = 0.0,
             dataset: str | os.PathLike[str] | None = None, threads: int = 0, model: str = "physical",
             without: Sequence[str] = ()) -> dict[str, Any]:
    """Simulates a job under one or more policies.

    Args:
        config: a config file in the runtime's format (storage classes, ``b_c``, ``b_fs``,
            ``pfs_bandwidth``); parsed by the runtime's parser.
        nodes: N, nodes with one rank each.
        batch_size: B, the global batch.
        epochs: E.
        compute_mbps: c, MB/s one node's training step consumes.
        preprocess_mbps: beta, MB/s a staging worker preprocesses (<= 0: free).
        policies: "all", one name, a comma-separated string or a list of names (:data:`POLICIES`).
        seed: the access plan's seed (and that of drawn sizes).
        samples, sample_mb, sample_std_mb: F sizes drawn from a normal distribution
            (MB = 10^6 bytes), when no ``dataset`` is given.
        dataset: a dataset (any format hdmlp.Job reads) whose sample sizes to use instead (indexed as
            the runtime does).
        threads: planning threads (0: automatic).
        model: "physical" (the default: the PFS's aggregate rate never exceeds t(g) for g readers)
            or "thesis" (the reading of the thesis's simulator that gives its Table 5.2; see
            docs/simulator.md, "Two readings").
        without: thesis artifacts to leave out in the thesis reading (:data:`THESIS_ARTIFACTS`).

    Returns:
        ``{"policies": {NAME: {"seconds", "stall_seconds", "epochs", "bytes", ...}},
        "samples": F, "dataset_bytes": S}``; ``bytes`` counts what the consumers received
        by source and sums to ``dataset_bytes * epochs``.

    Raises:
        FileNotFoundError: the config or dataset does not exist.
        hdmlp.ConfigError: the config is invalid.
        ValueError, TypeError: a bad argument (the message names it as the CLI spells it).
    """
    names = [p.strip() for p in policies.split(",")] if isinstance(policies, str) else list(policies)
    if not names or any(not n for n in names):
        raise ValueError(f"--policy: expected all or names from {', '.join(POLICIES)}; got {policies!r}")
    _positive("--nodes", nodes, most=2**31 - 1)
    _positive("--batch-size", batch_size, most=2**62)
    _positive("--epochs", epochs, most=2**31 - 1)
    _positive("--compute-mbps", compute_mbps, float)
    if dataset is None:
        if samples is None or sample_mb is None:
            raise ValueError("give --dataset PATH, or --samples F and --sample-mb MU for drawn sample sizes")
        _positive("--samples", samples, most=2**62)
        _positive("--sample-mb", sample_mb, float)
        if not (isinstance(sample_std_mb, (int, float)) and math.isfinite(sample_std_mb)) or sample_std_mb < 0:
            raise ValueError(f"--sample-std-mb must be >= 0, got {sample_std_mb!r}")
    elif samples is not None:
        raise ValueError("give either --dataset or --samples, not both")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise ValueError(f"--seed must be an int from 0 to 2**64 - 1, got {seed!r}")
    if isinstance(threads, bool) or not isinstance(threads, int) or not 0 <= threads <= 1024:
        raise ValueError(f"--threads must be an int from 0 (automatic) to 1024, got {threads!r}")
    if isinstance(preprocess_mbps, bool) or not isinstance(preprocess_mbps, (int, float)) \
            or not math.isfinite(preprocess_mbps):
        raise ValueError(f"--preprocess-mbps must be a finite number, got {preprocess_mbps!r}")
    if model not in MODELS:
        raise ValueError(f"--model must be one of {', '.join(MODELS)}, got {model!r}")
    without = [without] if isinstance(without, str) else list(without)
    for name in without:
        if name not in THESIS_ARTIFACTS:
            raise ValueError(f"--without: unknown thesis artifact {name!r}; valid: {', '.join(THESIS_ARTIFACTS)}")
    if without and model != "thesis":
        raise ValueError("--without names thesis artifacts; it needs --model thesis")
    config = os.fspath(config)
    if not os.path.exists(config):
        raise FileNotFoundError(f"--config: no such file: {config}")
    return _core.simulate(config, nodes, batch_size, epochs, float(compute_mbps), float(preprocess_mbps), names,
                          seed, samples or 0, float(sample_mb or 0), float(sample_std_mb),
                          os.fspath(dataset) if dataset is not None else "", threads, model, without)


def format_results(result: dict[str, Any]) -> str:
    """A plain-text table of :func:`simulate`'s result, one row per policy."""
    policies = result["policies"]
    sources = sorted({s for r in policies.values() for s in r["bytes"]})
    header = ["policy", "seconds", "stall s", "vs lower"] + [f"{s} GB" for s in sources] + ["PFS read GB"]
    lower = policies.get("lower_bound", {}).get("seconds")
    rows = [header]
    for name, r in policies.items():
        rows.append([name, f"{r['seconds']:.2f}", f"{r['stall_seconds']:.2f}",
                     f"{r['seconds'] / lower:.2f}x" if lower else "-"]
                    + [f"{r['bytes'].get(s, 0) / 1e9:.2f}" for s in sources] + [f"{r['pfs_read_bytes'] / 1e9:.2f}"])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    per_epoch = [f"{name}: " + " ".join(f"{s:.2f}" for s in r["epochs"]) for name, r in policies.items()]
    return ("\n".join(lines) + f"\n\n{result['samples']} samples, {result['dataset_bytes'] / 1e9:.2f} GB; "
            "seconds per epoch:\n  " + "\n  ".join(per_epoch))


def _table(rows: Sequence[tuple[int, float]], key: str) -> str:
    return "( " + ", ".join(f"{{ {key} = {n}; bw = {bw:.1f}; }}" for n, bw in rows) + " )"


def _drop_from_page_cache(paths: Sequence[str]) -> None:
    # Best effort: make the folder's files come from the device, not the page cache.
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
        except (OSError, AttributeError):
            pass


def measure_machine(threads: Sequence[int] = (1, 2, 4, 8), memory_test_mb: float = 16.0,
                    folder: str | os.PathLike[str] | None = None, files: int = 64, file_mb: float = 0.25,
                    dataset: str | os.PathLike[str] | None = None, pfs_files: int = 256,
                    storage: ThrottledStorage | None = None, min_seconds: float = 0.3) -> dict[str, Any]:
    """Measures aggregate bandwidths [MB/s] by thread count (what :func:`calibrate` writes).

    - ``memory``: each thread copies its own ``memory_test_mb`` buffer (memcpy).
    - ``folder``: ``files`` test files of ``file_mb`` written to ``folder`` (or a temporary
      folder), dropped from the page cache where the OS allows, read whole.
    - ``pfs``: up to ``pfs_files`` of ``dataset``'s files (evenly spread; through ``storage``,
      a throttled store, when given), or without a dataset the folder's test files, read
      whole, round-robin for at least ``min_seconds`` per thread count.

    Returns ``{"memory": [(threads, MB/s)], "folder": [...], "pfs": [...], "pfs_source": str}``.
    """
    threads = sorted({_positive("--threads", int(t)) for t in threads})
    _positive("--files", files)
    _positive("--pfs-files", pfs_files)
    _positive("--file-mb", file_mb, float)
    _positive("--memory-test-mb", memory_test_mb, float)
    if folder is not None and not os.path.isdir(folder):
        raise NotADirectoryError(f"--folder: not a directory: {os.fspath(folder)}")
    storage = storage or ThrottledStorage()
    measured: dict[str, Any] = {}
    measured["memory"] = [(t, _core.measure_memory_bandwidth(t, int(memory_test_mb * 1e6))) for t in threads]

    with tempfile.TemporaryDirectory(prefix="hdmlp-calibrate-", dir=os.fspath(folder) if folder else None) as tmp:
        test_files = []
        block = os.urandom(min(int(file_mb * 1e6), 1 << 20))
        for i in range(files):
            path = os.path.join(tmp, f"sample-{i:05d}.bin")
            with open(path, "wb") as f:
                left = int(file_mb * 1e6)
                while left > 0:
                    f.write(block[:left])
                    left -= len(block)
            test_files.append(path)
        folder_rows = []
        for t in threads:
            _drop_from_page_cache(test_files)
            folder_rows.append((t, _core.measure_read_bandwidth(test_files, t)))
        measured["folder"] = folder_rows

        if dataset is not None:
            from hdmlp.job import Job
            with Job(dataset, 1, 1, seed=0) as probe:
                paths = [p for p, _ in probe.samples]
            step = max(len(paths) // pfs_files, 1)
            pfs_paths = paths[::step][:pfs_files]
            measured["pfs_source"] = f"{len(pfs_paths)} files of {os.fspath(dataset)}"
        else:
            pfs_paths = test_files
            measured["pfs_source"] = f"{files} test files of {file_mb:g} MB"
        if storage.latency_s or storage.mbps:
            measured["pfs_source"] += (f" through a throttled store ({storage.latency_s * 1000:g} ms per file, "
                                       f"{storage.mbps:g} MB/s per reader)")
        pfs_rows = []
        for t in threads:
            if dataset is None:
                _drop_from_page_cache(pfs_paths)
            pfs_rows.append((t, _core.measure_read_bandwidth(pfs_paths, t, storage.latency_s, storage.mbps,
                                                             min_seconds)))
        measured["pfs"] = pfs_rows
    return measured


def write_config(output: str | os.PathLike[str], measured: dict[str, Any], staging_mb: float = 256,
                 staging_threads: int = 4, memory_capacity_mb: float = 2048, memory_threads: int = 2,
                 folder: str | os.PathLike[str] | None = None, folder_capacity_mb: float = 4096,
                 folder_threads: int = 2, b_c_mbps: float = 10000) -> str:
    """Writes a config in the runtime's format from :func:`measure_machine`'s tables.

    A staging buffer, a memory class (if ``memory_capacity_mb`` > 0), a filesystem class in
    ``folder`` (if given), ``pfs_bandwidth`` from the PFS table and ``b_fs`` = its largest
    aggregate. The text is checked with the runtime's parser before it is written.
    Returns the text.
    """
    output = os.fspath(output)
    if os.path.isdir(output):
        raise IsADirectoryError(f"--output is a directory: {output}; give a file name such as {output}/machine.cfg")
    out_dir = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(out_dir):
        raise FileNotFoundError(f"--output: no such directory: {out_dir}")
    pfs_rows = measured["pfs"]
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# Written by `hdmlp calibrate` on {socket.gethostname()}, {when}, {os.cpu_count()} cores.",
             "# Bandwidths in MB/s by thread count (aggregate over the threads); keys: docs/config.md.",
             f"# pfs_bandwidth: reading {measured.get('pfs_source', 'the dataset')}.",
             f"b_c = {b_c_mbps:g};",
             f"b_fs = {max(bw for _, bw in pfs_rows):.1f};",
             "",
             "storage_classes = (",
             f"  {{ capacity = {staging_mb:g}; threads = {staging_threads}; }}"]
    if memory_capacity_mb > 0:
        lines[-1] += ","
        lines.append(f"  {{ backend = \"memory\"; capacity = {memory_capacity_mb:g}; threads = {memory_threads};\n"
                     f"    bandwidth = {_table(measured['memory'], 'threads')}; }}")
    if folder is not None and folder_capacity_mb > 0:
        lines[-1] += ","
        lines.append(f"  {{ backend = \"filesystem\"; capacity = {folder_capacity_mb:g}; threads = {folder_threads};\n"
                     f"    backend_options = {{ path = {json.dumps(os.path.abspath(os.fspath(folder)))}; }};\n"
                     f"    bandwidth = {_table(measured['folder'], 'threads')}; }}")
    lines += [");", "", f"pfs_bandwidth = {_table(pfs_rows, 'processes')};", ""]
    text = "\n".join(lines)
    _core.load_config_string(text, output)  # never write a config the runtime would reject
    with open(output, "w") as f:
        f.write(text)
    return text


def calibrate(output: str | os.PathLike[str], threads: Sequence[int] = (1, 2, 4, 8),
              memory_test_mb: float = 16.0, folder: str | os.PathLike[str] | None = None, files: int = 64,
              file_mb: float = 0.25, dataset: str | os.PathLike[str] | None = None, pfs_files: int = 256,
              storage: ThrottledStorage | None = None, min_seconds: float = 0.3, staging_mb: float = 256,
              staging_threads: int = 4, memory_capacity_mb: float = 2048, memory_threads: int = 2,
              folder_capacity_mb: float = 4096, folder_threads: int = 2, b_c_mbps: float = 10000) -> dict[str, Any]:
    """Measures this machine (:func:`measure_machine`) and writes a config (:func:`write_config`).

    The config has the runtime's format: a staging buffer, a memory class, a filesystem class
    in ``folder`` (when given), each with its read bandwidth by thread count, and a
    ``pfs_bandwidth`` table measured on ``dataset`` (through ``storage``) or on test files.
    Takes a few seconds with the defaults. Returns the measurements (and ``path``).
    """
    output = os.fspath(output)
    if os.path.isdir(output):
        raise IsADirectoryError(f"--output is a directory: {output}; give a file name such as {output}/machine.cfg")
    measured = measure_machine(threads, memory_test_mb, folder, files, file_mb, dataset, pfs_files, storage,
                               min_seconds)
    write_config(output, measured, staging_mb, staging_threads, memory_capacity_mb, memory_threads, folder,
                 folder_capacity_mb, folder_threads, b_c_mbps)
    measured["path"] = output
    return measured


# ---- the hdmlp command ----------------------------------------------------

def _simulate_command(args: argparse.Namespace) -> int:
    result = simulate(args.config, nodes=args.nodes, batch_size=args.batch_size, epochs=args.epochs,
                      compute_mbps=args.compute_mbps, preprocess_mbps=args.preprocess_mbps, policies=args.policy,
                      seed=args.seed, samples=args.samples, sample_mb=args.sample_mb,
                      sample_std_mb=args.sample_std_mb, dataset=args.dataset, threads=args.threads,
                      model=args.model, without=args.without or [])
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(f"{args.nodes} nodes, global batch {args.batch_size}, {args.epochs} epochs, "
              f"c = {args.compute_mbps:g} MB/s, beta = {args.preprocess_mbps:g} MB/s, config {args.config}, "
              f"model {args.model}" + (f" without {', '.join(args.without)}" if args.without else ""))
        print(format_results(result))
    return 0


def _threads_list(text: str) -> list[int]:
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected thread counts such as 1,2,4,8; got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected thread counts >= 1 such as 1,2,4,8; got {text!r}")
    return values


def _calibrate_command(args: argparse.Namespace) -> int:
    storage = ThrottledStorage(latency_s=args.latency_ms / 1000, mbps=args.mbps)
    m = calibrate(args.output, threads=args.threads, memory_test_mb=args.memory_test_mb, folder=args.folder,
                  files=args.files, file_mb=args.file_mb, dataset=args.dataset, pfs_files=args.pfs_files,
                  storage=storage, min_seconds=args.min_seconds, staging_mb=args.staging_mb, staging_threads=args.staging_threads,
                  memory_capacity_mb=args.memory_capacity_mb, memory_threads=args.memory_threads,
                  folder_capacity_mb=args.folder_capacity_mb, folder_threads=args.folder_threads)
    for key in ("memory", "folder", "pfs"):
        print(f"{key:>7}: " + ", ".join(f"{t} threads {bw:,.0f} MB/s" for t, bw in m[key]))
    print(f"config written to {args.output}")
    return 0


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    """Registers ``simulate`` and ``calibrate`` on the ``hdmlp`` command's subparsers."""
    p = sub.add_parser("simulate", help="predict a job's data-loading time under hdmlp and other policies",
                       description="Simulates every sample access of every node and epoch under the performance "
                                   "model of docs/simulator.md, for a cluster described by a config file.")
    p.add_argument("--config", required=True, help="config file in the runtime's format (e.g. configs/sim_*.cfg)")
    p.add_argument("--nodes", type=int, required=True, help="N, nodes (one rank each)")
    p.add_argument("--samples", type=int, help="F, samples (sizes drawn; with --sample-mb)")
    p.add_argument("--sample-mb", type=float, help="mean sample size in MB (10^6 bytes)")
    p.add_argument("--sample-std-mb", type=float, default=0.0, help="standard deviation of sample sizes (MB; default 0)")
    p.add_argument("--dataset", help="a dataset (folder, pack, tar shards, HDF5) whose sample sizes to use instead of --samples")
    p.add_argument("--batch-size", type=int, required=True, help="B, the global batch size")
    p.add_argument("--epochs", type=int, required=True, help="E")
    p.add_argument("--compute-mbps", type=float, required=True, help="c, MB/s a node's training step consumes")
    p.add_argument("--preprocess-mbps", type=float, default=0.0, help="beta, preprocessing MB/s (default 0: free)")
    p.add_argument("--policy", default="all", help=f"all (the default), or names from: {', '.join(POLICIES)} (comma-separated)")
    p.add_argument("--seed", type=int, default=0, help="seed of the access plan and drawn sizes (default 0)")
    p.add_argument("--threads", type=int, default=0, help="planning threads (default 0: automatic)")
    p.add_argument("--model", choices=MODELS, default="physical",
                   help="physical (default): the PFS's aggregate rate never exceeds t(g) for g readers; thesis: "
                        "the thesis simulator's reading that gives its Table 5.2 (docs/simulator.md)")
    p.add_argument("--without", action="append", choices=THESIS_ARTIFACTS,
                   help="with --model thesis: leave out one of the thesis code's artifacts (repeatable)")
    p.add_argument("--json", action="store_true", help="print JSON: {\"policies\": {NAME: {...}}, ...}")
    p.set_defaults(func=_simulate_command)

    c = sub.add_parser("calibrate", help="measure this machine's bandwidths and write a config",
                       description="Measures RAM, a local folder and the dataset's storage by thread count and "
                                   "writes a config in the runtime's format (a few seconds).")
    c.add_argument("--output", "-o", required=True, help="config file to write")
    c.add_argument("--threads", type=_threads_list, default=[1, 2, 4, 8], help="thread counts (default 1,2,4,8)")
    c.add_argument("--memory-test-mb", type=float, default=16.0, help="MB each thread copies (default 16)")
    c.add_argument("--folder", help="a local folder: adds a filesystem class measured there (default: none)")
    c.add_argument("--files", type=int, default=64, help="test files written for the folder (default 64)")
    c.add_argument("--file-mb", type=float, default=0.25, help="size of each test file in MB (default 0.25)")
    c.add_argument("--dataset", help="measure the \"pfs\" table (the dataset's own storage) by reading "
                   "this ImageFolder's files (default: measured on test files instead)")
    c.add_argument("--pfs-files", type=int, default=256, help="dataset files read per thread count (default 256)")
    c.add_argument("--min-seconds", type=float, default=0.3, help="least time per PFS measurement (default 0.3)")
    c.add_argument("--latency-ms", type=float, default=0.0, help="read the dataset through a throttled store: ms per file (default 0: "
                   "not throttled)")
    c.add_argument("--mbps", type=float, default=0.0, help="... and MB/s per reader (default 0: unlimited)")
    c.add_argument("--staging-mb", type=float, default=256, help="staging buffer capacity to write (MB; default 256)")
    c.add_argument("--staging-threads", type=int, default=4,
                   help="staging worker threads to write (the loader's readers; default 4)")
    c.add_argument("--memory-capacity-mb", type=float, default=2048, help="memory class capacity to write (MB; 0: no memory class; default 2048)")
    c.add_argument("--memory-threads", type=int, default=2,
                   help="prefetch threads of the memory class to write (default 2)")
    c.add_argument("--folder-capacity-mb", type=float, default=4096,
                   help="capacity to write for the --folder class (MB; default 4096)")
    c.add_argument("--folder-threads", type=int, default=2,
                   help="prefetch threads of the --folder class to write (default 2)")
    c.set_defaults(func=_calibrate_command)
