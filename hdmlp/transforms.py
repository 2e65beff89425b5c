"""Image transforms that hdmlp runs in C++, with torchvision's names and defaults.

A chain is a list that starts with :class:`ImgDecode`, goes on with ops on
the 8-bit image (:class:`Resize`, :class:`CenterCrop`,
:class:`RandomResizedCrop`, :class:`RandomCrop`, :class:`Pad`, the flips,
:class:`ColorJitter`, :class:`Grayscale`, :class:`RandomGrayscale`,
:class:`GaussianBlur`, :class:`RandomRotation`, :class:`RandomAffine`,
:class:`TrivialAugmentWide`, :class:`RandAugment`, :class:`AutoAugment`),
then :class:`ToTensor` (optionally followed by :class:`Normalize`) or
:class:`ToUint8`, and optionally :class:`RandomErasing` on the tensor::

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

:class:`MixUp` and :class:`CutMix` work on delivered batches (NumPy arrays or
torch tensors) and their labels, as ``torchvision.transforms.v2`` does, with
parameters drawn from ``(seed, epoch, batch)``.

A Job's chain may end in Python callables after these ops (``[ImgDecode(),
RandomResizedCrop(224), ToPIL(), torchvision_compose]``), run in worker
processes: see :mod:`hdmlp.python_transforms`.

This module imports neither torch nor torchvision; ``interpolation`` accepts
``torchvision.transforms.InterpolationMode`` members as well as their names.
"""

from __future__ import annotations

import enum
import math
import numbers
import random
from collections.abc import Sequence
from typing import Any

from hdmlp import _core
from hdmlp.python_chain import ToPIL  # noqa: F401 (a Python transform, re-exported: T.ToPIL())
from hdmlp.transform_base import PIL_FILTER_NAMES, Spec, Transform

__all__ = [
    "AutoAugment",
    "AutoAugmentPolicy",
    "CenterCrop",
    "ColorJitter",
    "CutMix",
    "GaussianBlur",
    "Grayscale",
    "ImgDecode",
    "MixUp",
    "Normalize",
    "Pad",
    "RandAugment",
    "RandomAffine",
    "RandomCrop",
    "RandomErasing",
    "RandomGrayscale",
    "RandomHorizontalFlip",
    "RandomResizedCrop",
    "RandomRotation",
    "RandomVerticalFlip",
    "Resize",
    "ToPIL",
    "ToTensor",
    "ToUint8",
    "Transform",
    "TrivialAugmentWide",
    "apply",
    "compile_pipeline",
    "pipeline_specs",
]

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


def _interpolation_code(interpolation: Any) -> int:
    value = getattr(interpolation, "value", interpolation)  # InterpolationMode -> its string
    if isinstance(value, str) and value.lower() in _INTERPOLATION:
        return _INTERPOLATION[value.lower()]
    if isinstance(value, int) and not isinstance(value, bool) and value in PIL_FILTER_NAMES:
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


def _number(value: Any, name: str) -> float:
    """One real number: an int, a float, a NumPy or 0-d torch number; not a bool or a string."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, (str, bytes, bool)) and hasattr(value, "__float__"):
        try:
            return float(value)
        except (TypeError, ValueError):
            pass
    raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")


def _flag(value: Any, name: str, allow_none: bool = False) -> bool | None:
    """A bool (or 0/1): a string such as "false" is refused, not taken as True."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or (isinstance(value, numbers.Integral) and value in (0, 1)):
        return bool(value)
    if type(value).__name__ == "bool_":  # numpy's
        return bool(value)
    raise TypeError(f"{name} must be True or False{' (or None)' if allow_none else ''}, "
                    f"got {type(value).__name__} {value!r}")


def _numbers(values: float | Sequence[float], name: str) -> list[float]:
    if isinstance(values, numbers.Real) and not isinstance(values, bool):
        return [float(values)]
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a number or a sequence of numbers, got {type(values).__name__} {values!r}")
    try:
        return [_number(v, name) for v in values]  # type: ignore[union-attr]
    except TypeError:
        raise TypeError(f"{name} must be a number or a sequence of numbers, got {values!r}") from None


# ImgDecode(device=..., decoder=...): the device's JPEG decoders (hdmlp.device_decode).
JPEG_DECODERS = ("auto", "torchvision", "nvjpeg", "nvjpeg:hardware", "nvjpeg:gpu_hybrid", "nvjpeg:default")


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
        fast: Speed over bit-parity, as FFCV and DALI decode by default. A
            JPEG is decoded at the smallest of libjpeg's DCT scales 1/8, 1/4
            and 1/2 that still gives the chain's first resize at least as many
            pixels as it outputs (chosen per sample from the crop box, which
            is drawn on the full-size image exactly as without ``fast``, so
            both modes show the same content), with libjpeg's fast integer
            IDCT and without fancy chroma upsampling. Includes what ``draft``
            does. The random draws and the output shape do not change, and the
            result is still a function of (seed, epoch, sample); the values
            move by about 1-3 levels of 255 on average (docs/transforms.md,
            "Fast decoding"). Other formats are decoded exactly.
        device: Decode on this device instead (``"cuda"``, ``"cuda:0"``; ``"cpu"`` runs the
            same code path on the CPU): the staging workers hand over the file bytes, the
            device decodes each batch's JPEGs at once (nvJPEG through torchvision's
            ``decode_jpeg``) and crops, resizes and flips them in batched operations, with the
            same draws as the CPU chain. Batches then arrive on that device. For chains of
            ``RandomResizedCrop``, ``RandomHorizontalFlip``, ``ToTensor``/``Normalize`` or
            ``ToUint8`` (:mod:`hdmlp.device_decode`, docs/gpu.md).
        cpu_share: With ``device``, the share of each batch (0 to 1) that the C++ chain
            decodes on CPU threads at the same time (hybrid decoding; docs/gpu.md says how
            to pick it). Files the device cannot decode (not JPEG, CMYK) always go there.
        decoder: With ``device``, which JPEG decoder the device uses: ``"auto"``
            (torchvision's ``decode_jpeg``, which uses the GPU's JPEG engines where it has
            them; on a GPU without engines hdmlp's own nvJPEG decoder, :mod:`hdmlp.nvjpeg`,
            where it was built, which decodes the Huffman codes on the GPU),
            ``"torchvision"``, ``"nvjpeg"`` (hdmlp's, or an error saying why not), or
            ``"nvjpeg:hardware"``, ``"nvjpeg:gpu_hybrid"``, ``"nvjpeg:default"`` for one of
            nvJPEG's backends (docs/gpu.md).
    """

    def __init__(self, draft: bool = False, fast: bool = False, device: Any = None, cpu_share: float = 0.0,
                 decoder: str = "auto") -> None:
        self.draft = _flag(draft, "draft")
        self.fast = _flag(fast, "fast")
        self.device = device
        if isinstance(cpu_share, bool) or not isinstance(cpu_share, (int, float)) or not 0.0 <= cpu_share <= 1.0:
            raise ValueError(f"cpu_share must be a number in [0, 1] (the share of each batch the CPU decodes), "
                             f"got {cpu_share!r}")
        if cpu_share and device is None:
            raise ValueError("cpu_share needs device=...: it splits each batch between the CPU and that device")
        self.cpu_share = float(cpu_share)
        if decoder not in JPEG_DECODERS:
            raise ValueError(f"decoder must be one of {', '.join(map(repr, JPEG_DECODERS))}, got {decoder!r}")
        if decoder != "auto" and device is None:
            raise ValueError("decoder needs device=...: it picks the device's JPEG decoder")
        self.decoder = decoder

    def __repr__(self) -> str:
        on = f", device={self.device!r}" if self.device is not None else ""
        share = f", cpu_share={self.cpu_share!r}" if self.cpu_share else ""
        decoder = f", decoder={self.decoder!r}" if self.decoder != "auto" else ""
        return f"ImgDecode(draft={self.draft!r}, fast={self.fast!r}{on}{share}{decoder})"

    def _spec(self) -> Spec:
        return ("ImgDecode", {"draft": [1.0 if self.draft else 0.0], "fast": [1.0 if self.fast else 0.0]})


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
        if max_size is not None and (isinstance(max_size, bool) or not isinstance(max_size, numbers.Integral)
                                     or max_size <= 0):
            raise TypeError(f"max_size must be a positive int or None, got {type(max_size).__name__} {max_size!r}")
        self.max_size = max_size
        self.antialias = _flag(antialias, "antialias", allow_none=True) is not False

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
        self.antialias = _flag(antialias, "antialias", allow_none=True) is not False

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
        self.p = _number(p, "p")

    def _spec(self) -> Spec:
        return ("RandomHorizontalFlip", {"p": [self.p]})


class RandomVerticalFlip(Transform):
    """Mirror top-bottom with probability ``p``, like torchvision's."""

    def __init__(self, p: float = 0.5) -> None:
        self.p = _number(p, "p")

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
        self.inplace = _flag(inplace, "inplace")

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


_NOT_IN_CHAINS = ("Transform", "AutoAugmentPolicy", "MixUp", "CutMix", "ToPIL")  # ToPIL: a Python transform
_PAD_MODES = {"constant": 0, "edge": 1, "reflect": 2, "symmetric": 3}


def _fill(fill: Any, name: str = "fill") -> list[float] | None:
    """A fill colour as torchvision takes it: None, a number, or one value per channel."""
    if fill is None:
        return None
    if isinstance(fill, numbers.Number) and not isinstance(fill, bool):
        return [float(fill)]
    if isinstance(fill, Sequence) and len(fill) in (1, 3) and all(
        isinstance(v, numbers.Number) and not isinstance(v, bool) for v in fill
    ):
        return [float(v) for v in fill]
    raise TypeError(f"{name} must be a number or a sequence of 1 or 3 numbers, got {fill!r}")


def _pair(value: Any, name: str) -> list[float]:
    values = _numbers(value, name)
    if len(values) != 2:
        raise ValueError(f"{name} should be a sequence of length 2, got {value!r}")
    return values


def _degrees(value: Any, name: str, lengths: tuple[int, ...] = (2,)) -> list[float]:
    """torchvision's _setup_angle: a number d means (-d, d)."""
    if isinstance(value, numbers.Number) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"If {name} is a single number, it must be positive.")
        return [-float(value), float(value)]
    values = _numbers(value, name)
    if len(values) not in lengths:
        raise ValueError(f"{name} should be a sequence of length {' or '.join(map(str, lengths))}.")
    return values


def _geometric_interpolation(interpolation: Any) -> int:
    code = _interpolation_code(interpolation)
    if code not in (0, 2, 3):
        raise ValueError(f"interpolation must be nearest, bilinear or bicubic here (PIL's transforms), "
                         f"got {interpolation!r}")
    return code


def _with_fill(args: dict[str, list[float]], fill: Any) -> dict[str, list[float]]:
    values = _fill(fill)
    if values is not None:
        args["fill"] = values
    return args


class ColorJitter(Transform):
    """Randomly change brightness, contrast, saturation and hue, like torchvision's ``ColorJitter``.

    Per sample: a random order of the four adjustments and a factor uniform in
    each range, applied with PIL's arithmetic (``ImageEnhance``, and the HSV
    round trip of ``adjust_hue``), bit for bit.

    Args:
        brightness, contrast, saturation: A number ``f`` (factor in
            ``[max(0, 1 - f), 1 + f]``) or a pair ``(min, max)``.
        hue: A number ``f <= 0.5`` (in ``[-f, f]``) or a pair in ``[-0.5, 0.5]``.
    """

    def __init__(self, brightness: Any = 0, contrast: Any = 0, saturation: Any = 0, hue: Any = 0) -> None:
        self.brightness = self._check_input(brightness, "brightness")
        self.contrast = self._check_input(contrast, "contrast")
        self.saturation = self._check_input(saturation, "saturation")
        self.hue = self._check_input(hue, "hue", center=0.0, bound=(-0.5, 0.5), clip_first_on_zero=False)

    @staticmethod
    def _check_input(value: Any, name: str, center: float = 1.0, bound: tuple[float, float] = (0.0, math.inf),
                     clip_first_on_zero: bool = True) -> tuple[float, float] | None:
        if isinstance(value, numbers.Number) and not isinstance(value, bool):
            if value < 0:
                raise ValueError(f"If {name} is a single number, it must be non negative.")
            lo, hi = center - float(value), center + float(value)
            if clip_first_on_zero:
                lo = max(lo, 0.0)
        elif isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
            lo, hi = _number(value[0], f"{name}[0]"), _number(value[1], f"{name}[1]")
        else:
            raise TypeError(f"{name} should be a single number or a list/tuple with length 2, got "
                            f"{type(value).__name__} {value!r}")
        if not bound[0] <= lo <= hi <= bound[1]:
            raise ValueError(f"{name} values should be between {bound}, but got {[lo, hi]}.")
        return None if lo == hi == center else (lo, hi)

    def _spec(self) -> Spec:
        args = {name: list(getattr(self, name)) for name in ("brightness", "contrast", "saturation", "hue")
                if getattr(self, name) is not None}
        return ("ColorJitter", args)


class Grayscale(Transform):
    """Convert to grayscale, like torchvision's ``Grayscale`` (PIL's ``convert("L")``).

    Args:
        num_output_channels: 1 (the chain's output then has one channel) or 3.
    """

    def __init__(self, num_output_channels: int = 1) -> None:
        if isinstance(num_output_channels, bool) or num_output_channels not in (1, 3):
            raise ValueError(f"num_output_channels should be either 1 or 3, got {num_output_channels!r}")
        self.num_output_channels = num_output_channels

    def _spec(self) -> Spec:
        return ("Grayscale", {"num_output_channels": [float(self.num_output_channels)]})


class RandomGrayscale(Transform):
    """Convert to grayscale with probability ``p``, keeping the channels, like torchvision's."""

    def __init__(self, p: float = 0.1) -> None:
        self.p = _number(p, "p")

    def _spec(self) -> Spec:
        return ("RandomGrayscale", {"p": [self.p]})


class GaussianBlur(Transform):
    """Blur with a Gaussian of random sigma, like torchvision's ``GaussianBlur``.

    Per sample sigma is uniform in ``sigma``; the blur is torch's float32
    kernel on the reflect-padded image (within one 8-bit level of torch).

    Args:
        kernel_size: An odd positive int, or ``(kx, ky)``.
        sigma: A positive number, or ``(min, max)``.
    """

    def __init__(self, kernel_size: int | Sequence[int], sigma: float | Sequence[float] = (0.1, 2.0)) -> None:
        self.kernel_size = _size(kernel_size, "kernel_size")
        for k in self.kernel_size:
            if k <= 0 or k % 2 == 0:
                raise ValueError("Kernel size value should be an odd and positive number.")
        if isinstance(sigma, numbers.Number) and not isinstance(sigma, bool):
            if sigma <= 0:
                raise ValueError("If sigma is a single number, it must be positive.")
            self.sigma = [float(sigma), float(sigma)]
        elif isinstance(sigma, Sequence) and not isinstance(sigma, str) and len(sigma) == 2:
            sigma = [_number(sigma[0], "sigma[0]"), _number(sigma[1], "sigma[1]")]
            if not 0.0 < sigma[0] <= sigma[1]:
                raise ValueError("sigma values should be positive and of the form (min, max).")
            self.sigma = [float(sigma[0]), float(sigma[1])]
        else:
            raise TypeError(f"sigma should be a single number or a list/tuple with length 2, got "
                            f"{type(sigma).__name__} {sigma!r}")

    def _spec(self) -> Spec:
        return ("GaussianBlur", {"kernel_size": list(self.kernel_size), "sigma": list(self.sigma)})


class Pad(Transform):
    """Pad the image, like torchvision's ``Pad`` on a PIL image.

    Args:
        padding: An int (all sides), ``(left/right, top/bottom)`` or
            ``(left, top, right, bottom)``; non-negative.
        fill: The constant mode's colour: a number or ``(r, g, b)``.
        padding_mode: ``"constant"``, ``"edge"``, ``"reflect"`` or ``"symmetric"``.
    """

    def __init__(self, padding: int | Sequence[int], fill: Any = 0, padding_mode: str = "constant") -> None:
        _padding(padding)
        _fill(fill)
        self.padding = padding
        self.fill = fill
        if not isinstance(padding_mode, str) or padding_mode not in _PAD_MODES:
            raise ValueError(f"padding_mode should be either constant, edge, reflect or symmetric, got "
                             f"{padding_mode!r}")
        self.padding_mode = padding_mode

    def _spec(self) -> Spec:
        return ("Pad", _with_fill({"padding": _padding(self.padding),
                                   "padding_mode": [float(_PAD_MODES[self.padding_mode])]}, self.fill))


def _padding(padding: Any) -> list[float]:
    if isinstance(padding, int) and not isinstance(padding, bool):
        padding = [padding]
    if not (isinstance(padding, Sequence) and len(padding) in (1, 2, 4)
            and all(isinstance(p, int) and not isinstance(p, bool) for p in padding)):
        raise ValueError(f"padding must be an int or a 1, 2, or 4 element sequence of ints, got {padding!r}")
    if any(p < 0 for p in padding):
        raise ValueError(f"padding must be non-negative, got {padding!r}")
    return [float(p) for p in padding]


class RandomCrop(Transform):
    """Crop at a random place, like torchvision's ``RandomCrop`` (CIFAR-style recipes).

    Args:
        size: An int for a square, or ``(h, w)``.
        padding: Optional padding first, as :class:`Pad`'s.
        pad_if_needed: Pad an image smaller than ``size`` by the missing
            size on both sides (torchvision's rule); else such an image is a
            bad sample (``ValueError`` naming the file).
        fill, padding_mode: As :class:`Pad`'s.
    """

    def __init__(self, size: int | Sequence[int], padding: Any = None, pad_if_needed: bool = False, fill: Any = 0,
                 padding_mode: str = "constant") -> None:
        self.size = _size(size)
        if padding is not None:
            _padding(padding)
        _fill(fill)
        self.padding = padding
        self.pad_if_needed = _flag(pad_if_needed, "pad_if_needed")
        self.fill = fill
        if not isinstance(padding_mode, str) or padding_mode not in _PAD_MODES:
            raise ValueError(f"padding_mode should be either constant, edge, reflect or symmetric, got "
                             f"{padding_mode!r}")
        self.padding_mode = padding_mode

    def _spec(self) -> Spec:
        args = {"size": list(self.size), "pad_if_needed": [1.0 if self.pad_if_needed else 0.0],
                "padding_mode": [float(_PAD_MODES[self.padding_mode])]}
        if self.padding is not None:
            args["padding"] = _padding(self.padding)
        return ("RandomCrop", _with_fill(args, self.fill))


class RandomRotation(Transform):
    """Rotate by a random angle, like torchvision's ``RandomRotation`` (PIL's ``Image.rotate``).

    Args:
        degrees: ``d`` for ``(-d, d)``, or ``(min, max)``; counter-clockwise.
        interpolation: ``"nearest"`` (default), ``"bilinear"`` or ``"bicubic"``.
        expand: Grow the output to hold the whole rotated image (its size
            then varies: follow with a resize or crop for fixed batches).
        center: ``(x, y)`` in pixels; default the image's centre.
        fill: The colour outside the rotated image.
    """

    def __init__(self, degrees: Any, interpolation: Any = "nearest", expand: bool = False,
                 center: Sequence[float] | None = None, fill: Any = 0) -> None:
        self.degrees = _degrees(degrees, "degrees")
        self.interpolation = _geometric_interpolation(interpolation)
        self.expand = _flag(expand, "expand")
        self.center = None if center is None else _pair(center, "center")
        _fill(fill)
        self.fill = fill

    def _spec(self) -> Spec:
        args = {"degrees": list(self.degrees), "interpolation": [float(self.interpolation)],
                "expand": [1.0 if self.expand else 0.0]}
        if self.center is not None:
            args["center"] = list(self.center)
        return ("RandomRotation", _with_fill(args, self.fill))


class RandomAffine(Transform):
    """A random affine transform, like torchvision's ``RandomAffine`` (PIL's ``Image.transform``).

    Args:
        degrees: ``d`` for ``(-d, d)``, or ``(min, max)``.
        translate: ``(a, b)``: horizontal shift up to ``a * width``, vertical
            up to ``b * height`` pixels.
        scale: ``(min, max)``.
        shear: ``s`` for an x-shear in ``(-s, s)`` degrees, ``(min, max)``,
            or ``(xmin, xmax, ymin, ymax)``.
        interpolation: ``"nearest"`` (default), ``"bilinear"`` or ``"bicubic"``.
        fill: The colour outside the transformed image.
        center: ``(x, y)`` in pixels; default the image's centre.
    """

    def __init__(self, degrees: Any, translate: Sequence[float] | None = None, scale: Sequence[float] | None = None,
                 shear: Any = None, interpolation: Any = "nearest", fill: Any = 0,
                 center: Sequence[float] | None = None) -> None:
        self.degrees = _degrees(degrees, "degrees")
        self.translate = None if translate is None else _pair(translate, "translate")
        if self.translate is not None and not all(0.0 <= t <= 1.0 for t in self.translate):
            raise ValueError("translation values should be between 0 and 1")
        self.scale = None if scale is None else _pair(scale, "scale")
        if self.scale is not None and not all(s > 0 for s in self.scale):
            raise ValueError("scale values should be positive")
        self.shear = None if shear is None else _degrees(shear, "shear", (2, 4))
        self.interpolation = _geometric_interpolation(interpolation)
        _fill(fill)
        self.fill = fill
        self.center = None if center is None else _pair(center, "center")

    def _spec(self) -> Spec:
        args: dict[str, list[float]] = {"degrees": list(self.degrees), "interpolation": [float(self.interpolation)]}
        for name in ("translate", "scale", "shear", "center"):
            if getattr(self, name) is not None:
                args[name] = list(getattr(self, name))
        return ("RandomAffine", _with_fill(args, self.fill))


class TrivialAugmentWide(Transform):
    """torchvision's ``TrivialAugmentWide``: one random op of its wide space at a random magnitude.

    Args:
        num_magnitude_bins: The number of magnitude values (at least 2).
        interpolation: ``"nearest"`` (default), ``"bilinear"`` or ``"bicubic"``.
        fill: The colour outside a sheared, translated or rotated image.
    """

    def __init__(self, num_magnitude_bins: int = 31, interpolation: Any = "nearest", fill: Any = None) -> None:
        self.num_magnitude_bins = _whole_number(num_magnitude_bins, f"{type(self).__name__}: num_magnitude_bins")
        self.interpolation = _geometric_interpolation(interpolation)
        _fill(fill)
        self.fill = fill

    def _spec(self) -> Spec:
        return ("TrivialAugmentWide", _with_fill({"num_magnitude_bins": [float(self.num_magnitude_bins)],
                                                  "interpolation": [float(self.interpolation)]}, self.fill))


class RandAugment(Transform):
    """torchvision's ``RandAugment``: ``num_ops`` random ops at magnitude bin ``magnitude``.

    Args:
        num_ops: Ops applied in a row.
        magnitude: The bin (``< num_magnitude_bins``) of every op's magnitude.
        num_magnitude_bins: The number of magnitude values (at least 2).
        interpolation, fill: As :class:`TrivialAugmentWide`'s.
    """

    def __init__(self, num_ops: int = 2, magnitude: int = 9, num_magnitude_bins: int = 31,
                 interpolation: Any = "nearest", fill: Any = None) -> None:
        self.num_ops = _whole_number(num_ops, "RandAugment: num_ops")
        self.magnitude = _whole_number(magnitude, "RandAugment: magnitude")
        self.num_magnitude_bins = _whole_number(num_magnitude_bins, f"{type(self).__name__}: num_magnitude_bins")
        self.interpolation = _geometric_interpolation(interpolation)
        _fill(fill)
        self.fill = fill

    def _spec(self) -> Spec:
        return ("RandAugment", _with_fill({"num_ops": [float(self.num_ops)], "magnitude": [float(self.magnitude)],
                                           "num_magnitude_bins": [float(self.num_magnitude_bins)],
                                           "interpolation": [float(self.interpolation)]}, self.fill))


class AutoAugmentPolicy(enum.Enum):
    """AutoAugment's learned policies, as ``torchvision.transforms.AutoAugmentPolicy``."""

    IMAGENET = "imagenet"
    CIFAR10 = "cifar10"
    SVHN = "svhn"


_POLICY_CODES = {"imagenet": 0, "cifar10": 1, "svhn": 2}


class AutoAugment(Transform):
    """torchvision's ``AutoAugment`` with its learned sub-policies.

    Args:
        policy: ``AutoAugmentPolicy.IMAGENET`` (default), ``CIFAR10`` or
            ``SVHN``; torchvision's enum members and their names are accepted.
        interpolation, fill: As :class:`TrivialAugmentWide`'s.
    """

    def __init__(self, policy: Any = AutoAugmentPolicy.IMAGENET, interpolation: Any = "nearest",
                 fill: Any = None) -> None:
        value = getattr(policy, "value", policy)
        if not isinstance(value, str) or value.lower() not in _POLICY_CODES:
            raise ValueError(f"policy must be an AutoAugmentPolicy or one of {sorted(_POLICY_CODES)}, got {policy!r}")
        self.policy = AutoAugmentPolicy(value.lower())
        self.interpolation = _geometric_interpolation(interpolation)
        _fill(fill)
        self.fill = fill

    def _spec(self) -> Spec:
        return ("AutoAugment", _with_fill({"policy": [float(_POLICY_CODES[self.policy.value])],
                                           "interpolation": [float(self.interpolation)]}, self.fill))


class RandomErasing(Transform):
    """Erase a random rectangle of the tensor, like torchvision's ``RandomErasing``.

    Comes after :class:`ToTensor` (and :class:`Normalize`, as torchvision's
    recipes place it).

    Args:
        p: The probability of erasing.
        scale: Range of the erased area as a fraction of the image's.
        ratio: Range of the erased rectangle's aspect ratio.
        value: A number, one per channel, or ``"random"`` (standard normal
            noise; float output only).
        inplace: Accepted for compatibility.
    """

    def __init__(self, p: float = 0.5, scale: Sequence[float] = (0.02, 0.33), ratio: Sequence[float] = (0.3, 3.3),
                 value: Any = 0, inplace: bool = False) -> None:
        if isinstance(value, str) and value != "random":
            raise ValueError(f"value must be a number, one per channel, or 'random', got {value!r}")
        if not isinstance(value, (numbers.Number, str, Sequence)) or isinstance(value, bool):
            raise TypeError(f"value should be either a number or str or a sequence, got {type(value).__name__} "
                            f"{value!r}")
        self.p = _number(p, "p")
        self.scale = _pair(scale, "scale")
        self.ratio = _pair(ratio, "ratio")
        if self.scale[0] < 0 or self.scale[1] > 1:
            raise ValueError("Scale should be between 0 and 1")
        if not 0 <= self.p <= 1:
            raise ValueError("Random erasing probability should be between 0 and 1")
        self.value = value if isinstance(value, str) else _numbers(value, "value")
        self.inplace = _flag(inplace, "inplace")

    def _spec(self) -> Spec:
        args = {"p": [self.p], "scale": list(self.scale), "ratio": list(self.ratio)}
        if self.value == "random":
            args["random"] = [1.0]
        else:
            args["value"] = list(self.value)
        return ("RandomErasing", args)


# ---- Batch-level mixing -----------------------------------------------------------------------


class _BatchMix:
    """What MixUp and CutMix share: labels to soft labels, and parameters from (seed, epoch, batch)."""

    _domain = ""

    # Beta(alpha, alpha) for alpha this large is 0.5 to many digits; beyond it
    # Python's sampler overflows and never returns (alpha=1e308).
    MAX_ALPHA = 1e6
    # One-hot labels are [B, num_classes] floats: 2**24 classes is already 64 MiB a sample.
    MAX_CLASSES = 1 << 24

    def __init__(self, *, alpha: float = 1.0, num_classes: int | None = None, label_smoothing: float = 0.0,
                 seed: int = 0) -> None:
        name = type(self).__name__
        if not (isinstance(alpha, numbers.Real) and 0 < alpha <= self.MAX_ALPHA):
            raise ValueError(f"{name}: alpha must be a number in (0, {self.MAX_ALPHA:g}], got {alpha!r}")
        if num_classes is not None and (isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral)
                                        or not 1 <= num_classes <= self.MAX_CLASSES):
            raise ValueError(f"{name}: num_classes must be an int from 1 to {self.MAX_CLASSES} (2**24), "
                             f"got {num_classes!r}")
        if not (isinstance(label_smoothing, numbers.Real) and 0.0 <= label_smoothing < 1.0):
            raise ValueError(f"{name}: label_smoothing must be in [0, 1), got {label_smoothing!r}")
        self.alpha = float(alpha)
        self.num_classes = None if num_classes is None else int(num_classes)
        self.label_smoothing = float(label_smoothing)
        self.seed = _whole_number(seed, f"{name}: seed")

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(alpha={self.alpha}, num_classes={self.num_classes}, "
                f"label_smoothing={self.label_smoothing}, seed={self.seed})")

    def _rng(self, epoch: int, batch: int) -> random.Random:
        # A portable stream per (seed, epoch, batch): Python's Mersenne Twister
        # seeded with a hash, the same on every platform and Python version.
        name = type(self).__name__
        key = (f"hdmlp.{self._domain}:{self.seed}:{_whole_number(epoch, name + ': epoch')}:"
               f"{_whole_number(batch, name + ': batch')}").encode()
        import hashlib  # here: only reproducible Python-side draws need it, and it costs `import hdmlp` 2 ms

        return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:16], "little"))

    def _soft_labels(self, labels: Any, lam: float, batch_size: int) -> Any:
        """One-hot (smoothed) labels mixed with the batch rolled by one, as torchvision.transforms.v2."""
        torch_like = hasattr(labels, "roll")
        ndim = labels.ndim
        if ndim not in (1, 2) or labels.shape[0] != batch_size:
            raise ValueError(f"labels should have shape (batch_size,) or (batch_size, num_classes) with batch_size "
                             f"{batch_size}, got {tuple(labels.shape)}")
        if ndim == 1:
            if self.num_classes is None:
                raise ValueError("num_classes must be passed if the labels are index-based (1D)")
            if batch_size > 0:
                low, high = int(labels.min()), int(labels.max())
                if low < 0 or high >= self.num_classes:
                    bad = low if low < 0 else high
                    raise ValueError(f"{type(self).__name__}: label {bad} is outside [0, num_classes) with "
                                     f"num_classes={self.num_classes}; pass the dataset's number of classes")
            if torch_like:
                import torch

                labels = torch.nn.functional.one_hot(labels.long(), self.num_classes).float()
            else:
                import numpy as np

                labels = np.eye(self.num_classes, dtype=np.float32)[np.asarray(labels)]
        elif self.num_classes is not None and labels.shape[-1] != self.num_classes:
            raise ValueError(f"When passing 2D labels, the number of elements in last dimension must match "
                             f"num_classes: {labels.shape[-1]} != {self.num_classes}.")
        if torch_like:
            labels = labels if labels.is_floating_point() else labels.float()
        else:
            import numpy as np

            labels = labels if np.issubdtype(labels.dtype, np.floating) else labels.astype(np.float32)
        if self.label_smoothing:
            n = labels.shape[-1]
            labels = labels * (1.0 - self.label_smoothing) + self.label_smoothing / n
        return _mix(labels, lam)


def _whole_number(value: Any, what: str) -> int:
    """An int from an int or an integral float; else a ValueError naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
            or int(value) != value:
        raise ValueError(f"{what} must be a whole number, got {value!r}")
    return int(value)


def _roll(x: Any) -> Any:
    if hasattr(x, "roll"):
        return x.roll(1, 0)
    import numpy as np

    return np.roll(x, 1, axis=0)


def _mix(x: Any, lam: float) -> Any:
    """x.roll(1, 0) * (1 - lam) + x * lam, in x's float type (torchvision's order)."""
    if hasattr(x, "roll"):
        return x.roll(1, 0).mul_(1.0 - lam).add_(x.mul(lam))
    import numpy as np

    t = x.dtype.type
    return (np.roll(x, 1, axis=0) * t(1.0 - lam) + x * t(lam)).astype(x.dtype, copy=False)


def _check_batch(images: Any, labels: Any) -> tuple[int, int, int]:
    if getattr(images, "ndim", 0) != 4:
        raise ValueError(f"images must be a batch [B, C, H, W], got shape {tuple(getattr(images, 'shape', ()))}")
    if images.shape[0] != labels.shape[0]:
        raise ValueError(f"The batch size of the images and the labels differ: {images.shape[0]} != "
                         f"{labels.shape[0]}")
    return int(images.shape[0]), int(images.shape[-2]), int(images.shape[-1])


class MixUp(_BatchMix):
    """MixUp on a delivered batch, as ``torchvision.transforms.v2.MixUp``.

    ``images, labels = mixup(images, labels, epoch=e, batch=i)``: each image
    becomes ``lam * image + (1 - lam) * previous image`` (the batch rolled by
    one), the labels the same mix of one-hot labels; ``lam ~ Beta(alpha,
    alpha)`` is drawn from ``(seed, epoch, batch)`` alone, so a restarted or
    re-run job mixes the same way.

    Args:
        alpha: Beta's parameter.
        num_classes: Needed for index labels (shape ``[B]``).
        label_smoothing: Smooth the one-hot labels first (``1 - s + s/K`` and
            ``s/K``; 0, torchvision's behaviour, by default).
        seed: Usually the job's seed.

    Images and labels are NumPy arrays or torch tensors (float images); the
    results are new arrays of the same kind.
    """

    _domain = "mixup"

    def params(self, epoch: int, batch: int) -> dict[str, float]:
        """The parameters of batch ``batch`` of epoch ``epoch``: ``{"lam": ...}``."""
        return {"lam": self._rng(epoch, batch).betavariate(self.alpha, self.alpha)}

    def __call__(self, images: Any, labels: Any, *, epoch: int, batch: int) -> tuple[Any, Any]:
        batch_size, _, _ = _check_batch(images, labels)
        floating = images.is_floating_point() if hasattr(images, "is_floating_point") else \
            getattr(images.dtype, "kind", "") == "f"
        if not floating:
            # Mixing in an integer type rounds lam to 0 or 1: all-zero or unmixed images.
            raise TypeError(f"MixUp mixes float images, got dtype {images.dtype}: end the chain with "
                            f"ToTensor()/Normalize(), or convert the batch to float first")
        lam = self.params(epoch, batch)["lam"]
        return _mix(images, lam), self._soft_labels(labels, lam, batch_size)


class CutMix(_BatchMix):
    """CutMix on a delivered batch, as ``torchvision.transforms.v2.CutMix``.

    Each image gets the box ``(x1, y1, x2, y2)`` pasted from the previous
    image (the batch rolled by one): ``lam ~ Beta(alpha, alpha)``, a centre
    uniform in the image, half sizes ``int(0.5 * sqrt(1 - lam) * W)`` and
    ``... * H``, clipped to the image; the labels mix with the pasted area's
    share, ``lam = 1 - box area / image area``. Parameters come from
    ``(seed, epoch, batch)`` alone. Arguments as :class:`MixUp`'s.
    """

    _domain = "cutmix"

    def params(self, epoch: int, batch: int, height: int, width: int) -> dict[str, Any]:
        """``{"box": (x1, y1, x2, y2), "lam_adjusted": ...}`` for batch ``batch`` of epoch ``epoch``."""
        rng = self._rng(epoch, batch)
        lam = rng.betavariate(self.alpha, self.alpha)
        r_x, r_y = rng.randrange(width), rng.randrange(height)
        r = 0.5 * math.sqrt(1.0 - lam)
        r_w_half, r_h_half = int(r * width), int(r * height)
        x1, y1 = max(r_x - r_w_half, 0), max(r_y - r_h_half, 0)
        x2, y2 = min(r_x + r_w_half, width), min(r_y + r_h_half, height)
        return {"box": (x1, y1, x2, y2), "lam_adjusted": float(1.0 - (x2 - x1) * (y2 - y1) / (width * height))}

    def __call__(self, images: Any, labels: Any, *, epoch: int, batch: int) -> tuple[Any, Any]:
        batch_size, height, width = _check_batch(images, labels)
        p = self.params(epoch, batch, height, width)
        x1, y1, x2, y2 = p["box"]
        out = images.clone() if hasattr(images, "clone") else images.copy()
        out[..., y1:y2, x1:x2] = _roll(images)[..., y1:y2, x1:x2]
        return out, self._soft_labels(labels, p["lam_adjusted"], batch_size)


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
                f"hdmlp.transforms.{type(t).__name__} (the ops hdmlp runs in C++: "
                f"{', '.join(n for n in __all__ if n[0].isupper() and n not in _NOT_IN_CHAINS)})"
            )
        specs.append(t.spec())
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
