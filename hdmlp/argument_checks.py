"""Checks of the arguments a user gives, shared by the modules that take them.

Each returns the value in the form hdmlp uses, or raises TypeError / ValueError naming the
argument and saying what to give. None keeps state; any thread may call them.
"""
from __future__ import annotations

import math
import os
from typing import Any

__all__ = ["MAX_WAIT_SECONDS", "int_in", "path_argument", "wait_seconds"]


def int_in(name: str, value: Any, lo: int, hi: int, hi_text: str | None = None) -> int:
    """``value`` as an int in [lo, hi], or a TypeError / ValueError saying what is allowed."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < lo:
        raise ValueError(f"{name} must be at least {lo} (an int from {lo} to {hi_text or hi}), got {value}")
    if value > hi:
        raise ValueError(f"{name} must be at most {hi_text or hi} (an int from {lo} to {hi_text or hi}), got {value}")
    return value


MAX_WAIT_SECONDS = 1e9


def wait_seconds(name: str, value: Any) -> float:
    """A timeout or wait as float seconds: finite, > 0 and at most MAX_WAIT_SECONDS."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, got {type(value).__name__} {value!r}")
    if not (math.isfinite(value) and 0 < value <= MAX_WAIT_SECONDS):
        raise ValueError(f"{name} must be a finite number of seconds > 0 and at most {MAX_WAIT_SECONDS:g}, got "
                         f"{value!r}" + (": a wait must end (an endless one hangs on a missing rank or a stuck read)"
                                         if not math.isfinite(value) else ""))
    return float(value)


def path_argument(name: str, value: Any) -> str:
    """A path argument as a str (os.fsdecode: bytes and non-UTF-8 names round-trip)."""
    try:
        text = os.fsdecode(os.fspath(value))
    except TypeError:
        raise TypeError(f"{name} must be a path (str, bytes or os.PathLike), got {type(value).__name__} "
                        f"{value!r}") from None
    if "\0" in text:
        raise ValueError(f"{name} contains a NUL character: {text!r}")
    return os.path.expanduser(text)
