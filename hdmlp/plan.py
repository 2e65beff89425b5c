"""The access order of a job, without loading anything: :class:`AccessPlan`.

The whole randomised order of a job (which samples each rank reads, in which epoch and global
batch) is a pure function of the dataset's size, the batch size, the epochs, the seed, the
ranks and the scheme. This module asks the C++ plan (``cpp/include/hdmlp/plan/``) for it; the
:class:`hdmlp.Job` uses the same plan to load. Thread-safety: an AccessPlan is immutable.
"""
from __future__ import annotations


from hdmlp import _core
from hdmlp.argument_checks import int_in

__all__ = ["AccessPlan", "MAX_BATCH_SIZE", "MAX_EPOCHS", "MAX_SAMPLES"]

SCHEMES = ("uniform", "local", "partial_local")

# Limits of the integer arguments (the C++ core's types, with room to spare).
MAX_BATCH_SIZE = 2**62
MAX_EPOCHS = 2**31 - 1
MAX_SAMPLES = 2**62


class AccessPlan:
    """The access order of a job, computed without loading anything.

    Every rank can ask for any rank's samples of any epoch; the result is a
    pure function of the arguments (see ``docs/architecture.md``).
    """

    def __init__(self, num_samples: int, batch_size: int, epochs: int, seed: int,
                 drop_last_batch: bool = False, world_size: int = 1, distr_scheme: str = "uniform",
                 exchange_fraction: float = 0.1, shuffle: bool = True) -> None:
        int_in("num_samples", num_samples, 1, MAX_SAMPLES, "2**62")
        int_in("batch_size", batch_size, 1, MAX_BATCH_SIZE, "2**62")
        int_in("epochs", epochs, 1, MAX_EPOCHS, "2**31 - 1")
        int_in("seed", seed, 0, 2**64 - 1, "2**64 - 1")
        int_in("world_size", world_size, 1, 2**31 - 1, "2**31 - 1")
        if not isinstance(drop_last_batch, bool):
            raise TypeError(f"drop_last_batch must be a bool, got {drop_last_batch!r}")
        if not isinstance(shuffle, bool):
            raise TypeError(f"shuffle must be a bool, got {shuffle!r}")
        if not isinstance(distr_scheme, str) or distr_scheme not in SCHEMES:
            raise ValueError(f"unknown distr_scheme {distr_scheme!r}: supported schemes are "
                             f"{', '.join(map(repr, SCHEMES))}")
        if isinstance(exchange_fraction, bool) or not isinstance(exchange_fraction, (int, float)) \
                or not 0.0 <= exchange_fraction <= 1.0:
            raise ValueError(f"exchange_fraction must be a number in [0, 1], got {exchange_fraction!r}")
        self.epochs = epochs
        self.world_size = world_size
        self._plan = _core.AccessPlan(num_samples, batch_size, epochs, seed, drop_last_batch, world_size, distr_scheme,
                                      float(exchange_fraction), shuffle)

    def batches_per_epoch(self) -> int:
        """Global batches per epoch (the same on every rank)."""
        return self._plan.batches_per_epoch()

    def global_batch(self, batch: int) -> tuple[int, int]:
        """Positions ``[begin, end)`` of the epoch's global order that global batch ``batch`` holds."""
        int_in("batch", batch, 0, self.batches_per_epoch() - 1)
        return self._plan.global_batch_range(batch)

    def rank_slice(self, batch: int, rank: int = 0) -> tuple[int, int]:
        """Positions ``[begin, end)`` of global batch ``batch`` that ``rank`` reads."""
        int_in("batch", batch, 0, self.batches_per_epoch() - 1)
        int_in("rank", rank, 0, self.world_size - 1)
        return self._plan.rank_slice(rank, batch)

    def rank_epoch_size(self, rank: int = 0) -> int:
        """Samples ``rank`` reads per epoch."""
        int_in("rank", rank, 0, self.world_size - 1)
        return self._plan.rank_epoch_size(rank)

    def samples(self, epoch: int, rank: int = 0) -> list[int]:
        """Sample ids rank ``rank`` reads in ``epoch``, in order."""
        int_in("epoch", epoch, 0, self.epochs - 1)
        int_in("rank", rank, 0, self.world_size - 1)
        return memoryview(self._plan.rank_epoch_samples(rank, epoch)).tolist()

    def local_batch_size(self, batch: int, rank: int = 0) -> int:
        """Size of rank's part of global batch ``batch``."""
        int_in("batch", batch, 0, self.batches_per_epoch() - 1)
        int_in("rank", rank, 0, self.world_size - 1)
        return self._plan.local_batch_size(rank, batch)
