"""hdmlp.transforms.MixUp and CutMix on delivered batches: torchvision.transforms.v2's results for the same
parameters, the parameters' distribution, determinism per (seed, epoch, batch), NumPy and torch alike."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torchvision.transforms import v2

from hdmlp import transforms as T


def batch(n: int = 6, classes: int = 5, size: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 3, size, size + 2, generator=g), torch.randint(0, classes, (n,), generator=g)


def ks(a, b) -> float:
    a, b = np.sort(np.asarray(a, float)), np.sort(np.asarray(b, float))
    grid = np.concatenate([a, b])
    return float(np.abs(np.searchsorted(a, grid, side="right") / len(a)
                        - np.searchsorted(b, grid, side="right") / len(b)).max())


def test_mixup_gives_torchvisions_result_for_its_lambda():
    images, labels = batch()
    mix = T.MixUp(alpha=0.4, num_classes=5, seed=3)
    lam = mix.params(epoch=2, batch=7)["lam"]
    tv = v2.MixUp(alpha=0.4, num_classes=5)
    params = {"lam": lam, "labels": labels, "batch_size": len(labels)}
    got_images, got_labels = mix(images, labels, epoch=2, batch=7)
    assert torch.equal(got_images, tv.transform(images, params))
    assert torch.equal(got_labels, tv.transform(labels, params))
    assert torch.allclose(got_labels.sum(1), torch.ones(6))


def test_cutmix_gives_torchvisions_result_for_its_box():
    images, labels = batch()
    mix = T.CutMix(alpha=1.0, num_classes=5, seed=3)
    for b in range(20):
        p = mix.params(epoch=0, batch=b, height=8, width=10)
        x1, y1, x2, y2 = p["box"]
        assert 0 <= x1 <= x2 <= 10 and 0 <= y1 <= y2 <= 8
        tv = v2.CutMix(alpha=1.0, num_classes=5)
        params = {**p, "labels": labels, "batch_size": len(labels)}
        got_images, got_labels = mix(images, labels, epoch=0, batch=b)
        assert torch.equal(got_images, tv.transform(images, params))
        assert torch.equal(got_labels, tv.transform(labels, params))


def test_parameters_follow_torchvisions_distributions():
    n = 3000
    mix = T.MixUp(alpha=0.7, num_classes=2, seed=1)
    ours = [mix.params(0, b)["lam"] for b in range(n)]
    torch.manual_seed(0)
    ref = torch.distributions.Beta(torch.tensor([0.7]), torch.tensor([0.7])).sample((n,)).flatten().numpy()
    assert ks(ours, ref) < 1.95 * math.sqrt(2 / n)
    cut = T.CutMix(alpha=1.0, num_classes=2, seed=1)
    areas = [1 - cut.params(0, b, 32, 48)["lam_adjusted"] for b in range(n)]
    tv = v2.CutMix(alpha=1.0, num_classes=2)
    torch.manual_seed(0)
    ref_areas = [1 - tv.make_params([torch.zeros(2, 3, 32, 48)])["lam_adjusted"] for _ in range(n)]
    assert ks(areas, ref_areas) < 1.95 * math.sqrt(2 / n)


def test_mixing_is_a_function_of_seed_epoch_and_batch_for_numpy_and_torch():
    images, labels = batch()
    mix = T.MixUp(num_classes=5, seed=9)
    a = mix(images, labels, epoch=1, batch=3)
    assert torch.equal(a[0], mix(images, labels, epoch=1, batch=3)[0])
    assert not torch.equal(a[0], mix(images, labels, epoch=1, batch=4)[0])
    assert not torch.equal(a[0], mix(images, labels, epoch=2, batch=3)[0])
    assert not torch.equal(a[0], T.MixUp(num_classes=5, seed=10)(images, labels, epoch=1, batch=3)[0])
    x, y = mix(images.numpy(), labels.numpy(), epoch=1, batch=3)
    assert isinstance(x, np.ndarray) and x.dtype == np.float32
    assert np.array_equal(x, a[0].numpy()) and np.array_equal(y, a[1].numpy())
    cut = T.CutMix(num_classes=5, seed=9)
    x, y = cut(images.numpy(), labels.numpy(), epoch=0, batch=1)
    tx, ty = cut(images, labels, epoch=0, batch=1)
    assert np.array_equal(x, tx.numpy()) and np.array_equal(y, ty.numpy())
    assert images.numpy().base is not x  # a new array; the input is untouched
    assert torch.equal(images, batch()[0])


def test_label_smoothing_and_bad_input():
    images, labels = batch()
    smooth = T.MixUp(num_classes=5, label_smoothing=0.1, seed=0)
    lam = smooth.params(0, 0)["lam"]
    _, y = smooth(images, labels, epoch=0, batch=0)
    one_hot = torch.nn.functional.one_hot(labels, 5).float() * 0.9 + 0.02
    assert torch.allclose(y, one_hot.roll(1, 0) * (1 - lam) + one_hot * lam)
    assert torch.allclose(y.sum(1), torch.ones(6))
    soft = torch.nn.functional.one_hot(labels, 5).float()
    assert torch.allclose(T.MixUp(seed=0)(images, soft, epoch=0, batch=0)[1].sum(1), torch.ones(6))
    with pytest.raises(ValueError, match="num_classes must be passed"):
        T.MixUp()(images, labels, epoch=0, batch=0)
    with pytest.raises(ValueError, match="batch size"):
        T.CutMix(num_classes=5)(images, labels[:3], epoch=0, batch=0)
    with pytest.raises(ValueError, match=r"\[B, C, H, W\]"):
        T.CutMix(num_classes=5)(images[0], labels, epoch=0, batch=0)
    with pytest.raises(ValueError, match=r"alpha must be a number in \(0, 1e\+06\]"):
        T.MixUp(alpha=0)


def test_mixup_refuses_integer_images_naming_the_dtype():
    images, labels = batch()
    as_uint8 = (images * 255).to(torch.uint8)
    with pytest.raises(TypeError, match="MixUp mixes float images, got dtype torch.uint8"):
        T.MixUp(num_classes=5)(as_uint8, labels, epoch=0, batch=0)
    with pytest.raises(TypeError, match="got dtype uint8"):
        T.MixUp(num_classes=5)(as_uint8.numpy(), labels.numpy(), epoch=0, batch=0)
    # CutMix pastes pixels, which any dtype holds exactly.
    out, _ = T.CutMix(num_classes=5, seed=1)(as_uint8, labels, epoch=0, batch=0)
    assert out.dtype == torch.uint8 and out.sum() > 0


@pytest.mark.parametrize("cls", [T.MixUp, T.CutMix])
@pytest.mark.parametrize("alpha", [math.inf, 1e308, math.nan, -1.0, 1e7, "1"])
def test_absurd_alpha_is_refused_before_any_call(cls, alpha):
    with pytest.raises(ValueError, match=rf"{cls.__name__}: alpha must be a number in \(0, 1e\+06\]"):
        cls(alpha=alpha, num_classes=5)


def test_the_largest_alpha_returns():
    images, labels = batch()
    for cls in (T.MixUp, T.CutMix):
        out, _ = cls(alpha=1e6, num_classes=5)(images, labels, epoch=0, batch=0)
        assert out.shape == images.shape


@pytest.mark.parametrize("kwargs, match", [
    ({"num_classes": True}, "num_classes must be an int from 1 to 16777216"),
    ({"num_classes": 2**40}, "num_classes must be an int from 1 to 16777216"),
    ({"num_classes": 5, "seed": math.nan}, "seed must be a whole number, got nan"),
    ({"num_classes": 5, "seed": 1.5}, "seed must be a whole number"),
    ({"num_classes": 5, "label_smoothing": math.nan}, "label_smoothing must be in"),
])
def test_bad_arguments_name_themselves(kwargs, match):
    with pytest.raises(ValueError, match=match):
        T.MixUp(**kwargs)


def test_bad_epoch_or_label_names_the_argument():
    images, labels = batch()
    mix = T.MixUp(num_classes=5)
    with pytest.raises(ValueError, match="MixUp: epoch must be a whole number, got nan"):
        mix(images, labels, epoch=math.nan, batch=0)
    with pytest.raises(ValueError, match="CutMix: batch must be a whole number"):
        T.CutMix(num_classes=5)(images, labels, epoch=0, batch=math.inf)
    too_big = labels.clone()
    too_big[2] = 5
    with pytest.raises(ValueError, match=r"label 5 is outside \[0, num_classes\) with num_classes=5"):
        mix(images, too_big, epoch=0, batch=0)
    with pytest.raises(ValueError, match="label -1 is outside"):
        mix(images.numpy(), np.where(labels.numpy() == labels.numpy()[0], -1, labels.numpy()), epoch=0, batch=0)
