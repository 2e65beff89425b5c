"""This process's rank and world size when a launcher other than MPI gives them.

Under ``torchrun`` (or any launcher that sets ``RANK`` and ``WORLD_SIZE``) and
without an MPI launcher, hdmlp takes the rank and world size from there: from
an initialised ``torch.distributed`` when there is one (it wins), else from
the environment. Every rank then plans the same global order and reads its
own slice. With ``torch.distributed`` the ranks also use it at start-up (one
``all_gather_object``) to check that they agree on the job and to take rank
0's seed; without it they cannot talk, so a job on several ranks needs an
explicit ``seed``. See README.md ("Many ranks").
"""
from __future__ import annotations

import dataclasses
import os
import sys
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
