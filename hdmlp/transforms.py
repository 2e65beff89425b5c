"""Image transforms that hdmlp runs in C++, with torchvision's names and defaults.

A chain is a list that starts with :class:`ImgDecode` and ends with
:class:`ToTensor` (optionally followed by :class:`Normalize`) or
:class:`ToUint8`; in between, any of :class:`Resize`, :class:`CenterCrop`,
:class:`RandomResizedCrop`, :class:`RandomHorizontalFlip` and
:class:`RandomVerticalFlip`::

    from hdmlp import transforms as T

    train = [T.ImgDecode(), T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
             T.ToTensor(), T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]
    val = [T.ImgDecode(), T.Resize(256), T.CenterCrop(224), T.ToTensor(),
           T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]

Each class takes the arguments of its torchvision namesake, with the same
defaults, and computes what torchvision computes on a PIL image: images are
decoded as ``PIL.Image.open(f).convert("RGB")`` does (no EXIF rotation),
resized with PIL's own antialiased filters, and converted in float32 as
``ToTensor`` and ``Normalize`` do. A random transform's parameters depend only
on ``(seed, epoch, sample id)``, so a job gives the same tensors whatever the
number of threads, and different ones in every epoch. See docs/transforms.md.

An impossible chain (no ``ImgDecode`` first, ``Normalize`` before
``ToTensor``, a crop larger than a fixed resize, ...) raises ``ValueError``
when it is compiled; a bad image raises ``ValueError`` naming the file.

This module imports neither torch nor torchvision; ``interpolation`` accepts
``torchvision.transforms.InterpolationMode`` members as well as their names.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from hdmlp import _core

__all__ = [
    "CenterCrop",
    "ImgDecode",
    "Normalize",
    "RandomHorizontalFlip",
    "RandomResizedCrop",
    "RandomVerticalFlip",
    "Resize",
    "ToTensor",
    "ToUint8",
    "Transform",
    "apply",
    "compile_pipeline",
    "pipeline_specs",
]

Spec = tuple[str, dict[str, list[float]]]

# PIL's filter codes, which the C++ pipeline uses, by torchvision's
# InterpolationMode value. NEAREST_EXACT is PIL's NEAREST for PIL images.
_INTERPOLATION = {
    "nearest": 0,
    "nearest-exact": 0,
    "lanczos": 1,
    "bilinear": 2,
    "bicubic": 3,
    "box": 4,
    "hamming": 5,
}
_PIL_NAMES = {0: "nearest", 1: "lanczos", 2: "bilinear", 3: "bicubic", 4: "box", 5: "hamming"}


def _interpolation_code(interpolation: Any) -> int:
    value = getattr(interpolation, "value", interpolation)  # InterpolationMode -> its string
    if isinstance(value, str) and value.lower() in _INTERPOLATION:
        return _INTERPOLATION[value.lower()]
    if isinstance(value, int) and not isinstance(value, bool) and value in _PIL_NAMES:
        return value  # a PIL filter code, as torchvision still accepts
    raise ValueError(
        f"interpolation must be a torchvision InterpolationMode or one of {sorted(_INTERPOLATION)}, "
        f"got {interpolation!r}"
    )


def _size(size: int | Sequence[int], name: str = "size") -> list[float]:
    if isinstance(size, bool):
        raise TypeError(f"{name} must be an int or a sequence of 1 or 2 ints, got {size!r}")
    if isinstance(size, int):
        return [float(size)]
    if isinstance(size, Sequence) and len(size) in (1, 2) and all(
        isinstance(s, int) and not isinstance(s, bool) for s in size
    ):
        return [float(s) for s in size]
    raise ValueError(f"{name} must be an int or a sequence of 1 or 2 ints (h, w), got {size!r}")


def _numbers(values: float | Sequence[float], name: str) -> list[float]:
    if isinstance(values, (int, float)) and not isinstance(values, bool):
        return [float(values)]
    try:
        return [float(v) for v in values]  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number or a sequence of numbers, got {values!r}") from None


class Transform:
    """Base class of hdmlp's transforms: each describes itself as a spec for the C++ pipeline."""

    def _spec(self) -> Spec:
        raise NotImplementedError

    def __repr__(self) -> str:
        def show(name: str, value: Any) -> str:
            if name == "interpolation" and isinstance(value, int):
                return repr(_PIL_NAMES[value])
            if isinstance(value, list):
                items = [int(v) if name == "size" else v for v in value]
                return repr(items[0] if len(items) == 1 and name == "size" else tuple(items))
            return repr(value)

        inner = ", ".join(f"{k}={show(k, v)}" for k, v in vars(self).items())
        return f"{type(self).__name__}({inner})"


class ImgDecode(Transform):
    """Decode the file's bytes to an RGB image, as torchvision's ImageFolder loader does.

    JPEG, PNG, BMP, TIFF, WebP and PBM/PGM/PPM are recognised by content,
    whatever the file's extension; grayscale, palette, CMYK and alpha images
    become RGB (alpha dropped, as PIL's ``convert("RGB")``); EXIF orientation
    is not applied (PIL's ``Image.open`` does not apply it either). Corrupt,
    truncated, empty, unsupported and oversized images (more than 178956970
    pixels, PIL's decompression-bomb limit) raise ``ValueError`` naming the file.

    Args:
        draft: When the first resize of the chain shrinks a JPEG by 2x or
            more, let libjpeg decode it at 1/2, 1/4 or 1/8 scale (like PIL's
            ``Image.draft``), never below the size the resize asks for. Faster
            for large photos; results differ slightly from torchvision's
            (docs/transforms.md gives the measured difference).
    """

    def __init__(self, draft: bool = False) -> None:
        self.draft = bool(draft)

    def _spec(self) -> Spec:
        return ("ImgDecode", {"draft": [1.0 if self.draft else 0.0]})


class Resize(Transform):
    """Resize the image, like ``torchvision.transforms.Resize`` on a PIL image.

    Args:
        size: An int resizes the shorter side to ``size`` keeping the aspect
            ratio (the longer side is ``int(size * long / short)``); ``(h, w)``
            resizes to exactly that.
        interpolation: ``InterpolationMode`` or its name; PIL's filters
            (bilinear by default), antialiased when shrinking.
        max_size: With an int ``size``, the longer side's maximum.
        antialias: ``True`` (torchvision's default and PIL's only behaviour).
            ``False`` keeps the filter narrow when shrinking, like torch's
            ``interpolate(antialias=False)``.
    """

    def __init__(
        self,
        size: int | Sequence[int],
        interpolation: Any = "bilinear",
        max_size: int | None = None,
        antialias: bool | None = True,
    ) -> None:
        self.size = _size(size)
        self.interpolation = _interpolation_code(interpolation)
        if max_size is not None and len(self.size) != 1:
            raise ValueError(
                "max_size should only be passed if size specifies the length of the smaller edge, "
                f"got size={size!r}"
            )
        self.max_size = max_size
        self.antialias = True if antialias is None else bool(antialias)

    def _spec(self) -> Spec:
        args: dict[str, list[float]] = {
            "size": list(self.size),
            "interpolation": [float(self.interpolation)],
            "antialias": [1.0 if self.antialias else 0.0],
        }
        if self.max_size is not None:
            args["max_size"] = [float(self.max_size)]
        return ("Resize", args)


class CenterCrop(Transform):
    """Crop the centre, like ``torchvision.transforms.CenterCrop``.

    Args:
        size: An int gives a square crop, ``(h, w)`` a rectangle. A smaller
            image is padded with zeros, as torchvision does; a chain where the
            crop cannot fit (e.g. after ``Resize((200, 200))``) is refused.
    """

    def __init__(self, size: int | Sequence[int]) -> None:
        self.size = _size(size)

    def _spec(self) -> Spec:
        return ("CenterCrop", {"size": list(self.size)})


class RandomResizedCrop(Transform):
    """Crop a random part and resize it, like ``torchvision.transforms.RandomResizedCrop``.

    The crop is drawn with torchvision's ``get_params`` algorithm: up to ten
    tries of an area fraction uniform in ``scale`` and an aspect ratio
    log-uniform in ``ratio``; then the central crop fallback.

    Args:
        size: Output size: an int for a square, or ``(h, w)``.
        scale: Range of the crop's area as a fraction of the image's.
        ratio: Range of the crop's aspect ratio (width / height).
        interpolation: ``InterpolationMode`` or its name (bilinear by default).
        antialias: As for :class:`Resize`.
    """

    def __init__(
        self,
        size: int | Sequence[int],
        scale: tuple[float, float] = (0.08, 1.0),
        ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0),
        interpolation: Any = "bilinear",
        antialias: bool | None = True,
    ) -> None:
        self.size = _size(size)
        self.scale = _numbers(scale, "scale")
        self.ratio = _numbers(ratio, "ratio")
        self.interpolation = _interpolation_code(interpolation)
        self.antialias = True if antialias is None else bool(antialias)

    def _spec(self) -> Spec:
        return (
            "RandomResizedCrop",
            {
                "size": list(self.size),
                "scale": list(self.scale),
                "ratio": list(self.ratio),
                "interpolation": [float(self.interpolation)],
                "antialias": [1.0 if self.antialias else 0.0],
            },
        )


class RandomHorizontalFlip(Transform):
    """Mirror left-right with probability ``p``, like torchvision's."""

    def __init__(self, p: float = 0.5) -> None:
        self.p = float(p)

    def _spec(self) -> Spec:
        return ("RandomHorizontalFlip", {"p": [self.p]})


class RandomVerticalFlip(Transform):
    """Mirror top-bottom with probability ``p``, like torchvision's."""

    def __init__(self, p: float = 0.5) -> None:
        self.p = float(p)

    def _spec(self) -> Spec:
        return ("RandomVerticalFlip", {"p": [self.p]})


class ToTensor(Transform):
    """Convert to a float32 CHW tensor with values in [0, 1], like torchvision's ``ToTensor``."""

    def _spec(self) -> Spec:
        return ("ToTensor", {})


class Normalize(Transform):
    """Subtract ``mean`` and divide by ``std`` per channel, like torchvision's ``Normalize``.

    Comes after :class:`ToTensor`. Computed in float32 as torchvision does.

    Args:
        mean: One value or one per channel (R, G, B).
        std: One value or one per channel; none may be zero.
        inplace: Accepted for compatibility; hdmlp writes its output once.
    """

    def __init__(self, mean: Sequence[float] | float, std: Sequence[float] | float, inplace: bool = False) -> None:
        self.mean = _numbers(mean, "mean")
        self.std = _numbers(std, "std")
        self.inplace = inplace

    def _spec(self) -> Spec:
        return ("Normalize", {"mean": list(self.mean), "std": list(self.std)})


class ToUint8(Transform):
    """End the chain with 8-bit RGB (no scaling), for users who normalise on the GPU.

    Args:
        layout: ``"CHW"`` (as ``torchvision.transforms.PILToTensor``) or ``"HWC"``.
    """

    def __init__(self, layout: str = "CHW") -> None:
        if layout not in ("CHW", "HWC"):
            raise ValueError(f"layout must be 'CHW' or 'HWC', got {layout!r}")
        self.layout = layout

    def _spec(self) -> Spec:
        return ("ToUint8", {"layout": [0.0 if self.layout == "CHW" else 1.0]})


def pipeline_specs(transforms: Sequence[Transform]) -> list[Spec]:
    """The ``(op, args)`` specs of a chain, as the C++ pipeline takes them.

    Accepts a list of hdmlp transforms, or an object with a ``transforms``
    list (such as ``torchvision.transforms.Compose`` holding hdmlp transforms).

    Raises:
        TypeError: An element is not an hdmlp transform (for example a
            torchvision transform: use its namesake from hdmlp.transforms).
    """
    items = getattr(transforms, "transforms", transforms)
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise TypeError(f"transforms must be a list of hdmlp.transforms objects, got {type(transforms).__name__}")
    specs: list[Spec] = []
    for i, t in enumerate(items):
        if not isinstance(t, Transform):
            kind = f"{type(t).__module__}.{type(t).__qualname__}"
            raise TypeError(
                f"transform {i} is a {kind}, not an hdmlp.transforms object: use "
                f"hdmlp.transforms.{type(t).__name__} (ImgDecode, Resize, CenterCrop, RandomResizedCrop, "
                "RandomHorizontalFlip, RandomVerticalFlip, ToTensor, Normalize, ToUint8)"
            )
        specs.append(t._spec())
    return specs


def compile_pipeline(transforms: Sequence[Transform]) -> Any:
    """Validate a chain and return the C++ pipeline (``hdmlp._core.TransformPipeline``).

    Raises:
        ValueError: The chain is impossible or an argument is out of range;
            the message names the transform.
    """
    return _core.TransformPipeline(pipeline_specs(transforms))


def apply(
    transforms: Sequence[Transform] | Any,
    data: bytes | bytearray | memoryview,
    seed: int = 0,
    epoch: int = 0,
    sample: int = 0,
    path: str = "<bytes>",
) -> Any:
    """Run a chain on one encoded image (for tests and inspection).

    Args:
        transforms: A list of hdmlp transforms, or a pipeline from
            :func:`compile_pipeline` (faster when called many times).
        data: The file's bytes.
        seed, epoch, sample: The key of the random parameters.
        path: Name used in error messages.

    Returns:
        A ``torch.Tensor`` (float32 CHW, or uint8 CHW/HWC) when torch is
        installed; otherwise a ``memoryview`` of that shape and type.

    Raises:
        ValueError: The image is corrupt, truncated, empty, unsupported or too
            large (the message names ``path``), or the chain is invalid.
    """
    pipeline = transforms if isinstance(transforms, _core.TransformPipeline) else compile_pipeline(transforms)
    buf, shape = pipeline.apply(data, path, seed, epoch, sample)
    try:
        import torch
    except ImportError:
        return memoryview(buf)
    dtype = torch.float32 if buf.dtype == "float32" else torch.uint8
    if math.prod(shape) == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(buf, dtype=dtype).reshape(shape)
