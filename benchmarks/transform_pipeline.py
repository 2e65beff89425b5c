"""The ImageNet chains: hdmlp against torchvision, DALI's CPU pipeline and FFCV, side by side.

Every system reads the same generated ImageNet-like folder (page cache warm)
and delivers batches of float32 [B, 3, 224, 224] tensors with their labels,
through one of these chains (--chains, default train,val):

  train   RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(), Normalize(mean, std)
  val     Resize(256), CenterCrop(224), ToTensor(), Normalize(mean, std)
  timm    RandomResizedCrop(224), RandomHorizontalFlip(), TrivialAugmentWide(), ToTensor(),
          Normalize(mean, std), RandomErasing(p=0.25): the timm-style chain of today's
          recipes (hdmlp, the ceilings and torchvision only: DALI and FFCV have no
          TrivialAugmentWide); --chain timm is short for --chains timm

Systems (each run in a process of its own, one after the other):

  hdmlp           hdmlp.Job(transforms=[ImgDecode(), ...]) + HDMLPDataLoader, the default
                  config (staging threads = "auto": the CPUs this process may use)
  hdmlp-draft     the same with ImgDecode(draft=True) (train only; docs/transforms.md)
  hdmlp-fast      the same with ImgDecode(fast=True): speed over bit-parity (libjpeg's
                  DCT scaling per sample, fast IDCT, no fancy upsampling; docs/transforms.md,
                  "Fast decoding"); --fast adds it and ceiling-fast to --systems
  bare            the bare C++ pipeline (hdmlp._core.TransformPipeline.apply) driven from
                  as many Python threads as hdmlp runs staging workers, over files
                  already in memory: no reading, batching or hand-off; hdmlp's ceiling
  bare-draft      the same with the draft decode
  bare-fast       the same with the fast decode
  ceiling         benchmarks/transform_ceiling (C++, built with HDMLP_BUILD_BENCHMARKS; see
                  --ceiling-binary) on the same folder and as many threads, the chain's case
                  only: the bare pipeline without Python, the issue's yardstick
  ceiling-fast    the same, its "<chain>, fast" case
  torchvision-wN  torchvision ImageFolder (PIL) + DataLoader(num_workers=N), N = 0, 1, 2
  dali            NVIDIA DALI's CPU pipeline (device_id=None): fn.readers.file,
                  fn.decoders.image(device="cpu"), fn.random_resized_crop (train) or
                  fn.resize(resize_shorter=256) (val), fn.crop_mirror_normalize (the
                  crop, the flip as mirror=fn.random.coin_flip(), normalisation, CHW),
                  num_threads = the usable CPUs, through DALIGenericIterator
  ffcv            FFCV's Loader over a .beton written first from the same folder (JPEG
                  mode, full resolution, quality 90; its conversion time is reported
                  and not counted), RandomResizedCropRGBImageDecoder or
                  CenterCropRGBImageDecoder(ratio 224/256), RandomHorizontalFlip,
                  NormalizeImage, ToTensor, ToTorchImage; num_workers = the usable CPUs
  spdl            Meta's SPDL, its thread-pool pipeline as its docs recommend for images
                  (PipelineBuilder: decode with concurrency = the usable CPUs, aggregate,
                  collate; build(num_threads = the usable CPUs)): FFmpeg demuxes and decodes
                  each JPEG, its filter graph crops, scales (bilinear) and flips; the batch
                  is made float32 CHW and normalised with torch. Its pixels differ slightly
                  from PIL's (FFmpeg's decoder and swscale's bilinear). Needs Debian's
                  libavfilter8 and libavdevice59 (scripts/dev.sh bench-setup installs them)

Per chain and round, a process of its own also measures the CPU cost per image of
each side's bare chain on one thread, decode included (torchvision's loader and
Compose with torch on one thread, as in DataLoader workers, against hdmlp's
pipeline; --cpu-cost-images, 0 to skip): a ratio that a busy machine distorts
far less than images/s, which favour the system with more runnable threads.

DALI, FFCV and SPDL are optional (``scripts/dev.sh bench-setup``); a system that is
not installed is reported as such and the others still run. With --rounds R
every (chain, system) runs R times, interleaved, so that a change in the
machine's load hits all of them alike; the report gives the per-system
medians and, for each ratio, the median and range of the per-round ratios.
Images/s are the steady state: the mean of the epochs after the first.
The machine's load (load averages, CPU taken by other processes) is recorded
for every run (benchmarks/lab/machine.py) and a busy machine is warned about.

    python benchmarks/transform_pipeline.py --images 4000 --epochs 3 --rounds 3 \\
        --json benchmarks/results/transform_pipeline.json --markdown benchmarks/results/transform_pipeline.md
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if __package__ in (None, ""):  # run as a script: benchmarks/_path.py
    import _path  # noqa: F401
from benchmarks.lab import machine  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
CHAINS = ("train", "val", "timm")
ERASE_P = 0.25  # timm's default re_prob
SYSTEMS = ("hdmlp", "hdmlp-draft", "hdmlp-fast", "ceiling", "ceiling-fast", "bare", "bare-draft", "bare-fast",
           "torchvision-w0", "torchvision-w1", "torchvision-w2", "dali", "ffcv", "spdl")
DEFAULT_SYSTEMS = ("hdmlp", "ceiling", "bare", "torchvision-w0", "torchvision-w1", "torchvision-w2", "dali", "ffcv",
                   "spdl")
CEILING_BINARY = os.path.join(os.path.dirname(HERE), "build", "bench", "transform_ceiling")
BUILD_CEILING = ("cmake -S . -B build/bench -G Ninja -DHDMLP_BUILD_BENCHMARKS=ON -DHDMLP_BUILD_PYTHON=OFF "
                 "-DCMAKE_BUILD_TYPE=Release && cmake --build build/bench --target transform_ceiling")
TRAIN_ONLY = ("hdmlp-draft", "bare-draft")
# hdmlp's per-stage timers (Job.metrics()), reported per image.
STAGES = ("stall_seconds", "assembly_seconds", "next_batch_seconds", "python_seconds", "consumer_seconds",
          "handoff_wait_seconds", "read_seconds", "transform_seconds")


class NotInstalled(Exception):
    pass


# -- one system, in its own process ----------------------------------------------------

def consume(x) -> None:
    # Touch the batch the way a training step's first op would, without a model.
    x[:, 0, 0, 0].sum().item()


class EpochTimer:
    """Images/s and CPU microseconds per image of each epoch; CPU of this process tree
    (worker processes included), so start-up (imports, scans, compilation) is not in it."""

    def __init__(self) -> None:
        self.rates: list[float] = []
        self.cpu_us: list[float] = []
        self.spans: list[tuple[float, float, int]] = []  # wall-clock start, end, images: to line up ranks

    @contextlib.contextmanager
    def epoch(self, images: list[int]):
        ticks0, t0, wall0 = machine.tree_ticks(os.getpid()), time.perf_counter(), time.time()
        yield
        seconds = time.perf_counter() - t0
        self.spans.append((wall0, wall0 + seconds, images[0]))
        cpu = (machine.tree_ticks(os.getpid()) - ticks0) / machine.TICKS_PER_SECOND
        self.rates.append(images[0] / seconds)
        self.cpu_us.append(cpu / max(images[0], 1) * 1e6)

    def result(self) -> dict:
        return {"rates": self.rates, "cpu_us": self.cpu_us, "spans": self.spans}


def epoch_rates(batches_of_epoch, epochs: int) -> dict:
    """Per epoch images/s and CPU us per image; batches_of_epoch(e) yields (images, labels)."""
    timer = EpochTimer()
    for e in range(epochs):
        n = [0]
        with timer.epoch(n):
            for x, y in batches_of_epoch(e):
                consume(x)
                n[0] += len(y)
    return timer.result()


def hdmlp_chain(chain: str, size: int, draft: bool = False, fast: bool = False) -> list:
    import hdmlp.transforms as T
    decode = T.ImgDecode(draft=draft, fast=fast)
    if chain == "timm":
        return [decode, T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.TrivialAugmentWide(),
                T.ToTensor(), T.Normalize(MEAN, STD), T.RandomErasing(ERASE_P)]
    head = [T.RandomResizedCrop(size), T.RandomHorizontalFlip()] if chain == "train" \
        else [T.Resize(size * 256 // 224), T.CenterCrop(size)]
    return [decode] + head + [T.ToTensor(), T.Normalize(MEAN, STD)]


def torchvision_chain(chain: str, size: int):
    import torchvision.transforms as TV
    if chain == "timm":
        return TV.Compose([TV.RandomResizedCrop(size), TV.RandomHorizontalFlip(), TV.TrivialAugmentWide(),
                           TV.ToTensor(), TV.Normalize(MEAN, STD), TV.RandomErasing(ERASE_P)])
    head = [TV.RandomResizedCrop(size), TV.RandomHorizontalFlip()] if chain == "train" \
        else [TV.Resize(size * 256 // 224), TV.CenterCrop(size)]
    return TV.Compose(head + [TV.ToTensor(), TV.Normalize(MEAN, STD)])


def run_hdmlp(spec: dict) -> dict:
    import hdmlp
    from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder
    job = hdmlp.Job(spec["root"], spec["batch_size"], spec["epochs"],
                    transforms=hdmlp_chain(spec["chain"], spec["size"], spec["system"] == "hdmlp-draft",
                                           spec["system"] == "hdmlp-fast"), seed=1,
                    config_path=spec.get("config"))
    loader = HDMLPDataLoader(HDMLPImageFolder(spec["root"], job))
    out = epoch_rates(lambda e: loader, spec["epochs"])
    m = job.metrics()
    # Each epoch's wall time beside its stages, to read them as shares.
    stages = [{k: e.get(k, 0.0) for k in STAGES + ("samples",)} | {"epoch_seconds": end - begin}
              for e, (begin, end, _) in zip(m["epochs"], out["spans"])]
    out |= {"threads": m["staging"]["threads"], "stages": stages,
           "batch_allocations": job.batch_allocations}
    job.close()
    return out


def files_in_memory(root: str) -> tuple[list[str], list[bytes]]:
    """The folder's sample paths in hdmlp's index order and their bytes, read once."""
    import hdmlp
    with hdmlp.Job(root, 1, 1) as probe:
        paths = [p for p, _ in probe.samples]
    files = []
    for p in paths:
        with open(p, "rb") as f:
            files.append(f.read())
    return paths, files


def apply_in_threads(pipeline, paths: list[str], files: list[bytes], epoch: int, threads: int) -> None:
    """The bare C++ pipeline over every file, on ``threads`` Python threads taking the next file in
    turn (``apply`` releases the GIL); seed 1, as the hdmlp jobs of these benchmarks."""
    lock, position = threading.Lock(), [0]

    def work():
        while True:
            with lock:
                i = position[0]
                position[0] += 1
            if i >= len(files):
                return
            pipeline.apply(files[i], paths[i], 1, epoch, i)

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()


def run_bare(spec: dict) -> dict:
    import hdmlp.transforms as T
    paths, files = files_in_memory(spec["root"])
    pipeline = T.compile_pipeline(hdmlp_chain(spec["chain"], spec["size"], spec["system"] == "bare-draft",
                                              spec["system"] == "bare-fast"))
    threads = spec["threads"]
    timer = EpochTimer()
    for epoch in range(spec["epochs"]):
        with timer.epoch([len(files)]):
            apply_in_threads(pipeline, paths, files, epoch, threads)
    return timer.result() | {"threads": threads}


def run_ceiling(spec: dict) -> dict:
    """transform_ceiling's chain case on `threads` threads; its passes are the steady epochs."""
    binary = spec["ceiling_binary"]
    if not os.path.exists(binary):
        raise NotInstalled(f"{binary} is not built ({BUILD_CEILING})")
    passes = max(spec["epochs"] - 1, 1)
    case = spec["chain"] + (", fast" if spec["system"] == "ceiling-fast" else "")
    out = subprocess.run([binary, "--root", spec["root"], "--images", str(spec["images"]), "--passes", str(passes),
                          "--threads", str(spec["threads"]), "--case", case, "--no-single-thread"],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():  # "train, fast  2  1838  919  1050  0.02"
        if not line.startswith(case + "  "):
            continue
        fields = line[len(case):].split()
        if len(fields) >= 4 and fields[0] == str(spec["threads"]):
            ips, cpu_us = float(fields[1]), float(fields[3])
            # One "epoch" of start-up (reading the files, warming up) and the measured passes.
            return {"rates": [ips, ips], "cpu_us": [cpu_us, cpu_us], "threads": spec["threads"]}
    raise RuntimeError(f"no '{case}' row in transform_ceiling's output:\n{out[-2000:]}")


def run_torchvision(spec: dict) -> dict:
    import torchvision
    from torch.utils.data import DataLoader
    dataset = torchvision.datasets.ImageFolder(spec["root"], transform=torchvision_chain(spec["chain"], spec["size"]))
    workers = int(spec["system"].rsplit("-w", 1)[1])
    loader = DataLoader(dataset, batch_size=spec["batch_size"], shuffle=True, num_workers=workers,
                        persistent_workers=workers > 0)
    return epoch_rates(lambda e: loader, spec["epochs"]) | {"workers": workers}


def run_cpu_cost(spec: dict) -> dict:
    """CPU microseconds per image of each side's bare chain on one thread, decode included
    (the process's CPU clock: other jobs on the machine distort it far less than images/s)."""
    import torch
    import torchvision
    import hdmlp.transforms as T
    dataset = torchvision.datasets.ImageFolder(spec["root"])
    paths = [p for p, _ in dataset.samples[:spec["cpu_cost_images"]]]
    files = []
    for p in paths:
        with open(p, "rb") as f:
            files.append(f.read())
    torch.set_num_threads(1)  # as in DataLoader workers
    transform = torchvision_chain(spec["chain"], spec["size"])
    t0 = time.process_time()
    for p in paths:
        transform(dataset.loader(p))
    tv = (time.process_time() - t0) / len(paths) * 1e6
    pipeline = T.compile_pipeline(hdmlp_chain(spec["chain"], spec["size"]))
    t0 = time.process_time()
    for i, data in enumerate(files):
        pipeline.apply(data, "x", 1, 0, i)
    ours = (time.process_time() - t0) / len(paths) * 1e6
    return {"cpu_cost": {"torchvision_us": tv, "hdmlp_us": ours, "ratio": tv / ours, "images": len(paths)}}


class NotComparable(Exception):
    pass


def run_dali(spec: dict) -> dict:
    if spec["chain"] == "timm":
        raise NotComparable("DALI has no TrivialAugmentWide")
    try:
        from nvidia.dali import fn, pipeline_def, types
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy
    except ImportError as e:
        raise NotInstalled(f"nvidia-dali-cuda120 is not installed ({e})") from e
    size, threads = spec["size"], spec["threads"]

    @pipeline_def(batch_size=spec["batch_size"], num_threads=threads, device_id=None, seed=1)
    def pipeline():
        jpegs, labels = fn.readers.file(file_root=spec["root"], random_shuffle=True, name="Reader")
        images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
        if spec["chain"] == "train":
            images = fn.random_resized_crop(images, size=(size, size))
            mirror = fn.random.coin_flip(probability=0.5)
        else:
            images = fn.resize(images, resize_shorter=size * 256 // 224)
            mirror = 0
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", crop=(size, size),
                                          mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD], mirror=mirror)
        return images, labels

    pipe = pipeline()
    pipe.build()
    it = DALIGenericIterator(pipe, ["data", "label"], reader_name="Reader",
                             last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True)

    def batches(_):
        for b in it:
            yield b[0]["data"], b[0]["label"]

    import nvidia.dali
    return epoch_rates(batches, spec["epochs"]) | {"threads": threads, "version": nvidia.dali.__version__}


def random_resized_crop_box(width: int, height: int, rng, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """RandomResizedCrop's box (x, y, w, h) drawn from an image's size: an area share in ``scale``
    and a log-uniform aspect ratio in ``ratio``, 10 tries, then the whole image cut to the nearest
    ratio in range, centred (the algorithm torchvision documents)."""
    area = width * height
    for _ in range(10):
        target = area * rng.uniform(*scale)
        aspect = math.exp(rng.uniform(math.log(ratio[0]), math.log(ratio[1])))
        w, h = round(math.sqrt(target * aspect)), round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, width - w), rng.randint(0, height - h), w, h
    aspect = width / height
    if aspect < ratio[0]:
        w, h = width, round(width / ratio[0])
    elif aspect > ratio[1]:
        w, h = round(height * ratio[1]), height
    else:
        w, h = width, height
    return (width - w) // 2, (height - h) // 2, w, h


def run_spdl(spec: dict) -> dict:
    """Meta's SPDL as its docs recommend for images: one thread pool runs the pipeline's stages
    (PipelineBuilder: source, decode with concurrency = threads, aggregate into batches, collate),
    FFmpeg demuxes and decodes each JPEG and its filter graph crops, scales (bilinear) and flips
    it to RGB; the batch is one uint8 [B, H, W, 3] buffer (convert_frames) made a float32
    [B, 3, H, W] tensor and normalised with torch, as ToTensor + Normalize."""
    if spec["chain"] == "timm":
        raise NotComparable("SPDL has no TrivialAugmentWide")
    try:
        import spdl.io
        from spdl.pipeline import PipelineBuilder
    except ImportError as e:
        raise NotInstalled(f"spdl is not installed ({e}; it needs Debian's libavfilter8 and libavdevice59: "
                           "scripts/dev.sh bench-setup)") from e
    import random

    import torch
    size, threads, root = spec["size"], spec["threads"], spec["root"]
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    samples = [(os.path.join(d, f), label) for label, c in enumerate(classes)
               for d, _, files in sorted(os.walk(os.path.join(root, c))) for f in sorted(files)
               if f.lower().endswith((".jpg", ".jpeg", ".png"))]
    mean = torch.tensor(MEAN).view(1, 3, 1, 1) * 255
    std = torch.tensor(STD).view(1, 3, 1, 1) * 255

    def decode(item):
        path, label, seed = item
        packets = spdl.io.demux_image(path)
        if spec["chain"] == "train":
            rng = random.Random(seed)
            x, y, w, h = random_resized_crop_box(packets.width, packets.height, rng)
            flip = ",hflip" if rng.random() < 0.5 else ""
            desc = f"crop={w}:{h}:{x}:{y}:exact=1,scale={size}:{size}:flags=bilinear{flip},format=pix_fmts=rgb24"
        else:  # Resize(256) of the shorter side, then the centre 224 x 224
            short = size * 256 // 224
            w, h = packets.width, packets.height
            sw, sh = (short, int(short * h / w)) if w <= h else (int(short * w / h), short)
            desc = (f"scale={sw}:{sh}:flags=bilinear,crop={size}:{size}:{(sw - size) // 2}:{(sh - size) // 2}:"
                    "exact=1,format=pix_fmts=rgb24")
        return spdl.io.decode_packets(packets, filter_desc=desc), label

    def collate(items):
        frames = spdl.io.convert_frames([f for f, _ in items])
        x = spdl.io.to_torch(frames).permute(0, 3, 1, 2).float().sub_(mean).div_(std)
        return x, torch.tensor([label for _, label in items], dtype=torch.int64)

    def batches(epoch):
        order = list(range(len(samples)))
        random.Random(1000 + epoch).shuffle(order)
        source = [(samples[i][0], samples[i][1], epoch * len(samples) + i) for i in order]
        pipeline = (PipelineBuilder().add_source(source).pipe(decode, concurrency=threads)
                    .aggregate(spec["batch_size"]).pipe(collate).add_sink(3).build(num_threads=threads))
        with pipeline.auto_stop():
            yield from pipeline.get_iterator()

    from importlib.metadata import version
    return epoch_rates(batches, spec["epochs"]) | {"threads": threads, "version": version("spdl")}


def ffcv_pipelines(chain: str, size: int):
    import numpy as np
    from ffcv.fields.decoders import CenterCropRGBImageDecoder, IntDecoder, RandomResizedCropRGBImageDecoder
    from ffcv.transforms import NormalizeImage, RandomHorizontalFlip, Squeeze, ToTensor, ToTorchImage
    mean, std = np.array(MEAN) * 255, np.array(STD) * 255
    head = [RandomResizedCropRGBImageDecoder((size, size)), RandomHorizontalFlip()] if chain == "train" \
        else [CenterCropRGBImageDecoder((size, size), ratio=224 / 256)]
    # ToTorchImage's default: [B, 3, H, W] in channels-last memory, what FFCV hands a model.
    return {"image": head + [NormalizeImage(mean, std, np.float32), ToTensor(), ToTorchImage()],
            "label": [IntDecoder(), ToTensor(), Squeeze()]}


def write_beton(root: str, path: str, workers: int) -> float:
    """Writes the folder as an FFCV dataset; returns the seconds it took."""
    import torchvision
    from ffcv.fields import IntField, RGBImageField
    from ffcv.writer import DatasetWriter
    t0 = time.perf_counter()
    dataset = torchvision.datasets.ImageFolder(root)
    writer = DatasetWriter(path, {"image": RGBImageField(write_mode="jpg", jpeg_quality=90),
                                  "label": IntField()}, num_workers=workers)
    writer.from_indexed_dataset(dataset)
    return time.perf_counter() - t0


def run_ffcv(spec: dict) -> dict:
    if spec["chain"] == "timm":
        raise NotComparable("FFCV has no TrivialAugmentWide")
    try:
        import ffcv
        from ffcv.loader import Loader, OrderOption
    except ImportError as e:
        raise NotInstalled(f"ffcv is not installed ({e})") from e
    loader = Loader(spec["beton"], batch_size=spec["batch_size"], num_workers=spec["threads"],
                    order=OrderOption.RANDOM, os_cache=True, drop_last=False, seed=1,
                    pipelines=ffcv_pipelines(spec["chain"], spec["size"]))
    return epoch_rates(lambda e: loader, spec["epochs"]) | {"threads": spec["threads"],
                                                             "version": getattr(ffcv, "__version__", "")}


def worker_main(spec_path: str) -> None:
    with open(spec_path) as f:
        spec = json.load(f)
    run = {"hdmlp": run_hdmlp, "hdmlp-draft": run_hdmlp, "hdmlp-fast": run_hdmlp, "bare": run_bare,
           "bare-draft": run_bare, "bare-fast": run_bare, "ceiling": run_ceiling, "ceiling-fast": run_ceiling,
           "dali": run_dali, "ffcv": run_ffcv, "spdl": run_spdl, "cpu-cost": run_cpu_cost}.get(spec["system"], run_torchvision)
    try:
        result = {"status": "ok", **run(spec)}
    except NotInstalled as e:
        result = {"status": "not installed", "error": str(e)}
    except NotComparable as e:
        result = {"status": "no equivalent", "error": str(e)}
    except Exception as e:  # reported in the table; the other systems still run
        import traceback
        traceback.print_exc()
        result = {"status": "error", "error": f"{type(e).__name__}: {e}"}
    out = spec["out"]
    if int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1")) > 1:  # under mpirun: one file per rank
        out += f".rank{os.environ['OMPI_COMM_WORLD_RANK']}"
    with open(out, "w") as f:
        json.dump(result, f)


# -- the driver -------------------------------------------------------------------------

def steady(rates: list[float]) -> float:
    later = rates[1:] or rates
    return sum(later) / len(later)


def run_system(spec: dict, work: str, recorder: machine.LoadRecorder, timeout: float) -> dict:
    name = f"{spec['chain']}/{spec['system']}"
    spec = dict(spec, out=os.path.join(work, "result.json"))
    spec_path = os.path.join(work, "spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    if os.path.exists(spec["out"]):
        os.remove(spec["out"])
    log_path = os.path.join(work, f"{spec['chain']}-{spec['system']}.log")
    with open(log_path, "w") as log, recorder.run(name):
        try:
            rc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", spec_path], stdout=log,
                                stderr=subprocess.STDOUT, timeout=timeout, cwd=os.path.dirname(HERE)).returncode
        except subprocess.TimeoutExpired:
            rc = f"timed out after {timeout:g} s"
    load = recorder.last(name)
    if rc != 0 or not os.path.exists(spec["out"]):
        with open(log_path) as f:
            tail = f.read().strip().splitlines()[-1:] or [f"exit status {rc}"]
        return {"status": "error", "error": f"exit status {rc}: {tail[0]}", "load": load}
    with open(spec["out"]) as f:
        result = json.load(f)
    result["load"] = load
    if result["status"] == "ok" and "rates" in result:
        result["steady"] = steady(result["rates"])
        result["cpu_us_per_image"] = steady(result["cpu_us"])
    return result


def ratio_keys(chain: str, systems: list[str]) -> list[tuple[str, str, str]]:
    """(key, numerator, denominator) of the ratios reported for a chain."""
    keys = []
    if "hdmlp" in systems:
        keys.append((f"{chain}: hdmlp / best torchvision", "hdmlp", "best torchvision"))
        for other in ("ceiling", "bare", "dali", "ffcv", "spdl"):
            if other in systems:
                keys.append((f"{chain}: hdmlp / {other}", "hdmlp", other))
    if "hdmlp-draft" in systems and "bare-draft" in systems:
        keys.append((f"{chain}: hdmlp-draft / bare-draft", "hdmlp-draft", "bare-draft"))
    if "hdmlp-fast" in systems:
        keys.append((f"{chain}: hdmlp-fast / best torchvision", "hdmlp-fast", "best torchvision"))
        for other in ("ceiling-fast", "bare-fast", "dali", "ffcv", "spdl", "hdmlp"):
            if other in systems:
                keys.append((f"{chain}: hdmlp-fast / {other}", "hdmlp-fast", other))
    return keys


def per_round_ratios(run: dict, chain: str, systems: list[str]) -> dict[str, float]:
    ok = {s: r["steady"] for s, r in run.get(chain, {}).items() if r.get("status") == "ok"}
    tv = [v for s, v in ok.items() if s.startswith("torchvision")]
    if tv:
        ok["best torchvision"] = max(tv)
    return {key: ok[a] / ok[b] for key, a, b in ratio_keys(chain, systems) if a in ok and b in ok}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=4000)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--chains", default="train,val", help="comma-separated: train, val, timm")
    ap.add_argument("--chain", choices=["classic", "timm"], default=None,
                    help="short for --chains train (classic) or --chains timm")
    ap.add_argument("--cpu-cost-images", type=int, default=300,
                    help="images for the per-image CPU cost of each side's bare chain on one thread (0: skip)")
    ap.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS),
                    help=f"comma-separated subset of: {', '.join(SYSTEMS)} (default: %(default)s)")
    ap.add_argument("--fast", action="store_true", help="add hdmlp-fast and ceiling-fast to --systems")
    ap.add_argument("--rounds", "--repeats", type=int, default=3, help="run every system this many times, interleaved")
    ap.add_argument("--threads", type=int, default=None,
                    help="threads of bare, DALI and FFCV (default: what hdmlp's threads = \"auto\" gives)")
    ap.add_argument("--data", default=None, help="dataset folder (generated there once)")
    ap.add_argument("--ceiling-binary", default=CEILING_BINARY,
                    help=f"transform_ceiling (default: %(default)s, built by: {BUILD_CEILING})")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds one system may run")
    ap.add_argument("--json", default=None)
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker_main(args.worker)

    recorder = machine.LoadRecorder()  # first: the load before this benchmark does anything
    import hdmlp
    from hdmlp.cpu_budget import usable_cpus
    from hdmlp.datasets import make_image_folder

    if args.chain:
        args.chains = "train" if args.chain == "classic" else "timm"
    chains = [c for c in args.chains.split(",") if c]
    systems = [s for s in args.systems.split(",") if s]
    if args.fast:
        systems += [s for s in ("hdmlp-fast", "ceiling-fast") if s not in systems]
    unknown = [c for c in chains if c not in CHAINS] + [s for s in systems if s not in SYSTEMS]
    if unknown:
        ap.error(f"unknown chain or system: {', '.join(unknown)}")
    threads = args.threads or usable_cpus()
    root = args.data or os.path.join(hdmlp.user_cache_dir(), "datasets", f"bench-{args.images}-{args.classes}")
    make_image_folder(root, num_images=args.images, num_classes=args.classes, seed=0)
    with hdmlp.Job(root, 1, 1) as probe:
        paths = [p for p, _ in probe.samples]
    dataset_bytes = 0
    for p in paths:  # warm the page cache for everyone
        with open(p, "rb") as f:
            dataset_bytes += len(f.read())
    facts = machine.machine_facts()
    print(f"{len(paths)} JPEGs, {dataset_bytes / 1e6:.0f} MB; {machine.describe_facts(facts)}")

    work = tempfile.mkdtemp(prefix="hdmlp-transform-pipeline-")
    beton = {"path": os.path.join(work, "dataset.beton")}
    base = {"root": root, "epochs": args.epochs, "batch_size": args.batch_size, "size": args.size,
            "images": len(paths), "threads": threads, "beton": beton["path"],
            "ceiling_binary": os.path.abspath(args.ceiling_binary), "cpu_cost_images": args.cpu_cost_images}
    if "ffcv" in systems:
        try:
            import ffcv  # noqa: F401
            with recorder.run("ffcv .beton conversion"):
                beton["seconds"] = write_beton(root, beton["path"], threads)
            beton["bytes"] = os.path.getsize(beton["path"])
            print(f"ffcv: wrote {beton['path']} ({beton['bytes'] / 1e6:.0f} MB) in {beton['seconds']:.1f} s "
                  f"(not counted in its epochs)")
        except ImportError as e:
            beton["error"] = f"ffcv is not installed ({e})"
    runs: list[dict] = []
    try:
        for r in range(args.rounds):
            run: dict[str, dict] = {}
            for chain in chains:
                run[chain] = {}
                for system in systems:
                    if chain != "train" and system in TRAIN_ONLY:
                        continue
                    if system == "ffcv" and "error" in beton:
                        run[chain][system] = {"status": "not installed", "error": beton["error"]}
                        continue
                    res = run_system(dict(base, chain=chain, system=system), work, recorder, args.timeout)
                    run[chain][system] = res
                    shown = f"{res['steady']:7.0f} img/s (epochs: {', '.join(f'{x:.0f}' for x in res['rates'])})" \
                        if res["status"] == "ok" else f"{res['status']}: {res.get('error', '')}"
                    busy = " [busy: others used %.2f cores]" % res["load"]["other_cores"] if res["load"]["busy"] else ""
                    print(f"round {r + 1}/{args.rounds} {chain:5s} {system:15s} {shown}{busy}", flush=True)
                if args.cpu_cost_images > 0:
                    res = run_system(dict(base, chain=chain, system="cpu-cost"), work, recorder, args.timeout)
                    run.setdefault("cpu_cost", {})[chain] = res
                    if res["status"] == "ok":
                        c = res["cpu_cost"]
                        print(f"round {r + 1}/{args.rounds} {chain:5s} CPU cost per image on one thread: torchvision "
                              f"{c['torchvision_us']:.0f} us, hdmlp {c['hdmlp_us']:.0f} us, {c['ratio']:.2f}x", flush=True)
            runs.append(run)
    finally:
        import shutil
        shutil.rmtree(work, ignore_errors=True)
    load = recorder.finish()

    result = summarise(runs, chains, systems, args, facts, load, beton, len(paths), dataset_bytes)
    machine.publish(result, render(result), args.json, args.markdown,
                    "ImageNet chains: hdmlp against torchvision, DALI, FFCV and SPDL", "benchmarks/transform_pipeline.py",
                    load)


def summarise(runs, chains, systems, args, facts, load, beton, images, dataset_bytes) -> dict:
    table: dict[str, dict] = {}
    for chain in chains:
        table[chain] = {}
        for system in systems:
            rs = [run[chain][system] for run in runs if system in run.get(chain, {})]
            if not rs:
                continue
            ok = [r for r in rs if r["status"] == "ok"]
            row = {"status": "ok" if ok else rs[0]["status"], "error": None if ok else rs[0].get("error")}
            if ok:
                row.update(steady=statistics.median(r["steady"] for r in ok), rounds=[r["steady"] for r in ok],
                           cpu_us_per_image=statistics.median(r["cpu_us_per_image"] for r in ok),
                           threads=ok[0].get("threads", ok[0].get("workers")), version=ok[0].get("version"))
                if ok[0].get("stages"):
                    row["stages_us_per_image"] = stage_profile([r["stages"] for r in ok])
            table[chain][system] = row
    ratios = {}
    for chain in chains:
        per_round = [per_round_ratios(run, chain, systems) for run in runs]
        for key, _, _ in ratio_keys(chain, systems):
            values = [p[key] for p in per_round if key in p]
            if values:
                ratios[key] = {"median": statistics.median(values), "min": min(values), "max": max(values),
                               "rounds": values}
    cpu_cost = {}
    for chain in chains:
        costs = [run["cpu_cost"][chain]["cpu_cost"] for run in runs
                 if run.get("cpu_cost", {}).get(chain, {}).get("status") == "ok"]
        if costs:
            cpu_cost[chain] = {k: statistics.median(c[k] for c in costs) for k in costs[0]} | \
                {"rounds": [c["ratio"] for c in costs]}
    argv = [a for a in sys.argv[1:]]
    return {"command": "python benchmarks/transform_pipeline.py " + " ".join(shlex.quote(a) for a in argv),
            "machine": facts, "load": load, "dataset": {"images": images, "bytes": dataset_bytes},
            "args": {k: v for k, v in vars(args).items() if k not in ("worker",)},
            "ffcv_conversion": beton, "systems": table, "ratios": ratios, "cpu_cost": cpu_cost, "runs": runs}


def stage_profile(stages_per_round: list[list[dict]]) -> dict[str, float]:
    """hdmlp's per-stage timers over the steady epochs, microseconds per image, median over rounds."""
    per_round = []
    for stages in stages_per_round:
        later = stages[1:] or stages
        n = sum(e["samples"] for e in later) or 1
        per_round.append({k: sum(e[k] for e in later) / n * 1e6 for k in STAGES + ("epoch_seconds",)})
    return {k: statistics.median(p[k] for p in per_round) for k in per_round[0]}


LABELS = {"hdmlp": "hdmlp", "hdmlp-draft": "hdmlp, draft decode", "hdmlp-fast": "hdmlp, fast decode",
          "ceiling": "transform_ceiling (C++, the ceiling)", "ceiling-fast": "transform_ceiling, fast decode",
          "bare": "bare pipeline from Python threads",
          "bare-draft": "bare C++ pipeline, draft decode", "bare-fast": "bare C++ pipeline, fast decode", "dali": "DALI CPU pipeline", "ffcv": "FFCV", "spdl": "SPDL (thread pool, FFmpeg)",
          "torchvision-w0": "torchvision DataLoader w=0", "torchvision-w1": "torchvision DataLoader w=1",
          "torchvision-w2": "torchvision DataLoader w=2"}


def render(result: dict) -> str:
    a, f = result["args"], result["machine"]
    lines = [f"Machine: {machine.describe_facts(f)}.  ",
             f"Dataset: {result['dataset']['images']} generated ImageNet-like JPEGs "
             f"({result['dataset']['bytes'] / 1e6:.0f} MB), page cache warm. Batch {a['batch_size']}, "
             f"{a['size']}x{a['size']} float32, {a['epochs']} epochs per run; images/s = the mean of the epochs "
             f"after the first; {a['rounds']} round(s), every system in its own process once per round, interleaved; "
             f"the table gives medians over the rounds; CPU us/image: the system's whole process tree (worker "
             f"processes included) over the same epochs.  "]
    lines += [line + "  " for line in machine.report_lines(result["load"])]
    beton = result["ffcv_conversion"]
    if "seconds" in beton:
        lines.append(f"FFCV's .beton (JPEG, quality 90, full resolution): {beton['bytes'] / 1e6:.0f} MB written in "
                     f"{beton['seconds']:.1f} s before the runs, not counted.  ")
    for chain, rows in result["systems"].items():
        lines += ["", f"**{chain}** chain", "",
                  "| system | threads/workers | images/s (median) | per round | CPU us/image | vs hdmlp |",
                  "|---|---:|---:|---|---:|---:|"]
        hd = rows.get("hdmlp", {}).get("steady")
        for name, row in rows.items():
            if row["status"] != "ok":
                lines.append(f"| {LABELS[name]} | | {row['status']} | {row['error'] or ''} | | |")
                continue
            vs = f"{row['steady'] / hd:.2f}x" if hd else ""
            lines.append(f"| {LABELS[name]} | {row['threads'] if row['threads'] is not None else ''} | "
                         f"{row['steady']:.0f} | {', '.join(f'{x:.0f}' for x in row['rounds'])} | "
                         f"{row['cpu_us_per_image']:.0f} | {vs} |")
        prof = rows.get("hdmlp", {}).get("stages_us_per_image")
        if prof:
            lines += ["", f"Where hdmlp's time goes ({chain}, steady epochs, microseconds per image; the workers' "
                          "columns are summed over the workers): " +
                      ", ".join(f"{k.replace('_seconds', '').replace('_', ' ')} {v:.0f}" for k, v in prof.items())
                      + "."]
    for chain, c in result.get("cpu_cost", {}).items():
        lines += ["", f"CPU cost per image of the bare {chain} chain on one thread, decode included (process CPU clock, "
                      f"which other jobs distort far less than images/s): torchvision {c['torchvision_us']:.0f} us, "
                      f"hdmlp {c['hdmlp_us']:.0f} us, **{c['ratio']:.2f}x** (rounds: "
                      f"{', '.join(f'{x:.2f}x' for x in c['rounds'])})."]
    if result["ratios"]:
        lines += ["", "| ratio (per round, then median) | median | range |", "|---|---:|---|"]
        for key, r in result["ratios"].items():
            pct = "/ bare" in key or "/ ceiling" in key
            fmt = (lambda x: f"{x * 100:.0f}%") if pct else (lambda x: f"{x:.2f}x")
            lines.append(f"| {key} | **{fmt(r['median'])}** | {fmt(r['min'])} to {fmt(r['max'])} |")
    lines += ["", f"Command: `{result['command']}`"]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
