"""``hdmlp pack``: convert a dataset into an hdmlp pack, a few large shards and one index.

A parallel file system is slowest at what an image folder asks of it: one open (several
round trips to a metadata server) and one small read per sample. A pack stores the same
samples back to back in a few large shard files, read by offset, so a job opens each shard
once. Read a pack with ``hdmlp.Job(DST, ...)`` (or ``source="pack"``): it has the source's
``samples`` (original paths), ``classes`` and ``targets``. ``hdmlp pack --help`` lists the
options; this text (``python -m pydoc hdmlp.pack``) is the format's description that ships with
the package; ``docs/formats.md`` of the source distribution has more (the byte layout is in
``cpp/include/hdmlp/source/pack_source.h``)::

    hdmlp pack /data/imagenet/train /data/imagenet-train.pack
    hdmlp pack /data/imagenet/train /data/in-256.pack --max-side 256 --quality 90
    hdmlp pack /data/cifar10/train /data/cifar.pack --raw

Properties:
    streaming    samples are read, converted and written one after another (a bounded
                 window of them in flight on worker threads), never all in memory;
    resumable    each finished shard is recorded in ``DST/.hdmlp-pack-progress``; a run
                 that was interrupted (Ctrl-C, a crash) continues after the last finished
                 shard; the index is written last, so a pack without one is unfinished;
    deterministic  the same source and options give the same bytes (shard boundaries depend
                 only on the sample sizes and ``shard_size``; a resumed pack equals an
                 uninterrupted one).

The source is anything :class:`hdmlp.Job` reads that holds images: an image folder, WebDataset
tar shards, or another pack (to make a smaller one with ``max_side``).

Layout:
    ``DST/shard-NNNNN.hdmlp-shard``: a 32-byte header (``HDMLPSH1``, the pack's id, the shard's
    number), then the samples back to back. ``DST/index.hdmlp-pack``: per sample its shard,
    offset, size, label, CRC-32 and original relative path; the class names; the folder the
    pack was made from; each shard's size; and the index's own CRC-32. Every sample's CRC is
    checked when it is read, so a changed or truncated shard fails that sample, naming it.

Options:
    ``max_side`` N / ``quality`` Q: images whose longer side exceeds N are resized down
    (Pillow, Lanczos) and stored as JPEG of quality Q; smaller ones keep their bytes.
    ``raw``: stores decoded pixels (``HRAW``, height, width, channels, then the pixels,
    row-major), for small images such as CIFAR; the transform chain then skips the decode and
    gives the same pixels as over the encoded files.
"""
from __future__ import annotations

import collections
import dataclasses
import hashlib
import io
import json
import os
import struct
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from hdmlp import _core

INDEX_NAME = "index.hdmlp-pack"
PROGRESS_NAME = ".hdmlp-pack-progress"
SHARD_PATTERN = "shard-{:05d}.hdmlp-shard"
_INDEX_MAGIC = b"HDMLPPK1"
_SHARD_MAGIC = b"HDMLPSH1"
_VERSION = 1
_SHARD_HEADER_BYTES = 32
_RAW_MAGIC = b"HRAW"


@dataclasses.dataclass(frozen=True)
class PackSummary:
    """What :func:`pack` made."""

    path: str
    samples: int
    shards: int
    bytes: int          # the samples' bytes in the shards
    source_bytes: int   # the samples' bytes in the source
    resumed_samples: int  # samples found already packed by an interrupted run


def _is_pack_file(name: str) -> bool:
    """The files a pack (finished or not) holds in its folder."""
    return name in (INDEX_NAME, INDEX_NAME + ".tmp", PROGRESS_NAME) or \
        (name.startswith("shard-") and (name.endswith(".hdmlp-shard") or name.endswith(".partial")))


def _raw_image(data: bytes, name: str) -> bytes:
    """An image's decoded pixels as a raw sample (cpp/include/hdmlp/transforms/raw_image.h)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:
        # What torchvision's loader (PIL's convert("RGB")) gives; grey images are kept as one
        # channel, which the transforms expand as convert("RGB") would.
        img = img.convert("L") if img.mode == "L" else img.convert("RGB")
        channels = 1 if img.mode == "L" else 3
        pixels = img.tobytes()
    return _RAW_MAGIC + struct.pack("<III", img.height, img.width, channels) + pixels


def _shrunk(data: bytes, max_side: int, quality: int) -> bytes:
    """The image resized so that its longer side is max_side, as a JPEG; smaller ones unchanged."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:
        if max(img.size) <= max_side:
            return data
        scale = max_side / max(img.size)
        size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
        img = img.convert("RGB").resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)
        out = io.BytesIO()
        img.save(out, format="JPEG", quality=quality)
        return out.getvalue()


class _Progress:
    """The journal of finished shards: a JSON header line, then one line per shard."""

    def __init__(self, path: str, pack_id: int) -> None:
        self.path = path
        self.pack_id = pack_id

    def load(self, dst: str) -> list[dict]:
        """The finished shards of an interrupted run of the same pack whose files are intact."""
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return []
        try:
            header = json.loads(lines[0])
            if header.get("pack_id") != self.pack_id or header.get("version") != _VERSION:
                return []
            shards = []
            for line in lines[1:]:
                entry = json.loads(line)  # a torn last line raises: stop there
                shard_path = os.path.join(dst, SHARD_PATTERN.format(entry["shard"]))
                if entry["shard"] != len(shards) or not os.path.isfile(shard_path) \
                        or os.path.getsize(shard_path) != entry["size"]:
                    break
                shards.append(entry)
            return shards
        except (ValueError, KeyError, IndexError):
            return []

    def start(self) -> None:
        with open(self.path, "w", encoding="utf-8") as f:
            f.write(json.dumps({"pack_id": self.pack_id, "version": _VERSION}) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def rewrite(self, shards: list[dict]) -> None:
        self.start()
        for entry in shards:
            self.append(entry)

    def append(self, entry: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry, separators=(",", ":")) + "\n")
            f.flush()
            os.fsync(f.fileno())


def _pack_id(source: _core.Source, options: dict) -> int:
    """A hash of the source's listing and the options: the same pack, the same id."""
    h = hashlib.blake2b(digest_size=8)
    h.update(json.dumps({"kind": source.kind, "classes": source.classes, "options": options}).encode())
    for name, label, size in zip(source.names, source.labels, source.sizes):
        h.update(f"{name}\0{label}\0{size}\n".encode("utf-8", "surrogateescape"))
    return int.from_bytes(h.digest(), "little")


def _str(s: str) -> bytes:
    b = s.encode("utf-8", "surrogateescape")
    return struct.pack("<Q", len(b)) + b


def _write_index(dst: str, pack_id: int, raw: bool, source: _core.Source, shards: list[dict]) -> None:
    names, labels = source.names, source.labels
    out = io.BytesIO()
    out.write(_INDEX_MAGIC + struct.pack("<IIQ", _VERSION, 1 if raw else 0, pack_id))
    out.write(_str(source.samples_root) + _str(source.kind))
    out.write(struct.pack("<Q", len(source.classes)))
    for c in source.classes:
        out.write(_str(c))
    out.write(struct.pack("<Q", len(shards)))
    for s in shards:
        out.write(_str(SHARD_PATTERN.format(s["shard"])) + struct.pack("<Q", s["size"]))
    out.write(struct.pack("<Q", sum(len(s["records"]) for s in shards)))
    for s in shards:
        for i, offset, size, crc in s["records"]:
            out.write(struct.pack("<IQQiI", s["shard"], offset, size, labels[i], crc) + _str(names[i]))
    data = out.getvalue()
    tmp = os.path.join(dst, INDEX_NAME + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data + struct.pack("<I", zlib.crc32(data)))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(dst, INDEX_NAME))


def pack(src: str | os.PathLike[str], dst: str | os.PathLike[str], *, shard_size: int = 256 << 20,
         max_side: int | None = None, quality: int = 90, raw: bool = False, source: str | None = None,
         source_options: dict[str, str] | None = None, workers: int = 4, progress: bool = True,
         on_sample: Callable[[int], None] | None = None) -> PackSummary:
    """Packs the dataset at ``src`` into the folder ``dst`` (created if needed).

    Args:
        src: an image folder, WebDataset tar shards or a pack (anything :class:`hdmlp.Job` reads
            that holds images; ``source``/``source_options`` as for the Job).
        dst: the pack's folder.
        shard_size: bytes per shard (a shard holds at least one sample, so a larger sample
            makes a larger shard).
        max_side: resize every image whose longer side is larger down to this (Lanczos, as
            Pillow does) and store it as a JPEG of ``quality``; smaller images keep their bytes.
        quality: the JPEG quality of resized images (1-95).
        raw: store decoded pixels (uint8, RGB or grey) instead of the encoded files, so the
            loader's transforms skip the decode; for small images (CIFAR, Fashion-MNIST), whose
            pixels are not much larger than their files.
        workers: threads reading and converting samples.
        progress: show a progress bar (tqdm; only on a terminal).
        on_sample: called with the number of samples packed so far after each one.

    Returns:
        A :class:`PackSummary`. A pack that is already complete is left as it is.

    Raises:
        FileNotFoundError / ValueError: a bad source or argument, named in the message.
    """
    _check_options(shard_size, max_side, quality, raw, workers)
    src = os.path.expanduser(os.fspath(src))
    dst = os.path.expanduser(os.fspath(dst))
    source_obj = _open_source(src, source, source_options, raw, max_side)
    _check_destination(src, dst)
    options = {"shard_size": shard_size, "max_side": max_side, "quality": quality if max_side else None,
               "raw": raw, "source_format": source_obj.format}
    pack_id = _pack_id(source_obj, options)
    os.makedirs(dst, exist_ok=True)
    finished = _finished_pack(dst, pack_id, source_obj)
    if finished is not None:
        return finished

    journal = _Progress(os.path.join(dst, PROGRESS_NAME), pack_id)
    shards = _resume(dst, journal)
    next_sample = shards[-1]["records"][-1][0] + 1 if shards else 0
    n = len(source_obj)
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=n, initial=next_sample, unit="img", desc=f"packing {os.path.basename(src.rstrip('/'))}",
                   disable=None, dynamic_ncols=True)
    writer = _ShardWriter(dst, pack_id, raw, shard_size, journal, shards)
    try:
        for i, data in _converted(source_obj, next_sample, workers, raw, max_side, quality):
            writer.add(i, data)
            if bar is not None:
                bar.update(1)
            if on_sample is not None:
                on_sample(i + 1)
        writer.finish()
    finally:
        writer.close()  # a shard cut short stays partial: the next run drops it
        if bar is not None:
            bar.close()
    _write_index(dst, pack_id, raw, source_obj, shards)
    os.remove(journal.path)
    return PackSummary(dst, n, len(shards), sum(r[2] for s in shards for r in s["records"]), sum(source_obj.sizes),
                       next_sample)


def _check_options(shard_size: int, max_side: int | None, quality: int, raw: bool, workers: int) -> None:
    if shard_size < 1:
        raise ValueError(f"shard_size must be at least 1 byte, got {shard_size}")
    if max_side is not None and max_side < 1:
        raise ValueError(f"max_side must be at least 1, got {max_side}")
    if not 1 <= quality <= 95:
        raise ValueError(f"quality must be in 1..95 (Pillow's JPEG range), got {quality}")
    if raw and max_side is not None:
        raise ValueError("raw and max_side cannot be combined: raw stores the pixels as they are decoded")
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")


def _open_source(src: str, source: str | None, source_options: dict[str, str] | None, raw: bool,
                 max_side: int | None) -> _core.Source:
    """The source at ``src``, checked to hold images that the options can convert."""
    source_obj = _core.Source(src, source or "", dict(source_options or {}))
    if source_obj.format == "array":
        raise ValueError(f"'{src}' holds arrays ({source_obj.kind}); hdmlp packs hold images: read HDF5 files "
                         "directly, they are already large files read by offset")
    if raw and source_obj.format == "raw":
        raise ValueError(f"'{src}' is already a raw pack")
    if (raw or max_side is not None) and source_obj.format == "raw":
        raise ValueError(f"'{src}' holds raw pixels; max_side needs encoded images")
    if max_side is not None or raw:
        try:
            import PIL  # noqa: F401
        except ImportError as e:
            raise ValueError("max_side and raw need Pillow: pip install pillow") from e
    return source_obj


def _check_destination(src: str, dst: str) -> None:
    """``dst`` is neither the source, nor inside a source folder, nor a folder of other files."""
    if os.path.realpath(dst) == os.path.realpath(src):
        raise ValueError(f"the pack's folder '{dst}' is the source itself")
    if os.path.isdir(src) and os.path.realpath(dst).startswith(os.path.join(os.path.realpath(src), "")):
        # Its shards would become part of the source (a class folder of a folder source).
        raise ValueError(f"the pack's folder '{dst}' is inside the source '{src}': write it outside the source")
    if os.path.isdir(dst):
        others = sorted(name for name in os.listdir(dst) if not _is_pack_file(name))
        if others:  # an image folder there would be shadowed by the pack once its index is written
            raise ValueError(f"'{dst}' already holds files that are not a pack's ({', '.join(others[:3])}"
                             f"{', ...' if len(others) > 3 else ''}): give a new or empty folder")


def _finished_pack(dst: str, pack_id: int, source_obj: _core.Source) -> PackSummary | None:
    """The summary of the same pack, complete in ``dst``; None after removing another pack's (or a broken) index."""
    index_path = os.path.join(dst, INDEX_NAME)
    if not os.path.isfile(index_path):
        return None
    try:
        if _read_pack_id(index_path) == pack_id:
            done = _core.Source(index_path, "pack")  # checks the index and the shards' sizes
            shards = sum(1 for name in os.listdir(dst) if name.endswith(".hdmlp-shard"))
            return PackSummary(dst, len(done), shards, sum(done.sizes), sum(source_obj.sizes), len(done))
    except (OSError, ValueError, struct.error):
        pass
    os.remove(index_path)  # made again by this run
    return None


def _resume(dst: str, journal: _Progress) -> list[dict]:
    """The finished shards an interrupted run of this pack left; the other shard files removed."""
    shards = journal.load(dst)
    # Leftovers of another pack, or of the shard an interruption cut short.
    for name in os.listdir(dst):
        if name.startswith("shard-") and (name.endswith(".partial") or name.endswith(".hdmlp-shard")):
            number = name.split("-")[1].split(".")[0]
            if not number.isdigit() or int(number) >= len(shards) or name.endswith(".partial"):
                os.remove(os.path.join(dst, name))
    journal.rewrite(shards)
    return shards


def _convert(source: _core.Source, i: int, raw: bool, max_side: int | None, quality: int) -> bytes:
    """Sample ``i``'s bytes as the pack stores them."""
    data = source.read(i)
    try:
        if raw:
            return _raw_image(data, source.describe(i))
        if max_side is not None:
            return _shrunk(data, max_side, quality)
    except (OSError, ValueError, SyntaxError) as e:  # PIL's errors for a corrupt or truncated image
        raise ValueError(f"{source.describe(i)}: cannot decode the image to "
                         f"{'store its pixels (--raw)' if raw else 'shrink it (--max-side)'}: "
                         f"{type(e).__name__}: {e}; remove or fix the file") from e
    return data


def _converted(source: _core.Source, first: int, workers: int, raw: bool, max_side: int | None,
               quality: int) -> Iterator[tuple[int, bytes]]:
    """``(i, bytes)`` of the samples from ``first`` on, in order, with a bounded window in flight on ``workers``
    threads: streaming, and deterministic."""
    n = len(source)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending: collections.deque[tuple[int, Future[bytes]]] = collections.deque()
        i = first
        try:
            while i < n or pending:
                while i < n and len(pending) < 4 * workers:
                    pending.append((i, pool.submit(_convert, source, i, raw, max_side, quality)))
                    i += 1
                j, future = pending.popleft()
                yield j, future.result()
        finally:
            for _, future in pending:
                future.cancel()


class _ShardWriter:
    """Appends samples to ``shards`` (the finished ones, each recorded in the journal when done), starting a new
    shard where the next sample would take the current one past ``shard_size``."""

    def __init__(self, dst: str, pack_id: int, raw: bool, shard_size: int, journal: _Progress,
                 shards: list[dict]) -> None:
        self._dst, self._pack_id, self._raw, self._shard_size = dst, pack_id, raw, shard_size
        self._journal = journal
        self._shards = shards
        self._file = None
        self._current: dict | None = None

    def add(self, i: int, data: bytes) -> None:
        current = self._current
        if current is not None and current["size"] + len(data) > self._shard_size and current["records"]:
            self.finish()
            current = None
        if current is None:
            number = len(self._shards)
            self._file = open(os.path.join(self._dst, SHARD_PATTERN.format(number) + ".partial"), "wb")
            self._file.write(_SHARD_MAGIC + struct.pack("<QII", self._pack_id, number, 1 if self._raw else 0)
                             + bytes(8))
            current = self._current = {"shard": number, "size": _SHARD_HEADER_BYTES, "records": []}
        self._file.write(data)
        current["records"].append([i, current["size"], len(data), zlib.crc32(data)])
        current["size"] += len(data)

    def finish(self) -> None:
        """Completes the current shard, if any: on disk, under its final name, then in the journal."""
        if self._current is None:
            return
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        final = os.path.join(self._dst, SHARD_PATTERN.format(self._current["shard"]))
        os.replace(final + ".partial", final)
        self._journal.append(self._current)
        self._shards.append(self._current)
        self._file, self._current = None, None

    def close(self) -> None:
        """Closes a shard cut short (an error, Ctrl-C): it stays ``.partial``, and the next run removes it."""
        if self._file is not None:
            self._file.close()


def _read_pack_id(index_path: str) -> int:
    with open(index_path, "rb") as f:
        head = f.read(24)
    return struct.unpack_from("<Q", head, 16)[0]
