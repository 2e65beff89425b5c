"""PyTorch Lightning with hdmlp: DDP on several processes, the loaders' state in Lightning's checkpoints.

    python examples/lightning_ddp.py DATA --devices 2 --accelerator cpu --epochs 2
    python examples/lightning_ddp.py DATA --devices 2 --resume CHECKPOINT.ckpt   # mid-epoch too

DATA holds ``train/`` and ``val/`` in ImageFolder's layout (``hdmlp demo --data DATA/train
--images 200 --seed 1`` and ``hdmlp demo --data DATA/val --images 50 --seed 2`` make a small one).
Lightning starts the processes itself (``--devices``); under ``mpirun`` install ``mpi4py`` so
that Lightning takes mpirun's ranks (docs/launching.md).

What hdmlp needs from a Lightning script:

- the Jobs are made in ``LightningDataModule.setup()``, which runs in every process after
  Lightning started them and ``torch.distributed``: each rank reads its share. (A Job made in
  ``__init__`` would read everything on every process; hdmlp raises an error there.)
- the training Job has ``epochs=max_epochs``; the validation Job ``epochs=None`` (no limit:
  Lightning's sanity check and every validation are a pass each) and ``shuffle=False``.
- ``HDMLPDataLoader`` has ``state_dict``/``load_state_dict``: Lightning keeps the training
  loader's position in its checkpoints, and ``fit(ckpt_path=...)`` goes on with the next batch,
  also from a checkpoint taken in the middle of an epoch.

``--record DIR`` writes, per rank, each training step's epoch, batch index, labels and a
checksum of the images (the CI test checks that every sample comes once per epoch and that a
resumed run gets the same batches, bit for bit). ``--checkpoint-every N`` saves a checkpoint
every N training steps.
"""
from __future__ import annotations

import argparse
import json
import os
import zlib

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from lightning.pytorch.callbacks import ModelCheckpoint

import hdmlp
import hdmlp.transforms as T
from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder


class TinyNet(L.LightningModule):
    """A model of a few hundred weights: the example is about the data, not the model."""

    def __init__(self, num_classes: int, lr: float = 0.05, record: str | None = None) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(inplace=True),
                                      nn.AdaptiveAvgPool2d(1))
        self.classifier = nn.Linear(8, num_classes)
        self.steps: list[dict] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))

    def training_step(self, batch, batch_idx):
        images, labels = batch
        loss = F.cross_entropy(self(images), labels)
        if self.hparams.record:
            self.steps.append({"epoch": self.current_epoch, "batch": batch_idx, "labels": labels.tolist(),
                               "crc": zlib.crc32(images.contiguous().numpy().tobytes())})
        return loss

    def validation_step(self, batch, batch_idx):
        images, labels = batch
        correct = (self(images).argmax(1) == labels).sum()
        self.log("val_acc", correct.float() / len(labels), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)

    def on_train_end(self) -> None:
        if self.hparams.record:
            os.makedirs(self.hparams.record, exist_ok=True)
            with open(os.path.join(self.hparams.record, f"rank{self.global_rank}.json"), "w") as f:
                json.dump({"steps": self.steps, "world_size": self.trainer.world_size}, f)


class HDMLPDataModule(L.LightningDataModule):
    def __init__(self, data: str, batch_size: int, epochs: int, image_size: int, seed: int,
                 workers: int | None, config: str | None) -> None:
        super().__init__()
        # Only the arguments: the Jobs are made in setup(), in every process Lightning starts.
        self.data, self.batch_size, self.epochs = data, batch_size, epochs
        self.image_size, self.seed, self.workers, self.config = image_size, seed, workers, config
        self.train_job: hdmlp.Job | None = None
        self.val_job: hdmlp.Job | None = None

    def setup(self, stage: str) -> None:
        if self.train_job is not None:
            return
        normalize = T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
        common = dict(batch_size_per_rank=self.batch_size, num_workers=self.workers, config_path=self.config)
        self.train_job = hdmlp.Job(
            os.path.join(self.data, "train"), epochs=self.epochs, seed=self.seed, **common,
            transforms=[T.ImgDecode(), T.RandomResizedCrop(self.image_size), T.RandomHorizontalFlip(), T.ToTensor(),
                        normalize])
        self.val_job = hdmlp.Job(
            os.path.join(self.data, "val"), epochs=None, shuffle=False, **common,
            transforms=[T.ImgDecode(), T.Resize(self.image_size * 8 // 7), T.CenterCrop(self.image_size),
                        T.ToTensor(), normalize])

    def train_dataloader(self) -> HDMLPDataLoader:
        return HDMLPDataLoader(HDMLPImageFolder(self.train_job.dataset_path, self.train_job))

    def val_dataloader(self) -> HDMLPDataLoader:
        return HDMLPDataLoader(HDMLPImageFolder(self.val_job.dataset_path, self.val_job))

    def teardown(self, stage: str) -> None:
        # After fit's last collective: no rank stops serving its cache while a peer still reads.
        for job in (self.train_job, self.val_job):
            if job is not None:
                job.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", help="a folder with train/ and val/ in ImageFolder's layout")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=4, help="samples per process and step (default 4)")
    parser.add_argument("--image-size", type=int, default=32, help="training crop size (default 32)")
    parser.add_argument("--devices", type=int, default=2, help="processes per node (default 2)")
    parser.add_argument("--num-nodes", type=int, default=1)
    parser.add_argument("--accelerator", default="cpu", help="cpu (gloo), gpu, auto (default cpu)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the model and of the training order")
    parser.add_argument("--workers", type=int, default=None, help="hdmlp staging threads per process")
    parser.add_argument("--hdmlp-config", default=None, help="hdmlp storage configuration (default: hdmlp's)")
    parser.add_argument("--checkpoint-dir", default="checkpoints")
    parser.add_argument("--checkpoint-every", type=int, default=0, help="save a checkpoint every N training steps")
    parser.add_argument("--resume", default=None, metavar="CKPT", help="go on from this checkpoint")
    parser.add_argument("--record", default=None, metavar="DIR", help="write each rank's steps to DIR/rank{r}.json")
    args = parser.parse_args()

    L.seed_everything(args.seed, workers=False, verbose=False)
    classes = sorted(e.name for e in os.scandir(os.path.join(args.data, "train")) if e.is_dir())
    model = TinyNet(num_classes=len(classes), record=args.record)
    data = HDMLPDataModule(args.data, args.batch_size, args.epochs, args.image_size, args.seed, args.workers,
                           args.hdmlp_config)
    callbacks = []
    if args.checkpoint_every:
        callbacks.append(ModelCheckpoint(dirpath=args.checkpoint_dir, filename="step{step}", save_top_k=-1,
                                         every_n_train_steps=args.checkpoint_every, save_on_train_epoch_end=False))
    trainer = L.Trainer(accelerator=args.accelerator, devices=args.devices, num_nodes=args.num_nodes,
                        strategy="ddp", max_epochs=args.epochs, callbacks=callbacks, logger=False,
                        enable_checkpointing=bool(callbacks), enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=2)
    trainer.fit(model, datamodule=data, ckpt_path=args.resume)


if __name__ == "__main__":
    main()
