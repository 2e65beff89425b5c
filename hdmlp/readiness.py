"""Data readiness: per epoch, who waited for whom, the training loop for data or the loader for the loop.

On a GPU node the question is whether the GPU waited for the loader (give the loader more
cores, a faster decode or a cache) or the loader for the GPU (it may give cores back:
``Job(cpu_budget=...)``). :meth:`hdmlp.Job.metrics` adds to each epoch, from the job's
counters:

``data_readiness``
    the share of the epoch's batches that were ready when the training loop asked for the next
    one (it waited under 1 ms: taking a finished batch costs microseconds). 1.0: the loop never
    waited for data. None before the epoch's first batch.
``consumer_wait_share``
    the training loop's time waiting for batches (``stall_seconds``) over its span of the
    epoch (``span_seconds``: from the epoch's start to its last batch).
``loader_idle_share``
    the staging workers' time neither reading nor transforming (``read_seconds`` and
    ``transform_seconds``, summed over workers) over workers x span: waiting for room in the
    staging buffer (ahead of the loop), or done. Work is counted in the epoch of the sample it
    is for, so where the workers run ahead into the next epoch the share leans towards idle in
    this epoch and towards busy in the next.
``waiting``
    ``"consumer"`` when the training loop's wait share is the larger (it waited for data: the
    loader is the limit), ``"loader"`` otherwise (the training loop, or the GPU behind it, is);
    None before the epoch's first batch.

With ``device=`` the consumer of the job is hdmlp's device feeder, a batch or two ahead of the
loop: its waits are the loop's, shifted by those batches.
"""
from __future__ import annotations

from typing import Any

__all__ = ["add_readiness"]


def add_readiness(epoch: dict[str, Any], workers: int) -> dict[str, Any]:
    """Adds the four figures above to one epoch's metrics (it needs ``batches``, ``ready_batches``,
    ``span_seconds``, ``stall_seconds``, ``read_seconds`` and ``transform_seconds``) and returns it."""
    batches, span = epoch.get("batches", 0), epoch.get("span_seconds", 0.0)
    if batches <= 0 or span <= 0:
        epoch.update(data_readiness=None, consumer_wait_share=None, loader_idle_share=None, waiting=None)
        return epoch
    consumer = min(epoch["stall_seconds"] / span, 1.0)
    busy = (epoch["read_seconds"] + epoch["transform_seconds"]) / (max(workers, 1) * span)
    loader = min(max(1.0 - busy, 0.0), 1.0)
    epoch.update(data_readiness=epoch["ready_batches"] / batches, consumer_wait_share=consumer,
                 loader_idle_share=loader, waiting="consumer" if consumer > loader else "loader")
    return epoch
