"""Picklable Python transforms for the tests (hdmlp's workers are spawned, so they import this module)."""
import hashlib
import random
import sys

import numpy as np


def identity(x):
    return x


def sha256(data):
    """The file's bytes -> their SHA-256 as 32 uint8; fails if the input is writable or not a uint8 vector."""
    assert isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 1, type(data)
    assert not data.flags.writeable
    return np.frombuffer(hashlib.sha256(data).digest(), np.uint8).copy()


def draws(data):
    """Draws of every generator the workers seed, plus the first byte (float64 [4])."""
    torch = sys.modules.get("torch")
    t = float(torch.rand(1).item()) if torch is not None else -1.0
    return np.array([random.random(), np.random.rand(), t, float(data[0]) if len(data) else -1.0])


def mean_pixel(image):
    """An [H, W, 3] uint8 image -> its mean as float32 [1]."""
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3, (image.dtype, image.shape)
    return np.array([image.mean()], np.float32)


def pil_mean(image):
    """A PIL image -> its mean as float32 [1]."""
    return np.array([np.asarray(image).mean()], np.float32)


def fail_on_odd_first_byte(data):
    if len(data) and data[0] % 2:
        raise KeyError(f"odd first byte {data[0]}")
    return np.zeros(2, np.int16)


def mixed(data):
    """By the file's size: a tuple, a big dict (its pickle goes through shared memory), or arrays of varying shape."""
    if len(data) % 3 == 0:
        return (len(data), "bytes")
    if len(data) % 3 == 1:
        return {"payload": bytes(100_000), "n": len(data)}
    return np.arange(len(data) % 5 + 1, dtype=np.int32)


def expected_mixed(data):
    return mixed(np.frombuffer(data, np.uint8))


def needs_pil(image):
    return image.getbands()  # an AttributeError for a numpy array


def crop_half(image):
    return np.ascontiguousarray(image[: image.shape[0] // 2])


def slow(data):
    import time
    time.sleep(0.05)
    return np.zeros(4, np.uint8)


def hang_on_odd_first_byte(data):
    """Never returns for a file whose first byte is odd (a transform stuck on a lock or a network call)."""
    import time
    while len(data) and data[0] % 2:
        time.sleep(3600)
    return np.zeros(2, np.int16)


def exit_on_odd_first_byte(data):
    """sys.exit() inside a transform (as a careless script might call it)."""
    if len(data) and data[0] % 2:
        sys.exit(3)
    return np.zeros(2, np.int16)


def interrupt_on_odd_first_byte(data):
    """A KeyboardInterrupt raised by a transform itself (the workers ignore Ctrl-C)."""
    if len(data) and data[0] % 2:
        raise KeyboardInterrupt
    return np.zeros(2, np.int16)


def hang(data):
    """Never returns (a transform stuck on a lock or a network call), whatever the sample."""
    import time
    while True:
        time.sleep(3600)


def big_result(data):
    """A result of 200 MiB (a transform that makes a huge array)."""
    return np.zeros(200 * 2**20, np.uint8)
