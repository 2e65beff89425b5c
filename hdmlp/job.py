"""The Job: one training job's data loading on this rank.

A Job scans the dataset, derives the access plan from the seed, and starts
C++ staging workers that read this rank's samples in plan order ahead of the
training loop. Use it through :mod:`hdmlp.torch` or iterate it directly::

    with hdmlp.Job("/data/imagenet/train", batch_size=256, epochs=90) as job:
        for epoch in range(job.epochs):
            for ids, labels, samples in job.epoch_batches(epoch):
                ...

Epochs are numbered from 0. Starting an epoch skips whatever is left of the
previous one, without reading it. ``job.state_dict()`` is the job's position
(see :mod:`hdmlp.state`); ``hdmlp.Job(..., resume=state)`` goes on from there.
"""
from __future__ import annotations

import dataclasses
import importlib.resources
import json
import os
import threading
import warnings
import weakref
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from hdmlp import _core
from hdmlp import launcher as _launcher
from hdmlp import live_jobs as _live
from hdmlp import mpi as _mpi
from hdmlp import state as _state
from hdmlp.pinned_memory import cuda_host_allocator
from hdmlp.main_guard import check_not_bootstrapping
from hdmlp.argument_checks import int_in, path_argument
from hdmlp.readiness import add_readiness
from hdmlp.version import __version__
from hdmlp.chain_plan import plan_chain
from hdmlp.job_arguments import REQUIRED, ThrottledStorage, parse
from hdmlp.job_arguments import default_config_path  # noqa: F401 (re-exported: hdmlp.default_config_path)

if TYPE_CHECKING:
    from hdmlp.batches import Batch

ConfigError = _core.ConfigError

# Seconds per epoch that HDMLPDataLoader measures on the Python side (Job.metrics()).
_LOOP_TIMERS = ("next_batch_seconds", "python_seconds", "consumer_seconds")


def init_mpi() -> None:
    """Initialises MPI now, when this process runs under an MPI launcher.

    A Job does this itself; call it earlier when a rank has a long set-up
    before its Job, so that the other ranks' start-up checks can time out
    on it (MPI's own initialisation waits for every rank without a limit).
    """
    check_not_bootstrapping("hdmlp.init_mpi() was called")
    _core.init_mpi()


def example_configs() -> dict[str, str]:
    """The example configurations installed with hdmlp, by name (``"laptop"``, ``"gpu_node_nvme"``, ...).

    Pass one as ``config_path``, or copy it and put in your machine's numbers
    (``hdmlp calibrate`` measures them); every key is in docs/config.md.
    """
    folder = importlib.resources.files("hdmlp") / "configs"
    return {entry.name[:-len(".cfg")]: str(entry) for entry in sorted(folder.iterdir(), key=lambda e: e.name)
            if entry.name.endswith(".cfg")}


def build_info() -> dict[str, str]:
    """hdmlp's version, the MPI it loaded or would load and why (``mpi``), the MPI ABIs it has modules for
    (``mpi_abis``) and what it was compiled against (libjpeg-turbo, OpenCV, ...). See :mod:`hdmlp.mpi`."""
    return {"hdmlp": __version__, "mpi": _mpi.describe(), **dict(_core.build_info())}


def user_cache_dir() -> str:
    """hdmlp's folder in the user's cache directory ($HDMLP_CACHE_DIR overrides)."""
    return _core.user_cache_dir()


def _core_property(name: str, doc: str) -> property:
    """A read-only Job property that the opened core (``_core.Job``) answers: its attribute ``name``."""
    return property(lambda self: getattr(self._job, name), doc=doc)


_warned_without_peers = False


def _warn_without_peers(job: "Job", why: str) -> None:
    """Once per process: several ranks without MPI read without each other's caches."""
    global _warned_without_peers
    if job.world_size > 1 and job.transport == "none" and not _warned_without_peers:
        _warned_without_peers = True
        warnings.warn(f"hdmlp: peers' caches are off: no MPI ({why}; rank {job.rank} of "
                      f"{job.world_size}); each rank reads its own samples from the dataset's storage and caches "
                      "them itself. Start the job with mpirun or srun --mpi=pmix/pmi2 for peers' caches",
                      RuntimeWarning, stacklevel=3)


class Job:
    """One job's data loading on this rank.

    Args:
        dataset_path: the dataset: a folder ``root/<class>/<file>`` as torchvision's ImageFolder
            reads it, an hdmlp pack (made by ``hdmlp pack``), an HDF5 file or a folder of them,
            or WebDataset tar shards (a ``.tar``, a comma-separated list, a brace pattern
            ``"shard-{000..009}.tar"`` or a folder of ``.tar`` files); see docs/formats.md.
        batch_size: samples per global batch, over all ranks (each rank reads an even share:
            per-rank batches differ by at most one sample). Give this or ``batch_size_per_rank``.
        epochs: number of epochs the job will run (required). ``None``: no limit, as an evaluation
            loader needs that makes any number of passes (PyTorch Lightning's sanity check, an extra
            validation): ``job.epochs`` is then None. With ``shuffle=False`` every pass reads the same
            order. The caches are planned over a horizon of 2**24 reads (as for a long bounded job:
            about a second at creation).
        distr_scheme: how samples are spread over ranks and epochs: ``"uniform"`` (a true
            global shuffle), ``"local"`` (each rank shuffles its own fixed shard) or
            ``"partial_local"`` (each epoch a share ``exchange_fraction`` of every shard moves
            to random ranks); see docs/architecture.md.
        drop_last_batch: drop the last, incomplete batch of each epoch, as PyTorch does. Without
            it every sample is read once per epoch; a last global batch too small to give every rank
            a sample joins the one before it, so every rank takes ``len(loader)`` steps.
        transforms: a list of :mod:`hdmlp.transforms` objects (e.g. ``[ImgDecode(),
            RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(), Normalize(mean, std)]``)
            run in C++ by the staging workers, which write each result into its row of the
            batch: a batch is then ``(images, labels)`` with ``images`` one ``[B, C, H, W]``
            float32 (or uint8) array. None: each sample is its file's exact bytes. An
            impossible chain raises ValueError here. See docs/transforms.md. A Python
            callable, or a chain of hdmlp ops that ends in callables (``[ImgDecode(), ToPIL(),
            torchvision_compose]``), runs in ``python_workers`` worker processes fed through
            shared memory (:mod:`hdmlp.python_transforms`): the first callable gets the file's
            bytes (a read-only uint8 numpy array), or the image of the C++ ops before it (an
            ``[H, W, 3]`` uint8 numpy array, or what ``ToTensor``/``ToUint8`` make).
        on_error: what a bad image (corrupt, truncated, empty, unsupported, absurdly large, or
            of another size than the others for a chain without a fixed size) does, with
            transforms: ``"raise"`` (default) raises ValueError naming the file when the
            training loop reaches it, and every other rank raises too; ``"skip"`` leaves it
            out, logs it once and counts it in ``metrics()["skipped_samples"]``; its place is
            taken by the last undelivered sample of this rank's epoch while every later batch
            keeps at least one sample (otherwise the batch is delivered shorter), so every rank
            still takes every step; a batch with no good sample left repeats a good sample of
            the epoch (as DistributedSampler pads; counted in ``metrics()["padded_samples"]``),
            and only a rank whose epoch has no good sample raises ValueError naming the rank,
            epoch and files (the other ranks raise too). A tar shard cut short is an error
            naming it and the offset with ``"raise"``; with ``"skip"`` its whole samples before
            the cut are used, and the cut is counted and logged once.
        pin_memory: allocate the batch buffers page-locked (CUDA pinned memory) so that
            ``.cuda(non_blocking=True)`` copies asynchronously; needs torch with a CUDA
            device (otherwise a warning, and ordinary memory). None (default): on with a CUDA
            ``device`` and a C++ chain, else off.
        device: deliver batches as tensors on this device (``"cuda:0"``, ``"cuda"``, or ``"cpu"``
            for the same code path without a GPU): :meth:`batches` and
            :class:`hdmlp.torch.HDMLPDataLoader` copy each batch on a side CUDA stream ahead of
            the training loop (see :mod:`hdmlp.device` and docs/gpu.md). A C++ chain that ends
            in ``ToTensor()`` or ``ToTensor(), Normalize(mean, std)`` then stops at 8-bit images
            in the workers and the device computes the rest (the same values within float32
            rounding); with ``threads = "auto"`` the staging workers leave one core to the
            training process. Needs torch.
        handoff: with a device, what the workers hand over: ``"uint8"`` (the default where the
            chain allows it, see ``device``) or ``"float"`` (the chain as written, run on the CPU).
        seed: the seed of the access order; None draws one (see ``job.seed``).
        config_path: a libconfig++ file describing the storage classes; None uses
            :func:`default_config_path`.
        exchange_fraction: the share Q in [0, 1] of ``"partial_local"`` (0: local, 1: global).
        timeout_s: how long a rank waits for another (start-up checks, peer requests) before
            raising an error naming it (finite, > 0).
        read_timeout_s: how long one read of the dataset's storage may take before the training
            loop gets an OSError naming the file (a hung network mount); None: ``timeout_s``.
        storage: a :class:`ThrottledStorage` to slow down or break the dataset's storage.
        index_cache: keep the dataset's scan in the user cache directory.
        batch_size_per_rank: samples per rank and step, instead of ``batch_size`` (the global
            batch is then this times the world size), as a script with a per-process
            ``DataLoader(batch_size=...)`` gives it.
        shuffle: False reads every epoch in index order (for validation): the uniform scheme cuts
            it into global batches and rank slices as with a shuffle; local and partial_local give
            every rank a contiguous block. Prefetching and caching work as for training.
        num_workers: the staging workers (threads that read and transform ahead of the loop),
            instead of the configuration's ``threads`` of storage class 0.
        cpu_budget: the cores hdmlp may use on this rank: its staging workers, which decode and
            transform (not with ``num_workers``). None: the configuration's ``threads``; with
            ``"auto"`` and a C++ chain one CPU is left to the training thread where batches go to
            a GPU (``device=``, or a machine with a GPU driver). :mod:`hdmlp.cpu_budget`,
            docs/gpu.md.
        source: the dataset's format, ``"folder"``, ``"pack"``, ``"hdf5"``, ``"tar"``,
            ``"tfrecord"`` or ``"npy"`` (.npy/.npz files); None picks it from what
            ``dataset_path`` is.
        source_options: the format's options: ``hdf5_samples`` (the samples' dataset, default
            ``"data"``), ``hdf5_labels`` (``"label"``), ``tar_sample_ext`` (the member holding
            the sample; default: the first image member; ``"jpg;png"`` tries each),
            ``tar_label_ext`` (``"cls"``); ``tfrecord_label`` (an int64_list feature holding
            the label), ``tfrecord_labels_file`` (one label per record), ``tfrecord_sample`` (a
            bytes_list feature delivered instead of the whole record), ``tfrecord_index`` (a
            folder of ``.idx`` files); ``npy_as`` (``"array"`` or ``"bytes"``), ``npz_member``
            and ``npz_label_member`` (docs/formats.md).
        python_workers: the worker processes of a Python transform (default: the CPUs this
            process may use, shared between the ranks of a node that do not pin their CPUs).
        python_start_method: ``"forkserver"`` (default: a clean server process imports the
            transforms' modules once and forks the workers) or ``"spawn"`` (each worker imports
            them); hdmlp never forks the process that runs its C++ threads.
        resume: a state from :meth:`state_dict` (of this job's dataset, global batch size,
            scheme, shuffle and drop-last; the seed is the state's): the job starts at the next
            global batch after it, on any number of ranks (docs/resume.md). Every rank must give
            the same state.
        start_epoch: start at the beginning of this epoch, as a state taken there would (for
            scripts that only know ``--start-epoch``; give the original ``seed`` too). With
            ``resume=`` it may be given too when it is the state's epoch (or the next one, for a
            state taken at the end of an epoch): the state then decides; any other epoch raises
            ValueError (docs/resume.md).
        single_process: this process reads the whole dataset on its own, as rank 0 of 1, whatever
            a launcher says (no MPI, no torch.distributed): for an evaluation on one process of a
            distributed job, and to silence the check below when one rank is meant.

    HDF5 samples (and NumPy files with ``npy_as="array"``) are arrays: a batch is then one
    ``[B, ...]`` array of the stored dtype,
    and the labels are an int64 array, or one ``[B, ...]`` array of the per-sample label
    arrays when the label dataset holds arrays.

    Under ``mpirun`` (or ``srun --mpi=pmix``) every rank creates the same Job; they check that
    they agree, take rank 0's seed, and serve each other's caches. Under ``torchrun`` without
    MPI the rank and world size come from an initialised ``torch.distributed`` or the
    ``RANK``/``WORLD_SIZE`` environment (see :mod:`hdmlp.launcher`): each rank reads its
    slice of the same global order, peers do not serve each other (``metrics()["transport"]``
    is ``"none"``), and without ``torch.distributed`` a ``seed`` must be given.

    A Job on 1 rank whose environment announces more processes (``WORLD_SIZE``,
    ``OMPI_COMM_WORLD_SIZE`` or ``PMI_SIZE`` > 1: every process would read every sample) raises
    ValueError saying how to fix it; ``SLURM_NTASKS`` > 1 alone warns (a batch script's one
    process may be meant). A Job made on 1 rank before ``torch.distributed`` started (e.g. in a
    ``LightningDataModule.__init__``) raises RuntimeError at its first pass once it has. Both
    name ``single_process=True`` for when one rank is meant. See docs/launching.md.

    A Job belongs to the process that made it: a forked child (e.g. a DataLoader worker) that
    touches it gets a RuntimeError at once, and it cannot be pickled. Jobs still open at exit
    are closed before MPI is finalised.

    Raises:
        FileNotFoundError / NotADirectoryError: the dataset path is missing, empty or not a folder.
        ValueError / TypeError: a bad argument, named in the message, with the allowed range.
        ConfigError: a bad configuration file (a ValueError naming the key, file and line).
        With several ranks, when one rank cannot start, every rank raises an error of that
        rank's type with its message.
    """

    def __init__(self, dataset_path: str | os.PathLike[str], batch_size: int | None = None,
                 epochs: int | None = REQUIRED, distr_scheme: str = "uniform", drop_last_batch: bool = False,
                 transforms: Any = None, seed: int | None = None,
                 config_path: str | os.PathLike[str] | None = None, *,
                 exchange_fraction: float = 0.1, timeout_s: float = 300.0, read_timeout_s: float | None = None,
                 storage: ThrottledStorage | None = None, index_cache: bool = True,
                 on_error: str = "raise", pin_memory: bool | None = None, batch_size_per_rank: int | None = None,
                 shuffle: bool = True, num_workers: int | None = None, source: str | None = None,
                 source_options: dict[str, str] | None = None, python_workers: int | None = None,
                 python_start_method: str = "forkserver", resume: Mapping[str, Any] | None = None,
                 start_epoch: int = 0, single_process: bool = False, device: Any = None,
                 handoff: str | None = None, cpu_budget: int | None = None) -> None:
        self._core: Any = None
        self._python: Any = None
        self._handed_out: tuple[int, int] | None = None  # (epoch, batches) a device feeder handed out
        self._final_state: dict[str, Any] | None = None
        self._forked_from: int | None = None
        self._device_decoder: Any = None  # the last pass's DeviceDecoder (its counts go into metrics())
        check_not_bootstrapping("an hdmlp.Job was created")  # before anything starts MPI
        world, use_mpi = None, False
        try:
            if not isinstance(single_process, bool):
                raise TypeError(f"single_process must be a bool, got {single_process!r}")
            world, use_mpi = _launcher.resolve(single_process, _core.in_mpi_job())
            self._options = parse(dataset_path, batch_size, epochs, distr_scheme, drop_last_batch, transforms, seed,
                                  config_path, exchange_fraction, timeout_s, read_timeout_s, storage, index_cache,
                                  on_error, pin_memory, batch_size_per_rank, shuffle, num_workers, source,
                                  source_options, python_workers, python_start_method, resume, start_epoch,
                                  single_process, world, use_mpi, device, handoff, cpu_budget)
            self._chain = plan_chain(self._options, device)
        except (TypeError, ValueError, OSError) as e:
            # The other ranks are already waiting in their start-up check:
            # they raise this error too, instead of timing out on this rank.
            _live.report_startup_failure(e, timeout_s, world, use_mpi)
            raise
        self._pin_batches(stacklevel=3)
        if start_epoch and seed is None and shuffle and resume is None:
            warnings.warn(f"hdmlp: start_epoch={start_epoch} without a seed: the epochs from {start_epoch} on are "
                          "shuffled with a new seed, not the interrupted run's; pass its seed (job.seed) or "
                          "resume from job.state_dict()", RuntimeWarning, stacklevel=2)
        resumed = self._options.resume is not None
        self._core = self._open_core(self._options.resume, 0 if resumed else start_epoch)
        _live.live_jobs.add(self)
        self._mpi_status = _mpi.job_status(use_mpi, single_process, world)
        self._started_epoch = -1
        # Per epoch, seconds measured on the Python side by HDMLPDataLoader (see metrics()).
        self._loop_seconds: dict[int, dict[str, float]] = {}
        self._next_epoch: int = self._core.state().epoch  # of the next pass
        self._skipped_to: int | None = None  # an epoch set_epoch began, before its pass
        self._pass: weakref.ref[_Pass] | None = None
        self._passes_opened = 0
        self._warned: set[str] = set()
        self._reported_changed = 0
        try:
            self._check_opened(resumed and start_epoch)
            self._start_python()
        except BaseException:
            self.close()
            raise
        self._emit_warnings()
        _warn_without_peers(self, self._mpi_status["why"])
        if not single_process and self.world_size == 1:
            try:
                _launcher.check_single_rank_environment()
            except ValueError:
                self.close()
                raise

    def _pin_batches(self, stacklevel: int) -> None:
        """Looks up CUDA's pinned allocator for the batch buffers when the plan pins them (see ``pin_memory``)."""
        chain = self._chain
        if chain.pin_memory and self._options.transforms is None:
            warnings.warn("hdmlp: pin_memory=True has no effect without transforms (raw file bytes are not "
                          "pinned)", RuntimeWarning, stacklevel=stacklevel)
        elif chain.pin_memory and chain.python_chain is not None:
            warnings.warn("hdmlp: pin_memory=True has no effect with Python transforms (their batches are in shared "
                          "memory, not pinned)", RuntimeWarning, stacklevel=stacklevel)
        self._pinned = cuda_host_allocator() if chain.pin_memory and chain.specs else (0, 0)
        self.pin_memory = self._pinned[0] != 0

    def _open_core(self, resume: Any, start_epoch: int) -> Any:
        """The job's C++ core, opened on its options and chain at ``resume`` (a state) or ``start_epoch``."""
        options, chain, world = self._options, self._chain, self._options.world
        core = _core.JobOptions()
        core.dataset_path, core.config_path = os.fsencode(options.dataset_path), os.fsencode(options.config_path)
        core.batch_size, core.batch_size_per_rank = options.batch_size or 0, options.batch_size_per_rank or 0
        core.epochs, core.distr_scheme, core.seed = options.epoch_count, options.distr_scheme, options.seed
        core.drop_last, core.shuffle = options.drop_last_batch, options.shuffle
        core.exchange_fraction, core.timeout_s = options.exchange_fraction, options.timeout_s
        core.read_timeout_s, core.use_mpi = options.read_timeout_s or 0.0, options.use_mpi
        core.use_index_cache = options.index_cache
        core.transforms, core.staging_threads, core.spare_cores = chain.specs, chain.staging_threads, chain.spare_cores
        core.skip_bad_samples = options.on_error == "skip" and chain.python_chain is None
        core.keep_damaged = options.on_error == "skip"  # a Python chain skips itself, with the index's damage
        if all(self._pinned):
            core.set_pinned_allocator(*self._pinned)
        if world is not None:
            core.launcher_rank, core.launcher_world_size = world.rank, world.world_size
            core.launcher_local_world_size, core.launcher_name = world.local_world_size, world.source
            core.set_gather(world.gather)
        core.source = options.source or ""
        for key, value in options.source_options.items():
            core.set_source_option(key, value)
        core.resume, core.start_epoch = resume, start_epoch
        storage = options.storage
        return _core.Job(core, storage.latency_s, storage.mbps,
                         [os.fsencode(path_argument("failing_paths", p)) for p in storage.failing_paths])

    def _check_opened(self, start_epoch: int) -> None:
        """What only the opened core can tell: a ``start_epoch`` the resumed state disagrees with, a skip
        without transforms, Python transforms on arrays."""
        core, options = self._core, self._options
        if start_epoch and core.state().epoch != start_epoch:
            # Both given (a script's --resume with the --start-epoch of its checkpoint): fine when they
            # name the same epoch; the state is the exact place in it.
            resumed = core.state()
            raise ValueError(f"resume is a state whose next batch is in epoch {resumed.epoch} (batch "
                             f"{resumed.batches}), but start_epoch={start_epoch}: they name different places. "
                             "Give only resume= (the exact position), or start_epoch equal to the epoch the state "
                             "goes on in (docs/resume.md)")
        self.batch_size: int = core.batch_size
        if options.on_error == "skip" and options.transforms is None and not core.has_arrays:
            raise ValueError("on_error='skip' needs transforms (or an array source such as HDF5): without them every "
                             "file's bytes are delivered as they are, and no image is decoded (so none can be found bad)")
        if self._chain.python_chain is not None and core.has_arrays:
            raise ValueError("transforms: a Python transform takes each sample's file bytes (folder, pack and tar "
                             "sources); this source holds arrays (HDF5), which Python transforms do not take yet: "
                             "transform the arrays after job.batches() or in the training loop")

    def _start_python(self) -> None:
        if self._chain.python_chain is not None:
            try:
                self._python = self._open_python(self._core)
            except BaseException:
                _live.mark_startup_failed()  # its exit is bounded (a worker that could not start: every rank fails)
                raise

    def _open_python(self, core: Any) -> Any:
        """The worker processes of the chain's Python part, fed by ``core`` (also for a job opened again)."""
        from hdmlp.python_transforms import PythonStage, default_python_workers
        options = self._options
        return PythonStage(core, chain=self._chain.python_chain,
                           workers=options.python_workers or default_python_workers(),
                           start_method=options.python_start_method, skip=options.on_error == "skip",
                           task_timeout_s=options.timeout_s, per_rank=options.batch_size_per_rank is not None)

    # -- the arguments as checked (job_arguments.JobOptions), the chain's plan, the next pass's epoch ----
    dataset_path = property(lambda self: self._options.dataset_path, doc="The dataset's path.")
    epochs = property(lambda self: self._options.epochs, doc="The epochs the job runs (None: no limit).")
    distr_scheme = property(lambda self: self._options.distr_scheme, doc="How samples are spread over ranks.")
    drop_last_batch = property(lambda self: self._options.drop_last_batch, doc="Whether the last batch is dropped.")
    shuffle = property(lambda self: self._options.shuffle, doc="False: every epoch in index order.")
    transforms = property(lambda self: self._options.transforms, doc="The chain the Job was given.")
    on_error = property(lambda self: self._options.on_error, doc="What a bad sample does: 'raise' or 'skip'.")
    config_path = property(lambda self: self._options.config_path, doc="The configuration file.")
    exchange_fraction = property(lambda self: self._options.exchange_fraction, doc="partial_local's share Q.")
    timeout_s = property(lambda self: self._options.timeout_s, doc="How long a rank waits for another.")
    read_timeout_s = property(lambda self: self._options.read_timeout_s, doc="How long one read may take.")
    single_process = property(lambda self: self._options.single_process, doc="Rank 0 of 1, whatever a launcher says.")
    device = property(lambda self: self._chain.device, doc="Where batches are delivered (None: host buffers).")
    planned_epochs = property(lambda self: self._options.epoch_count, doc="The epochs the job plans: ``epochs``, or "
                              "for ``epochs=None`` the most a job plans (2**31 - 1).")
    next_epoch = property(lambda self: self._next_epoch, doc="The epoch the next pass (a loader's, or "
                          ":meth:`epoch_batches` without one) delivers.")
    worker_specs = property(lambda self: self._chain.specs, doc="The C++ chain the staging workers run, as "
                            "``(op, args)`` specs (after a device's cut: see :func:`hdmlp.device.plan_hand_off`); "
                            "empty when they hand over file bytes.")
    decode_chain = property(lambda self: self._chain.decode_chain, doc="The device's decoding plan "
                            "(:class:`hdmlp.device.decode.DecodeChain`) for a chain of ``ImgDecode(device=...)``, "
                            "else None.")

    # -- batches on a device (hdmlp.device) ----------------------------------
    def delivery(self, device: Any) -> tuple[Any, Any]:
        """Where a pass delivers (a ``torch.device`` or None: host buffers) and the tail the device runs.

        The pass API (with :meth:`open_pass`, :meth:`position`, :meth:`hand_out`, ...) that
        :mod:`hdmlp.torch` and the device stage build their passes on; ``device=None``: the job's.

        A device given to a job created without one becomes the job's: before its first pass the
        job opens again at its position with the device's chain and staging threads (as
        :meth:`load_state_dict` does); after it, the chain stays as it runs, copied as it is.
        """
        if device is None:
            return self.device, self._chain.tail
        from hdmlp.device import resolve_device
        target = resolve_device(device)
        if self._chain.decode_chain is not None:
            if target != self.device:
                raise ValueError(f"device={device!r} differs from the job's ImgDecode(device=...), {self.device}: "
                                 "batches arrive where they are decoded")
            return target, None
        if self.device is None:
            plan = plan_chain(self._options, target)
            if plan.specs:  # a C++ chain: the device's cut, pinned batches and a core for the training thread
                if self._passes_opened or self._skipped_to is not None:
                    warnings.warn(f"hdmlp: device={device!r} given after the job's first pass: its chain stays as "
                                  f"it runs on the CPU (create the Job with device=... for the 8-bit hand-off "
                                  f"and the training process's spare core)", RuntimeWarning, stacklevel=3)
                else:
                    self._chain = plan
                    self._pin_batches(stacklevel=4)
                    self._reopen(self._core.state())
            self._chain = dataclasses.replace(self._chain, device=target)
        return target, self._chain.tail

    def hand_out(self, epoch: int, batches: int) -> None:
        """A device feeder handed out ``epoch``'s batches up to ``batches``: that is the job's position now
        (the feeder takes batches from the job ahead of those it hands out)."""
        self._handed_out = (epoch, batches)

    # -- what the job reads: the opened core's answers (_core.Job) ----------
    rank = _core_property("rank", "This process's rank (0 without MPI).")
    world_size = _core_property("world_size", "Number of ranks (1 without MPI).")
    seed = _core_property("seed", "The seed of the access order (drawn when the Job was given None).")
    source = _core_property("source_kind", 'The dataset\'s format: ``"folder"``, ``"pack"``, ``"hdf5"``, ``"tar"``, '
                                           '``"tfrecord"`` or ``"npy"``.')
    array_spec = _core_property("array_spec", "Array sources: each sample's dims and dtype, and its label array's "
                                              "(or None).")
    classes = _core_property("classes", "The class names, as torchvision ImageFolder's ``classes``.")
    targets = _core_property("labels", "Each sample's class index, as torchvision ImageFolder's ``targets``.")
    batches_per_epoch = _core_property("batches_per_epoch", "Global batches per epoch: the steps every rank takes.")
    batch_size_per_rank = _core_property("local_batch_size_nominal", "This rank's share of a full global batch (its "
                                                                     "local batch but in a merged last step).")
    rank_epoch_size = _core_property("rank_epoch_size", "Samples this rank reads per epoch.")
    num_workers = _core_property("staging_threads", "The staging workers.")
    transport = _core_property("transport", '``"mpi"`` when the ranks serve each other\'s caches, else ``"none"``.')
    sample_sizes = _core_property("sizes", "Each sample's size in bytes, by sample id, as the dataset was indexed.")
    batch_allocations = _core_property("batch_allocations", "Batch buffers allocated so far (a released batch's "
                                                            "memory is reused: this stays small).")
    index_from_cache = _core_property("index_from_cache", "True when the dataset's scan came from the index cache.")

    @property
    def class_to_idx(self) -> dict[str, int]:
        return {c: i for i, c in enumerate(self._job.classes)}

    @property
    def samples(self) -> list[tuple[str, int]]:
        """``(path, class_index)`` per sample, equal to torchvision ImageFolder's ``samples``.

        For a pack, the paths of the files it was made from (so a pack of a folder has that
        folder's ``samples``); for tar shards ``shard.tar/member``; for one HDF5 file
        ``file.h5:dataset[i]``, for a folder of them each file.
        """
        root = self._job.samples_root
        return [(os.path.join(root, rel), label) for rel, label in zip(self._job.relpaths, self._job.labels)]

    def __len__(self) -> int:
        """Number of samples in the dataset."""
        return len(self._job.labels)

    @property
    def sample_shape(self) -> tuple[list[int], str] | None:
        """With transforms: each sample's dims (``[C, H, W]`` or ``[H, W, C]``) and dtype name."""
        if not self._job.has_transforms:
            return None
        dims, dtype = self._job.sample_shape
        return list(dims), dtype

    def plan(self, epoch: int, rank: int | None = None) -> list[int]:
        """Sample ids ``rank`` (default: this rank) reads in ``epoch``, without loading them."""
        r = self.rank if rank is None else int_in("rank", rank, 0, self.world_size - 1)
        int_in("epoch", epoch, 0, self._options.epoch_count - 1)
        return memoryview(self._job.rank_epoch_samples(r, epoch)).tolist()

    # -- loading ------------------------------------------------------------
    def epoch_batches(self, epoch: int) -> Iterator[tuple[list[int], Any, list[Any]]]:
        """Starts ``epoch`` and returns an iterator of ``(ids, labels, samples)`` per batch.

        ``ids`` is a list of sample ids; ``labels`` is a buffer object
        (memoryview-compatible) that owns its memory. Without transforms
        ``samples`` is a list of such buffers, one per file's bytes; with
        transforms it is one buffer of shape ``[B, C, H, W]`` (or
        ``[B, H, W, C]``), format ``"f"`` or ``"B"``, holding the whole batch.
        :mod:`hdmlp.torch` turns them into tensors without a copy. The epoch a
        resumed job starts in begins at its next global batch. One pass at a
        time: a second one while this one is open raises RuntimeError. A pass has
        one consumer: two threads calling ``next()`` on it at once get RuntimeError
        (hand batches to other threads through a queue).
        """
        return self.open_pass(epoch)

    def local_batch_size(self, batch: int) -> int:
        """This rank's samples in global batch ``batch`` of an epoch."""
        return self._job.local_batch_size(batch)

    def describe_sample(self, sample: int) -> str:
        """How messages name ``sample``: its path (``shard.tar/member``, ``file.h5:dataset[i]``, ...)."""
        return self._job.path(sample)

    def use_device_decoder(self, decoder: Any) -> None:
        """The device decoder of the pass now open, whose counts :meth:`metrics` reports."""
        self._device_decoder = decoder

    def current_pass(self) -> "_Pass | None":
        """The open pass (an iterator of ``(ids, labels, samples)`` with its ``epoch``), or None."""
        current = self._pass() if self._pass is not None else None
        return current if current is not None and not current.done else None

    def open_pass(self, epoch: int | None = None) -> "_Pass":
        """Starts a pass over ``epoch`` (default: the next one) and returns it; only one may be open.

        The pass is an iterator of ``(ids, labels, samples)`` (as :meth:`epoch_batches`) with its
        ``epoch``; it ends when exhausted, closed or dropped. Raises RuntimeError while another
        pass is open, or after the job's last epoch.
        """
        current = self.current_pass()
        if current is not None:
            raise RuntimeError(f"a pass over epoch {current.epoch} of this job is still open: finish it, break out "
                               "of its loop or drop its iterator before starting another (hdmlp delivers one "
                               "epoch at a time; two loops over one job would split its batches)")
        if epoch is None:
            epoch = self._next_epoch
        if epoch >= self._options.epoch_count:
            raise RuntimeError(f"all {self._options.epoch_count} epochs of the job have been delivered; create the "
                               "hdmlp.Job with more epochs (or epochs=None, no limit) to iterate again")
        if not self.single_process and self.world_size == 1:
            _launcher.check_still_single_rank()
        if self._skipped_to != epoch:
            self._begin_epoch(epoch)
        self._skipped_to = None
        self._next_epoch = epoch + 1
        self._passes_opened += 1
        opened = _Pass(self, epoch)
        self._pass = weakref.ref(opened)
        return opened

    def set_epoch(self, epoch: int) -> None:
        """Makes the next pass deliver ``epoch``, as ``DistributedSampler.set_epoch`` before a pass.

        The rule of :meth:`hdmlp.torch.HDMLPDataLoader.set_epoch`: the next epoch and the current
        one are a no-op (after a pass broken off early the next epoch starts at once); a later
        epoch skips ahead, the epochs in between never read; an earlier one raises ValueError,
        except for an evaluation job (``shuffle=False``), which ignores it.
        """
        if not self.shuffle and isinstance(epoch, int) and not isinstance(epoch, bool) \
                and 0 <= epoch < self._next_epoch:
            return  # every pass of an evaluation job reads the same order: trainers number them their way
        if isinstance(epoch, bool) or not isinstance(epoch, int):
            raise TypeError(f"epoch must be an int, got {epoch!r}")
        if not 0 <= epoch < self._options.epoch_count:
            raise ValueError(f"set_epoch({epoch}): the job has epochs 0..{self._options.epoch_count - 1}; create the "
                             f"hdmlp.Job with more epochs")
        if epoch == self._next_epoch and self._skipped_to is None and self.current_pass() is None \
                and self.position().epoch < epoch:
            # The last pass was broken off: start the next epoch now, so that the position (and a
            # state taken now) is its start, as the next pass will be.
            self._begin_epoch(epoch)
            self._skipped_to = epoch
            return
        if epoch in (self._next_epoch, self._next_epoch - 1):
            return
        if epoch < self._next_epoch:
            raise ValueError(f"set_epoch({epoch}): epoch {self._next_epoch - 1} has already been started, and "
                             "hdmlp reads epochs in order; it cannot go back to an earlier one (create a new "
                             "Job to read it again)")
        # Skip ahead now, so that the workers stop reading the epochs in between.
        self._begin_epoch(epoch)
        self._skipped_to = epoch
        self._next_epoch = epoch

    def batches(self, epoch: int | None = None, *, device: Any = None, channels_last: bool = False,
                ahead: int = 2) -> Iterator["Batch"]:
        """Starts ``epoch`` (default: the next one) and yields its batches.

        Each is a framework-free :class:`hdmlp.batches.Batch`: the pair ``(samples, labels)``
        whose arrays implement DLPack and the buffer protocol (NumPy, JAX, TensorFlow and torch
        take them without a copy; see docs/frameworks.md), with ``ids``, ``epoch`` and ``index``
        (the batch's step in the epoch: a resumed epoch starts at its next global batch). The
        epoch starts now. It is a pass like :meth:`epoch_batches`: one at a time.

        With a ``device`` (default: the job's), ``samples`` and ``labels`` are torch tensors on
        it, copied ``ahead`` batches ahead on a side stream; ``channels_last`` gives 4-D images
        that memory format (see :mod:`hdmlp.device`).
        """
        from hdmlp.batches import Batch
        target, tail = self.delivery(device)
        if target is not None:
            from hdmlp.device import check_ahead, check_channels_last
            check_ahead(ahead)
            check_channels_last(channels_last, self._chain.specs)
        elif channels_last is not False:
            raise ValueError("channels_last needs a device (device='cpu' for tensors in host memory)")
        opened = self.open_pass(epoch)
        first = self.position().batches
        if target is not None and self._chain.decode_chain is not None:
            from hdmlp.device.decode import decoded_job_pass
            return decoded_job_pass(self, opened, first, channels_last, ahead)
        if target is not None:
            from hdmlp.device import feed_job_pass
            return feed_job_pass(self, opened, first, target, tail, channels_last, ahead)

        def generate() -> Iterator[Batch]:
            try:
                for index, (ids, labels, samples) in enumerate(opened, start=first):
                    yield Batch(samples, labels, ids, opened.epoch, index)
            finally:  # a break out of the loop (the generator closed) ends the pass
                opened.close()
        return generate()

    def _begin_epoch(self, epoch: int) -> None:
        if isinstance(epoch, bool) or not isinstance(epoch, int):
            raise TypeError(f"epoch must be an int, got {type(epoch).__name__} {epoch!r}")
        count = self._options.epoch_count
        if epoch < 0:
            raise ValueError(f"epoch must be from 0 to {count - 1}, got {epoch}")
        if epoch >= count:
            raise RuntimeError(f"epoch {epoch} is past the job's last epoch ({count - 1}): the job was "
                               f"created with epochs={count}; create it with more epochs")
        self._job.begin_epoch(epoch)
        self._started_epoch = epoch
        self._handed_out = None  # the core's position again, until a device feeder hands out a batch
        if self._python is not None:
            # A resumed epoch begins at its next global batch (the same step on every rank).
            self._python.begin_epoch(epoch, self._job.state().batches)

    def _emit_warnings(self) -> None:
        job = self._job
        for message in job.warnings():
            if message not in self._warned:
                self._warned.add(message)
                warnings.warn(f"hdmlp: {message}", RuntimeWarning, stacklevel=3)
        changed = job.changed_files
        if len(changed) > self._reported_changed:
            new = changed[self._reported_changed:]
            self._reported_changed = len(changed)
            shown = ", ".join(repr(p) for p in new[:10]) + (f" and {len(new) - 10} more" if len(new) > 10 else "")
            warnings.warn(f"hdmlp: {len(new)} sample file(s) changed on the dataset's storage since the job indexed "
                          f"the dataset (another size or modification time): {shown}. The job delivers the dataset "
                          f"as indexed: cached copies keep their first bytes, these were read as they are now "
                          f"(metrics()['changed_samples'] counts them; restart the job, with index_cache=False if "
                          f"the index cache is stale, to index them anew)", RuntimeWarning, stacklevel=3)

    def _next_batch(self, epoch: int):
        if epoch != self._started_epoch:
            raise RuntimeError(f"epoch {epoch} was ended by starting epoch {self._started_epoch}")
        if self._python is not None:
            return self._python.next_batch(epoch)
        batch = self._job.next_batch()
        if batch is None:
            self._emit_warnings()  # e.g. a cache disk that filled up during the epoch
            return None
        _, _, ids, labels, samples = batch[:5]
        if len(batch) > 5 and batch[5] is not None:
            labels = batch[5]  # an array source's label arrays
        return memoryview(ids).tolist(), labels, samples

    # -- checkpoints ----------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The job's position, as a small JSON-serialisable dict (see :mod:`hdmlp.state`).

        Take it at any batch boundary, on any rank: after the same step every rank
        returns the same dict. ``hdmlp.Job(..., resume=state)`` (or
        :meth:`load_state_dict` before the first pass) goes on with the next global
        batch; a state taken after the last batch of an epoch, or after ``set_epoch``
        skipped ahead, starts the next epoch. It costs no I/O, and still answers after
        :meth:`close` (the position at close).
        """
        if self._core is None and self._final_state is not None:
            return dict(self._final_state)
        return _state.to_dict(self.position())

    def position(self) -> Any:
        """The consumer's position, an ``hdmlp._core.JobState`` (``epoch``, ``batches``): with a Python
        transform, the batches its stage handed out, since the stage takes the job's batches ahead of
        them; with a device feeder, those it handed out (:meth:`hand_out`)."""
        position = self._python.position if self._python is not None else None
        if self._handed_out is not None:  # a device feeder takes batches ahead of those it handed out
            position = self._handed_out
        if position is not None:
            return self._job.state_at(*position)
        return self._job.state()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Goes on from ``state`` (from :meth:`state_dict`), before the first pass.

        Opens the job again at the state, as ``hdmlp.Job(..., resume=state)`` would: the
        staging workers and the caches' placement start there. Under several ranks every
        rank must call it (with the same state), since the ranks check at start-up that
        they agree. Creating the Job with ``resume=`` skips the first opening.
        """
        if self._passes_opened or self._skipped_to is not None:
            raise RuntimeError("load_state_dict must come before the job's first pass (and before set_epoch skips "
                               "ahead); or create the Job with resume=state")
        self._reopen(_state.from_dict(state))

    def _reopen(self, resume_state: Any) -> None:
        """Opens the job's core (and Python stage) again at ``resume_state``, before the first pass."""
        python, self._python = self._python, None
        if python is not None:
            python.close()
        old, self._core = self._job, None
        old.close()
        self._core = self._open_core(resume_state, 0)
        if python is not None:  # its workers seed from the job's seed, which is now the state's
            self._python = self._open_python(self._core)
        self._started_epoch = -1
        self._next_epoch = self._core.state().epoch

    # -- reporting ----------------------------------------------------------
    def add_loop_seconds(self, epoch: int, **seconds: float) -> None:
        """Adds a loader's Python-side seconds of ``epoch`` (``next_batch_seconds``, ``python_seconds``,
        ``consumer_seconds``) to what :meth:`metrics` reports."""
        timers = self._loop_seconds.setdefault(epoch, dict.fromkeys(_LOOP_TIMERS, 0.0))
        for key, value in seconds.items():
            timers[key] += value

    def metrics(self) -> dict[str, Any]:
        """Where time went, per epoch, and what the job read, cached, skipped and started with.

        ``{"epochs": [{"epoch", "samples", "stall_seconds", "read_seconds", "transform_seconds", ...,
        "reads": {SOURCE: {"count", "bytes", "seconds"}}}], "skipped_samples", "staging", "classes",
        "startup", "warnings", ...}``: docs/metrics.md describes every key.
        """
        job = self._job
        epochs, classes = job.metrics(), job.class_statuses()
        skipped_samples, skipped = job.skipped_samples, job.skipped_files
        padded_samples = job.padded_samples
        if self._python is not None:  # the consumer waits for the Python workers, which transform
            python = self._python.metrics()
            for e in epochs:
                p = python.get(e["epoch"])
                if p is not None:  # the consumer's waits for raw batches are within the Python stage's
                    e["stall_seconds"] = p["stall_seconds"]
                    e["samples"] = p["samples"]
                    e["transform_seconds"] += p["transform_seconds"]
                    e["skipped"] += p["skipped"]
            skipped_samples += sum(p["skipped"] for p in python.values())
            padded_samples += sum(p["padded"] for p in python.values())
            skipped = skipped + self._python.skipped_files
        for e in epochs:
            e.update(self._loop_seconds.get(e["epoch"], dict.fromkeys(_LOOP_TIMERS, 0.0)))
            add_readiness(e, job.staging_threads)
        decoder = self._device_decoder
        return {
            "epochs": epochs,
            "device_decode": dict(decoder.counts, jpeg_decoder=decoder.jpeg_decoder) if decoder is not None else None,
            "pfs_bytes": job.pfs_bytes,
            "pfs_reads": job.pfs_reads,
            "remote_reads": job.remote_reads,
            "requests_served": job.requests_served,
            "placement_exchange": job.placement_exchange,
            "startup": job.startup,
            "skipped_samples": skipped_samples,
            "skipped": skipped,
            "padded_samples": padded_samples,
            "changed_samples": job.changed_samples,
            "changed": job.changed_files,
            "staging": {"capacity_bytes": job.staging_capacity_bytes, "peak_bytes": job.staging_peak_bytes,
                        "threads": job.staging_threads},
            "source": {"kind": job.source_kind, "files_opened": job.source_files_opened},
            "classes": classes,
            "warnings": job.warnings(),
            "seed": job.seed,
            "rank": job.rank,
            "world_size": job.world_size,
            "transport": job.transport,
            "mpi": dict(self._mpi_status),
        }

    def write_metrics(self, path: str | os.PathLike[str]) -> None:
        """Writes :meth:`metrics` to a JSON file."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.metrics(), f, indent=2)

    # -- lifetime -----------------------------------------------------------
    @property
    def _job(self):
        if self._core is None:
            if self._forked_from is not None:
                raise RuntimeError(f"this hdmlp.Job was created in process {self._forked_from}, and this is a forked "
                                   f"child (process {os.getpid()}) where its loader threads do not exist: create the "
                                   f"Job in the process that uses it. With PyTorch, iterate "
                                   f"hdmlp.torch.HDMLPDataLoader in the main process (hdmlp's own C++ workers load "
                                   f"in parallel) instead of a torch DataLoader with workers")
            raise RuntimeError("the job is closed")
        return self._core

    @property
    def closed(self) -> bool:
        return self._core is None

    def close(self) -> None:
        """Stops and joins every thread (and Python transform worker) of the job; safe to call twice.

        Under MPI it waits (a few seconds at most) while other ranks still read samples this
        rank caches. A read stuck in the dataset's storage does not hold it up.
        """
        if getattr(self, "_core", None) is not None:
            try:
                self._final_state = _state.to_dict(self.position())
            except Exception:  # a broken Python stage: the core's own position
                self._final_state = _state.to_dict(self._core.state())
        python, self._python = getattr(self, "_python", None), None
        if python is not None:
            python.close()
        core, self._core = self._core, None
        _live.live_jobs.discard(self)
        if core is not None:
            core.close()

    def forget_in_child(self, parent: int) -> list[Any]:
        """After ``os.fork()``, in the child: drops the parent's core and Python stage, whose threads and
        workers are the parent's, and returns them: the caller keeps them, never destroyed here."""
        self._forked_from = parent
        kept = [self._core]
        self._core = None
        python, self._python = getattr(self, "_python", None), None
        if python is not None:  # the parent's Python transform workers: not this child's to stop
            python.forget_in_child()
            kept.append(python)
        return kept

    def __reduce__(self):
        raise TypeError("an hdmlp.Job cannot be pickled or sent to another process: it owns this process's loader "
                        "threads; create a Job in each process (with PyTorch, iterate hdmlp.torch.HDMLPDataLoader "
                        "instead of a torch DataLoader with workers)")

    def __enter__(self) -> "Job":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self)} samples, seed={self.seed}"
        return (f"hdmlp.Job({self.dataset_path!r}, batch_size={self.batch_size}, epochs={self.epochs}, "
                f"distr_scheme={self.distr_scheme!r}; {state})")


class _Pass:
    """One open pass over an epoch of a job: an iterator of ``(ids, labels, samples)``.

    It is done when the epoch's last batch was delivered, or when it is closed or
    dropped (a ``break`` out of its loop); until then the job refuses another pass.
    """

    def __init__(self, job: Job, epoch: int) -> None:
        self._job = job
        self.epoch = epoch
        self.done = False
        # A pass has one consumer: the job assembles one batch at a time.
        self._in_next = threading.Lock()

    def __iter__(self) -> "_Pass":
        return self

    def __next__(self) -> tuple[list[int], Any, list[Any]]:
        if not self._in_next.acquire(blocking=False):
            raise RuntimeError(f"two threads iterate one pass over epoch {self.epoch} of this job at once: a pass "
                               "(job.batches(), epoch_batches(), a loader's iterator) has one consumer; iterate it "
                               "from one thread, or hand its batches to others through a queue")
        try:
            if self.done:
                raise StopIteration
            batch = self._job._next_batch(self.epoch)
            if batch is None:
                self.done = True
                raise StopIteration
            return batch
        finally:
            self._in_next.release()

    def close(self) -> None:
        self.done = True

    def __del__(self) -> None:
        self.done = True
