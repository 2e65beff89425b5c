"""What the benchmarks that drive system tools share: finding a tool, running it, installing its
Debian package, processes and their groups, mounts and network namespaces.

The emulated PFS (:mod:`benchmarks.lab.pfs`), netfs (:mod:`benchmarks.lab.netfs`), the emulated cluster
(:mod:`benchmarks.lab.cluster.emulation`) and the scenario harness (:mod:`benchmarks.harness`) use
these; none keeps state. Linux only where a function says so (``/proc``, ``ip netns``).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Mapping

__all__ = ["install_packages", "kill_netns_pids", "mount_table", "netns_problem", "pid_alive", "run", "shape",
           "stop_group", "stop_process", "which"]


def which(tool: str) -> str | None:
    """The path of ``tool`` (also in /usr/sbin and /sbin, which a non-login PATH may lack), or None.

    ``NAME.pc`` asks pkg-config for a library's development files instead (the name back when found).
    """
    if tool.endswith(".pc"):
        pc = shutil.which("pkg-config")
        ok = pc and subprocess.run([pc, "--exists", tool[:-3]], capture_output=True).returncode == 0
        return tool if ok else None
    return shutil.which(tool) or next((p for p in (f"/usr/sbin/{tool}", f"/sbin/{tool}") if os.access(p, os.X_OK)),
                                      None)


def run(cmd: list[str], check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    """Runs ``cmd`` capturing its output; with ``check``, RuntimeError naming the command and its message."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()}")
    return proc


def install_packages(tools: Mapping[str, str], unavailable: type[Exception], who: str, install: bool = True,
                     log: Callable[[str], object] = print, find: Callable[[str], str | None] = which) -> None:
    """Installs the Debian packages (``tools``: tool -> package) of the tools ``find`` does not find,
    with apt-get (root only). Raises ``unavailable`` naming what is missing when it cannot."""
    missing = sorted({pkg for tool, pkg in tools.items() if find(tool) is None})
    if not missing:
        return
    if not install:
        raise unavailable(f"missing Debian packages: {' '.join(missing)}")
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise unavailable(f"missing Debian packages {' '.join(missing)}, and apt-get cannot install them here "
                          f"(needs root and apt-get)")
    log(f"[{who}] installing Debian packages: {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-q"],
                ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing]):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        if proc.returncode != 0:
            raise unavailable(f"`{' '.join(cmd)}` failed: {proc.stderr.strip()[-400:]}")
    still = sorted({pkg for tool, pkg in tools.items() if find(tool) is None})
    if still:
        raise unavailable(f"Debian packages {' '.join(still)} installed but their commands are still missing")


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (also one of another user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_process(proc: subprocess.Popen | None, grace: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds, and reap: for a child without children of its own."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def stop_group(proc: subprocess.Popen | None, grace: float = 5.0) -> None:
    """The same for a child started with ``start_new_session=True`` and everything in its process group
    (mpirun and its ranks, a benchmark and its workers), also when the leader has exited but others of
    the group have not."""
    if proc is None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(grace)
            break
        except subprocess.TimeoutExpired:
            continue


def mount_table() -> list[tuple[str, str, str]]:
    """(source, mount point, type) of every mount, from /proc/mounts (Linux)."""
    out = []
    with open("/proc/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) > 2:
                out.append((parts[0], parts[1].replace("\\040", " "), parts[2]))
    return out


def kill_netns_pids(netns: str) -> None:
    """SIGKILL to every process in the network namespace ``netns`` (``ip netns pids``)."""
    proc = run(["ip", "netns", "pids", netns], check=False)
    for pid in map(int, proc.stdout.split()):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def shape(dev: str, mbit: float, netns: str | None = None, latency_ms: int = 50) -> None:
    """Caps what ``dev`` (in ``netns``, else the host's) sends at ``mbit`` (``tc tbf``, a burst of 2 ms)."""
    burst = max(16 * 1024, int(mbit * 1e6 / 8 * 0.002))
    run((["ip", "netns", "exec", netns] if netns else []) + [
        "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", f"{mbit}mbit", "burst", str(burst),
        "latency", f"{latency_ms}ms"])


TBF_PROBE = (["tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "100mbit", "burst", "64kb", "latency", "50ms"],
             "`tc qdisc ... tbf` fails here ({}): cannot shape links")


def netns_problem(probe: str, checks: list[tuple[list[str], str]] = (TBF_PROBE,)) -> str | None:
    """Makes the network namespace ``probe``, runs each check's command in it, and removes it again: None
    when all of them work, else the first failing check's line (``{}``: the command's message)."""
    proc = run(["ip", "netns", "add", probe], check=False)
    if proc.returncode != 0:
        return f"`ip netns add` fails here ({proc.stderr.strip()}): network namespaces are not available"
    try:
        for command, problem in checks:
            proc = run(["ip", "netns", "exec", probe, *command], check=False)
            if proc.returncode != 0:
                return problem.format(proc.stderr.strip())
    finally:
        run(["ip", "netns", "del", probe], check=False)
    return None
