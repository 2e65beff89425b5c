"""The benchmark harness (python -m benchmarks) on a tiny dataset, and the emulated PFS.

The harness test runs the real command on a local store and checks the JSON,
not the speed: every system present, every epoch delivering every sample,
and numbers within physical bounds. The PFS tests need root, network
namespaces, tc and sshfs; they are skipped with the reason otherwise.
"""
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

import hdmlp
from hdmlp.datasets import make_image_folder

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
try:
    from benchmarks.lab import pfs
finally:
    sys.path.remove(REPO)

# Both kinds, with and without DataLoader worker processes (each system costs a process start).
SYSTEMS = ["hdmlp-raw", "hdmlp-transforms", "torch-raw-w0", "torch-transforms-w1"]


def _has_transforms(root) -> bool:
    import hdmlp.transforms as T
    try:
        hdmlp.Job(root, 4, 1, transforms=[T.ImgDecode(), T.Resize((8, 8)), T.ToTensor()]).close()
        return True
    except (ValueError, TypeError):
        return False


def test_harness_reports_every_system_with_sane_numbers(tmp_path):
    data = tmp_path / "data"
    make_image_folder(data, num_images=24, num_classes=3, seed=1)
    files = [os.path.join(d, f) for d, _, fs in os.walk(data) for f in fs if not f.startswith(".")]
    total = sum(os.path.getsize(f) for f in files)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "benchmarks", "warm", "--data", str(data), "--images", "24", "--classes", "3",
           "--epochs", "2", "--batch-size", "8", "--step-ms", "1", "--image-size", "64",
           "--systems", ",".join(SYSTEMS), "--out", str(out), "--no-readme"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "vs best DataLoader" in proc.stdout  # the terminal table
    result = json.loads((out / "warm.json").read_text())
    assert (out / "warm.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| hdmlp, raw bytes |" in (out / "warm.md").read_text()
    assert list(result["systems"]) == SYSTEMS
    assert result["dataset"]["images"] == 24 and result["dataset"]["bytes"] == total
    with_transforms = _has_transforms(data)
    for name, r in result["systems"].items():
        if name == "hdmlp-transforms" and not with_transforms:
            assert r["status"] == "error" and r["error"]  # reported, and the other systems still run
            continue
        assert r["status"] == "ok", (name, r.get("error"))
        assert [e["samples"] for e in r["epochs"]] == [24, 24], name
        for e in r["epochs"]:
            assert 0 < e["img_per_s"] < 1e6 and 0 <= e["stall_share"] <= 1
            assert sum(e["sources"].values()) == 24, (name, e["sources"])
        assert 0 <= r["stall_share"] <= 1
        epochs_only = 48 / sum(e["samples"] / e["img_per_s"] for e in r["epochs"])
        assert 0 < r["job_img_per_s"] <= epochs_only * 1.0001  # start-up counts in the job's rate
        assert 0 < r["cpu_seconds"] < 120
        assert 20 * 2**20 < r["peak_rss_bytes"] < 8 * 2**30 and 0 < r["peak_pss_bytes"] <= r["peak_rss_bytes"]
        if name.startswith("torch"):
            assert r["store_bytes"] == 2 * total, name  # every epoch reads every file once
        else:
            assert total <= r["store_bytes"] <= 2 * total, name  # the RAM class holds the dataset
        assert r["vs_best_dataloader"] > 0
    best_raw = max((r for n, r in result["systems"].items() if n.startswith("torch-raw")),
                   key=lambda r: r["job_img_per_s"])
    assert best_raw["vs_best_dataloader"] == pytest.approx(1.0)
    # The worker process's memory is counted with its parent's.
    assert result["systems"]["torch-transforms-w1"]["peak_rss_bytes"] > \
        1.3 * result["systems"]["torch-raw-w0"]["peak_rss_bytes"]
    # The machine's load is recorded for the run and for each system; each system's own CPU
    # time (its process tree, DataLoader workers included) is what the runner measured, or more.
    load = result["load"]
    assert set(load["runs"]) == set(SYSTEMS) and len(load["whole"]["load_before"]) == 3
    for name, r in result["systems"].items():
        if r["status"] == "ok":
            assert r["load"]["own_cpu_seconds"] >= r["cpu_seconds"] * 0.8 - 0.05, (name, r["load"], r["cpu_seconds"])
    assert ("WARNING" in proc.stdout) == load["busy"]
    assert "Load average (1/5/15 min)" in (out / "warm.md").read_text()


def test_python_transform_systems_are_compared_with_the_dataloader_of_as_many_workers():
    """The python-* scenarios' ratios (the systems themselves run in `python -m benchmarks python-warm`)."""
    sys.path.insert(0, REPO)
    try:
        from benchmarks import harness
    finally:
        sys.path.remove(REPO)
    assert harness.SCENARIOS["python-warm"].systems == ("hdmlp-python-w1", "torch-transforms-w1", "hdmlp-python-w2",
                                                        "torch-transforms-w2")

    def ok(rates):
        return {"status": "ok", "kind": "transforms", "job_img_per_s": rates[-1],
                "epochs": [{"img_per_s": r} for r in rates[:-1]]}
    systems = {"hdmlp-python-w1": ok([60, 80, 70]), "torch-transforms-w1": ok([50, 40, 40]),
               "hdmlp-python-w2": ok([90, 120, 100]), "torch-transforms-w2": ok([90, 80, 80])}
    harness.add_ratios(systems)
    assert systems["hdmlp-python-w1"]["vs_same_workers"] == pytest.approx(70 / 40)
    assert systems["hdmlp-python-w1"]["epochs_vs_same_workers"] == pytest.approx([60 / 50, 80 / 40])
    assert systems["hdmlp-python-w2"]["vs_same_workers"] == pytest.approx(100 / 80)
    assert systems["hdmlp-python-w2"]["vs_best_dataloader"] == pytest.approx(100 / 80)
    assert harness.label("hdmlp-python-w2") == "hdmlp w=2, Python transform"


# -- the emulated PFS -------------------------------------------------------------

def _pfs_skip_reason():
    try:
        return pfs.unavailable_reason(install=False, log=lambda *_: None)
    except Exception as e:  # e.g. ip missing entirely
        return f"cannot probe: {e}"


PFS_REASON = _pfs_skip_reason()
needs_pfs = pytest.mark.skipif(PFS_REASON is not None,
                               reason=f"emulated PFS unavailable ({PFS_REASON}); "
                                      f"`python -m benchmarks pfs-ram` installs its packages")


def _torn_down(netns, mount, workdir):
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    return netns not in listed and mount not in pfs._fuse_mounts() and not os.path.exists(workdir)


@pytest.fixture
def export(tmp_path):
    root = tmp_path / "export"
    (root / "a").mkdir(parents=True)
    rng = __import__("random").Random(3)
    digests = {}
    for i in range(16):
        data = rng.randbytes(150_000 + i)
        (root / "a" / f"f{i}.bin").write_bytes(data)
        digests[f"a/f{i}.bin"] = hashlib.sha256(data).hexdigest()
    return root, digests


@needs_pfs
def test_pfs_serves_exact_bytes_slower_than_local_and_is_torn_down(export):
    root, digests = export
    total = 16 * 150_000
    with pfs.EmulatedPFS(str(root), rate_mbit=40, delay_ms=2, log=lambda *_: None) as p:
        netns, mount, workdir = p.netns, p.path, p.workdir
        assert mount in pfs._fuse_mounts() and netns in subprocess.run(
            ["ip", "netns", "list"], capture_output=True, text=True).stdout
        wire0 = p.wire_bytes()
        t = time.perf_counter()
        for rel, digest in digests.items():
            with open(os.path.join(mount, rel), "rb") as f:
                assert hashlib.sha256(f.read()).hexdigest() == digest, rel
        remote_s = time.perf_counter() - t
        assert p.wire_bytes() - wire0 >= total  # every byte crossed the shaped link
        t = time.perf_counter()
        for rel in digests:
            with open(os.path.join(root, rel), "rb") as f:
                f.read()
        local_s = time.perf_counter() - t
        # 40 Mbit/s is 5 MB/s: 2.4 MB need at least ~0.45 s; local reads take milliseconds.
        assert remote_s > 0.4 and remote_s > 20 * local_s, (remote_s, local_s)
        with pytest.raises(OSError):
            open(os.path.join(mount, "a", "new.bin"), "wb")
    assert _torn_down(netns, mount, workdir)
    assert os.path.exists(root / "a" / "f0.bin")  # the export itself is untouched


@needs_pfs
def test_pfs_is_torn_down_on_ctrl_c(export):
    root, _ = export
    script = ("import sys, time; sys.path.insert(0, sys.argv[1]); from benchmarks.lab import pfs, service\n"
              "service.install_signal_handlers()\n"
              "with pfs.EmulatedPFS(sys.argv[2], log=lambda *_: None) as p:\n"
              "    print(p.netns, p.path, p.workdir, flush=True)\n"
              "    time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", script, REPO, str(root)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        netns, mount, workdir = line.split()
        assert mount in pfs._fuse_mounts()
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert re.fullmatch(r"hdmlp-pfs-\d+", netns)
    assert _torn_down(netns, mount, workdir)


def test_mlperf_storage_splits_a_steps_time_beyond_its_computation():
    """DLIO's per-rank output (load and proc per step, its throughput) gives, over the steps its AU counts,
    the loader's wait, the sleep's overshoot and the barrier; an epoch without them is None."""
    from benchmarks import mlperf_storage
    batch, compute = 7, 1.0
    load, proc = [0.4, 0.02, 0.04], [1.5, 1.05, 1.07]
    wall = sum(proc) + 0.2  # 0.1 s of barrier after each of the two counted steps (and the first's own)
    rank = {"1": {"load": {"block1": load}, "proc": {"block1": proc}, "compute": {"block1": [compute] * 3},
                  "throughput": {"block1": 3 * batch / wall}}}
    fast = json.loads(json.dumps(rank))
    fast["1"]["load"]["block1"] = [0.4, 0.0, 0.0]
    epochs = mlperf_storage.step_times([rank, fast], 2, batch)
    assert epochs[1] is None
    assert epochs[0]["load"] == pytest.approx((0.03 + 0.0) / 2)
    assert epochs[0]["overshoot"] == pytest.approx((0.03 + 0.06) / 2)
    assert epochs[0]["wait"] == pytest.approx(0.1)


def test_mlperf_storage_report_shows_why_a_run_failed():
    """A run that failed (no AU) shows the end of its ranks' output in the report, not only empty cells."""
    from benchmarks import mlperf_storage
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "results",
                           "mlperf_storage-resnet50-aggregate.json")) as f:
        result = json.load(f)
    fine = dict(result, runs=[dict(r, error=None) for r in result["runs"]])
    assert "The run failed" not in mlperf_storage.markdown(fine)
    last_words = "hdmlp: rank 3 on node4: Open MPI has not returned from a probe for 241 s"
    failed = dict(fine, runs=[dict(fine["runs"][0], error="earlier output\n" + last_words + "\n"), *fine["runs"][1:]])
    text = mlperf_storage.markdown(failed)
    assert "The run failed; the end of its output:" in text
    assert text.index(last_words) > text.index("The run failed")
