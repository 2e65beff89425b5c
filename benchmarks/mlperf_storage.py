"""``python -m benchmarks mlperf-storage``: MLPerf Storage's training workloads in DLIO, on the emulated
cluster, with DLIO's own loader and with hdmlp (hdmlp.dlio), side by side.

    python -m benchmarks mlperf-storage --workload unet3d --nodes 2 --dataset-gb 1.5 --pfs-mbit 400
    python -m benchmarks mlperf-storage --workload unet3d --case aggregate --nodes 4 --dataset-gb 1.0
    python -m benchmarks mlperf-storage report benchmarks/results/mlperf_storage-*.json   (Markdown again)

For each setting it makes one dataset with DLIO's own generator (kept in hdmlp's user cache), starts an
emulated cluster (benchmarks/cluster: nodes as namespaces, netfs as the PFS with its bandwidth capped,
direct I/O so no page cache helps) and runs DLIO's workload file unchanged but for sizes and the loader:

- ``dlio``: the loader the workload names (PyTorch for unet3d; TensorFlow's for resnet50 and cosmoflow,
  whose TFRecord files DLIO's PyTorch loader refuses: "tfrecord is not implemented for pytorch");
- ``hdmlp``: ``data_loader_classname=hdmlp.dlio.HDMLPDataLoader`` (docs/dlio.md), each node's RAM
  class given the node's memory (``--node-memory-mb``).

It searches, for each loader, the most simulated accelerators (ranks) per node whose AU meets the bar
(DLIO's mean over all epochs, or over the epochs after the first with ``--after-first``), and records
DLIO's own report ([METRIC] lines), per-epoch AU and times (DLIO's per-rank output), the PFS's bytes
(the netfs server's count) and hdmlp's own counts.

Scaling (stated in every report): byte quantities are multiplied by ``--byte-scale`` S (sample and
resize sizes; the dataset and memory are given directly in scaled bytes) and each batch's computation
time by ``--time-scale`` T. A loader then needs S/T of the real bandwidth per accelerator, so an
emulated PFS of B MB/s stands for a real one of B * T / S MB/s, and the ratio of compute to I/O is
MLPerf's. Checkpoints and evaluation are off (MLPerf Storage's training runs measure reads).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time

from benchmarks import dlio_env
from benchmarks.lab import machine, service

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

# Per workload: DLIO's workload file (H100 computation times) and the default scales that fit a
# 2-core, 23 GB machine. S scales bytes, T scales each batch's computation time.
WORKLOADS = {
    "unet3d": {"file": "unet3d_h100", "byte_scale": 1 / 128, "time_scale": 1.0},
    "resnet50": {"file": "resnet50_h100", "byte_scale": 1 / 8, "time_scale": 1.0},
    "cosmoflow": {"file": "cosmoflow_h100", "byte_scale": 1 / 16, "time_scale": 4.0},
}


def log(msg: str) -> None:
    print(msg, flush=True)


def workload_config(name: str) -> dict:
    """DLIO's own workload file, read with DLIO's venv (which has PyYAML)."""
    code = ("import json, os, sys, yaml, dlio_benchmark\n"
            "p = os.path.join(os.path.dirname(dlio_benchmark.__file__), 'configs', 'workload', sys.argv[1] + '.yaml')\n"
            "print(json.dumps(yaml.safe_load(open(p))))")
    out = subprocess.run([dlio_env.python(), "-c", code, WORKLOADS[name]["file"]], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def scaled_settings(args, wl: dict) -> dict:
    """The workload's numbers after scaling, and the DLIO overrides that give them."""
    ds, rd, tr = wl["dataset"], wl["reader"], wl["train"]
    s, t = args.byte_scale, args.time_scale
    record = float(ds["record_length"]) * s
    per_file = int(ds.get("num_samples_per_file", 1))
    files = max(2, int(round(args.dataset_gb * 2**30 / (record * per_file))))
    settings = {
        "workload_file": WORKLOADS[args.workload]["file"],
        "format": ds["format"],
        "record_length": int(record),
        "record_length_stdev": int(float(ds.get("record_length_stdev", 0)) * s),
        "record_length_resize": int(float(ds.get("record_length_resize", 0)) * s),
        "num_samples_per_file": per_file,
        "num_files_train": files,
        "dataset_bytes": int(record * per_file * files),
        "batch_size": int(rd["batch_size"]),
        "read_threads": int(args.read_threads if args.read_threads is not None else rd.get("read_threads", 1)),
        "computation_time": float(tr["computation_time"]) * t,
        "computation_time_h100": float(tr["computation_time"]),
        "epochs": int(args.epochs or tr.get("epochs", 5)),
        "data_loader": rd.get("data_loader", "pytorch"),
        "workload_au": float(wl.get("metric", {}).get("au", 0.9)),
    }
    need = settings["batch_size"] * record / settings["computation_time"]  # bytes/s one accelerator reads
    settings["bytes_per_s_per_accelerator"] = need
    settings["real_bytes_per_s_per_accelerator"] = need * t / s
    return settings


def overrides(settings: dict, data: str, out: str, generate: bool, files: int | None = None) -> list[str]:
    o = [f"workload={settings['workload_file']}",
         f"++workload.workflow.generate_data={generate}", f"++workload.workflow.train={not generate}",
         "++workload.workflow.checkpoint=False", "++workload.workflow.evaluation=False",
         f"++workload.dataset.data_folder={data}",
         f"++workload.dataset.num_files_train={files or settings['num_files_train']}",
         f"++workload.dataset.num_samples_per_file={settings['num_samples_per_file']}",
         f"++workload.dataset.record_length={settings['record_length']}",
         f"++workload.dataset.record_length_stdev={settings['record_length_stdev']}",
         f"++workload.train.epochs={settings['epochs']}",
         f"++workload.train.computation_time={settings['computation_time']}",
         f"++workload.reader.read_threads={settings['read_threads']}",
         f"++workload.output.folder={out}", f"hydra.run.dir={out}/hydra"]
    if settings["record_length_resize"]:
        o.append(f"++workload.dataset.record_length_resize={settings['record_length_resize']}")
    return o


def make_dataset(settings: dict, log=log) -> str:
    """DLIO's own generator writes the dataset once (2 ranks), kept by its settings in hdmlp's user cache."""
    import hashlib

    import hdmlp
    key = {k: settings[k] for k in ("workload_file", "record_length", "record_length_stdev", "num_samples_per_file",
                                    "num_files_train")}
    name = settings["workload_file"] + "-" + hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    root = os.path.join(hdmlp.user_cache_dir(), "datasets", "mlperf-storage", name)
    done = os.path.join(root, ".generated")
    if os.path.exists(done):
        return root
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    work = root + ".work"
    os.makedirs(work, exist_ok=True)
    log(f"[mlperf-storage] generating {settings['num_files_train']} {settings['format']} files "
        f"({settings['dataset_bytes'] / 2**30:.2f} GiB) with DLIO's generator in {root}")
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x", "PATH", "-x", "PYTHONPATH",
           *dlio_env.dlio_command(), *overrides(settings, root, os.path.join(work, "out"), True)]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=dlio_env.environment(work), cwd=work)
    if proc.returncode != 0:
        raise RuntimeError(f"DLIO's generator failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-4000:]}")
    shutil.rmtree(work, ignore_errors=True)
    with open(done, "w") as f:
        json.dump(key | {"seconds": time.perf_counter() - t}, f)
    return root


def write_hdmlp_config(path: str, node_memory_mb: float, ranks_per_node: int, settings: dict) -> str:
    """The node's memory as hdmlp's RAM class, split between its ranks; a staging class of a few batches."""
    batch_mb = settings["batch_size"] * settings["record_length"] * 1.2 / 2**20
    staging = max(16.0, 4 * batch_mb)
    ram = max(0.01, node_memory_mb / ranks_per_node)
    text = (f"# python -m benchmarks mlperf-storage: a node's {node_memory_mb:.1f} MB as the RAM class of its "
            f"{ranks_per_node} rank(s)\n"
            f"storage_classes = ( {{ capacity = {staging:.1f}; threads = \"auto\"; }},\n"
            f"  {{ backend = \"memory\"; capacity = {ram:.3f}; threads = 4; }} );\n")
    with open(path, "w") as f:
        f.write(text)
    return text


def rank_outputs(out: str) -> list[dict]:
    """DLIO's per-rank output files (<rank>_output.json): per epoch and block the rank's AU and throughput."""
    ranks = []
    for path in sorted(glob.glob(os.path.join(out, "*_output.json")),
                       key=lambda p: int(os.path.basename(p).split("_")[0])):
        with open(path) as f:
            ranks.append(json.load(f))
    return ranks


def per_epoch_au(ranks: list[dict], epochs: int) -> list[float | None]:
    """DLIO's AU of each epoch averaged over the ranks (as its [METRIC] mean averages them)."""
    out = []
    for e in range(1, epochs + 1):
        values = []
        for r in ranks:
            au = r.get(str(e), {}).get("au", {})
            if au:
                values.append(sum(au.values()) / len(au))
        out.append(sum(values) / len(values) if values else None)
    return out


def step_times(ranks: list[dict], epochs: int, batch_size: int) -> list[dict | None]:
    """Per epoch, where a step's time went beyond its computation, in seconds per step (mean over the
    ranks), over the steps DLIO's AU counts (all but the first): ``load`` (waiting for the loader's
    next batch), ``overshoot`` (the computation's sleep and DLIO's bookkeeping beyond the computation
    time) and ``wait`` (the rest: the barrier that ends every step, waiting for the slowest rank)."""
    out = []
    for e in range(1, epochs + 1):
        rows = []
        for r in ranks:
            ep = r.get(str(e), {})
            load, proc, compute = (ep.get(k, {}).get("block1") or [] for k in ("load", "proc", "compute"))
            rate = ep.get("throughput", {}).get("block1")
            if len(proc) < 2 or len(load) != len(proc) or len(compute) != len(proc) or not rate:
                continue
            wall = len(compute) * batch_size / rate - proc[0]  # DLIO's AU denominator
            steps = len(proc) - 1
            rows.append({"load": sum(load[1:]) / steps, "overshoot": (sum(proc[1:]) - sum(load[1:]) - sum(compute[1:])) / steps,
                         "wait": (wall - sum(proc[1:])) / steps})
        out.append({k: sum(row[k] for row in rows) / len(rows) for k in ("load", "overshoot", "wait")} if rows else None)
    return out


def run_dlio(cluster, settings: dict, loader: str, args, label: str) -> dict:
    """One DLIO run across the cluster: DLIO's report, per-epoch AU, PFS bytes, hdmlp's counts."""
    out = os.path.join(cluster.work, f"{label}")
    os.makedirs(out, exist_ok=True)
    # DLIO's index sampler gives each rank ceil(samples / ranks) samples and fails (IndexError in
    # get_global_map_index) when the ranks do not divide the files: each run uses the first files, a
    # multiple of its ranks (DLIO's own num_files_train, as it takes a subset of a larger folder).
    ranks = cluster.nodes * cluster.ranks_per_node
    files = settings["num_files_train"] // ranks * ranks
    used = sorted(glob.glob(os.path.join(cluster.dataset, "train", "*")))[:files]
    dataset_bytes = sum(os.path.getsize(f) for f in used)
    cmd = dlio_env.dlio_command() + overrides(settings, cluster.pfs_path, out, False, files)
    env = {k: v for k, v in dlio_env.environment(cluster.work).items()
           if k in ("PATH", "PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL", "HYDRA_FULL_ERROR")}
    if loader == "hdmlp":
        cmd += dlio_env.LOADER_OVERRIDES
        config = os.path.join(cluster.work, f"{label}.cfg")
        write_hdmlp_config(config, args.node_memory_mb, cluster.ranks_per_node, settings)
        env["HDMLP_DLIO_CONFIG"] = config
        env["HDMLP_DLIO_OPTIONS"] = json.dumps({"timeout_s": 120, **json.loads(args.hdmlp_options)})
    before = cluster.pfs.stats()["bytes_served"]
    t = time.perf_counter()
    proc = cluster.run(cmd, env=env, timeout=args.timeout, mpirun_args=["--wdir", out])
    seconds = time.perf_counter() - t
    pfs_bytes = cluster.pfs.stats()["bytes_served"] - before
    text = proc.stdout + proc.stderr
    with open(os.path.join(out, "stdout.txt"), "w") as f:
        f.write(text)
    report = dlio_env.parse_report(text)
    ranks = rank_outputs(out)
    epoch_au = per_epoch_au(ranks, settings["epochs"])
    steps = step_times(ranks, settings["epochs"], settings["batch_size"])
    hdmlp_metrics = []
    for path in sorted(glob.glob(os.path.join(out, "hdmlp_metrics_rank*.json"))):
        with open(path) as f:
            m = json.load(f)
        row = {k: m.get(k) for k in ("rank", "pfs_bytes", "pfs_reads", "remote_reads", "requests_served", "source")}
        row["epochs"] = [{"stall_seconds": e.get("stall_seconds"), "reads": e.get("reads")} for e in m.get("epochs", [])]
        hdmlp_metrics.append(row)
    result = {"loader": loader, "ranks_per_node": cluster.ranks_per_node, "returncode": proc.returncode,
              "seconds": round(seconds, 1), "pfs_bytes": pfs_bytes,
              "files": files, "dataset_bytes": dataset_bytes, "pfs_bytes_x_dataset": pfs_bytes / dataset_bytes,
              "dlio_metric_lines": report["metric_lines"],
              "au_percent": report.get("au_percent"), "au_percent_stdev": report.get("au_percent_stdev"),
              "throughput_samples_per_s": report.get("throughput_samples_per_s"),
              "io_mb_per_s": report.get("io_mb_per_s"),
              "epoch_au_percent": epoch_au, "step_times": steps, "rank0_epochs": report["epochs"],
              "hdmlp": hdmlp_metrics}
    later = [a for a in epoch_au[1:] if a is not None]
    result["au_after_first_percent"] = sum(later) / len(later) if later else None
    if proc.returncode != 0 or result["au_percent"] is None:
        result["error"] = text[-4000:]
    return result


def blksize(args) -> int:
    """The PFS mounts' st_blksize: Lustre's 1 MiB stripe, scaled like every other byte quantity (a power
    of two, at least 4 KiB). Python's buffered I/O refills by this much after every seek, so np.load of
    an .npz reads about a block more than the file per open; unscaled on small files that would be
    an overhead real files of MLPerf's sizes do not have."""
    b = 4096
    while b * 2 <= (1 << 20) * args.byte_scale:
        b *= 2
    return b


def meets(run: dict, bar: float, after_first: bool) -> bool:
    if run.get("error"):
        return False
    au = run["au_after_first_percent"] if after_first else run["au_percent"]
    return au is not None and au >= bar


def search(loader: str, start: int, args, settings: dict, dataset: str, recorder, runs: list) -> int:
    """The most ranks per node (from ``start``, up while the bar is met, down while not) meeting the AU bar."""
    from benchmarks.lab.cluster import emulation

    best, k, tried = 0, max(1, start), {}
    while 1 <= k <= args.max_ranks_per_node and k not in tried:
        with emulation.EmulatedCluster(args.nodes, k, dataset, pfs="netfs", pfs_mbit=args.pfs_mbit,
                                       link_mbit=args.link_mbit, log=log, pfs_blksize=blksize(args)) as cluster:
            with recorder.run(f"{loader}-{k}"):
                run = run_dlio(cluster, settings, loader, args, f"{loader}-{k}")
        run["load"] = recorder.last(f"{loader}-{k}")
        runs.append(run)
        ok = meets(run, args.au, args.after_first)
        tried[k] = ok
        au = run["au_after_first_percent"] if args.after_first else run["au_percent"]
        log(f"[mlperf-storage] {loader}, {k} accelerator(s) per node: AU {au if au is None else round(au, 1)}% "
            f"({'meets' if ok else 'misses'} {args.au}%), epochs {[round(a, 1) if a else a for a in run['epoch_au_percent']]}"
            f", PFS {run['pfs_bytes_x_dataset']:.2f}x the dataset, {run['seconds']} s"
            + (f"; error: {run['error'][-300:]}" if run.get("error") else ""))
        if ok:
            best = max(best, k)
            if k - 1 in tried and not tried.get(k + 1, True):
                break
            k += 1
        else:
            if best:
                break
            k -= 1
    return best


def markdown(result: dict) -> str:
    s, a = result["settings"], result["args"]
    lines = [f"# MLPerf Storage in DLIO: {a['workload']}, {a['nodes']} nodes, {a['case']} case", "",
             f"Command: `{result['command']}`", "",
             machine.summary_line(result["load"]), *[f"**{w}**" for w in machine.warning_lines(result["load"])], "",
             "## Scaling", "",
             f"- Workload file `{s['workload_file']}` (H100): batch {s['batch_size']}, "
             f"{s['computation_time_h100']} s of computation per batch, {s['read_threads']} read threads, "
             f"{s['epochs']} epochs, its loader `{s['data_loader']}`.",
             f"- Bytes x {a['byte_scale']:.6g} (S): records of {s['record_length']} B (stdev "
             f"{s['record_length_stdev']}), resize {s['record_length_resize']} B; computation x {a['time_scale']:.6g} "
             f"(T): {s['computation_time']:.5f} s per batch.",
             f"- One accelerator reads {s['bytes_per_s_per_accelerator'] / 1e6:.1f} MB/s here, "
             f"{s['real_bytes_per_s_per_accelerator'] / 1e9:.2f} GB/s unscaled: the emulated PFS of "
             f"{a['pfs_mbit']} Mbit/s ({a['pfs_mbit'] / 8:.0f} MB/s) stands for "
             f"{a['pfs_mbit'] / 8 * a['time_scale'] / a['byte_scale'] / 1000:.1f} GB/s.",
             f"- Dataset: {s['num_files_train']} files, {s['dataset_disk_bytes'] / 2**20:.0f} MiB on disk (DLIO's "
             "generator; each run uses the first files, a multiple of its ranks, and counts PFS bytes against "
             "those); "
             f"node memory (hdmlp's RAM class per node) {a['node_memory_mb']:.0f} MB, "
             f"the {a['nodes']} nodes together {a['node_memory_mb'] * a['nodes'] * 2**20 / s['dataset_disk_bytes']:.2f}x "
             "the dataset. netfs reads with direct I/O: no page cache.",
             f"- AU bar: {a['au']}% of DLIO's {'mean over the epochs after the first' if a['after_first'] else 'mean over all epochs'}.",
             "", "## Most accelerators per node meeting the bar", "",
             "| loader | accelerators per node |", "|---|---|"]
    for loader, k in result["best"].items():
        lines.append(f"| {loader} | {k} |")
    lines += ["", "## Every run", "",
              "| loader | accel./node | AU mean (DLIO) | AU per epoch | AU after epoch 1 | throughput (samples/s) | "
              "epoch seconds (rank 0) | steps per epoch | hdmlp's stall per epoch (s, slowest rank) | "
              "PFS bytes / dataset | other processes (cores) | wall s |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["runs"]:
        fmt = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
        stall = "-"
        if r["hdmlp"]:
            epochs = max(len(h["epochs"]) for h in r["hdmlp"])
            stall = " / ".join(f"{max(h['epochs'][e]['stall_seconds'] for h in r['hdmlp'] if len(h['epochs']) > e):.2f}"
                               for e in range(epochs))
        load = r.get("load") or {}
        lines.append(f"| {r['loader']} | {r['ranks_per_node']} | {fmt(r['au_percent'])} | "
                     f"{' / '.join(fmt(x) for x in r['epoch_au_percent'])} | {fmt(r['au_after_first_percent'])} | "
                     f"{fmt(r['throughput_samples_per_s'])} | "
                     f"{' / '.join(str(e.get('seconds')) for e in r['rank0_epochs'])} | "
                     f"{r['rank0_epochs'][0].get('steps') if r['rank0_epochs'] else '-'} | {stall} | "
                     f"{r['pfs_bytes_x_dataset']:.3f} | {fmt(load.get('other_cores'))} | {r['seconds']} |")
    lines += ["", "## Where a step's time went beyond its computation", "",
              "Milliseconds per step, mean over the ranks, over the steps DLIO's AU counts (all but each epoch's "
              "first), per epoch: waiting for the loader's next batch / the computation's sleep and DLIO's "
              "bookkeeping beyond the computation time / the rest (the barrier that ends every step: waiting "
              "for the slowest rank).", "",
              "| loader | accel./node | computation per step (ms) | loading | sleep overshoot | barrier |",
              "|---|---|---|---|---|---|"]
    for r in result["runs"]:
        per_epoch = r.get("step_times") or []
        cell = lambda key: " / ".join("-" if t is None else f"{t[key] * 1000:.0f}" for t in per_epoch) or "-"  # noqa: E731
        lines.append(f"| {r['loader']} | {r['ranks_per_node']} | {s['computation_time'] * 1000:.0f} | {cell('load')} | "
                     f"{cell('overshoot')} | {cell('wait')} |")
    lines += ["", "## DLIO's own summary of every run", ""]
    for r in result["runs"]:
        lines += [f"{r['loader']}, {r['ranks_per_node']} accelerator(s) per node:", "", "```",
                  *r["dlio_metric_lines"], "```", ""]
        if r.get("error"):  # a run that failed says why, in its ranks' own last words
            lines += ["The run failed; the end of its output:", "", "```", *r["error"][-2500:].splitlines(), "```", ""]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    if argv and argv[0] == "report":  # re-render the Markdown of result files, measuring nothing
        for path in argv[1:]:
            with open(path) as f:
                result = json.load(f)
            with open(os.path.splitext(path)[0] + ".md", "w") as f:
                f.write(markdown(result))
        return 0
    p = argparse.ArgumentParser(prog="python -m benchmarks mlperf-storage", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", choices=sorted(WORKLOADS), required=True)
    p.add_argument("--case", choices=["mlperf", "aggregate"], default="mlperf",
                   help="mlperf: the nodes' memory together is a fifth of the dataset (MLPerf Storage's rule); "
                        "aggregate: each node holds a third of it, AU counted after the first epoch")
    p.add_argument("--nodes", type=int, help="default: 2 (mlperf), 4 (aggregate)")
    p.add_argument("--ranks-per-node", help="comma-separated counts to run instead of searching")
    p.add_argument("--max-ranks-per-node", type=int, default=8)
    p.add_argument("--dataset-gb", type=float, default=1.0, help="the generated dataset's size (scaled), GiB")
    p.add_argument("--node-memory-mb", type=float, help="hdmlp's RAM per node (default: from --case)")
    p.add_argument("--pfs-mbit", type=float, default=400.0, help="the emulated PFS's bandwidth (netfs), Mbit/s")
    p.add_argument("--link-mbit", type=float, help="each node's links (tc tbf); default unshaped")
    p.add_argument("--byte-scale", type=float, help="S: sizes x S (default: the workload's, see WORKLOADS)")
    p.add_argument("--time-scale", type=float, help="T: computation per batch x T (default: the workload's)")
    p.add_argument("--epochs", type=int, help="default: the workload file's")
    p.add_argument("--read-threads", type=int, help="default: the workload file's")
    p.add_argument("--au", type=float, default=90.0, help="the AU bar, percent (default %(default)s)")
    p.add_argument("--after-first", action=argparse.BooleanOptionalAction, default=None,
                   help="judge AU over the epochs after the first (default: with --case aggregate)")
    p.add_argument("--loaders", default="dlio,hdmlp")
    p.add_argument("--hdmlp-options", default="{}",
                   help="a JSON object of further hdmlp.Job arguments for hdmlp's runs (HDMLP_DLIO_OPTIONS)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds one DLIO run may take")
    p.add_argument("--json", help="default: benchmarks/results/mlperf_storage-<workload>-<case>.json")
    p.add_argument("--markdown", help="default: beside the JSON, .md")
    args = p.parse_args(argv)
    defaults = WORKLOADS[args.workload]
    args.byte_scale = args.byte_scale or defaults["byte_scale"]
    args.time_scale = args.time_scale or defaults["time_scale"]
    args.nodes = args.nodes or (4 if args.case == "aggregate" else 2)
    if args.after_first is None:
        args.after_first = args.case == "aggregate"
    args.json = args.json or os.path.join(RESULTS, f"mlperf_storage-{args.workload}-{args.case}.json")
    args.markdown = args.markdown or os.path.splitext(args.json)[0] + ".md"

    from benchmarks.lab.cluster import emulation
    for reason in (dlio_env.unavailable_reason(), emulation.unavailable_reason()):
        if reason:
            print(f"[mlperf-storage] skipped: {reason}")
            return 0
    recorder = machine.LoadRecorder()
    wl = workload_config(args.workload)
    settings = scaled_settings(args, wl)
    if args.node_memory_mb is None:
        share = 1 / 5 / args.nodes if args.case == "mlperf" else 1 / 3
        args.node_memory_mb = settings["dataset_bytes"] * share / 2**20
    log(f"[mlperf-storage] {args.workload}: {settings['num_files_train']} files, "
        f"{settings['dataset_bytes'] / 2**20:.0f} MiB; {settings['bytes_per_s_per_accelerator'] / 1e6:.1f} MB/s per "
        f"accelerator; PFS {args.pfs_mbit / 8:.0f} MB/s; node memory {args.node_memory_mb:.0f} MB")
    dataset = make_dataset(settings)
    settings["dataset_disk_bytes"] = sum(os.path.getsize(f) for f in glob.glob(os.path.join(dataset, "train", "*")))
    service.install_signal_handlers()
    emulation.remove_stale(log=log)
    runs: list[dict] = []
    best: dict[str, int] = {}
    loaders = args.loaders.split(",")
    if args.ranks_per_node:
        args.max_ranks_per_node = max(int(k) for k in args.ranks_per_node.split(","))
        for loader in loaders:
            for k in (int(x) for x in args.ranks_per_node.split(",")):
                with emulation.EmulatedCluster(args.nodes, k, dataset, pfs="netfs", pfs_mbit=args.pfs_mbit,
                                               link_mbit=args.link_mbit, log=log, pfs_blksize=blksize(args)) as cluster:
                    with recorder.run(f"{loader}-{k}"):
                        run = run_dlio(cluster, settings, loader, args, f"{loader}-{k}")
                run["load"] = recorder.last(f"{loader}-{k}")
                runs.append(run)
                if meets(run, args.au, args.after_first):
                    best[loader] = max(best.get(loader, 0), k)
                best.setdefault(loader, 0)
                log(f"[mlperf-storage] {loader}, {k}/node: AU {run['au_percent']} (after epoch 1: "
                    f"{run['au_after_first_percent']}), PFS {run['pfs_bytes_x_dataset']:.2f}x")
    else:
        start = 1
        for loader in loaders:
            # hdmlp's search starts where DLIO's loader stopped (the aggregate case: at 3x that, its goal)
            # and goes up while the bar is met, down while not.
            best[loader] = search(loader, start, args, settings, dataset, recorder, runs)
            start = max(1, best[loader] * (3 if args.case == "aggregate" else 1))
    result = {"command": "python -m benchmarks mlperf-storage " + " ".join(sys.argv[2:] if argv is None else argv),
              "args": vars(args), "settings": settings, "dataset": dataset, "best": best, "runs": runs,
              "load": recorder.finish()}
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1, default=str)
    with open(args.markdown, "w") as f:
        f.write(markdown(result))
    log(f"[mlperf-storage] most accelerators per node at AU >= {args.au}%: {best}; wrote {args.json}, {args.markdown}")
    return 0
