"""A Python transform worker: a process that runs a chain's tasks for the training process.

:class:`hdmlp.python_transforms.PythonStage` starts each worker (from a forkserver or with
spawn, never forked from a process that runs hdmlp's C++ threads) with
:func:`worker_main` as its target. A worker runs one task at a time on its one thread: the
chain's C++ part (hdmlp's pipeline, in the worker), then its callables, and writes the
result into the batch's shared memory or sends it back; the messages are in
:func:`worker_main`'s docstring. Before each task it seeds Python's ``random``, NumPy and
torch from (seed, epoch, sample) in the key domain :data:`PYTHON_KEY_DOMAIN` (see
:mod:`hdmlp.python_transforms`), so results do not depend on which worker ran them. It
ignores Ctrl-C (the training process's to handle) and ends on "stop" or when the training
process's end of the pipe closes.
"""
from __future__ import annotations

import multiprocessing.connection
import multiprocessing.reduction
import os
import pickle
import random
import signal
import sys
import time
import traceback
from typing import Any

from hdmlp import _core

__all__ = ["PYTHON_KEY_DOMAIN", "send_fd", "worker_main"]

# The key domain of the Python workers' seeds ("python"), beside the C++
# transforms' own (transform_pipeline.h).
PYTHON_KEY_DOMAIN = 0x707974686F6E

# Results whose pickle is larger go through shared memory, so that every
# message on the pipes stays small (no pipe can fill up in both directions).
_SMALL_MESSAGE = 32 * 1024
_SUPPORTED_DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                     "float16", "float32", "float64")
# numpy, imported by worker_main (in the worker, after it sets OMP_NUM_THREADS).
np: Any = None



def send_fd(conn: multiprocessing.connection.Connection, fd: int) -> None:
    multiprocessing.reduction.send_handle(conn, fd, 0)  # the destination pid is unused on Unix


def worker_main(conn: multiprocessing.connection.Connection, init: dict) -> None:
    """A worker: runs tasks from ``conn`` in order, one reply per task, until "stop" or the pipe closes.

    Messages in: ("segment", id, nbytes) followed by its fd (the first one is the control
    word: the current generation; a task of an older one is cancelled), ("tasks", [task]),
    ("forget", id), ("stop",). Replies: ("ready", pid), then per task ("row", tid, s) when
    the result was written into its output row, ("array", tid, shape, dtype, nbytes, s) or
    ("object_fd", tid, nbytes, s) followed by a segment's fd, ("object", tid, pickle, s),
    ("error", tid, type, message, traceback, hint, s) or ("cancelled", tid).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the training process's to handle
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # one process per core, as DataLoader's workers
    global np
    import numpy as np  # here, after OMP_NUM_THREADS, which its BLAS reads when it loads
    try:
        worker = _Worker(conn, init)
    except Exception:
        conn.send(("fatal", traceback.format_exc()))
        return
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "set_num_threads"):
        torch.set_num_threads(1)
    conn.send(("ready", os.getpid()))
    worker.serve()


class _Worker:
    """A worker's state: its chain, and the shared memory segments the training process gave it."""

    def __init__(self, conn: multiprocessing.connection.Connection, init: dict) -> None:
        self.conn = conn
        self.callables = pickle.loads(init["payload"])
        self.pipeline = _core.TransformPipeline(init["cpp_specs"]) if init["cpp_specs"] else None
        self.seed = init["seed"]
        self.segments: dict[int, Any] = {}  # id -> (SharedMemory, the whole segment as uint8)
        self.control: Any = None  # the current generation (the first segment's first word)

    def serve(self) -> None:
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):  # the training process is gone
                return
            kind = message[0]
            if kind == "tasks":
                for task in message[1]:
                    self.run(task)
            elif kind == "segment":
                self.attach(message[1], message[2])
            elif kind == "forget":
                self.segments.pop(message[1], None)
            elif kind == "stop":
                return

    def attach(self, segment_id: int, nbytes: int) -> None:
        fd = multiprocessing.reduction.recv_handle(self.conn)
        segment = _core.SharedMemory.attach(fd, nbytes)
        self.segments[segment_id] = (segment, np.frombuffer(segment.view(0, [nbytes]), np.uint8))
        if self.control is None:
            self.control = np.frombuffer(segment.view(0, [1], "int64"), np.int64)

    def run(self, task: tuple) -> None:
        tid, generation, in_segment, in_offset, in_length, out, sample, epoch, path = task
        if generation < self.control[0]:
            self.conn.send(("cancelled", tid))
            return
        start = time.perf_counter()
        x: Any = None
        try:
            x = self.segments[in_segment][1][in_offset:in_offset + in_length]
            x.flags.writeable = False  # the input ring: another sample's bytes soon
            _seed_everything(_core.derive_key([self.seed, epoch, sample, PYTHON_KEY_DOMAIN]))
            if self.pipeline is not None:
                buf, shape = self.pipeline.apply(x, path, self.seed, epoch, sample)
                x = np.asarray(buf).reshape(shape)
            for fn in self.callables:
                x = fn(x)
            self.reply(tid, x, out, start)
        except (Exception, SystemExit, KeyboardInterrupt) as e:
            # sys.exit() or a KeyboardInterrupt raised by a transform (the workers ignore Ctrl-C) fails the
            # sample like any exception, rather than ending the worker as if it could not start.
            trace = traceback.format_exc()
            self.conn.send(("error", tid, type(e).__qualname__, str(e), trace, _hint(x, e, trace),
                            time.perf_counter() - start))

    def reply(self, tid: int, x: Any, out: tuple | None, start: float) -> None:
        """Sends task ``tid``'s result ``x``: into its output row where it fits, else as an array or an object."""
        a = _as_array(x)
        if a is None:
            data = pickle.dumps(x, protocol=pickle.HIGHEST_PROTOCOL)
            if len(data) <= _SMALL_MESSAGE:
                self.conn.send(("object", tid, data, time.perf_counter() - start))
            else:
                self.send_in_segment("object_fd", tid, np.frombuffer(data, np.uint8), len(data), (len(data),),
                                     time.perf_counter() - start)
            return
        if out is not None:
            out_segment, out_offset, out_shape, out_dtype = out
            if a.shape == tuple(out_shape) and a.dtype.name == out_dtype:
                whole = self.segments[out_segment][1]
                np.copyto(whole[out_offset:out_offset + a.nbytes].view(a.dtype).reshape(a.shape), a)
                self.conn.send(("row", tid, time.perf_counter() - start))
                return
        self.send_in_segment("array", tid, a, a.nbytes, (a.shape, a.dtype.name, a.nbytes),
                             time.perf_counter() - start)

    def send_in_segment(self, kind: str, tid: int, content: Any, nbytes: int, header: tuple, seconds: float) -> None:
        try:
            segment = _core.SharedMemory(max(1, nbytes), "hdmlp-result")
        except OSError as e:
            limit = _core.memory_limit()
            raise MemoryError(f"the transform's result ({getattr(content, 'dtype', '')}"
                              f"{list(getattr(content, 'shape', ()))}, {_core.format_bytes(nbytes)}) does not fit in "
                              f"shared memory ({e}): this worker may still take {limit['description']}; make the "
                              f"result smaller, or {limit['raise'] or 'give the job more memory'}") from None
        dst = np.frombuffer(segment.view(0, [max(1, nbytes)]), np.uint8)[:nbytes]
        np.copyto(dst.view(content.dtype).reshape(content.shape) if nbytes else dst, content if nbytes else dst)
        self.conn.send((kind, tid, *header, seconds))
        send_fd(self.conn, segment.fd)


def _seed_everything(key: int) -> None:
    # One stream each (random and NumPy would give the same numbers from one seed: both are MT19937).
    random.seed(_core.derive_key([key, 0]))
    np_key = _core.derive_key([key, 1])
    np.random.seed([np_key & 0xFFFFFFFF, np_key >> 32])
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "manual_seed"):
        torch.manual_seed(_core.derive_key([key, 2]))


def _as_array(x: Any) -> Any:
    """x as a numpy array of a supported type, or None for anything else."""
    if isinstance(x, np.ndarray):
        a = x
    else:
        pil = sys.modules.get("PIL.Image")
        if pil is not None and isinstance(x, pil.Image):
            a = np.asarray(x)
        elif hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
            if getattr(x, "requires_grad", False):
                x = x.detach()
            try:
                a = np.from_dlpack(x)
            except (BufferError, TypeError, RuntimeError, ValueError):
                return None
        elif hasattr(x, "__array__") or hasattr(x, "__array_interface__"):
            a = np.asarray(x)
        else:
            return None
    return a if a.dtype.name in _SUPPORTED_DTYPES else None


def _hint(x: Any, error: BaseException, trace: str) -> str:
    """What to do when a transform that wants a PIL image got the C++ part's array."""
    if isinstance(x, np.ndarray) and x.ndim == 3 and (isinstance(error, (TypeError, AttributeError))
                                                      or "PIL" in trace):
        return (f"hint: a transform got a numpy array of shape {x.shape} and type {x.dtype}; if it wants a "
                "PIL image, put hdmlp.transforms.ToPIL() before it")
    return ""
