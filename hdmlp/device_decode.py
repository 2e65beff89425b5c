"""Deprecated: the module is :mod:`hdmlp.device.decode`; this name is an alias of it (docs/migrating.md)."""
import sys
import warnings

import hdmlp.device.decode

warnings.warn("hdmlp.device_decode is deprecated: import hdmlp.device.decode (the same module)", DeprecationWarning,
              stacklevel=2)
sys.modules[__name__] = hdmlp.device.decode
