"""The lifecycle every emulated service of the lab shares: start, roll back, stop, wait.

A :class:`Service` (the emulated PFS, a netfs server or mount, the emulated cluster)
says why this machine cannot run it (:meth:`Service.unavailable_reason`), removes
what a run killed with SIGKILL left behind (:meth:`Service.remove_stale`) and builds
itself (:meth:`Service._start`). :meth:`Service.start` runs them in that order and,
when building fails part way (or Ctrl-C comes), rolls back: :meth:`Service.stop`
undoes what was built, and runs once, under a lock, whichever of the ``with`` block,
an exception, interpreter exit (atexit), SIGTERM or SIGHUP (:func:`install_signal_handlers`)
or the caller comes first.
"""
from __future__ import annotations

import atexit
import os
import signal
import subprocess
import threading
import time


def install_signal_handlers() -> None:
    """Turns SIGTERM and SIGHUP into SystemExit, so that ``with`` blocks and atexit stop the services."""
    def handler(signum, _frame):
        raise SystemExit(128 + signum)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


class Service:
    """Start / roll back / stop / wait; subclasses write :meth:`_start` and :meth:`_stop`."""

    unavailable: type[Exception] = RuntimeError  # raised by start() with unavailable_reason()'s line

    def __init__(self, log=print) -> None:
        self.log = log
        self._stopped = True
        self._lock = threading.Lock()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return not self._stopped

    def unavailable_reason(self) -> str | None:
        """None when this machine can run the service, else one line saying why not."""
        return None

    def remove_stale(self) -> None:
        """Removes what a service of a process that is gone left behind."""

    def start(self):
        if not self._stopped:
            return self
        reason = self.unavailable_reason()
        if reason:
            raise self.unavailable(reason)
        self.remove_stale()
        self._stopped = False
        atexit.register(self.stop)
        try:
            self._start()
        except BaseException:
            self.stop()  # roll back what was built
            raise
        return self

    def stop(self) -> None:
        """Undoes what start() built; safe to call twice, and after a start that failed part way."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            try:
                self._stop()
            finally:
                atexit.unregister(self.stop)

    def _start(self) -> None:
        raise NotImplementedError

    def _stop(self) -> None:
        raise NotImplementedError

    @staticmethod
    def wait_for(ready, what: str, proc: subprocess.Popen | None = None, log_path: str | None = None,
                 timeout: float = 20.0, poll: float = 0.05) -> None:
        """Waits until ``ready()``; RuntimeError with the end of ``log_path`` if ``proc`` exits first or time runs out."""
        def log_text() -> str:
            return open(log_path).read().strip()[-800:] if log_path and os.path.exists(log_path) else ""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"{what} exited with status {proc.returncode}: {log_text()}")
            time.sleep(poll)
        raise RuntimeError(f"{what} did not come up within {timeout:g} s: {log_text()}")
