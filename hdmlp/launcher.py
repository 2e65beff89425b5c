"""This process's rank and world size when a launcher other than MPI gives them.

Under ``torchrun`` (or any launcher that sets ``RANK`` and ``WORLD_SIZE``) and
without an MPI launcher, hdmlp takes the rank and world size from there: from
an initialised ``torch.distributed`` when there is one (it wins), else from
the environment. Every rank then plans the same global order and reads its
own slice. With ``torch.distributed`` the ranks also use it at start-up (one
``all_gather_object``) to check that they agree on the job and to take rank
0's seed; without it they cannot talk, so a job on several ranks needs an
explicit ``seed``. See README.md ("Many ranks").

It also decides between MPI and such a launcher (:func:`resolve`): a process an MPI launcher
started uses MPI; MPI started by the application (``import mpi4py.MPI`` under PyTorch
Lightning's launcher or torchrun, a world of one) gives way to the launcher. And it checks that
a job's world agrees with what the environment announces (a job on 1 rank where
``WORLD_SIZE`` says 2 would read every sample on every process). See docs/launching.md.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import warnings
from collections.abc import Callable


@dataclasses.dataclass(frozen=True)
class LauncherWorld:
    """A launcher's view of this process.

    Attributes:
        rank: this process's rank, in ``[0, world_size)``.
        world_size: the number of processes.
        local_world_size: processes on this node (``LOCAL_WORLD_SIZE``), or 0 when unknown.
        source: where the numbers came from, for messages.
        gather: every rank's bytes from each rank's own (over ``torch.distributed``), or None
            when the ranks cannot talk.
    """

    rank: int
    world_size: int
    local_world_size: int
    source: str
    gather: Callable[[bytes], list[bytes]] | None


def _env_int(name: str, minimum: int) -> int:
    text = os.environ[name]
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"environment variable {name}={text!r} is not an integer (set by the launcher, e.g. "
                         "torchrun)") from None
    if value < minimum:
        raise ValueError(f"environment variable {name}={value} must be at least {minimum}")
    return value


def _torch_gather(mine: bytes) -> list[bytes]:
    import torch.distributed as dist
    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    return everyone


def detect() -> LauncherWorld | None:
    """The launcher's rank and world size, or None when nothing but MPI (or nothing) gives them."""
    local = _env_int("LOCAL_WORLD_SIZE", 1) if os.environ.get("LOCAL_WORLD_SIZE") else 0
    dist = sys.modules.get("torch.distributed")  # never import torch just to look
    if dist is not None and dist.is_available() and dist.is_initialized():
        return LauncherWorld(dist.get_rank(), dist.get_world_size(), local, "torch.distributed", _torch_gather)
    if os.environ.get("RANK") and os.environ.get("WORLD_SIZE"):
        rank, world = _env_int("RANK", 0), _env_int("WORLD_SIZE", 1)
        if rank >= world:
            raise ValueError(f"environment variables RANK={rank} and WORLD_SIZE={world}: the rank must be below the "
                             "world size")
        return LauncherWorld(rank, world, local, "the RANK/WORLD_SIZE environment variables", None)
    return None


# What an MPI launcher (mpirun, srun --mpi=pmix/pmi2) sets in each process it starts; inherited by
# any child process such a process starts itself (e.g. PyTorch Lightning's launcher).
MPI_LAUNCHER_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK")
# (rank, world size, local rank) variables of each MPI launcher, for comparing with another launcher's.
_MPI_WORLD_VARIABLES = (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
                        ("PMI_RANK", "PMI_SIZE", None), ("PMIX_RANK", None, None))
_FIX_MPI_AND_LAUNCHER = (
    "This happens when another launcher (PyTorch Lightning's, torchrun, mp.spawn) starts processes inside "
    "mpirun's job: they inherit mpirun's environment but are not its ranks. Either start the job with one "
    "launcher (mpirun alone, with the trainer taking its ranks from MPI: for Lightning `pip install mpi4py` so "
    "that it recognises mpirun, and Trainer(devices=<ranks per node>, num_nodes=<nodes>); or the trainer's own "
    "launcher without mpirun), or keep hdmlp out of MPI with HDMLP_NO_MPI=1 (it then follows the other "
    "launcher, without peer caches). See docs/launching.md")


def started_by_mpi() -> bool:
    """True when this process has an MPI launcher's environment (its own, or inherited from its parent)."""
    return any(os.environ.get(name) for name in MPI_LAUNCHER_VARIABLES)


def _optional_int(name: str | None) -> int | None:
    text = os.environ.get(name) if name else None
    try:
        return int(text) if text else None
    except ValueError:
        return None


def check_mpi_agrees(world: LauncherWorld) -> None:
    """Before MPI starts: ValueError when the MPI launcher's environment and ``world`` name different ranks.

    A child process started by another launcher inside mpirun's job would otherwise fail in MPI's own
    start-up (Open MPI: "orte_init failed") or read as a rank it is not.
    """
    for rank_var, size_var, local_var in _MPI_WORLD_VARIABLES:
        rank, size, local = _optional_int(rank_var), _optional_int(size_var), _optional_int(local_var)
        if rank is None and size is None:
            continue
        launcher_local = _optional_int("LOCAL_RANK")
        disagree = []
        if rank is not None and rank != world.rank:
            disagree.append(f"rank {rank} by {rank_var} but {world.rank} by {world.source}")
        if size is not None and size != world.world_size:
            disagree.append(f"world size {size} by {size_var} but {world.world_size} by {world.source}")
        if local is not None and launcher_local is not None and local != launcher_local:
            disagree.append(f"local rank {local} by {local_var} but {launcher_local} by LOCAL_RANK")
        if disagree:
            raise ValueError(f"this process has an MPI launcher's environment, but another launcher gives it other "
                             f"ranks: {'; '.join(disagree)}. " + _FIX_MPI_AND_LAUNCHER)
        return


def check_child_of_mpi_rank() -> None:
    """Before MPI starts, without another launcher's rank: ValueError for a process that inherited an MPI
    launcher's environment from its parent rank but was started by another launcher (its LOCAL_RANK
    differs from MPI's local rank)."""
    local, launcher_local = _optional_int("OMPI_COMM_WORLD_LOCAL_RANK"), _optional_int("LOCAL_RANK")
    if local is not None and launcher_local is not None and local != launcher_local:
        raise ValueError(f"this process has mpirun's environment (OMPI_COMM_WORLD_LOCAL_RANK={local}), but "
                         f"LOCAL_RANK={launcher_local} says another launcher started it. " + _FIX_MPI_AND_LAUNCHER)


def environment_world_sizes() -> list[tuple[str, int]]:
    """The world sizes above 1 that launchers' environment variables announce, by variable."""
    found = []
    for name in ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"):
        value = _optional_int(name)
        if value is not None and value > 1:
            found.append((name, value))
    return found


def single_rank_mismatch(found: list[tuple[str, int]]) -> tuple[str, bool] | None:
    """What to say about a job on 1 rank while ``found`` (from :func:`environment_world_sizes`) announces more:
    (message, is_error), or None when nothing does.

    ``WORLD_SIZE``, ``OMPI_COMM_WORLD_SIZE`` and ``PMI_SIZE`` are set by the launcher that started this
    process, so a single rank there reads the whole dataset on every rank: an error. ``SLURM_NTASKS`` alone is
    also set in a batch script's one process in an allocation of several tasks, where one rank may be meant: a
    warning.
    """
    if not found:
        return None
    names = ", ".join(f"{name}={value}" for name, value in found)
    strict = [name for name, _ in found if name != "SLURM_NTASKS"]
    hints = []
    if "WORLD_SIZE" in strict:
        hints.append("under torchrun set RANK too (torchrun does), or call torch.distributed.init_process_group() "
                     "before creating the Job; with PyTorch Lightning create the Jobs in "
                     "LightningDataModule.setup() or *_dataloader(), which run in every process after Lightning "
                     "started them, not in __init__; with Accelerate after Accelerator()")
    if "OMPI_COMM_WORLD_SIZE" in strict or "PMI_SIZE" in strict:
        hints.append("under mpirun/srun leave MPI on (unset HDMLP_NO_MPI)")
    if not strict:
        hints.append("if this process is one of the tasks srun started, start them with srun --mpi=pmix (MPI) or "
                     "give each its RANK and WORLD_SIZE")
    message = (f"this Job runs on 1 rank (it reads every sample in this process), but the environment says the job "
               f"has more processes ({names}): every process would read the whole dataset as rank 0 of 1. To "
               f"fix: {'; '.join(hints)}. If one rank is meant (e.g. an evaluation on one process), pass "
               f"single_process=True. See docs/launching.md")
    return message, bool(strict)


def resolve(single_process: bool, mpi_active: bool) -> tuple[LauncherWorld | None, bool]:
    """Which world a new Job joins: (the other launcher's world or None, whether to use MPI).

    ``mpi_active``: MPI is initialised in this process or its launcher's environment is there
    (``_core.in_mpi_job()``). Processes started by mpirun/srun use MPI (and another launcher's ranks must
    agree with it); MPI initialised in a process no MPI launcher started (mpi4py imported under Lightning's
    launcher or torchrun: a world of one) gives way to the launcher that started it.
    """
    if single_process:
        return None, False
    world = detect()
    if not mpi_active:
        return world, False
    if started_by_mpi():
        # LOCAL_RANK: a torch-style launcher (Lightning's, torchrun) started or set up this process too.
        # Where it names other ranks than MPI's, this is most likely a process that launcher started
        # inside mpirun's job, which MPI would refuse in its own start-up ("orte_init failed"): say so
        # first. Other disagreements are found by every rank together, in the job's start-up check.
        if os.environ.get("LOCAL_RANK"):
            if world is not None:
                check_mpi_agrees(world)
            else:
                check_child_of_mpi_rank()
        return world, True
    # MPI was initialised by the application (mpi4py) without an MPI launcher: a singleton world.
    return world, world is None


def check_single_rank_environment() -> None:
    """For a new job on 1 rank: ValueError, or a warning, when the environment announces more processes."""
    verdict = single_rank_mismatch(environment_world_sizes())
    if verdict is None:
        return
    message, is_error = verdict
    if is_error:
        raise ValueError(message)
    warnings.warn(f"hdmlp: {message}", RuntimeWarning, stacklevel=4)


def check_still_single_rank() -> None:
    """At a pass of a job made on 1 rank: RuntimeError when torch.distributed has since started on more."""
    world = detect()
    if world is not None and world.world_size > 1:
        raise RuntimeError(f"this Job was created for 1 rank (it reads every sample in this process), but "
                           f"{world.source} now says this process is rank {world.rank} of {world.world_size}: "
                           "the Job was made before the launcher started the processes, so every rank would "
                           "read the whole dataset. Create the Job after torch.distributed is initialised: "
                           "with PyTorch Lightning in LightningDataModule.setup() or the *_dataloader() "
                           "methods, not in __init__; with Accelerate after Accelerator(). If one rank is "
                           "meant, pass single_process=True. See docs/launching.md")
