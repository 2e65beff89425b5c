"""Framework-free batches: what :meth:`hdmlp.Job.batches` yields.

A :class:`Batch` is the pair ``(samples, labels)`` (so ``for x, y in job.batches():``
works) with the batch's sample ``ids``, ``epoch`` and ``index``. Its arrays are
hdmlp's ``OwnedBuffer`` objects (or, for labels after Python transforms, NumPy
arrays): they implement the buffer protocol and DLPack (``__dlpack__`` with the
2023 protocol's ``max_version``, ``dl_device`` and ``copy``, and
``__dlpack_device__``), so every framework takes them without a copy::

    numpy.asarray(x)  numpy.from_dlpack(x)  torch.from_dlpack(x)
    jax.dlpack.from_dlpack(x)  tf.experimental.dlpack.from_dlpack(x.__dlpack__())  cupy.from_dlpack(x)

and ``list(x)``, ``for y in x`` and ``x.tolist()`` give its elements as Python numbers (nested lists
for more than one dimension), as a NumPy array's ``tolist()`` does: ``list(batch.labels)``.

``samples`` is one array ``[B, ...]`` when the job transforms (C++ ops, or a Python
transform whose results share one shape and type), and a list otherwise: each
file's bytes as a 1-D uint8 array without transforms, each sample's result after a
Python transform of varying shapes (or its object, for results that are not arrays).
The memory lives as long as any view or tensor made from it, and hdmlp writes
into it again only after the last one is gone. See docs/frameworks.md.
"""
from __future__ import annotations

from typing import Any

__all__ = ["Batch"]


class Batch(tuple):
    """One batch: ``(samples, labels)``, with ``ids``, ``epoch`` and ``index`` as attributes.

    ``batch.__dlpack__()`` and ``batch.__dlpack_device__()`` are those of ``samples`` when it
    is one array, so ``numpy.from_dlpack(batch)`` gives the images.
    """

    samples: Any
    labels: Any
    ids: list[int]
    epoch: int
    index: int

    def __new__(cls, samples: Any, labels: Any, ids: list[int], epoch: int, index: int) -> "Batch":
        batch = super().__new__(cls, (samples, labels))
        batch.samples, batch.labels, batch.ids, batch.epoch, batch.index = samples, labels, ids, epoch, index
        return batch

    @property
    def images(self) -> Any:
        """``samples`` by another name, for transformed batches."""
        return self.samples

    def _array(self) -> Any:
        if isinstance(self.samples, list):
            raise BufferError("this batch's samples are a list (one array per sample: raw bytes, or results of "
                              "differing shapes): export batch.samples[i] instead")
        return self.samples

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self._array().__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._array().__dlpack_device__()

    def __len__(self) -> int:  # the tuple's length is 2; a batch's is its samples'
        return len(self.ids)

    def __repr__(self) -> str:
        kind = f"{len(self.samples)} arrays" if isinstance(self.samples, list) else repr(self.samples)
        return f"hdmlp.Batch(epoch={self.epoch}, index={self.index}, {len(self.ids)} samples: {kind})"
