"""A job's position as a small, JSON-serialisable dict: ``job.state_dict()``.

The dict says where the job is (the epoch being or next to be delivered, the
global batches of it delivered, the positions of the epoch's global order they
hold) and what that position means (seed, global batch size, scheme, shuffle,
drop-last, the dataset's sample count and index fingerprint). It is the same on
every rank after the same step, costs no I/O, and can be stored anywhere a
checkpoint goes (``torch.save``, ``json.dump``)::

    state = job.state_dict()                # at any batch boundary, on any rank
    ...
    job = hdmlp.Job(root, batch_size=256, epochs=90, resume=state)   # the next global batch

Keys (format version 1): ``format`` (``"hdmlp.JobState"``), ``version``,
``epoch``, ``batches``, ``position``, ``order_world_size``, ``seed``,
``batch_size``, ``distr_scheme``, ``exchange_fraction``, ``shuffle``,
``drop_last_batch``, ``samples``, ``fingerprint`` (16 hex digits),
``world_size`` and ``epochs`` (the job that took it). See docs/resume.md.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hdmlp import _core

FORMAT = "hdmlp.JobState"

# dict key -> (JobState attribute, type)
_FIELDS: dict[str, tuple[str, type]] = {
    "version": ("version", int),
    "epoch": ("epoch", int),
    "batches": ("batches", int),
    "position": ("position", int),
    "order_world_size": ("order_world_size", int),
    "seed": ("seed", int),
    "batch_size": ("batch_size", int),
    "distr_scheme": ("distr_scheme", str),
    "exchange_fraction": ("exchange_fraction", float),
    "shuffle": ("shuffle", bool),
    "drop_last_batch": ("drop_last", bool),
    "samples": ("samples", int),
    "fingerprint": ("fingerprint", str),
    "world_size": ("world_size", int),
    "epochs": ("epochs", int),
}


def to_dict(state: Any) -> dict[str, Any]:
    """The user's dict of a core ``JobState``."""
    out: dict[str, Any] = {"format": FORMAT}
    for key, (attr, _) in _FIELDS.items():
        value = getattr(state, attr)
        out[key] = f"{value:016x}" if key == "fingerprint" else value
    return out


def from_dict(state: Mapping[str, Any]) -> Any:
    """A core ``JobState`` from a dict of :func:`to_dict`'s form; TypeError/ValueError naming the key at fault.

    Only the form is checked here; whether the state fits the job (dataset, batch size,
    scheme, ...) is the job's check, made when it starts.
    """
    if not isinstance(state, Mapping):
        raise TypeError(f"resume must be a state dict from job.state_dict() (or loader.state_dict()), got "
                        f"{type(state).__name__}")
    if state.get("format") != FORMAT:
        raise ValueError(f"resume: not an hdmlp job state (its 'format' is {state.get('format')!r}, expected "
                         f"{FORMAT!r}); pass what job.state_dict() returned")
    missing = [key for key in _FIELDS if key not in state]
    if missing:
        raise ValueError(f"resume: the state lacks {', '.join(missing)}; pass what job.state_dict() returned")
    core = _core.JobState()
    for key, (attr, kind) in _FIELDS.items():
        value = state[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if kind is int and isinstance(value, bool) or not isinstance(value, kind):
            raise TypeError(f"resume: the state's {key!r} must be {kind.__name__}, got {value!r}")
        if key == "fingerprint":
            try:
                value = int(value, 16)
            except ValueError:
                raise ValueError(f"resume: the state's 'fingerprint' must be hexadecimal, got {value!r}") from None
            if not 0 <= value < 2**64:
                raise ValueError(f"resume: the state's 'fingerprint' must be 16 hexadecimal digits, got {state[key]!r}")
        elif kind is int and not 0 <= value < 2**63:
            raise ValueError(f"resume: the state's {key!r} must be a non-negative 64-bit integer, got {value!r}")
        try:
            setattr(core, attr, value)
        except (TypeError, OverflowError):
            raise ValueError(f"resume: the state's {key!r} is out of range: {value!r}") from None
    return core
