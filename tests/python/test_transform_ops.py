"""Issue 16's C++ ops against torchvision on PIL images.

Deterministic settings (ColorJitter with degenerate ranges, fixed rotations,
a fixed blur sigma, every policy sub-op at fixed magnitudes, ...) and random
ops replayed through torchvision with hdmlp's own draws must give the same
pixels (tolerances: docs/transforms.md); the draws must follow torchvision's
distributions (two-sample Kolmogorov-Smirnov tests against torchvision's
get_params, or against torchvision's own policies with _apply_op recorded);
and everything stays a pure function of (seed, epoch, sample).
"""

from __future__ import annotations

import io
import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
import torchvision.transforms as TV
import torchvision.transforms.functional as F
from PIL import Image
from torchvision.transforms import InterpolationMode
from torchvision.transforms import autoaugment as tv_autoaugment

import hdmlp
from hdmlp import transforms as T
from hdmlp.datasets import make_image_folder
from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
MODES = ["nearest", "lanczos", "bilinear", "bicubic"]  # PIL codes 0..3


def _encode(img: Image.Image, fmt: str = "PNG", **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


@pytest.fixture(scope="module")
def photo(tmp_path_factory) -> tuple[bytes, Image.Image]:
    """A real photo, small (lossless PNG: only the ops can differ)."""
    root = make_image_folder(tmp_path_factory.mktemp("ops") / "folder", num_images=1, num_classes=1, seed=11,
                             min_side=300, max_side=400)
    with Image.open(next(root.rglob("*.JPEG"))) as img:
        small = img.convert("RGB").resize((123, 91), Image.BICUBIC)
    return _encode(small), small


@pytest.fixture(scope="module")
def jpeg(tmp_path_factory) -> tuple[bytes, Image.Image]:
    root = make_image_folder(tmp_path_factory.mktemp("ops_jpeg") / "folder", num_images=1, num_classes=1, seed=3,
                             min_side=260, max_side=340)
    data = next(root.rglob("*.JPEG")).read_bytes()
    return data, Image.open(io.BytesIO(data)).convert("RGB")


def ours(chain: list, data: bytes, sample: int = 0, seed: int = 0, epoch: int = 0) -> np.ndarray:
    return T.apply([T.ImgDecode(), *chain, T.ToUint8("HWC")], data, seed=seed, epoch=epoch, sample=sample).numpy()


def assert_same(a, b, what: str, tolerance: int = 0) -> None:
    a, b = np.asarray(a).astype(int), np.asarray(b).astype(int)
    assert a.shape == b.shape, f"{what}: shape {a.shape} != {b.shape}"
    diff = np.abs(a - b)
    assert diff.max() <= tolerance, f"{what}: max diff {diff.max()} on {np.mean(diff > 0):.4%} of the values"


def ks(a, b) -> float:
    """Two-sample Kolmogorov-Smirnov distance."""
    a, b = np.sort(np.asarray(a, float)), np.sort(np.asarray(b, float))
    grid = np.concatenate([a, b])
    return float(np.abs(np.searchsorted(a, grid, side="right") / len(a)
                        - np.searchsorted(b, grid, side="right") / len(b)).max())


# KS distance with p ~ 0.001 for two samples of n each (c(0.001) = 1.95).
def ks_limit(n: int, m: int | None = None) -> float:
    m = m or n
    return 1.95 * math.sqrt((n + m) / (n * m))


# ---- Deterministic settings: the same pixels as torchvision ---------------------------------


@pytest.mark.parametrize("factor", [0.0, 0.35, 1.0, 1.7])
def test_color_jitter_with_fixed_factors_matches_torchvision(photo, factor):
    data, img = photo
    hue = factor / 4 - 0.2
    pipeline = T.compile_pipeline([T.ImgDecode(), T.ColorJitter((factor, factor), (factor, factor), (factor, factor),
                                                                (hue, hue)), T.ToUint8("HWC")])
    for sample in range(3):  # the order of the four adjustments is drawn; replay it
        (draw,) = pipeline.random_draws(img.width, img.height, 0, 0, sample)
        ref = img
        for fn in str(draw["order"]).zfill(4):
            ref = {"0": lambda x: F.adjust_brightness(x, factor), "1": lambda x: F.adjust_contrast(x, factor),
                   "2": lambda x: F.adjust_saturation(x, factor), "3": lambda x: F.adjust_hue(x, hue)}[fn](ref)
        assert_same(T.apply(pipeline, data, sample=sample).numpy(), ref, f"ColorJitter {factor} sample {sample}")


def test_grayscale_and_random_grayscale_match_torchvision(photo):
    data, img = photo
    assert_same(ours([T.Grayscale(3)], data), F.rgb_to_grayscale(img, 3), "Grayscale(3)")
    one = T.apply([T.ImgDecode(), T.Grayscale(), T.ToTensor()], data)
    assert one.shape == (1, img.height, img.width)
    assert torch.equal(one, F.to_tensor(F.rgb_to_grayscale(img, 1)))
    assert_same(ours([T.RandomGrayscale(1.0)], data), F.rgb_to_grayscale(img, 3), "RandomGrayscale(1)")


@pytest.mark.parametrize("kernel,sigma", [(3, 0.6), (7, 1.4), (23, 2.0), ((5, 9), 3.1)])
def test_gaussian_blur_with_fixed_sigma_is_within_one_level(photo, kernel, sigma):
    data, img = photo
    ks_ = [kernel, kernel] if isinstance(kernel, int) else list(kernel)
    ref = F.gaussian_blur(img, ks_, [sigma, sigma])
    # Documented tolerance: at most one level (torch sums a 2-D kernel in its own order); measured 0.
    assert_same(ours([T.GaussianBlur(kernel, (sigma, sigma))], data), ref, f"blur {kernel} {sigma}", tolerance=1)


@pytest.mark.parametrize("padding,mode", [(3, "constant"), ((2, 7), "edge"), ((1, 2, 3, 4), "reflect"),
                                          (9, "symmetric"), (130, "reflect")])
def test_pad_matches_torchvision(photo, padding, mode):
    data, img = photo
    assert_same(ours([T.Pad(padding, fill=(9, 99, 199), padding_mode=mode)], data),
                F.pad(img, padding, (9, 99, 199), mode), f"Pad {padding} {mode}")


@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
def test_fixed_rotations_match_torchvision(photo, mode):
    data, img = photo
    for angle in (0.0, 17.5, -60.0, 90.0, 180.0):
        for expand in (False, True):
            got = ours([T.RandomRotation((angle, angle), interpolation=mode, expand=expand, fill=(4, 5, 6))], data)
            ref = F.rotate(img, angle, InterpolationMode(mode), expand, None, [4, 5, 6])
            assert_same(got, ref, f"rotate {angle} {mode} expand={expand}")
    got = ours([T.RandomRotation((25, 25), interpolation=mode, center=(20, 70))], data)
    assert_same(got, F.rotate(img, 25, InterpolationMode(mode), False, [20, 70]), "rotate about (20, 70)")


@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
def test_random_affine_replays_through_torchvision(photo, mode):
    data, img = photo
    pipeline = T.compile_pipeline([T.ImgDecode(), T.RandomAffine(40, translate=(0.2, 0.3), scale=(0.6, 1.4),
                                                                  shear=(-15, 15, -5, 10), interpolation=mode, fill=7),
                                   T.ToUint8("HWC")])
    for sample in range(6):
        (d,) = pipeline.random_draws(img.width, img.height, 1, 0, sample)
        ref = F.affine(img, d["angle"], [d["translate_x"], d["translate_y"]], d["scale"], [d["shear_x"], d["shear_y"]],
                       InterpolationMode(mode), 7)
        assert_same(T.apply(pipeline, data, seed=1, sample=sample).numpy(), ref, f"affine {mode} {sample}")


def test_random_crop_replays_through_torchvision(photo):
    data, img = photo
    for kw in [dict(size=64), dict(size=(80, 100), padding=4), dict(size=140, pad_if_needed=True,
                                                                    padding_mode="reflect"),
               dict(size=(100, 150), padding=(3, 5), pad_if_needed=True, padding_mode="symmetric", fill=8)]:
        pipeline = T.compile_pipeline([T.ImgDecode(), T.RandomCrop(**kw), T.ToUint8("HWC")])
        tv = TV.RandomCrop(**kw)
        for sample in range(3):
            (d,) = pipeline.random_draws(img.width, img.height, 0, 0, sample)
            ref = img if tv.padding is None else F.pad(img, tv.padding, tv.fill, tv.padding_mode)
            if tv.pad_if_needed and ref.width < tv.size[1]:
                ref = F.pad(ref, [tv.size[1] - ref.width, 0], tv.fill, tv.padding_mode)
            if tv.pad_if_needed and ref.height < tv.size[0]:
                ref = F.pad(ref, [0, tv.size[0] - ref.height], tv.fill, tv.padding_mode)
            ref = F.crop(ref, d["top"], d["left"], *tv.size)
            assert_same(T.apply(pipeline, data, sample=sample).numpy(), ref, f"RandomCrop {kw} {sample}")
    with pytest.raises(ValueError, match=r"'<bytes>': transform 1 \(RandomCrop\): the crop size 200x200"):
        T.apply([T.ImgDecode(), T.RandomCrop(200), T.ToTensor()], data)


@pytest.mark.parametrize("magnitude", [0, 4, 9, 30])
def test_every_policy_op_at_a_fixed_magnitude_matches_torchvision(photo, magnitude):
    """RandAugment with one op: each of its 14 ops at bin `magnitude`, against torchvision's _apply_op."""
    data, img = photo
    pipeline = T.compile_pipeline([T.ImgDecode(), T.RandAugment(1, magnitude, interpolation="bilinear", fill=[3, 2, 1]),
                                   T.ToUint8("HWC")])
    space = TV.RandAugment()._augmentation_space(31, (img.height, img.width))
    seen = set()
    for sample in range(200):
        (d,) = pipeline.random_draws(img.width, img.height, 0, 0, sample)
        op, mag = d["op_0"], d["magnitude_0"]
        table, _ = space[op]
        assert abs(mag) == (float(table[magnitude]) if table.ndim else 0.0), op
        if (op, mag) in seen:
            continue
        seen.add((op, mag))
        ref = tv_autoaugment._apply_op(img, op, mag, InterpolationMode.BILINEAR, [3, 2, 1])
        assert_same(T.apply(pipeline, data, sample=sample).numpy(), ref, f"{op} {mag}")
    assert {op for op, _ in seen} == set(space)


@pytest.mark.parametrize("bins", [2, 10, 31])
def test_policy_magnitude_tables_are_torchvisions(bins):
    wide = TV.TrivialAugmentWide()._augmentation_space(bins)
    pipeline = T.compile_pipeline([T.ImgDecode(), T.TrivialAugmentWide(bins), T.ToTensor()])
    for sample in range(600):
        (d,) = pipeline.random_draws(64, 48, 0, 0, sample)
        table, signed = wide[d["op"]]
        if d["bin"] < 0:
            assert table.ndim == 0 and d["magnitude"] == 0.0
        else:
            assert abs(d["magnitude"]) == float(table[d["bin"]]), d  # torch's float32 values exactly
            assert signed or d["magnitude"] >= 0


def test_policies_replay_through_torchvision(photo):
    data, img = photo
    ta = T.compile_pipeline([T.ImgDecode(), T.TrivialAugmentWide(fill=[1, 2, 3]), T.ToUint8("HWC")])
    for sample in range(40):
        (d,) = ta.random_draws(img.width, img.height, 2, 0, sample)
        ref = tv_autoaugment._apply_op(img, d["op"], d["magnitude"], InterpolationMode.NEAREST, [1, 2, 3])
        assert_same(T.apply(ta, data, seed=2, sample=sample).numpy(), ref, f"TrivialAugmentWide {d}")
    for policy in T.AutoAugmentPolicy:
        tv = TV.AutoAugment(TV.AutoAugmentPolicy(policy.value))
        aa = T.compile_pipeline([T.ImgDecode(), T.AutoAugment(policy, interpolation="bicubic"), T.ToUint8("HWC")])
        space = tv._augmentation_space(10, (img.height, img.width))
        for sample in range(25):
            (d,) = aa.random_draws(img.width, img.height, 2, 0, sample)
            ref = img
            for k, (op, p, bin_) in enumerate(tv.policies[d["policy"]]):
                assert d[f"op_{k}"] == op
                assert abs(d[f"magnitude_{k}"]) == (float(space[op][0][bin_]) if bin_ is not None else 0.0)
                if d[f"applied_{k}"]:
                    ref = tv_autoaugment._apply_op(ref, op, d[f"magnitude_{k}"], InterpolationMode.BICUBIC, None)
            assert_same(T.apply(aa, data, seed=2, sample=sample).numpy(), ref, f"AutoAugment {policy} {d}")


def test_timm_training_chain_replays_through_torchvision_bit_for_bit(jpeg):
    data, img = jpeg
    chain = [T.ImgDecode(), T.RandomResizedCrop(96), T.RandomHorizontalFlip(), T.TrivialAugmentWide(), T.ToTensor(),
             T.Normalize(MEAN, STD), T.RandomErasing(p=0.8, value=[0.1, -0.2, 0.3])]
    pipeline = T.compile_pipeline(chain)
    erased = 0
    for sample in range(30):
        crop, flip, ta, er = pipeline.random_draws(img.width, img.height, 3, 1, sample)
        ref = F.resized_crop(img, crop["top"], crop["left"], crop["height"], crop["width"], [96, 96])
        if flip["flip"]:
            ref = F.hflip(ref)
        ref = F.normalize(F.to_tensor(tv_autoaugment._apply_op(ref, ta["op"], ta["magnitude"],
                                                               InterpolationMode.NEAREST, None)), MEAN, STD)
        if er["erase"] and "top" in er:
            erased += 1
            ref = F.erase(ref, er["top"], er["left"], er["height"], er["width"],
                          torch.tensor([0.1, -0.2, 0.3])[:, None, None])
        got = T.apply(pipeline, data, seed=3, epoch=1, sample=sample)
        assert torch.equal(got, ref), f"sample {sample}: {ta}, {er}"
    assert 15 <= erased <= 30


def test_random_erasing_with_random_values_is_standard_normal_noise(jpeg):
    data, _ = jpeg
    base = [T.ImgDecode(), T.CenterCrop(64), T.ToTensor()]
    plain = T.apply(base, data)
    pipeline = T.compile_pipeline([*base, T.RandomErasing(1.0, scale=(0.3, 0.33), value="random")])
    noise = []
    for sample in range(8):
        (d,) = pipeline.random_draws(64, 64, 0, 0, sample)
        got = T.apply(pipeline, data, sample=sample)
        box = (slice(None), slice(d["top"], d["top"] + d["height"]), slice(d["left"], d["left"] + d["width"]))
        mask = torch.zeros_like(got, dtype=torch.bool)
        mask[box] = True
        assert torch.equal(got[~mask], plain[~mask])
        noise.append(got[box].flatten())
    noise = torch.cat(noise).numpy()
    assert ks(noise, np.random.default_rng(0).standard_normal(20000)) < ks_limit(len(noise), 20000)


# ---- Random ops: the same distributions as torchvision ---------------------------------------


N = 3000


def _ours(transform, width=160, height=120, n=N, key=lambda d: d):
    pipeline = T.compile_pipeline([T.ImgDecode(), transform, T.ToTensor()]
                                  if not isinstance(transform, T.RandomErasing)
                                  else [T.ImgDecode(), T.CenterCrop((height, width)), T.ToTensor(), transform])
    return [key(pipeline.random_draws(width, height, 7, 0, s)[0]) for s in range(n)]


def test_color_jitter_draws_torchvisions_distribution():
    cj = T.ColorJitter(0.4, (0.5, 1.2), 0.3, 0.1)
    tv = TV.ColorJitter(0.4, (0.5, 1.2), 0.3, 0.1)
    draws = _ours(cj, n=N)
    torch.manual_seed(0)
    ref = [tv.get_params(tv.brightness, tv.contrast, tv.saturation, tv.hue) for _ in range(N)]
    for k, name in enumerate(["brightness", "contrast", "saturation", "hue"]):
        assert ks([d[name] for d in draws], [r[k + 1] for r in ref]) < ks_limit(N), name
    orders = np.bincount([int("".join(map(str, r[0].tolist())), 5) for r in ref], minlength=5 ** 4)
    ours_orders = np.bincount([int(str(d["order"]).zfill(4), 5) for d in draws], minlength=5 ** 4)
    assert np.count_nonzero(ours_orders) == np.count_nonzero(orders) == 24
    expected = N / 24
    assert np.all(np.abs(ours_orders[ours_orders > 0] - expected) < 5 * math.sqrt(expected))


def test_blur_rotation_affine_crop_and_erasing_draw_torchvisions_distributions():
    torch.manual_seed(1)
    sigmas = _ours(T.GaussianBlur(5, (0.2, 3.0)), key=lambda d: d["sigma"])
    assert ks(sigmas, [TV.GaussianBlur.get_params(0.2, 3.0) for _ in range(N)]) < ks_limit(N)
    angles = _ours(T.RandomRotation((-30, 50)), key=lambda d: d["angle"])
    assert ks(angles, [TV.RandomRotation.get_params([-30.0, 50.0]) for _ in range(N)]) < ks_limit(N)

    tv = TV.RandomAffine(25, translate=(0.1, 0.3), scale=(0.8, 1.2), shear=(-5, 5, -10, 0))
    ref = [tv.get_params(tv.degrees, tv.translate, tv.scale, tv.shear, [160, 120]) for _ in range(N)]
    draws = _ours(T.RandomAffine(25, translate=(0.1, 0.3), scale=(0.8, 1.2), shear=(-5, 5, -10, 0)))
    columns = {"angle": [r[0] for r in ref], "translate_x": [r[1][0] for r in ref],
               "translate_y": [r[1][1] for r in ref], "scale": [r[2] for r in ref],
               "shear_x": [r[3][0] for r in ref], "shear_y": [r[3][1] for r in ref]}
    for name, values in columns.items():
        assert ks([d[name] for d in draws], values) < ks_limit(N), name
    assert max(abs(d["translate_x"]) for d in draws) == 16  # round(0.1 * 160)

    img = Image.new("RGB", (160, 120))
    ref = [TV.RandomCrop.get_params(img, (100, 90)) for _ in range(N)]
    draws = _ours(T.RandomCrop((100, 90)))
    assert ks([d["top"] for d in draws], [r[0] for r in ref]) < ks_limit(N)
    assert ks([d["left"] for d in draws], [r[1] for r in ref]) < ks_limit(N)

    tensor = torch.zeros(3, 120, 160)
    ref = [TV.RandomErasing.get_params(tensor, (0.02, 0.33), (0.3, 3.3), [0.0]) for _ in range(N)]
    draws = [d for d in _ours(T.RandomErasing(1.0)) if "top" in d]
    assert len(draws) > 0.95 * N
    for k, name in enumerate(["top", "left", "height", "width"]):
        assert ks([d[name] for d in draws], [r[k] for r in ref if r[2] < 120]) < ks_limit(len(draws)), name
    rate = np.mean(_ours(T.RandomErasing(0.3), key=lambda d: d["erase"]))
    assert abs(rate - 0.3) < 4 * math.sqrt(0.3 * 0.7 / N)
    gray = np.mean(_ours(T.RandomGrayscale(0.2), key=lambda d: d["gray"]))
    assert abs(gray - 0.2) < 4 * math.sqrt(0.2 * 0.8 / N)


def _recorded(policy, n: int, size=(160, 120)) -> list[list[tuple[str, float]]]:
    """torchvision's own policy, run n times with _apply_op recorded: the (op, magnitude) lists."""
    calls: list[tuple[str, float]] = []
    original = tv_autoaugment._apply_op
    tv_autoaugment._apply_op = lambda img, op, magnitude, **kw: calls.append((op, magnitude)) or img
    try:
        img, runs = Image.new("RGB", size), []
        torch.manual_seed(2)
        for _ in range(n):
            calls.clear()
            policy(img)
            runs.append(list(calls))
        return runs
    finally:
        tv_autoaugment._apply_op = original


def _compare_ops(ours_ops: list[tuple[str, float]], ref_ops: list[tuple[str, float]]) -> None:
    names = sorted({op for op, _ in ref_ops} | {op for op, _ in ours_ops})
    for name in names:
        a = [m for op, m in ours_ops if op == name]
        b = [m for op, m in ref_ops if op == name]
        share_a, share_b = len(a) / len(ours_ops), len(b) / len(ref_ops)
        assert abs(share_a - share_b) < 5 * math.sqrt(share_b * (1 - share_b) * 2 / len(ref_ops)) + 1e-9, name
        if len(set(b)) > 1:
            assert ks(a, b) < ks_limit(len(a), len(b)), name


def test_policies_draw_torchvisions_distributions():
    n = 2500
    ref = [r[0] for r in _recorded(TV.TrivialAugmentWide(), n)]
    ours_ = _ours(T.TrivialAugmentWide(), n=n, key=lambda d: (d["op"], d["magnitude"]))
    _compare_ops(ours_, ref)

    ref = [op for r in _recorded(TV.RandAugment(2, 7), n) for op in r]
    draws = _ours(T.RandAugment(2, 7), n=n)
    _compare_ops([(d[f"op_{k}"], d[f"magnitude_{k}"]) for d in draws for k in range(2)], ref)

    ref = [op for r in _recorded(TV.AutoAugment(), n) for op in r]
    draws = _ours(T.AutoAugment(), n=n)
    _compare_ops([(d[f"op_{k}"], d[f"magnitude_{k}"]) for d in draws for k in range(2) if d[f"applied_{k}"]], ref)


def test_new_ops_are_a_pure_function_of_seed_epoch_and_sample(jpeg):
    data, _ = jpeg
    chain = [T.ImgDecode(), T.RandomCrop(96, padding=8, padding_mode="reflect"), T.ColorJitter(0.3, 0.3, 0.3, 0.05),
             T.RandomGrayscale(0.3), T.GaussianBlur(3), T.RandomRotation(15), T.RandomAffine(5, translate=(0.05, 0.05)),
             T.TrivialAugmentWide(), T.RandAugment(), T.AutoAugment(), T.ToTensor(), T.Normalize(MEAN, STD),
             T.RandomErasing(value="random")]
    pipeline = T.compile_pipeline(chain)
    again = T.compile_pipeline(chain)
    serial = [T.apply(pipeline, data, seed=4, epoch=1, sample=s) for s in range(16)]
    with ThreadPoolExecutor(4) as pool:
        parallel = list(pool.map(lambda s: T.apply(again, data, seed=4, epoch=1, sample=s), reversed(range(16))))[::-1]
    for s, (a, b) in enumerate(zip(serial, parallel)):
        assert torch.equal(a, b), s
        assert not torch.equal(a, T.apply(pipeline, data, seed=4, epoch=2, sample=s))
        assert not torch.equal(a, T.apply(pipeline, data, seed=5, epoch=1, sample=s))
    assert len({a.numpy().tobytes() for a in serial}) == 16


def test_arguments_are_checked_in_python_and_in_cpp():
    with pytest.raises(ValueError, match="hue values should be between"):
        T.ColorJitter(hue=0.7)
    with pytest.raises(ValueError, match="odd and positive"):
        T.GaussianBlur(4)
    with pytest.raises(ValueError, match="Pad: padding_mode should be"):
        T.Pad(2, padding_mode="wrap")
    with pytest.raises(ValueError, match="nearest, bilinear or bicubic"):
        T.RandomRotation(10, interpolation="lanczos")
    with pytest.raises(ValueError, match="policy must be"):
        T.AutoAugment("cifar100")
    with pytest.raises(ValueError, match="'random'"):
        T.RandomErasing(value="noise")
    with pytest.raises(ValueError, match=r"transform 1 \(RandAugment\): magnitude must be an integer in \[0, 9\]"):
        T.compile_pipeline([T.ImgDecode(), T.RandAugment(magnitude=10, num_magnitude_bins=10), T.ToTensor()])
    with pytest.raises(ValueError, match="RandomErasing works on the tensor"):
        T.compile_pipeline([T.ImgDecode(), T.RandomErasing(), T.ToTensor()])
    with pytest.raises(ValueError, match="ColorJitter after ToTensor"):
        T.compile_pipeline([T.ImgDecode(), T.ToTensor(), T.ColorJitter(0.1)])
    assert T.AutoAugment(TV.AutoAugmentPolicy.SVHN).policy is T.AutoAugmentPolicy.SVHN
    assert repr(T.RandomCrop(32, padding=4)) == ("RandomCrop(size=32, padding=4, pad_if_needed=False, fill=0, "
                                             "padding_mode='constant')")


# ---- In the loader ----------------------------------------------------------------------------


def test_a_job_delivers_the_timm_chain_and_one_channel_batches(tmp_path):
    root = tmp_path / "data"
    make_image_folder(root, num_images=12, num_classes=2, seed=4, min_side=80, max_side=160)
    timm = [T.ImgDecode(), T.RandomResizedCrop(40), T.RandomHorizontalFlip(), T.TrivialAugmentWide(), T.ToTensor(),
            T.Normalize(MEAN, STD), T.RandomErasing()]
    with hdmlp.Job(root, batch_size=5, epochs=1, transforms=timm, seed=2) as job:
        dataset = HDMLPImageFolder(root, job)
        pipeline = T.compile_pipeline(timm)
        seen = 0
        for x, y in HDMLPDataLoader(dataset):
            assert x.shape[1:] == (3, 40, 40)
            seen += len(y)
        assert seen == 12
    gray = [T.ImgDecode(), T.Grayscale(), T.RandomCrop(32, pad_if_needed=True), T.ToTensor()]
    with hdmlp.Job(root, batch_size=4, epochs=1, transforms=gray, seed=2) as job:
        plan = job.plan(0)
        dataset = HDMLPImageFolder(root, job)
        x, _ = next(iter(HDMLPDataLoader(dataset)))
        assert x.shape == (4, 1, 32, 32)
        path, _ = dataset.samples[plan[0]]
        with open(path, "rb") as f:
            assert torch.equal(x[0], T.apply(gray, f.read(), seed=2, epoch=0, sample=plan[0]))
    assert pipeline.output_shape["shape"] == (3, 40, 40)


@pytest.mark.parametrize("make, name", [
    (lambda v: T.TrivialAugmentWide(num_magnitude_bins=v), "TrivialAugmentWide: num_magnitude_bins"),
    (lambda v: T.RandAugment(num_ops=v), "RandAugment: num_ops"),
    (lambda v: T.RandAugment(magnitude=v), "RandAugment: magnitude"),
    (lambda v: T.RandAugment(num_magnitude_bins=v), "RandAugment: num_magnitude_bins"),
])
@pytest.mark.parametrize("value", [math.nan, math.inf, 2.5])
def test_augment_counts_that_are_not_whole_numbers_name_the_argument(make, name, value):
    """Issue 26: nan gave "cannot convert float NaN to integer", inf an OverflowError."""
    with pytest.raises(ValueError, match=f"{name} must be a whole number"):
        make(value)


def test_a_pad_too_large_for_memory_names_the_op():
    """Issue 26: Pad(1000000) after a fixed size made every image 2000016x2000016: a bare bad_alloc."""
    with pytest.raises(ValueError, match=r"Pad.*would make every image 2000016x2000016"):
        T.compile_pipeline([T.ImgDecode(), T.Resize((16, 16)), T.Pad(1000000), T.ToTensor()])
