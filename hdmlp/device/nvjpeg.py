"""hdmlp's own batched nvJPEG decoder for ``ImgDecode(device="cuda")`` (the module ``hdmlp._nvjpeg``).

torchvision's ``decode_jpeg`` on the GPU uses the GPU's JPEG engines where it has them (A100, H100,
H200), and elsewhere nvJPEG's default backend, which decodes a batch's Huffman codes on the calling
thread (697 images/s, measured on an H100 with its engines set aside). This decoder starts nvJPEG
with the engines where there are any, else with its GPU-assisted Huffman decoder (5,750 images/s
there), checks every file in C++, and decodes the whole batch in one call without the GIL, into
one device buffer. On the engines both decoders give the same pixels at the same rate, and
torchvision's fed ResNet-18 faster, so ``ImgDecode(decoder="auto")`` takes this one only on GPUs
without engines (docs/gpu.md, "Which JPEG decoder").

``hdmlp._nvjpeg`` is built only where CMake finds nvJPEG at build time: the CUDA toolkit, or the
``nvidia-nvjpeg`` wheel's files through ``HDMLP_NVJPEG_ROOT`` (docs/gpu.md). :func:`status` says
whether it is here and, if not, why. At run time it needs ``libnvjpeg.so.13``; it is looked for
beside the module's build (its RPATH), in an installed ``nvidia-nvjpeg`` wheel, under
``$CUDA_HOME`` and in ``/usr/local/cuda``.

Thread-safety: a :class:`NvjpegDecoder` decodes one batch at a time (the caller's lock).
"""
from __future__ import annotations

import ctypes
import glob
import importlib
import importlib.util
import os
from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["BACKENDS", "NvjpegDecoder", "status"]

BACKENDS = ("auto", "hardware", "gpu_hybrid", "default")
_LIBRARY = "libnvjpeg.so.13"
_module: Any = None
_why_not: str | None = None


def _library_candidates() -> list[str]:
    found = []
    try:
        import nvidia  # the nvidia-nvjpeg wheel's namespace package
        for root in getattr(nvidia, "__path__", []):
            found += sorted(glob.glob(os.path.join(root, "*", "lib", _LIBRARY)))
            found += sorted(glob.glob(os.path.join(root, "nvjpeg", "lib", _LIBRARY)))
    except ImportError:
        pass
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            found += [os.path.join(home, sub, _LIBRARY) for sub in ("lib64", "lib", "targets/x86_64-linux/lib")]
    return [path for path in found if os.path.exists(path)]


def _load() -> Any:
    """The module, or None with the reason in ``_why_not``."""
    global _module, _why_not
    if _module is not None or _why_not is not None:
        return _module
    if importlib.util.find_spec("hdmlp._nvjpeg") is None:
        _why_not = ("hdmlp was built without nvJPEG (hdmlp._nvjpeg is missing): build it where the CUDA toolkit "
                    "or the nvidia-nvjpeg wheel is present (docs/gpu.md, 'Which JPEG decoder')")
        return None
    errors = []
    try:
        _module = importlib.import_module("hdmlp._nvjpeg")
        return _module
    except ImportError as e:  # the library is not where the build found it: look elsewhere
        errors.append(str(e))
    for path in _library_candidates():
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            _module = importlib.import_module("hdmlp._nvjpeg")
            return _module
        except (OSError, ImportError) as e:
            errors.append(f"{path}: {e}")
    _why_not = (f"hdmlp._nvjpeg is built but {_LIBRARY} was not found ({'; '.join(errors)}): install the "
                "nvidia-nvjpeg wheel (pip install 'nvidia-nvjpeg>=13,<14') or set CUDA_HOME to the CUDA toolkit")
    return None


def status() -> tuple[bool, str]:
    """Whether hdmlp's nvJPEG decoder can be used here, and if not, why (no GPU is not checked here)."""
    module = _load()
    return (module is not None, "hdmlp._nvjpeg is available" if module is not None else str(_why_not))


class NvjpegDecoder:
    """``decode(samples, device)``: a list of ``[3, H, W]`` uint8 device tensors (views of one buffer), or None
    for each file this backend cannot decode (the caller gives those to the CPU chain).

    ``backend`` is one of :data:`BACKENDS`; ``"auto"`` takes the GPU's JPEG engines if it has them, else
    nvJPEG's GPU Huffman decoder, else its default. Raises RuntimeError naming why no backend starts (no GPU,
    no driver), or why the module cannot be used (:func:`status`). ``module`` replaces
    ``hdmlp._nvjpeg`` (the tests use a stand-in that decodes on the CPU). Not copyable.
    """

    def __init__(self, device: torch.device, backend: str = "auto", *, module: Any = None) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"nvJPEG backend {backend!r}: use one of {', '.join(BACKENDS)}")
        module = module or _load()
        if module is None:
            raise RuntimeError(_why_not)
        self.device = torch.device(device)
        if self.device.type == "cuda":
            torch.cuda.init()
            with torch.cuda.device(self.device):  # nvJPEG starts in the device's (torch's) context
                self._decoder = module.BatchDecoder(backend)
        else:
            self._decoder = module.BatchDecoder(backend)
        self.backend: str = self._decoder.backend
        # The decode runs on a stream of its own, as torchvision's does: nvJPEG waits on the host for the
        # stream it is given, and on the caller's stream that would mean waiting for its earlier work too.
        self._stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None

    # Every file is checked by probe() in C++ (JPEG of 3 components, complete, and what the backend takes), so
    # the caller need not check them in Python first.
    checks_files = True

    def __call__(self, samples: Sequence[torch.Tensor], device: torch.device) -> list[torch.Tensor | None]:
        return self.decode(samples, device)

    def decode(self, samples: Sequence[torch.Tensor], device: torch.device) -> list[torch.Tensor | None]:
        device = torch.device(device)
        if device.type != self.device.type:
            raise ValueError(f"this decoder was started for {self.device}, not {device}")
        for s in samples:  # the C++ side reads s.numel() bytes at s.data_ptr() on the host
            if s.device.type != "cpu" or s.dtype != torch.uint8 or not s.is_contiguous():
                raise ValueError(f"NvjpegDecoder: each file must be a contiguous uint8 tensor in host memory, got "
                                 f"{s.dtype} on {s.device}")
        addresses = [s.data_ptr() for s in samples]
        sizes = [s.numel() for s in samples]
        probes = self._decoder.probe(addresses, sizes)
        rows = [i for i, (_, _, ok) in enumerate(probes) if ok]
        out: list[torch.Tensor | None] = [None] * len(samples)
        if not rows:
            return out
        planes = [3 * probes[i][0] * probes[i][1] for i in rows]
        offsets, at = [], 0
        for n in planes:
            offsets.append(at)
            at += n
        shapes = [(probes[i][0], probes[i][1]) for i in rows]
        addresses, sizes = [addresses[i] for i in rows], [sizes[i] for i in rows]
        if self._stream is None:
            flat = torch.empty(at, dtype=torch.uint8, device=device)
            self._decoder.decode(addresses, sizes, shapes, [flat.data_ptr() + o for o in offsets], 0)
        else:
            caller = torch.cuda.current_stream(device)
            with torch.cuda.stream(self._stream):
                # One buffer for the batch, made for the decode's stream: torch's allocator does not hand it out
                # again before that stream, and (record_stream) the caller's, are past their uses of it.
                flat = torch.empty(at, dtype=torch.uint8, device=device)
                self._decoder.decode(addresses, sizes, shapes, [flat.data_ptr() + o for o in offsets],
                                     self._stream.cuda_stream)
            caller.wait_stream(self._stream)
            flat.record_stream(caller)
        for i, o, n in zip(rows, offsets, planes):
            out[i] = flat[o:o + n].view(3, probes[i][0], probes[i][1])
        return out
