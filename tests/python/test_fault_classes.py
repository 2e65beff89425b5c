"""Issue 40's fault classes: each bad input gets an error that names the file, sample, argument
or setting and says what to do, within 2 s of its cause, and leaves nothing behind. The
private cache folders are in test_cache_privacy.py, the extras in test_packaging.py."""
import inspect
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import hdmlp
import hdmlp.transforms as T
from conftest import make_folder

# -- an op's argument of the wrong type names the op and the argument -------------------

# What each op needs besides the argument under test.
_REQUIRED = {"Resize": dict(size=8), "CenterCrop": dict(size=8), "RandomResizedCrop": dict(size=8),
             "Normalize": dict(mean=[0.5] * 3, std=[0.5] * 3), "RandomCrop": dict(size=8),
             "RandomRotation": dict(degrees=10), "RandomAffine": dict(degrees=10), "GaussianBlur": dict(kernel_size=3),
             "Pad": dict(padding=2), "MixUp": dict(num_classes=10), "CutMix": dict(num_classes=10)}
# Checked when the Job starts: the device needs torch (docs/gpu.md).
_CHECKED_LATER = {("ImgDecode", "device")}


def _op_arguments():
    ops = [c for _, c in inspect.getmembers(T, inspect.isclass)
           if issubclass(c, (T.Transform, T._BatchMix)) and c not in (T.Transform, T._BatchMix)]
    for op in ops:
        for name, p in list(inspect.signature(op.__init__).parameters.items())[1:]:
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and (op.__name__, name) not in _CHECKED_LATER:
                yield pytest.param(op, name, id=f"{op.__name__}.{name}")


@pytest.mark.parametrize("op,argument", list(_op_arguments()))
@pytest.mark.parametrize("bad", ["x", "0.5"])
def test_an_op_argument_of_the_wrong_type_names_the_op_and_the_argument(op, argument, bad):
    """A string for a probability, a size, a flag...: never "could not convert string to float", and
    never taken as something else (bool("false") is True; "12" is not the sequence (1, 2))."""
    kwargs = dict(_REQUIRED.get(op.__name__, {}), **{argument: bad})
    with pytest.raises((TypeError, ValueError)) as info:
        op(**kwargs)
    message = str(info.value)
    assert message.startswith(f"{op.__name__}:"), message
    assert argument in message, message


def test_numbers_of_other_libraries_are_still_numbers():
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    assert T.RandomHorizontalFlip(np.float32(0.25)).p == 0.25
    assert T.RandomHorizontalFlip(torch.tensor(0.25)).p == 0.25
    assert T.Normalize(torch.tensor([0.5, 0.25, 0.125]), np.array([1.0, 2.0, 4.0])).std == [1.0, 2.0, 4.0]
    assert T.Resize(8, antialias=None).antialias is True and T.Resize(8, antialias=0).antialias is False
