"""Nodes as network namespaces on one machine, and mpirun across them.

Each node K (1..N) of an ``EmulatedCluster`` is::

    network namespace hc<pid>n<K>      its own network stack
      mpi0  10.77.X.K/24  --veth-->  bridge hc<pid>bm (compute: MPI between nodes; host 10.77.X.254)
      pfs0  10.78.X.K/24  --veth-->  bridge hc<pid>bs (storage: the PFS server at 10.78.X.200)
    UTS namespace  (host name nodeK)   kept in a file under /run/hdmlp-cluster-<pid>/uts
    cgroup v1 memory / cpuset          hdmlp-cluster-<pid>-n<K>, when asked for and offered
    folders  <work>/n<K>/pfs           the PFS as this node mounts it
             <work>/n<K>/local         node-local storage (hdmlp's cache classes, index cache, TMPDIR)

Two bridges rather than one, so that each link's byte counters (read on the
host's end of each veth) tell PFS traffic and node-to-node traffic apart.
``tc tbf`` shapes a node's links (``link_mbit``, both directions); the PFS
server's own link is shaped by the PFS provider (``pfs_mbit``).

mpirun runs on the host with a launch agent in place of ssh
(``--mca plm_rsh_agent``): for host 10.77.X.K it enters node K's cgroups,
network and UTS namespaces, and a private mount namespace in which the node's
``pfs`` and ``local`` folders are bind-mounted onto the same two paths on every
node (:attr:`EmulatedCluster.pfs_path`, :attr:`EmulatedCluster.local_path`),
then runs Open MPI's daemon there. Open MPI then talks TCP between nodes and
shared memory (vader) within one, and hdmlp's gethostname() sees N nodes.

Teardown (:meth:`EmulatedCluster.stop`, :mod:`benchmarks.lab.service`) runs on leaving the ``with`` block,
on exceptions, at interpreter exit (atexit) and, with
``benchmarks.lab.service.install_signal_handlers``, on SIGTERM/SIGHUP; Ctrl-C unwinds
the same way. It kills every process in the namespaces, unmounts, deletes the
namespaces, veths, bridges, cgroups and folders. :func:`remove_stale` removes
what a run killed with SIGKILL left behind.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from benchmarks.lab import system_tools
from benchmarks.lab.cluster import pfs_provider
from benchmarks.lab.service import Service

RUN_ROOT = "/run"
RUN_PREFIX = "hdmlp-cluster-"      # /run/hdmlp-cluster-<pid>, /tmp/hdmlp-cluster-<pid>-*, cgroups
TAG_PREFIX = "hc"                  # namespaces and links: hc<pid>...
CGROUP_ROOT = "/sys/fs/cgroup"
TOOLS = {"ip": "iproute2", "tc": "iproute2", "nsenter": "util-linux", "unshare": "util-linux",
         "mpirun": "openmpi-bin"}


class ClusterUnavailable(RuntimeError):
    """This machine cannot run the emulated cluster; the message says why."""


# Open MPI's TCP transport sends a message above btl_tcp_eager_limit (64 KiB by default) by
# rendezvous, and a peer's reply of one ~100 KB sample then took ~40 ms: `uniform` epochs served
# mostly by peers ran at 38-43 images/s. With samples sent eagerly they ran at 1100-2300
# (docs/cluster.md). 4 MiB covers an ImageNet-like JPEG.
REAPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reaper.py")
TCP_EAGER_ARGS = ("--mca", "btl_tcp_eager_limit", "4194304", "--mca", "btl_tcp_rndv_eager_limit", "4194304",
                  "--mca", "btl_tcp_max_send_size", "4194304")


def unavailable_reason() -> str | None:
    """None when the emulated cluster can run here, else one line saying why not."""
    if sys.platform != "linux":
        return "the emulated cluster needs Linux (network, UTS and mount namespaces)"
    if os.geteuid() != 0:
        return "the emulated cluster needs root (namespaces, veths, tc, mounts, cgroups); run it as root"
    missing = sorted({pkg for tool, pkg in TOOLS.items() if system_tools.which(tool) is None})
    if missing:
        return f"missing Debian packages: {' '.join(missing)}"
    uts = (["unshare", "--uts", "hostname", "probe"], "UTS namespaces are not available here ({})")
    return system_tools.netns_problem(f"{TAG_PREFIX}probe{os.getpid()}", [uts, system_tools.TBF_PROBE])


def _mounts() -> list[str]:
    return [mnt for _, mnt, _ in system_tools.mount_table()]


def _unmount_under(prefix: str) -> None:
    """Unmounts everything at or under prefix, deepest first (lazily where busy)."""
    for mnt in sorted((m for m in _mounts() if m == prefix or m.startswith(prefix.rstrip("/") + "/")),
                      key=len, reverse=True):
        if system_tools.run(["umount", mnt], check=False).returncode != 0:
            if system_tools.run(["fusermount3", "-uz", mnt], check=False).returncode != 0:
                system_tools.run(["umount", "-l", mnt], check=False)


def _kill_mpirun_of(pid: int) -> None:
    """Kills the host's processes (mpirun) whose command line names cluster pid's launch agent."""
    marker = f"/{RUN_PREFIX}{pid}-".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in (os.getpid(), pid):
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if marker in f.read():
                    os.kill(int(entry), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass


def _cgroup_dirs(owner_pid: int | None = None) -> list[str]:
    out = []
    for controller in ("memory", "cpuset"):
        base = os.path.join(CGROUP_ROOT, controller)
        if not os.path.isdir(base):
            continue
        for name in os.listdir(base):
            m = re.fullmatch(rf"{RUN_PREFIX}(\d+)-n\d+", name)
            if m and (owner_pid is None or int(m.group(1)) == owner_pid):
                out.append(os.path.join(base, name))
    return out


def _remove_cgroup(path: str) -> None:
    procs = os.path.join(path, "cgroup.procs")
    for _ in range(50):
        try:
            with open(procs) as f:
                pids = [int(p) for p in f.read().split()]
        except OSError:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.rmdir(path)
            return
        except OSError:
            time.sleep(0.1)


def leftovers(pid: int) -> list[str]:
    """What an emulated cluster made by process ``pid`` left on this machine (empty when nothing)."""
    tag = f"{TAG_PREFIX}{pid}"
    found = []
    netns = system_tools.run(["ip", "netns", "list"], check=False).stdout.split("\n")
    found += [f"namespace {line.split()[0]}" for line in netns if line.split() and line.split()[0].startswith(tag)]
    links = system_tools.run(["ip", "-o", "link"], check=False).stdout.splitlines()
    for line in links:
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if name.startswith(tag):
            found.append(f"link {name}")
    found += [f"mount {m}" for m in _mounts() if f"/{RUN_PREFIX}{pid}" in m]
    found += [f"cgroup {c}" for c in _cgroup_dirs(pid)]
    marker = f"/{RUN_PREFIX}{pid}-".encode()
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and int(entry) != os.getpid() and marker in open(f"/proc/{entry}/cmdline", "rb").read():
                found.append(f"process {entry}")
        except OSError:
            pass
    run_dir = os.path.join(RUN_ROOT, f"{RUN_PREFIX}{pid}")
    if os.path.exists(run_dir):
        found.append(f"folder {run_dir}")
    for p in os.listdir(tempfile.gettempdir()):
        if p.startswith(f"{RUN_PREFIX}{pid}-"):
            found.append(f"folder {os.path.join(tempfile.gettempdir(), p)}")
    return found


def remove_stale(log=print) -> None:
    """Removes namespaces, links, mounts, cgroups and folders of emulated clusters whose process is gone."""
    owners: set[int] = set()
    for line in system_tools.run(["ip", "netns", "list"], check=False).stdout.splitlines():
        m = re.match(rf"{TAG_PREFIX}(\d+)(n\d+|pfs|head)\b", line)
        if m:
            owners.add(int(m.group(1)))
    for line in system_tools.run(["ip", "-o", "link"], check=False).stdout.splitlines():
        m = re.search(rf": {TAG_PREFIX}(\d+)(b[ms]|[ms]\d+|p)[@:]", line)
        if m:
            owners.add(int(m.group(1)))
    for m in _mounts():
        mm = re.search(rf"/{RUN_PREFIX}(\d+)", m)
        if mm:
            owners.add(int(mm.group(1)))
    for c in _cgroup_dirs():
        owners.add(int(re.search(rf"{RUN_PREFIX}(\d+)", c).group(1)))
    for pid in sorted(owners):
        if pid == os.getpid() or system_tools.pid_alive(pid):
            continue
        log(f"[cluster] removing what the emulated cluster of process {pid} (gone) left behind")
        _teardown(pid, n_nodes=None)


def _teardown(pid: int, n_nodes: int | None) -> None:
    """Removes everything a cluster of process pid made; every step tolerates its part missing."""
    tag = f"{TAG_PREFIX}{pid}"
    names = [line.split()[0] for line in system_tools.run(["ip", "netns", "list"], check=False).stdout.splitlines()
             if line.split() and line.split()[0].startswith(tag)]
    for ns in names:
        system_tools.kill_netns_pids(ns)
    _kill_mpirun_of(pid)
    for c in _cgroup_dirs(pid):
        _remove_cgroup(c)
    _unmount_under(os.path.join(RUN_ROOT, f"{RUN_PREFIX}{pid}"))
    for p in os.listdir(tempfile.gettempdir()):
        if p.startswith(f"{RUN_PREFIX}{pid}-"):
            _unmount_under(os.path.join(tempfile.gettempdir(), p))
    for ns in names:
        system_tools.kill_netns_pids(ns)  # a process that was waiting on a mount
        system_tools.run(["ip", "netns", "del", ns], check=False)
    for line in system_tools.run(["ip", "-o", "link"], check=False).stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if name.startswith(tag):
            system_tools.run(["ip", "link", "del", name], check=False)
    shutil.rmtree(os.path.join(RUN_ROOT, f"{RUN_PREFIX}{pid}"), ignore_errors=True)
    for p in os.listdir(tempfile.gettempdir()):
        if p.startswith(f"{RUN_PREFIX}{pid}-"):
            path = os.path.join(tempfile.gettempdir(), p)
            if not any(m.startswith(path) for m in _mounts()):
                shutil.rmtree(path, ignore_errors=True)


AGENT = """#!/bin/sh
# mpirun's launch agent for emulated cluster {tag}: stands in for ssh.
# Called as: agent [ssh options] HOST COMMAND...
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
host=$1; shift
case "$host" in
{cases}
  *) echo "emulated cluster agent: unknown host '$host'" >&2; exit 255 ;;
esac
for cg in {cgroups}; do
  if [ -d "$cg$node" ]; then echo $$ > "$cg$node/cgroup.procs" || exit 255; fi
done
exec ip netns exec {tag}n$node nsenter --uts={uts}/n$node \\
  unshare -m --propagation private /bin/sh {inner} $node "$*"
"""

INNER = """#!/bin/sh
# In node $1's private mount namespace: its PFS mount and its local folder at the common paths, and a
# /dev/shm of its own (MPICH names its shared-memory segments after the job: nodes must not share them),
# and an /etc/hosts that names every node by its compute address (a job's rendezvous, e.g. DDP's MASTER_ADDR).
node=$1
mount --bind {work}/n$node/pfs {pfs_path} || exit 255
mount --bind {work}/n$node/local {local_path} || exit 255
mount -t tmpfs -o mode=1777 tmpfs /dev/shm || exit 255
mount --bind {work}/hosts /etc/hosts || exit 255
export TMPDIR={local_path}/tmp HDMLP_CACHE_DIR={local_path}/hdmlp-cache
exec /bin/sh -c "$2"
"""


class EmulatedCluster(Service):
    """N nodes of R ranks each, joined by emulated links, all reading one PFS.

    Args:
        nodes, ranks_per_node: the cluster's shape.
        dataset: the folder the PFS serves (read-only).
        link_mbit: each node's link rate, both directions (tc tbf on its compute and storage links); None: unshaped.
        node_mem_mb: a cgroup v1 memory limit per node (all its processes); None: none.
        node_cpus: CPUs per node, as a cpuset (assigned round-robin over this machine's CPUs); None: all.
        pfs: "auto" or "netfs" (the network file server of benchmarks/lab/netfs.py), or
            "local" (the dataset bind-mounted read-only on every node: no network, a stand-in).
        pfs_open_delay_ms, pfs_read_delay_ms, pfs_mbit: the PFS server's delay per open/stat, per read, and its
            link's rate (netfs only).
        pfs_blksize: the st_blksize the nodes' PFS mounts report (netfs only; default 1 MiB, Lustre's stripe).
        launcher: "mpirun" (Open MPI's mpirun with this module's launch agent) or "slurm" (Debian's Slurm:
            slurmctld on a head node, slurmd on every node; benchmarks/lab/cluster/slurm.py).
        slurm_mode: with Slurm, how ranks start: "pmix" (srun --mpi=pmix), "pmi2" (srun --mpi=pmi2) or
            "mpirun" (mpirun inside salloc).
        rank_env: variables every run gives its ranks (e.g. HDMLP_MPI_LIBRARY), besides run()'s own.

    :attr:`pfs_path` is where every rank sees the dataset, :attr:`local_path` its node's local folder.
    """

    def __init__(self, nodes: int, ranks_per_node: int, dataset: str, *, link_mbit: float | None = None,
                 node_mem_mb: int | None = None, node_cpus: int | None = None, pfs: str = "auto",
                 pfs_open_delay_ms: float = 0.0, pfs_read_delay_ms: float = 0.0, pfs_mbit: float | None = None,
                 launcher: str = "mpirun", slurm_mode: str = "pmix", rank_env: dict[str, str] | None = None,
                 log=print, pfs_blksize: int | None = None) -> None:
        super().__init__(log)
        if not 1 <= nodes <= 200 or ranks_per_node < 1:
            raise ValueError(f"nodes must be in 1..200 and ranks_per_node >= 1, got {nodes}, {ranks_per_node}")
        if not os.path.isdir(dataset):
            raise NotADirectoryError(f"the dataset folder '{dataset}' does not exist")
        self.nodes, self.ranks_per_node = nodes, ranks_per_node
        self.dataset = os.path.realpath(dataset)
        self.link_mbit, self.node_mem_mb, self.node_cpus = link_mbit, node_mem_mb, node_cpus
        self.pfs_kind = pfs
        self.pfs_options = {"open_delay_ms": pfs_open_delay_ms, "read_delay_ms": pfs_read_delay_ms,
                            "mbit": pfs_mbit}
        if pfs_blksize:
            self.pfs_options["blksize"] = pfs_blksize
        self.pid = os.getpid()
        self.tag = f"{TAG_PREFIX}{self.pid}"
        self.run_dir = os.path.join(RUN_ROOT, f"{RUN_PREFIX}{self.pid}")
        self.uts_dir = os.path.join(self.run_dir, "uts")
        self.pfs_path = os.path.join(self.run_dir, "pfs")
        self.local_path = os.path.join(self.run_dir, "local")
        self.work: str | None = None
        self.subnet: int | None = None
        self.pfs = None
        self.cgroups: dict[str, bool] = {}
        self._mpirun: subprocess.Popen | None = None
        if launcher not in ("mpirun", "slurm"):
            raise ValueError(f"launcher must be 'mpirun' or 'slurm', got {launcher!r}")
        self.launcher, self.slurm_mode = launcher, slurm_mode
        self.rank_env = dict(rank_env or {})
        if nodes * ranks_per_node > len(os.sched_getaffinity(0)):
            # A rank of a real node waits in MPI (a barrier) on a core of its own; here the ranks share
            # this machine's cores, and one that busy-polls takes them from those still working. Open MPI
            # yields when it knows a node is oversubscribed, which the hostfile's slots hide from it. A
            # busy-polling barrier cost DLIO's runs a third of their AU at 12 ranks (docs/dlio.md).
            self.rank_env.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
        self.slurm = None  # benchmarks.lab.cluster.slurm.Slurm when launcher == "slurm"

    # -- names ------------------------------------------------------------------
    def netns(self, k: int) -> str:
        return f"{self.tag}n{k}"

    def hostname(self, k: int) -> str:
        return f"node{k}"

    def address(self, k: int) -> str:
        return f"10.77.{self.subnet}.{k}"

    def storage_address(self, k: int) -> str:
        return f"10.78.{self.subnet}.{k}"

    @property
    def pfs_address(self) -> str:
        return f"10.78.{self.subnet}.200"

    @property
    def pfs_netns(self) -> str:
        return f"{self.tag}pfs"

    @property
    def storage_bridge(self) -> str:
        return f"{self.tag}bs"

    def node_folder(self, k: int) -> str:
        return os.path.join(self.work, f"n{k}")

    # -- lifetime ---------------------------------------------------------------
    unavailable = ClusterUnavailable

    def unavailable_reason(self) -> str | None:
        return unavailable_reason()

    def remove_stale(self) -> None:
        remove_stale(self.log)

    def _start(self) -> None:
        t0 = time.perf_counter()
        self.subnet = self._pick_subnet()
        self.work = tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{self.pid}-")
        for d in (self.uts_dir, self.pfs_path, self.local_path):
            os.makedirs(d)
        # A UTS namespace is kept alive by a bind mount of its file, which needs a private parent mount.
        system_tools.run(["mount", "--bind", self.uts_dir, self.uts_dir])
        system_tools.run(["mount", "--make-private", self.uts_dir])
        for bridge, net in ((f"{self.tag}bm", "77"), (self.storage_bridge, "78")):
            system_tools.run(["ip", "link", "add", bridge, "type", "bridge"])
            system_tools.run(["ip", "link", "set", bridge, "up"])
            if net == "77":  # mpirun on the host reaches the nodes' daemons over the compute bridge
                system_tools.run(["ip", "addr", "add", f"10.77.{self.subnet}.254/24", "dev", bridge])
        self._make_cgroups()
        for k in range(1, self.nodes + 1):
            self._make_node(k)
        self.pfs = pfs_provider.make(self.pfs_kind, self, **self.pfs_options)
        self.pfs.start()
        self._write_agent()
        if self.launcher == "slurm":
            from benchmarks.lab.cluster import slurm
            self.slurm = slurm.Slurm(self, self.slurm_mode)
            self.slurm.start()
        self.log(f"[cluster] {self.nodes} nodes x {self.ranks_per_node} ranks ready in "
                 f"{time.perf_counter() - t0:.1f} s: namespaces {self.netns(1)}..{self.netns(self.nodes)}, "
                 f"compute 10.77.{self.subnet}.0/24, storage 10.78.{self.subnet}.0/24, PFS: {self.pfs.describe()}"
                 + (f", links {self.link_mbit:g} Mbit/s" if self.link_mbit else "")
                 + (f", {self.node_mem_mb} MB RAM per node" if self.cgroups.get("memory") else "")
                 + (f", {self.node_cpus} CPUs per node" if self.cgroups.get("cpuset") else ""))

    def _pick_subnet(self) -> int:
        used = system_tools.run(["ip", "-o", "-4", "addr"], check=False).stdout
        for i in range(250):
            x = (self.pid + i) % 250
            if f" 10.77.{x}." not in used and f" 10.78.{x}." not in used:
                return x
        raise ClusterUnavailable("no free 10.77.X.0/24 and 10.78.X.0/24 subnets for the emulated cluster")

    def _make_cgroups(self) -> None:
        want = {"memory": self.node_mem_mb is not None, "cpuset": self.node_cpus is not None}
        for controller, wanted in want.items():
            base = os.path.join(CGROUP_ROOT, controller)
            self.cgroups[controller] = wanted and os.path.isfile(os.path.join(base, "cgroup.procs"))
            if wanted and not self.cgroups[controller]:
                self.log(f"[cluster] warning: cgroup v1 '{controller}' is not offered here ({base}): "
                         "the nodes share this machine's " + ("memory" if controller == "memory" else "CPUs"))
        cpus = sorted(os.sched_getaffinity(0))
        for k in range(1, self.nodes + 1):
            if self.cgroups.get("memory"):
                d = os.path.join(CGROUP_ROOT, "memory", f"{RUN_PREFIX}{self.pid}-n{k}")
                os.mkdir(d)
                with open(os.path.join(d, "memory.limit_in_bytes"), "w") as f:
                    f.write(str(int(self.node_mem_mb) * 2**20))
            if self.cgroups.get("cpuset"):
                d = os.path.join(CGROUP_ROOT, "cpuset", f"{RUN_PREFIX}{self.pid}-n{k}")
                os.mkdir(d)
                n = min(self.node_cpus, len(cpus))
                mine = [cpus[((k - 1) * n + i) % len(cpus)] for i in range(n)]
                with open(os.path.join(d, "cpuset.cpus"), "w") as f:
                    f.write(",".join(map(str, sorted(set(mine)))))
                with open(os.path.join(CGROUP_ROOT, "cpuset", "cpuset.mems")) as src, \
                        open(os.path.join(d, "cpuset.mems"), "w") as f:
                    f.write(src.read().strip())

    def _make_node(self, k: int) -> None:
        ns = self.netns(k)
        system_tools.run(["ip", "netns", "add", ns])
        uts = os.path.join(self.uts_dir, f"n{k}")
        open(uts, "w").close()
        system_tools.run(["unshare", f"--uts={uts}", "hostname", self.hostname(k)])
        nsx = ["ip", "netns", "exec", ns]
        for kind, bridge, inside, addr in (("m", f"{self.tag}bm", "mpi0", self.address(k)),
                                          ("s", self.storage_bridge, "pfs0", self.storage_address(k))):
            host_end, ns_end = f"{self.tag}{kind}{k}", f"{self.tag}{kind.upper()}{k}"
            system_tools.run(["ip", "link", "add", host_end, "type", "veth", "peer", "name", ns_end])
            system_tools.run(["ip", "link", "set", ns_end, "netns", ns])
            system_tools.run(["ip", "link", "set", host_end, "master", bridge])
            system_tools.run(["ip", "link", "set", host_end, "up"])
            system_tools.run(nsx + ["ip", "link", "set", ns_end, "name", inside])
            system_tools.run(nsx + ["ip", "addr", "add", f"{addr}/24", "dev", inside])
            system_tools.run(nsx + ["ip", "link", "set", inside, "up"])
            if self.link_mbit:
                system_tools.shape(host_end, self.link_mbit)      # into the node
                system_tools.shape(inside, self.link_mbit, ns)    # out of the node
        system_tools.run(nsx + ["ip", "link", "set", "lo", "up"])
        for sub in ("pfs", "local", "local/tmp", "local/hdmlp-cache"):
            os.makedirs(os.path.join(self.node_folder(k), sub), exist_ok=True)

    def _write_agent(self) -> None:
        with open("/etc/hosts") as f:
            machine = f.read()
        with open(os.path.join(self.work, "hosts"), "w") as f:
            f.write(machine.rstrip("\n") + f"\n# the emulated cluster {self.tag}\n" +
                    "".join(f"{self.address(k)} {self.hostname(k)}\n" for k in range(1, self.nodes + 1)) +
                    f"10.77.{self.subnet}.253 head\n")
        inner = os.path.join(self.work, "agent-inner.sh")
        with open(inner, "w") as f:
            f.write(INNER.format(work=self.work, pfs_path=self.pfs_path, local_path=self.local_path))
        cgroups = " ".join(os.path.join(CGROUP_ROOT, c, f"{RUN_PREFIX}{self.pid}-n")
                           for c, on in self.cgroups.items() if on)
        cases = "\n".join(f"  {self.address(k)}) node={k} ;;" for k in range(1, self.nodes + 1))
        self.agent = os.path.join(self.work, "agent.sh")
        with open(self.agent, "w") as f:
            f.write(AGENT.format(tag=self.tag, cases=cases, cgroups=cgroups or '""', uts=self.uts_dir, inner=inner))
        os.chmod(self.agent, 0o755)
        self.hostfile = os.path.join(self.work, "hostfile")
        with open(self.hostfile, "w") as f:
            f.write("".join(f"{self.address(k)} slots={self.ranks_per_node}\n" for k in range(1, self.nodes + 1)))

    def _stop(self) -> None:
        """Stops mpirun and every process on the nodes, removes every namespace, link, mount, cgroup and folder."""
        self._stop_mpirun()
        for name, part in (("Slurm", self.slurm), ("the PFS", self.pfs)):
            if part is not None:
                try:
                    part.stop()
                except Exception as e:  # the generic teardown below still runs
                    self.log(f"[cluster] warning: stopping {name} failed: {e}")
        _teardown(self.pid, self.nodes)
        left = leftovers(self.pid)
        if left:
            self.log(f"[cluster] warning: the teardown left: {', '.join(left)}")

    # -- running ----------------------------------------------------------------
    def mpirun_command(self, command: list[str], env: dict[str, str] | None = None,
                       mpirun_args: list[str] = ()) -> list[str]:
        """The mpirun command line that runs ``command`` as ranks_per_node ranks on every node."""
        net = f"10.77.{self.subnet}.0/24"
        cmd = ["mpirun", "--allow-run-as-root", "--hostfile", self.hostfile,
               "-np", str(self.nodes * self.ranks_per_node), "--map-by", "node", "--bind-to", "none",
               "--mca", "plm_rsh_agent", self.agent, "--mca", "plm_rsh_no_tree_spawn", "1",
               "--mca", "pml", "ob1", "--mca", "btl", "tcp,vader,self",
               "--mca", "btl_tcp_if_include", net, "--mca", "oob_tcp_if_include", net,
               *TCP_EAGER_ARGS, *mpirun_args]
        for key, value in (env or {}).items():
            cmd += ["-x", f"{key}={value}"]
        return cmd + list(command)

    def run(self, command: list[str], env: dict[str, str] | None = None, timeout: float = 300,
            mpirun_args: list[str] = (), during=None) -> subprocess.CompletedProcess:
        """Runs ``command`` under mpirun across the cluster; returns its CompletedProcess (text output).

        ``during(proc)``, if given, is called while mpirun runs (e.g. to kill a node's ranks). On a timeout or
        an exception (Ctrl-C) mpirun's process group is killed and the exception propagates.
        """
        if not self.running:
            raise RuntimeError("the emulated cluster is not running (use it in a with block)")
        env = {**self.rank_env, **(env or {})}
        if self.slurm is not None:  # mpirun_args are the launcher's: srun's, or mpirun's inside salloc
            cmd = self.slurm.command(command, env, mpirun_args)
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True, env=self.slurm.env())
        else:
            cmd = self.mpirun_command(command, env, mpirun_args)
            # Under the reaper, Open MPI's daemons (which daemonize) and the ranks stay in this
            # process's tree, so a LoadRecorder counts their CPU as the benchmark's own (reaper.py).
            proc = subprocess.Popen([sys.executable, REAPER, "--", *cmd], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True)
        self._mpirun = proc
        try:
            if during is not None:
                during(proc)
            out, err = proc.communicate(timeout=timeout)
        except BaseException:
            self._stop_mpirun()
            raise
        finally:
            self._mpirun = None
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)

    def keep_going_args(self) -> list[str]:
        """Launcher arguments that keep the other ranks running when one dies (hdmlp must then end them)."""
        if self.slurm is not None:
            return self.slurm.keep_going_args()
        return ["--mca", "orte_abort_on_non_zero_status", "0"]

    def abort_args(self) -> list[str]:
        """Launcher arguments that end the whole job when a rank dies (mpirun's default)."""
        return self.slurm.abort_args() if self.slurm is not None else []

    def _stop_mpirun(self) -> None:
        proc = self._mpirun
        if proc is None or proc.poll() is not None:
            return
        system_tools.stop_group(proc)
        for k in range(1, self.nodes + 1):
            system_tools.kill_netns_pids(self.netns(k))

    def node_pids(self, k: int) -> list[int]:
        """Processes running in node k's network namespace (its Open MPI daemon and ranks)."""
        return [int(p) for p in system_tools.run(["ip", "netns", "pids", self.netns(k)], check=False).stdout.split()]

    # -- measuring --------------------------------------------------------------
    def link_bytes(self) -> dict[str, dict[str, int]]:
        """Per node, bytes carried so far on its links, read on the host's end of each veth:
        ``{"nodeK": {"from_pfs", "to_pfs", "from_nodes", "to_nodes"}}``."""
        def stat(dev, name):
            with open(f"/sys/class/net/{dev}/statistics/{name}") as f:
                return int(f.read())
        out = {}
        for k in range(1, self.nodes + 1):
            m, s = f"{self.tag}m{k}", f"{self.tag}s{k}"
            # The host's end sends (tx) what goes into the node and receives (rx) what comes out of it.
            out[self.hostname(k)] = {"from_pfs": stat(s, "tx_bytes"), "to_pfs": stat(s, "rx_bytes"),
                                     "from_nodes": stat(m, "tx_bytes"), "to_nodes": stat(m, "rx_bytes")}
        return out

    def describe(self) -> dict:
        return {"nodes": self.nodes, "ranks_per_node": self.ranks_per_node,
                "hostnames": [self.hostname(k) for k in range(1, self.nodes + 1)],
                "compute_network": f"10.77.{self.subnet}.0/24", "storage_network": f"10.78.{self.subnet}.0/24",
                "link_mbit": self.link_mbit, "node_mem_mb": self.node_mem_mb if self.cgroups.get("memory") else None,
                "node_cpus": self.node_cpus if self.cgroups.get("cpuset") else None,
                "pfs": self.pfs.describe() if self.pfs else None, "pfs_path": self.pfs_path,
                "local_path": self.local_path,
                "launcher": "mpirun" if self.slurm is None else f"slurm ({self.slurm_mode})"}

