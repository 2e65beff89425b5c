"""NumPy front end: a job's batches as NumPy arrays, without a copy and without torch.

    import hdmlp, hdmlp.numpy
    job = hdmlp.Job(root, batch_size=64, epochs=3, transforms=[...])
    for epoch in range(job.epochs):
        for images, labels in hdmlp.numpy.batches(job):
            ...   # images: numpy.ndarray [B, ...] viewing hdmlp's memory; labels: int64 [B]

Each array views the memory hdmlp wrote (``numpy.asarray`` on the buffer protocol),
which lives as long as the array (or any view of it) does.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from hdmlp.job import Job

__all__ = ["as_numpy", "batches"]


def as_numpy(x: Any) -> Any:
    """An hdmlp array (or a list of them) as NumPy arrays viewing the same memory; other objects as they are."""
    if isinstance(x, list):
        return [as_numpy(e) for e in x]
    if isinstance(x, np.ndarray) or not hasattr(x, "__dlpack__"):
        return x
    return np.asarray(x)


def batches(job: Job, epoch: int | None = None) -> Iterator[tuple[Any, np.ndarray]]:
    """Starts ``epoch`` (default: the one after the last started) and yields ``(samples, labels)`` as NumPy arrays.

    ``samples`` is one ``[B, ...]`` array, or a list (raw bytes: one 1-D uint8 array per
    file; results of varying shapes); ``labels`` is an int64 array. A job with a ``device``
    delivers torch tensors there (its workers may hand over 8-bit images that the device
    finishes), so it raises ValueError: use ``job.batches()``, or a Job without a device.
    """
    if getattr(job, "device", None) is not None:
        raise ValueError(f"this job delivers its batches on {job.device} (hdmlp.Job(..., device=...)): iterate "
                         "job.batches() for its tensors, or create the Job without device for NumPy arrays")
    for batch in job.batches(epoch):
        yield as_numpy(batch.samples), np.asarray(batch.labels)
