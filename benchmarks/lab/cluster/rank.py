"""One rank of an emulated cluster's job: runs hdmlp Jobs and writes what it received.

    mpirun ... python benchmarks/lab/cluster/rank.py SPEC.json

Run by file path, not as a module, so that it imports the installed hdmlp and
nothing of the checkout. SPEC (JSON) holds ``data``, ``out``, ``epochs``,
``batch_size``, ``seed``, ``schemes`` (one Job per distribution scheme, one
after the other), and optionally ``config`` (an hdmlp config file),
``timeout_s``, ``exchange_fraction`` and ``die`` (``{"node", "epoch",
"batch"}``: the ranks on that host SIGKILL themselves there, a node failing,
after writing the time to ``<out>/died<R>``), ``compute_mbps`` (the training
step as a device computing s_k / c per sample, sleeping to deadlines, in place
of ``step_ms``), ``barrier`` (``{"addr", "port", "ifname"}``: every step ends in a
barrier of all ranks, as DDP's gradient allreduce does; torch.distributed's
gloo over TCP; 40 barriers alone before the job time one: ``barrier_probe_seconds``) and ``hash`` (false: no content hashes, for timing runs).

Writes ``<out>/rank<R>.json``: the host name, MemAvailable at start, and per
job (scheme): per epoch the sample ids in the order received, a content hash
per sample (sha256, 16 hex digits), seconds, the seconds spent waiting for
batches (stall), images/s, hdmlp's reads by source; and hdmlp's metrics
(PFS bytes, peer reads and requests served, the placement exchange's bytes,
the cache classes' capacities, the Job's start-up phases), and the seconds from Job
construction to the first batch, with the Unix times at which the rank's script
began (``main_at``), had imported hdmlp (``imported_at``) and called ``hdmlp.Job``
(``called_at``): how far apart the ranks arrive at the start-up's collectives.
A rank whose job fails records the error (type, message, seconds after the
epoch began, time) and leaves without waiting for its peers.

With ``"loader": "dataloader"`` in SPEC the rank runs, in place of hdmlp,
torchvision's ImageFolder (raw file bytes as the sample, as hdmlp delivers
them) under torch's DistributedSampler and DataLoader (``num_workers`` from
SPEC, default 1) and writes the same record, with the bytes it read from the
PFS as ``pfs_bytes``: the baseline of issue 22's goal 2.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import sys
import time


def mem_available() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def write(out: str, rank: int, result: dict) -> None:
    tmp = os.path.join(out, f".rank{rank}.json.tmp")
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.replace(tmp, os.path.join(out, f"rank{rank}.json"))


def run_job(hdmlp, spec: dict, scheme: str, result: dict, host: str) -> dict:
    kw = {"distr_scheme": scheme, "seed": spec["seed"], "timeout_s": spec.get("timeout_s", 60.0)}
    if spec.get("config"):
        kw["config_path"] = spec["config"]
    if spec.get("exchange_fraction") is not None:
        kw["exchange_fraction"] = spec["exchange_fraction"]
    step_done, barrier_probe = _barrier(spec)
    called_at = time.time()
    t0 = time.perf_counter()
    job = hdmlp.Job(spec["data"], spec["batch_size"], spec["epochs"], **kw)
    run = {"scheme": scheme, "startup_seconds": time.perf_counter() - t0, "called_at": called_at, "epochs": [],
           "barrier_probe_seconds": barrier_probe}
    result.update(rank=job.rank, world_size=job.world_size, seed=job.seed)
    die = spec.get("die")
    for epoch in range(spec["epochs"]):
        ids, hashes = [], []
        stall = 0.0
        start, cpu_start = time.perf_counter(), time.process_time()
        batches = iter(job.epoch_batches(epoch))
        b = 0
        device_free = None  # compute_mbps: when the emulated device finishes the step in progress
        barrier = 0.0  # seconds in the step's barrier (spec "barrier")
        while True:
            if die and die["node"] == host and die["epoch"] == epoch and die["batch"] == b:
                with open(os.path.join(spec["out"], f"died{job.rank}"), "w") as f:
                    f.write(repr(time.time()))  # when, for the survivors' errors to be timed against
                os.kill(os.getpid(), signal.SIGKILL)  # the node fails: no goodbye to anyone
            t = time.perf_counter()
            try:
                batch_ids, _labels, samples = next(batches)
            except StopIteration:
                stall += time.perf_counter() - t
                break
            except Exception as e:
                run["error"] = {"type": type(e).__name__, "message": str(e), "epoch": epoch, "batch": b,
                                "seconds_into_epoch": time.perf_counter() - start, "time": time.time()}
                raise _JobFailed(run) from e
            stall += time.perf_counter() - t
            if "first_batch_seconds" not in run:
                run["first_batch_seconds"] = time.perf_counter() - t0  # Job construction to the first batch
            ids += [int(i) for i in batch_ids]
            if spec.get("hash", True):
                hashes += [hashlib.sha256(bytes(memoryview(s))).hexdigest()[:16] for s in samples]
            b += 1
            if spec.get("compute_mbps"):
                # A device computing s_k / c per sample (raw bytes: s_k is the sample's length). It
                # sleeps to deadlines, so a late wake-up on a shared machine is not added to every
                # later step: a batch that was already waiting starts when the last step ended.
                got = time.perf_counter()
                start_step = got if device_free is None or got - t > 0.002 else device_free
                device_free = start_step + sum(len(memoryview(s)) for s in samples) / (spec["compute_mbps"] * 1e6)
                time.sleep(max(0.0, device_free - time.perf_counter()))
            elif spec.get("step_ms"):
                time.sleep(spec["step_ms"] / 1000)
            if step_done is not None:
                t_barrier = time.perf_counter()
                step_done()
                barrier += time.perf_counter() - t_barrier
                if device_free is not None:  # the next step starts after the barrier, not before
                    device_free = max(device_free, time.perf_counter())
        seconds = time.perf_counter() - start
        run["epochs"].append({"ids": ids, "hashes": hashes, "seconds": seconds, "stall_seconds": stall,
                              "barrier_seconds": barrier, "steps": b, "img_per_s": len(ids) / seconds if seconds > 0 else None,
                              # the rank's CPU in the epoch (all its threads: hdmlp's, MPI's, the loop's) and
                              # how far its cache classes' fills had come at the epoch's end
                              "cpu_seconds": time.process_time() - cpu_start,
                              "classes": [{"name": c["name"], "filled_samples": c.get("filled_samples"),
                                           "prefetched_samples": c.get("prefetched_samples")}
                                          for c in job.metrics()["classes"]]})
    if job.rank == 0:  # after the epochs: thousands of lstat calls on the PFS, no part of the job's times
        root = os.path.realpath(spec["data"])
        run["paths"] = [os.path.relpath(os.path.realpath(p), root) for p, _ in job.samples]
    m = job.metrics()
    for e, em in zip(run["epochs"], m["epochs"]):
        e["reads"] = {src: {"count": r["count"], "bytes": r["bytes"]} for src, r in em["reads"].items() if r["count"]}
        e["loader_stall_seconds"] = em["stall_seconds"]
    run["metrics"] = {k: m.get(k) for k in ("pfs_bytes", "remote_reads", "requests_served", "transport",
                                             "placement_exchange", "startup")}
    run["classes"] = [{k: c.get(k) for k in ("name", "capacity_bytes", "planned_samples", "filled_samples")}
                      for c in m["classes"]]
    t = time.perf_counter()
    job.close()
    run["close_seconds"] = time.perf_counter() - t
    return run


def launcher_rank() -> tuple[int, int]:
    """(rank, world size) from the launcher's variables: mpirun's, else srun's, else a PMI launcher's."""
    for rank_var, size_var in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS"),
                               ("PMI_RANK", "PMI_SIZE")):
        if os.environ.get(rank_var) and os.environ.get(size_var):
            return int(os.environ[rank_var]), int(os.environ[size_var])
    return 0, 1


def _barrier(spec: dict):
    """What ends a training step, and one such barrier's seconds timed alone: (None, None), or with
    ``barrier`` in SPEC a barrier of all ranks."""
    if not spec.get("barrier"):
        return None, None
    import torch.distributed as dist
    if not dist.is_initialized():
        b = spec["barrier"]
        if b.get("ifname"):  # gloo would take the address the host name resolves to (loopback here)
            os.environ.setdefault("GLOO_SOCKET_IFNAME", b["ifname"])
        dist.init_process_group("gloo", init_method=f"tcp://{b['addr']}:{b['port']}",
                                rank=launcher_rank()[0], world_size=launcher_rank()[1])
    # The barrier's own cost, alone (before the job starts): what every step adds to the model's s_k / c.
    for _ in range(5):
        dist.barrier()
    t = time.perf_counter()
    for _ in range(40):
        dist.barrier()
    return dist.barrier, (time.perf_counter() - t) / 40


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _collate(batch):
    return [i for i, _ in batch], [s for _, s in batch]


class _Indexed:
    """The ImageFolder's (index, raw bytes) at each index, so that the rank can record which sample came."""

    def __init__(self, folder) -> None:
        self.folder = folder

    def __len__(self) -> int:
        return len(self.folder)

    def __getitem__(self, i: int):
        return i, self.folder[i][0]


def run_dataloader(spec: dict, result: dict, rank: int, world: int) -> dict:
    """torchvision ImageFolder + DistributedSampler + DataLoader over the same files, recorded like run_job."""
    import torch.utils.data as tud
    from torchvision.datasets import ImageFolder
    workers = int(spec.get("num_workers", 1))
    t0 = time.perf_counter()
    folder = ImageFolder(spec["data"], loader=_read_bytes)
    sampler = tud.DistributedSampler(_Indexed(folder), num_replicas=world, rank=rank, shuffle=True,
                                     seed=spec["seed"], drop_last=False)
    per_rank_batch = max(1, spec["batch_size"] // world)
    loader = tud.DataLoader(_Indexed(folder), batch_size=per_rank_batch, sampler=sampler, num_workers=workers,
                            collate_fn=_collate, persistent_workers=workers > 0,
                            prefetch_factor=2 if workers > 0 else None)
    run = {"scheme": f"dataloader(num_workers={workers})", "startup_seconds": time.perf_counter() - t0,
           "epochs": []}
    result.update(rank=rank, world_size=world, seed=spec["seed"])
    if rank == 0:
        root = os.path.realpath(spec["data"])
        run["paths"] = [os.path.relpath(os.path.realpath(p), root) for p, _ in folder.samples]
    read_bytes = 0
    for epoch in range(spec["epochs"]):
        sampler.set_epoch(epoch)
        ids, hashes = [], []
        stall = 0.0
        epoch_bytes = 0
        start = time.perf_counter()
        batches = iter(loader)
        while True:
            t = time.perf_counter()
            try:
                batch_ids, samples = next(batches)
            except StopIteration:
                stall += time.perf_counter() - t
                break
            stall += time.perf_counter() - t
            ids += [int(i) for i in batch_ids]
            hashes += [hashlib.sha256(s).hexdigest()[:16] for s in samples]
            epoch_bytes += sum(len(s) for s in samples)
            if spec.get("step_ms"):
                time.sleep(spec["step_ms"] / 1000)
        seconds = time.perf_counter() - start
        run["epochs"].append({"ids": ids, "hashes": hashes, "seconds": seconds, "stall_seconds": stall,
                              "img_per_s": len(ids) / seconds if seconds > 0 else None,
                              "reads": {"pfs": {"count": len(ids), "bytes": epoch_bytes}}})
        read_bytes += epoch_bytes
    run["metrics"] = {"pfs_bytes": read_bytes, "remote_reads": 0, "requests_served": 0, "transport": None}
    run["classes"] = []
    return run


class _JobFailed(Exception):
    def __init__(self, run: dict) -> None:
        super().__init__(run["error"]["message"])
        self.run = run


def main() -> None:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    host = socket.gethostname()
    rank, world = launcher_rank()
    result = {"host": host, "rank": rank, "mem_available_bytes": mem_available(), "pid": os.getpid(),
              "main_at": time.time(), "runs": []}
    if spec.get("loader") == "dataloader":
        try:
            result["runs"].append(run_dataloader(spec, result, rank, world))
        except Exception as e:
            result["error"] = {"type": type(e).__name__, "message": str(e), "epoch": None}
            write(spec["out"], rank, result)
            os._exit(1)
        write(spec["out"], rank, result)
        return
    import hdmlp
    result["imported_at"] = time.time()
    for scheme in spec["schemes"]:
        try:
            result["runs"].append(run_job(hdmlp, spec, scheme, result, host))
        except _JobFailed as e:
            result["runs"].append(e.run)
            result["error"] = e.run["error"]
            write(spec["out"], result["rank"], result)
            sys.stdout.flush()
            os._exit(1)  # a peer is gone: do not wait for it in MPI_Finalize
        except Exception as e:  # the Job did not start
            result["error"] = {"type": type(e).__name__, "message": str(e), "epoch": None}
            write(spec["out"], result["rank"], result)
            os._exit(1)
    write(spec["out"], result["rank"], result)


if __name__ == "__main__":
    main()
