"""netfs: the project's own read-only network file system, for an emulated PFS.

A parallel file system is a server that many nodes mount. ``netfs`` emulates one with a small
C++ program (``benchmarks/lab/netfs/netfs.cc``, libfuse3) in two parts::

    NetFSServer (serve)                         NetFSMount (mount, FUSE)
      serves `root` read-only over TCP   <---     a read-only mount of it; many FUSE threads,
      per metadata request (stat, open,   TCP     as many TCP connections, reads of up to
      readdir): +open_delay_ms                    1 MiB as one request, direct I/O (no page
      per read request: +read_delay_ms            cache: every epoch crosses the link)
      all reads share `mbit` (token bucket)

Unlike sshfs (about 10 requests of at most 128 KiB in flight), many requests proceed at once,
so a reader that keeps many large reads in flight can fill a fast link with long round trips.
Paths that leave the root (``..``, symlinks out of it) are refused with EACCES.

Either part can run inside a network namespace (``netns="name"``, from ``ip netns add``): it is
started with ``nsenter --net=/run/netns/<name>``, not ``ip netns exec``, so that its sockets
live in the namespace while a FUSE mount stays in the host's mount namespace, visible to every
process (``ip netns exec`` would give it a private mount namespace).

Lifetime: both are context managers; :meth:`stop` is idempotent and registered with atexit.
Both programs get ``--owner-pid`` (this process) and exit, unmounting, within a second once it
is gone, so a run killed with SIGKILL leaves no process; :func:`remove_stale` (called by every
start) unmounts mounts whose owner is gone and removes their work folders.

The binary is built on first use with ``c++ -O2 -std=c++17 ... $(pkg-config --cflags --libs
fuse3)`` into a cache folder keyed by a hash of the source and the command
(``$HDMLP_NETFS_CACHE``, else ``/var/cache/hdmlp-netfs`` as root, else
``~/.cache/hdmlp-netfs``). :func:`ensure_tools` installs missing Debian packages (fuse3,
libfuse3-dev, pkg-config, g++, util-linux) with apt-get; :func:`unavailable_reason` says in
one line why this machine cannot run it.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from benchmarks.lab import system_tools
from benchmarks.lab.service import Service

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netfs", "netfs.cc")
FS_TYPE = "fuse.netfs"
WORK_PREFIX = "hdmlp-netfs-"
CXXFLAGS = ["-O2", "-std=c++17", "-pthread"]
# Debian package providing each command the netfs needs ("fuse3.pc" is pkg-config's file).
TOOLS = {"fusermount3": "fuse3", "nsenter": "util-linux", "ip": "iproute2", "pkg-config": "pkg-config",
         "c++": "g++", "fuse3.pc": "libfuse3-dev"}


class NetFSUnavailable(RuntimeError):
    """This machine cannot run netfs; the message says why."""


def ensure_tools(install: bool = True, log=print) -> None:
    """Installs the Debian packages of missing tools with apt-get (root only); raises NetFSUnavailable."""
    system_tools.install_packages(TOOLS, NetFSUnavailable, "netfs", install, log)


def cache_dir() -> str:
    """Where built binaries are kept."""
    if os.environ.get("HDMLP_NETFS_CACHE"):
        return os.environ["HDMLP_NETFS_CACHE"]
    if os.geteuid() == 0 and os.access("/var/cache", os.W_OK):
        return "/var/cache/hdmlp-netfs"
    return os.path.join(os.path.expanduser("~"), ".cache", "hdmlp-netfs")


_build_lock = threading.Lock()


def build(log=print) -> str:
    """The path of the netfs binary, compiled first if this source has not been built yet."""
    with _build_lock:
        flags = system_tools.run(["pkg-config", "--cflags", "--libs", "fuse3"]).stdout.split()
        cmd = ["c++", *CXXFLAGS, SOURCE, *flags]
        with open(SOURCE, "rb") as f:
            key = hashlib.sha256(f.read() + " ".join(cmd[1:]).encode()).hexdigest()[:16]
        out_dir = cache_dir()
        binary = os.path.join(out_dir, f"netfs-{key}")
        if os.access(binary, os.X_OK):
            return binary
        os.makedirs(out_dir, exist_ok=True)
        tmp = f"{binary}.tmp{os.getpid()}"
        log(f"[netfs] building {binary}")
        proc = subprocess.run(cmd + ["-o", tmp], capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise NetFSUnavailable(f"building netfs failed (`{' '.join(cmd)}`): {proc.stderr.strip()[-800:]}")
        os.replace(tmp, binary)  # atomic: a concurrent build of the same source is harmless
        return binary


def unavailable_reason(install: bool = True, log=print) -> str | None:
    """None when netfs can serve and mount here, else one line saying why not."""
    if sys.platform != "linux":
        return "netfs needs Linux (FUSE, network namespaces)"
    if os.geteuid() != 0:
        return "netfs needs root (FUSE mounts for every user, network namespaces); run as root"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing: FUSE cannot mount here"
    try:
        ensure_tools(install=install, log=log)
        build(log=log)
    except (NetFSUnavailable, RuntimeError, OSError) as e:
        return str(e)
    return None


# -- processes, mounts, leftovers ------------------------------------------------------------

def mounts() -> list[tuple[str, str]]:
    """(fsname, mount point) of every netfs mount."""
    return [(source, mnt) for source, mnt, kind in system_tools.mount_table() if kind == FS_TYPE]


def is_mounted(path: str) -> bool:
    """Whether a netfs mount is on `path`, also one whose client died (os.path.ismount says no
    there: stat fails with ENOTCONN)."""
    path = os.path.abspath(path)
    return any(m == path for _, m in mounts())


def remove_stale(log=print) -> None:
    """Unmounts netfs mounts and removes work folders whose owning process is gone."""
    for fsname, mnt in mounts():
        m = re.match(r"netfs-(\d+)@", fsname)
        if m and not system_tools.pid_alive(int(m.group(1))):
            log(f"[netfs] unmounting the stale mount {mnt}")
            system_tools.run(["fusermount3", "-uz", mnt], check=False)
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        m = re.match(rf"{WORK_PREFIX}(\d+)-", name)
        if m and not system_tools.pid_alive(int(m.group(1))):
            shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)


def _netns_prefix(netns: str | None) -> list[str]:
    if netns is None:
        return []
    path = f"/run/netns/{netns}"
    if not os.path.exists(path):
        raise FileNotFoundError(f"the network namespace '{netns}' does not exist ({path}); make it with "
                                f"`ip netns add {netns}`")
    return ["nsenter", f"--net={path}", "--"]


class _Managed(Service):
    """A netfs program (the server or the mount) as a service: its process and work folder."""

    unavailable = NetFSUnavailable

    def __init__(self, log) -> None:
        super().__init__(log)
        self.workdir: str | None = None
        self._proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return super().running and self._proc is not None and self._proc.poll() is None

    def unavailable_reason(self) -> str | None:
        return unavailable_reason(log=self.log)

    def remove_stale(self) -> None:
        remove_stale(self.log)

    def _start(self) -> None:
        self.workdir = tempfile.mkdtemp(prefix=f"{WORK_PREFIX}{os.getpid()}-")
        self._run_binary(build(self.log))

    def _spawn(self, cmd: list[str]) -> None:
        self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=open(os.path.join(self.workdir, "log"), "w"))

    def _wait_for(self, ready, what: str) -> None:
        self.wait_for(ready, what, self._proc, os.path.join(self.workdir, "log"), poll=0.02)

    def _log_text(self) -> str:
        path = os.path.join(self.workdir or "", "log")
        return open(path).read().strip()[-800:] if self.workdir and os.path.exists(path) else ""

    def _stop(self) -> None:
        try:
            self._end_binary()
        finally:
            if self.workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)

    def _run_binary(self, binary: str) -> None:
        raise NotImplementedError

    def _end_binary(self) -> None:
        system_tools.stop_process(self._proc)


class NetFSServer(_Managed):
    """Serves ``root`` read-only over TCP, as a PFS's servers would.

    Args:
        root: the folder to serve.
        listen: the address to listen on ("0.0.0.0": every address of the host or of ``netns``).
        port: the TCP port (0: any free one; :attr:`port` says which).
        open_delay_ms: added to every metadata request (stat, open, readdir): a busy metadata server.
        read_delay_ms: added to every read request.
        mbit: the server's bandwidth in Mbit/s, shared by all clients (None: unlimited).
        metadata_slots: metadata requests served at once; the rest queue (None: no limit, the
            delay is a pure latency). With N slots the server does at most N / open_delay
            metadata requests a second, as a metadata server busy with other clients would.
        netns: the network namespace to serve from (None: the caller's).

    :attr:`address` is where clients connect (the listen address, or for "0.0.0.0" the
    namespace's first global IPv4 address, or 127.0.0.1 without a namespace).
    :meth:`stats` returns the server's counters.
    """

    def __init__(self, root: str, listen: str = "0.0.0.0", port: int = 0, open_delay_ms: float = 0,
                 read_delay_ms: float = 0, mbit: float | None = None, netns: str | None = None,
                 metadata_slots: int | None = None, log=print) -> None:
        super().__init__(log)
        self.root = os.path.realpath(root)
        if not os.path.isdir(self.root):
            raise NotADirectoryError(f"the folder to serve '{root}' does not exist")
        if open_delay_ms < 0 or read_delay_ms < 0 or (mbit is not None and mbit <= 0):
            raise ValueError(f"delays must be >= 0 and mbit > 0 (or None), got open_delay_ms={open_delay_ms}, "
                             f"read_delay_ms={read_delay_ms}, mbit={mbit}")
        self.listen, self.port = listen, int(port)
        self.open_delay_ms, self.read_delay_ms, self.mbit = float(open_delay_ms), float(read_delay_ms), mbit
        self.netns = netns
        self.metadata_slots = int(metadata_slots or 0)
        self.address: str | None = None
        self.final_stats: dict | None = None

    def _run_binary(self, binary: str) -> None:
        ready, self._stats_path = os.path.join(self.workdir, "port"), os.path.join(self.workdir, "stats.json")
        cmd = _netns_prefix(self.netns) + [
            binary, "serve", "--root", self.root, "--listen", f"{self.listen}:{self.port}",
            "--open-delay-ms", str(self.open_delay_ms), "--read-delay-ms", str(self.read_delay_ms),
            "--mbit", str(self.mbit or 0), "--metadata-slots", str(self.metadata_slots), "--stats", self._stats_path, "--ready-file", ready,
            "--owner-pid", str(os.getpid())]
        self._spawn(cmd)
        self._wait_for(lambda: os.path.exists(ready), f"the netfs server for {self.root}")
        self.port = int(open(ready).read())
        self.address = self.listen if self.listen not in ("0.0.0.0", "") else self._reachable_address()
        self.log(f"[netfs] serving {self.root} on {self.address}:{self.port}"
                 f"{f' in namespace {self.netns}' if self.netns else ''}: +{self.open_delay_ms:g} ms per "
                 f"metadata request{f' ({self.metadata_slots} at a time)' if self.metadata_slots else ''}, "
                 f"+{self.read_delay_ms:g} ms per read, "
                 f"{f'{self.mbit:g} Mbit/s' if self.mbit else 'no bandwidth cap'}")

    def _reachable_address(self) -> str:
        if self.netns is None:
            return "127.0.0.1"
        out = system_tools.run(["ip", "-n", self.netns, "-o", "-4", "addr", "show", "scope", "global"],
                               check=False).stdout
        m = re.search(r"inet (\d+\.\d+\.\d+\.\d+)/", out)
        return m.group(1) if m else "127.0.0.1"

    def _read_stats(self) -> dict:
        with open(self._stats_path) as f:
            return json.load(f)

    def stats(self) -> dict:
        """The server's counters now: bytes_served, reads, opens, stats (getattr requests), readdirs,
        largest_read (bytes), peak_concurrent (requests at once), connections (open now), requests,
        refused (paths outside the root), errors, and bytes_by_client ({client IPv4 address: bytes
        served to it}). After :meth:`stop`, the final counters."""
        if not self.running:
            if self.final_stats is None:
                raise RuntimeError("the netfs server is not running")
            return dict(self.final_stats)
        seq = self._read_stats()["seq"]
        self._proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                s = self._read_stats()
                if s["seq"] > seq:
                    return s
            except (OSError, ValueError):
                pass
            time.sleep(0.005)
        raise RuntimeError(f"the netfs server did not write its counters: {self._log_text()}")

    def _end_binary(self) -> None:
        system_tools.stop_process(self._proc)
        try:
            self.final_stats = self._read_stats()
        except (OSError, ValueError, AttributeError):
            pass


class NetFSMount(_Managed):
    """Mounts a netfs server read-only on ``mountpoint`` (made if missing, removed again if so).

    Args:
        address, port: the server (:attr:`NetFSServer.address`, :attr:`NetFSServer.port`).
        mountpoint: an empty folder.
        netns: the network namespace the client's sockets live in (None: the caller's); the mount
            itself is in the host's mount namespace either way.
        threads: FUSE threads and TCP connections: requests in flight at most.
        max_read: the largest read sent as one request (bytes).
        attr_timeout: seconds the kernel keeps a file's attributes (0: ask the server every time).
        entry_timeout: seconds the kernel keeps a name it has seen (listed or looked up). Every
            open asks the server whatever these are.
        blksize: the files' st_blksize (1 MiB, Lustre's default stripe): the buffer Python's buffered I/O
            refills per read; a benchmark that scales sample sizes scales it too.
    """

    def __init__(self, address: str, port: int, mountpoint: str, netns: str | None = None, threads: int = 64,
                 max_read: int = 1 << 20, attr_timeout: float = 1.0, entry_timeout: float = 60.0, log=print,
                 blksize: int = 1 << 20) -> None:
        super().__init__(log)
        self.address, self.port = address, int(port)
        self.path = os.path.abspath(mountpoint)
        self.netns, self.threads, self.max_read = netns, int(threads), int(max_read)
        self.attr_timeout, self.entry_timeout = float(attr_timeout), float(entry_timeout)
        self.blksize = int(blksize)
        self._made_dir = False

    def _run_binary(self, binary: str) -> None:
        if not os.path.isdir(self.path):
            os.makedirs(self.path)
            self._made_dir = True
        if os.path.ismount(self.path) or is_mounted(self.path):
            raise RuntimeError(f"'{self.path}' is already a mount point")
        fsname = f"netfs-{os.getpid()}@{self.address}:{self.port}"
        cmd = _netns_prefix(self.netns) + [
            binary, "mount", "--server", f"{self.address}:{self.port}", "--mountpoint", self.path,
            "--threads", str(self.threads), "--max-read", str(self.max_read), "--attr-timeout",
            str(self.attr_timeout), "--entry-timeout", str(self.entry_timeout), "--fsname", fsname, "--owner-pid", str(os.getpid()),
            "--blksize", str(self.blksize)]
        self._spawn(cmd)
        self._wait_for(lambda: os.path.ismount(self.path),
                       f"the netfs mount of {self.address}:{self.port} on {self.path}")
        self.log(f"[netfs] mounted {self.address}:{self.port} on {self.path}"
                 f"{f' (sockets in namespace {self.netns})' if self.netns else ''}")

    def _end_binary(self) -> None:
        if is_mounted(self.path):
            if system_tools.run(["fusermount3", "-u", self.path], check=False).returncode != 0:
                system_tools.run(["fusermount3", "-uz", self.path], check=False)  # busy, or its client died: detach it
        system_tools.stop_process(self._proc)
        if is_mounted(self.path):
            system_tools.run(["fusermount3", "-uz", self.path], check=False)
        if self._made_dir:
            try:
                os.rmdir(self.path)
            except OSError:
                pass
