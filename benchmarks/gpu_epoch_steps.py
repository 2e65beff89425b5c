"""A model fed by hdmlp (defaults, ``device="cuda"``) for several epochs: each epoch's rate, the slowest
steps, Python's garbage-collection pauses and how many batch buffers the job made (docs/gpu.md, "The
last epoch").

    python benchmarks/gpu_epoch_steps.py --json OUT [--model resnet50] [--epochs 6] [--data DIR | --work DIR]
                                         [--gc-freeze] [--no-resident]

It uses gpu_e2e.py's job, model and timing. Needs a CUDA device.
"""
from __future__ import annotations

import argparse
import gc
import json
import pathlib
import sys
import time

import torch

if __package__ in (None, ""):  # run as a script: benchmarks/_path.py
    import _path  # noqa: F401
from benchmarks import gpu_e2e as G  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", required=True)
    p.add_argument("--model", default="resnet50", choices=G.MODELS)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--data", default=None)
    p.add_argument("--work", default="/tmp/gpu_epoch_steps")
    p.add_argument("--gc-freeze", action="store_true", help="gc.freeze() before the job (tells GC pauses apart)")
    p.add_argument("--no-resident", dest="resident", action="store_false", help="skip the GPU-resident rows")
    opts = p.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("benchmarks/gpu_epoch_steps.py needs a CUDA device (torch.cuda.is_available() is False)")
    args = G.parse(["--json", opts.json, "--work", opts.work, "--epochs", str(opts.epochs)]
                   + (["--data", opts.data] if opts.data else []))
    if args.data is None:
        args.data = str(pathlib.Path(opts.work) / "data")
        if not pathlib.Path(args.data).is_dir():
            G.make_image_folder(args.data, num_images=args.images, num_classes=args.classes, seed=0,
                                min_side=args.min_side, max_side=args.max_side)
    device = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    pauses: list[tuple[int, float, float]] = []
    started: dict[str, float] = {}

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            started["t"] = time.perf_counter()
        elif info["generation"] == 2 or time.perf_counter() - started["t"] > 0.005:
            pauses.append((info["generation"], (time.perf_counter() - started["t"]) * 1e3, time.perf_counter()))
    gc.callbacks.append(on_gc)
    result: dict = {"machine": G.gpu_facts(device), "model": opts.model, "epochs": opts.epochs}
    if opts.resident:
        result["gpu_resident"] = G.gpu_resident(opts.model, args, device, 32)
    if opts.gc_freeze:
        gc.collect()
        gc.freeze()
    job, loader = G.hdmlp_job(args, None, device, None)
    trainer = G.Trainer(opts.model, args.classes, args.size, device, False)
    steps: list[float] = []

    def epoch(_: int) -> int:
        n, last = 0, time.perf_counter()
        for x, y in loader:
            trainer.step(x, y)
            n += len(y)
            now = time.perf_counter()
            steps.append((now - last) * 1e3)
            last = now
        return n
    began = time.perf_counter()
    fed = G.timed_epochs(opts.epochs, epoch, device)
    result["fed"] = fed
    result["batch_allocations"] = job.batch_allocations
    job.close()
    slowest = sorted(range(len(steps)), key=lambda i: -steps[i])[:8]
    result["slowest_steps_ms"] = [(i, round(steps[i], 1)) for i in sorted(slowest)]
    result["median_step_ms"] = round(sorted(steps)[len(steps) // 2], 1)
    result["gc_pauses"] = [(g, round(ms, 1), round(at - began, 2)) for g, ms, at in pauses]
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}))
    pathlib.Path(opts.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
