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
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Sequence

from hdmlp import _core

__all__ = ["make_image_folder"]

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
