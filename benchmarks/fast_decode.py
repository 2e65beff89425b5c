"""What ``ImgDecode(fast=True)`` changes: pixel differences and a small model's accuracy.

    python benchmarks/fast_decode.py quality  [--images 1000 --epochs 3]   # pixels, ~1 minute
    python benchmarks/fast_decode.py accuracy [--train 20000 --epochs 4 --seeds 2]   # a CNN, ~10+ minutes

``quality`` runs the ImageNet training chain (``RandomResizedCrop(224)``) and
validation chain (``Resize(256)`` + ``CenterCrop(224)``), each ending in
``ToUint8`` so differences are in 8-bit levels, with and without ``fast`` on
every sample of two sets: a generated ImageNet-like folder
(:func:`hdmlp.datasets.make_image_folder`, 250-500 px sides) and OpenCV's sample
photos (``/usr/share/doc/opencv-doc/examples/data``, up to 1282x1110). The
exact chain is torchvision's result bit for bit (docs/transforms.md, "Parity"),
so its difference from the fast chain is fast's difference from torchvision.
Reported per set and chain: the mean absolute difference over all values, the
largest mean of one sample, the largest difference of one value, and the same
split by the DCT scale fast chose (``pipeline.jpeg_decode_plan``).

``accuracy`` trains a small CNN on Fashion-MNIST (Debian's
``dataset-fashion-mnist``) turned into 112x112 RGB JPEGs (quality 90, 4:2:0),
once with exact and once with fast decoding (same initial weights, same
order), with ``RandomResizedCrop(28, scale=(0.35, 1))`` + ``Grayscale`` for
training and ``Resize(32)`` + ``CenterCrop(28)`` for testing, so that most
samples decode at 1/2 or 1/4 scale in fast mode. It reports the test top-1 of
each model under both test chains. Not part of CI.

Both write ``benchmarks/results/fast_decode_<command>.{md,json}`` (``--out``).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import pathlib
import platform
import subprocess
import sys
import time
from collections.abc import Iterable
from typing import Any

import numpy as np
from PIL import Image

import hdmlp
import hdmlp.transforms as T
from hdmlp.datasets import make_fashion_mnist_folder, make_image_folder

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
PHOTOS = pathlib.Path("/usr/share/doc/opencv-doc/examples/data")


def uptime() -> str:
    """The load average line of ``uptime`` (the machine is shared: numbers are provisional)."""
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def chains(fast: bool) -> dict[str, list]:
    """The training and validation chains with 8-bit output."""
    return {
        "train": [T.ImgDecode(fast=fast), T.RandomResizedCrop(224), T.ToUint8("HWC")],
        "val": [T.ImgDecode(fast=fast), T.Resize(256), T.CenterCrop(224), T.ToUint8("HWC")],
    }


def jpeg_components(img: Image.Image) -> int:
    return {"L": 1, "CMYK": 4}.get(img.mode, 3)


class Diff:
    """Running absolute-difference statistics of one set and chain, in 8-bit levels."""

    def __init__(self) -> None:
        self.total = 0.0
        self.count = 0
        self.max_value = 0
        self.max_sample_mean = 0.0
        self.samples = 0
        self.by_scale: dict[int, list[float]] = {}  # scale -> [sum, count, max value, samples]

    def add(self, a: np.ndarray, b: np.ndarray, scale: int) -> None:
        d = np.abs(a.astype(np.int16) - b.astype(np.int16))
        s, n, m = float(d.sum()), d.size, int(d.max())
        self.total += s
        self.count += n
        self.max_value = max(self.max_value, m)
        self.max_sample_mean = max(self.max_sample_mean, s / n)
        self.samples += 1
        e = self.by_scale.setdefault(scale, [0.0, 0, 0, 0])
        e[0] += s
        e[1] += n
        e[2] = max(e[2], m)
        e[3] += 1

    def report(self) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "mean": self.total / max(1, self.count),
            "max_sample_mean": self.max_sample_mean,
            "max": self.max_value,
            "by_scale": {f"{k}/8": {"samples": v[3], "mean": v[0] / max(1, v[1]), "max": v[2]}
                         for k, v in sorted(self.by_scale.items(), reverse=True)},
        }


def measure(files: Iterable[pathlib.Path], epochs: int) -> dict[str, Any]:
    exact = {k: T.compile_pipeline(v) for k, v in chains(False).items()}
    fast = {k: T.compile_pipeline(v) for k, v in chains(True).items()}
    diffs = {k: Diff() for k in exact}
    for i, path in enumerate(files):
        data = path.read_bytes()
        with Image.open(io.BytesIO(data)) as img:
            if img.format != "JPEG":
                continue
            width, height, comps = img.width, img.height, jpeg_components(img)
        for epoch in range(epochs):
            for name in exact:
                a = np.asarray(T.apply(exact[name], data, seed=1, epoch=epoch, sample=i, path=str(path)))
                b = np.asarray(T.apply(fast[name], data, seed=1, epoch=epoch, sample=i, path=str(path)))
                plan = fast[name].jpeg_decode_plan(width, height, 1, epoch, i, comps)
                diffs[name].add(a, b, plan["scale"][0])
    return {k: v.report() for k, v in diffs.items()}


def quality(args: argparse.Namespace) -> dict[str, Any]:
    root = make_image_folder(args.root or f"/tmp/hdmlp_fast_decode_{args.images}", num_images=args.images)
    generated = sorted(p for p in root.rglob("*.JPEG"))
    photos = sorted(PHOTOS.glob("*.jpg")) if PHOTOS.is_dir() else []
    result: dict[str, Any] = {"load_before": uptime()}
    result["imagenet_like"] = {"files": len(generated), "epochs": args.epochs, **measure(generated, args.epochs)}
    if photos:
        result["opencv_photos"] = {"files": len(photos), "epochs": args.photo_epochs,
                                   **measure(photos, args.photo_epochs)}
    result["load_after"] = uptime()
    return result


def quality_markdown(r: dict[str, Any]) -> str:
    lines = ["# ImgDecode(fast=True) against the exact decode, in 8-bit levels", "",
             f"Generated by `{r.get('command', 'python benchmarks/fast_decode.py quality')}`. The exact chain equals torchvision's",
             "result bit for bit, so these are fast's differences from torchvision.", "",
             "| set | chain | samples | mean | largest mean of one sample | largest value difference |",
             "|---|---|---|---|---|---|"]
    for key, label in (("imagenet_like", "ImageNet-like"), ("opencv_photos", "OpenCV photos")):
        if key not in r:
            continue
        for chain in ("train", "val"):
            d = r[key][chain]
            lines.append(f"| {label} ({r[key]['files']} files x {r[key]['epochs']} epochs) | {chain} | "
                         f"{d['samples']} | {d['mean']:.3f} | {d['max_sample_mean']:.2f} | {d['max']} |")
    lines += ["", "By the DCT scale fast chose:", "",
              "| set | chain | scale | samples | mean | largest value difference |", "|---|---|---|---|---|---|"]
    for key, label in (("imagenet_like", "ImageNet-like"), ("opencv_photos", "OpenCV photos")):
        if key not in r:
            continue
        for chain in ("train", "val"):
            for scale, d in r[key][chain]["by_scale"].items():
                lines.append(f"| {label} | {chain} | {scale} | {d['samples']} | {d['mean']:.3f} | {d['max']} |")
    lines += ["", f"Load: before `{r['load_before']}`, after `{r['load_after']}`.", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------- accuracy

def jpeg_folder(png_root: pathlib.Path, out: pathlib.Path, split: str, limit: int | None, side: int) -> pathlib.Path:
    """Fashion-MNIST's PNGs of one split as side x side RGB JPEGs (quality 90, 4:2:0), made once."""
    dest = out / split
    done = dest / ".complete"
    if done.exists():
        return dest
    per_class: dict[str, int] = {}
    for cls in sorted(p for p in (png_root / split).iterdir() if p.is_dir()):
        files = sorted(cls.glob("*.png"))
        if limit is not None:
            files = files[: limit // 10]
        (dest / cls.name).mkdir(parents=True, exist_ok=True)
        for f in files:
            with Image.open(f) as img:
                big = img.convert("RGB").resize((side, side), Image.Resampling.BILINEAR)
            big.save(dest / cls.name / (f.stem + ".jpg"), quality=90, subsampling=2)
        per_class[cls.name] = len(files)
    done.write_text(json.dumps(per_class))
    return dest


def accuracy(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    base = pathlib.Path(args.root or "/tmp/hdmlp_fast_decode_fmnist")
    pngs = make_fashion_mnist_folder(base / "png")
    train_dir = jpeg_folder(pngs, base / f"jpeg{args.side}", "train", args.train, args.side)
    test_dir = jpeg_folder(pngs, base / f"jpeg{args.side}", "test", None, args.side)
    mean, std = [0.2860], [0.3530]

    def train_chain(fast: bool) -> list:
        return [T.ImgDecode(fast=fast), T.RandomResizedCrop(28, scale=(0.35, 1.0)), T.RandomHorizontalFlip(),
                T.Grayscale(1), T.ToTensor(), T.Normalize(mean, std)]

    def test_chain(fast: bool) -> list:
        return [T.ImgDecode(fast=fast), T.Resize(32), T.CenterCrop(28), T.Grayscale(1), T.ToTensor(),
                T.Normalize(mean, std)]

    class SmallCNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
            self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
            self.fc1 = nn.Linear(64 * 7 * 7, 128)
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            return self.fc2(F.relu(self.fc1(x.flatten(1))))

    def evaluate(model: nn.Module, fast: bool) -> float:
        job = hdmlp.Job(str(test_dir), batch_size=500, epochs=1, transforms=test_chain(fast), shuffle=False, seed=0)
        correct = total = 0
        model.eval()
        with torch.no_grad():
            for images, labels in HDMLPDataLoader(HDMLPImageFolder(str(test_dir), job)):
                correct += int((model(images).argmax(1) == labels).sum())
                total += len(labels)
        job.close()
        return correct / total

    runs = []
    for seed in range(args.seeds):
        for fast in (False, True):
            torch.manual_seed(seed)
            model = SmallCNN()
            opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
            job = hdmlp.Job(str(train_dir), batch_size=128, epochs=args.epochs, transforms=train_chain(fast),
                            drop_last_batch=True, seed=100 + seed)
            loader = HDMLPDataLoader(HDMLPImageFolder(str(train_dir), job))
            start = time.perf_counter()
            for _ in range(args.epochs):
                model.train()
                for images, labels in loader:
                    opt.zero_grad()
                    F.cross_entropy(model(images), labels).backward()
                    opt.step()
            job.close()
            seconds = time.perf_counter() - start
            run = {"seed": seed, "trained_fast": fast, "train_seconds": seconds,
                   "top1_exact_test": evaluate(model, False), "top1_fast_test": evaluate(model, True)}
            print(json.dumps(run), flush=True)
            runs.append(run)
    return {"train_images": args.train, "side": args.side, "epochs": args.epochs, "runs": runs,
            "load": uptime()}


def accuracy_markdown(r: dict[str, Any]) -> str:
    lines = ["# A small CNN trained with exact and with fast decoding", "",
             f"Generated by `{r.get('command', 'python benchmarks/fast_decode.py accuracy')}`: Fashion-MNIST as "
             f"{r['side']}x{r['side']} "
             f"RGB JPEGs, {r['train_images']} training images, {r['epochs']} epochs, the 10000 test images.", "",
             "| seed | trained with | top-1, exact test chain | top-1, fast test chain |", "|---|---|---|---|"]
    for run in r["runs"]:
        lines.append(f"| {run['seed']} | {'fast' if run['trained_fast'] else 'exact'} | "
                     f"{100 * run['top1_exact_test']:.2f}% | {100 * run['top1_fast_test']:.2f}% |")
    lines += ["", "Means over the seeds, and the difference fast minus exact training per seed (same initial "
              "weights and order), in percentage points:", "",
              "| test chain | trained exact | trained fast | fast - exact, mean | per seed |", "|---|---|---|---|---|"]
    for key, label in (("top1_exact_test", "exact"), ("top1_fast_test", "fast")):
        exact = {run["seed"]: run[key] for run in r["runs"] if not run["trained_fast"]}
        fast = {run["seed"]: run[key] for run in r["runs"] if run["trained_fast"]}
        diffs = [100 * (fast[s] - exact[s]) for s in sorted(exact) if s in fast]
        lines.append(f"| {label} | {100 * np.mean(list(exact.values())):.2f}% | {100 * np.mean(list(fast.values())):.2f}% | "
                     f"{np.mean(diffs):+.2f} (sd {np.std(diffs, ddof=1) if len(diffs) > 1 else 0:.2f}) | "
                     f"{', '.join(f'{d:+.2f}' for d in diffs)} |")
    lines += ["", f"Load: `{r['load']}`.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    q = sub.add_parser("quality", help="pixel differences of the train and val chains")
    q.add_argument("--images", type=int, default=1000, help="generated ImageNet-like JPEGs")
    q.add_argument("--epochs", type=int, default=3, help="crops per generated image")
    q.add_argument("--photo-epochs", type=int, default=20, help="crops per OpenCV photo")
    q.add_argument("--root", help="folder for the generated images")
    a = sub.add_parser("accuracy", help="train a small CNN both ways")
    a.add_argument("--train", type=int, default=20000, help="training images (of 60000)")
    a.add_argument("--epochs", type=int, default=4)
    a.add_argument("--seeds", type=int, default=2)
    a.add_argument("--side", type=int, default=112, help="side of the JPEGs")
    a.add_argument("--root", help="folder for the data")
    for p in (q, a):
        p.add_argument("--out", help="results prefix (default benchmarks/results/fast_decode_<command>)")
    args = parser.parse_args(argv)
    result = quality(args) if args.command == "quality" else accuracy(args)
    result["command"] = "python benchmarks/fast_decode.py " + " ".join(sys.argv[1:] if argv is None else argv)
    result["machine"] = {"python": sys.version.split()[0], "platform": platform.platform(),
                         "cpus": os.cpu_count(), "hdmlp": hdmlp.__version__}
    out = pathlib.Path(args.out) if args.out else RESULTS / f"fast_decode_{args.command}"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    md = quality_markdown(result) if args.command == "quality" else accuracy_markdown(result)
    out.with_suffix(".md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
