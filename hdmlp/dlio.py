"""hdmlp as a data loader of the DLIO benchmark (``dlio-benchmark``, MLPerf Storage's engine).

DLIO loads a data loader class named in its workload configuration. Two settings of a DLIO
workload (its own files, e.g. ``unet3d_h100``) make it run on hdmlp; nothing else changes::

    dlio_benchmark workload=unet3d_h100 \\
        ++workload.reader.data_loader_classname=hdmlp.dlio.HDMLPDataLoader \\
        ++workload.reader.data_loader_sampler=index

(``data_loader_sampler`` is required by DLIO for every custom loader; ``index`` keeps DLIO from
shuffling its file list, which hdmlp does not read.) docs/dlio.md has the whole story.

What is honoured:

- the files DLIO generated and listed (``file_list_train`` / ``file_list_eval``, sorted): TFRecord
  shards (each record a sample, as DLIO counts them), ``.npz`` and ``.npy`` files (one sample each;
  delivered as their bytes, since DLIO's files differ in shape);
- ``reader.batch_size`` (per rank, as DLIO counts it: each step takes ``batch_size`` samples on every
  rank), ``reader.batch_size_eval``, ``train.epochs``, ``reader.read_threads`` (hdmlp's staging
  threads), ``reader.sample_shuffle`` (``off``: every epoch in file order; ``seed``: the order is a
  function of ``train.seed``; ``random``: a drawn seed), and the ranks of ``mpirun`` (hdmlp's Job
  joins the MPI job DLIO started; each sample is read once per epoch across the ranks, and a rank may
  take a sample from a peer's cache instead of the file system);
- ``train.computation_time``: DLIO's own loop sleeps it after each batch, as with its own loaders.

hdmlp's own settings come from the environment, since DLIO keeps only the keys it knows:
``HDMLP_DLIO_CONFIG`` (a storage-class configuration file, docs/config.md; default: hdmlp's default),
``HDMLP_DLIO_OPTIONS`` (a JSON object of further :class:`hdmlp.Job` keyword arguments, e.g.
``{"exchange_fraction": 0.5}``). Each rank writes ``hdmlp_metrics_rank<R>.json`` (``job.metrics()``:
bytes read from the file system, from peers, stalls) into DLIO's output folder when training ends.

This module imports DLIO; it is loaded by DLIO, in DLIO's environment (``pip install 'hdmlp[dlio]'``).
"""
from __future__ import annotations

import json
import logging
import os
from typing import Any, Iterator

from dlio_benchmark.common.enumerations import DatasetType, DataLoaderType, FormatType, Shuffle
from dlio_benchmark.data_loader.base_data_loader import BaseDataLoader

import hdmlp

__all__ = ["HDMLPDataLoader", "job_arguments"]

# DLIO's formats hdmlp reads, and how.
_SOURCES = {
    FormatType.TFRECORD: ("tfrecord", {}),
    FormatType.NPZ: ("npy", {"npy_as": "bytes"}),
    FormatType.NPY: ("npy", {"npy_as": "bytes"}),
}


def job_arguments(args: Any, dataset_type: DatasetType, files: list[str]) -> dict[str, Any]:
    """The :class:`hdmlp.Job` keyword arguments for DLIO's configuration ``args`` (its ConfigArguments)
    and one of its datasets; raises ValueError for a format or layout hdmlp cannot serve."""
    fmt = args.format
    if fmt not in _SOURCES:
        raise ValueError(f"hdmlp.dlio: DLIO's format '{fmt}' is not one hdmlp reads here; it reads "
                         f"{', '.join(str(f) for f in _SOURCES)} (workload.dataset.format)")
    source, options = _SOURCES[fmt]
    if fmt != FormatType.TFRECORD and args.num_samples_per_file != 1:
        raise ValueError(f"hdmlp.dlio: each .{fmt} file is one sample for hdmlp, but the workload sets "
                         f"dataset.num_samples_per_file={args.num_samples_per_file}; set it to 1")
    if not files:
        raise ValueError(f"hdmlp.dlio: DLIO lists no {dataset_type} files under {args.data_folder}")
    train = dataset_type is DatasetType.TRAIN
    shuffle = args.sample_shuffle is not Shuffle.OFF
    kwargs: dict[str, Any] = {
        "dataset_path": ",".join(sorted(files)),
        "batch_size_per_rank": args.batch_size if train else args.batch_size_eval,
        "epochs": args.epochs if train else 1,
        # DLIO takes floor(samples / batch / ranks) steps per epoch and leaves the pass there. hdmlp keeps
        # the last, partial global batch all the same, so that every sample has a reader in the first
        # epoch: the rank that caches it then (cache_hierarchy.h), which makes the job read each sample
        # from the file system once when the nodes' memory holds the dataset together.
        "drop_last_batch": False,
        "shuffle": shuffle,
        "seed": args.seed if args.sample_shuffle is Shuffle.SEED or not shuffle else None,
        "num_workers": max(int(args.read_threads), 1),
        "source": source,
        "source_options": dict(options),
    }
    config = os.environ.get("HDMLP_DLIO_CONFIG")
    if config:
        kwargs["config_path"] = config
    extra = os.environ.get("HDMLP_DLIO_OPTIONS")
    if extra:
        more = json.loads(extra)
        if not isinstance(more, dict):
            raise ValueError(f"HDMLP_DLIO_OPTIONS must be a JSON object of hdmlp.Job arguments, got {extra!r}")
        kwargs.update(more)
    return kwargs


class HDMLPDataLoader(BaseDataLoader):
    """DLIO's data loader interface (``read``, ``next``, ``finalize``) over an :class:`hdmlp.Job`.

    DLIO makes one loader per dataset (train, eval) when it starts, calls ``read`` once, then ``next``
    for every epoch (or evaluation) and ``finalize`` after it. The training Job is made in ``read``
    and closed after the last epoch, before DLIO finalises MPI; an evaluation gets a Job of its own
    for each pass."""

    def __init__(self, format_type, dataset_type, epoch):
        super().__init__(format_type, dataset_type, epoch, DataLoaderType.CUSTOM)
        self._job: hdmlp.Job | None = None
        self._kwargs: dict[str, Any] | None = None
        self._passes = 0  # next() calls so far: DLIO leaves a pass's generator once it has its steps

    def read(self) -> None:
        train = self.dataset_type is DatasetType.TRAIN
        files = self._args.file_list_train if train else self._args.file_list_eval
        self._kwargs = job_arguments(self._args, self.dataset_type, list(files))
        if train:
            self._job = self._open()

    def _open(self) -> hdmlp.Job:
        assert self._kwargs is not None
        kwargs = dict(self._kwargs)
        job = hdmlp.Job(kwargs.pop("dataset_path"), **kwargs)
        if job.rank == 0:
            logging.info(f"hdmlp.dlio: {job.source} source, {len(job.samples)} samples, {job.world_size} rank(s), "
                         f"{job.batches_per_epoch} steps per epoch of {self._kwargs['batch_size_per_rank']} "
                         "samples per rank")
        return job

    def next(self) -> Iterator[Any]:
        if self.dataset_type is DatasetType.TRAIN:
            if self._job is None:
                raise RuntimeError("hdmlp.dlio: next() before read(), or after the last epoch")
            epoch = self._passes
            self._passes += 1
            for _ids, _labels, samples in self._job.epoch_batches(epoch):
                yield samples
            return
        job = self._open()  # one evaluation pass
        try:
            for _ids, _labels, samples in job.epoch_batches(0):
                yield samples
        finally:
            job.close()

    def finalize(self) -> None:
        # Called after every epoch; after the last one the Job goes, while MPI is still up.
        if self._job is not None and self._passes >= self._args.epochs:
            self.close()

    def close(self) -> None:
        if self._job is None:
            return
        job, self._job = self._job, None
        try:
            folder = self._args.output_folder
            if folder:
                os.makedirs(folder, exist_ok=True)
                with open(os.path.join(folder, f"hdmlp_metrics_rank{job.rank}.json"), "w") as f:
                    json.dump(job.metrics(), f, default=str)
        finally:
            job.close()
