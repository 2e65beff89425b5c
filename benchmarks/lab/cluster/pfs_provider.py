"""The PFS of an emulated cluster: how the dataset reaches each node's ``<work>/n<K>/pfs`` folder.

A provider has ``start()``, ``stop()`` (idempotent), ``describe() -> dict`` and
``over_network`` (whether PFS bytes cross the nodes' storage links, so that the
links' counters measure them). Two providers:

* ``local``: the dataset folder bind-mounted read-only on every node. No server
  and no network: every node reads this machine's disk. A stand-in where the
  network file server is not available; hdmlp's own counters still say how
  much it read from the PFS.
* ``netfs``: the project's TCP file server (benchmarks/lab/netfs.py) in its own
  namespace on the storage bridge, and one FUSE client per node, started in the
  node's network namespace, mounted at the node's folder. Its options are a
  delay per open/stat, a delay per read and the server's link rate.
"""
from __future__ import annotations

import os
import subprocess

from benchmarks.lab import netfs, system_tools


def make(kind: str, cluster, open_delay_ms: float = 0.0, read_delay_ms: float = 0.0, mbit: float | None = None,
         blksize: int | None = None):
    if kind == "auto":  # the network file server is always in the lab
        kind = "netfs"
    if kind == "local":
        if open_delay_ms or read_delay_ms or mbit or blksize:
            raise ValueError("the PFS delays and rate need the network PFS (pfs='netfs', benchmarks/lab/netfs.py); "
                             "the 'local' stand-in has neither a server nor a link")
        return LocalFolderPFS(cluster)
    if kind == "netfs":
        return NetFSPFS(cluster, open_delay_ms, read_delay_ms, mbit, blksize)
    raise ValueError(f"unknown PFS kind {kind!r}: choose 'auto', 'local' or 'netfs'")


class LocalFolderPFS:
    """The dataset bind-mounted read-only at every node's PFS folder (no network)."""

    over_network = False

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self.mounts: list[str] = []

    def start(self) -> None:
        for k in range(1, self.cluster.nodes + 1):
            target = os.path.join(self.cluster.node_folder(k), "pfs")
            system_tools.run(["mount", "--bind", self.cluster.dataset, target])
            self.mounts.append(target)
            system_tools.run(["mount", "-o", "remount,bind,ro", target])

    def stop(self) -> None:
        while self.mounts:
            target = self.mounts.pop()
            subprocess.run(["umount", target], capture_output=True, timeout=30)

    def describe(self) -> dict:
        return {"kind": "local", "note": "stand-in: the dataset folder bind-mounted read-only on every node "
                                         "(no server, no link)"}


class NetFSPFS:
    """benchmarks/lab/netfs.py's server in namespace <tag>pfs at 10.78.X.200, one FUSE client per node."""

    over_network = True

    def __init__(self, cluster, open_delay_ms: float, read_delay_ms: float, mbit: float | None,
                 blksize: int | None = None) -> None:
        self.cluster = cluster
        self.options = {"open_delay_ms": open_delay_ms, "read_delay_ms": read_delay_ms, "mbit": mbit}
        self.blksize = blksize or 1 << 20  # the mounts' st_blksize
        self.server = None
        self.mounts: list = []

    def start(self) -> None:
        c = self.cluster
        ns, host_end, ns_end = c.pfs_netns, f"{c.tag}p", f"{c.tag}P"
        system_tools.run(["ip", "netns", "add", ns])
        system_tools.run(["ip", "link", "add", host_end, "type", "veth", "peer", "name", ns_end])
        system_tools.run(["ip", "link", "set", ns_end, "netns", ns])
        system_tools.run(["ip", "link", "set", host_end, "master", c.storage_bridge])
        system_tools.run(["ip", "link", "set", host_end, "up"])
        nsx = ["ip", "netns", "exec", ns]
        system_tools.run(nsx + ["ip", "link", "set", ns_end, "name", "pfs0"])
        system_tools.run(nsx + ["ip", "addr", "add", f"{c.pfs_address}/24", "dev", "pfs0"])
        system_tools.run(nsx + ["ip", "link", "set", "pfs0", "up"])
        system_tools.run(nsx + ["ip", "link", "set", "lo", "up"])
        self.server = netfs.NetFSServer(c.dataset, listen=c.pfs_address, netns=ns, log=c.log, **self.options)
        self.server.start()
        for k in range(1, c.nodes + 1):
            mount = netfs.NetFSMount(c.pfs_address, self.server.port, os.path.join(c.node_folder(k), "pfs"),
                                     netns=c.netns(k), log=c.log, blksize=self.blksize)
            mount.start()
            self.mounts.append(mount)

    def stop(self) -> None:
        while self.mounts:
            self.mounts.pop().stop()
        if self.server is not None:
            self.server.stop()
            self.server = None

    def stats(self) -> dict | None:
        return self.server.stats() if self.server is not None else None

    def describe(self) -> dict:
        return {"kind": "netfs", "address": self.cluster.pfs_address, **self.options, "blksize": self.blksize}
