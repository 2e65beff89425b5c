"""Train a small CNN on Fashion-MNIST with hdmlp or PyTorch's DataLoader, one process or many.

    python examples/train_fashion_mnist.py                         # one process, hdmlp
    mpirun -np 2 python examples/train_fashion_mnist.py --loader both --workers 0 1 \\
        --report benchmarks/results/train_fashion_mnist.md         # DDP over 2 ranks, both loaders

The data is Debian's ``dataset-fashion-mnist`` package, written once as an image
folder of PNGs by :func:`hdmlp.datasets.make_fashion_mnist_folder` (``--data``;
every rank may call it, they wait for each other). The model is trained with
``torch.nn.parallel.DistributedDataParallel`` (gloo, CPU); rank and world size
come from Open MPI's ``OMPI_COMM_WORLD_RANK``/``OMPI_COMM_WORLD_SIZE`` (or
``RANK``/``WORLD_SIZE``), the rendezvous from ``MASTER_ADDR``/``MASTER_PORT``
(default 127.0.0.1:29500). Without a launcher it runs as a single process.

``--loader hdmlp`` reads with :class:`hdmlp.torch.HDMLPDataLoader`: hdmlp's
staging threads read the PNGs in the job's clairvoyant order and its C++
pipeline decodes and normalises them. ``--loader torch`` uses
``torchvision.datasets.ImageFolder`` with ``DataLoader`` and
``DistributedSampler`` (``--workers`` worker processes) and the same transforms
in torchvision. ``--loader both`` trains with each in one run (the DataLoader
first, once per ``--workers`` value, then hdmlp), from the same initial
weights, and reports the ratios.

``--batch-size`` is the global batch: each of N ranks takes ``batch_size / N``
samples per step (it must divide evenly). Both loaders drop each epoch's last
incomplete batch, as DistributedDataParallel needs equal steps on every rank.

Preemption (``--checkpoint PATH``, ``--resume PATH``; hdmlp only): SIGTERM, which batch
schedulers send before they kill a job (or SIGUSR1, e.g. Slurm's ``--signal=USR1@120``),
only sets a flag; the loop finishes its step, the ranks agree to stop (an all-reduce of
the flag, so every rank stops after the same step), rank 0 writes the model, the optimiser
and ``job.state_dict()`` in one checkpoint file (written beside it, then renamed), and every
rank closes its jobs. A checkpoint is also written after every epoch. ``--resume PATH``
goes on from it bit for bit: the same remaining batches, the same dropout masks (seeded
by the step's position), so the final weights are those of an uninterrupted run.
``--simulate-preemption STEP`` makes rank 0 send itself SIGTERM after STEP steps::

    python examples/train_fashion_mnist.py --checkpoint ck.pt --simulate-preemption 700
    python examples/train_fashion_mnist.py --checkpoint ck.pt --resume ck.pt

Reported per epoch (the slowest rank's wall time, the other numbers averaged
over ranks): seconds, stall (time the training loop waited for its next batch),
test accuracy (all ranks evaluate a share of the test folder; the counts are
all-reduced), and the per-step profile of seed 002 (Chowdhury et al.,
"Initial Characterization of I/O in Large-Scale DL Applications"): *read*
(seconds spent reading the step's files), *load/transform* (decoding and
converting them to normalised tensors), *train* (forward, backward, gradient
all-reduce, optimiser step) and *stall*. Read and load/transform run in the
loader's workers, overlapped with training; only *stall* and whatever of them
runs in the training loop itself add to the step's wall time. hdmlp's read time
is its staging workers' (``job.metrics()``), the DataLoader's is measured in its
worker processes.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import hdmlp
import hdmlp.transforms as T
from hdmlp.datasets import make_fashion_mnist_folder
from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder

# Fashion-MNIST's pixel mean and standard deviation (training set, scaled to [0, 1]).
MEAN, STD = [0.286], [0.353]
NUM_CLASSES = 10
EVAL_BATCH = 1000


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--loader", choices=["hdmlp", "torch", "both"], default="hdmlp",
                   help="which data loader feeds the training loop; both: torch, then hdmlp, in one run")
    p.add_argument("--data", default=None,
                   help="the image folder (train/ and test/), written there when missing; "
                        "default data/fashion-mnist, or data/fashion-mnist-<limit> with --limit")
    p.add_argument("--source", default=None,
                   help="folder with the Fashion-MNIST IDX files (default: Debian's dataset-fashion-mnist)")
    p.add_argument("--limit", type=int, default=None, help="use only the first N images of each split")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=128, help="global batch size (over all ranks)")
    p.add_argument("--lr", type=float, default=2e-3, help="Adam's learning rate")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights and of both loaders' shuffles")
    p.add_argument("--workers", type=int, nargs="+", default=[1],
                   help="DataLoader worker processes per rank (--loader torch/both); several values train once "
                        "with each")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads per rank (the loaders' workers use the other cores); "
                        "0: the cores divided by the ranks on this host")
    p.add_argument("--report", default=None, metavar="PATH",
                   help="write the results as Markdown to PATH and as JSON beside it (rank 0)")
    p.add_argument("--checkpoint", default=None, metavar="PATH",
                   help="write a checkpoint (model, optimiser, the hdmlp job's state) to PATH after every epoch "
                        "and when SIGTERM/SIGUSR1 asks the run to stop (rank 0; --loader hdmlp)")
    p.add_argument("--resume", default=None, metavar="PATH",
                   help="go on from a checkpoint that --checkpoint wrote, bit for bit (--loader hdmlp)")
    p.add_argument("--simulate-preemption", type=int, default=None, metavar="STEP",
                   help="rank 0 sends itself SIGTERM after STEP training steps (with --checkpoint)")
    args = p.parse_args(argv)
    if (args.checkpoint or args.resume) and args.loader != "hdmlp":
        p.error("--checkpoint and --resume need --loader hdmlp (the DataLoader cannot resume mid-epoch exactly)")
    if args.simulate_preemption is not None and not args.checkpoint:
        p.error("--simulate-preemption needs --checkpoint")
    if min(args.workers) < 0:
        p.error("--workers must be at least 0")
    if args.limit is not None and args.limit < 1:
        p.error("--limit must be at least 1")
    if args.epochs < 1 or args.batch_size < 1:
        p.error("--epochs and --batch-size must be at least 1")
    if args.data is None:
        args.data = "data/fashion-mnist" + (f"-{args.limit}" if args.limit else "")
    return args


# ---------------------------------------------------------------- distributed set-up

def world_from_env() -> tuple[int, int, int]:
    """(rank, world size, ranks on this host) from Open MPI's, torchrun's or srun's variables."""
    env = os.environ
    rank = int(env.get("OMPI_COMM_WORLD_RANK", env.get("RANK", env.get("SLURM_PROCID", "0"))))
    world = int(env.get("OMPI_COMM_WORLD_SIZE", env.get("WORLD_SIZE", env.get("SLURM_NTASKS", "1"))))
    local = int(env.get("OMPI_COMM_WORLD_LOCAL_SIZE", env.get("LOCAL_WORLD_SIZE",
                                                              env.get("SLURM_NTASKS_PER_NODE", str(world)))))
    return rank, world, local


def init_distributed(rank: int, world: int) -> None:
    if world == 1:
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)


def all_reduce(values: list[float], op: Any = None) -> list[float]:
    """Sums (or op) a list of numbers over the ranks."""
    if not dist.is_initialized():
        return list(values)
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t, op=op or dist.ReduceOp.SUM)
    return t.tolist()


# ---------------------------------------------------------------- model

class SmallCNN(nn.Module):
    """Two 3x3 convolutions with max-pooling, then two fully connected layers (~0.2 M weights).

    Takes the loaders' 3-channel tensors; Fashion-MNIST is grayscale, so the
    channels are equal and their mean is the image.
    """

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, NUM_CLASSES)
        self.dropout = nn.Dropout(0.25)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.mean(dim=1, keepdim=True)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = self.dropout(F.relu(self.fc1(x.flatten(1))))
        return self.fc2(x)


def labels_of(classes: list[str]) -> torch.Tensor:
    """Fashion-MNIST label per loader class index: the folder names start with it."""
    return torch.tensor([int(c.split("_", 1)[0]) for c in classes], dtype=torch.int64)


# ---------------------------------------------------------------- loaders
#
# A loader here is an object with
#   epoch(e) -> iterator of (images float32 [b,3,28,28], labels int64 [b])
#   profile(e) -> {"read_s", "load_s"}: seconds spent reading / decoding during epoch e
#                  (summed over the loader's workers), and "in_loop_s" (the part of both
#                  spent in the training loop's thread, which the loop's wait includes)
#   classes, startup_s, close()

class HdmlpLoader:
    """HDMLPDataLoader; hdmlp's staging workers read, decode and normalise in C++."""

    transform_where = "C++, hdmlp's staging workers"

    def __init__(self, root: str, batch_size: int, epochs: int, seed: int, *, drop_last: bool,
                 shuffle: bool = True, resume: dict | None = None) -> None:
        start = time.perf_counter()
        # With resume (a job.state_dict()), the job goes on at the next global batch after it.
        self.job = hdmlp.Job(root, batch_size=batch_size, epochs=epochs, seed=None if resume else seed,
                             drop_last_batch=drop_last, shuffle=shuffle, resume=resume,
                             transforms=[T.ImgDecode(), T.ToTensor(), T.Normalize(MEAN, STD)])
        self.loader = HDMLPDataLoader(HDMLPImageFolder(root, self.job))
        self.classes = self.job.classes
        self.startup_s = time.perf_counter() - start

    def __len__(self) -> int:
        return len(self.loader)

    def epoch(self, e: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        self.loader.set_epoch(e)  # after a resume, a later epoch: skip ahead
        return iter(self.loader)

    def profile(self, e: int) -> dict[str, float]:
        m = self.job.metrics()["epochs"][e]
        return {"read_s": m["read_seconds"], "load_s": m["transform_seconds"], "in_loop_s": 0.0}

    def close(self) -> None:
        self.job.close()


class TimedImageFolder:
    """torchvision ImageFolder whose items also carry the seconds spent reading and decoding them."""

    def __init__(self, root: str, transform: Callable[[Any], torch.Tensor]) -> None:
        from torchvision.datasets import ImageFolder
        self.folder = ImageFolder(root)
        self.transform = transform
        self.classes = self.folder.classes

    def __len__(self) -> int:
        return len(self.folder)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int, float, float]:
        from PIL import Image
        path, label = self.folder.samples[i]
        t0 = time.perf_counter()
        with open(path, "rb") as f:
            data = f.read()
        t1 = time.perf_counter()
        image = Image.open(io.BytesIO(data)).convert("RGB")  # what ImageFolder's default loader does
        tensor = self.transform(image)
        t2 = time.perf_counter()
        return tensor, label, t1 - t0, t2 - t1


class TorchLoader:
    """torchvision ImageFolder + DataLoader (+ DistributedSampler under several ranks)."""

    def __init__(self, root: str, batch_size: int, seed: int, workers: int, rank: int, world: int, *,
                 shuffle: bool, drop_last: bool) -> None:
        self.transform_where = (f"torchvision, {workers} DataLoader worker{'s' if workers > 1 else ''}" if workers
                                else "torchvision, training loop's thread")
        import torchvision.transforms as TV
        from torch.utils.data import DataLoader, DistributedSampler, Subset
        start = time.perf_counter()
        dataset = TimedImageFolder(root, TV.Compose([TV.ToTensor(), TV.Normalize(MEAN, STD)]))
        self.classes = dataset.classes
        if shuffle:
            self.sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=seed,
                                              drop_last=drop_last)
            data: Any = dataset
        else:  # evaluation: every sample once over the ranks, no padding
            self.sampler = None
            data = Subset(dataset, range(rank, len(dataset), world))
        self.loader = DataLoader(data, batch_size=batch_size // world if shuffle else batch_size,
                                 sampler=self.sampler, num_workers=workers, drop_last=drop_last,
                                 persistent_workers=workers > 0)
        self.startup_s = time.perf_counter() - start
        self._profile: dict[int, dict[str, float]] = {}
        self._in_loop = workers == 0

    def __len__(self) -> int:
        return len(self.loader)

    def epoch(self, e: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        if self.sampler is not None:
            self.sampler.set_epoch(e)
        prof = self._profile[e] = {"read_s": 0.0, "load_s": 0.0, "in_loop_s": 0.0}
        for images, labels, read_s, load_s in self.loader:
            prof["read_s"] += float(read_s.sum())
            prof["load_s"] += float(load_s.sum())
            if self._in_loop:
                prof["in_loop_s"] += float(load_s.sum()) + float(read_s.sum())
            yield images, labels

    def profile(self, e: int) -> dict[str, float]:
        return self._profile[e]

    def close(self) -> None:
        del self.loader  # ends persistent workers


# ---------------------------------------------------------------- preemption

class Preemption:
    """SIGTERM (or SIGUSR1) sets a flag; the loop asks after each step whether to stop.

    The ranks decide together (the flag's maximum over the ranks), so that every rank stops
    after the same step, whichever of them got the signal and whenever it arrived.
    """

    def __init__(self, simulate_at: int | None, rank: int) -> None:
        self.signalled = False
        self.simulate_at = simulate_at if rank == 0 else None
        for sig in (signal.SIGTERM, signal.SIGUSR1):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.signalled = True  # nothing else: the step in flight ends normally

    def stop_requested(self, steps_done: int) -> bool:
        if steps_done == self.simulate_at:
            signal.raise_signal(signal.SIGTERM)  # what a scheduler would send
        flag, = all_reduce([float(self.signalled)], dist.ReduceOp.MAX) if dist.is_initialized() \
            else [float(self.signalled)]
        return flag > 0


def save_checkpoint(path: str, checkpoint: dict[str, Any]) -> None:
    """Writes the checkpoint beside PATH, then renames it: a kill in between leaves the previous one whole."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        torch.save(checkpoint, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def step_seed(seed: int, epoch: int, step: int, rank: int) -> int:
    """The dropout seed of one step: a function of its position, so a resumed run draws the same masks."""
    return (seed * 1_000_003 + epoch * 100_003 + step * 101 + rank) % 2**63


# ---------------------------------------------------------------- training

def timed(batches: Iterable[Any]) -> Iterator[tuple[float, Any]]:
    """Yields (seconds next() took, batch)."""
    it = iter(batches)
    while True:
        t = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            return
        yield time.perf_counter() - t, batch


def evaluate(model: nn.Module, loader: Any, epoch: int, label_map: torch.Tensor) -> tuple[float, int]:
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for images, labels in loader.epoch(epoch):
            if len(labels) == 0:  # hdmlp's last batch may have no share for this rank
                continue
            predicted = model(images).argmax(1)
            correct += int((predicted == label_map[labels]).sum())
            total += len(labels)
    model.train()
    correct, total = all_reduce([correct, total])
    return correct / max(total, 1), int(total)


def train(args: argparse.Namespace, loader_name: str, workers: int, rank: int, world: int,
          log: Callable[[str], None], checkpoint: dict[str, Any] | None = None) -> dict:
    train_dir, test_dir = os.path.join(args.data, "train"), os.path.join(args.data, "test")
    if loader_name == "hdmlp":
        train_loader: Any = HdmlpLoader(train_dir, args.batch_size, args.epochs, args.seed, drop_last=True,
                                        resume=checkpoint["job"] if checkpoint else None)
        # Evaluation in index order, each image once per epoch over the ranks; every rank takes the
        # same number of steps (a last global batch too small for every rank joins the one before).
        test_loader: Any = HdmlpLoader(test_dir, EVAL_BATCH * world, args.epochs, args.seed, drop_last=False,
                                       shuffle=False)
    else:
        train_loader = TorchLoader(train_dir, args.batch_size, args.seed, workers, rank, world, shuffle=True,
                                   drop_last=True)
        test_loader = TorchLoader(test_dir, EVAL_BATCH, args.seed, workers, rank, world, shuffle=False,
                                  drop_last=False)
    label = loader_name if loader_name == "hdmlp" else f"torch ({workers} worker{'' if workers == 1 else 's'})"
    label_map = labels_of(train_loader.classes)
    test_label_map = labels_of(test_loader.classes)

    torch.manual_seed(args.seed)  # the same initial weights on every rank and for every loader
    model: nn.Module = SmallCNN()
    if checkpoint:
        model.load_state_dict(checkpoint["model"])
    core = model
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    if checkpoint:
        optimizer.load_state_dict(checkpoint["optimizer"])
    preemption = Preemption(args.simulate_preemption, rank) if args.checkpoint else None
    steps = len(train_loader)
    log(f"[{label}] {steps} steps per epoch of {args.batch_size} images ({args.batch_size // world} per rank), "
        f"start-up {train_loader.startup_s:.2f} s, transforms in {train_loader.transform_where}")

    # A checkpoint holds the finished epochs' rows and the sums of an interrupted one.
    epochs: list[dict[str, Any]] = checkpoint["epochs"] if checkpoint else []
    partial: dict[str, float] | None = checkpoint["partial"] if checkpoint else None
    steps_done = checkpoint["steps_done"] if checkpoint else 0

    def save(e: int, sums: dict[str, float] | None) -> None:
        if rank == 0:
            save_checkpoint(args.checkpoint, {"model": core.state_dict(), "optimizer": optimizer.state_dict(),
                                              "job": train_loader.job.state_dict(), "epochs": epochs,
                                              "partial": sums, "steps_done": steps_done, "epoch": e})
        if dist.is_initialized():
            dist.barrier()  # no rank leaves before the checkpoint is on disk

    for e in range(len(epochs), args.epochs):
        sums = partial or {"stall": 0.0, "train_s": 0.0, "seen": 0, "loss": 0.0, "wall": 0.0}
        partial = None
        first_step = 0  # > 0 in an epoch resumed midway
        if loader_name == "hdmlp" and train_loader.job.state_dict()["epoch"] == e:
            first_step = train_loader.job.state_dict()["batches"]
        stall = train_s = 0.0
        seen = 0
        loss_sum = torch.zeros(())
        stopped = False
        start = time.perf_counter()
        for step, (wait, (images, labels)) in enumerate(timed(train_loader.epoch(e)), start=first_step):
            stall += wait
            t = time.perf_counter()
            torch.manual_seed(step_seed(args.seed, e, step, rank))  # dropout's masks
            loss = F.cross_entropy(model(images), label_map[labels])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            loss_sum += loss.detach()
            train_s += time.perf_counter() - t
            seen += len(labels)
            steps_done += 1
            if preemption is not None and preemption.stop_requested(steps_done):
                stopped = True
                break
        wall = time.perf_counter() - start
        stall, train_s, seen = stall + sums["stall"], train_s + sums["train_s"], seen + int(sums["seen"])
        loss_sum += sums["loss"]
        wall += sums["wall"]
        if stopped:
            save(e, {"stall": stall, "train_s": train_s, "seen": seen, "loss": float(loss_sum), "wall": wall})
            state = train_loader.job.state_dict()
            log(f"[{label}] stopped after epoch {state['epoch']}'s global batch {state['batches']} (a signal): "
                f"checkpoint written to {args.checkpoint}; go on with --resume {args.checkpoint}")
            train_loader.close()
            test_loader.close()
            return {"loader": loader_name, "stopped": True}
        prof = train_loader.profile(e)
        # The loop's wait, less the reading and decoding the loader did in this thread (workers=0).
        stall = max(0.0, stall - prof["in_loop_s"])
        eval_start = time.perf_counter()
        accuracy, tested = evaluate(model, test_loader, e, test_label_map)
        eval_s = time.perf_counter() - eval_start
        wall_max, = all_reduce([wall], dist.ReduceOp.MAX) if dist.is_initialized() else [wall]
        sums = all_reduce([stall, train_s, prof["read_s"], prof["load_s"], prof["in_loop_s"],
                           float(loss_sum), seen])
        stall, train_s, read_s, load_s, in_loop, loss_total = (v / world for v in sums[:6])
        seen_total = sums[6]
        row = {
            "epoch": e, "seconds": wall_max, "images": int(seen_total), "images_per_s": seen_total / wall_max,
            "stall_s": stall, "stall_share": stall / wall_max, "loss": loss_total / steps,
            "test_accuracy": accuracy, "test_images": tested, "eval_s": eval_s,
            "per_step_ms": {"read": 1e3 * read_s / steps, "load_transform": 1e3 * load_s / steps,
                            "train": 1e3 * train_s / steps, "stall": 1e3 * stall / steps},
            "loader_in_loop_s": in_loop,
        }
        epochs.append(row)
        ps = row["per_step_ms"]
        log(f"[{label}] epoch {e}: {wall_max:.2f} s ({row['images_per_s']:.0f} images/s), "
            f"stall {stall:.2f} s ({100 * row['stall_share']:.1f}%), loss {row['loss']:.3f}, "
            f"test accuracy {100 * accuracy:.2f}% ({tested} images, {eval_s:.2f} s); per step: "
            f"read {ps['read']:.2f} ms, load/transform {ps['load_transform']:.2f} ms, "
            f"train {ps['train']:.2f} ms, stall {ps['stall']:.2f} ms")
        if args.checkpoint:
            save(e + 1, None)
    train_loader.close()
    test_loader.close()
    return {"loader": loader_name, "label": label, "workers": workers, "startup_s": train_loader.startup_s, "transforms": train_loader.transform_where,
            "steps_per_epoch": steps, "epochs": epochs, "final_test_accuracy": epochs[-1]["test_accuracy"]}


# ---------------------------------------------------------------- report

def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=os.path.dirname(os.path.abspath(__file__)), timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
            "hdmlp": hdmlp.__version__, "commit": commit or "unknown", "host": platform.node()}


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def markdown(report: dict[str, Any]) -> str:
    m, a = report["machine"], report["args"]
    lines = [
        "# Training Fashion-MNIST: hdmlp against PyTorch's DataLoader",
        "",
        f"Written by `examples/train_fashion_mnist.py` on {report['date']}; do not edit by hand. Command:",
        "",
        "```sh",
        report["command"],
        "```",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores; Python {m['python']}, torch {m['torch']}, "
        f"hdmlp {m['hdmlp']} (commit {m['commit']}). {plural(report['world_size'], 'rank')}, "
        f"{plural(a['threads_per_rank'], 'torch thread')} per rank, global batch {a['batch_size']}, "
        f"{plural(a['epochs'], 'epoch')}, Adam lr {a['lr']}, seed {a['seed']}. Data: `{a['data']}` "
        f"({report['runs'][0]['steps_per_epoch'] * a['batch_size']} training images used per epoch).",
        "",
        "Per epoch: the slowest rank's wall time; stall = time the training loop waited for its next "
        "batch (mean over ranks); test accuracy over the whole test folder after the epoch (evaluation "
        "not included in the epoch's time).",
        "",
        "| loader | epoch | seconds | images/s | stall s | stall share | loss | test accuracy |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in report["runs"]:
        for r in run["epochs"]:
            lines.append(f"| {run['label']} | {r['epoch']} | {r['seconds']:.2f} | {r['images_per_s']:.0f} | "
                         f"{r['stall_s']:.2f} | {100 * r['stall_share']:.1f}% | {r['loss']:.3f} | "
                         f"{100 * r['test_accuracy']:.2f}% |")
    lines += [
        "",
        "Profile per training step (seed 002's breakdown; mean over ranks and epochs, milliseconds). "
        "Read and load/transform are summed over the loader's workers, which run alongside training; "
        "a step's wall time is about train + stall, plus read and load/transform where they run in the "
        "training loop's thread.",
        "",
        "| loader | transforms run in | read | load/transform | train | stall | step wall |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for run in report["runs"]:
        p = run["per_step_ms_mean"]
        lines.append(f"| {run['label']} | {run['transforms']} | {p['read']:.2f} | {p['load_transform']:.2f} | "
                     f"{p['train']:.2f} | {p['stall']:.2f} | {p['step_wall']:.2f} |")
    hdmlp_runs = [r for r in report["runs"] if r["loader"] == "hdmlp"]
    torch_runs = [r for r in report["runs"] if r["loader"] == "torch"]
    if hdmlp_runs and torch_runs:
        h = hdmlp_runs[0]
        lines += ["", "hdmlp against the DataLoader, from the same run (mean over epochs):", ""]
        for t in torch_runs:
            lines.append(f"- against {t['label']}: epochs {t['mean_epoch_s'] / h['mean_epoch_s']:.2f}x faster "
                         f"({h['mean_epoch_s']:.1f} s against {t['mean_epoch_s']:.1f} s), stall "
                         f"{h['mean_stall_s']:.2f} s against {t['mean_stall_s']:.2f} s per epoch, final test accuracy "
                         f"{100 * h['final_test_accuracy']:.2f}% against {100 * t['final_test_accuracy']:.2f}%")
        lines += [
            "",
            "Every loader shares the same cores with training. The *train* column is the training step's wall "
            "time, so it grows when the loader's workers take CPU from it: that, more than the stall, is "
            "what the DataLoader's Python decoding costs on a machine with few cores per rank.",
        ]
    return "\n".join(lines) + "\n"


def summarise(run: dict[str, Any]) -> dict[str, Any]:
    epochs = run["epochs"]
    n = len(epochs)
    mean = {k: sum(r["per_step_ms"][k] for r in epochs) / n for k in epochs[0]["per_step_ms"]}
    mean["step_wall"] = sum(1e3 * r["seconds"] / run["steps_per_epoch"] for r in epochs) / n
    return dict(run, per_step_ms_mean=mean, mean_epoch_s=sum(r["seconds"] for r in epochs) / n,
                mean_stall_s=sum(r["stall_s"] for r in epochs) / n)


def write_report(path: str, args: argparse.Namespace, world: int, threads: int, runs: list[dict]) -> None:
    argv = " ".join(shlex.quote(a) for a in sys.argv)
    launcher = f"mpirun -np {world} " if world > 1 else ""
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": f"{launcher}python {argv}",
        "world_size": world,
        "machine": machine(),
        "args": dict(vars(args), threads_per_rank=threads),
        "runs": [summarise(r) for r in runs],
    }
    stem = path[:-3] if path.endswith(".md") else path
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(stem + ".json", "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
    with open(stem + ".md", "w", encoding="utf-8") as f:
        f.write(markdown(report))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rank, world, local = world_from_env()
    if args.batch_size % world:
        raise SystemExit(f"--batch-size {args.batch_size} is the global batch: it must be a multiple of the "
                         f"{world} ranks")
    threads = args.threads or max(1, (os.cpu_count() or 1) // local)
    torch.set_num_threads(threads)

    def log(message: str) -> None:
        if rank == 0:
            print(message, flush=True)

    init_distributed(rank, world)
    make_fashion_mnist_folder(args.data, source=args.source, limit=args.limit)  # every rank: they take turns
    runs = []
    plan = [("torch", w) for w in args.workers] if args.loader in ("torch", "both") else []
    plan += [("hdmlp", 0)] if args.loader in ("hdmlp", "both") else []
    # Every rank reads the checkpoint (the job's state is the same on all of them).
    checkpoint = torch.load(args.resume) if args.resume else None
    for name, workers in plan:
        runs.append(train(args, name, workers, rank, world, log, checkpoint))
    if any(r.get("stopped") for r in runs):
        runs = []  # an interrupted run reports when it has finished
    if runs:
        log(f"final test accuracy: {100 * runs[-1]['final_test_accuracy']:.2f}%")
    if args.report and rank == 0 and runs:
        write_report(args.report, args, world, threads, runs)
        log(f"report written to {args.report}")
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:
        if world_from_env()[1] == 1:
            raise
        # Under mpirun a rank that returns from an exception would wait in MPI_Finalize
        # (at exit) for ranks that wait for it: end the process so that mpirun ends the job.
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
