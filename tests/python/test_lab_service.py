"""benchmarks/lab/service.py: the lifecycle the emulated PFS, netfs and the emulated cluster share."""
import atexit
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.append(REPO)  # benchmarks/ is not installed; appended, so hdmlp stays the installed one
from benchmarks.lab.service import Service  # noqa: E402


class Unavailable(RuntimeError):
    pass


class Parts(Service):
    """Builds three parts; fails while building the part named in ``fail_at``."""

    unavailable = Unavailable

    def __init__(self, fail_at=None, reason=None):
        super().__init__(log=lambda *_: None)
        self.fail_at, self.reason = fail_at, reason
        self.built, self.events = [], []

    def unavailable_reason(self):
        return self.reason

    def remove_stale(self):
        self.events.append("remove_stale")

    def _start(self):
        for part in ("a", "b", "c"):
            if part == self.fail_at:
                raise KeyboardInterrupt(part)  # Ctrl-C part way rolls back as an error does
            self.built.append(part)

    def _stop(self):
        self.events.append(f"stop {''.join(self.built)}")
        self.built.clear()


def test_start_and_stop_run_once_and_stop_leaves_atexit(monkeypatch):
    registered = []
    monkeypatch.setattr(atexit, "register", registered.append)
    monkeypatch.setattr(atexit, "unregister", registered.remove)
    with Parts() as service:
        assert service.running and service.built == ["a", "b", "c"]
        assert service.start() is service and service.built == ["a", "b", "c"]  # a second start builds nothing
        assert registered == [service.stop]
    service.stop()
    assert not service.running and registered == []
    assert service.events == ["remove_stale", "stop abc"]


def test_a_start_that_fails_part_way_is_rolled_back():
    service = Parts(fail_at="c")
    with pytest.raises(KeyboardInterrupt):
        service.start()
    assert service.events == ["remove_stale", "stop ab"] and not service.running


def test_an_unavailable_machine_raises_the_services_error_before_anything_is_built():
    service = Parts(reason="needs root")
    with pytest.raises(Unavailable, match="needs root"):
        service.start()
    assert service.events == [] and not service.running


def test_wait_for_says_what_exited_with_the_end_of_its_log(tmp_path):
    log = tmp_path / "log"
    log.write_text("bind: address in use\n")
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    with pytest.raises(RuntimeError, match="the server exited with status 3: bind: address in use"):
        Service.wait_for(lambda: False, "the server", proc, str(log), timeout=30)
    with pytest.raises(RuntimeError, match="the mount did not come up within 0.1 s"):
        Service.wait_for(lambda: False, "the mount", timeout=0.1)
    Service.wait_for(lambda: True, "ready at once", timeout=1)


def test_cluster_ranks_yield_in_mpi_waits_only_when_they_outnumber_the_cores(tmp_path, monkeypatch):
    """Emulated ranks beyond this machine's cores yield while they wait in MPI (a busy-polling barrier
    would take the cores from the ranks still working); a run with a core per rank keeps Open MPI's
    default, and a caller's own setting wins."""
    from benchmarks.lab.cluster.emulation import EmulatedCluster
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    crowded = EmulatedCluster(3, 2, str(tmp_path))
    assert crowded.rank_env["OMPI_MCA_mpi_yield_when_idle"] == "1"
    assert "OMPI_MCA_mpi_yield_when_idle" not in EmulatedCluster(2, 1, str(tmp_path)).rank_env
    own = EmulatedCluster(3, 2, str(tmp_path), rank_env={"OMPI_MCA_mpi_yield_when_idle": "0"})
    assert own.rank_env["OMPI_MCA_mpi_yield_when_idle"] == "0"
