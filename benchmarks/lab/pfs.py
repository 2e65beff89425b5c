"""An emulated parallel file system: a folder served over a shaped network link.

A real PFS is remote: every file costs round trips and every byte crosses a
link shared with other readers. To compare loaders fairly on one machine,
``EmulatedPFS`` serves a folder the way a remote store would, and every
loader under test reads through it. Two kinds of server (``kind=``):

``"netfs"`` (the default), the project's own file system (benchmarks/lab/netfs.py)::

    client (the loaders)                       |  network namespace "hdmlp-pfs-<pid>"
    netfs mount (FUSE, read-only, direct I/O,  |
      64 threads and TCP connections, reads    |
      of up to 1 MiB in one request)           |
        -> veth, tc tbf <rate> each way  ======+=> netfs server: +open_delay_ms per metadata
                                               |   request (stat, open, readdir), +read_delay_ms
                                               |   per read (both default to one round trip,
                                               |   2 x delay_ms)

``"sshfs"``, as before netfs existed (at most about 10 requests of 128 KiB in flight)::

    client (the loaders)                       |  network namespace "hdmlp-pfs-<pid>"
    sshfs mount (fuse3, read-only, no kernel   |
      page cache kept across opens)            |
        -> 127.0.0.1:<port> delay proxy        |
           (+delay each way; no netem here)    |
        -> veth, tc tbf <rate> each way  ======+=> sshd, sftp subsystem read-only (-R)

* the rate is enforced by ``tc qdisc ... tbf`` on both ends of a veth pair;
* the latency by ``delay_proxy.py`` (this kernel has no ``netem``);
* sshd runs inside the namespace with a private tmpfs ``/run`` (``unshare -m``),
  with throw-away host and client keys, and serves only read-only SFTP;
* sshfs mounts the export read-only, in the foreground so it is ours to stop.
  FUSE drops a file's cached pages when it is opened again (no ``kernel_cache``),
  so every epoch goes over the link, as on a PFS whose client cache is cold.

Everything it starts is stopped by :meth:`EmulatedPFS.stop`: on leaving the
``with`` block, on an exception, at interpreter exit (atexit), and, through
:func:`benchmarks.lab.service.install_signal_handlers`, on SIGTERM/SIGHUP (Ctrl-C raises
KeyboardInterrupt, which unwinds the same way). Leftovers of a run that was
killed with SIGKILL are removed by the next start (:func:`remove_stale`).

It needs root, iproute2 with network namespaces and ``tc tbf``, ``/dev/fuse``,
fuse3 and vmtouch (to empty the page cache), and for netfs libfuse3-dev, pkg-config and a
C++ compiler, for sshfs the Debian packages sshfs and openssh-server;
:func:`ensure_tools` installs missing packages with apt-get, and
:func:`unavailable_reason` says in one line why the machine cannot do it.
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from benchmarks.lab import netfs, system_tools
from benchmarks.lab.service import Service

NAME_PREFIX = "hdmlp-pfs-"
KINDS = ("netfs", "sshfs")
DEFAULT_KIND = "netfs"
# Debian package providing each command the emulation needs, per kind of server.
COMMON_TOOLS = {"ip": "iproute2", "tc": "iproute2", "unshare": "util-linux", "fusermount3": "fuse3",
                "vmtouch": "vmtouch"}
TOOLS_BY_KIND = {"sshfs": {**COMMON_TOOLS, "ssh-keygen": "openssh-client", "sshd": "openssh-server", "sshfs": "sshfs"},
                 "netfs": {**COMMON_TOOLS, **netfs.TOOLS}}
TOOLS = TOOLS_BY_KIND["sshfs"]  # the sshfs kind's, as before netfs
SBIN_SSHD = "/usr/sbin/sshd"


class PFSUnavailable(RuntimeError):
    """This machine cannot run the emulated PFS; the message says why."""


def _which(tool: str) -> str | None:
    if tool == "sshd":
        return SBIN_SSHD if os.access(SBIN_SSHD, os.X_OK) else shutil.which("sshd")
    return system_tools.which(tool)


def _check_kind(kind: str) -> dict:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got '{kind}'")
    return TOOLS_BY_KIND[kind]


def ensure_tools(install: bool = True, log=print, kind: str = DEFAULT_KIND) -> None:
    """Installs the Debian packages of missing tools with apt-get (root only).

    Raises PFSUnavailable naming what is missing when it cannot.
    """
    system_tools.install_packages(_check_kind(kind), PFSUnavailable, "pfs", install, log, find=_which)


def unavailable_reason(install: bool = True, log=print, kind: str = DEFAULT_KIND) -> str | None:
    """None when the emulated PFS (of this kind) can run here, else one line saying why not."""
    if sys.platform != "linux":
        return "the emulated PFS needs Linux (network namespaces, FUSE)"
    if os.geteuid() != 0:
        return "the emulated PFS needs root (network namespaces, tc, mounts); run the benchmark as root"
    if not os.path.exists("/dev/fuse"):
        return f"/dev/fuse is missing: FUSE ({kind}) cannot mount here"
    try:
        ensure_tools(install=install, log=log, kind=kind)
        if kind == "netfs":
            netfs.build(log=log)
    except (PFSUnavailable, netfs.NetFSUnavailable) as e:
        return str(e)
    return system_tools.netns_problem(f"{NAME_PREFIX}probe{os.getpid()}")


def _fuse_mounts() -> list[str]:
    return [mnt for _, mnt, kind in system_tools.mount_table() if kind in ("fuse.sshfs", netfs.FS_TYPE)]


def remove_stale(log=print) -> None:
    """Removes namespaces and mounts left by an emulated PFS whose process is gone."""
    for mnt in _fuse_mounts():
        m = re.search(rf"/{NAME_PREFIX}(\d+)-", mnt)
        if m and not system_tools.pid_alive(int(m.group(1))):
            log(f"[pfs] unmounting the stale mount {mnt}")
            system_tools.run(["fusermount3", "-uz", mnt], check=False)
    proc = system_tools.run(["ip", "netns", "list"], check=False)
    for line in proc.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.fullmatch(rf"{NAME_PREFIX}(\d+)", name)
        if m and not system_tools.pid_alive(int(m.group(1))):
            log(f"[pfs] removing the stale namespace {name}")
            system_tools.kill_netns_pids(name)
            system_tools.run(["ip", "netns", "del", name], check=False)
    netfs.remove_stale(log)


def drop_page_cache(paths: list[str]) -> None:
    """Empties the page cache of these files (``vmtouch -e``; posix_fadvise where it is missing)."""
    vmtouch = _which("vmtouch")
    if vmtouch:
        for i in range(0, len(paths), 500):
            system_tools.run([vmtouch, "-eq", *paths[i:i + 500]], check=False, timeout=120)
        return
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


class EmulatedPFS(Service):
    """Serves ``export_dir`` read-only over a shaped link; ``path`` is where loaders read it.

    Args:
        export_dir: the folder to serve (the server reads it from local disk).
        rate_mbit: link rate in Mbit/s, each direction (tc tbf).
        delay_ms: one-way delay in each direction: a round trip costs 2x more. sshfs: added to
            every packet by the proxy. netfs: the defaults of the delays below.
        log: where progress lines go.
        kind: "netfs" (the default) or "sshfs": the file server (see the module's text).
        open_delay_ms: netfs only: added to every metadata request (stat, open, readdir);
            default one round trip (2 x delay_ms).
        read_delay_ms: netfs only: added to every read request; default one round trip.
        threads: netfs only: the mount's FUSE threads and TCP connections (requests in flight).
        metadata_slots: netfs only: metadata requests the server handles at once (None: no limit).

    Use as a context manager; :meth:`stop` is idempotent and also runs at exit.
    """

    def __init__(self, export_dir: str, rate_mbit: float = 200.0, delay_ms: float = 1.0, log=print,
                 kind: str = DEFAULT_KIND, open_delay_ms: float | None = None, read_delay_ms: float | None = None,
                 threads: int = 64, metadata_slots: int | None = None) -> None:
        super().__init__(log)
        _check_kind(kind)
        self.kind = kind
        if kind == "sshfs" and (open_delay_ms is not None or read_delay_ms is not None):
            raise ValueError("open_delay_ms and read_delay_ms are netfs options; sshfs has only delay_ms")
        self.open_delay_ms = 2.0 * delay_ms if open_delay_ms is None else float(open_delay_ms)
        self.read_delay_ms = 2.0 * delay_ms if read_delay_ms is None else float(read_delay_ms)
        self.threads = int(threads)
        self.metadata_slots = metadata_slots
        self._netfs: list = []
        self.export_dir = os.path.realpath(export_dir)
        if not os.path.isdir(self.export_dir):
            raise NotADirectoryError(f"the folder to export '{export_dir}' does not exist")
        if rate_mbit <= 0 or delay_ms < 0:
            raise ValueError(f"rate_mbit must be > 0 and delay_ms >= 0, got {rate_mbit}, {delay_ms}")
        self.rate_mbit = float(rate_mbit)
        self.delay_ms = float(delay_ms)
        self.netns = f"{NAME_PREFIX}{os.getpid()}"
        tag = f"hp{os.getpid() % 1000000}"
        self.veth_host, self.veth_ns = f"{tag}h", f"{tag}n"
        self.workdir: str | None = None
        self.path: str | None = None
        self._procs: dict[str, subprocess.Popen] = {}
        self._netns_made = False

    # -- lifetime -------------------------------------------------------------
    unavailable = PFSUnavailable

    def unavailable_reason(self) -> str | None:
        return unavailable_reason(log=self.log, kind=self.kind)

    def remove_stale(self) -> None:
        remove_stale(self.log)

    def _start(self) -> None:
        self.workdir = tempfile.mkdtemp(prefix=f"{NAME_PREFIX}{os.getpid()}-")
        w = self.workdir
        host_ip, ns_ip = self._pick_subnet()
        # The namespace and its link, shaped in both directions.
        system_tools.run(["ip", "netns", "add", self.netns])
        self._netns_made = True
        system_tools.run(["ip", "link", "add", self.veth_host, "type", "veth", "peer", "name", self.veth_ns])
        system_tools.run(["ip", "link", "set", self.veth_ns, "netns", self.netns])
        system_tools.run(["ip", "addr", "add", f"{host_ip}/30", "dev", self.veth_host])
        system_tools.run(["ip", "link", "set", self.veth_host, "up"])
        ns = ["ip", "netns", "exec", self.netns]
        system_tools.run(ns + ["ip", "addr", "add", f"{ns_ip}/30", "dev", self.veth_ns])
        system_tools.run(ns + ["ip", "link", "set", self.veth_ns, "up"])
        system_tools.run(ns + ["ip", "link", "set", "lo", "up"])
        system_tools.shape(self.veth_host, self.rate_mbit, latency_ms=20)
        system_tools.shape(self.veth_ns, self.rate_mbit, self.netns, latency_ms=20)
        if self.kind == "netfs":
            self._start_netfs(ns_ip)
            return
        # Throw-away keys and a read-only SFTP server inside the namespace.
        for key in ("host_key", "client_key"):
            system_tools.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "hdmlp-pfs", "-f",
                              os.path.join(w, key)])
        shutil.copy(os.path.join(w, "client_key.pub"), os.path.join(w, "authorized_keys"))
        with open(os.path.join(w, "sshd_config"), "w") as f:
            f.write(f"ListenAddress {ns_ip}:22\nHostKey {w}/host_key\nAuthorizedKeysFile {w}/authorized_keys\n"
                    "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                    "UsePAM no\nStrictModes no\nPidFile none\nUseDNS no\nLogLevel ERROR\n"
                    "Subsystem sftp internal-sftp -R\nForceCommand internal-sftp -R\n"
                    "AllowTcpForwarding no\nX11Forwarding no\nPermitTTY no\n")
        sshd_cmd = ns + ["unshare", "-m", "--propagation", "private", "sh", "-c",
                         "mount -t tmpfs -o mode=755 hdmlp-pfs-run /run && mkdir -p /run/sshd && "
                         f"exec {_which('sshd')} -D -e -f {w}/sshd_config"]
        self._procs["sshd"] = subprocess.Popen(sshd_cmd, stdout=subprocess.DEVNULL,
                                               stderr=open(os.path.join(w, "sshd.log"), "w"))
        self._wait_for(lambda: self._ns_port_open(ns_ip, 22), "sshd inside the namespace", "sshd")
        # The delay proxy, on the client side of the link.
        ready = os.path.join(w, "proxy.port")
        proxy = os.path.join(os.path.dirname(os.path.abspath(__file__)), "delay_proxy.py")
        self._procs["proxy"] = subprocess.Popen(
            [sys.executable, proxy, "--listen", "127.0.0.1:0", "--target", f"{ns_ip}:22",
             "--delay-ms", str(self.delay_ms), "--ready-file", ready],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(w, "proxy.log"), "w"))
        self._wait_for(lambda: os.path.exists(ready), "the delay proxy", "proxy")
        port = int(open(ready).read())
        # The read-only mount.
        self.path = os.path.join(w, "mnt")
        os.mkdir(self.path)
        self._procs["sshfs"] = subprocess.Popen(
            ["sshfs", "-f", "-o", "ro", "-p", str(port),
             "-o", f"IdentityFile={w}/client_key", "-o", "StrictHostKeyChecking=no",
             "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
             "-o", "Compression=no", f"root@127.0.0.1:{self.export_dir}", self.path],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(w, "sshfs.log"), "w"))
        self._wait_for(lambda: os.path.ismount(self.path), "the sshfs mount", "sshfs")
        self.log(f"[pfs] serving {self.export_dir} at {self.path}: {self.rate_mbit:g} Mbit/s (tc tbf), "
                 f"+{self.delay_ms:g} ms each way (proxy), sshfs over ssh from namespace {self.netns}")

    def _start_netfs(self, ns_ip: str) -> None:
        quiet = lambda *_: None  # noqa: E731
        server = netfs.NetFSServer(self.export_dir, listen=ns_ip, open_delay_ms=self.open_delay_ms,
                                   read_delay_ms=self.read_delay_ms, netns=self.netns,
                                   metadata_slots=self.metadata_slots, log=quiet)
        self._netfs.append(server.start())
        self.path = os.path.join(self.workdir, "mnt")
        mount = netfs.NetFSMount(server.address, server.port, self.path, threads=self.threads, log=quiet)
        self._netfs.append(mount.start())
        self.log(f"[pfs] serving {self.export_dir} at {self.path}: {self.rate_mbit:g} Mbit/s (tc tbf), "
                 f"+{self.open_delay_ms:g} ms per metadata request"
                 f"{f' ({self.metadata_slots} at a time)' if self.metadata_slots else ''} and +{self.read_delay_ms:g} ms per read "
                 f"(netfs server in namespace {self.netns}, {self.threads} requests in flight)")

    def netfs_stats(self) -> dict | None:
        """The netfs server's counters (netfs.NetFSServer.stats); None for sshfs."""
        return self._netfs[0].stats() if self._netfs else None

    def _pick_subnet(self) -> tuple[str, str]:
        used = system_tools.run(["ip", "-o", "-4", "addr"], check=False).stdout
        for k in range(256):
            third = (os.getpid() + k) % 256
            host_ip, ns_ip = f"10.213.{third}.1", f"10.213.{third}.2"
            if f" {host_ip}/" not in used and f" {ns_ip}/" not in used:
                return host_ip, ns_ip
        raise RuntimeError("no free /30 in 10.213.0.0/16 for the emulated PFS's link")

    def _ns_port_open(self, ip: str, port: int) -> bool:
        with socket.socket() as s:
            s.settimeout(0.5)
            return s.connect_ex((ip, port)) == 0

    def _wait_for(self, ready, what: str, proc_name: str) -> None:
        self.wait_for(ready, what, self._procs.get(proc_name), os.path.join(self.workdir, f"{proc_name}.log"))

    def _stop(self) -> None:
        """Unmounts, stops every process, deletes the namespace and the link."""
        for part in reversed(self._netfs):  # the mount, then the server
            part.stop()
        if self.path and os.path.ismount(self.path):
            if system_tools.run(["fusermount3", "-u", self.path], check=False).returncode != 0:
                system_tools.run(["fusermount3", "-uz", self.path], check=False)
        for name in ("sshfs", "proxy", "sshd"):
            system_tools.stop_process(self._procs.pop(name, None))
        if self._netns_made:
            system_tools.kill_netns_pids(self.netns)
            system_tools.run(["ip", "netns", "del", self.netns], check=False)  # takes the veth pair with it
            system_tools.run(["ip", "link", "del", self.veth_host], check=False)
            self._netns_made = False
        if self.workdir and not (self.path and os.path.ismount(self.path)):
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- measuring ------------------------------------------------------------
    def wire_bytes(self) -> int:
        """Bytes received so far over the link from the server (data plus ssh's framing)."""
        with open(f"/sys/class/net/{self.veth_host}/statistics/rx_bytes") as f:
            return int(f.read())

    def local_path(self, export_path: str) -> str:
        """Where a file or folder under ``export_dir`` appears on the mount."""
        rel = os.path.relpath(os.path.realpath(export_path), self.export_dir)
        if rel.startswith(".."):
            raise ValueError(f"'{export_path}' is not under the exported folder '{self.export_dir}'")
        return os.path.normpath(os.path.join(self.path, rel))

    def measure(self, files: list[str], readers: int = 4) -> dict:
        """Measures the link as a loader sees it, reading these files (paths on the mount).

        Returns the median ms to open and read one file with one reader, the
        MB/s of one reader reading them in a row, and of ``readers`` threads at once.
        """
        def read(path):
            t = time.perf_counter()
            with open(path, "rb") as f:
                n = len(f.read())
            return time.perf_counter() - t, n

        half = max(1, len(files) // 2)
        drop_page_cache(files)
        t = time.perf_counter()
        one = [read(p) for p in files[:half]]
        one_s = time.perf_counter() - t
        t = time.perf_counter()
        with ThreadPoolExecutor(readers) as pool:
            many = list(pool.map(read, files[half:]))
        many_s = time.perf_counter() - t
        sizes = [n for _, n in one]
        return {"rate_mbit": self.rate_mbit, "delay_ms_each_way": self.delay_ms,
                "file_ms_median": round(statistics.median(s for s, _ in one) * 1000, 2),
                "file_kb_mean": round(statistics.mean(sizes) / 1000, 1),
                "one_reader_mb_s": round(sum(sizes) / one_s / 1e6, 2),
                f"{readers}_readers_mb_s": round(sum(n for _, n in many) / max(many_s, 1e-9) / 1e6, 2),
                "files": len(files)}
