"""A transform chain's Python part: how ``transforms`` splits into hdmlp's C++ ops and Python callables.

:func:`split_chain` takes what a Job's ``transforms`` holds (a callable, a list, a torchvision
``Compose``) and returns a :class:`PythonChain`: the C++ ops that come first (run in the
workers, by hdmlp's own pipeline) and the callables after them, pickled for the worker
processes (with cloudpickle where plain pickle cannot). :class:`ToPIL` hands a C++ image or a
file's bytes to transforms that want PIL images; :class:`TransformError` is what a callable
that raised on a sample becomes in the training process. Running the chain is
:mod:`hdmlp.python_transforms`' (the stage) and :mod:`hdmlp.python_worker`'s (a worker).
Nothing here starts a process or keeps state.
"""
from __future__ import annotations

import dataclasses
import io
import os
import warnings
from collections.abc import Sequence
from typing import Any

from hdmlp import _core
from hdmlp.transform_base import Transform, cpp_op

__all__ = ["PythonChain", "ToPIL", "TransformError", "check_python_workers", "default_python_workers",
           "split_chain"]


class ToPIL:
    """Python transform: an RGB ``PIL.Image`` from an HWC/CHW uint8 array or a file's bytes.

    Put it between hdmlp's C++ ops and a torchvision chain that wants PIL images::

        [T.ImgDecode(), T.ToPIL(), torchvision.transforms.Compose([...])]

    First in a chain it decodes the file's bytes with PIL as torchvision's
    ImageFolder loader does (``Image.open(f).convert("RGB")``).
    """

    def __call__(self, x: Any) -> Any:
        import numpy as np
        from PIL import Image
        if isinstance(x, Image.Image):
            return x.convert("RGB")
        a = np.asarray(x)
        if a.ndim == 1 and a.dtype == np.uint8:  # a file's bytes
            with Image.open(io.BytesIO(a)) as img:
                return img.convert("RGB")
        if a.ndim == 3 and a.shape[0] in (1, 3) and a.shape[2] not in (1, 3):
            a = a.transpose(1, 2, 0)  # CHW
        if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] not in (1, 3):
            raise TypeError(f"ToPIL takes an [H, W, 3] or [3, H, W] uint8 image or a file's bytes, got an array of "
                            f"shape {a.shape} and type {a.dtype}; put it before ToTensor, or end the C++ part with "
                            "ToUint8")
        return Image.fromarray(a[:, :, 0] if a.shape[2] == 1 else a).convert("RGB")

    def __repr__(self) -> str:
        return "ToPIL()"


class TransformError(ValueError):
    """A Python transform raised on a sample; the message names the file and shows the worker's traceback.

    Attributes: ``path``, ``sample``, ``epoch``, ``exc_type`` (the name of the exception the
    callable raised) and ``worker_traceback`` (its traceback, as text).
    """

    def __init__(self, message: str, path: str, sample: int, epoch: int, exc_type: str, worker_traceback: str) -> None:
        super().__init__(message)
        self.path, self.sample, self.epoch = path, sample, epoch
        self.exc_type, self.worker_traceback = exc_type, worker_traceback


@dataclasses.dataclass
class PythonChain:
    """A transform chain with a Python part.

    Attributes:
        cpp_specs: the C++ ops before the callables (run in the workers), ending in ToTensor/ToUint8
            (``ToUint8("HWC")`` is appended when the given ops end earlier); empty without C++ ops.
        callables: the Python part, in order (ToPIL included where given).
        payload: the callables pickled for the workers.
    """

    cpp_specs: list
    callables: list
    payload: bytes
    names: list = dataclasses.field(default_factory=list)  # the chain as given, for messages

    def describe(self) -> str:
        return ", ".join(self.names)


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__qualname__


def _serialize(callables: list) -> bytes:
    import pickle  # here, as only jobs with Python transforms need it: `import hdmlp` stays short

    try:
        return pickle.dumps(callables, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as first:  # lambdas, local functions, unpicklable state
        try:
            import cloudpickle
        except ImportError:
            raise TypeError(
                f"transforms: the Python part ({', '.join(_name(c) for c in callables)}) cannot be pickled for "
                f"hdmlp's worker processes ({type(first).__name__}: {first}). Workers are not forked from this "
                "process (forkserver or spawn), so a transform must be importable: define it at module level (not "
                "a lambda or a function inside a function), or install cloudpickle, which hdmlp then uses") from first
        return cloudpickle.dumps(callables)


def split_chain(transforms: Any) -> PythonChain | None:
    """Splits ``transforms`` into hdmlp's C++ ops and a Python part; None when there is no Python part.

    Accepts a callable, a list, or an object with a ``transforms`` list (such as a
    torchvision ``Compose`` holding hdmlp ops). hdmlp's C++ ops come first, the
    callables after them.

    Raises:
        TypeError: an element is neither an hdmlp transform nor callable, a C++ op
            follows a callable, or the Python part cannot be pickled.
        ValueError: the C++ part is not a valid chain.
    """
    if transforms is None or isinstance(transforms, Transform):
        return None
    inner = getattr(transforms, "transforms", None)
    if isinstance(inner, Sequence) and any(isinstance(t, Transform) for t in inner):
        items = inner  # e.g. a torchvision Compose holding hdmlp ops: its items are the chain
    elif isinstance(transforms, Sequence) and not isinstance(transforms, (str, bytes)):
        items = transforms
    elif callable(transforms):
        items = [transforms]  # one callable (a Compose of other ops is called as a whole)
    else:
        raise TypeError(f"transforms must be a list of hdmlp.transforms objects and callables, or a callable, got "
                        f"{type(transforms).__name__}")
    cpp: list = []
    python: list = []
    for i, t in enumerate(items):
        if isinstance(t, Transform):
            if python:
                raise TypeError(f"transform {i} ({t!r}) is one of hdmlp's C++ transforms after the Python callable "
                                f"{_name(python[-1])}: the C++ ops come first, the Python callables after them")
            cpp.append(t)
        elif callable(t):
            python.append(t)
        else:
            raise TypeError(f"transform {i} is a {type(t).__module__}.{type(t).__qualname__}, neither an "
                            "hdmlp.transforms object nor a callable")
    if not python:
        return None
    for t in python:
        name = type(t).__name__
        if type(t).__module__.startswith("torchvision") and cpp_op(name) is not None:
            warnings.warn(f"hdmlp: torchvision's {name} runs in Python worker processes; hdmlp.transforms.{name} "
                          "does the same in C++, in the staging threads (faster; docs/transforms.md)",
                          RuntimeWarning, stacklevel=3)
    specs = [t.spec() for t in cpp]
    if specs and not any(op in ("ToTensor", "ToUint8") for op, _ in specs):
        specs.append(("ToUint8", {"layout": [1.0]}))  # HWC, as PIL, OpenCV and albumentations hold images
    if specs:
        _core.TransformPipeline(specs)  # ValueError naming the op at fault, now rather than in a worker
    return PythonChain(specs, python, _serialize(python), [type(t).__name__ for t in cpp] + [_name(c) for c in python])


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


# A worker is a process with its own interpreter, modules and shared-memory ring: past a few per
# CPU they only queue for the CPUs and fill memory (python_workers=1000 on 2 cores ran out of
# shared memory after 16 s of starting processes).
WORKERS_PER_CPU = 4
MIN_WORKER_LIMIT = 8


def check_python_workers(workers: int) -> None:
    """Refuses more Python transform workers than the CPUs this process may use can run."""
    cpus = _usable_cpus()
    limit = max(MIN_WORKER_LIMIT, WORKERS_PER_CPU * cpus)
    if workers > limit:
        raise ValueError(f"python_workers={workers} is more than this process can run: it may use {cpus} CPU(s), "
                         f"and hdmlp starts at most {WORKERS_PER_CPU} Python transform workers per CPU (at least "
                         f"{MIN_WORKER_LIMIT}): each is a process with its own memory and shared-memory ring, and "
                         f"workers beyond the CPUs only wait for them. Leave python_workers unset (one per CPU: "
                         f"{default_python_workers()} here) or give at most {limit}")


def default_python_workers() -> int:
    """The CPUs this process may use, shared between the ranks of a node that do not pin their CPUs."""
    cpus = _usable_cpus()
    local = 0
    for name in ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"):
        try:
            local = int(os.environ.get(name, "0"))
        except ValueError:
            continue
        if local > 0:
            break
    if local > 1 and cpus >= (os.cpu_count() or cpus):  # every rank sees the whole node
        cpus //= local
    return max(1, cpus)
