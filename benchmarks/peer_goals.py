"""Issue 38's goals in one command: hdmlp against its bare pipeline and the peers, and against a build of
another commit (no regression), side by side with ../shared/bench-peers/.

bench-peers (outside the project; its README sets up the scratch folder S with the dataset, the peers'
venvs and the bare pipeline's binary) is the reference measurement. This driver runs its scripts, each
system in a process of its own under its monitor.py, interleaved over --rounds, and adds:

  hdmlp        bench-peers' bench_hdmlp.py under this checkout's Python (--python: the build measured)
  hdmlp-base   the same under --base-python: a build of the commit compared with (a worktree of main)
  ceiling_cc   bench-peers' ceiling_hdmlp: hdmlp's own TransformPipeline, bare, files in memory
  tv_w2, dali, ffcv_numbanorm, spdl   the peers, as bench-peers runs them
  val, timm, raw   the other chains, hdmlp and hdmlp-base only (each in its own process):
               val   Resize(256), CenterCrop(224), ToTensor, Normalize (bench_hdmlp.py --chain val)
               timm  RandomResizedCrop(224), flip, RandAugment(2, 9), ToTensor, Normalize,
                     RandomErasing(0.25) (this file's --worker, bench-peers' timing)
               raw   no transforms: each file's bytes (this file's --worker; the touch is a length)

The timing is bench-peers' (common.py): epoch-1 rate = images / (construction + first pass), steady rate =
the later passes, CPU = the process's getrusage from construction to teardown per 1,000 images, each batch
touched with float(x.sum()) (raw: the bytes' lengths). The goals, per round then the median:

  steady   hdmlp steady img/s / ceiling_cc's                >= 0.92
  cpu      hdmlp CPU per image / ceiling_cc's               <= 1.10
  epoch1   hdmlp epoch-1 img/s / its steady img/s           >= 0.95
  peers    hdmlp steady img/s / the best peer's             >= 1.70
  no regression, per chain (train, val, timm, raw): hdmlp / hdmlp-base steady img/s >= 0.98 and CPU per
           image <= 1.02

Wall-clock goals need a quiet machine: the load average and the CPU other processes used are recorded for
every run, and a busy run is flagged. The CPU goals hold up better under load, not entirely (caches).

    S=/tmp/peers-scratch   # bench-peers' README: dataset, venvs, build/ceiling_hdmlp
    git worktree add ../hdmlp-base main && (cd ../hdmlp-base && scripts/dev.sh setup)
    python benchmarks/peer_goals.py --peers $S/peers --base-python ../hdmlp-base/.venv/bin/python \\
        --rounds 4 --json benchmarks/results/peer_goals.json --markdown benchmarks/results/peer_goals.md
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEERS = ("tv_w2", "dali", "ffcv_numbanorm", "spdl")
REGRESSION_CHAINS = ("train", "val", "timm", "raw")
GOALS = {"steady": 0.92, "cpu": 1.10, "epoch1": 0.95, "peers": 1.70, "regression_rate": 0.98,
         "regression_cpu": 1.02}


# -- the worker: another chain under bench-peers' timing ----------------------------------

def worker(a) -> None:
    sys.path.insert(0, a.bench_peers)
    from common import MEAN, STD, Recorder  # bench-peers' timing, the same as bench_hdmlp.py's
    import hdmlp
    import hdmlp.transforms as T
    from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder
    chain = None
    if a.chain == "timm":
        chain = [T.ImgDecode(), T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.RandAugment(2, 9),
                 T.ToTensor(), T.Normalize(MEAN, STD), T.RandomErasing(0.25)]
    rec = Recorder("hdmlp-" + a.chain, a, chain=a.chain, bs=a.bs, version=getattr(hdmlp, "__version__", "?"))
    rec.construct_start()
    job = hdmlp.Job(a.data, a.bs, a.epochs, transforms=chain, seed=1)
    loader = HDMLPDataLoader(HDMLPImageFolder(a.data, job))
    rec.construct_end()
    if chain is None:  # raw bytes: a list of uint8 tensors per batch; the first one stands for the batch
        rec.run_epochs(lambda ep: loader, a.epochs, unpack=lambda b: (b[0][0], b[1], len(b[1])),
                       touch=lambda x: float(len(x)))
    else:
        rec.run_epochs(lambda ep: loader, a.epochs)
    job.close()
    del loader, job
    rec.finish(a.out)


# -- the driver ------------------------------------------------------------------------------

def loadavg() -> list[float]:
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def busy_cpu_seconds() -> float:
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / os.sysconf("SC_CLK_TCK")


def systems(a) -> dict[str, list[str]]:
    bp = lambda name: os.path.join(a.bench_peers, name)  # noqa: E731
    common = ["--data", a.data, "--epochs", str(a.epochs), "--bs", str(a.bs)]
    venv = lambda name: os.path.join(a.peers, "venv-" + name, "bin", "python")  # noqa: E731
    out = {
        "hdmlp": [a.python, bp("bench_hdmlp.py"), "--threads", "0", "--chain", "train"] + common,
        "hdmlp-base": [a.base_python, bp("bench_hdmlp.py"), "--threads", "0", "--chain", "train"] + common,
        "ceiling_cc": [os.path.join(a.peers, "build", "ceiling_hdmlp"), a.data, "--chain", "train", "--threads",
                       str(a.threads), "--passes", str(a.epochs)],
        "tv_w2": [a.python, bp("bench_tv.py"), "--threads", "2", "--chain", "train"] + common,
        "dali": [venv("dali"), bp("bench_dali.py"), "--threads", str(a.threads), "--chain", "train"] + common,
        "ffcv_numbanorm": [venv("ffcv"), bp("bench_ffcv.py"), "--beton", os.path.join(a.peers, "inet-4k.beton"),
                           "--threads", str(a.threads), "--variant", "numbanorm", "--chain", "train"] + common,
        "spdl": [venv("spdl"), bp("bench_spdl.py"), "--threads", str(a.threads), "--chain", "train"] + common,
    }
    for build, python in (("", a.python), ("-base", a.base_python)):
        out["val" + build] = [python, bp("bench_hdmlp.py"), "--threads", "0", "--chain", "val"] + common
        for chain in ("timm", "raw"):
            out[chain + build] = [python, os.path.abspath(__file__), "--worker", "--chain", chain,
                                  "--bench-peers", a.bench_peers] + common
    return out


def run_one(name: str, argv: list[str], a, rnd: int) -> dict:
    mon = os.path.join(a.work, f"r{rnd}_{name}.monitor.json")
    cmd = [sys.executable, os.path.join(a.bench_peers, "monitor.py"), "--out", mon, "--timeout",
           str(a.timeout), "--"] + argv
    la0, b0, t0 = loadavg(), busy_cpu_seconds(), time.time()
    p = subprocess.run(cmd, cwd="/tmp", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall, busy, la1 = time.time() - t0, busy_cpu_seconds() - b0, loadavg()
    with open(os.path.join(a.work, f"r{rnd}_{name}.log"), "w") as f:
        f.write(" ".join(argv) + "\n" + p.stdout)
    monitor = json.load(open(mon)) if os.path.exists(mon) else {}
    result = None
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[7:])
        elif line.startswith("{") and name == "ceiling_cc":
            result = json.loads(line)
    own = monitor.get("cpu_s", 0.0)
    rec = {"name": name, "round": rnd, "rc": p.returncode, "wall_s": round(wall, 2), "loadavg_before": la0,
           "loadavg_after": la1, "foreign_cpu_s": round(busy - own, 2), "result": result, "monitor": monitor}
    r = result or {}
    print(f"{time.strftime('%H:%M:%S')} r{rnd} {name:15s} rc={p.returncode} epoch1 {r.get('epoch1_img_s')} "
          f"steady {r.get('steady_img_s', r.get('img_s'))} img/s cpu/1k {r.get('cpu_s_per_1k')} "
          f"load {la0[0]:.2f} foreign cpu {rec['foreign_cpu_s']:.1f} s", flush=True)
    return rec


def steady_of(r: dict) -> float | None:
    res = r.get("result") or {}
    return res.get("steady_img_s", res.get("img_s"))


def summarise(runs: list[dict]) -> dict:
    by_round: dict[int, dict[str, dict]] = {}
    for r in runs:
        if r["rc"] == 0 and r.get("result"):
            by_round.setdefault(r["round"], {})[r["name"]] = r
    per_round = []
    for rnd, rs in sorted(by_round.items()):
        g: dict[str, float] = {}
        h, c = rs.get("hdmlp"), rs.get("ceiling_cc")
        if h and c:
            g["steady"] = steady_of(h) / steady_of(c)
            g["cpu"] = h["result"]["cpu_s_per_1k"] / c["result"]["cpu_s_per_1k"]
        if h:
            g["epoch1"] = h["result"]["epoch1_img_s"] / h["result"]["steady_img_s"]
            peers = [steady_of(rs[p]) for p in PEERS if p in rs]
            if peers:
                g["peers"] = steady_of(h) / max(peers)
        for chain in REGRESSION_CHAINS:
            new, base = rs.get("hdmlp" if chain == "train" else chain), rs.get(
                "hdmlp-base" if chain == "train" else chain + "-base")
            if new and base:
                g[f"{chain}: rate new/base"] = steady_of(new) / steady_of(base)
                g[f"{chain}: cpu new/base"] = new["result"]["cpu_s_per_1k"] / base["result"]["cpu_s_per_1k"]
        per_round.append({"round": rnd, "ratios": g})
    keys = sorted({k for pr in per_round for k in pr["ratios"]})
    ratios = {k: {"median": statistics.median(v), "min": min(v), "max": max(v)}
              for k in keys for v in [[pr["ratios"][k] for pr in per_round if k in pr["ratios"]]]}
    table = {}
    for name in sorted({r["name"] for r in runs}):
        rows = [r["result"] for r in runs if r["name"] == name and r.get("result") and r["rc"] == 0]
        if rows:
            med = lambda k: statistics.median([x[k] for x in rows if x.get(k) is not None]) \
                if any(x.get(k) is not None for x in rows) else None  # noqa: E731
            table[name] = {"epoch1_img_s": med("epoch1_img_s"), "steady_img_s": med("steady_img_s") or med("img_s"),
                           "cpu_s_per_1k": med("cpu_s_per_1k"), "runs": len(rows)}
    return {"per_round": per_round, "ratios": ratios, "table": table}


def verdict(key: str, value: float) -> str:
    if key.endswith("rate new/base"):
        return "met" if value >= GOALS["regression_rate"] else "NOT met"
    if key.endswith("cpu new/base"):
        return "met" if value <= GOALS["regression_cpu"] else "NOT met"
    if key == "cpu":
        return "met" if value <= GOALS["cpu"] else "NOT met"
    return "met" if value >= GOALS[key] else "NOT met"


def render(s: dict, meta: dict) -> str:
    lines = [f"Started {meta['started']} ({meta['uptime_start']}), finished {meta['finished']} "
             f"({meta['uptime_end']}). Rounds: {meta['rounds']}; most foreign CPU in one run: "
             f"{meta['max_foreign_cpu_s']:.1f} s; load average at the runs' starts: {meta['load_min']:.2f} to "
             f"{meta['load_max']:.2f}.", "",
             "| system | epoch-1 img/s | steady img/s | CPU s / 1k images | runs |", "|---|---:|---:|---:|---:|"]
    for name, t in s["table"].items():
        cell = lambda v, f: "-" if v is None else f.format(v)  # noqa: E731
        lines.append(f"| {name} | {cell(t['epoch1_img_s'], '{:,.0f}')} | {cell(t['steady_img_s'], '{:,.0f}')} | "
                     f"{cell(t['cpu_s_per_1k'], '{:.3f}')} | {t['runs']} |")
    lines += ["", "| goal (per round, then median) | median | range | goal | |", "|---|---:|---|---|---|"]
    goal_text = {"steady": ">= 0.92x", "cpu": "<= 1.10x", "epoch1": ">= 0.95x", "peers": ">= 1.70x"}
    for k, v in s["ratios"].items():
        g = goal_text.get(k, ">= 0.98x" if "rate" in k else "<= 1.02x")
        lines.append(f"| {k} | **{v['median']:.3f}x** | {v['min']:.3f}x to {v['max']:.3f}x | {g} | "
                     f"{verdict(k, v['median'])} |")
    lines += ["", f"Command: `{meta['command']}`"]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers", help="bench-peers' scratch folder S/peers (dataset, venvs, build)")
    ap.add_argument("--bench-peers", default=os.path.join(os.path.dirname(ROOT), "shared", "bench-peers"))
    ap.add_argument("--python", default=os.path.join(ROOT, ".venv", "bin", "python"), help="the build measured")
    ap.add_argument("--base-python", default=None, help="a build of the commit compared with")
    ap.add_argument("--data", default=None, help="default: PEERS/inet-4k")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--bs", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--systems", default=None, help="comma list (default: all; hdmlp-base and the chains' "
                    "base runs need --base-python)")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--work", default=None, help="folder for the runs' logs (default: a new one in /tmp)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--chain", default="timm", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    if not a.peers:
        ap.error("--peers (bench-peers' scratch folder S/peers) is required")
    a.peers, a.bench_peers = os.path.abspath(a.peers), os.path.abspath(a.bench_peers)
    if not os.path.isfile(os.path.join(a.bench_peers, "monitor.py")):
        ap.error(f"--bench-peers {a.bench_peers} is not bench-peers' folder (no monitor.py): give its path")
    a.data = os.path.abspath(a.data or os.path.join(a.peers, "inet-4k"))
    a.python = os.path.abspath(a.python)
    a.base_python = os.path.abspath(a.base_python) if a.base_python else None
    a.work = a.work or time.strftime("/tmp/hdmlp-peer-goals-%Y%m%d-%H%M%S")
    os.makedirs(a.work, exist_ok=True)
    every = systems(a)
    names = a.systems.split(",") if a.systems else [n for n in every if a.base_python or not n.endswith("-base")]
    for n in names:
        if n not in every:
            sys.exit(f"unknown system {n}; known: {', '.join(every)}")
    for root, _, files in os.walk(a.data):  # warm the page cache for everyone
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                fh.read()
    up = lambda: subprocess.run(["uptime"], stdout=subprocess.PIPE, text=True).stdout.strip()  # noqa: E731
    meta = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "uptime_start": up(), "rounds": a.rounds,
            "systems": {n: every[n] for n in names}, "command": "python benchmarks/peer_goals.py " + " ".join(sys.argv[1:])}
    runs = []
    for rnd in range(1, a.rounds + 1):
        for n in names:
            time.sleep(2)
            runs.append(run_one(n, every[n], a, rnd))
    meta.update(finished=time.strftime("%Y-%m-%d %H:%M:%S"), uptime_end=up(),
                max_foreign_cpu_s=max(r["foreign_cpu_s"] for r in runs),
                load_min=min(r["loadavg_before"][0] for r in runs), load_max=max(r["loadavg_before"][0] for r in runs))
    s = summarise(runs)
    text = render(s, meta)
    print("\n" + text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"meta": meta, **s, "runs": runs}, f, indent=1)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write("# Issue 38's goals: hdmlp against its bare pipeline, the peers and a base build\n\n"
                    "Generated by `benchmarks/peer_goals.py`; do not edit.\n\n" + text + "\n")


if __name__ == "__main__":
    main()
