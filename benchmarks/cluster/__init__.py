"""An emulated cluster on one machine: nodes as network namespaces, MPI over TCP between them.

    python -m benchmarks cluster --nodes 3 --ranks-per-node 2 --json out.json

``EmulatedCluster`` (emulation.py) builds the nodes, the links and the PFS, and
runs mpirun across them; ``pfs_provider.py`` serves the dataset to every node;
``rank.py`` is what each rank runs (an hdmlp Job that records what it
received); ``report.py`` merges the ranks' files and the links' byte counters
into one JSON; ``cli.py`` is the command. See docs/cluster.md.
"""
from benchmarks.cluster.emulation import ClusterUnavailable, EmulatedCluster, remove_stale, unavailable_reason

__all__ = ["ClusterUnavailable", "EmulatedCluster", "remove_stale", "unavailable_reason"]
