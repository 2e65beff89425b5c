"""hdmlp: a clairvoyant data loader for deep learning on HPC clusters.

The whole randomised access order of a job is a pure function of its seed, so
every rank knows at start-up which samples it will read and when; hdmlp uses
that to prefetch samples ahead of the training loop.

Entry points:
    hdmlp.Job                 one job's data loading (this module)
    hdmlp.AccessPlan          the access order alone, without loading anything
    hdmlp.torch               HDMLPImageFolder and HDMLPDataLoader for PyTorch
    hdmlp.datasets            a generator of ImageNet-like demo folders
"""
from hdmlp.job import (AccessPlan, ConfigError, Job, ThrottledStorage, default_config_path, init_mpi,
                       user_cache_dir)

__all__ = ["AccessPlan", "ConfigError", "Job", "ThrottledStorage", "default_config_path", "init_mpi",
           "user_cache_dir"]
__version__ = "0.1.0"
