"""Pinned host memory for batches (``pin_memory=True``), from the CUDA runtime torch loaded.

The C++ core never links CUDA: it allocates page-locked batch buffers through the
``cudaHostAlloc``/``cudaFreeHost`` of the runtime that torch already loaded, found here by
address. Without torch, a CUDA device or a shared libcudart the batches use ordinary memory,
with a warning. Safe to call from any thread once torch is imported.
"""
from __future__ import annotations

import os
import warnings


def cuda_host_allocator() -> tuple[int, int]:
    """Addresses of cudaHostAlloc/cudaFreeHost in the CUDA runtime torch loaded, or (0, 0).

    The core allocates pinned batch memory through them (``pin_memory=True``); (0, 0), with a
    warning, where torch, a CUDA device or a shared libcudart is missing.
    """
    try:
        import torch
    except ImportError:
        warnings.warn("hdmlp: pin_memory=True ignored: torch is not installed", RuntimeWarning, stacklevel=3)
        return 0, 0
    if not torch.cuda.is_available():
        warnings.warn("hdmlp: pin_memory=True ignored: torch.cuda is not available (no CUDA device), so batches "
                      "use ordinary memory", RuntimeWarning, stacklevel=3)
        return 0, 0
    import ctypes
    torch.cuda.init()
    runtime = None
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            path = line.split()[-1]
            if "libcudart.so" in os.path.basename(path):
                runtime = path
                break
    if runtime is None:
        warnings.warn("hdmlp: pin_memory=True ignored: torch's CUDA runtime (libcudart) is not loaded as a shared "
                      "library", RuntimeWarning, stacklevel=3)
        return 0, 0
    lib = ctypes.CDLL(runtime)
    return (ctypes.cast(lib.cudaHostAlloc, ctypes.c_void_p).value or 0,
            ctypes.cast(lib.cudaFreeHost, ctypes.c_void_p).value or 0)
