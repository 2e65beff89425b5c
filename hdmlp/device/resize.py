"""Crop, resize and flip a batch of decoded images on their device, as the C++ chain does, in a few kernels.

:func:`resize_crops` cuts each image's crop, resizes it with PIL's antialiased bilinear filter (two
separable passes, rounded to 8 bits between them as PIL and the C++ resampler do) and mirrors it,
as a few batched tensor operations for the whole batch, not as a kernel per image.

Pure functions of their arguments; any thread may call them (on the stream it has made current).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch

__all__ = ["resize_crops", "upload"]


def _coefficients(in_size: torch.Tensor, out_size: int, taps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """PIL's bilinear resampling taps from ``in_size[n]`` pixels to ``out_size``, on ``in_size``'s
    device: (input pixel of each tap [N, out, taps] long, normalised weights [N, out, taps] float32).
    ``taps`` must cover the widest support (:func:`_taps_for`)."""
    size = in_size.to(torch.float64)
    device = size.device
    scale = size / out_size
    filter_scale = scale.clamp(min=1.0)
    support = filter_scale  # the triangle filter's support is 1, widened when shrinking
    centre = (torch.arange(out_size, dtype=torch.float64, device=device) + 0.5)[None] * scale[:, None]
    first = torch.trunc(centre - support[:, None] + 0.5).clamp(min=0)
    end = torch.minimum(torch.trunc(centre + support[:, None] + 0.5), size[:, None])
    x = first[..., None] + torch.arange(taps, dtype=torch.float64, device=device)
    weight = (1 - ((x - centre[..., None] + 0.5) / filter_scale[:, None, None]).abs()).clamp(min=0)
    weight = torch.where(x < end[..., None], weight, torch.zeros((), dtype=torch.float64, device=device))
    total = weight.sum(-1, keepdim=True)
    weight = weight / torch.where(total > 0, total, torch.ones((), dtype=torch.float64, device=device))
    index = torch.minimum(x, (size - 1)[:, None, None]).to(torch.int64)
    return index, weight.to(torch.float32)


def _taps_for(largest_input: int, out_size: int) -> int:
    return int(math.ceil(max(largest_input / out_size, 1.0))) * 2 + 1


def _dense_weights(taps: tuple[torch.Tensor, torch.Tensor], padded: int) -> torch.Tensor:
    """The taps of :func:`_coefficients` (``[N, out, taps]`` input pixels and weights) as ``[N, padded, out]``
    matrices (input pixel x output pixel; zero past each input's size), so that a resampling pass is one
    batched matrix product. ``padded`` is at least the largest input size."""
    index, weight = taps
    dense = torch.zeros((index.shape[0], padded, index.shape[1]), dtype=torch.float32, device=index.device)
    dense.scatter_add_(1, index.transpose(1, 2), weight.transpose(1, 2))
    return dense


def upload(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A small host tensor on ``device`` without making the host wait for the stream's earlier work."""
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def resize_crops(images: Sequence[torch.Tensor], boxes: torch.Tensor, flips: torch.Tensor,
                 size: tuple[int, int], *, group: int = 64, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Crop ``boxes[n] = (top, left, height, width)`` of each ``[C, H, W]`` uint8 image, resize it to
    ``size`` with PIL's antialiased bilinear filter and mirror it where ``flips[n]``: one uint8
    ``[N, C, h, w]`` batch on the images' device.

    The images are joined into one buffer; per group of up to ``group`` crops of similar size, one
    gather cuts the crops out (padded to the group's largest), and each pass (horizontal, then
    vertical, rounded to 8 bits between them as PIL does) is one batched matrix product. A few
    large kernels per batch, not one per image, and the host never waits for the device; a batch
    with one huge photo pads only its own group.

    ``dtype`` is the products' input type: ``torch.float16`` runs them on a GPU's tensor cores
    (pixels of 8 bits are exact in it; the weights are rounded to 11 bits, and the sums are float32
    where the device offers that): on an H100, 2.7% of the values of the benchmark's photos differed
    from float32's, by at most 2 levels of 255.
    """
    n = len(images)
    out_h, out_w = size
    if n == 0:
        return torch.empty((0, 3, out_h, out_w), dtype=torch.uint8)
    device = images[0].device
    channels = images[0].shape[0]
    flat = _joined(images)
    dims = torch.tensor([[im.shape[1], im.shape[2]] for im in images], dtype=torch.int64)
    plane = dims[:, 0] * dims[:, 1]
    starts = torch.zeros(n, dtype=torch.int64)
    starts[1:] = torch.cumsum(plane * channels, 0)[:-1]
    boxes = boxes.to(torch.int64).cpu()
    heights, widths = boxes[:, 2].tolist(), boxes[:, 3].tolist()
    order = sorted(range(n), key=lambda i: (heights[i] * widths[i], i))
    table = torch.cat([starts[:, None], plane[:, None], dims[:, 1:], boxes, flips.to(torch.int64).cpu()[:, None]], 1)
    table = upload(torch.cat([table[order], torch.tensor(order)[:, None]], 1), device)  # sorted by crop area
    out = torch.empty((n, channels, out_h, out_w), dtype=torch.uint8, device=device)
    channel = torch.arange(channels, device=device)[None, None, :, None]
    # Every crop's taps at once (as many as the largest crop needs; past a crop's own, weight 0).
    all_cols = _coefficients(table[:, 6], out_w, _taps_for(max(widths), out_w))
    all_rows = _coefficients(table[:, 5], out_h, _taps_for(max(heights), out_h))
    for first in range(0, n, group):
        members = order[first:first + group]
        rows, cols = max(heights[i] for i in members), max(widths[i] for i in members)
        start, plane_g, width, top, left, box_h, box_w, mirrored, slot = table[first:first + group].unbind(1)
        part = slice(first, first + group)
        r = torch.minimum(torch.arange(rows, device=device)[None], (box_h - 1)[:, None])  # [m, rows]
        x = torch.minimum(torch.arange(cols, device=device)[None], (box_w - 1)[:, None])  # [m, cols]
        # [m, rows, C, cols]: a row's channels side by side, so that both passes are plain batched products
        index = (start[:, None, None, None] + channel * plane_g[:, None, None, None]
                 + ((top[:, None] + r) * width[:, None])[:, :, None, None] + (left[:, None] + x)[:, None, None, :])
        crops = flat[index].to(dtype)  # past a crop: its last row/column, weight 0
        m = len(members)
        col_weights = _dense_weights((all_cols[0][part], all_cols[1][part]), cols)  # [m, cols, out_w]
        col_weights = torch.where(mirrored.bool()[:, None, None], col_weights.flip(2), col_weights).to(dtype)
        wide = _round8(_bmm(crops.view(m, rows * channels, cols), col_weights))  # [m, rows * C, out_w]
        row_weights = _dense_weights((all_rows[0][part], all_rows[1][part]), rows).transpose(1, 2).to(dtype)
        tall = _round8(_bmm(row_weights, wide.to(dtype).view(m, rows, channels * out_w)))  # [m, out_h, C * out_w]
        out.index_copy_(0, slot, tall.to(torch.uint8).view(m, out_h, channels, out_w).permute(0, 2, 1, 3))
    return out


def _joined(images: Sequence[torch.Tensor]) -> torch.Tensor:
    """The images one after another in one flat tensor: a view where they already lie so in one buffer (hdmlp's
    nvJPEG decoder writes a batch that way), else a copy."""
    first = images[0]
    at = first.data_ptr()
    for im in images:
        if im.data_ptr() != at or not im.is_contiguous() or im.untyped_storage().data_ptr() != \
                first.untyped_storage().data_ptr():
            return torch.cat([im.reshape(-1) for im in images])
        at += im.numel()
    return first.as_strided((at - first.data_ptr(),), (1,), first.storage_offset())


def _bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A batched product in float32; half-precision inputs sum in float32 where the device can."""
    if a.dtype == torch.float32:
        return torch.bmm(a, b)
    if a.device.type == "cuda":
        try:
            return torch.bmm(a, b, out_dtype=torch.float32)
        except (TypeError, RuntimeError):  # a torch without out_dtype
            pass
    return torch.bmm(a.to(torch.float32), b.to(torch.float32))  # the same sums: half inputs, float32 adds


def _round8(x: torch.Tensor) -> torch.Tensor:
    return torch.floor_(x.add_(0.5)).clamp_(0, 255)
