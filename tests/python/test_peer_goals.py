"""benchmarks/peer_goals.py's goals from bench-peers' results, and benchmarks/cpu_gap.py's rows from its worker."""
import json
import os
import subprocess
import sys

import pytest

from hdmlp.datasets import make_image_folder

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
try:
    from benchmarks import cpu_gap, peer_goals
finally:
    sys.path.remove(REPO)


def run(name, rnd, steady, cpu, epoch1=None):
    result = {"steady_img_s": steady, "cpu_s_per_1k": cpu, "epoch1_img_s": epoch1}
    if name == "ceiling_cc":
        result = {"img_s": steady, "cpu_s_per_1k": cpu}
    return {"name": name, "round": rnd, "rc": 0, "result": result, "loadavg_before": [0.1, 0, 0],
            "foreign_cpu_s": 0.2}


def test_goals_per_round_then_median():
    runs = []
    for rnd, (h, c) in enumerate([(1900, 2000), (1800, 2000), (2000, 2000)], 1):
        runs += [run("hdmlp", rnd, h, 1.05, epoch1=0.96 * h), run("ceiling_cc", rnd, c, 1.0),
                 run("hdmlp-base", rnd, 1600, 1.27), run("tv_w2", rnd, 500, 3.9), run("ffcv_numbanorm", rnd, 1000, 2.8),
                 run("val", rnd, 1500, 1.2), run("val-base", rnd, 1540, 1.19)]
    s = peer_goals.summarise(runs)
    r = s["ratios"]
    assert r["steady"]["median"] == pytest.approx(0.95) and r["steady"]["min"] == pytest.approx(0.9)
    assert r["cpu"]["median"] == pytest.approx(1.05) and peer_goals.verdict("cpu", 1.05) == "met"
    assert r["epoch1"]["median"] == pytest.approx(0.96)
    assert r["peers"]["median"] == pytest.approx(1.9)  # against the best peer, FFCV
    assert r["train: rate new/base"]["median"] == pytest.approx(1900 / 1600)
    assert r["val: rate new/base"]["median"] == pytest.approx(1500 / 1540)
    assert peer_goals.verdict("val: rate new/base", 1500 / 1540) == "NOT met"   # 0.974 < 0.98
    assert peer_goals.verdict("val: cpu new/base", 1.2 / 1.19) == "met"         # 1.008 <= 1.02
    assert peer_goals.verdict("steady", 0.91) == "NOT met" and peer_goals.verdict("cpu", 1.11) == "NOT met"
    assert s["table"]["ceiling_cc"]["steady_img_s"] == 2000 and s["table"]["hdmlp"]["runs"] == 3


def test_cpu_gap_worker_and_rows(tmp_path):
    root = tmp_path / "data"
    make_image_folder(root, num_images=40, num_classes=2, seed=1, min_side=240, max_side=300)
    out = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "cpu_gap.py"), "--worker", "--data",
                          str(root), "--epochs", "2", "--bs", "8"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    gap = json.loads(next(line for line in out.stdout.splitlines() if line.startswith("GAP "))[4:])
    assert gap["images"] == 80 and len(gap["marks"]) == 5 and len(gap["usage"]) == 5
    assert gap["marks"] == sorted(gap["marks"]) and len(gap["transform_cpu_s"]) == 2
    assert gap["omp_wait_policy"] == os.environ.get("OMP_WAIT_POLICY", "PASSIVE")
    rows = cpu_gap.per_1k({"gap": gap, "parts": {
        "epoch 1": {"workers": 0.5, "workers: kernel": 0.05, "consumer: torch's x.sum() over the batch "
                    "(memory bandwidth)": 0.01},
        "epoch 2": {"workers": 0.4, "workers: kernel": 0.01}}})
    chain = sum(gap["transform_cpu_s"])
    assert rows["workers: the chain (decode + augment, the job's thread clocks)"] == pytest.approx(chain / 0.08)
    assert rows["workers: first touch of new batch memory (epoch 1's extra kernel time)"] == pytest.approx(0.5)
    assert rows["perf samples in all (should be close to the total)"] == pytest.approx(0.91 / 0.08)
    assert rows["total (getrusage, construction to teardown)"] > 0 and rows["page faults per image"] > 0
    assert cpu_gap.part_of("main", "libgomp.so.1", "") .startswith("consumer: OpenMP threads waiting")
    assert cpu_gap.part_of("fill", "[kernel.kallsyms]", "exc_page_fault").startswith("RAM class fill")
