"""Decoding on the device: ``ImgDecode(device="cuda")`` for when the CPU cannot decode fast enough.

hdmlp still reads, caches and plans the bytes; the staging workers hand over each sample's file
bytes, and this module turns a batch of them into one ``[B, C, H, W]`` batch on the device:

* JPEGs are decoded by the device, the whole batch in one call: by torchvision's ``decode_jpeg``
  (nvJPEG: the GPU's JPEG engines where it has them; on ``device="cpu"`` the same call runs
  libjpeg-turbo, which is how the tests run this code without a GPU), or by hdmlp's own nvJPEG
  decoder (:mod:`hdmlp.device.nvjpeg`: the Huffman decode on the GPU where it has no engines; files
  checked in C++, no GIL). ``ImgDecode(decoder=)`` picks one (:func:`jpeg_decoder_for`).
* Each sample's crop and flip are the C++ chain's: drawn from (seed, epoch, sample) and the image's
  size by the chain's own :meth:`random_draws`, so they are the same as the CPU would draw.
* Crop, resize and flip run as a few batched tensor operations for the whole batch
  (:func:`hdmlp.device.resize.resize_crops`), not as a kernel per image.
* ``cpu_share`` of each batch (and every sample the device cannot decode: PNGs, CMYK JPEGs, a
  corrupt file, which then gets the C++ chain's error naming it) is decoded by the C++ chain on
  CPU threads at the same time (hybrid). The two parts are merged in batch order.
* The chain's end, ``ToTensor()`` and ``Normalize`` (or ``ToUint8()``), and ``channels_last`` run
  on the device, as :mod:`hdmlp.device.feeder` does for the 8-bit hand-off.

The values differ from the CPU chain only by the decoders' rounding (nvJPEG's IDCT and chroma
upsampling are not libjpeg-turbo's) and float rounding in the resize: docs/gpu.md gives the
measured difference. Everything runs in a decoder thread on a side CUDA stream, ahead of the
training loop (``ahead`` batches); the training stream waits on an event.

Supported chains: ``ImgDecode(device=...)``, ``RandomResizedCrop(size, scale, ratio)`` (bilinear,
antialias), optionally ``RandomHorizontalFlip(p)``, then ``ToTensor()`` [``Normalize(mean, std)``]
or ``ToUint8()``. Anything else raises ValueError naming the op.

Thread-safety: a :class:`DeviceDecoder` is used by one pass's feeder; its threads are its own and
end with :meth:`DeviceDecoder.close` (a pass's end, a ``break``, a deleted job).
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from hdmlp.batches import Batch
from hdmlp.device.feeder import DeviceFeeder, InFlight, check_ahead, streams_for
from hdmlp.device.hand_off import FloatTail, check_channels_last
from hdmlp.device.host_tensors import host_tensors
from hdmlp.device.resize import resize_crops, upload
from hdmlp.device.streams import Streams
from hdmlp.transforms import JPEG_DECODERS

__all__ = ["DecodeChain", "DeviceDecoder", "plan_device_decode", "resize_crops"]

_BILINEAR = 2
SUPPORTED = ("ImgDecode(device=...), RandomResizedCrop(size, scale, ratio) with bilinear interpolation and "
             "antialias, optionally RandomHorizontalFlip(p), then ToTensor() [and Normalize(mean, std)] or ToUint8()")


@dataclasses.dataclass(frozen=True)
class DecodeChain:
    """A chain that decodes on the device, as planned from its specs.

    ``cpu_specs`` is the same chain ending in ``ToUint8()`` for the C++ pipeline: it draws every
    sample's crop and flip, and decodes the CPU's share. ``tail`` is what the device computes
    after the 8-bit images (None: they are the output).
    """

    cpu_specs: list
    size: tuple[int, int]  # (height, width) of the output
    tail: FloatTail | None
    cpu_share: float
    decoder: str = "auto"  # one of hdmlp.transforms.JPEG_DECODERS


def plan_device_decode(specs: Sequence[tuple[str, dict]], cpu_share: float, decoder: str = "auto") -> DecodeChain:
    """Checks that ``specs`` (the chain, its ``ImgDecode`` first) can decode on the device."""
    specs = list(specs)
    if not specs or specs[0][0] != "ImgDecode":
        raise ValueError("ImgDecode(device=...) must be the chain's first transform")

    def unsupported(op: str, why: str) -> ValueError:
        return ValueError(f"ImgDecode(device=...): {op} {why}; a chain that decodes on the device is {SUPPORTED}. "
                          "Run other chains on the CPU (ImgDecode() without device, and device= on the Job)")

    if len(specs) < 2 or specs[1][0] != "RandomResizedCrop":
        raise unsupported(specs[1][0] if len(specs) > 1 else "a chain of ImgDecode alone",
                          "cannot follow it" if len(specs) > 1 else "gives images of different sizes")
    crop = specs[1][1]
    if int(crop["interpolation"][0]) != _BILINEAR or not crop["antialias"][0]:
        raise unsupported("RandomResizedCrop", "with other than bilinear, antialiased resizing is not supported")
    size = (int(crop["size"][0]), int(crop["size"][-1]))
    rest = specs[2:]
    if rest and rest[0][0] == "RandomHorizontalFlip":
        rest = rest[1:]
    cpu = specs[:len(specs) - len(rest)]
    tail: FloatTail | None
    names = [op for op, _ in rest]
    if names == ["ToTensor"]:
        tail = FloatTail()
    elif names == ["ToTensor", "Normalize"]:
        tail = FloatTail(tuple(rest[1][1]["mean"]), tuple(rest[1][1]["std"]))
    elif names == ["ToUint8"] and rest[0][1].get("layout", [0.0]) == [0.0]:
        tail = None
    else:
        raise unsupported(rest[0][0] if rest else "a chain without ToTensor() or ToUint8() at its end",
                          "at this place is not supported" if rest else "is not supported")
    if isinstance(cpu_share, bool) or not isinstance(cpu_share, (int, float)) or not 0.0 <= cpu_share <= 1.0:
        raise ValueError(f"ImgDecode(cpu_share=...) must be a number in [0, 1] (the share of each batch decoded "
                         f"by the CPU), got {cpu_share!r}")
    if decoder not in JPEG_DECODERS:
        raise ValueError(f"ImgDecode(decoder=...) must be one of {', '.join(map(repr, JPEG_DECODERS))}, "
                         f"got {decoder!r}")
    return DecodeChain(cpu + [("ToUint8", {"layout": [0.0]})], size, tail, float(cpu_share), decoder)


# The resize's matrix products: None is float16 on CUDA (tensor cores: the values within 2 levels of float32's,
# 2.7% of them differing, and the device decode 5% faster end to end; docs/gpu.md), float32 elsewhere.
RESIZE_DTYPE: torch.dtype | None = None


_FRAME_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # SOF0-15 (not DHT, JPG, DAC)


def device_decodable(sample: torch.Tensor) -> bool:
    """A JPEG of 1 or 3 components that ends in its end-of-image marker. Others go to the C++ chain:
    CMYK (which it converts as PIL does), other formats, and a file cut short, which it names in its
    error rather than a device decoder filling the missing part silently."""
    data = memoryview(sample.numpy()) if sample.device.type == "cpu" else memoryview(sample.cpu().numpy())
    n = len(data)
    if n < 8 or data[0] != 0xFF or data[1] != 0xD8 or data[n - 2] != 0xFF or data[n - 1] != 0xD9:
        return False
    at = 2
    while at + 9 < n:  # the segments before the frame header: marker, 16-bit length
        if data[at] != 0xFF:
            return False
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in _FRAME_MARKERS:
            return data[at + 9] in (1, 3)
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            at += 2
            continue
        at += 2 + (data[at + 2] << 8 | data[at + 3])
    return False


def _default_cpu_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)) - 1)
    except AttributeError:  # not Linux
        return max(1, (os.cpu_count() or 2) - 1)


class DeviceDecoder:
    """Batches of file bytes in, batches of images on ``device`` out (see the module's text).

    ``describe(sample)`` names a sample's file in errors; ``decode_jpegs(list, device)`` is
    torchvision's batched decoder unless a test gives another. ``streams`` is where it issues its
    device work (its feeder's too). Not copyable; :meth:`close` ends its threads.
    """

    def __init__(self, chain: DecodeChain, device: torch.device, seed: int, describe: Callable[[int], str], *,
                 cpu_threads: int | None = None, streams: Streams | None = None,
                 decode_jpegs: Callable[[list, torch.device], list] | None = None) -> None:
        from hdmlp import _core
        self.chain = chain
        self.device = device
        self._seed = seed
        self._describe = describe
        self.cpu_pipeline = _core.TransformPipeline(chain.cpu_specs)
        self.streams = streams if streams is not None else streams_for(device)
        if decode_jpegs is not None:
            self._decode_jpegs, self.jpeg_decoder = decode_jpegs, "given"
        else:
            self._decode_jpegs, self.jpeg_decoder = jpeg_decoder_for(chain.decoder, device)
        self._resize_dtype = RESIZE_DTYPE or (torch.float16 if device.type == "cuda" else torch.float32)
        self._constants: dict = {}
        # Two batches at once: one decodes while the other is cut, resized and merged with its CPU share.
        # The device decodes one batch at a time (two decodes at once are slower than one after the other).
        self._gpu = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="hdmlp-device-decode")
        self._decoding = threading.Lock()
        # A batch's CPU rows go to the C++ chain in one call on cpu_threads threads (no GIL, no Python per
        # image), one batch at a time, while the device decodes the rest.
        self._cpu_threads = cpu_threads or _default_cpu_threads()
        self._cpu = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="hdmlp-cpu-decode")
        self._lock = threading.Lock()
        self.counts = {"device": 0, "cpu": 0, "device_failed": 0}

    def close(self) -> None:
        """Waits for the batches in flight and ends the threads."""
        self._gpu.shutdown(wait=True, cancel_futures=True)
        self._cpu.shutdown(wait=True, cancel_futures=True)

    def submit(self, samples: list, labels: Any, ids: Sequence[int], epoch: int) -> concurrent.futures.Future:
        """Starts a batch: a future of ``(images, labels, event)`` on the device."""
        return self._gpu.submit(self._batch, samples, labels, list(ids), epoch)

    def _on_cpu(self, samples: list, ids: list[int], epoch: int) -> torch.Tensor:
        """The C++ chain's ``[len(samples), C, h, w]`` uint8 rows, in page-locked memory for a CUDA device."""
        height, width = self.chain.size
        rows = torch.empty((len(samples), 3, height, width), dtype=torch.uint8,
                           pin_memory=self.device.type == "cuda")
        data = [s.numpy() if s.device.type == "cpu" else s.cpu().numpy() for s in samples]
        self.cpu_pipeline.apply_rows(data, [self._describe(i) for i in ids], self._seed, epoch, ids, rows.numpy(),
                                  self._cpu_threads)  # a bad file raises here, naming it
        return rows

    def geometry(self, decoded: list, ids: list[int], epoch: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Each decoded image's crop box (x, y, w, h) and flip, drawn as the CPU chain draws them."""
        sizes = [(int(image.shape[2]), int(image.shape[1])) for image in decoded]
        draws = torch.tensor(self.cpu_pipeline.crop_draws(sizes, self._seed, epoch, ids), dtype=torch.int64)
        assert bool((draws[:, 2] > 0).all()), "RandomResizedCrop always draws a box"
        return draws[:, :4], draws[:, 4].bool()

    def _decode_on_device(self, samples: list) -> list:
        """The decoded images, None where the device could not decode one (it then goes to the CPU)."""
        try:
            return list(self._decode_jpegs(samples, self.device))
        except RuntimeError:
            pass
        out = []  # one of the batch failed: find which, one at a time
        for s in samples:
            try:
                out.append(self._decode_jpegs([s], self.device)[0])
            except RuntimeError:
                out.append(None)
        return out

    def _batch(self, samples: list, labels: Any, ids: list[int], epoch: int) -> tuple:
        count = len(samples)
        on_cpu = int(round(self.chain.cpu_share * count))
        cpu_rows = set(range(count - on_cpu, count))
        if not getattr(self._decode_jpegs, "checks_files", False):  # hdmlp's nvJPEG decoder checks them in C++
            cpu_rows |= {i for i in range(count - on_cpu) if not device_decodable(samples[i])}
        parts = []  # (rows, future of their uint8 images on the host)

        def to_cpu(rows: list[int]) -> None:
            if rows:
                parts.append((rows, self._cpu.submit(self._on_cpu, [samples[i] for i in rows], [ids[i] for i in rows],
                                                     epoch)))

        to_cpu(sorted(cpu_rows))
        height, width = self.chain.size
        with self.streams.side():
            gpu_rows = [i for i in range(count) if i not in cpu_rows]
            with self._decoding:
                decoded = self._decode_on_device([samples[i] for i in gpu_rows]) if gpu_rows else []
            failed = [row for row, image in zip(gpu_rows, decoded) if image is None]
            to_cpu(failed)
            pairs = [(row, image) for row, image in zip(gpu_rows, decoded) if image is not None]
            images = torch.empty((count, 3, height, width), dtype=torch.uint8, device=self.device)
            if pairs:
                rows = [row for row, _ in pairs]
                decoded = [image for _, image in pairs]
                boxes, flips = self.geometry(decoded, [ids[i] for i in rows], epoch)
                resized = resize_crops(decoded, boxes, flips, (height, width), dtype=self._resize_dtype)
                images.index_copy_(0, upload(torch.tensor(rows), self.device), resized)
            for rows, future in parts:
                host = future.result()
                images.index_copy_(0, upload(torch.tensor(rows), self.device),
                                   host.to(self.device, non_blocking=True))
            out: Any = images
            if self.chain.tail is not None:
                out = self.chain.tail.apply(images, self._constants)
            label_tensor = labels.to(self.device, non_blocking=True) if isinstance(labels, torch.Tensor) else labels
            event = self.streams.record()
        with self._lock:
            self.counts["device"] += len(pairs)
            self.counts["cpu"] += sum(len(rows) for rows, _ in parts)
            self.counts["device_failed"] += len(failed)
        return out, label_tensor, event


def jpeg_decoder_for(choice: str, device: torch.device) -> tuple[Callable[[list, torch.device], list], str]:
    """The device's batched JPEG decoder for ``ImgDecode(decoder=choice)``, and its name for reports
    (``"torchvision"``, ``"nvjpeg-hardware"``, ...).

    ``"auto"`` takes hdmlp's nvJPEG decoder on a CUDA device without JPEG engines, where it was built and
    starts: it decodes the Huffman codes on the GPU (5,750 images/s alone on an H100 with its engines set
    aside, where nvJPEG's default backend, torchvision's on such GPUs, gave 697). On a GPU with engines
    (A100, H100, H200) both decoders use them, with the very same pixels and rates alone, and torchvision's
    fed ResNet-18 faster end to end in both calls that compared them (docs/gpu.md), so ``"auto"`` takes
    torchvision's there. ``"nvjpeg..."`` raises RuntimeError saying why it cannot be had.
    """
    if choice == "torchvision" or (choice == "auto" and device.type != "cuda"):
        return _torchvision_decode, "torchvision"
    if device.type != "cuda":
        raise ValueError(f"ImgDecode(decoder={choice!r}) needs a CUDA device, not {device}")
    from hdmlp.device.nvjpeg import NvjpegDecoder, status
    if choice == "auto":
        if not status()[0]:
            return _torchvision_decode, "torchvision"
        try:
            decoder = NvjpegDecoder(device, "auto")
        except RuntimeError as e:  # built, but nvJPEG cannot start here: torchvision's still may
            warnings.warn(f"hdmlp's nvJPEG decoder did not start ({e}); decoding with torchvision's", RuntimeWarning,
                          stacklevel=3)
            return _torchvision_decode, "torchvision"
        if decoder.backend == "hardware":
            return _torchvision_decode, "torchvision"
    else:
        decoder = NvjpegDecoder(device, choice.partition(":")[2] or "auto")
    return decoder, f"nvjpeg-{decoder.backend}"


def _torchvision_decode(samples: list, device: torch.device) -> list:
    from torchvision.io import ImageReadMode, decode_jpeg
    return decode_jpeg(samples, mode=ImageReadMode.RGB, device=device)


# torchvision 0.29 deprecates its decoders in favour of TorchCodec, which has no batched JPEG
# decoder on the device yet; the warning would repeat every batch.
warnings.filterwarnings("ignore", message="The image decoding and encoding capabilities of TorchVision",
                        category=DeprecationWarning)


class DecodingFeeder(DeviceFeeder):
    """A :class:`DeviceFeeder` whose host batches are ``(file bytes, labels, (ids, epoch, extra))``,
    decoded by a :class:`DeviceDecoder` ``ahead`` batches in advance."""

    def __init__(self, batches: Iterator[tuple], decoder: DeviceDecoder, *, channels_last: bool = False,
                 ahead: int = 2, on_hand_out: Callable[[Any], None] | None = None) -> None:
        super().__init__(batches, decoder.device, channels_last=channels_last, ahead=ahead, on_hand_out=on_hand_out,
                         streams=decoder.streams)
        self._decoder = decoder

    def _launch(self, host: tuple) -> InFlight:
        samples, labels, (ids, epoch, extra) = host
        return InFlight(self._decoder.submit(samples, labels, ids, epoch), None, host)

    def _resolve(self, batch: InFlight) -> None:
        if isinstance(batch.item, concurrent.futures.Future):
            images, labels, event = batch.item.result()
            if self._channels_last:
                with self._streams.side():
                    images = images.contiguous(memory_format=torch.channels_last)
                    event = self._streams.record()
            batch.item, batch.event = (images, labels, batch.host[2][2]), event

    def _settle(self, batch: InFlight) -> None:
        if isinstance(batch.item, concurrent.futures.Future):
            try:
                self._resolve(batch)
            except Exception:  # the pass is ending anyway; the error was or will be raised by the loop
                batch.event = None


def decoded_job_pass(job: Any, opened: Any, first: int, channels_last: bool, ahead: int) -> Iterator[Any]:
    """A job's open pass of file bytes as :class:`hdmlp.batches.Batch` objects of decoded device images.

    The decoder lives for the pass: its threads end when the pass does (exhausted, or closed by a
    ``break``), after the batches in flight.
    """
    check_ahead(ahead)
    check_channels_last(channels_last)
    decoder = DeviceDecoder(job.decode_chain, job.device, job.seed, job.describe_sample)
    job.use_device_decoder(decoder)

    def host() -> Iterator[tuple]:
        try:
            for index, (ids, labels, buffers) in enumerate(opened, start=first):
                samples, label_tensor = host_tensors(buffers, labels)
                yield samples, label_tensor, (list(ids), opened.epoch, (index, list(ids)))
        finally:
            opened.close()

    def generate() -> Iterator[Any]:
        feeder = DecodingFeeder(host(), decoder, channels_last=channels_last, ahead=ahead,
                                on_hand_out=lambda extra: job.hand_out(opened.epoch, extra[0] + 1))
        batches = iter(feeder)
        try:
            for images, labels, (index, ids) in batches:
                yield Batch(images, labels, ids, opened.epoch, index)
        finally:
            batches.close()
            decoder.close()
    return generate()
