"""DLIO (the dlio-benchmark package) in its own venv, as ``scripts/dev.sh dlio-setup`` makes it, and
what running it with hdmlp needs: the venv's path, an environment that puts this checkout's built
hdmlp on DLIO's ``sys.path``, and DLIO's own report ([METRIC] lines, per-epoch AU and times) parsed.

DLIO's dependencies (TensorFlow, its own torch) stay out of hdmlp's .venv; hdmlp is not installed in
DLIO's venv either: a folder holding only a link to the ``hdmlp`` package that this interpreter imports
goes on PYTHONPATH, so the DLIO runs use exactly the hdmlp under test (same CPython, 3.11).
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQUIREMENTS = os.path.join(REPO, "scripts", "dlio-requirements.txt")
SETUP_HINT = ("make it with `scripts/dev.sh dlio-setup` (`pip install dlio-benchmark` 2.0.0 fails: it declares "
              "nvidia-dali-cuda110, which only NVIDIA's own index serves; dlio-setup installs it --no-deps with "
              "scripts/dlio-requirements.txt)")


def venv_path() -> str:
    """Where ``scripts/dev.sh dlio-setup`` puts DLIO's venv (keyed by its requirements)."""
    if os.environ.get("HDMLP_DLIO_VENV"):
        return os.environ["HDMLP_DLIO_VENV"]
    with open(REQUIREMENTS, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "hdmlp", "dlio", digest)


def unavailable_reason() -> str | None:
    """None when DLIO's venv is there and complete, else why not (with how to make it)."""
    venv = venv_path()
    if not os.path.isfile(os.path.join(venv, ".hdmlp-dlio")):
        return f"DLIO's venv ({venv}) is not there: {SETUP_HINT}"
    if not os.access(os.path.join(venv, "bin", "dlio_benchmark"), os.X_OK):
        return f"DLIO's venv ({venv}) has no bin/dlio_benchmark: remove it and {SETUP_HINT}"
    return None


def hdmlp_path_dir(work: str) -> str:
    """A folder under ``work`` holding a link to this interpreter's hdmlp package, for PYTHONPATH."""
    import hdmlp

    folder = os.path.join(work, "hdmlp-on-path")
    os.makedirs(folder, exist_ok=True)
    link = os.path.join(folder, "hdmlp")
    target = os.path.dirname(os.path.abspath(hdmlp.__file__))
    if os.path.islink(link) and os.readlink(link) != target:
        os.remove(link)
    if not os.path.lexists(link):
        os.symlink(target, link)
    return folder


def environment(work: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """Variables for a DLIO run with hdmlp importable: DLIO's venv first on PATH (its tfrecord2idx too)."""
    venv = venv_path()
    env = dict(os.environ if base is None else base)
    env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = hdmlp_path_dir(work)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env.setdefault("HYDRA_FULL_ERROR", "1")
    env.pop("VIRTUAL_ENV", None)
    return env


def dlio_command() -> list[str]:
    return [os.path.join(venv_path(), "bin", "dlio_benchmark")]


def python() -> str:
    return os.path.join(venv_path(), "bin", "python")


LOADER_OVERRIDES = ["++workload.reader.data_loader_classname=hdmlp.dlio.HDMLPDataLoader",
                    "++workload.reader.data_loader_sampler=index"]

_METRIC = re.compile(r"^\[METRIC\].*$", re.M)
_EPOCH_AU = re.compile(r"Epoch (\d+) - Block \d+ \[Training\] Accelerator Utilization \[AU\] \(%\): ([\d.]+)")
_EPOCH_TPUT = re.compile(r"Epoch (\d+) - Block \d+ \[Training\] Throughput \(samples/second\): ([\d.]+)")
_EPOCH_END = re.compile(r"Ending epoch (\d+) - (\d+) steps completed in ([\d.]+) s")


def parse_report(text: str) -> dict:
    """DLIO's own summary from its log: the [METRIC] lines as printed, their numbers, and per epoch
    (rank 0's view) the AU, throughput, steps and seconds."""
    lines = [m.group(0).rstrip() for m in _METRIC.finditer(text)]
    out: dict = {"metric_lines": lines, "epochs": {}}

    def number(label: str) -> tuple[float, float] | None:
        for line in lines:
            if label in line:
                m = re.search(r":\s*([-\d.]+)\s*\(([-\d.]+)\)", line)
                if m:
                    return float(m.group(1)), float(m.group(2))
        return None

    for key, label in (("au_percent", "Training Accelerator Utilization"),
                       ("throughput_samples_per_s", "Training Throughput (samples/second)"),
                       ("io_mb_per_s", "Training I/O Throughput")):
        value = number(label)
        if value is not None:
            out[key], out[key + "_stdev"] = value
    for line in lines:
        m = re.search(r"Number of Simulated Accelerators: (\d+)", line)
        if m:
            out["accelerators"] = int(m.group(1))
        m = re.search(r"train_au_meet_expectation: (\w+)", line)
        if m:
            out["au_meets_expectation"] = m.group(1)
    for m in _EPOCH_AU.finditer(text):
        out["epochs"].setdefault(int(m.group(1)), {})["au_percent"] = float(m.group(2))
    for m in _EPOCH_TPUT.finditer(text):
        out["epochs"].setdefault(int(m.group(1)), {})["throughput_samples_per_s"] = float(m.group(2))
    for m in _EPOCH_END.finditer(text):
        e = out["epochs"].setdefault(int(m.group(1)), {})
        e["steps"], e["seconds"] = int(m.group(2)), float(m.group(3))
    out["epochs"] = [dict(epoch=k, **v) for k, v in sorted(out["epochs"].items())]
    return out


def mpirun() -> str | None:
    return shutil.which("mpirun")
