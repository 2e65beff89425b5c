"""hdmlp: a clairvoyant data loader for deep learning on HPC clusters.

The whole randomised access order of a job is a pure function of its seed, so
every rank knows at start-up which samples it will read and when; hdmlp uses
that to prefetch samples ahead of the training loop.

Entry points:
    hdmlp.Job                 one job's data loading (this module)
    hdmlp.AccessPlan          the access order alone, without loading anything
    hdmlp.torch               HDMLPImageFolder and HDMLPDataLoader for PyTorch (the torch extra)
    Job.batches, hdmlp.numpy  framework-free batches (DLPack, buffer protocol): NumPy, JAX, TensorFlow
    hdmlp.python_transforms   Python transforms in worker processes (ToPIL, TransformError)
    hdmlp.datasets            a generator of ImageNet-like demo folders
    hdmlp.pack                hdmlp packs: a dataset as a few large shards (`hdmlp pack`)
"""
from hdmlp.version import __version__  # noqa: F401


def _import_core() -> None:
    """Loads the C++ extension first, so that a missing one says what to do."""
    import os

    try:
        from hdmlp import _core  # noqa: F401
    except ImportError as e:
        # From the checkout, Python's own message ("partially initialized module ... circular
        # import") would point the wrong way: it is replaced, not chained.
        here = os.path.dirname(os.path.abspath(__file__))
        if os.path.isfile(os.path.join(here, os.pardir, "CMakeLists.txt")):
            raise ImportError(
                f"hdmlp is being imported from its source checkout ({here}), where the C++ extension hdmlp._core "
                "is not built. Install hdmlp (pip install . , or scripts/dev.sh setup for a development .venv) and "
                "run Python from another directory: the checkout's hdmlp/ folder shadows the installed package "
                "when the checkout is the current directory or on sys.path.") from None
        raise ImportError(
            f"hdmlp's C++ extension hdmlp._core cannot be loaded: {e}. Reinstall hdmlp (pip install hdmlp-*.whl "
            "or pip install .); if a shared library is missing, install what docs/install.md lists for your "
            "kind of install.") from e


# Before anything loads an OpenMP runtime (torch does): see hdmlp/openmp_wait.py.
from hdmlp.openmp_wait import prefer_passive_wait as _prefer_passive_wait  # noqa: E402

_prefer_passive_wait()
_import_core()

from hdmlp.job import (ConfigError, Job, ThrottledStorage, build_info, default_config_path,  # noqa: E402
                       example_configs, init_mpi, user_cache_dir)
from hdmlp.plan import AccessPlan  # noqa: E402

__all__ = ["AccessPlan", "ConfigError", "Job", "ThrottledStorage", "build_info", "default_config_path",
           "example_configs", "init_mpi", "user_cache_dir"]
