"""benchmarks/lab/machine.py: the load and other processes' CPU time, on synthetic /proc samples."""
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
try:
    from benchmarks.lab import machine
finally:
    if REPO in sys.path:  # the package drops it itself when hdmlp is not imported yet
        sys.path.remove(REPO)

TICK = 100  # USER_HZ in the synthetic samples


def proc_stat(user, nice, system, idle, iowait, irq, softirq, steal, guest=0):
    cpu = f"cpu  {user} {nice} {system} {idle} {iowait} {irq} {softirq} {steal} {guest} 0"
    return f"{cpu}\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 12345\nctxt 999\n"


def pid_stat(pid, comm, ppid, utime, stime, cutime=0, cstime=0):
    # Fields 3.. as the kernel writes them; utime..cstime are fields 14..17.
    rest = ["S", ppid, pid, pid, 0, -1, 4194560, 100, 0, 0, 0, utime, stime, cutime, cstime, 20, 0, 1, 0, 1000]
    return f"{pid} ({comm}) " + " ".join(map(str, rest)) + "\n"


class FakeProc:
    """A writable stand-in for /proc: stat, loadavg and <pid>/stat files."""

    def __init__(self, root):
        self.root = root

    def write(self, rel, text):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)

    def remove(self, pid):
        os.remove(os.path.join(self.root, str(pid), "stat"))
        os.rmdir(os.path.join(self.root, str(pid)))

    def sample(self, busy, steal, load, processes):
        self.write("stat", proc_stat(busy, 0, 0, 10**6, 0, 0, 0, steal))
        self.write("loadavg", f"{load[0]} {load[1]} {load[2]} 3/200 4242\n")
        for pid, (comm, ppid, ticks, reaped) in processes.items():
            self.write(f"{pid}/stat", pid_stat(pid, comm, ppid, ticks, 0, reaped, 0))


def test_proc_stat_busy_leaves_out_idle_iowait_and_guest():
    busy, steal = machine.parse_proc_stat(proc_stat(100, 20, 30, 5000, 70, 4, 6, 9, guest=50))
    assert busy == 100 + 20 + 30 + 4 + 6  # guest is already inside user
    assert steal == 9
    with pytest.raises(ValueError):
        machine.parse_proc_stat("intr 1\n")


def test_pid_stat_survives_spaces_and_parentheses_in_the_command_name():
    ppid, ticks = machine.parse_pid_stat(pid_stat(77, "a (b) c) d", 5, 11, 22, 33, 44))
    assert (ppid, ticks) == (5, 11 + 22 + 33 + 44)
    assert machine.parse_loadavg("0.52 1.10 2.00 1/99 7\n") == (0.52, 1.10, 2.00)


def test_other_processes_cpu_is_the_machine_busy_time_minus_the_own_tree(tmp_path):
    fake = FakeProc(str(tmp_path))
    me = os.getpid()
    # The tree: me -> worker -> grandchild; 999 is someone else's process.
    fake.sample(busy=1000, steal=10, load=(0.1, 0.2, 0.3), processes={
        me: ("python", 1, 50, 0), 501: ("worker", me, 20, 0), 502: ("grand child", 501, 5, 0),
        999: ("compiler", 1, 400, 0)})
    t = [100.0]
    before = machine.snapshot(proc=str(tmp_path), clock=lambda: t[0])
    assert before.own_ticks == 75 and before.busy_ticks == 1000
    # 10 s later: the grandchild ended and was reaped by the worker (its 5 + 15 more ticks
    # moved into the worker's cutime); the tree used 300 ticks, the machine 500.
    fake.remove(502)
    fake.sample(busy=1500, steal=30, load=(1.5, 0.5, 0.4), processes={
        me: ("python", 1, 250, 0), 501: ("worker", me, 100, 25), 999: ("compiler", 1, 600, 0)})
    t[0] = 110.0
    after = machine.snapshot(proc=str(tmp_path), clock=lambda: t[0])
    u = machine.usage(before, after, cores=2, judge_start_load=True, ticks_per_second=TICK)
    assert u["wall_seconds"] == 10.0
    assert u["busy_cpu_seconds"] == 5.0
    assert u["own_cpu_seconds"] == 3.0          # (250 + 100 + 25) - (50 + 20 + 5) ticks
    assert u["other_cpu_seconds"] == 2.0
    assert u["steal_seconds"] == 0.2
    assert u["other_cores"] == pytest.approx((2.0 + 0.2) / 10)
    assert u["load_before"] == [0.1, 0.2, 0.3] and u["load_after"] == [1.5, 0.5, 0.4]
    assert u["busy"] and len(u["reasons"]) == 1 and "0.22 cores" in u["reasons"][0]


def test_quiet_and_busy_thresholds():
    def snap(wall, busy, own, steal=0, load1=0.0):
        return machine.Snapshot(wall, busy, steal, own, (load1, 0.0, 0.0))

    quiet = machine.usage(snap(0, 0, 0, load1=0.4), snap(10, 1000, 995), cores=2, judge_start_load=True,
                          ticks_per_second=TICK)
    assert not quiet["busy"] and quiet["other_cores"] == pytest.approx(0.005)
    # The own tree may tick a little ahead of /proc/stat: never a negative share.
    ahead = machine.usage(snap(0, 0, 0), snap(10, 1000, 1003), cores=2, judge_start_load=False, ticks_per_second=TICK)
    assert ahead["other_cpu_seconds"] == 0.0 and not ahead["busy"]
    # 0.5 on 2 cores is the limit at the start; it is judged only when asked.
    loaded = snap(0, 0, 0, load1=0.6)
    assert machine.usage(loaded, snap(10, 1000, 1000), 2, True, TICK)["busy"]
    assert not machine.usage(loaded, snap(10, 1000, 1000), 2, False, TICK)["busy"]
    # A few ticks in a very short run are no evidence either way.
    assert not machine.usage(snap(0, 0, 0), snap(0.01, 3, 0), 2, False, TICK)["busy"]
    # Other processes above a tenth of a core, or steal alone, make it busy.
    assert machine.usage(snap(0, 0, 0), snap(10, 1000, 880), 2, False, TICK)["busy"]
    assert machine.usage(snap(0, 0, 0), snap(10, 1000, 1000, steal=150), 2, False, TICK)["busy"]


def test_recorder_warns_about_busy_runs_and_reports_quiet_ones_without_warning(tmp_path):
    fake = FakeProc(str(tmp_path))
    me = os.getpid()
    t = [0.0]
    state = {"busy": 0, "own": 0}

    def tick(busy, own, load=(0.0, 0.0, 0.0)):
        state["busy"] += busy
        state["own"] += own
        fake.sample(state["busy"], 0, load, {me: ("bench", 1, state["own"], 0)})

    tick(0, 0)
    rec = machine.LoadRecorder(proc=str(tmp_path), cores=2, clock=lambda: t[0])
    with rec.run("quiet system"):
        t[0] += 10
        tick(1000, 1000)
    with rec.run("busy system"):
        t[0] += 10
        tick(1500, 1000)  # others: 5 s in 10 s
    load = rec.finish()
    assert load["busy"] and load["busy_runs"] == ["busy system"]
    assert not load["runs"]["quiet system"][0]["busy"]
    assert load["runs"]["busy system"][0]["other_cores"] == pytest.approx(0.5)
    assert load["whole"]["other_cpu_seconds"] == 5.0 and load["whole"]["wall_seconds"] == 20.0
    (warning,) = machine.warning_lines(load)
    assert warning.startswith("WARNING") and "'busy system'" in warning and "quiet system" not in warning
    lines = machine.report_lines(load)
    assert "other processes used 5.0 CPU s in 20 s" in lines[0] and lines[1] == f"**{warning}**"

    tick(0, 0)
    quiet = machine.LoadRecorder(proc=str(tmp_path), cores=2, clock=lambda: t[0])
    with quiet.run("x"):
        t[0] += 5
        tick(500, 500)
    assert machine.warning_lines(quiet.finish()) == []


def test_real_proc_sample_counts_this_process():
    before = machine.snapshot()
    deadline = machine.time.process_time() + 0.3
    while machine.time.process_time() < deadline:
        pass
    u = machine.usage(before, machine.snapshot(), cores=machine.usable_cores(), judge_start_load=False)
    assert u["own_cpu_seconds"] >= 0.2
    assert u["busy_cpu_seconds"] + 0.05 >= u["own_cpu_seconds"] * 0.9


def test_scaling_knee_is_where_no_later_point_adds_the_gain():
    sys.path.insert(0, REPO)
    try:
        from benchmarks.scaling import knee
    finally:
        if REPO in sys.path:
            sys.path.remove(REPO)
    assert knee([(1, 1000), (2, 1900), (4, 2000), (8, 1950)], 0.10) == 2
    assert knee([(1, 1000), (2, 1050), (4, 1500)], 0.10) is None  # a dip, then growth again
    assert knee([(1, 1000), (2, 1020)], 0.10) == 1
    assert knee([(1, 1000)], 0.10) is None


def test_write_results_writes_each_file_only_where_a_path_is_given(tmp_path):
    import json

    from benchmarks.lab.machine import write_results
    write_results(str(tmp_path / "r.json"), {"a": [1, 2]}, None, "# report")
    assert json.loads((tmp_path / "r.json").read_text()) == {"a": [1, 2]}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    write_results(None, {"a": 1}, str(tmp_path / "r.md"), "# report\n\nline")
    assert (tmp_path / "r.md").read_text() == "# report\n\nline\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.md"]


REAPER = os.path.join(REPO, "benchmarks", "lab", "cluster", "reaper.py")
# Forks a child that burns CPU for `seconds` after its parent (the command) has exited,
# as Open MPI's `orted --daemonize` does: the child leaves the command's process tree.
DAEMONIZE = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    end = time.monotonic() + float(sys.argv[1])
    while time.monotonic() < end:
        pass
    os._exit(0)
sys.exit(int(sys.argv[2]))
"""


def _run_daemonizing(tmp_path, seconds, code, under_reaper):
    import subprocess
    script = tmp_path / "daemonize.py"
    script.write_text(DAEMONIZE)
    cmd = [sys.executable, str(script), str(seconds), str(code)]
    if under_reaper:
        cmd = [sys.executable, REAPER, "--", *cmd]
    before = machine.snapshot()
    proc = subprocess.run(cmd, timeout=60)
    return proc.returncode, (machine.snapshot().own_ticks - before.own_ticks) / machine.TICKS_PER_SECOND


def test_reaper_keeps_a_daemonized_process_in_the_tree_and_its_cpu_counted(tmp_path):
    """Without the reaper a daemon's CPU leaves the benchmark's tree (it was counted as other processes'
    on the emulated cluster); under it the daemon is waited for and its CPU counted as the tree's."""
    code, own = _run_daemonizing(tmp_path, 1.0, 3, under_reaper=True)
    assert code == 3  # the command's exit code, not the reaper's
    assert own >= 0.7, f"the daemon's 1 s of CPU was not counted as the tree's: {own:.2f} s"
    code, own = _run_daemonizing(tmp_path, 1.0, 0, under_reaper=False)
    assert code == 0 and own < 0.5, f"without the reaper the daemon should escape the count: {own:.2f} s"


def test_reaper_kills_an_adopted_process_after_the_grace_and_ends_as_its_command_did(tmp_path):
    import signal
    import subprocess
    import time
    script = tmp_path / "daemonize.py"
    script.write_text(DAEMONIZE)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, REAPER, "--grace", "0.5", "--", sys.executable, str(script), "60", "0"],
                          timeout=30)
    assert proc.returncode == 0 and time.monotonic() - start < 15  # the 60 s daemon was killed after 0.5 s
    proc = subprocess.run([sys.executable, REAPER, "--", "sh", "-c", "kill -TERM $$"], timeout=30)
    assert proc.returncode == -signal.SIGTERM
