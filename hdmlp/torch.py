"""PyTorch front end: HDMLPImageFolder and HDMLPDataLoader.

Drop-in for ``ImageFolder`` + ``DataLoader``::

    job = hdmlp.Job(data_dir, batch_size, epochs, "uniform", drop_last_batch)
    dataset = HDMLPImageFolder(data_dir, job)
    loader = HDMLPDataLoader(dataset)
    for epoch in range(epochs):
        for samples, labels in loader:   # one pass = one epoch
            ...

With the job's ``transforms=None`` a batch is ``(samples, labels)``:
``samples`` a list of 1-D uint8 tensors, each holding one file's exact
bytes, ``labels`` an int64 tensor. With ``transforms=[...]`` it is
``(images, labels)``: ``images`` one ``[B, C, H, W]`` float32 tensor (or
uint8, per the chain's last transform) that the staging workers wrote in
C++, or the collated results of a Python transform (any dtype; a list when their
shapes differ). An array source (HDF5) gives ``(arrays, labels)``: ``arrays`` one
``[B, ...]`` tensor of the stored dtype, ``labels`` int64 or, when the
label dataset holds arrays, one ``[B, ...]`` tensor of them. The tensors
view the memory the workers wrote (no copy); that memory
lives as long as any tensor on it does, and is reused for a later batch
only after every tensor on it is gone. ``HDMLPDataLoader(dataset, device="cuda:0")``
delivers the batches as device tensors instead (:mod:`hdmlp.device`, docs/gpu.md).
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any

try:
    import torch
except ImportError as e:
    raise ImportError("hdmlp.torch needs PyTorch, which is not installed: pip install 'hdmlp[torch]' (or use "
                      "job.batches() or hdmlp.numpy, which need no torch)") from e

from hdmlp.device.host_tensors import host_tensors
from hdmlp.job import Job

__all__ = ["HDMLPImageFolder", "HDMLPDataLoader", "HDMLPSampler", "HDMLPBatchSampler"]


class HDMLPImageFolder:
    """The dataset a Job reads, with torchvision ImageFolder's attributes.

    Args:
        root: the dataset folder; must be the Job's ``dataset_path``.
        job: the :class:`hdmlp.Job` that loads it.
        transform: applied in Python to each sample (a uint8 tensor of the
            file's bytes) as it is delivered.
        target_transform: applied to each label (an int).
    """

    def __init__(self, root: str | os.PathLike[str], job: Job, transform: Callable[[Any], Any] | None = None,
                 target_transform: Callable[[int], Any] | None = None) -> None:
        if not isinstance(job, Job):
            raise TypeError(f"job must be an hdmlp.Job, got {type(job).__name__}")
        root = os.path.expanduser(os.fsdecode(os.fspath(root)))
        if os.path.realpath(root) != os.path.realpath(job.dataset_path):
            raise ValueError(f"root '{root}' is not the folder the job reads ('{job.dataset_path}')")
        self.root = root
        self.job = job
        self.transform = transform
        self.target_transform = target_transform
        self.classes: list[str] = job.classes
        self.class_to_idx: dict[str, int] = job.class_to_idx
        self._samples: list[tuple[str, int]] | None = None

    @property
    def samples(self) -> list[tuple[str, int]]:
        """``(path, class_index)`` per sample, as torchvision's ``samples``."""
        if self._samples is None:
            self._samples = self.job.samples
        return self._samples

    imgs = samples

    targets = property(lambda self: self.job.targets, doc="Each sample's class index, as torchvision's ``targets``.")

    def __len__(self) -> int:
        return len(self.job)

    def __getitem__(self, index: Any) -> Any:
        # What torch.utils.data.DataLoader (and its worker processes) calls:
        # hdmlp reads in its own C++ workers, in the job's planned order.
        raise TypeError("HDMLPImageFolder is not read sample by sample: wrap it in hdmlp.torch.HDMLPDataLoader "
                        "(its C++ workers load in parallel, in the job's planned order), not in a "
                        "torch.utils.data.DataLoader, whose worker processes cannot use the job")

    def __repr__(self) -> str:
        return f"HDMLPImageFolder({self.root!r}, {len(self)} samples, {len(self.classes)} classes)"


class HDMLPSampler:
    """What a script reads from a ``DistributedSampler``, for an :class:`HDMLPDataLoader`.

    ``len(sampler)`` is the samples this rank reads per epoch; iterating it
    gives this rank's sample indices of the loader's current epoch (the one
    being delivered, else the next), in reading order, without loading
    anything. ``set_epoch(e)`` is the loader's.
    """

    def __init__(self, loader: "HDMLPDataLoader") -> None:
        self._loader = loader

    epoch = property(lambda self: self._loader.epoch, doc="The loader's epoch.")

    def set_epoch(self, epoch: int) -> None:
        """See :meth:`HDMLPDataLoader.set_epoch`."""
        self._loader.set_epoch(epoch)

    def __len__(self) -> int:
        return self._loader.job.rank_epoch_size

    def __iter__(self) -> Iterator[int]:
        job = self._loader.job
        return iter(job.plan(min(self._loader.epoch, job.planned_epochs - 1)))


class HDMLPBatchSampler:
    """What a script or trainer reads from a ``DataLoader``'s ``batch_sampler``, for an :class:`HDMLPDataLoader`.

    ``len()`` is the steps per epoch; iterating gives this rank's sample indices of each batch of the
    loader's current epoch (the one being delivered, else the next), without loading anything.
    ``sampler``, ``batch_size`` and ``drop_last`` are the loader's. hdmlp plans the batches itself, so a
    trainer cannot swap this for another sampler (PyTorch Lightning and Accelerate leave a loader that is
    not a ``torch.utils.data.DataLoader`` as it is).
    """

    def __init__(self, loader: "HDMLPDataLoader") -> None:
        self._loader = loader

    # The loader's.
    sampler = property(lambda self: self._loader.sampler)
    batch_size = property(lambda self: self._loader.batch_size)
    drop_last = property(lambda self: self._loader.drop_last)

    def __len__(self) -> int:
        return len(self._loader)

    def __iter__(self) -> Iterator[list[int]]:
        job = self._loader.job
        epoch = min(self._loader.epoch, job.planned_epochs - 1)
        ids, start = job.plan(epoch), 0
        for batch in range(job.batches_per_epoch):
            size = job.local_batch_size(batch)
            yield ids[start:start + size]
            start += size


class HDMLPDataLoader:
    """Iterates a job's batches; each full pass over the loader is one epoch.

    What a training script, PyTorch Lightning or Hugging Face Accelerate reads from a
    ``DataLoader`` is here: ``len(loader)`` (the steps per epoch: global batches, the same on
    every rank), ``batch_size`` (this rank's share of a full global batch), ``drop_last``,
    ``dataset``, ``sampler`` (:class:`HDMLPSampler`), ``batch_sampler``
    (:class:`HDMLPBatchSampler`), ``num_workers``, ``pin_memory``, ``shuffle`` and
    ``set_epoch``; ``collate_fn``, ``worker_init_fn``, ``generator``, ``prefetch_factor``,
    ``persistent_workers``, ``timeout`` and ``multiprocessing_context`` read as a loader without
    them (None, 0, False). Every rank gets exactly ``len(loader)`` non-empty batches per epoch.
    Iterating after the job's last epoch raises RuntimeError (an evaluation job of
    ``epochs=None`` has none). Breaking out of a pass early is fine: the next pass starts the
    next epoch and skips the rest unread.

    ``iter(loader)`` starts nothing: the pass (and its epoch) starts when its first batch is
    asked for, so an iterator made and dropped unused (as trainers do to check a loader)
    costs nothing and changes no state.

    The job owns the position: a loader (or a new one made every epoch) starts
    at the job's next epoch, and a job resumed from a state starts with the
    rest of the epoch it was taken in (that first pass yields ``len(loader) -
    state["batches"]`` batches). ``state_dict()`` / ``load_state_dict()`` are
    the job's (torchdata's ``StatefulDataLoader`` names). One pass at a time:
    a second iterator while one is open raises RuntimeError.

    With a ``device`` (default: the job's, ``hdmlp.Job(..., device=...)``) batches are tensors on
    it, copied from the batch memory on a side CUDA stream ``ahead`` batches ahead; the training
    stream waits on an event, not the host. A job made without a device takes this one before its
    first pass, so the 8-bit hand-off and the spare core apply (see :mod:`hdmlp.device` and
    docs/gpu.md). ``channels_last=True`` gives the images that memory format on the device.
    """

    # What torch's DataLoader has and hdmlp does not use (its C++ workers are threads, its order the plan's).
    collate_fn = None
    worker_init_fn = None
    generator = None
    prefetch_factor = None
    persistent_workers = False
    timeout = 0
    multiprocessing_context = None

    def __init__(self, dataset: HDMLPImageFolder, device: Any = None, *, channels_last: bool = False,
                 ahead: int = 2) -> None:
        if not isinstance(dataset, HDMLPImageFolder):
            raise TypeError(f"dataset must be an HDMLPImageFolder, got {type(dataset).__name__}")
        self.dataset = dataset
        self.job = dataset.job
        self.sampler = HDMLPSampler(self)
        self.batch_sampler = HDMLPBatchSampler(self)
        from hdmlp.device import check_ahead, check_channels_last
        self.ahead = check_ahead(ahead)
        check_channels_last(channels_last)
        self._device = self.job.delivery(device)[0] if device is not None else None
        self.channels_last = check_channels_last(channels_last, self.job.worker_specs)  # the chain the job now runs
        if channels_last and self.device is None:
            raise ValueError("channels_last=True needs a device: HDMLPDataLoader(dataset, device=...) (device='cpu' "
                             "for tensors in host memory)")

    @property
    def device(self) -> Any:
        """The ``torch.device`` batches arrive on, or None (host memory, as the job hands them over)."""
        return self._device if self._device is not None else self.job.device

    def __len__(self) -> int:
        return self.job.batches_per_epoch

    # The job's, under DataLoader's names.
    batch_size = property(lambda self: self.job.batch_size_per_rank, doc="This rank's share of a full global "
                          "batch (what ``DataLoader(batch_size=...)`` is per process).")
    drop_last = property(lambda self: self.job.drop_last_batch, doc="The job's ``drop_last_batch``.")
    shuffle = property(lambda self: self.job.shuffle, doc="The job's ``shuffle`` (False for an evaluation job in "
                       "index order).")
    num_workers = property(lambda self: self.job.num_workers, doc="The job's staging workers (C++ threads, not "
                           "processes).")
    pin_memory = property(lambda self: self.job.pin_memory, doc="Whether the job's batch buffers are pinned.")

    @property
    def epoch(self) -> int:
        """The epoch being delivered, else the one the next pass will deliver (the job's)."""
        current = self.job.current_pass()
        return current.epoch if current is not None else self.job.next_epoch

    def set_epoch(self, epoch: int) -> None:
        """Makes the next pass deliver ``epoch``, as ``DistributedSampler.set_epoch`` before a pass.

        The next epoch, and the one before it (the current one, the last pass
        started), are a no-op; but after a pass broken off early, the next
        epoch starts at once (a state taken then is at its start). A later epoch
        skips ahead at once: the epochs in between are never read. An earlier
        epoch raises ValueError: hdmlp reads epochs in order and cannot go back. The rule is the job's, so it holds
        for a new loader and across a resume (the next epoch is then the one the
        state was taken in). An evaluation job (``shuffle=False``) reads every epoch
        in the same order, so trainers that number its passes otherwise (PyTorch
        Lightning gives a validation loader the training epoch) do not need to match it:
        for it an earlier epoch is ignored.
        """
        self.job.set_epoch(epoch)

    def state_dict(self) -> dict[str, Any]:
        """The job's position (:meth:`hdmlp.Job.state_dict`), as torchdata's ``StatefulDataLoader.state_dict``."""
        return self.job.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Goes on from ``state`` before the first pass (:meth:`hdmlp.Job.load_state_dict`)."""
        self.job.load_state_dict(state)

    def __iter__(self) -> Iterator[tuple[Any, torch.Tensor]]:
        # A generator: nothing below runs (no pass opens) until the first batch is asked for.
        return self._iterate()

    def _iterate(self) -> Iterator[tuple[Any, torch.Tensor]]:
        target, tail = self.job.delivery(self._device)
        opened = self.job.open_pass()
        if target is None:
            yield from self._deliver(opened)
            return
        first = self.job.position().batches
        if self.job.decode_chain is not None:  # ImgDecode(device=...): Batch objects, (samples, labels)
            from hdmlp.device.decode import decoded_job_pass
            batches = decoded_job_pass(self.job, opened, first, self.channels_last, self.ahead)
        else:  # (samples, labels, index)
            from hdmlp.device import feed_pass
            batches = feed_pass(self.job, opened, first, self._deliver(opened), target, tail, self.channels_last,
                                self.ahead)
        try:
            for batch in batches:
                yield batch[0], batch[1]
        finally:  # a break: the feeder waits for the copies in flight before the pass ends
            batches.close()

    def _deliver(self, opened: Any) -> Iterator[tuple[Any, torch.Tensor]]:
        transform = self.dataset.transform
        target_transform = self.dataset.target_transform
        # Where the Python side's time goes, per epoch (Job.metrics()): the call for the
        # next batch, making tensors of it, and the training loop's time between batches.
        # A generator: dropping it (a break) drops `opened`, which ends the pass.
        epoch = opened.epoch
        clock, add = time.perf_counter, self.job.add_loop_seconds
        resumed = clock()
        while True:
            batch = next(opened, None)
            fetched = clock()
            add(epoch, next_batch_seconds=fetched - resumed)
            if batch is None:
                return
            _, labels, buffers = batch
            samples, label_tensor = host_tensors(buffers, labels)
            if transform is not None:
                samples = [transform(s) for s in samples]  # per sample, as torchvision's Dataset does
                if samples and all(isinstance(s, torch.Tensor) for s in samples) and \
                        len({tuple(s.shape) for s in samples}) == 1:
                    samples = torch.stack(samples)
            if target_transform is not None and label_tensor.dim() > 1:
                out = samples, [target_transform(t) for t in label_tensor]
            elif target_transform is not None:
                out = samples, [target_transform(int(t)) for t in label_tensor]
            else:
                out = samples, label_tensor
            made = clock()
            add(epoch, python_seconds=made - fetched)
            yield out
            resumed = clock()
            add(epoch, consumer_seconds=resumed - made)
