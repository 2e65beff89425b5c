"""``python -m benchmarks <scenario>``: hdmlp against torchvision's DataLoader, side by side.

Each scenario names a store (the local disk with a warm page cache, or the
emulated parallel file system of benchmarks/lab/pfs.py), a number of ranks, and
how much local storage hdmlp may cache in, as shares of the dataset. Every
system runs in its own process (under mpirun for several ranks) over the same
dataset through the same store, one after the other, in one run:

  hdmlp-raw            hdmlp delivering each file's bytes
  hdmlp-transforms     hdmlp with its C++ pipeline (decode, RandomResizedCrop(224), flip,
                       ToTensor, Normalize)
  torch-raw-w{0,1,2}   torchvision ImageFolder reading each file's bytes + DataLoader
                       (num_workers 0, 1, 2; DistributedSampler under mpirun)
  torch-transforms-w{0,1,2}  ImageFolder (PIL) with the same torchvision.transforms chain
  hdmlp-python-w{1,2}  hdmlp running that same torchvision chain as a Python transform in 1 or 2
                       worker processes ([ImgDecode(), ToPIL(), chain]; scenarios python-warm
                       and python-pfs), against the DataLoader with as many workers

and reports, per system: images/s per epoch and over the job (start-up
included), the ratio to the best DataLoader of the same kind (raw or
transforms), the share of the consumer's time stalled waiting for a batch,
CPU seconds and peak RSS of the whole process tree (all ranks), bytes read
from the store (on the emulated PFS: measured on its link), and where samples
came from. Output: a table on the terminal, ``<out>/<scenario>.json``,
``<out>/<scenario>.png`` and ``<out>/<scenario>.md``; with the default
``--out`` (benchmarks/results) the scenario's section of benchmarks/README.md
is rewritten too.

    python -m benchmarks list
    python -m benchmarks warm --images 1000 --epochs 3
    python -m benchmarks pfs-aggregate            # mpirun -np 2
    python -m benchmarks all
    python -m benchmarks report                   # re-render from results/*.json
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from benchmarks.lab import machine as machine_mod
from benchmarks.lab import pfs as pfs_mod
from benchmarks.lab import service, system_tools

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_OUT = os.path.join(HERE, "results")
README = os.path.join(HERE, "README.md")
CLASSIC_SYSTEMS = ["hdmlp-raw", "hdmlp-transforms", "torch-raw-w0", "torch-raw-w1", "torch-raw-w2",
                   "torch-transforms-w0", "torch-transforms-w1", "torch-transforms-w2"]
PYTHON_SYSTEMS = ["hdmlp-python-w1", "torch-transforms-w1", "hdmlp-python-w2", "torch-transforms-w2"]
ALL_SYSTEMS = CLASSIC_SYSTEMS + ["hdmlp-python-w1", "hdmlp-python-w2"]


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    store: str                # "local" (warm page cache) or "pfs" (emulated PFS)
    ranks: int
    memory_share: float       # hdmlp's RAM class per rank, as a share of the dataset
    disk_share: float = 0.0   # hdmlp's local-disk class per rank, as a share of the dataset
    images: int = 800
    epochs: int = 3
    systems: tuple = tuple(CLASSIC_SYSTEMS)  # run by default (--systems overrides)


SCENARIOS = {s.name: s for s in [
    Scenario("warm", "Warm local cache: the dataset on local disk, in the page cache", "local", 1, 1.5),
    Scenario("pfs-ram", "Slow PFS, the dataset fits in one rank's RAM", "pfs", 1, 1.5),
    Scenario("pfs-aggregate", "Slow PFS, the dataset fits only in the 2 ranks' RAM together (mpirun -np 2)",
             "pfs", 2, 0.6),
    Scenario("pfs-partial", "Slow PFS, the dataset larger than all local storage (30% RAM + 25% disk)",
             "pfs", 1, 0.30, 0.25),
    Scenario("python-warm", "A Python transform (the torchvision chain on PIL images) in worker processes, warm "
             "local cache", "local", 1, 1.5, systems=tuple(PYTHON_SYSTEMS)),
    Scenario("python-pfs", "A Python transform (the torchvision chain on PIL images) in worker processes, slow PFS, "
             "the dataset fits in RAM", "pfs", 1, 1.5, systems=tuple(PYTHON_SYSTEMS)),
]}


def label(system: str) -> str:
    if system.startswith("hdmlp-python"):
        return f"hdmlp w={system.rsplit('-w', 1)[1]}, Python transform"
    if system.startswith("hdmlp"):
        return "hdmlp, " + ("raw bytes" if system == "hdmlp-raw" else "C++ transforms")
    kind, workers = system.rsplit("-w", 1)
    return f"DataLoader w={workers}, " + ("raw bytes" if kind == "torch-raw" else "PIL transforms")


def kind_of(system: str) -> str:
    return "raw" if "raw" in system else "transforms"


# -- the dataset -------------------------------------------------------------

def dataset_files(root: str) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        out += [os.path.join(dirpath, f) for f in sorted(filenames) if not f.startswith(".")]
    return out


def write_config(path: str, scenario: Scenario, dataset_bytes: int, store_mb_s: float, staging_mb: int) -> str:
    """An hdmlp config whose cache classes hold the scenario's shares of the dataset."""
    mib = dataset_bytes / 2**20
    classes = [f"  {{ capacity = {staging_mb}; threads = 4; }}"]
    if scenario.memory_share > 0:
        classes.append(f"  {{ backend = \"memory\"; capacity = {max(1, int(mib * scenario.memory_share))}; threads = 2;\n"
                       "    bandwidth = ( { threads = 1; bw = 6000.0; }, { threads = 2; bw = 10000.0; } ); }")
    if scenario.disk_share > 0:
        classes.append(f"  {{ backend = \"filesystem\"; capacity = {max(1, int(mib * scenario.disk_share))}; threads = 2;\n"
                       "    backend_options = { path = \"{user_cache}/storage\"; };\n"
                       "    bandwidth = ( { threads = 1; bw = 400.0; }, { threads = 2; bw = 700.0; } ); }")
    text = (f"# Generated by python -m benchmarks {scenario.name}: the cache classes hold "
            f"{scenario.memory_share:.0%} (RAM) and {scenario.disk_share:.0%} (disk) of the {mib:.0f} MiB dataset "
            f"per rank;\n# the store's bandwidth is what was measured on it.\n"
            f"b_c = 2000;\nb_fs = {store_mb_s:.1f};\ndistributed_threads = 2;\ncheckpoint = true;\n"
            "storage_classes = (\n" + ",\n".join(classes) + "\n);\n"
            f"pfs_bandwidth = ( {{ processes = 1; bw = {store_mb_s:.1f}; }} );\n")
    with open(path, "w") as f:
        f.write(text)
    return text


# -- running one system --------------------------------------------------------

def run_process(cmd: list[str], env: dict, timeout: float, log_path: str) -> int:
    """Runs cmd in its own process group; on any exception (Ctrl-C) the whole group is stopped."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            return proc.wait(timeout)
        except BaseException:
            system_tools.stop_group(proc)
            raise


def run_system(system: str, args, scenario: Scenario, data: str, config: str, work: str, store, log,
               recorder: machine_mod.LoadRecorder | None = None) -> dict:
    kind = system.rsplit("-w", 1)[0]
    spec = {"name": system, "kind": kind, "workers": int(system.rsplit("-w", 1)[1]) if "-w" in system else 0,
            "data": data, "epochs": args.epochs, "batch_size": args.batch_size, "seed": args.seed,
            "config": config, "step_ms": args.step_ms, "image_size": args.image_size, "out": work}
    spec_path = os.path.join(work, f"{system}.spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    cache = tempfile.mkdtemp(prefix="hdmlp-bench-cache-", dir=work)  # a first run: no index cache to reuse
    env = dict(os.environ, HDMLP_CACHE_DIR=cache, OMPI_MCA_rmaps_base_oversubscribe="1")
    cmd = [sys.executable, "-m", "benchmarks.runner", spec_path]
    if scenario.ranks > 1:
        mpirun = shutil.which("mpirun")
        if mpirun is None:
            raise RuntimeError("this scenario needs mpirun (Debian's openmpi-bin)")
        cmd = [mpirun, "--oversubscribe", "-np", str(scenario.ranks)] + \
            (["--allow-run-as-root"] if os.geteuid() == 0 else []) + cmd
    store.before_system()
    wire0 = store.wire_bytes()
    recorder = recorder or machine_mod.LoadRecorder()
    t = time.perf_counter()
    with recorder.run(system):
        try:
            rc = run_process(cmd, env, args.timeout, os.path.join(work, f"{system}.log"))
        except subprocess.TimeoutExpired:
            rc = f"timed out after {args.timeout:g} s (--timeout)"
    wall = time.perf_counter() - t
    load = recorder.last(system)
    wire = store.wire_bytes() - wire0 if wire0 is not None else None
    shutil.rmtree(cache, ignore_errors=True)
    ranks = []
    for r in range(scenario.ranks):
        path = os.path.join(work, f"{system}-rank{r}.json")
        if os.path.exists(path):
            with open(path) as f:
                ranks.append(json.load(f))
    if rc != 0 or len(ranks) != scenario.ranks or any(r["status"] != "ok" for r in ranks):
        errors = [r["error"] for r in ranks if r.get("error")]
        if isinstance(rc, str):
            errors = [rc]
        if not errors:
            with open(os.path.join(work, f"{system}.log")) as f:
                errors = [f.read().strip()[-800:] or f"exit status {rc}"]
        log(f"  {label(system):34s} failed: {errors[0].splitlines()[-1] if errors[0] else rc}")
        return {"status": "error", "error": errors[0], "label": label(system), "load": load}
    result = aggregate(ranks, args.epochs)
    result.update({"label": label(system), "kind": kind_of(system), "wall_seconds": wall, "wire_bytes": wire,
                   "load": load})
    log(f"  {label(system):34s} " + " ".join(f"{e['img_per_s']:7.0f}" for e in result["epochs"])
        + f" img/s per epoch, stall {result['stall_share']:.0%}, CPU {result['cpu_seconds']:.1f} s"
        + (f" [busy: other processes used {load['other_cores']:.2f} cores]" if load["busy"] else ""))
    return result


def aggregate(ranks: list[dict], epochs: int) -> dict:
    """Whole-job numbers from every rank's file: ranks run in parallel, so time is the slowest rank's."""
    per_epoch = []
    for e in range(epochs):
        eps = [r["epochs"][e] for r in ranks]
        sources: dict[str, int] = {}
        for ep in eps:
            for k, v in ep["sources"].items():
                sources[k] = sources.get(k, 0) + v
        seconds = max(ep["seconds"] for ep in eps)
        samples = sum(ep["samples"] for ep in eps)
        per_epoch.append({"samples": samples, "seconds": seconds, "img_per_s": samples / seconds,
                          "stall_share": sum(ep["stall_seconds"] for ep in eps) / sum(ep["seconds"] for ep in eps),
                          "sources": sources})
    job_seconds = max(r["startup_seconds"] + sum(ep["seconds"] for ep in r["epochs"]) for r in ranks)
    samples = sum(e["samples"] for e in per_epoch)
    return {
        "status": "ok", "epochs": per_epoch,
        "startup_seconds": max(r["startup_seconds"] for r in ranks),
        "job_img_per_s": samples / job_seconds,
        "stall_share": sum(ep["stall_seconds"] for r in ranks for ep in r["epochs"])
        / sum(ep["seconds"] for r in ranks for ep in r["epochs"]),
        "cpu_seconds": sum(r["cpu_seconds"] for r in ranks),
        "peak_rss_bytes": sum(r["peak_rss_bytes"] for r in ranks),
        "peak_pss_bytes": sum(r["peak_pss_bytes"] for r in ranks),
        "store_bytes": sum(r["store_bytes"] for r in ranks),
        "remote_reads": sum(r.get("remote_reads", 0) for r in ranks),
        "classes": [r.get("classes") for r in ranks if r.get("classes")],
    }


# -- stores --------------------------------------------------------------------

class LocalStore:
    """The dataset on local disk, its page cache warmed before each system."""

    kind = "local"

    def __init__(self, root: str, files: list[str]) -> None:
        self.root, self.files, self.path = root, files, root

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def before_system(self) -> None:
        vmtouch = shutil.which("vmtouch")
        if vmtouch:
            subprocess.run([vmtouch, "-tq", self.root], check=False)
            return
        for p in self.files:
            with open(p, "rb") as f:
                while f.read(1 << 20):
                    pass

    def wire_bytes(self):
        return None

    def describe(self) -> dict:
        return {"kind": "local", "note": "local disk, page cache warmed before each system"}


class PFSStore:
    """The dataset served by the emulated PFS; the client's page cache emptied before each system."""

    kind = "pfs"

    def __init__(self, root: str, files: list[str], rate_mbit: float, delay_ms: float, log,
                 kind: str = pfs_mod.DEFAULT_KIND) -> None:
        self.pfs = pfs_mod.EmulatedPFS(root, rate_mbit=rate_mbit, delay_ms=delay_ms, log=log, kind=kind)
        self.files = files
        self.link: dict = {}

    def __enter__(self):
        self.pfs.start()
        self.path = self.pfs.path
        self.remote_files = [self.pfs.local_path(f) for f in self.files]
        self.link = self.pfs.measure(self.remote_files[:min(len(self.remote_files), 160)])
        return self

    def __exit__(self, *exc):
        self.pfs.stop()

    def before_system(self) -> None:
        pfs_mod.drop_page_cache(self.remote_files)

    def wire_bytes(self):
        return self.pfs.wire_bytes()

    def describe(self) -> dict:
        if self.pfs.kind == "netfs":
            note = (f"netfs (the project's own file server, benchmarks/lab/netfs.py) in a network namespace; veth "
                    f"shaped with tc tbf {self.pfs.rate_mbit:g} Mbit/s each way; +{self.pfs.open_delay_ms:g} ms per "
                    f"metadata request and +{self.pfs.read_delay_ms:g} ms per read (one round trip of "
                    f"{self.pfs.delay_ms:g} ms each way); every open goes over the link")
        else:
            note = (f"sshfs over ssh from a network namespace; veth shaped with tc tbf "
                    f"{self.pfs.rate_mbit:g} Mbit/s each way, +{self.pfs.delay_ms:g} ms each way by a TCP "
                    f"delay proxy; every open goes over the link")
        return {"kind": "pfs", "server": self.pfs.kind, "link": self.link, "note": note}


# -- reporting -----------------------------------------------------------------

def add_ratios(systems: dict) -> None:
    for kind in ("raw", "transforms"):
        torch_rows = {k: v for k, v in systems.items() if v["status"] == "ok" and v["kind"] == kind
                      and k.startswith("torch")}
        if not torch_rows:
            continue
        best = max(torch_rows, key=lambda k: torch_rows[k]["job_img_per_s"])
        for k, v in systems.items():
            if v["status"] == "ok" and v["kind"] == kind:
                v["best_dataloader"] = best
                v["vs_best_dataloader"] = v["job_img_per_s"] / torch_rows[best]["job_img_per_s"]
                # A Python transform's workers against the DataLoader with as many, epoch by epoch.
                same = systems.get("torch-transforms-w" + k.rsplit("-w", 1)[1]) if k.startswith("hdmlp-python") \
                    else None
                if same is not None and same["status"] == "ok":
                    v["vs_same_workers"] = v["job_img_per_s"] / same["job_img_per_s"]
                    v["epochs_vs_same_workers"] = [a["img_per_s"] / b["img_per_s"]
                                                   for a, b in zip(v["epochs"], same["epochs"])]


def source_shares(sources: dict) -> str:
    total = sum(sources.values()) or 1
    return ", ".join(f"{'store' if k == 'pfs' else k} {v / total:.0%}"
                     for k, v in sorted(sources.items(), key=lambda kv: -kv[1]))


def table_rows(result: dict) -> tuple[list[str], list[list[str]]]:
    epochs = result["args"]["epochs"]
    store_col = "PFS link MB" if result["store"]["kind"] == "pfs" else "store MB"
    header = ["system"] + [f"epoch {e} img/s" for e in range(epochs)] + \
        ["job img/s", "vs best DataLoader", "stall", "CPU s", "peak RSS MB", store_col, "samples from (last epoch)"]
    rows = []
    for name, r in result["systems"].items():
        if r["status"] != "ok":
            rows.append([r["label"]] + ["-"] * (len(header) - 2) + [f"failed: {r['error'].splitlines()[-1][:70]}"])
            continue
        store_bytes = r["wire_bytes"] if r.get("wire_bytes") is not None else r["store_bytes"]
        rows.append([r["label"]] + [f"{e['img_per_s']:.0f}" for e in r["epochs"]] +
                    [f"{r['job_img_per_s']:.0f}",
                     (f"{r['vs_best_dataloader']:.2f}x" if "vs_best_dataloader" in r else "-") +
                     (f" (same workers: {r['vs_same_workers']:.2f}x; per epoch "
                      + " ".join(f"{x:.2f}x" for x in r["epochs_vs_same_workers"]) + ")"
                      if "vs_same_workers" in r else ""),
                     f"{r['stall_share']:.0%}", f"{r['cpu_seconds']:.1f}", f"{r['peak_rss_bytes'] / 2**20:.0f}",
                     f"{store_bytes / 1e6:.1f}", source_shares(r["epochs"][-1]["sources"])])
    return header, rows


def text_table(header, rows) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    line = lambda cells: "  ".join(c.ljust(w) if i in (0, len(cells) - 1) else c.rjust(w)  # noqa: E731
                                   for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def describe_setup(result: dict) -> list[str]:
    m, d, a, s = result["machine"], result["dataset"], result["args"], result["store"]
    # Older results had only this (sampled when the report was made); newer ones have "load".
    load = f" (shared: 1-min load average {m['load_average_1min']} at the start)" \
        if "load_average_1min" in m and "load" not in result else ""
    cores = m.get("cores_online", m.get("cores"))  # "cores": results before lab/machine.py's facts
    lines = [f"Machine: {cores} cores ({m['cpu']}), {m['memory_gib']} GiB, Linux {m['kernel']}; "
             f"{m['date']}{load}.",
             f"Dataset: {d['images']} generated ImageNet-like JPEGs in {d['classes']} classes, "
             f"{d['bytes'] / 1e6:.0f} MB ({d['bytes'] / d['images'] / 1e3:.0f} KB per file on average); "
             f"batch {a['batch_size']}, {a['epochs']} epochs, {result['scenario']['ranks']} rank(s), "
             f"consumer step {a['step_ms']:g} ms per batch, seed {a['seed']}."]
    if s["kind"] == "pfs":
        link = s["link"]
        readers = next(k for k in link if k.endswith("_readers_mb_s"))
        lines.append(f"Store: emulated PFS ({s['note']}). Measured on the mount: "
                     f"{link['file_ms_median']} ms to read one {link['file_kb_mean']:.0f} KB file (median), "
                     f"{link['one_reader_mb_s']} MB/s for one reader, {link[readers]} MB/s for "
                     f"{readers.split('_')[0]} readers.")
    else:
        lines.append(f"Store: {s['note']}.")
    if "load" in result:
        lines += machine_mod.report_lines(result["load"])
    sc = result["scenario"]
    lines.append(f"hdmlp caches per rank: RAM {sc['memory_share']:.0%} of the dataset"
                 + (f", local disk {sc['disk_share']:.0%}" if sc["disk_share"] else "")
                 + " (generated configs in the JSON). Ratios: job images/s (start-up included) against the "
                 "fastest DataLoader setting of the same kind (raw bytes or transforms).")
    return lines


def markdown(result: dict) -> str:
    header, rows = table_rows(result)
    out = [f"### `{result['scenario']['name']}`: {result['scenario']['title']}", "",
           f"Command: `{result['command']}`", ""]
    out += [line + "  " for line in describe_setup(result)] + [""]
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "|".join("---" if i in (0, len(header) - 1) else "---:" for i in range(len(header))) + "|")
    out += ["| " + " | ".join(r) + " |" for r in rows]
    out += ["", f"Plot: [results/{result['scenario']['name']}.png](results/{result['scenario']['name']}.png), "
                f"numbers: [results/{result['scenario']['name']}.json](results/{result['scenario']['name']}.json)."]
    return "\n".join(out) + "\n"


def plot(result: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = {k: v for k, v in result["systems"].items() if v["status"] == "ok"}
    if not ok:
        return
    epochs = result["args"]["epochs"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 5.5), gridspec_kw={"width_ratios": [3, 2]})
    names = list(ok)
    width = 0.8 / epochs
    for e in range(epochs):
        xs = [i + (e - (epochs - 1) / 2) * width for i in range(len(names))]
        ax1.bar(xs, [ok[n]["epochs"][e]["img_per_s"] for n in names], width, label=f"epoch {e}")
    for i, n in enumerate(names):
        if "vs_best_dataloader" in ok[n]:
            top = max(ep["img_per_s"] for ep in ok[n]["epochs"])
            ax1.annotate(f"{ok[n]['vs_best_dataloader']:.2f}x", (i, top), ha="center", va="bottom", fontsize=8)
    ax1.set_xticks(range(len(names)), [ok[n]["label"].replace(", ", "\n") for n in names], fontsize=7)
    ax1.set_yscale("log")  # raw bytes from RAM and decoding on 2 cores differ by orders of magnitude
    ax1.set_ylabel("images/s (log scale)")
    ax1.set_title("images/s per epoch (label: job images/s vs best DataLoader of its kind)", fontsize=9)
    ax1.legend(fontsize=8)
    sources = sorted({s for v in ok.values() for ep in v["epochs"] for s in ep["sources"]},
                     key=lambda s: ["pfs", "remote", "memory", "filesystem"].index(s)
                     if s in ["pfs", "remote", "memory", "filesystem"] else 9)
    colors = {"pfs": "#d62728", "remote": "#ff7f0e", "memory": "#2ca02c", "filesystem": "#1f77b4"}
    bars = [(n, e) for n in names for e in range(epochs)]
    bottom = [0.0] * len(bars)
    for s in sources:
        vals = []
        for n, e in bars:
            src = ok[n]["epochs"][e]["sources"]
            vals.append(src.get(s, 0) / max(1, sum(src.values())))
        ax2.bar(range(len(bars)), vals, bottom=bottom, label="store" if s == "pfs" else s,
                color=colors.get(s))
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax2.set_xticks(range(len(bars)), [f"{'h' if n.startswith('hdmlp') else 'D'}{e}" for n, e in bars], fontsize=6)
    for i, n in enumerate(names):
        ax2.annotate(n.replace("torch-", "DL-").replace("transforms", "tf").replace("-w", "\nw="),
                     (i * epochs + (epochs - 1) / 2, 1.02), ha="center", fontsize=6)
    ax2.set_ylim(0, 1.15)
    ax2.set_ylabel("share of samples")
    ax2.set_title("where samples came from, per system and epoch", fontsize=9)
    ax2.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"{result['scenario']['name']}: {result['scenario']['title']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def update_readme(result: dict, readme: str = README) -> None:
    """Rewrites the scenario's marked section of benchmarks/README.md (added at the end if missing)."""
    name = result["scenario"]["name"]
    begin, end = f"<!-- results:{name}:begin -->", f"<!-- results:{name}:end -->"
    with open(readme) as f:
        text = f.read()
    block = f"{begin}\n<!-- generated by python -m benchmarks; do not edit -->\n{markdown(result)}{end}"
    if begin in text and end in text:
        text = text[:text.index(begin)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    with open(readme, "w") as f:
        f.write(text)


# -- a scenario ------------------------------------------------------------------

def run_scenario(scenario: Scenario, args, log=print) -> dict | None:
    recorder = machine_mod.LoadRecorder()  # first: the load before this scenario does anything
    import hdmlp
    from hdmlp.datasets import make_image_folder

    args.images = args.images or scenario.images
    args.epochs = args.epochs or scenario.epochs
    store_kind = args.store or scenario.store
    if store_kind == "pfs":
        reason = pfs_mod.unavailable_reason(log=log, kind=args.pfs)
        if reason:
            log(f"[{scenario.name}] skipped: the emulated PFS cannot run on this machine: {reason}")
            return None
    systems = args.systems.split(",") if args.systems else list(scenario.systems)
    unknown = [s for s in systems if s not in ALL_SYSTEMS]
    if unknown:
        raise SystemExit(f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(ALL_SYSTEMS)}")
    root = args.data or os.path.join(hdmlp.user_cache_dir(), "datasets", f"bench-{args.images}-{args.classes}")
    log(f"[{scenario.name}] {scenario.title}")
    if args.data:
        log(f"[{scenario.name}] dataset {root} (given with --data)")
    else:
        log(f"[{scenario.name}] dataset {root} ({args.images} images, {args.classes} classes; generated once)")
        make_image_folder(root, num_images=args.images, num_classes=args.classes, seed=args.data_seed)
    files = dataset_files(root)
    if not files:
        raise SystemExit(f"the dataset folder '{root}' has no files")
    total = sum(os.path.getsize(p) for p in files)
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix=f"hdmlp-bench-{scenario.name}-")
    try:
        store = PFSStore(root, files, args.rate_mbit, args.delay_ms, log, kind=args.pfs) if store_kind == "pfs" \
            else LocalStore(root, files)
        with store:
            store_mb_s = store.link.get("4_readers_mb_s", 500.0) if store_kind == "pfs" else 500.0
            if store_kind == "pfs":
                log(f"[{scenario.name}] link as measured on the mount: {store.link}")
            # Staging: 32 MB of files read ahead; with transforms, plus 4 batches of their output
            # (hdmlp charges each sample's transformed bytes against the staging capacity).
            configs = {"raw": os.path.join(work, "hdmlp-raw.cfg"), "transforms": os.path.join(work, "hdmlp-tf.cfg")}
            out_mb = 4 * args.batch_size * 3 * args.image_size ** 2 * 4 / 2**20
            config_text = {"raw": write_config(configs["raw"], scenario, total, store_mb_s, 32),
                           "transforms": write_config(configs["transforms"], scenario, total, store_mb_s,
                                                      32 + int(out_mb + 1))}
            log(f"[{scenario.name}] {len(systems)} systems, one after the other, each in its own process"
                + (f" ({scenario.ranks} ranks under mpirun)" if scenario.ranks > 1 else ""))
            results = {}
            for system in systems:
                # A Python transform's core delivers raw bytes: the raw configuration's staging.
                config = configs["raw" if system.startswith("hdmlp-python") else kind_of(system)]
                results[system] = run_system(system, args, scenario, store.path, config, work, store, log, recorder)
            store_desc = store.describe()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    add_ratios(results)
    result = {
        "scenario": dataclasses.asdict(scenario) | {"store": store_kind},
        "command": "python -m benchmarks " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        "machine": machine_mod.machine_facts(),
        "dataset": {"path": root, "images": len(files), "bytes": total,
                    "classes": len([d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))]),
                    "generator": None if args.data else f"hdmlp.datasets.make_image_folder(seed={args.data_seed})"},
        "store": store_desc, "hdmlp_configs": config_text,
        "args": {k: getattr(args, k) for k in ("images", "epochs", "batch_size", "step_ms", "seed", "image_size",
                                               "rate_mbit", "delay_ms")},
        "systems": results,
        "load": recorder.finish(),
    }
    base = os.path.join(args.out, scenario.name)
    with open(base + ".json", "w") as f:
        json.dump(result, f, indent=1)
    report(result, base, args.readme, log)
    return result


def report(result: dict, base: str, readme: bool, log=print) -> None:
    """The terminal table, ``base``.md and .png, and the README section, from a result."""
    header, rows = table_rows(result)
    log("")
    log("\n".join(describe_setup(result)))
    log(text_table(header, rows))
    if "load" in result:
        machine_mod.print_warnings(result["load"], log)
    with open(base + ".md", "w") as f:
        f.write(markdown(result))
    written = [base + ".json", base + ".md"]
    try:
        plot(result, base + ".png")
        written.append(base + ".png")
    except ImportError as e:
        log(f"[{result['scenario']['name']}] no plot: {e} (matplotlib is in hdmlp's test extra)")
    if readme:
        update_readme(result)
        written.append(README)
    log(f"[{result['scenario']['name']}] wrote {', '.join(os.path.relpath(p) for p in written)}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["cluster"]:  # the emulated cluster has its own options (benchmarks/cluster/cli.py)
        from benchmarks.cluster.cli import main as cluster_main
        return cluster_main(argv[1:])
    if argv[:1] == ["mlperf-storage"]:  # DLIO's MLPerf Storage workloads on the cluster (benchmarks/mlperf_storage.py)
        from benchmarks.mlperf_storage import main as mlperf_main
        return mlperf_main(argv[1:])
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", help=f"one of: {', '.join(SCENARIOS)}; 'all' runs each; 'list' lists them; "
                                    "'report' re-renders the reports from the JSON files in --out")
    p.add_argument("--images", type=int, help="images in the generated dataset (default: the scenario's)")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--epochs", type=int, help="default: the scenario's")
    p.add_argument("--batch-size", type=int, default=32, help="global batch (split over ranks)")
    p.add_argument("--step-ms", type=float, default=10.0,
                   help="the consumer's simulated training step per batch (a sleep)")
    p.add_argument("--image-size", type=int, default=224, help="RandomResizedCrop's output side")
    p.add_argument("--systems", help=f"comma-separated subset of: {', '.join(ALL_SYSTEMS)}")
    p.add_argument("--store", choices=["local", "pfs"], help="override the scenario's store")
    p.add_argument("--rate-mbit", type=float, default=200.0, help="emulated PFS link rate, each way")
    p.add_argument("--delay-ms", type=float, default=1.0, help="emulated PFS one-way delay, each way")
    p.add_argument("--pfs", choices=pfs_mod.KINDS, default=pfs_mod.DEFAULT_KIND,
                   help="the emulated PFS's file server: netfs (default) or sshfs (the results before netfs)")
    p.add_argument("--seed", type=int, default=0, help="seed of the loaders' shuffles")
    p.add_argument("--data-seed", type=int, default=0, help="seed of the generated dataset")
    p.add_argument("--data", help="use this dataset folder instead of generating one in the user cache")
    p.add_argument("--out", default=DEFAULT_OUT, help="where the JSON, PNG and Markdown go (default: %(default)s)")
    p.add_argument("--readme", action=argparse.BooleanOptionalAction, default=None,
                   help="rewrite the scenario's section of benchmarks/README.md (default: when --out is the default)")
    p.add_argument("--timeout", type=float, default=1200, help="seconds one system may run")
    args = p.parse_args(argv)
    if args.readme is None:
        args.readme = os.path.realpath(args.out) == os.path.realpath(DEFAULT_OUT)
    if args.scenario == "list":
        for s in SCENARIOS.values():
            print(f"{s.name:14s} {s.title}")
        return 0
    if args.scenario == "report":
        # Re-renders the table, Markdown, plot and README sections from the JSON files in --out,
        # without measuring anything (e.g. after a change to the presentation).
        for name in SCENARIOS:
            base = os.path.join(args.out, name)
            if os.path.exists(base + ".json"):
                with open(base + ".json") as f:
                    report(json.load(f), base, args.readme)
        return 0
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    if any(n not in SCENARIOS for n in names):
        p.error(f"unknown scenario {args.scenario!r}; choose from {', '.join(SCENARIOS)}, all, list")
    service.install_signal_handlers()
    images, epochs = args.images, args.epochs
    for name in names:
        args.images, args.epochs = images, epochs
        run_scenario(SCENARIOS[name], args)
    return 0
