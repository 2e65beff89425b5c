"""Measures one loader system on one rank; run in its own process by the harness.

    python -m benchmarks.runner SPEC.json

SPEC names the system and the job; the process writes
``<out>/<name>-rank<R>.json`` with, per epoch, the seconds, samples, the time
the consumer waited for a batch (stall) and where the samples came from, plus
the process tree's CPU seconds and peak RSS/PSS over the measurement and the
bytes the loader read from the dataset's storage. Under mpirun every rank
runs this and writes its own file. Its own process, so that CPU time and
memory are the system's alone.

Systems (``kind``):

  hdmlp-raw          hdmlp.Job, each sample the file's bytes
  hdmlp-transforms   hdmlp.Job with the C++ pipeline (decode, RandomResizedCrop, flip,
                     ToTensor, Normalize): float32 [b, 3, S, S] batches
  torch-raw          torchvision ImageFolder whose loader reads the file's bytes, DataLoader
  torch-transforms   torchvision ImageFolder (PIL) with the equivalent torchvision.transforms
  hdmlp-python       hdmlp.Job running that torchvision chain as a Python transform
                     ([ImgDecode(), ToPIL(), chain]) in ``workers`` worker processes

The consumer sleeps ``step_ms`` after each batch, standing in for a training
step on an accelerator (the CPU is free meanwhile, as while a GPU computes).
"""
from __future__ import annotations

import gc
import json
import os
import resource
import sys
import threading
import time

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def _mpi_rank_world() -> tuple[int, int]:
    for r, w in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE")):
        if r in os.environ:
            return int(os.environ[r]), int(os.environ[w])
    return 0, 1


class MemorySampler:
    """Samples the RSS and PSS of this process and all its descendants (DataLoader workers, hdmlp's
    forkserver and Python transform workers), and the CPU seconds each descendant has used."""

    def __init__(self, interval_s: float = 0.1) -> None:
        self.interval_s = interval_s
        self.peak_rss = 0
        self.peak_pss = 0
        self.descendant_cpu: dict[int, float] = {}  # pid -> CPU seconds, as last seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.sample()

    @staticmethod
    def _tree(pid: int) -> list[int]:
        pids, todo = [], [pid]
        while todo:
            p = todo.pop()
            pids.append(p)
            try:
                for tid in os.listdir(f"/proc/{p}/task"):
                    with open(f"/proc/{p}/task/{tid}/children") as f:
                        todo += map(int, f.read().split())
            except OSError:
                pass
        return pids

    def sample(self) -> None:
        rss = pss = 0
        tick = os.sysconf("SC_CLK_TCK")
        for p in self._tree(os.getpid())[1:]:
            try:
                with open(f"/proc/{p}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                self.descendant_cpu[p] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
            except (OSError, IndexError, ValueError):
                pass
        for p in self._tree(os.getpid()):
            try:
                with open(f"/proc/{p}/smaps_rollup") as f:
                    for line in f:
                        if line.startswith("Rss:"):
                            rss += int(line.split()[1]) * 1024
                        elif line.startswith("Pss:"):
                            pss += int(line.split()[1]) * 1024
            except OSError:
                pass
        self.peak_rss = max(self.peak_rss, rss)
        self.peak_pss = max(self.peak_pss, pss)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()


def _cpu_seconds(sampled_descendants: float = 0.0) -> float:
    """This process's CPU seconds and its descendants': those it has reaped (DataLoader workers), or, when
    more, those sampled from /proc while they ran (grandchildren such as a forkserver's workers are
    reaped by their own parent)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + max(kids.ru_utime + kids.ru_stime, sampled_descendants)


# The run's MemorySampler. _consume samples it once per epoch while the loader
# is mid-epoch, so short-lived DataLoader workers are counted even when the
# sampler thread, on a busy machine, does not wake up during their lifetime.
_memory: MemorySampler | None = None


def _consume(loader, step_s: float) -> tuple[float, float, int]:
    """One epoch: (seconds, seconds waiting for batches, samples)."""
    start = time.perf_counter()
    stall = 0.0
    samples = 0
    it = iter(loader)
    while True:
        t = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            stall += time.perf_counter() - t
            break
        stall += time.perf_counter() - t
        if samples == 0 and _memory is not None:
            _memory.sample()  # not timed as a stall: the loader's workers run on meanwhile
        samples += len(batch[1])
        if step_s:
            time.sleep(step_s)
    del it
    return time.perf_counter() - start, stall, samples


def torchvision_chain(size: int):
    """The ImageNet training chain in torchvision, on PIL images."""
    import torchvision.transforms as TV
    return TV.Compose([TV.RandomResizedCrop(size), TV.RandomHorizontalFlip(), TV.ToTensor(), TV.Normalize(MEAN, STD)])


def run_hdmlp(spec: dict) -> dict:
    import hdmlp
    from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder

    transforms = None
    kwargs: dict = {}
    if spec["kind"] == "hdmlp-transforms":
        import hdmlp.transforms as T
        transforms = [T.ImgDecode(), T.RandomResizedCrop(spec["image_size"]), T.RandomHorizontalFlip(),
                      T.ToTensor(), T.Normalize(MEAN, STD)]
    elif spec["kind"] == "hdmlp-python":  # the DataLoader's own torchvision chain, in hdmlp's workers
        import hdmlp.transforms as T
        transforms = [T.ImgDecode(), T.ToPIL(), torchvision_chain(spec["image_size"])]
        kwargs["python_workers"] = spec["workers"]
    if transforms:
        kwargs.update({"transforms": transforms, "on_error": "raise"})
    t0 = time.perf_counter()
    job = hdmlp.Job(spec["data"], spec["batch_size"], spec["epochs"], seed=spec["seed"],
                    config_path=spec.get("config"), **kwargs)
    loader = HDMLPDataLoader(HDMLPImageFolder(spec["data"], job))
    startup = time.perf_counter() - t0
    epochs = []
    for _ in range(spec["epochs"]):
        seconds, stall, n = _consume(loader, spec["step_ms"] / 1000)
        epochs.append({"seconds": seconds, "stall_seconds": stall, "samples": n})
    m = job.metrics()
    if _memory is not None:
        _memory.sample()  # the CPU time of the Python transform workers, which close() ends
    for e, em in zip(epochs, m["epochs"]):
        e["sources"] = {src: r["count"] for src, r in em["reads"].items() if r["count"]}
        e["loader_stall_seconds"] = em["stall_seconds"]
    out = {"startup_seconds": startup, "epochs": epochs, "store_bytes": m["pfs_bytes"], "rank": job.rank,
           "world_size": job.world_size, "remote_reads": m["remote_reads"],
           "classes": [{k: c.get(k) for k in ("name", "capacity_bytes", "planned_samples", "filled_samples",
                                              "prefetched_samples", "note", "warning") if k in c} for c in m["classes"]]}
    job.close()
    return out


def run_torch(spec: dict) -> dict:
    import multiprocessing

    import torch
    import torchvision
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    rank, world = _mpi_rank_world()
    bytes_read = multiprocessing.Value("q", 0)  # shared with forked workers

    def read_bytes(path):
        with open(path, "rb") as f:
            data = f.read()
        with bytes_read.get_lock():
            bytes_read.value += len(data)
        return torch.frombuffer(bytearray(data), dtype=torch.uint8)

    def read_image(path):
        from PIL import Image
        with open(path, "rb") as f:
            img = Image.open(f)
            img.load()
            size = os.fstat(f.fileno()).st_size
        with bytes_read.get_lock():
            bytes_read.value += size
        return img.convert("RGB")

    t0 = time.perf_counter()
    if spec["kind"] == "torch-transforms":
        dataset = torchvision.datasets.ImageFolder(spec["data"], transform=torchvision_chain(spec["image_size"]),
                                                   loader=read_image)
        collate = None
    else:
        dataset = torchvision.datasets.ImageFolder(spec["data"], loader=read_bytes)
        collate = _collate_list
    workers = spec["workers"]
    torch.manual_seed(spec["seed"])
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=spec["seed"]) \
        if world > 1 else None
    loader = DataLoader(dataset, batch_size=max(1, spec["batch_size"] // world), shuffle=sampler is None,
                        sampler=sampler, num_workers=workers, collate_fn=collate, persistent_workers=workers > 0)
    startup = time.perf_counter() - t0
    epochs = []
    for e in range(spec["epochs"]):
        if sampler is not None:
            sampler.set_epoch(e)
        seconds, stall, n = _consume(loader, spec["step_ms"] / 1000)
        epochs.append({"seconds": seconds, "stall_seconds": stall, "samples": n, "sources": {"pfs": n}})
    del loader  # joins persistent workers, so their CPU time is counted
    gc.collect()
    return {"startup_seconds": startup, "epochs": epochs, "store_bytes": bytes_read.value, "rank": rank,
            "world_size": world}


def _collate_list(batch):
    import torch
    return [x for x, _ in batch], torch.tensor([y for _, y in batch], dtype=torch.int64)


def main() -> None:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    # Imports are not measured: every system pays for torch's the same way.
    if spec["kind"].startswith("hdmlp"):
        import hdmlp.torch  # noqa: F401
        import hdmlp.transforms  # noqa: F401
        if spec["kind"] == "hdmlp-python":
            import PIL.Image  # noqa: F401
            import torchvision.transforms  # noqa: F401
    else:
        import PIL.Image  # noqa: F401
        import torchvision.transforms  # noqa: F401
    torch_threads = spec.get("torch_threads")
    if torch_threads:
        import torch
        torch.set_num_threads(torch_threads)
    cpu0 = _cpu_seconds()  # no descendant yet
    wall0 = time.perf_counter()
    status, error = "ok", None
    global _memory
    with MemorySampler() as mem:
        _memory = mem
        try:
            result = run_hdmlp(spec) if spec["kind"].startswith("hdmlp") else run_torch(spec)
        except Exception as e:  # reported in the table, e.g. a system this build does not have
            status, error = "error", f"{type(e).__name__}: {e}"
            result = {"rank": _mpi_rank_world()[0], "world_size": _mpi_rank_world()[1], "epochs": []}
    result.update({"name": spec["name"], "status": status, "error": error,
                   "cpu_seconds": _cpu_seconds(sum(mem.descendant_cpu.values())) - cpu0,
                   "wall_seconds": time.perf_counter() - wall0, "peak_rss_bytes": mem.peak_rss,
                   "peak_pss_bytes": mem.peak_pss})
    path = os.path.join(spec["out"], f"{spec['name']}-rank{result['rank']}.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    if status != "ok":
        print(f"[{spec['name']}] {error}", file=sys.stderr)


if __name__ == "__main__":
    main()
