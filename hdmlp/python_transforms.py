"""Python transforms, run in parallel in a pool of worker processes.

A Job's ``transforms`` may be a Python callable, or a chain of hdmlp's C++
transforms that ends in Python callables::

    job = hdmlp.Job(root, 256, 90, transforms=my_decode_and_augment)     # gets each file's bytes
    job = hdmlp.Job(root, 256, 90, transforms=[T.ImgDecode(), T.RandomResizedCrop(224),
                                              T.ToPIL(), torchvision_compose])

What the first callable receives:

* with no C++ op before it: the file's bytes, as a read-only 1-D ``numpy.uint8``
  array that views shared memory (valid during the call; ``bytes(data)`` keeps a
  copy). ``PIL.Image.open(io.BytesIO(data))``, ``cv2.imdecode(data, ...)`` and
  ``numpy.frombuffer(data, ...)`` take it as it is;
* after C++ ops (which must start with ``ImgDecode``): the image those ops made, as
  a ``numpy`` array: ``[H, W, 3]`` uint8 RGB when the C++ part ends before
  ``ToTensor``/``ToUint8`` (the layout of PIL, OpenCV and albumentations),
  ``[3, H, W]`` float32 after ``ToTensor``/``Normalize``, as ``ToUint8`` says after it;
* :class:`ToPIL` anywhere in the Python part turns what it gets (an HWC/CHW uint8
  array, or a file's bytes) into an RGB ``PIL.Image``, as torchvision's
  ImageFolder gives its transforms.

Each further callable gets what the one before returned. The last one's result
is collated: arrays (numpy arrays, torch tensors on the CPU, PIL images, anything
``numpy.asarray`` or ``numpy.from_dlpack`` takes, of a bool, integer or float type)
of one shape and type become one batch array ``[B, ...]``, written by the workers
straight into shared memory; arrays of differing shapes give a list of arrays,
and any other result (a tuple, a dict, ...) a list of those objects.

How it runs: the Job's C++ staging threads read the samples (prefetching and
caching as always) and deliver each batch's file bytes; the consumer copies each
sample's bytes into its worker's input ring (an anonymous shared memory segment,
memfd) and sends the worker a small task message over a pipe; the worker runs the
C++ part (hdmlp's own decoder, in the worker) and the callables, and writes the
result into the batch's output segment, which becomes the batch array with no
further copy. Batches are assembled in plan order, a few batches ahead of the
training loop. Workers are forked from a forkserver (which imports the transforms'
modules once; see :func:`_context`) or started with ``spawn``, never forked from the
process that runs hdmlp's C++ threads.

Seeds: before each call a worker takes ``key = derive_key([seed, epoch, sample,
0x707974686f6e])`` (``hdmlp._core.derive_key``: the key derivation of hdmlp's C++
side, util/random.h; the last word is "python") and seeds Python's ``random`` with
``derive_key([key, 0])``, NumPy's global generator with ``derive_key([key, 1])`` (as two
32-bit words, low first) and, when torch is loaded in the worker, torch's with
``derive_key([key, 2])``. Results then depend only on (seed, epoch, sample), not on
the worker count or timing. torch is loaded when a transform's module imports it
(torchvision's do); a transform that imports torch only inside its body should
import it at module level, or its first call in each worker is not seeded.

The parts: how a chain splits into C++ ops and callables is hdmlp/python_chain.py, a
worker process hdmlp/python_worker.py, and this module the consumer's side, the
:class:`PythonStage` that feeds the workers and assembles batches. See docs/transforms.md
("Python transforms") and docs/architecture.md.
"""
from __future__ import annotations

import bisect
import collections
import dataclasses
import multiprocessing
import multiprocessing.connection
import multiprocessing.reduction
import pickle
import sys
import time
import weakref
from typing import Any

from hdmlp import _core
from hdmlp.python_chain import PythonChain, ToPIL, TransformError, default_python_workers, split_chain
from hdmlp.python_worker import PYTHON_KEY_DOMAIN, send_fd, worker_main

__all__ = ["PYTHON_KEY_DOMAIN", "PythonChain", "PythonStage", "ToPIL", "TransformError", "default_python_workers",
           "split_chain"]

_RING_MIN, _RING_MAX = 2**20, 16 * 2**20   # each worker's input ring, sized for its queue of samples
_TASKS_PER_WORKER = 32          # tasks queued per worker at most
_POLL_S = 0.005                 # how often a waiting consumer looks for new raw batches


class _RemoteTraceback(Exception):
    """The worker's traceback, chained under a TransformError (as concurrent.futures does)."""

    def __str__(self) -> str:
        return "\n\n" + self.args[0]


def _context(start_method: str, callables: list) -> Any:
    """The multiprocessing context the workers start from.

    ``forkserver``: a clean server process (started by spawn, so it inherits none of this
    process's threads) imports hdmlp, NumPy and the transforms' modules once, and every
    worker is forked from it with them loaded: a Job's workers start in the time of one
    import (torchvision: seconds) instead of one each, and a later Job's at once. The
    preloads are set only while the server is not running yet (the first Job's, added to
    any the application set).
    """
    ctx = multiprocessing.get_context(start_method)
    if start_method == "forkserver":
        import multiprocessing.forkserver as forkserver
        server = getattr(forkserver, "_forkserver", None)
        modules = list(getattr(server, "_preload_modules", None) or ["__main__"])
        for c in callables:
            for name in (getattr(c, "__module__", None), type(c).__module__):
                if name and name not in modules and name != "builtins":
                    modules.append(name)
        for name in ("numpy", "hdmlp.python_worker"):
            if name not in modules:
                modules.append(name)
        ctx.set_forkserver_preload(modules)  # read when the server starts; an ImportError is ignored
    return ctx


# ---------------------------------------------------------------------------
# The consumer's side.

class _Segment:
    """One of the consumer's shared memory segments, which workers have mapped it, and its use."""

    __slots__ = ("id", "memory", "array", "sent_to", "pending", "assigned")

    def __init__(self, segment_id: int, nbytes: int, name: str) -> None:
        import numpy as np
        self.id = segment_id
        self.memory = _core.SharedMemory(nbytes, name)
        self.array = np.frombuffer(self.memory.view(0, [nbytes]), np.uint8)  # the consumer's own view
        self.sent_to: set[int] = set()
        self.pending = 0         # tasks that may still write into it
        self.assigned = False    # the output of a batch not yet handed out

    @property
    def free(self) -> bool:
        # The consumer's own view is one; any other is (part of) a batch someone holds.
        return not self.assigned and self.pending == 0 and self.memory.views == 1


class _Task:
    __slots__ = ("tid", "generation", "sample", "path", "in_segment", "out_segment", "result")

    def __init__(self, tid: int, generation: int, sample: int, path: str, in_segment: _Segment | None,
                 out_segment: _Segment | None) -> None:
        self.tid, self.generation, self.sample, self.path = tid, generation, sample, path
        self.in_segment, self.out_segment = in_segment, out_segment
        self.result: tuple | None = None


class _Worker:
    """A worker process, its pipe, its input ring and its queue of tasks (answered in order)."""

    def __init__(self, index: int, process: Any, conn: Any, ring: _Segment) -> None:
        self.index, self.process, self.conn, self.ring = index, process, conn, ring
        self.queue: collections.deque[_Task] = collections.deque()
        self.ring_live: collections.deque[tuple[int, int]] = collections.deque()  # (start, end) per queued task
        self.ring_head = 0  # end of the newest non-empty allocation
        self.head_since = 0.0  # when the oldest queued task became the one the worker is on (monotonic)

    def ring_alloc(self, n: int) -> int | None:
        """Start of n free bytes of the input ring, or None while it is too full (freed in task order)."""
        cap = self.ring.memory.nbytes
        live = [r for r in self.ring_live if r[1] > r[0]]
        if n == 0:
            start: int | None = self.ring_head
        elif not live:
            start = 0 if n <= cap else None
        else:
            tail, head = live[0][0], self.ring_head
            if head > tail:
                start = head if head + n <= cap else (0 if n <= tail else None)
            else:  # wrapped: [tail, cap) and [0, head) are in use
                start = head if head + n <= tail else None
        if start is None:
            return None
        self.ring_live.append((start, start + n))
        if n:
            self.ring_head = start + n
        return start


@dataclasses.dataclass
class _EpochState:
    epoch: int
    generation: int
    batches: int
    epoch_end: int                # positions from here on were moved into holes (on_error="skip")
    deliver: int = 0              # next batch to hand out
    raw_next: int = 0             # next raw batch to take from the job
    raw_errors: dict = dataclasses.field(default_factory=dict)   # batch -> the job's exception for it
    waiting: collections.deque = dataclasses.field(default_factory=collections.deque)  # (position, sample, bytes)
    tasks: dict = dataclasses.field(default_factory=dict)        # position -> _Task
    outputs: dict = dataclasses.field(default_factory=dict)      # batch -> _Segment
    order: list | None = None     # the rank's samples of the epoch, fetched when a hole needs them
    stall: float = 0.0
    transform: float = 0.0
    skipped: int = 0
    samples: int = 0
    padded: int = 0               # good samples delivered again to fill a batch with none (on_error="skip")
    last_good: int = -1           # the epoch's last sample delivered

    def metrics(self) -> dict:
        return {"stall_seconds": self.stall, "transform_seconds": self.transform, "skipped": self.skipped,
                "samples": self.samples, "padded": self.padded}


# How long close() lets the workers finish the sample at hand before it ends them: a transform that
# hangs (or a Ctrl-C while one runs) must not hold up the exit.
_STOP_GRACE_S = 1.0


def _shutdown(workers: list[_Worker], control: _Segment) -> None:
    """Stops the workers (each may finish the sample at hand, for up to _STOP_GRACE_S) and joins them;
    ends what does not stop (SIGTERM, then SIGKILL)."""
    control.array.view("int64")[0] = 2**62  # every queued task is cancelled
    for w in workers:
        try:
            w.conn.send(("stop",))
        except (OSError, ValueError):
            pass
    deadline = time.monotonic() + _STOP_GRACE_S
    for w in workers:
        w.process.join(max(0.0, deadline - time.monotonic()))
        for stop in (w.process.terminate, w.process.kill):
            if w.process.is_alive():
                stop()
                w.process.join(1.0)
        try:
            w.conn.close()
        except OSError:
            pass
    workers.clear()


class PythonStage:
    """The Python part of a Job's chain: a worker pool fed from the Job's raw batches.

    The Job calls :meth:`begin_epoch` and :meth:`next_batch` from its consumer thread
    (one thread, as for the Job itself); :meth:`close` stops the workers. With
    ``skip``, a sample whose transform raises follows the Job's rule (job.h): its row
    is filled with the last undelivered sample of this rank's epoch while every later
    batch keeps one, else the batch is shorter; a batch with no good sample left repeats
    a good one of the epoch (``padded``); only an epoch with none raises ValueError, and
    the other ranks are told, so every rank takes every step. A worker whose transform
    does not return within ``task_timeout_s`` on a sample is ended (TimeoutError).
    """

    def __init__(self, job: Any, chain: PythonChain, workers: int, start_method: str, skip: bool,
                 prefetch_batches: int = 2, task_timeout_s: float = 300.0, per_rank: bool = False) -> None:
        import numpy as np
        self._np = np
        # A transform that never returns on a sample would block the loop for
        # ever: past this, its worker is ended and the loop gets TimeoutError.
        self._task_timeout_s = task_timeout_s
        self._job = job          # hdmlp._core.Job, delivering raw bytes
        self._chain = chain
        self._skip = skip
        self._prefetch_batches = prefetch_batches
        self._per_rank = per_rank  # the job was given batch_size_per_rank (for the memory error's advice)
        self._seed = job.seed
        self._rank = job.rank
        self._closed = False
        self._broken: str | None = None
        self._generation = 0
        self._next_tid = 0
        self._next_segment_id = 0
        self._state: _EpochState | None = None
        # A sample's result: None until the first result; then ((shape), dtype) for arrays, or
        # False when the first result was another object (then every batch is a list).
        self._expected: tuple[tuple, str] | None | bool = None
        self._probe: _Task | None = None
        self._outputs: list[_Segment] = []
        self._dedicated: dict[int, _Segment] = {}
        self._labels: list[int] | None = None
        self.skipped_files: list[str] = []
        self._skipped_paths: set[str] = set()
        self.epoch_metrics: dict[int, dict] = {}
        starts = [0]
        for b in range(job.batches_per_epoch):
            starts.append(starts[-1] + job.local_batch_size(b))
        self._starts = starts
        self._row_capacity = max(1, max(starts[b + 1] - starts[b] for b in range(len(starts) - 1)))

        if start_method not in ("spawn", "forkserver"):
            raise ValueError(f"python_start_method must be 'spawn' or 'forkserver', got {start_method!r}: hdmlp never "
                             "forks a process that runs its C++ threads")
        ctx = _context(start_method, chain.callables)
        sizes = job.sizes
        mean_size = sum(sizes) / max(1, len(sizes))
        ring_bytes = int(min(_RING_MAX, max(_RING_MIN, 2 * _TASKS_PER_WORKER * mean_size)))
        self._control = self._new_segment(8, "hdmlp-control")
        self._control.array.view("int64")[0] = 0
        init = {"payload": chain.payload, "cpp_specs": chain.cpp_specs, "seed": self._seed}
        self._workers: list[_Worker] = []
        self._finalizer = weakref.finalize(self, _shutdown, self._workers, self._control)
        for i in range(workers):
            here, there = ctx.Pipe(duplex=True)
            process = ctx.Process(target=worker_main, args=(there, init), daemon=True,
                                  name=f"hdmlp-python-transform-{i}")
            process.start()
            there.close()
            worker = _Worker(i, process, here, self._new_segment(ring_bytes, "hdmlp-input"))
            self._workers.append(worker)
            self._send_segment(worker, self._control)
            self._send_segment(worker, worker.ring)
        self._await_ready()

    def _await_ready(self) -> None:
        """Waits until every worker has loaded the transforms, so that a transform that cannot load fails here."""
        waiting = {w.conn: w for w in self._workers}
        deadline = time.monotonic() + self._task_timeout_s
        while waiting:
            sentinels = {w.process.sentinel: w for w in waiting.values()}
            ready = multiprocessing.connection.wait([*waiting, *sentinels], max(0.0, deadline - time.monotonic()))
            if not ready:
                w = next(iter(waiting.values()))
                raise TimeoutError(f"hdmlp: Python transform worker {w.index} (pid {w.process.pid}) did not load "
                                   f"{self._chain.describe()} within {self._task_timeout_s:g} s (timeout_s): does "
                                   f"importing its module wait for something?")
            for r in ready:
                w = waiting.get(r) or sentinels[r]
                if r is w.process.sentinel:
                    if w.conn in waiting and not w.conn.poll():
                        self._worker_died(w)
                    continue
                try:
                    message = w.conn.recv()
                except (EOFError, OSError):
                    self._worker_died(w)
                if message[0] == "fatal":
                    raise TypeError(f"transforms: hdmlp's Python transform worker could not load "
                                    f"{self._chain.describe()}: define the transforms in a module the worker "
                                    "processes can import (not in an interactive session's __main__). Worker "
                                    f"traceback:\n{message[1]}")
                del waiting[w.conn]

    def forget_in_child(self) -> None:
        """In a forked child: the workers are the parent's, so neither stop them nor use them."""
        self._finalizer.detach()
        self._closed = True

    @property
    def workers(self) -> int:
        return len(self._workers)

    @property
    def pids(self) -> list[int]:
        return [w.process.pid for w in self._workers]

    # -- shared memory -------------------------------------------------------
    def _new_segment(self, nbytes: int, name: str) -> _Segment:
        try:
            segment = _Segment(self._next_segment_id, nbytes, name)
        except OSError as e:  # the memory it maps is not there: say what it was for and what to change
            what = {"hdmlp-batch": f"the results of a batch ({self._row_capacity} rows)",
                    "hdmlp-input": "a sample's bytes on their way to a worker"}.get(name, name)
            limit = _core.memory_limit()
            raise MemoryError(f"hdmlp: cannot make a shared memory segment of {_core.format_bytes(nbytes)} for {what}: "
                              f"{e}; this process may still take {limit['description']}; use a smaller batch_size, "
                              f"or {limit['raise'] or 'give the job more memory'}") from None
        self._next_segment_id += 1
        return segment

    def _attach_result(self, w: _Worker, task: _Task, nbytes: int, what: str) -> Any:
        """Maps a worker's result; one this process cannot map is a MemoryError naming the sample and sizes."""
        fd = multiprocessing.reduction.recv_handle(w.conn)
        try:
            return _core.SharedMemory.attach(fd, nbytes)
        except OSError as e:
            why = _core.batch_memory_error(task.path, f"a result {what} of {self._chain.describe()}", nbytes, 0,
                                           self._row_capacity, 2, self._job.world_size, self._per_rank,
                                           "make the transform's results smaller")
            limit = _core.memory_limit()
            self._broken = why or (f"the result of {self._chain.describe()} on '{task.path}' ({what}, "
                                   f"{_core.format_bytes(nbytes)}) cannot be mapped ({e}): this process may still take "
                                   f"{limit['description']}; make the result smaller, or "
                                   f"{limit['raise'] or 'give the job more memory'}")
            self._job.tell_peers_stopped(f"rank {self._rank} stopped: {self._broken}")
            raise MemoryError(f"hdmlp: {self._broken}") from None

    def _plan_batch_memory(self, probe: _Task) -> None:
        """Once the first result's size is known: two batches of results (the one the training loop holds and
        the next) must fit in the memory this process may still take (else MemoryError naming the sample,
        the sizes, the limit and the batch size that fits); batches are prefetched only as far as they fit."""
        shape, dtype = self._expected
        batch_bytes = max(1, self._row_bytes * self._row_capacity)
        why = _core.batch_memory_error(probe.path, f"a result {dtype}{list(shape)} of {self._chain.describe()}",
                                       self._row_bytes, 0, self._row_capacity, 2, self._job.world_size,
                                       self._per_rank, "make the transform's results smaller")
        if why:
            self._broken = why
            self._job.tell_peers_stopped(f"rank {self._rank} stopped: {why}")
            raise MemoryError(f"hdmlp: {why}")
        available = _core.memory_limit()["available"]
        if available >= 0:
            self._prefetch_batches = max(0, min(self._prefetch_batches, available // batch_bytes - 2))

    def _send_segment(self, worker: _Worker, segment: _Segment) -> None:
        if worker.index not in segment.sent_to:
            try:
                worker.conn.send(("segment", segment.id, segment.memory.nbytes))
                send_fd(worker.conn, segment.memory.fd)
            except (OSError, EOFError):  # the worker died: name that, not the broken pipe
                self._worker_died(worker)
            segment.sent_to.add(worker.index)

    def _forget(self, segment: _Segment) -> None:
        for w in self._workers:
            if w.index in segment.sent_to:
                try:
                    w.conn.send(("forget", segment.id))
                except OSError:
                    pass
        segment.sent_to.clear()

    @property
    def _row_bytes(self) -> int:
        shape, dtype = self._expected
        return self._np.dtype(dtype).itemsize * int(self._np.prod(shape, dtype=self._np.int64))

    def _output_segment(self) -> _Segment:
        """A free output segment for one batch, marked assigned (the result's layout must be known)."""
        segment = next((s for s in self._outputs if s.free), None)
        if segment is None:
            segment = self._new_segment(max(1, self._row_bytes * self._row_capacity), "hdmlp-batch")
            self._outputs.append(segment)
        # Keep a few free ones for the next batches; give the others back (a user may hold many batches).
        for extra in [s for s in self._outputs if s.free and s is not segment][self._prefetch_batches + 2:]:
            self._forget(extra)
            self._outputs.remove(extra)
        segment.assigned = True
        return segment

    def _batch_output(self, st: _EpochState, b: int) -> _Segment | None:
        """Batch b's output segment, made on first use once the result's layout is known."""
        output = st.outputs.get(b)
        if output is None and self._expected:
            output = st.outputs[b] = self._output_segment()
        return output

    # -- epochs --------------------------------------------------------------
    def begin_epoch(self, epoch: int, first_batch: int = 0) -> None:
        """Starts ``epoch`` at its batch ``first_batch`` (a resumed epoch's next global batch)."""
        self._check_usable()
        self._generation += 1
        self._control.array.view("int64")[0] = self._generation  # workers cancel what is left of the last epoch
        if self._state is not None:
            self.epoch_metrics[self._state.epoch] = self._state.metrics()
            for output in self._state.outputs.values():
                output.assigned = False
        self._state = _EpochState(epoch=epoch, generation=self._generation, batches=len(self._starts) - 1,
                                  epoch_end=self._starts[-1], deliver=first_batch, raw_next=first_batch)

    @property
    def position(self) -> tuple[int, int] | None:
        """(epoch, batches handed out in it), or None before the first epoch."""
        return None if self._state is None else (self._state.epoch, self._state.deliver)

    def metrics(self) -> dict[int, dict]:
        """Per epoch: the consumer's stall and the workers' transform seconds, skipped samples, samples."""
        out = dict(self.epoch_metrics)
        if self._state is not None:
            out[self._state.epoch] = self._state.metrics()
        return out

    def next_batch(self, epoch: int) -> tuple[list[int], Any, Any] | None:
        """``(ids, labels, samples)`` of the epoch's next batch, or None at its end."""
        self._check_usable()
        st = self._state
        if st is None or st.epoch != epoch:
            raise RuntimeError(f"epoch {epoch} is not the Python transforms' current epoch")
        if st.deliver >= st.batches:
            return None
        started = time.perf_counter()
        b = st.deliver
        try:
            return self._assemble(st, b)
        finally:
            st.stall += time.perf_counter() - started
            if st.deliver == b:  # an error (or Ctrl-C) in the middle: the next call starts the next batch
                self._finish_batch(st, b)

    def _check_usable(self) -> None:
        if self._closed:
            raise RuntimeError("the job is closed")
        if self._broken is not None:
            raise RuntimeError(f"hdmlp's Python transform workers stopped: {self._broken}; close the job")

    # -- assembling one batch --------------------------------------------------
    def _assemble(self, st: _EpochState, b: int) -> tuple[list[int], Any, Any]:
        start, end = self._starts[b], self._starts[b + 1]
        last_start = self._starts[st.batches - 1]
        while st.raw_next <= b:  # this batch's bytes are needed now
            self._pull_raw(st, block=True)
        if b in st.raw_errors:
            raise st.raw_errors.pop(b)
        self._top_up(st)
        entries: list[tuple] = []  # per row: ("row",) in the output segment, ("array", OwnedBuffer), ("object", x)
        ids: list[int] = []
        bad: list[str] = []
        j = start
        while j < min(end, st.epoch_end):
            task = self._wait_for(st, j)
            del st.tasks[j]
            result = task.result
            if result[0] == "error":
                message = self._error_text(task, result, st.epoch)
                if not self._skip:
                    self._job.tell_peers_stopped(f"rank {self._rank} stopped: {message.splitlines()[0]}")
                    raise TransformError(message, task.path, task.sample, st.epoch, result[1], result[3]) \
                        from _RemoteTraceback(result[3])
                self._record_skip(st, task, result)
                bad.append(self._why(task, result))
                self._fill_from_epoch_end(st, b, j + 1 if start == last_start else last_start + 1, entries, ids, bad)
            else:
                entries.append(self._place(result, self._batch_output(st, b), j - start, len(entries)))
                ids.append(task.sample)
            j += 1
        if not ids:  # as DistributedSampler pads: a good sample of the epoch again, so that every rank steps
            self._pad_with_repeat(st, b, end, entries, ids)
        if not ids:
            message = (f"rank {self._rank}: every sample of batch {b} of epoch {st.epoch} is bad, and this rank's "
                       "epoch has no good sample to repeat in its place (on_error=\"skip\" keeps every step "
                       "non-empty so that the ranks stay in step): " + "; ".join(bad) + "; remove or fix these files")
            self._job.tell_peers_stopped(f"rank {self._rank} stopped: {message}")
            raise ValueError(message)
        samples = self._collate(entries, self._batch_output(st, b))
        self._finish_batch(st, b)
        st.samples += len(ids)
        st.last_good = ids[-1]
        if self._labels is None:
            self._labels = self._job.labels
        labels = self._np.asarray([self._labels[i] for i in ids], dtype=self._np.int64)
        return ids, labels, samples

    def _place(self, result: tuple, output: _Segment | None, source_row: int, row: int) -> tuple:
        """Moves a sample's result into row ``row`` of the batch's output where it fits; its entry."""
        kind = result[0]
        if kind == "row":  # the worker wrote it into source_row
            if source_row != row:
                rb = self._row_bytes
                output.array[row * rb:(row + 1) * rb] = output.array[source_row * rb:(source_row + 1) * rb]
            return ("row",)
        if kind == "array":
            array = result[1]
            if output is not None and self._expected == (tuple(array.shape), array.dtype.name):
                rb = self._row_bytes
                if rb:
                    output.array[row * rb:(row + 1) * rb] = self._np.frombuffer(array, self._np.uint8)
                return ("row",)
            return ("array", array)
        return ("object", result[1])

    def _collate(self, entries: list[tuple], output: _Segment | None) -> Any:
        """One batch array when every row is in the output segment, else a list of per-sample results."""
        if output is not None and all(e[0] == "row" for e in entries):
            shape, dtype = self._expected
            return output.memory.view(0, [len(entries), *shape], dtype)
        out = []
        for i, e in enumerate(entries):
            if e[0] == "row":
                shape, dtype = self._expected
                out.append(output.memory.view(i * self._row_bytes, list(shape), dtype))
            else:
                out.append(e[1])
        return out

    def _finish_batch(self, st: _EpochState, b: int) -> None:
        st.deliver = b + 1
        output = st.outputs.pop(b, None)
        if output is not None:
            output.assigned = False  # reused once nobody holds the batch and no late write can come
        for j in range(self._starts[b], self._starts[b + 1]):
            st.tasks.pop(j, None)  # results still to come are dropped on arrival

    def _error_text(self, task: _Task, result: tuple, epoch: int) -> str:
        _, exc_type, text, trace, hint, _ = result
        first = (f"the Python transform ({self._chain.describe()}) raised {exc_type} on '{task.path}' (sample "
                 f"{task.sample}, epoch {epoch}): {text}")
        return first + (f"\n{hint}" if hint else "") + "\n\nWorker traceback:\n" + trace.rstrip()

    @staticmethod
    def _why(task: _Task, result: tuple) -> str:
        """Why a sample is bad, naming its file first (as the C++ decoder's messages do)."""
        _, exc_type, text = result[:3]
        return text if text.startswith(f"'{task.path}'") else f"'{task.path}': {exc_type}: {text}"

    def _record_skip(self, st: _EpochState, task: _Task, result: tuple) -> None:
        st.skipped += 1
        if task.path not in self._skipped_paths:  # logged once per file: a bad file is bad in every epoch
            self._skipped_paths.add(task.path)
            why = self._why(task, result)
            self.skipped_files.append(why)
            sys.stderr.write(f"hdmlp: skipping a bad sample (on_error=\"skip\"): {why}\n")

    def _fill_from_epoch_end(self, st: _EpochState, b: int, min_position: int, entries: list, ids: list,
                             bad: list) -> bool:
        """Fills the batch's next row with the last undelivered sample of the epoch at >= min_position."""
        while st.epoch_end - 1 >= min_position:
            st.epoch_end -= 1
            t = st.epoch_end
            st.tasks.pop(t, None)  # its own task, if it was sent, is not waited for
            if st.order is None:
                st.order = memoryview(self._job.rank_epoch_samples(self._rank, st.epoch)).tolist()
            sample = st.order[t]
            data = self._job.read_on_consumer(sample)
            row = len(entries)
            output = self._batch_output(st, b)
            task = self._dispatch(st, sample, data, output, row)
            while task.result is None:
                self._pump(None)
            if task.result[0] == "error":
                self._record_skip(st, task, task.result)
                bad.append(self._why(task, task.result))
                continue
            entries.append(self._place(task.result, self._batch_output(st, b), row, row))
            ids.append(sample)
            return True
        return False

    def _pad_with_repeat(self, st: _EpochState, b: int, from_position: int, entries: list, ids: list) -> None:
        """Row 0 of an otherwise empty batch: the epoch's last delivered sample, else a later good one, again."""
        if st.order is None:
            st.order = memoryview(self._job.rank_epoch_samples(self._rank, st.epoch)).tolist()
        candidates = ([st.last_good] if st.last_good >= 0 else []) + \
            [st.order[t] for t in range(from_position, st.epoch_end)]
        for sample in candidates:
            data = self._job.read_on_consumer(sample)
            task = self._dispatch(st, sample, data, self._batch_output(st, b), 0)
            while task.result is None:
                self._pump(None)
            if task.result[0] == "error":
                continue  # bad too: skipped and counted when its own turn comes
            entries.append(self._place(task.result, self._batch_output(st, b), 0, 0))
            ids.append(sample)
            st.padded += 1
            return

    # -- feeding the workers --------------------------------------------------
    def _pull_raw(self, st: _EpochState, block: bool) -> bool:
        """Takes the next raw batch from the job and queues its samples; False when none is ready yet."""
        b = st.raw_next
        try:
            raw = self._job.next_batch(None if block else 0.0)
        except OSError as e:  # a storage error, or another rank's: raised when the loop reaches batch b
            st.raw_errors[b] = e
            st.raw_next += 1
            return True
        if raw is False:
            return False
        if raw is None:
            raise RuntimeError(f"hdmlp: the job ended epoch {st.epoch} after {b} of {st.batches} batches")
        _, index, ids, _, samples = raw
        st.raw_next = index + 1
        start = self._starts[index]
        for k, (sample, data) in enumerate(zip(memoryview(ids).tolist(), samples)):
            st.waiting.append((start + k, sample, data))
        return True

    def _top_up(self, st: _EpochState) -> None:
        """Sends queued samples to the workers and takes raw batches that are ready, up to the prefetch window."""
        while True:
            self._dispatch_waiting(st)
            if st.waiting or st.raw_next >= st.batches or st.raw_next > st.deliver + self._prefetch_batches:
                return
            if not self._pull_raw(st, block=False):
                return

    def _dispatch_waiting(self, st: _EpochState) -> None:
        while st.waiting:
            if self._probe is not None:
                return  # the first result decides the batches' layout: wait for it
            position, sample, data = st.waiting[0]
            if position >= st.epoch_end:  # moved into a hole already
                st.waiting.popleft()
                continue
            worker = self._pick_worker()
            if worker is None:
                return
            b = self._batch_of(position)
            st.waiting.popleft()
            task = self._dispatch(st, sample, data, self._batch_output(st, b), position - self._starts[b], worker)
            st.tasks[position] = task
            if self._expected is None:
                self._probe = task

    def _batch_of(self, position: int) -> int:
        return bisect.bisect_right(self._starts, position) - 1

    def _pick_worker(self) -> _Worker | None:
        """The worker with the fewest queued tasks, or None when every queue is full."""
        best = min(self._workers, key=lambda w: len(w.queue))
        return best if len(best.queue) < _TASKS_PER_WORKER else None

    def _dispatch(self, st: _EpochState, sample: int, data: Any, output: _Segment | None, row: int,
                  worker: _Worker | None = None) -> _Task:
        """Copies a sample's bytes into a worker's input ring and sends it the task."""
        np = self._np
        n = len(data)
        while worker is None:
            worker = self._pick_worker()
            if worker is None:
                self._pump(None)
        ring = worker.ring
        in_segment: _Segment | None = None
        if n <= ring.memory.nbytes // 2:
            offset = worker.ring_alloc(n)
            while offset is None:  # full: its oldest tasks free it as they finish
                self._pump(None)
                offset = worker.ring_alloc(n)
            if n:
                ring.array[offset:offset + n] = np.frombuffer(data, np.uint8)
            segment_id = ring.id
        else:  # a file larger than half the ring gets a segment of its own
            in_segment = self._new_segment(n, "hdmlp-input")
            in_segment.array[:] = np.frombuffer(data, np.uint8)
            self._send_segment(worker, in_segment)
            self._dedicated[in_segment.id] = in_segment
            worker.ring_live.append((worker.ring_head, worker.ring_head))  # one ring entry per task
            offset, segment_id = 0, in_segment.id
        out = None
        if output is not None:
            self._send_segment(worker, output)
            output.pending += 1
            out = (output.id, row * self._row_bytes, self._expected[0], self._expected[1])
        tid = self._next_tid
        self._next_tid += 1
        path = self._job.path(sample)
        task = _Task(tid, st.generation, sample, path, in_segment, output)
        try:
            worker.conn.send(("tasks", [(tid, st.generation, segment_id, offset, n, out, sample, st.epoch, path)]))
        except (OSError, EOFError):  # BrokenPipeError: the worker died (killed, out of memory)
            self._worker_died(worker)
        if not worker.queue:
            worker.head_since = time.monotonic()
        worker.queue.append(task)
        return task

    # -- results ---------------------------------------------------------------
    def _wait_for(self, st: _EpochState, position: int) -> _Task:
        """The task of ``position`` once answered, feeding the workers meanwhile."""
        while True:
            self._top_up(st)
            task = st.tasks.get(position)
            if task is not None and task.result is not None:
                return task
            if task is None and not st.waiting and st.raw_next <= self._batch_of(position):
                self._pull_raw(st, block=True)
                continue
            more_raw = not st.waiting and st.raw_next < st.batches and \
                st.raw_next <= st.deliver + self._prefetch_batches
            self._pump(_POLL_S if more_raw else None)

    def _pump(self, timeout: float | None) -> None:
        """Waits up to ``timeout`` (None: until a reply comes) for the workers and handles what they sent."""
        conns = {w.conn: w for w in self._workers}
        sentinels = {w.process.sentinel: w for w in self._workers}
        busy = [w for w in self._workers if w.queue]
        if busy:  # wake up in time to see a transform that does not return
            due = min(w.head_since for w in busy) + self._task_timeout_s - time.monotonic()
            timeout = max(0.0, due) if timeout is None else max(0.0, min(timeout, due))
        ready = multiprocessing.connection.wait([*conns, *sentinels], timeout)
        for r in ready:
            w = conns.get(r)
            if w is not None:
                try:
                    while w.conn.poll():
                        self._on_reply(w, w.conn.recv())
                except (EOFError, OSError):
                    self._worker_died(w)
        for r in ready:
            w = sentinels.get(r)
            if w is not None and not w.process.is_alive():
                self._worker_died(w)
        now = time.monotonic()
        for w in self._workers:
            if w.queue and now - w.head_since > self._task_timeout_s:
                self._worker_hung(w, now - w.head_since)

    def _worker_hung(self, w: _Worker, seconds: float) -> None:
        """Ends a worker whose transform has not returned in time; the job is then unusable, as after a death."""
        w.process.kill()
        w.process.join(5.0)
        self._broken = (f"Python transform {self._chain.describe()} did not return within {self._task_timeout_s:g} s "
                        f"(timeout_s) on '{w.queue[0].path}' (sample {w.queue[0].sample}); its worker {w.index} "
                        f"(pid {w.process.pid}) was ended after {seconds:.1f} s")
        raise TimeoutError(f"hdmlp: {self._broken}; a transform must return for every sample: fix it, or give the "
                           f"Job a larger timeout_s; close the job")

    def _worker_died(self, w: _Worker) -> None:
        w.process.join(1.0)  # a pipe can break before the killed process is reaped
        code = w.process.exitcode
        if code is not None and code < 0:
            how = f"killed by signal {-code}: out of memory, or a crash in native code?"
        else:
            how = (f"exit code {code}; its traceback is above. A worker imports the training script again: "
                   "wrap the training code in `if __name__ == '__main__':`, as for any spawned worker process")
        doing = f" while transforming '{w.queue[0].path}'" if w.queue else ""
        self._broken = f"Python transform worker {w.index} (pid {w.process.pid}) ended ({how}){doing}"
        raise RuntimeError(f"hdmlp: {self._broken}; close the job")

    def _on_reply(self, w: _Worker, message: tuple) -> None:
        kind = message[0]
        task = w.queue.popleft()
        w.head_since = time.monotonic()
        if task.tid != message[1]:
            self._broken = f"Python transform worker {w.index} answered task {message[1]}, expected {task.tid}"
            raise RuntimeError(f"hdmlp: {self._broken}")
        w.ring_live.popleft()
        if task.in_segment is not None:
            self._forget(self._dedicated.pop(task.in_segment.id))
        if task.out_segment is not None:
            task.out_segment.pending -= 1
        if kind == "array":
            _, _, shape, dtype, nbytes, seconds = message
            segment = self._attach_result(w, task, max(1, nbytes), f"{dtype}{list(shape)}")
            result: tuple = ("array", segment.view(0, list(shape), dtype), seconds)
        elif kind == "object_fd":
            _, _, nbytes, seconds = message
            segment = self._attach_result(w, task, nbytes, "a pickled object")
            result = ("object", pickle.loads(memoryview(segment.view(0, [nbytes]))), seconds)
        elif kind == "object":
            result = ("object", pickle.loads(message[2]), message[3])
        elif kind == "row":
            result = ("row", message[2])
        elif kind == "error":
            result = ("error", *message[2:])
        else:  # "cancelled"
            result = ("cancelled",)
        if task is self._probe and kind != "cancelled":
            if kind == "array":
                self._expected = (tuple(result[1].shape), result[1].dtype.name)
                self._probe = None
                self._plan_batch_memory(task)
            elif kind == "object":
                self._expected = False
            self._probe = None  # after an error, the next sample probes
        elif task is self._probe:
            self._probe = None
        st = self._state
        if st is None or task.generation != st.generation:
            return  # an abandoned epoch's
        if kind != "cancelled":
            st.transform += result[-1]
        task.result = result

    # -- lifetime ----------------------------------------------------------------
    def close(self) -> None:
        """Stops and joins the workers; batches already handed out stay valid."""
        if self._closed:
            return
        self._closed = True
        self._finalizer()
        self._outputs.clear()
        self._dedicated.clear()
        self._state = None
