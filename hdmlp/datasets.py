"""Ready-made datasets for demos, tests and benchmarks.

:func:`make_image_folder` writes a deterministic, ImageNet-like image folder
(``root/<wnid>/<wnid>_<index>.JPEG``) built from real photos: random crops of
the OpenCV sample images that Debian's ``opencv-doc`` package installs,
recoloured and lightly grained so that the JPEG files average about 100 KB,
like ImageNet's. The same arguments give byte-identical files on every run,
whatever the number of threads.

The call is idempotent: a hidden manifest in ``root`` records what was
generated, so calling it again on a complete folder returns at once, and a
missing file is regenerated alone. It is safe to call from several processes
at once (say one per rank): they serialise on a lock file in ``root``.

:func:`make_fashion_mnist_folder` writes Fashion-MNIST (from the IDX files of
Debian's ``dataset-fashion-mnist`` package) as ``root/train/<class>/*.png`` and
``root/test/<class>/*.png``, with the same guarantees: deterministic, idempotent
and safe to call from every rank.
"""

from __future__ import annotations

import fcntl
import gzip
import hashlib
import json
import os
import pathlib
import re
import struct
import zlib
from collections.abc import Sequence

from hdmlp import _core

__all__ = ["FASHION_MNIST_CLASSES", "make_fashion_mnist_folder", "make_image_folder"]

StrPath = str | os.PathLike[str]


def make_image_folder(
    root: StrPath,
    num_images: int = 500,
    num_classes: int = 10,
    seed: int = 0,
    *,
    min_side: int = 250,
    max_side: int = 500,
    min_quality: int = 85,
    max_quality: int = 95,
    photos: Sequence[StrPath] | None = None,
    threads: int = 0,
) -> pathlib.Path:
    """Create (or check) a generated image folder at ``root`` and return its path.

    Args:
        root: Folder to fill; created if needed. Class folders are named like
            ImageNet wnids (``n00000000``, ``n00001117``, ...).
        num_images: Total number of images, spread round-robin over classes.
        num_classes: Number of class folders, at most ``num_images``.
        seed: Image ``i`` depends only on the seed, ``i``, the side and
            quality ranges and the photos' contents.
        min_side: Smallest width or height, in pixels (at least 16). Each side
            is drawn independently in ``[min_side, max_side]``.
        max_side: Largest width or height, in pixels.
        min_quality: Lowest JPEG quality (1-100); each image's is drawn in
            ``[min_quality, max_quality]``.
        max_quality: Highest JPEG quality.
        photos: Source photos. ``None`` uses the ``*.jpg``/``*.png`` files in
            ``$HDMLP_PHOTOS_DIR``, or else Debian's
            ``/usr/share/doc/opencv-doc/examples/data``. Photos that fail to
            decode or are under 200 pixels on a side are skipped.
        threads: Worker threads; 0 means one per core.

    Returns:
        ``pathlib.Path(root)``, ready for ``torchvision.datasets.ImageFolder``
        or an hdmlp job.

    Raises:
        ValueError: An argument is out of range, or no photo is usable.
        FileNotFoundError: A photo does not exist, or no photos were found
            (install ``opencv-doc`` or set ``HDMLP_PHOTOS_DIR``).
        NotADirectoryError: ``root`` exists and is not a directory.
        OSError: ``root`` or a file in it cannot be written.
    """
    for name, value, lo, hi in (("num_images", num_images, 1, 2**31 - 1), ("num_classes", num_classes, 1, 2**31 - 1),
                                ("seed", seed, 0, 2**64 - 1), ("min_side", min_side, 1, 2**31 - 1),
                                ("max_side", max_side, 1, 2**31 - 1), ("min_quality", min_quality, 1, 100),
                                ("max_quality", max_quality, 1, 100), ("threads", threads, 0, 1024)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
        if not lo <= value <= hi:
            raise ValueError(f"{name} must be an int from {lo} to {hi}, got {value}")
    _core.generate_image_folder(
        os.fspath(root),
        num_images=num_images,
        num_classes=num_classes,
        seed=seed,
        min_side=min_side,
        max_side=max_side,
        min_quality=min_quality,
        max_quality=max_quality,
        photos=None if photos is None else [os.fspath(p) for p in photos],
        threads=threads,
    )
    return pathlib.Path(root)


# ---------------------------------------------------------------- Fashion-MNIST

#: Fashion-MNIST's class names, indexed by label.
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                         "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")

_FASHION_MNIST_DEBIAN_DIR = "/usr/share/datasets/fashion-mnist"
_FASHION_MNIST_FILES = {  # split -> (images, labels), as Zalando names them
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
_FASHION_MNIST_FORMAT = "hdmlp-fashion-mnist-folder 1"
_GENERATED_FILE = re.compile(r"\d{5}\.png")


def _fashion_mnist_class_folder(label: int) -> str:
    # The label leads the folder name, so ImageFolder's sorted class order
    # gives every class its Fashion-MNIST label ("/" is not allowed in a name).
    name = FASHION_MNIST_CLASSES[label].replace("/", "_").replace(" ", "_")
    return f"{label}_{name}"


def _find_idx_file(source: str, name: str) -> str:
    for candidate in (name + ".gz", name):
        path = os.path.join(source, candidate)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(
        f"Fashion-MNIST file '{name}[.gz]' not found in '{source}': install Debian's dataset-fashion-mnist "
        f"package (apt-get install dataset-fashion-mnist; it puts the IDX files in {_FASHION_MNIST_DEBIAN_DIR}), "
        "or pass source= (or set $HDMLP_FASHION_MNIST_DIR) to a folder holding the four IDX files")


def _read_idx(path: str, ndim: int) -> tuple[tuple[int, ...], bytes]:
    """Reads an IDX file of unsigned bytes (gzipped or not): its shape and its data."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise ValueError(f"'{path}' is not a valid gzip file: {e}") from None
    if len(raw) < 4 or raw[0:2] != b"\0\0" or raw[2] != 0x08 or raw[3] != ndim:
        raise ValueError(f"'{path}' is not an IDX file of unsigned bytes with {ndim} dimension(s) "
                         f"(header {raw[:4].hex(' ') or 'empty'})")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"'{path}' is truncated inside its IDX header")
    shape = struct.unpack(f">{ndim}I", raw[4:header])
    size = 1
    for d in shape:
        size *= d
    if len(raw) - header != size:
        raise ValueError(f"'{path}' holds {len(raw) - header} data bytes, but its IDX header {shape} "
                         f"announces {size}")
    return shape, raw[header:]


def _png_gray8(width: int, height: int, pixels: bytes) -> bytes:
    """A minimal 8-bit grayscale PNG (no filtering, one IDAT chunk)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\0" + pixels[y * width:(y + 1) * width] for y in range(height))  # filter 0 per row
    return (b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows, 9))
            + chunk(b"IEND", b""))


def _write_atomically(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def make_fashion_mnist_folder(root: StrPath, source: StrPath | None = None, limit: int | None = None) -> pathlib.Path:
    """Write Fashion-MNIST as an image folder at ``root`` (or check it) and return its path.

    The layout is ``root/train/<class>/<index>.png`` (60,000 images) and
    ``root/test/<class>/<index>.png`` (10,000), each a 28x28 8-bit grayscale
    PNG holding the IDX file's pixels exactly; ``<index>`` is the image's
    position in its IDX file (five digits). Class folders are named
    ``<label>_<name>`` (``0_T-shirt_top``, ``1_Trouser``, ..., ``9_Ankle_boot``)
    so that ``torchvision.datasets.ImageFolder(root / "train")`` and an hdmlp
    job give each image its Fashion-MNIST label. (With a ``limit`` so small
    that a class has no image, that class has no folder and the loaders'
    indices of the later classes shift; the folder name's prefix is the label.)

    The same source and ``limit`` give byte-identical files. A manifest
    (``root/.hdmlp_generated``) records what was written, so a second call on
    a complete folder returns at once and a missing file is rewritten alone;
    calling with another ``limit`` or source removes the files that no longer
    belong. Several processes (say one per rank) may call it at once: they
    serialise on ``root/.hdmlp_generated.lock``.

    Args:
        root: Folder to fill; created if needed. Without a manifest it must
            not already hold ``train`` or ``test`` folders (nothing of the
            user's is ever overwritten or removed).
        source: Folder with the four IDX files (``train-images-idx3-ubyte``,
            ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``,
            ``t10k-labels-idx1-ubyte``, each optionally ``.gz``). ``None`` uses
            ``$HDMLP_FASHION_MNIST_DIR``, or else where Debian's
            ``dataset-fashion-mnist`` package installs them
            (``/usr/share/datasets/fashion-mnist``).
        limit: Write only the first ``limit`` images of each split (for
            quick runs); ``None`` writes all of them.

    Returns:
        ``pathlib.Path(root)``; train on ``root / "train"``, test on ``root / "test"``.

    Raises:
        FileNotFoundError: An IDX file is missing (the message names the
            Debian package to install).
        ValueError: ``limit`` is not a positive int, an IDX file is malformed,
            or images and labels disagree.
        FileExistsError: ``root`` holds ``train``/``test`` folders that this
            function did not write.
        NotADirectoryError: ``root`` exists and is not a directory.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be None or a positive int, got {limit!r}")
    if source is None:
        source = os.environ.get("HDMLP_FASHION_MNIST_DIR") or _FASHION_MNIST_DEBIAN_DIR
    source = os.fspath(source)
    files = {split: tuple(_find_idx_file(source, name) for name in names)
             for split, names in _FASHION_MNIST_FILES.items()}
    root_path = pathlib.Path(root)
    if root_path.exists() and not root_path.is_dir():
        raise NotADirectoryError(f"Fashion-MNIST folder root '{root_path}' exists and is not a directory")
    root_path.mkdir(parents=True, exist_ok=True)

    key = {"format": _FASHION_MNIST_FORMAT, "source_sha256": _files_sha256(files), "limit": limit}
    manifest_path = root_path / ".hdmlp_generated"

    with open(root_path / ".hdmlp_generated.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        manifest = _fashion_mnist_manifest(root_path, manifest_path)
        same_key = manifest is not None and all(manifest.get(k) == v for k, v in key.items())
        if same_key and manifest.get("state") == "complete" and _fashion_mnist_folder_complete(root_path, manifest):
            return root_path

        _write_atomically(str(manifest_path), json.dumps(dict(key, state="writing")).encode())
        counts = {}
        for split, (images_path, labels_path) in files.items():
            counts[split] = _write_fashion_mnist_split(root_path / split, images_path, labels_path, limit,
                                                        reuse=same_key)
        _write_atomically(str(manifest_path),
                          json.dumps(dict(key, state="complete", images=counts), separators=(",", ":")).encode())
    return root_path


def _files_sha256(files: dict[str, tuple[str, ...]]) -> str:
    """One SHA-256 of the files' own SHA-256s, in the order of ``files``."""
    digest = hashlib.sha256()
    for paths in files.values():
        for path in paths:
            with open(path, "rb") as f:
                digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()


def _fashion_mnist_manifest(root: pathlib.Path, manifest_path: pathlib.Path) -> dict | None:
    """The manifest of a folder this module wrote; None for a new folder (FileExistsError where ``root`` holds
    split folders it did not write)."""
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = None
    if isinstance(manifest, dict) and manifest.get("format") == _FASHION_MNIST_FORMAT:
        return manifest
    for split in _FASHION_MNIST_FILES:
        if (root / split).exists():
            raise FileExistsError(f"'{root / split}' exists but was not written by make_fashion_mnist_folder "
                                  f"(no {manifest_path.name} manifest): choose an empty folder")
    return None


def _fashion_mnist_folder_complete(root: pathlib.Path, manifest: dict) -> bool:
    images = manifest.get("images")
    if not isinstance(images, dict) or set(images) != set(_FASHION_MNIST_FILES):
        return False
    for split, per_class in images.items():
        if not isinstance(per_class, dict):
            return False
        for folder, indices in per_class.items():
            try:
                present = {e.name for e in os.scandir(root / split / folder) if e.is_file()}
            except OSError:
                return False
            if not {f"{i:05d}.png" for i in indices} <= present:
                return False
    return True


def _write_fashion_mnist_split(folder: pathlib.Path, images_path: str, labels_path: str, limit: int | None,
                               reuse: bool) -> dict[str, list[int]]:
    """Writes one split; returns ``{class folder: [image indices]}``.

    With ``reuse`` (same source and format as the manifest's) files already
    there are kept; stale generated files (``NNNNN.png`` not in this split)
    are removed either way.
    """
    (count, height, width), pixels = _read_idx(images_path, 3)
    (label_count,), labels = _read_idx(labels_path, 1)
    if count != label_count:
        raise ValueError(f"'{images_path}' holds {count} images but '{labels_path}' {label_count} labels")
    if labels and max(labels) >= len(FASHION_MNIST_CLASSES):
        raise ValueError(f"'{labels_path}' holds label {max(labels)}; Fashion-MNIST's labels are 0..9")
    n = count if limit is None else min(limit, count)
    per_class: dict[str, list[int]] = {_fashion_mnist_class_folder(c): [] for c in range(len(FASHION_MNIST_CLASSES))}
    for i in range(n):
        per_class[_fashion_mnist_class_folder(labels[i])].append(i)
    image_bytes = height * width
    for class_folder, indices in per_class.items():
        directory = folder / class_folder
        wanted = {f"{i:05d}.png" for i in indices}
        present = set()
        if directory.is_dir():
            for entry in os.scandir(directory):
                if ".tmp." in entry.name or (_GENERATED_FILE.fullmatch(entry.name) and entry.name not in wanted):
                    os.unlink(entry.path)  # an interrupted write, or an image of another limit
                elif entry.is_file():
                    present.add(entry.name)
        if not indices:
            # No folder for a class without images (a small limit): loaders reject empty class folders.
            if directory.is_dir() and not any(directory.iterdir()):
                directory.rmdir()
            continue
        directory.mkdir(parents=True, exist_ok=True)
        for i in indices:
            name = f"{i:05d}.png"
            if reuse and name in present:
                continue
            _write_atomically(str(directory / name),
                              _png_gray8(width, height, pixels[i * image_bytes:(i + 1) * image_bytes]))
    return {name: indices for name, indices in per_class.items() if indices}
