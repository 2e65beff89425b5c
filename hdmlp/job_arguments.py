"""A Job's arguments: each one checked, with an error that names it and says what to give.

:func:`parse` runs in ``Job.__init__`` before the C++ core starts, so that a bad argument
fails on the rank that got it with a TypeError, ValueError or FileNotFoundError (which
:mod:`hdmlp.live_jobs` passes on to the other ranks) rather than deep in the core or as a
hang. It returns the checked arguments as a frozen :class:`JobOptions` and touches no Job;
everything here may be called from any thread.
"""
from __future__ import annotations

import dataclasses
import importlib.resources
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from hdmlp import _core
from hdmlp import state as _state
from hdmlp.argument_checks import MAX_WAIT_SECONDS, int_in, path_argument, wait_seconds
from hdmlp.plan import SCHEMES, MAX_BATCH_SIZE, MAX_EPOCHS

# The core's tables (source.h): a new format or option is known here without a line of its own.
_SOURCES = tuple(_core.source_kinds())
_SOURCE_OPTIONS = tuple(_core.source_option_names())

# `epochs` left out (an error) is not `epochs=None` (an unbounded job).
REQUIRED: Any = type("_Required", (), {"__repr__": lambda self: "<required>"})()

def default_config_path() -> str:
    """Path of the configuration used when ``config_path`` is None.

    It sizes itself for the machine it runs on (a share of the available
    memory, a cache folder under the user's cache directory); see
    ``docs/config.md``.
    """
    return str(importlib.resources.files("hdmlp") / "configs" / "default.cfg")


@dataclasses.dataclass(frozen=True)
class ThrottledStorage:
    """Makes the dataset's storage slow or failing, for tests and benchmarks.

    Attributes:
        latency_s: seconds added to every file open.
        mbps: per-reader read bandwidth in MB/s (0: unlimited).
        failing_paths: files whose reads fail with OSError.
    """

    latency_s: float = 0.0
    mbps: float = 0.0
    failing_paths: Sequence[str] = ()

    def __post_init__(self) -> None:
        for name in ("latency_s", "mbps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0 or (name == "latency_s" and value > MAX_WAIT_SECONDS):
                raise ValueError(f"ThrottledStorage.{name} must be a finite number >= 0, got {value!r}")
        if isinstance(self.failing_paths, (str, bytes)):
            raise TypeError("ThrottledStorage.failing_paths must be a list of paths, not one path")
        for p in self.failing_paths:
            path_argument("ThrottledStorage.failing_paths", p)


@dataclasses.dataclass(frozen=True)
class JobOptions:
    """A Job's arguments, checked and normalised by :func:`parse` (see :class:`hdmlp.Job` for each).

    ``epoch_count`` is the epochs the core plans (``epochs``, or the most it plans for
    ``epochs=None``); ``resume`` is the state to resume from (an ``hdmlp._core.JobState``);
    ``world`` the launcher's view of the ranks (:func:`hdmlp.launcher.resolve`) and ``use_mpi``
    whether the job joins an MPI job.
    """

    dataset_path: str
    batch_size: int | None
    batch_size_per_rank: int | None
    epochs: int | None
    epoch_count: int
    distr_scheme: str
    drop_last_batch: bool
    shuffle: bool
    transforms: Any
    on_error: str
    seed: int | None
    config_path: str
    exchange_fraction: float
    timeout_s: float
    read_timeout_s: float | None
    storage: ThrottledStorage
    index_cache: bool
    pin_memory: bool | None
    num_workers: int | None
    cpu_budget: int | None
    source: str | None
    source_options: Mapping[str, str]
    python_workers: int | None
    python_start_method: str
    resume: Any
    start_epoch: int
    single_process: bool
    world: Any
    use_mpi: bool
    device: Any
    handoff: str | None


def parse(dataset_path: Any, batch_size: Any, epochs: Any, distr_scheme: Any, drop_last_batch: Any, transforms: Any,
          seed: Any, config_path: Any, exchange_fraction: Any, timeout_s: Any, read_timeout_s: Any, storage: Any,
          index_cache: Any, on_error: Any, pin_memory: Any, batch_size_per_rank: Any, shuffle: Any, num_workers: Any,
          source: Any, source_options: Any, python_workers: Any, python_start_method: Any, resume: Any,
          start_epoch: Any, single_process: bool, world: Any, use_mpi: bool, device: Any = None,
          handoff: Any = None, cpu_budget: Any = None) -> JobOptions:
    """Checks every argument of a Job; raises TypeError / ValueError / FileNotFoundError.

    The transform chain's own checks (its split, device decoding) are :func:`hdmlp.chain_plan.plan_chain`'s.
    """
    path = path_argument("dataset_path", dataset_path)
    _check_batch_size(batch_size, batch_size_per_rank)
    if epochs is REQUIRED:
        raise TypeError("epochs is required: the number of epochs the job will run (None: no limit, for an "
                        "evaluation loader that makes any number of passes)")
    epochs = None if epochs is None else int_in("epochs", epochs, 1, MAX_EPOCHS, "2**31 - 1")
    epoch_count = MAX_EPOCHS if epochs is None else epochs  # an unbounded job: the most epochs the core plans
    if not isinstance(shuffle, bool):
        raise TypeError(f"shuffle must be a bool, got {shuffle!r}")
    if num_workers is not None:
        int_in("num_workers", num_workers, 1, 1024)
    if not isinstance(distr_scheme, str) or distr_scheme not in SCHEMES:
        raise ValueError(f"unknown distr_scheme {distr_scheme!r}: supported schemes are {', '.join(map(repr, SCHEMES))}")
    if not isinstance(drop_last_batch, bool):
        raise TypeError(f"drop_last_batch must be a bool, got {drop_last_batch!r}")
    _check_python_workers(python_workers, python_start_method)
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    source_options = _checked_source(source, source_options)
    if pin_memory is not None and not isinstance(pin_memory, bool):
        raise TypeError(f"pin_memory must be a bool or None, got {pin_memory!r}")
    if seed is not None:
        int_in("seed", seed, 0, 2**63 - 1, "2**63 - 1")
    config_path = path_argument("config_path", config_path) if config_path is not None else default_config_path()
    if not os.path.exists(config_path):  # a folder or FIFO there: the core says what is wrong
        raise FileNotFoundError(f"configuration file '{config_path}' does not exist")
    if isinstance(exchange_fraction, bool) or not isinstance(exchange_fraction, (int, float)) \
            or not 0.0 <= exchange_fraction <= 1.0:
        raise ValueError(f"exchange_fraction must be a number in [0, 1], got {exchange_fraction!r}")
    timeout_s = wait_seconds("timeout_s", timeout_s)
    read_timeout_s = None if read_timeout_s is None else wait_seconds("read_timeout_s", read_timeout_s)
    if storage is not None and not isinstance(storage, ThrottledStorage):
        raise TypeError(f"storage must be an hdmlp.ThrottledStorage or None, got {type(storage).__name__}")
    if not isinstance(index_cache, bool):
        raise TypeError(f"index_cache must be a bool, got {index_cache!r}")
    resume_state = _state.from_dict(resume) if resume is not None else None
    int_in("start_epoch", start_epoch, 0, epoch_count, f"{epoch_count} (the job's epochs)")
    if world is not None and world.world_size > 1 and world.gather is None and seed is None \
            and resume is None and not use_mpi:
        raise ValueError(f"seed is None, but this job runs on {world.world_size} ranks (from {world.source}) "
                         "without MPI or an initialised torch.distributed, so the ranks cannot agree on a drawn "
                         "seed: pass the same seed=... on every rank, or call "
                         "torch.distributed.init_process_group() before creating the Job")
    return JobOptions(path, batch_size, batch_size_per_rank, epochs, epoch_count, distr_scheme, drop_last_batch,
                      shuffle, transforms, on_error, seed, config_path, float(exchange_fraction), timeout_s,
                      read_timeout_s, storage or ThrottledStorage(), index_cache, pin_memory, num_workers, cpu_budget,
                      source, source_options, python_workers, python_start_method, resume_state, start_epoch,
                      single_process, world, use_mpi, device, handoff)


def _check_batch_size(batch_size: Any, batch_size_per_rank: Any) -> None:
    if (batch_size is None) == (batch_size_per_rank is None):
        raise ValueError("give exactly one of batch_size (the global batch, over all ranks) and "
                         f"batch_size_per_rank, got batch_size={batch_size!r} and "
                         f"batch_size_per_rank={batch_size_per_rank!r}")
    if batch_size is not None:
        int_in("batch_size", batch_size, 1, MAX_BATCH_SIZE, "2**62")
    if batch_size_per_rank is not None:
        int_in("batch_size_per_rank", batch_size_per_rank, 1, MAX_BATCH_SIZE, "2**62")


def _check_python_workers(python_workers: Any, python_start_method: Any) -> None:
    if python_workers is not None:
        int_in("python_workers", python_workers, 1, 1024)
        from hdmlp.python_chain import check_python_workers
        check_python_workers(python_workers)
    if python_start_method not in ("spawn", "forkserver"):
        raise ValueError(f"python_start_method must be 'spawn' or 'forkserver', got {python_start_method!r}: "
                         "hdmlp never forks a process that runs its C++ threads")


def _checked_source(source: Any, source_options: Any) -> dict[str, str]:
    """The source's options, each a known one with a str value."""
    if source is not None and source not in _SOURCES:
        raise ValueError(f"unknown source {source!r}: supported sources are {', '.join(map(repr, _SOURCES))} "
                         "(or None to pick it from the path)")
    options = dict(source_options or {})
    for key, value in options.items():
        if key not in _SOURCE_OPTIONS:
            raise ValueError(f"unknown source option {key!r}: the options are {', '.join(_SOURCE_OPTIONS)}")
        if not isinstance(value, str):
            raise TypeError(f"source option {key} must be a str, got {type(value).__name__} {value!r}")
    return options
