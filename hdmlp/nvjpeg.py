"""Deprecated: the module is :mod:`hdmlp.device.nvjpeg`; this name is an alias of it (docs/migrating.md)."""
import sys
import warnings

import hdmlp.device.nvjpeg

warnings.warn("hdmlp.nvjpeg is deprecated: import hdmlp.device.nvjpeg (the same module)", DeprecationWarning,
              stacklevel=2)
sys.modules[__name__] = hdmlp.device.nvjpeg
