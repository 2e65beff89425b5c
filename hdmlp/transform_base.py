"""The base of hdmlp's C++ transforms: :class:`Transform` and the spec each one gives the pipeline.

Every op of :mod:`hdmlp.transforms` is a :class:`Transform`: it checks its arguments when it is
made and describes itself, with :meth:`Transform.spec`, as the ``(op, {argument: [numbers]})``
pair that the C++ pipeline (``hdmlp._core.TransformPipeline``) compiles. This module imports
nothing of hdmlp's, so the chain's Python part (:mod:`hdmlp.python_chain`) can tell hdmlp's ops
from Python callables without importing the ops, which import it in turn (``ToPIL``).
Nothing here keeps state beyond the table of ops, filled once as :mod:`hdmlp.transforms` loads.
"""
from __future__ import annotations

import functools
from typing import Any

__all__ = ["PIL_FILTER_NAMES", "Spec", "Transform", "cpp_op"]

Spec = tuple[str, dict[str, list[float]]]

# PIL's filter codes, which the C++ pipeline uses, by name (a Transform's repr shows the name).
PIL_FILTER_NAMES = {0: "nearest", 1: "lanczos", 2: "bilinear", 3: "bicubic", 4: "box", 5: "hamming"}

# hdmlp.transforms' ops by class name (a user's own subclass is not one of them).
_CPP_OPS: dict[str, type[Transform]] = {}
_OPS_MODULE = "hdmlp.transforms"


def _naming_the_op(op: str, init: Any) -> Any:
    """``init`` whose TypeError/ValueError names the op first ("RandomHorizontalFlip: p must be ...")."""

    @functools.wraps(init)
    def checked(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            init(self, *args, **kwargs)
        except (TypeError, ValueError) as e:
            message = str(e)
            if message.startswith((f"{op}:", f"{op}(", f"{op}.")):
                raise
            base = TypeError if isinstance(e, TypeError) else ValueError
            try:
                named = type(e)(f"{op}: {message}")
            except Exception:
                named = base(f"{op}: {message}")
            raise named from None

    return checked


class Transform:
    """Base class of hdmlp's transforms: each describes itself as a spec for the C++ pipeline.

    A subclass implements ``_spec()``. Its constructor raises TypeError/ValueError with the op's
    name first, and every check names the argument (``RandomHorizontalFlip: p must be a number,
    got str 'x'``).
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _naming_the_op(cls.__name__, cls.__dict__["__init__"])  # type: ignore[method-assign]
        if cls.__module__ == _OPS_MODULE:
            _CPP_OPS[cls.__name__] = cls

    def spec(self) -> Spec:
        """The op as the C++ pipeline takes it: ``(name, {argument: [numbers]})``."""
        return self._spec()

    def _spec(self) -> Spec:
        raise NotImplementedError

    def __repr__(self) -> str:
        def show(name: str, value: Any) -> str:
            if name == "interpolation" and isinstance(value, int):
                return repr(PIL_FILTER_NAMES[value])
            if isinstance(value, list):
                items = [int(v) if name == "size" else v for v in value]
                return repr(items[0] if len(items) == 1 and name == "size" else tuple(items))
            return repr(value)

        inner = ", ".join(f"{k}={show(k, v)}" for k, v in vars(self).items())
        return f"{type(self).__name__}({inner})"


def cpp_op(name: str) -> type[Transform] | None:
    """The op of :mod:`hdmlp.transforms` called ``name`` (a Transform subclass), or None.

    The table fills as :mod:`hdmlp.transforms` loads; a caller that needs it full imports that
    module first (``import hdmlp`` does).
    """
    return _CPP_OPS.get(name)
