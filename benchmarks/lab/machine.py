"""What the machine was doing while a benchmark ran, so that a number says how far it can be trusted.

Every benchmark in this folder records, for the whole run and for each
system it measures:

  load_before / load_after   the 1-, 5- and 15-minute load averages (/proc/loadavg)
  own_cpu_seconds            CPU time of the benchmark's own process tree (itself,
                             its subprocesses, DataLoader workers, mpirun ranks)
  other_cpu_seconds          CPU time of everything else on the machine: the busy
                             time of all CPUs (/proc/stat) minus the benchmark's own
  steal_seconds              time the hypervisor gave this machine's CPUs to others
  other_cores                (other + steal) / wall time: how many cores the rest of
                             the world took, on average

and calls the machine **busy** when other processes took more than
``BUSY_OTHER_CORES`` of one core during a run, or when the 1-minute load
average was above ``BUSY_LOAD_PER_CORE`` per core when the benchmark started
(0.5 on a 2-core machine). A busy run prints a warning and puts a WARNING line
into the generated Markdown: its numbers are provisional and ratios between
systems run at different moments may be off.

Only the load at the very start is judged: later in a run the load average
mostly reflects the benchmark's own earlier systems.

All arithmetic works on text read from a ``proc`` root (default ``/proc``), so
the tests feed it synthetic samples.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import os
import platform
import time
from collections.abc import Iterator

# A run is busy when other processes (and the hypervisor's steal) took more
# than this share of one core on average ...
BUSY_OTHER_CORES = 0.10
# ... or when the 1-minute load average per core was above this at the start.
BUSY_LOAD_PER_CORE = 0.25
# /proc counts in ticks (10 ms): below this many seconds of other processes' CPU a
# run is too short to judge by their share.
MIN_OTHER_SECONDS = 0.05

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """One sample of the machine: times in clock ticks (/proc's unit)."""

    wall: float                  # seconds, monotonic
    busy_ticks: int              # all CPUs: user + nice + system + irq + softirq
    steal_ticks: int             # all CPUs: time the hypervisor ran something else
    own_ticks: int               # the process tree's user + system time, reaped children included
    loadavg: tuple[float, float, float]


def parse_proc_stat(text: str) -> tuple[int, int]:
    """(busy, steal) ticks of all CPUs from /proc/stat's first ``cpu`` line.

    Columns: user nice system idle iowait irq softirq steal guest guest_nice;
    guest time is already part of user (and guest_nice of nice), so it is not
    added again. Idle and iowait are not busy.
    """
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            values = [int(v) for v in fields[1:]] + [0] * 10
            user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
            return user + nice + system + irq + softirq, steal
    raise ValueError("no 'cpu' line in /proc/stat")


def parse_pid_stat(text: str) -> tuple[int, int]:
    """(parent pid, ticks) of one /proc/<pid>/stat: utime + stime + cutime + cstime.

    The command name (field 2) is in parentheses and may itself hold spaces
    and parentheses, so the fields are counted from its last ')'.
    """
    rest = text[text.rindex(")") + 2:].split()
    # rest[0] is field 3 (state); utime..cstime are fields 14..17.
    ppid = int(rest[1])
    utime, stime, cutime, cstime = (int(v) for v in rest[11:15])
    return ppid, utime + stime + cutime + cstime


def parse_loadavg(text: str) -> tuple[float, float, float]:
    one, five, fifteen = (float(v) for v in text.split()[:3])
    return one, five, fifteen


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:  # a process that ended meanwhile
        return None


def tree_ticks(pid: int, proc: str = "/proc") -> int:
    """CPU ticks of ``pid`` and all its live descendants (with what each has reaped).

    A child that ended and was reaped is in its parent's cutime/cstime, so the
    difference of two samples counts it exactly once.
    """
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        text = _read(os.path.join(proc, name, "stat"))
        if text is None:
            continue
        try:
            parent[int(name)], ticks[int(name)] = parse_pid_stat(text)
        except (ValueError, IndexError):
            continue
    children: dict[int, list[int]] = {}
    for p, pp in parent.items():
        children.setdefault(pp, []).append(p)
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += ticks.get(p, 0)
        todo += children.get(p, [])
    return total


def snapshot(pid: int | None = None, proc: str = "/proc", clock=time.monotonic) -> Snapshot:
    """Samples the machine and the process tree rooted at ``pid`` (default: this process)."""
    busy, steal = parse_proc_stat(_read(os.path.join(proc, "stat")) or "")
    load = parse_loadavg(_read(os.path.join(proc, "loadavg")) or "0 0 0")
    own = tree_ticks(os.getpid() if pid is None else pid, proc)
    return Snapshot(clock(), busy, steal, own, load)


def usage(before: Snapshot, after: Snapshot, cores: int, judge_start_load: bool,
          ticks_per_second: float = TICKS_PER_SECOND) -> dict:
    """What happened between two snapshots, and whether the machine was busy.

    ``judge_start_load``: also call it busy when ``before``'s 1-minute load
    average was above BUSY_LOAD_PER_CORE per core (only meaningful before the
    benchmark has loaded the machine itself).
    """
    wall = max(after.wall - before.wall, 1e-9)
    busy = (after.busy_ticks - before.busy_ticks) / ticks_per_second
    own = (after.own_ticks - before.own_ticks) / ticks_per_second
    steal = (after.steal_ticks - before.steal_ticks) / ticks_per_second
    # Both counters tick independently, so a quiet machine can show a few
    # ticks more for the tree than for all CPUs: never below zero.
    other = max(busy - own, 0.0)
    other_cores = (other + steal) / wall
    reasons = []
    if other_cores > BUSY_OTHER_CORES and other + steal > MIN_OTHER_SECONDS:
        reasons.append(f"other processes used {other_cores:.2f} cores on average (more than {BUSY_OTHER_CORES:g})")
    if judge_start_load and before.loadavg[0] > BUSY_LOAD_PER_CORE * cores:
        reasons.append(f"the 1-minute load average was {before.loadavg[0]:.2f} at the start "
                       f"(more than {BUSY_LOAD_PER_CORE * cores:g} on {cores} cores)")
    return {"wall_seconds": round(wall, 3), "cores": cores,
            "load_before": list(before.loadavg), "load_after": list(after.loadavg),
            "busy_cpu_seconds": round(busy, 2), "own_cpu_seconds": round(own, 2),
            "other_cpu_seconds": round(other, 2), "steal_seconds": round(steal, 2),
            "other_cores": round(other_cores, 3), "busy": bool(reasons), "reasons": reasons}


def usable_cores() -> int:
    """CPUs this process may run on (its affinity mask)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class LoadRecorder:
    """Records the machine's load over a whole benchmark and over each run in it.

        rec = LoadRecorder()               # first thing: the load at the start
        with rec.run("hdmlp"):             # one measured run (e.g. a subprocess)
            ...
        load = rec.finish()                # a dict for the JSON; warning_lines(load)
    """

    def __init__(self, proc: str = "/proc", cores: int | None = None, clock=time.monotonic) -> None:
        self.proc, self.clock = proc, clock
        self.cores = cores or usable_cores()
        self.start = snapshot(proc=proc, clock=clock)
        self.runs: dict[str, list[dict]] = {}

    @contextlib.contextmanager
    def run(self, name: str) -> Iterator[None]:
        before = snapshot(proc=self.proc, clock=self.clock)
        try:
            yield
        finally:
            self.runs.setdefault(name, []).append(
                usage(before, snapshot(proc=self.proc, clock=self.clock), self.cores, judge_start_load=False))

    def last(self, name: str) -> dict:
        return self.runs[name][-1]

    def finish(self) -> dict:
        whole = usage(self.start, snapshot(proc=self.proc, clock=self.clock), self.cores, judge_start_load=True)
        busy_runs = sorted(name for name, rs in self.runs.items() if any(r["busy"] for r in rs))
        return {"whole": whole, "runs": self.runs, "busy_runs": busy_runs,
                "busy": whole["busy"] or bool(busy_runs),
                "thresholds": {"other_cores": BUSY_OTHER_CORES, "load_per_core_at_start": BUSY_LOAD_PER_CORE}}


def summary_line(load: dict) -> str:
    """One line for a report: the load averages and the others' CPU over the whole benchmark."""
    w = load["whole"]
    fmt = lambda xs: "/".join(f"{x:.2f}" for x in xs)  # noqa: E731
    return (f"Load average (1/5/15 min) {fmt(w['load_before'])} at the start, {fmt(w['load_after'])} at the end; "
            f"other processes used {w['other_cpu_seconds']:.1f} CPU s in {w['wall_seconds']:.0f} s "
            f"({w['other_cores']:.2f} cores; steal {w['steal_seconds']:.1f} s), this benchmark "
            f"{w['own_cpu_seconds']:.1f} CPU s.")


def warning_lines(load: dict) -> list[str]:
    """Empty on a quiet machine; else why the numbers are provisional."""
    if not load.get("busy"):
        return []
    reasons = list(load["whole"]["reasons"])
    for name in load["busy_runs"]:
        worst = max(load["runs"][name], key=lambda r: r["other_cores"])
        reasons.append(f"during '{name}' other processes used {worst['other_cores']:.2f} cores")
    return ["WARNING: the machine was busy during this benchmark (" + "; ".join(reasons) +
            "): these numbers are provisional; re-run on a quiet machine before quoting them."]


def report_lines(load: dict) -> list[str]:
    """The summary line, then the warning if any: what every generated report carries."""
    return [summary_line(load)] + [f"**{w}**" for w in warning_lines(load)]


def print_warnings(load: dict, log=print) -> None:
    for line in warning_lines(load):
        bar = "!" * min(len(line), 100)
        log(f"\n{bar}\n{line}\n{bar}")


def write_results(json_path: str | None, result: dict, markdown_path: str | None, markdown: str,
                  indent: int = 2) -> None:
    """A benchmark's results as JSON and its report as Markdown, each where a path is given."""
    if json_path:
        with open(json_path, "w") as f:
            json.dump(result, f, indent=indent)
    if markdown_path:
        with open(markdown_path, "w") as f:
            f.write(markdown + "\n")


def publish(result: dict, text: str, json_path: str | None, markdown_path: str | None, title: str, script: str,
            load: dict | None = None, note: str = "") -> None:
    """A scenario's epilogue: its report on stdout, the busy machine's warning (with ``load``), the JSON,
    and the Markdown under ``title`` and the name of the ``script`` that generates it."""
    print("\n" + text)
    if load is not None:
        print_warnings(load)
    write_results(json_path, result, markdown_path,
                  f"# {title}\n\nGenerated by `{script}`; do not edit.{note}\n\n{text}", indent=1)


# -- facts about the machine ----------------------------------------------------------

def _first(path: str, key: str) -> str:
    text = _read(path) or ""
    for line in text.splitlines():
        if line.startswith(key):
            return line.split(":", 1)[1].strip()
    return ""


def cgroup_cpu_quota() -> float | None:
    """CPUs this process's cgroup may use (cgroup v2 cpu.max or v1 CFS quota), None if unlimited.

    hdmlp's own reading (``hdmlp._core.cpu_budget``) is used when available;
    this is the same rule, for benchmarks that run without hdmlp.
    """
    try:
        from hdmlp import _core
        return _core.cpu_budget().get("quota_cpus") or None
    except (ImportError, AttributeError):
        return None


def memory_bandwidth_gb_s(threads: int, megabytes_per_thread: int = 128) -> float | None:
    """Aggregate memcpy bandwidth with ``threads`` threads (hdmlp's own probe, as ``hdmlp simulate`` uses)."""
    try:
        from hdmlp import _core
    except ImportError:
        return None
    return round(_core.measure_memory_bandwidth(threads, megabytes_per_thread * 10**6) / 1000, 1)


def machine_facts(bandwidth: bool = False) -> dict:
    """Cores (online and usable), the cgroup CPU quota, memory, CPU model, caches, kernel, date."""
    facts = {
        "cores_online": os.cpu_count(),
        "cores_usable": usable_cores(),
        "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cgroup_cpu_quota": cgroup_cpu_quota(),
        "cpu": _first("/proc/cpuinfo", "model name"),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "host": platform.node(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    l3 = _read("/sys/devices/system/cpu/cpu0/cache/index3/size")
    if l3:
        facts["l3_cache"] = l3.strip()
    if bandwidth:  # a cheap estimate: memcpy of 128 MB per thread
        facts["memcpy_gb_s"] = {n: memory_bandwidth_gb_s(n) for n in sorted({1, facts["cores_usable"]})}
    return facts


def describe_facts(f: dict) -> str:
    quota = f", cgroup quota {f['cgroup_cpu_quota']:g} CPUs" if f.get("cgroup_cpu_quota") else ""
    bw = ", memcpy " + ", ".join(f"{v} GB/s on {n} thread(s)" for n, v in f["memcpy_gb_s"].items()) \
        if f.get("memcpy_gb_s") else ""
    return (f"{f['cores_usable']} usable of {f['cores_online']} cores ({f['cpu']}){quota}, {f['memory_gib']} GiB"
            f"{', L3 ' + f['l3_cache'] if f.get('l3_cache') else ''}{bw}, Linux {f['kernel']}; {f['date']}")
