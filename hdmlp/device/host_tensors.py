"""A delivered batch as torch tensors on the host, viewing the memory hdmlp's workers wrote (no copy).

:func:`host_tensors` turns what a Job hands over for one batch (a list of per-sample buffers, or
one ``[B, ...]`` buffer, and the labels) into tensors. The device stage's feeders and the front end
(:mod:`hdmlp.torch`) share it; it imports nothing of hdmlp's, so the device stage needs no front
end. It keeps no state; any thread may call it.
"""
from __future__ import annotations

from typing import Any

import torch

__all__ = ["host_tensors"]


_DTYPES = {"b": torch.int8, "B": torch.uint8, "h": torch.int16, "H": torch.uint16, "i": torch.int32,
           "I": torch.uint32, "q": torch.int64, "Q": torch.uint64, "f": torch.float32, "d": torch.float64}


def _as_batch_tensor(buffer: Any) -> torch.Tensor:
    """A [B, ...] array (transformed images, arrays, a Python transform's results) as a tensor viewing its
    memory (DLPack: any dtype)."""
    if len(buffer) == 0:
        return torch.empty(list(buffer.shape), dtype=_DTYPES[memoryview(buffer).format])
    return torch.from_dlpack(buffer)


def _as_tensor(buffer: Any, dtype: torch.dtype) -> torch.Tensor:
    if len(buffer) == 0:
        return torch.empty(0, dtype=dtype)
    return torch.frombuffer(buffer, dtype=dtype)


def _sample_tensor(x: Any) -> Any:
    """One sample of a list batch: a file's bytes (uint8), a Python transform's array, or its object."""
    if not hasattr(x, "__dlpack__") or isinstance(x, torch.Tensor):
        return x
    if getattr(x, "dtype", None) == "uint8" and len(getattr(x, "shape", ())) == 1:
        return _as_tensor(x, torch.uint8)
    return torch.from_dlpack(x)


def host_tensors(buffers: Any, labels: Any) -> tuple[Any, torch.Tensor]:
    """A batch's samples and labels as the job hands them over, as tensors viewing their memory."""
    samples: Any
    if isinstance(buffers, list):
        samples = [_sample_tensor(b) for b in buffers]
    else:  # one batch: transformed images, arrays, or a Python transform's results
        samples = _as_batch_tensor(buffers)
    if isinstance(labels, torch.Tensor):
        return samples, labels
    if len(labels.shape) > 1 or memoryview(labels).format not in ("q", "l"):  # label arrays
        return samples, _as_batch_tensor(labels)
    return samples, _as_tensor(labels, torch.int64)
