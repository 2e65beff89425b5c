"""Hugging Face Accelerate with hdmlp: data-parallel training on several processes, resumable mid-epoch.

    accelerate launch --multi_gpu --num_processes 2 examples/accelerate_ddp.py DATA   # GPUs
    torchrun --nproc-per-node 2 examples/accelerate_ddp.py DATA --cpu                # CPUs (gloo)
    torchrun --nproc-per-node 2 examples/accelerate_ddp.py DATA --cpu --resume checkpoints/step3

DATA holds ``train/`` and ``val/`` in ImageFolder's layout (``hdmlp demo --data DATA/train
--images 200 --seed 1`` and ``hdmlp demo --data DATA/val --images 50 --seed 2`` make a small one).

What hdmlp needs from an Accelerate script:

- the Jobs are made after ``Accelerator()``, which starts ``torch.distributed``: each rank then
  reads its share (a Job made before would read everything on every process; hdmlp raises an
  error at its first pass).
- ``accelerator.prepare`` takes the model and optimizer; an ``HDMLPDataLoader`` needs no
  preparing (hdmlp already splits each global batch between the ranks) and ``prepare`` hands
  it back as it is.
- ``accelerator.register_for_checkpointing(train_loader)`` puts the loader's position into
  ``save_state``; ``load_state`` restores it, and the loop goes on with the next batch.
- the validation Job has ``epochs=None`` (any number of passes) and ``shuffle=False``.

``--record DIR`` writes, per rank, each training step's epoch, batch index, labels and a checksum of
the images. ``--checkpoint-every N`` calls ``save_state`` every N training steps.
"""
from __future__ import annotations

import argparse
import json
import os
import zlib

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import set_seed

import hdmlp
import hdmlp.transforms as T
from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder


class TinyNet(nn.Module):
    """A model of a few hundred weights: the example is about the data, not the model."""

    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(inplace=True),
                                      nn.AdaptiveAvgPool2d(1))
        self.classifier = nn.Linear(8, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", help="a folder with train/ and val/ in ImageFolder's layout")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=4, help="samples per process and step (default 4)")
    parser.add_argument("--image-size", type=int, default=32, help="training crop size (default 32)")
    parser.add_argument("--cpu", action="store_true", help="train on the CPU (gloo) even where a GPU is")
    parser.add_argument("--seed", type=int, default=0, help="seed of the model and of the training order")
    parser.add_argument("--workers", type=int, default=None, help="hdmlp staging threads per process")
    parser.add_argument("--hdmlp-config", default=None, help="hdmlp storage configuration (default: hdmlp's)")
    parser.add_argument("--checkpoint-dir", default="checkpoints")
    parser.add_argument("--checkpoint-every", type=int, default=0, help="save_state every N training steps")
    parser.add_argument("--resume", default=None, metavar="DIR", help="load_state from DIR and go on")
    parser.add_argument("--record", default=None, metavar="DIR", help="write each rank's steps to DIR/rank{r}.json")
    args = parser.parse_args()

    accelerator = Accelerator(cpu=args.cpu)  # starts torch.distributed: make the Jobs after it
    set_seed(args.seed)
    normalize = T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    common = dict(batch_size_per_rank=args.batch_size, num_workers=args.workers, config_path=args.hdmlp_config)
    traindir, valdir = os.path.join(args.data, "train"), os.path.join(args.data, "val")
    train_job = hdmlp.Job(traindir, epochs=args.epochs, seed=args.seed, **common,
                          transforms=[T.ImgDecode(), T.RandomResizedCrop(args.image_size), T.RandomHorizontalFlip(),
                                      T.ToTensor(), normalize])
    val_job = hdmlp.Job(valdir, epochs=None, shuffle=False, **common,
                        transforms=[T.ImgDecode(), T.Resize(args.image_size * 8 // 7), T.CenterCrop(args.image_size),
                                    T.ToTensor(), normalize])
    train_loader = HDMLPDataLoader(HDMLPImageFolder(traindir, train_job))
    val_loader = HDMLPDataLoader(HDMLPImageFolder(valdir, val_job))

    model = TinyNet(len(train_job.classes))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    model, optimizer, train_loader, val_loader = accelerator.prepare(model, optimizer, train_loader, val_loader)
    accelerator.register_for_checkpointing(train_loader)
    if args.resume:
        accelerator.load_state(args.resume)  # the model, the optimizer and the loader's position
    # The job knows where it is: the epoch of the next pass and, after a mid-epoch resume, its next batch.
    state, start_epoch = train_loader.state_dict(), train_loader.epoch
    first_batch = state["batches"] if state["epoch"] == start_epoch else 0

    steps = []
    step = start_epoch * len(train_loader) + first_batch
    for epoch in range(start_epoch, args.epochs):
        train_loader.set_epoch(epoch)
        model.train()
        for batch, (images, labels) in enumerate(train_loader, start=first_batch if epoch == start_epoch else 0):
            images, labels = images.to(accelerator.device), labels.to(accelerator.device)
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()
            step += 1
            if args.record:
                steps.append({"epoch": epoch, "batch": batch, "labels": labels.tolist(),
                              "crc": zlib.crc32(images.contiguous().cpu().numpy().tobytes())})
            if args.checkpoint_every and step % args.checkpoint_every == 0:
                accelerator.save_state(os.path.join(args.checkpoint_dir, f"step{step}"))
        model.eval()
        correct = torch.zeros((), device=accelerator.device)
        seen = torch.zeros((), device=accelerator.device)
        with torch.no_grad():
            for images, labels in val_loader:  # every sample once over the ranks
                images, labels = images.to(accelerator.device), labels.to(accelerator.device)
                correct += (model(images).argmax(1) == labels).sum()
                seen += len(labels)
        correct, seen = accelerator.reduce(correct), accelerator.reduce(seen)
        accelerator.print(f"epoch {epoch}: validation accuracy {correct.item() / seen.item():.3f} "
                          f"({int(seen.item())} images)")

    if args.record:
        os.makedirs(args.record, exist_ok=True)
        with open(os.path.join(args.record, f"rank{accelerator.process_index}.json"), "w") as f:
            json.dump({"steps": steps, "world_size": accelerator.num_processes}, f)
    accelerator.wait_for_everyone()  # the last collective before the Jobs stop serving
    train_job.close()
    val_job.close()
    accelerator.end_training()


if __name__ == "__main__":
    main()
