"""metrics()["startup"]: where the construction of a Job went, phase by phase (issue 22, goal 4)."""
import os
import time

import hdmlp

from conftest import age_tree

PHASES = ["communicator", "config", "scan", "startup_check", "access_plan", "batch_memory", "cache_classes",
          "placement_plan", "cache_slots", "placement_exchange", "peer_transport", "cache_start", "staging"]


def _many_small_files(root, classes=4, per_class=500):
    for c in range(classes):
        os.makedirs(root / f"c{c}")
        for i in range(per_class):
            (root / f"c{c}" / f"{i:04d}.jpg").write_bytes(b"x")
    age_tree(root)  # settled folders: the index cache keeps the scan


def _timed_job(root):
    before = time.time()
    t0 = time.perf_counter()
    job = hdmlp.Job(root, 8, 1, index_cache=True)
    wall = time.perf_counter() - t0
    return job, wall, before


def test_startup_phases_add_up_within_the_construction_and_the_scan_is_cheap_from_the_index_cache(tmp_path):
    root = tmp_path / "data"
    _many_small_files(root)
    runs = []
    for _ in range(2):
        job, wall, before = _timed_job(root)
        with job:
            runs.append((job.index_from_cache, job.metrics()["startup"], wall, before))
    assert [from_cache for from_cache, *_ in runs] == [False, True]
    for _, startup, wall, before in runs:
        phases = startup["phases"]
        assert list(phases) == PHASES
        for name, p in phases.items():
            assert p["wall_seconds"] >= 0 and p["cpu_seconds"] >= 0 and p["process_cpu_seconds"] >= 0, name
            # One thread cannot spend more CPU than the wall time (clock granularity aside).
            assert p["cpu_seconds"] <= p["wall_seconds"] + 1e-3, (name, p)
        assert startup["wall_seconds"] == sum(p["wall_seconds"] for p in phases.values())
        assert startup["cpu_seconds"] == sum(p["cpu_seconds"] for p in phases.values())
        # The phases are inside hdmlp.Job(...), which also runs Python before and after them.
        assert 0 < startup["wall_seconds"] <= wall
        assert before <= startup["started_at"] <= before + wall
    first, cached = runs[0][1]["phases"]["scan"], runs[1][1]["phases"]["scan"]
    # The first scan lists and stats 2000 files (on parallel threads: the process's CPU counts them);
    # from the index cache it reads one file and stats 5 folders.
    assert first["process_cpu_seconds"] > 0
    assert cached["process_cpu_seconds"] < first["process_cpu_seconds"] / 3, (first, cached)
