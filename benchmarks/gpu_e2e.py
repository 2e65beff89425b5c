"""GPU training fed end to end: the table of issue 23, in one run on one GPU node.

    python benchmarks/gpu_e2e.py --json OUT [--data DIR | --images 8192] [--batch 256] [--epochs 3]
                                 [--workers 16] [--threads 1,2,4,8,16] [--device cuda]
    python benchmarks/gpu_e2e.py --smoke --json OUT    # tiny: the code path on any machine, < 1 minute

Rows, each with images/s (epochs after the first, which fills the pipelines and lets cuDNN pick
its kernels; every epoch's rate is in the JSON too):

* ``gpu_resident``: each model (ResNet-50, ResNet-18, ViT-B/16) training on one batch already on
  the device: what the GPU consumes, the ceiling of every fed row.
* ``supply``: the training chain alone (no model): torchvision's DataLoader with ``--workers``
  worker processes, and hdmlp at each of ``--threads`` staging threads.
* ``fed``: each of ``--fed-models`` trained from the DataLoader (pinned, ``.to(device,
  non_blocking=True)``), from hdmlp with the float chain copied to the device
  (``handoff="float"``), and from hdmlp with the default 8-bit hand-off and ``ToTensor`` /
  ``Normalize`` on the device's side stream (``device=...``), at hdmlp's default threads (which
  leave the training process one core) and at ``--workers`` threads, and with
  ``hdmlp.Job(cpu_budget=N)`` for each N of ``--cpu-budgets`` (issue 38: ResNet-50 with hdmlp on 8
  of 16 cores). Each fed row gives its share of the model's ``gpu_resident`` rate and each epoch's
  data readiness (``job.metrics()``: the share of batches ready when the loop asked).

Training: SGD with momentum, cross-entropy, ``channels_last``, bf16 autocast on CUDA (float32 on
the CPU). The chain is ImageNet's: ``RandomResizedCrop(224)``, ``RandomHorizontalFlip``,
``ToTensor``, ``Normalize``. The JSON records the machine (CPU, cores, memory, GPU, driver,
torch); without a CUDA device it says that no GPU machine was available and its numbers are
the CPU code path's, not measurements of the issue's table. The nvJPEG rows of the issue are
measured as ``ImgDecode(device=...)`` rows (``--shares``: the share of each batch the CPU decodes,
0 for the device alone), decoding alone (``supply``) and feeding each model (``fed``).

``--smoke`` shrinks everything (24 images of 40-80 px, 16 px crops, batch 8, 2 epochs, each model a
stand-in of a few hundred parameters) so that tests/python/test_gpu_e2e.py runs the whole path on a CPU.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from typing import Any

import torch

import hdmlp
import hdmlp.transforms as T
from hdmlp.datasets import make_image_folder
from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder

if __package__ in (None, ""):  # run as a script: benchmarks/_path.py
    import _path  # noqa: F401
from benchmarks.lab.machine import describe_facts, machine_facts  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
MODELS = ("resnet50", "resnet18", "vit_b_16")
NO_GPU = ("no GPU machine was available for this session: no CUDA device here, so every number is the "
          "CPU code path's (device='cpu'), not a measurement of the issue's table")


def make_model(name: str, classes: int, size: int, smoke: bool) -> torch.nn.Module:
    """torchvision's model; with ``smoke`` a stand-in of a few hundred parameters (a convolution, or a
    patch embedding and one encoder layer for the ViT), so that the CPU runs the whole path in seconds."""
    import torchvision
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}: the models are {', '.join(MODELS)}")
    if smoke and name == "vit_b_16":
        return torchvision.models.VisionTransformer(image_size=size, patch_size=8, num_layers=1, num_heads=1,
                                                    hidden_dim=8, mlp_dim=8, num_classes=classes)
    if smoke:
        return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.BatchNorm2d(8),
                                   torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                   torch.nn.Linear(8, classes))
    if name == "vit_b_16":
        return torchvision.models.vit_b_16(num_classes=classes, image_size=size)
    return getattr(torchvision.models, name)(num_classes=classes)


class Trainer:
    """One model's training step on ``device``: forward, loss, backward, SGD."""

    def __init__(self, name: str, classes: int, size: int, device: torch.device, smoke: bool) -> None:
        self.device = device
        self.model = make_model(name, classes, size, smoke).to(device, memory_format=torch.channels_last)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.loss = torch.nn.CrossEntropyLoss()

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def step(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        with self.autocast():
            loss = self.loss(self.model(images), labels)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_epochs(epochs: int, one_epoch: Callable[[int], int], device: torch.device) -> dict:
    """Runs ``one_epoch(e)`` (returns images) ``epochs`` times; rates per epoch and over epochs 2.."""
    per_epoch = []
    for e in range(epochs):
        start = time.perf_counter()
        images = one_epoch(e)
        synchronize(device)
        seconds = time.perf_counter() - start
        per_epoch.append({"images": images, "seconds": round(seconds, 4),
                          "images_per_s": round(images / seconds, 1) if seconds > 0 else None})
    counted = per_epoch[1:] if len(per_epoch) > 1 else per_epoch
    images, seconds = sum(p["images"] for p in counted), sum(p["seconds"] for p in counted)
    return {"images_per_s": round(images / seconds, 1) if seconds > 0 else None, "epochs": per_epoch}


def gpu_resident(name: str, args, device: torch.device, steps: int) -> dict:
    trainer = Trainer(name, args.classes, args.size, device, args.smoke)
    images = torch.randn(args.batch, 3, args.size, args.size, device=device).contiguous(
        memory_format=torch.channels_last)
    labels = torch.randint(0, args.classes, (args.batch,), device=device)

    def epoch(_: int) -> int:
        for _ in range(steps):
            trainer.step(images, labels)
        return steps * args.batch
    return timed_epochs(args.epochs, epoch, device)


def torchvision_loader(args, device: torch.device, workers: int):
    import torchvision
    import torchvision.transforms as TV
    chain = TV.Compose([TV.RandomResizedCrop(args.size), TV.RandomHorizontalFlip(), TV.ToTensor(),
                        TV.Normalize(MEAN, STD)])
    dataset = torchvision.datasets.ImageFolder(args.data, chain)
    return torch.utils.data.DataLoader(dataset, batch_size=args.batch, shuffle=True, num_workers=workers,
                                       pin_memory=device.type == "cuda", persistent_workers=workers > 0,
                                       drop_last=False)


def hdmlp_job(args, threads: int | None, device: torch.device | None, handoff: str | None,
              cpu_share: float | None = None, decoder: str = "auto", cpu_budget: int | None = None):
    """A job with the training chain; ``cpu_share`` not None: ``ImgDecode(device=device, cpu_share=...,
    decoder=...)``."""
    decode = T.ImgDecode() if cpu_share is None else T.ImgDecode(device=device, cpu_share=cpu_share, decoder=decoder)
    chain = [decode, T.RandomResizedCrop(args.size), T.RandomHorizontalFlip(), T.ToTensor(),
             T.Normalize(MEAN, STD)]
    job = hdmlp.Job(args.data, args.batch, args.epochs, transforms=chain, seed=1, num_workers=threads,
                    device=device if cpu_share is None else None, handoff=handoff, cpu_budget=cpu_budget)
    return job, HDMLPDataLoader(HDMLPImageFolder(args.data, job), channels_last=device is not None)


def supply(loader: Iterable, args, device: torch.device) -> dict:
    def epoch(_: int) -> int:
        return sum(len(y) for _, y in loader)
    return timed_epochs(args.epochs, epoch, torch.device("cpu"))


def fed(trainer: Trainer, loader: Iterable, args, copy: bool) -> dict:
    device = trainer.device

    def epoch(_: int) -> int:
        n = 0
        for x, y in loader:
            if copy:  # the DataLoader's way: the user copies, in the training stream
                x = x.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
                y = y.to(device, non_blocking=True)
            trainer.step(x, y)
            n += len(y)
        return n
    return timed_epochs(args.epochs, epoch, device)


def gpu_facts(device: torch.device) -> dict:
    facts: dict[str, Any] = {"torch": torch.__version__, "cuda_available": torch.cuda.is_available()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        facts.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1),
                     cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version())
    else:
        facts.update(gpu=None, note=NO_GPU)
    return facts


def run(args, progress: Callable[[dict], None] | None = None) -> dict:
    device = torch.device(args.device if args.device else ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    if args.data is None:
        args.data = os.path.join(args.work, "data")
        if not os.path.isdir(args.data):
            make_image_folder(args.data, num_images=args.images, num_classes=args.classes, seed=0,
                              min_side=args.min_side, max_side=args.max_side)
    import torchvision
    n = len(torchvision.datasets.ImageFolder(args.data))  # no hdmlp job (and its threads) before the forks below
    steps = max(1, n // args.batch)
    rows: list[dict] = []
    accuracy: dict = {}

    def add(kind: str, system: str, result: dict, **extra: Any) -> None:
        row = {"row": kind, "system": system, **extra, **result}
        rows.append(row)
        print(f"{kind:13s} {system:34s} {extra.get('model', ''):9s} {row['images_per_s']} images/s", flush=True)
        if progress is not None:  # what a run cut short by its time limit has measured so far
            progress(result_of(args, device, n, rows, accuracy))

    for name in args.models:
        add("gpu_resident", "synthetic batch on the device", gpu_resident(name, args, device, steps), model=name)
    if not args.skip_dataloader:
        # The DataLoader's processes start before any hdmlp job exists (no fork of a process with its threads).
        dl = torchvision_loader(args, device, args.workers)
        add("supply", f"DataLoader, {args.workers} workers", supply(dl, args, device), workers=args.workers)
        for name in args.fed_models:
            pinned = ", pinned" if device.type == "cuda" else ""
            trainer = Trainer(name, args.classes, args.size, device, args.smoke)
            add("fed", f"DataLoader, {args.workers} workers{pinned}", fed(trainer, dl, args, True), model=name,
                workers=args.workers)
        del dl
    for threads in args.threads:
        job, loader = hdmlp_job(args, threads, None, None)
        add("supply", f"hdmlp, {threads} threads", supply(loader, args, device), threads=threads)
        job.close()
    # Decoding on the device (ImgDecode(device=...)): alone, then feeding each model, at each CPU share
    # and resize precision.
    decodes = [(share, dtype, decoder) for decoder in args.decoders for dtype in args.resize for share in args.shares]
    for share, dtype, decoder in decodes:
        with resize_precision(dtype):
            job, loader = hdmlp_job(args, None, device, None, cpu_share=share, decoder=decoder)
            result = supply(loader, args, device)
            used = job.metrics()["device_decode"]["jpeg_decoder"]
            add("supply", f"hdmlp {decode_name(share, dtype, used)}", result, cpu_share=share, resize=dtype,
                decoder=decoder, jpeg_decoder=used)
            job.close()
    for name in args.fed_models:
        for share, dtype, decoder in decodes:
            with resize_precision(dtype):
                job, loader = hdmlp_job(args, None, device, None, cpu_share=share, decoder=decoder)
                trainer = Trainer(name, args.classes, args.size, device, args.smoke)
                result = fed(trainer, loader, args, False)
                decoded = job.metrics()["device_decode"]
                add("fed", f"hdmlp {decode_name(share, dtype, decoded['jpeg_decoder'])}", result, model=name,
                    cpu_share=share, resize=dtype, decoder=decoder, decoded=decoded)
                job.close()
    for name in args.fed_models:
        for handoff, what in (("float", "float chain"), (None, "uint8 + normalise on the device")):
            if (handoff or "uint8") not in args.handoffs:
                continue
            settings = [(threads, None) for threads in (None, args.workers)[:2 if args.fed_workers else 1]]
            settings += [(None, budget) for budget in args.cpu_budgets]
            for threads, budget in settings:
                job, loader = hdmlp_job(args, threads, device, handoff, cpu_budget=budget)
                trainer = Trainer(name, args.classes, args.size, device, args.smoke)
                label = (f"cpu_budget={budget}" if budget else f"{job.num_workers} threads" +
                         (" (default)" if threads is None else ""))
                result = fed(trainer, loader, args, False)
                readiness = [e.get("data_readiness") for e in job.metrics()["epochs"]]
                add("fed", f"hdmlp {what}, {label}", result, model=name, threads=job.num_workers,
                    default_threads=threads is None and budget is None, cpu_budget=budget,
                    handoff=handoff or "uint8", data_readiness=readiness)
                job.close()
    for decoder in args.decoders:
        for dtype in args.resize:
            key = dtype if args.decoders == ["auto"] else f"{dtype}, {decoder}"
            with resize_precision(dtype):
                accuracy[key] = decode_accuracy(args, device, decoder)
            print(f"device decode ({dtype} resize, decoder {decoder}) against the CPU chain: {accuracy[key]}",
                  flush=True)
    return result_of(args, device, n, rows, accuracy)


def decode_accuracy(args, device: torch.device, decoder: str = "auto") -> dict:
    """The 8-bit images of ``ImgDecode(device=...)`` against the CPU chain's (same seed, same draws), one epoch."""
    import numpy as np

    def job(decode: Any) -> Any:
        return hdmlp.Job(args.data, args.batch, 1, seed=1, transforms=[
            decode, T.RandomResizedCrop(args.size), T.RandomHorizontalFlip(), T.ToUint8()])
    cpu, dev = job(T.ImgDecode()), job(T.ImgDecode(device=device, decoder=decoder))
    counts = torch.zeros(256, dtype=torch.int64)
    for a, b in zip(cpu.batches(), dev.batches()):
        assert a.ids == b.ids, "the two jobs deliver the same samples in the same order"
        diff = (torch.from_numpy(np.asarray(a.samples)).to(device).int() - b.samples.int()).abs()
        counts += torch.bincount(diff.flatten(), minlength=256).cpu()
    decoded = dev.metrics()["device_decode"]
    cpu.close()
    dev.close()
    total = int(counts.sum())
    levels = torch.arange(256)
    return {"values": total, "mean_abs_diff": round(float((counts * levels).sum()) / total, 4),
            "max_abs_diff": int(levels[counts > 0].max()),
            "share_equal": round(int(counts[0]) / total, 4),
            "share_within_1": round(int(counts[:2].sum()) / total, 4),
            "share_within_2": round(int(counts[:3].sum()) / total, 4),
            "share_over_8": round(int(counts[9:].sum()) / total, 5), "decoded": decoded}


def decode_name(share: float, dtype: str = "float32", jpeg_decoder: str = "torchvision") -> str:
    name = "device decode" if share == 0 else f"hybrid decode, {share:.0%} on the CPU"
    name = name if jpeg_decoder == "torchvision" else f"{name} ({jpeg_decoder})"
    return name if dtype == "float32" else f"{name}, {dtype} resize"


@contextlib.contextmanager
def resize_precision(dtype: str):
    """The device decode's resize runs its products in ``dtype`` (float32 or float16) meanwhile."""
    import hdmlp.device.decode as dd
    saved = dd.RESIZE_DTYPE
    dd.RESIZE_DTYPE = getattr(torch, dtype)
    try:
        yield
    finally:
        dd.RESIZE_DTYPE = saved


def result_of(args, device: torch.device, n: int, rows: list[dict], accuracy: dict | None = None) -> dict:
    resident = {r["model"]: r["images_per_s"] for r in rows if r["row"] == "gpu_resident"}
    for r in rows:
        if r["row"] == "fed" and resident.get(r["model"]) and r["images_per_s"]:
            r["share_of_gpu_resident"] = round(r["images_per_s"] / resident[r["model"]], 3)
    return {
        "benchmark": "gpu_e2e",
        "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
        "smoke": args.smoke,
        "device": str(device),
        "gpu_machine": device.type == "cuda",
        "status": "measured on a GPU machine" if device.type == "cuda" else NO_GPU,
        "machine": {**machine_facts(), **gpu_facts(device), "python": platform.python_version(),
                    "hdmlp": hdmlp.__version__},
        "settings": {"images": n, "batch": args.batch, "epochs": args.epochs, "size": args.size,
                     "workers": args.workers, "threads": args.threads, "models": args.models,
                     "fed_models": args.fed_models, "shares": args.shares, "resize": args.resize,
                     "data": args.data},
        "rows": rows,
        "device_decode_accuracy": accuracy or None,
    }


def markdown(result: dict) -> str:
    lines = [f"# gpu_e2e ({'smoke, ' if result['smoke'] else ''}{result['device']})", "",
             f"Status: {result['status']}.", "", f"Machine: {describe_facts(result['machine'])}; "
             f"GPU: {result['machine'].get('gpu') or 'none'}; torch {result['machine']['torch']}.", "",
             "| row | system | model | images/s | share of GPU-resident |", "|---|---|---|---|---|"]
    for r in result["rows"]:
        share = r.get("share_of_gpu_resident")
        lines.append(f"| {r['row']} | {r['system']} | {r.get('model', '')} | {r['images_per_s']} | "
                     f"{'' if share is None else f'{share:.0%}'} |")
    for dtype, acc in (result.get("device_decode_accuracy") or {}).items():
        decoder = (acc.get("decoded") or {}).get("jpeg_decoder", "torchvision")
        lines += ["", f"Device decode ({dtype.split(',')[0]} resize, {decoder} decoder) against the CPU chain (8-bit values of one epoch, same "
                      f"draws): mean absolute difference {acc['mean_abs_diff']} of 255, max {acc['max_abs_diff']}; "
                      f"equal {acc['share_equal']:.1%}, within 1 {acc['share_within_1']:.1%}, within 2 "
                      f"{acc['share_within_2']:.1%}, over 8 {acc['share_over_8']:.2%}."]
    return "\n".join(lines) + "\n"


def parse(argv: list[str] | None = None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", required=True, help="where to write the results (a .md beside it too)")
    p.add_argument("--data", help="an ImageFolder tree; default: --images generated JPEGs under --work")
    p.add_argument("--work", default=None, help="folder for the generated dataset (default: a temporary one)")
    p.add_argument("--images", type=int, default=8192)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--min-side", type=int, default=250)
    p.add_argument("--max-side", type=int, default=500)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="DataLoader workers, and the explicit hdmlp thread count of the fed rows")
    p.add_argument("--threads", default="1,2,4,8,16", help="hdmlp staging threads of the supply rows")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--fed-models", default="resnet50,resnet18")
    p.add_argument("--shares", default="0,0.3,0.5,0.7",
                   help="ImgDecode(device=..., cpu_share=S) rows: the shares of each batch the CPU decodes")
    p.add_argument("--resize", default="float32",
                   help="the device decode's resize precisions, each a set of rows: float32, float16")
    p.add_argument("--decoders", default="auto",
                   help="ImgDecode(device=..., decoder=D) rows: auto, torchvision, nvjpeg, nvjpeg:hardware, ...")
    p.add_argument("--handoffs", default="float,uint8", help="the hdmlp CPU-chain fed rows: float, uint8")
    p.add_argument("--cpu-budgets", default="",
                   help="comma list: more fed rows with hdmlp.Job(cpu_budget=N) (e.g. 8: half of a 16-core node)")
    p.add_argument("--no-fed-workers", dest="fed_workers", action="store_false",
                   help="the CPU-chain fed rows at hdmlp's default threads only, not also at --workers")
    p.add_argument("--skip-dataloader", action="store_true", help="no DataLoader rows (to re-measure hdmlp's)")
    p.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    p.add_argument("--smoke", action="store_true", help="tiny settings: the code path in well under a minute")
    args = p.parse_args(argv)
    if args.smoke:
        args.images, args.min_side, args.max_side, args.size, args.batch, args.epochs, args.classes = \
            24, 40, 80, 16, 8, 2, 3
        args.workers, args.threads, args.shares = 1, "1,2", "0,0.5"
        args.cpu_budgets = args.cpu_budgets or "1"
    args.threads = [int(t) for t in args.threads.split(",") if t]
    args.shares = [float(t) for t in args.shares.split(",") if t]
    args.resize = [t for t in args.resize.split(",") if t]
    args.decoders = [t for t in args.decoders.split(",") if t]
    args.handoffs = [t for t in args.handoffs.split(",") if t]
    args.cpu_budgets = [int(t) for t in args.cpu_budgets.split(",") if t]
    for t in args.resize:
        if t not in ("float32", "float16"):
            p.error(f"--resize: {t!r} is neither float32 nor float16")
    args.models = [m for m in args.models.split(",") if m]
    args.fed_models = [m for m in args.fed_models.split(",") if m]
    for m in args.models + args.fed_models:
        if m not in MODELS:
            p.error(f"unknown model {m!r}: the models are {', '.join(MODELS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    with contextlib.ExitStack() as stack:
        if args.work is None and args.data is None:
            args.work = stack.enter_context(tempfile.TemporaryDirectory(prefix="gpu_e2e-"))
        out = pathlib.Path(args.json)

        def write(result: dict) -> None:
            out.write_text(json.dumps(result, indent=2) + "\n")
            out.with_suffix(".md").write_text(markdown(result))
        result = run(args, write)
    write(result)
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
