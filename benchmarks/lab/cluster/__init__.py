"""An emulated cluster on one machine: nodes as network namespaces, MPI over TCP between them.

``EmulatedCluster`` (emulation.py) builds the nodes, the links and the PFS, and
runs mpirun (or Slurm, slurm.py) across them; ``pfs_provider.py`` serves the
dataset to every node; ``rank.py`` is what each rank runs (an hdmlp Job that
records what it received); ``report.py`` merges the ranks' files and the links'
byte counters into one JSON. The scenarios on top of it are in
benchmarks/cluster/ (``python -m benchmarks cluster ...``). See docs/cluster.md.
"""
from benchmarks.lab.cluster.emulation import ClusterUnavailable, EmulatedCluster, remove_stale, unavailable_reason

__all__ = ["ClusterUnavailable", "EmulatedCluster", "remove_stale", "unavailable_reason"]
