"""The ImageNet training pipeline: hdmlp's C++ transforms against torchvision, side by side.

Every system reads the same generated ImageNet-like folder (page cache warm)
and delivers batches of a training chain as [B, 3, 224, 224] float32 tensors
with their labels. --chain classic (default) is the standard chain

    RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(), Normalize(mean, std)

and --chain timm the timm-style chain of today's recipes

    RandomResizedCrop(224), RandomHorizontalFlip(), TrivialAugmentWide(), ToTensor(),
    Normalize(mean, std), RandomErasing(p=0.25)

(the same torchvision ops and arguments on both sides). Systems:

  hdmlp               hdmlp.Job(transforms=[ImgDecode(), ...]) + HDMLPDataLoader: the
                      staging threads decode and transform in C++ into the batch
  hdmlp draft         the same with ImgDecode(draft=True) (libjpeg's reduced-size
                      decode when the crop is shrunk 2x or more; docs/transforms.md;
                      classic chain only)
  torchvision wN      torchvision ImageFolder + DataLoader(num_workers=N), N = 0, 1, 2
  ceiling             the bare C++ pipeline (hdmlp._core.TransformPipeline.apply) on
                      every core over files already in memory: no reading, batching
                      or hand-off; what this machine can do at best

Reports images/s per system (steady state: every epoch after the first, whose
start-up differs by system) and the ratios hdmlp / best torchvision setting
and hdmlp / ceiling. Issue 5's goals: at least 3x and at least 85%. With
--repeats R every system runs R times, interleaved; the report gives the
medians and the range of the per-repeat ratios.

    python benchmarks/transform_pipeline.py --images 1000 --epochs 3 --repeats 3 \\
        --json benchmarks/results/transform_pipeline.json --markdown benchmarks/results/transform_pipeline.md
    python benchmarks/transform_pipeline.py --chain timm --images 1000 --epochs 3 --repeats 3 \\
        --json benchmarks/results/transform_pipeline_timm.json \\
        --markdown benchmarks/results/transform_pipeline_timm.md
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import threading
import time

import torch
import torchvision
import torchvision.transforms as TV
from torch.utils.data import DataLoader

import hdmlp
import hdmlp.transforms as T
from hdmlp.datasets import make_image_folder
from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


ERASE_P = 0.25  # timm's default re_prob


def hdmlp_chain(size: int, draft: bool, chain: str = "classic") -> list:
    if chain == "timm":
        return [T.ImgDecode(draft=draft), T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.TrivialAugmentWide(),
                T.ToTensor(), T.Normalize(MEAN, STD), T.RandomErasing(ERASE_P)]
    return [T.ImgDecode(draft=draft), T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.ToTensor(),
            T.Normalize(MEAN, STD)]


def torchvision_chain(size: int, chain: str = "classic") -> TV.Compose:
    if chain == "timm":
        return TV.Compose([TV.RandomResizedCrop(size), TV.RandomHorizontalFlip(), TV.TrivialAugmentWide(),
                           TV.ToTensor(), TV.Normalize(MEAN, STD), TV.RandomErasing(ERASE_P)])
    return TV.Compose([TV.RandomResizedCrop(size), TV.RandomHorizontalFlip(), TV.ToTensor(), TV.Normalize(MEAN, STD)])


def consume(x: torch.Tensor) -> None:
    # Touch the batch the way a training step's first op would, without a model.
    x[:, 0, 0, 0].sum().item()


def epoch_rates(loader, epochs: int) -> list[float]:
    """Images/s of each pass over the loader."""
    rates = []
    for _ in range(epochs):
        t0, n = time.perf_counter(), 0
        for x, y in loader:
            consume(x)
            n += len(y)
        rates.append(n / (time.perf_counter() - t0))
    return rates


def run_hdmlp(root: str, args, draft: bool) -> list[float]:
    job = hdmlp.Job(root, args.batch_size, args.epochs, transforms=hdmlp_chain(args.size, draft, args.chain), seed=1)
    rates = epoch_rates(HDMLPDataLoader(HDMLPImageFolder(root, job)), args.epochs)
    job.close()
    return rates


def run_torchvision(root: str, args, workers: int) -> list[float]:
    transform = torchvision_chain(args.size, args.chain)
    dataset = torchvision.datasets.ImageFolder(root, transform=transform)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, num_workers=workers,
                        persistent_workers=workers > 0)
    return epoch_rates(loader, args.epochs)


def run_ceiling(root: str, args, draft: bool) -> float:
    files = [open(p, "rb").read() for p, _ in torchvision.datasets.ImageFolder(root).samples]
    pipeline = T.compile_pipeline(hdmlp_chain(args.size, draft, args.chain))
    threads = os.cpu_count() or 1
    passes = max(args.epochs - 1, 1)
    items = [(p, i) for p in range(passes) for i in range(len(files))]
    lock = threading.Lock()
    position = [0]

    def work():
        while True:
            with lock:
                k = position[0]
                position[0] += 1
            if k >= len(items):
                return
            p, i = items[k]
            pipeline.apply(files[i], "x", 1, p, i)  # releases the GIL

    t0 = time.perf_counter()
    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return len(items) / (time.perf_counter() - t0)


def cpu_costs(root: str, args) -> dict[str, float]:
    """CPU microseconds per image of each side's bare chain on one thread (decode included).

    Measured with the process's CPU clock, so other jobs on the machine
    distort it far less than they distort images/s: the load-robust part of
    the comparison. torchvision runs its loader and Compose in this process
    (torch limited to one thread, as in DataLoader workers), hdmlp its pipeline.
    """
    n = min(args.cpu_cost_images, len(torchvision.datasets.ImageFolder(root).samples))
    dataset = torchvision.datasets.ImageFolder(root)
    paths = [p for p, _ in dataset.samples[:n]]
    files = [open(p, "rb").read() for p in paths]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        transform = torchvision_chain(args.size, args.chain)
        t0 = time.process_time()
        for p in paths:
            transform(dataset.loader(p))
        tv = (time.process_time() - t0) / n * 1e6
    finally:
        torch.set_num_threads(threads)
    pipeline = T.compile_pipeline(hdmlp_chain(args.size, False, args.chain))
    t0 = time.process_time()
    for i, data in enumerate(files):
        pipeline.apply(data, "x", 1, 0, i)
    ours = (time.process_time() - t0) / n * 1e6
    return {"torchvision_us": tv, "hdmlp_us": ours, "ratio": tv / ours}


def steady(rates: list[float]) -> float:
    later = rates[1:] or rates
    return sum(later) / len(later)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chain", choices=["classic", "timm"], default="classic",
                    help="classic: RandomResizedCrop, flip, ToTensor, Normalize; timm: also TrivialAugmentWide "
                         "and RandomErasing")
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--cpu-cost-images", type=int, default=300,
                    help="images for the per-image CPU cost of each side's bare chain (0: skip)")
    ap.add_argument("--repeats", type=int, default=1, help="run every system this many times, interleaved")
    ap.add_argument("--data", default=None, help="dataset folder (generated there once)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args()

    root = args.data or os.path.join(hdmlp.user_cache_dir(), "datasets", f"bench-{args.images}-{args.classes}")
    make_image_folder(root, num_images=args.images, num_classes=args.classes, seed=0)
    for p, _ in torchvision.datasets.ImageFolder(root).samples:  # warm the page cache for everyone
        with open(p, "rb") as f:
            f.read()

    # Every repeat runs every system once, in the same order, so a change in
    # the machine's load hits all of them alike; ratios are taken per repeat.
    drafts = (False, True) if args.chain == "classic" else (False,)
    load = [os.getloadavg()]
    runs: list[dict[str, dict]] = []
    for _ in range(args.repeats):
        run: dict[str, dict] = {}
        for draft in drafts:
            run["ceiling draft" if draft else "ceiling"] = {"steady": run_ceiling(root, args, draft=draft)}
        for draft in drafts:
            rates = run_hdmlp(root, args, draft)
            run["hdmlp draft" if draft else "hdmlp"] = {"epochs": rates, "steady": steady(rates)}
        for w in args.workers:
            rates = run_torchvision(root, args, w)
            run[f"torchvision w{w}"] = {"epochs": rates, "steady": steady(rates)}
        best = max(v["steady"] for k, v in run.items() if k.startswith("torchvision"))
        run["ratios"] = {
            "hdmlp_vs_best_torchvision": run["hdmlp"]["steady"] / best,
            "hdmlp_vs_ceiling": run["hdmlp"]["steady"] / run["ceiling"]["steady"],
        }
        if "hdmlp draft" in run:
            run["ratios"]["hdmlp_draft_vs_best_torchvision"] = run["hdmlp draft"]["steady"] / best
            run["ratios"]["hdmlp_draft_vs_ceiling_draft"] = run["hdmlp draft"]["steady"] / run["ceiling draft"]["steady"]
        if args.cpu_cost_images > 0:
            run["cpu_cost"] = cpu_costs(root, args)
        runs.append(run)
        load.append(os.getloadavg())
    names = [k for k in runs[0] if k not in ("ratios", "cpu_cost")]
    systems = {name: {"steady": statistics.median(r[name]["steady"] for r in runs),
                      "repeats": [r[name]["steady"] for r in runs],
                      "epochs": [r[name].get("epochs", []) for r in runs]} for name in names}
    best_tv = max(v["steady"] for k, v in systems.items() if k.startswith("torchvision"))
    summary = {key: statistics.median(r["ratios"][key] for r in runs) for key in runs[0]["ratios"]}
    ranges = {key: (min(r["ratios"][key] for r in runs), max(r["ratios"][key] for r in runs))
              for key in runs[0]["ratios"]}
    machine = f"{platform.node()}: {os.cpu_count()} cores, {platform.processor() or platform.machine()}"
    command = "python benchmarks/transform_pipeline.py " + " ".join(
        f"--{k.replace('_', '-')} {' '.join(map(str, v)) if isinstance(v, list) else v}"
        for k, v in vars(args).items() if v is not None and k not in ("json", "markdown", "data"))

    def ratio(key: str, percent: bool = False) -> str:
        lo, hi = ranges[key]
        fmt = (lambda x: f"{x * 100:.0f}%") if percent else (lambda x: f"{x:.2f}x")
        spread = f" (repeats: {fmt(lo)} to {fmt(hi)})" if args.repeats > 1 else ""
        return f"**{fmt(summary[key])}**{spread}"

    chain_text = ", ".join(type(t).__name__ for t in hdmlp_chain(args.size, False, args.chain)[1:])
    load_text = ", ".join(f"{a[0]:.1f}" for a in load)
    lines = [f"Chain: {chain_text}.", "",
             f"Machine: {machine}; 1-minute load average before the run and after each repeat: {load_text}. "
             f"Dataset: {args.images} ImageNet-like JPEGs, page cache warm. "
             f"Batch {args.batch_size}, {args.size}x{args.size}, {args.epochs} epochs; steady state = mean of "
             f"epochs after the first; {args.repeats} repeat(s) of every system, interleaved; images/s and "
             f"ratios are the medians over the repeats.", "",
             "| system | images/s (steady, median) | per repeat | vs best torchvision |", "|---|---|---|---|"]
    for name, v in systems.items():
        per_repeat = ", ".join(f"{r:.0f}" for r in v["repeats"])
        lines.append(f"| {name} | {v['steady']:.0f} | {per_repeat} | {v['steady'] / best_tv:.2f}x |")
    lines += ["", f"hdmlp / best torchvision: {ratio('hdmlp_vs_best_torchvision')} (goal >= 3x); "
                  f"hdmlp / ceiling: {ratio('hdmlp_vs_ceiling', True)} (goal >= 85%). The ceiling is the bare "
                  f"pipeline driven from Python threads with one output allocation per image, so the loader "
                  f"can come out above it."]
    if args.cpu_cost_images > 0:
        costs = [r["cpu_cost"] for r in runs]
        med = {k: statistics.median(c[k] for c in costs) for k in costs[0]}
        per_repeat = ", ".join(f"{c['ratio']:.2f}x" for c in costs)
        lines += ["", f"CPU cost per image of the bare chains on one thread (decode included; process CPU clock, "
                      f"which other jobs distort far less than images/s): torchvision {med['torchvision_us']:.0f} us, "
                      f"hdmlp {med['hdmlp_us']:.0f} us, **{med['ratio']:.2f}x** (repeats: "
                      f"{per_repeat}). On a busy machine images/s favour the "
                      f"system with more threads (hdmlp's staging threads against the DataLoader's workers); "
                      f"this ratio does not."]
    if "hdmlp_draft_vs_best_torchvision" in summary:
        lines += [f"With the draft decode: {ratio('hdmlp_draft_vs_best_torchvision')} torchvision, "
                  f"{ratio('hdmlp_draft_vs_ceiling_draft', True)} of the draft ceiling."]
    lines += ["", f"Command: `{command}`"]
    text = "\n".join(lines)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "chain": chain_text, "load_average": load, "command": command,
                       "systems": systems, "summary": summary, "ranges": ranges, "runs": runs}, f, indent=2)
    if args.markdown:
        with open(args.markdown, "w") as f:
            title = "timm-style training chain" if args.chain == "timm" else "ImageNet training pipeline"
            f.write(f"# {title}: hdmlp against torchvision\n\n"
                    "Generated by `benchmarks/transform_pipeline.py`; do not edit.\n\n" + text + "\n")


if __name__ == "__main__":
    main()
