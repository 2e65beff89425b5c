"""Runs a command as a child subreaper, and ends only once every process it left behind has ended.

    python reaper.py [--grace SECONDS] -- COMMAND [ARG...]

Why: Open MPI's rsh launcher starts its daemons as ``orted --daemonize``, so each
daemon, and the ranks under it, leaves mpirun's process tree for PID 1, and when
the job ends mpirun exits before they do. A benchmark counts its own CPU as its
process tree's (``benchmarks/lab/machine.py``, ``LoadRecorder``), so it saw the
cluster's ranks as *other* processes and called a quiet machine busy. This
process marks itself a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``):
orphans below it are re-parented here instead of to PID 1, stay in the tree
while they run, and are reaped here, which adds their CPU time to this
process's and, once its parent reaps it, to the benchmark's.

It waits for COMMAND, then for every adopted process; any still alive
``--grace`` seconds after COMMAND ended is killed. It exits as COMMAND did
(the same code, or the same signal). Run by path, it imports nothing of the
project.
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>


def _become_subreaper() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: run the command all the same
        pass


def _children(pid: int) -> list[int]:
    """Live processes whose parent is ``pid`` (zombies included: they are reaped next)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                text = f.read()
        except OSError:
            continue
        if int(text[text.rindex(")") + 2:].split()[1]) == pid:
            out.append(int(name))
    return out


def reap_adopted(grace: float) -> None:
    """Reaps every remaining child; kills those still running after ``grace`` seconds."""
    deadline = time.monotonic() + grace
    killed = False
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid:
            continue
        if not killed and time.monotonic() > deadline:
            for child in _children(os.getpid()):
                try:
                    os.kill(child, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            killed = True
        time.sleep(0.02)


def main(argv: list[str]) -> int:
    grace = 10.0
    if argv[:1] == ["--grace"]:
        grace, argv = float(argv[1]), argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: reaper.py [--grace SECONDS] -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    _become_subreaper()
    proc = subprocess.Popen(argv)
    # A signal to this process alone (not to its group) reaches the command too.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: proc.send_signal(s))
    code = proc.wait()
    reap_adopted(grace)
    if code < 0:  # end as the command ended: by the same signal
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
