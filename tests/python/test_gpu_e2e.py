"""benchmarks/gpu_e2e.py --smoke: the GPU benchmark's whole path (every row, the JSON and its Markdown) on tiny
settings, on whatever device this machine has. It checks the results' structure and bounds, not speed."""
import json
import os
import subprocess
import sys

import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_smoke_run_writes_every_row_and_records_the_machine(tmp_path):
    out = tmp_path / "gpu_e2e.json"
    # From tmp_path: the checkout's hdmlp/ must not shadow the installed package.
    done = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "gpu_e2e.py"), "--smoke", "--json",
                           str(out)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    assert result["smoke"] is True
    gpu = torch.cuda.is_available()
    assert result["gpu_machine"] is gpu and result["device"].startswith("cuda" if gpu else "cpu")
    if not gpu:
        assert result["status"].startswith("no GPU machine was available for this session")
        assert result["machine"]["gpu"] is None
    for key in ("cores_usable", "cpu", "memory_gib", "torch", "python", "hdmlp", "date"):
        assert result["machine"][key], key
    rows = result["rows"]
    n, epochs = result["settings"]["images"], result["settings"]["epochs"]
    resident = {r["model"] for r in rows if r["row"] == "gpu_resident"}
    assert resident == {"resnet50", "resnet18", "vit_b_16"}
    supply = [r["system"] for r in rows if r["row"] == "supply"]
    assert supply == ["DataLoader, 1 workers", "hdmlp, 1 threads", "hdmlp, 2 threads", "hdmlp device decode",
                      "hdmlp hybrid decode, 50% on the CPU"]
    fed = [r for r in rows if r["row"] == "fed"]
    # Per model: the DataLoader, hdmlp float / uint8 at default and explicit threads and at cpu_budget=1,
    # device and hybrid decode.
    assert len(fed) == 2 * 9
    budgeted = [r for r in fed if r.get("cpu_budget")]
    assert len(budgeted) == 4 and all(r["threads"] == 1 and "cpu_budget=1" in r["system"] for r in budgeted)
    for r in budgeted:  # each epoch's data readiness, a share of the batches
        assert len(r["data_readiness"]) == epochs and all(0 <= x <= 1 for x in r["data_readiness"])
    for r in fed:
        if "cpu_share" in r:  # every sample of the last epoch decoded once, the share by the CPU
            counts = r["decoded"]
            assert counts["device"] + counts["cpu"] == n
            assert (counts["cpu"] > 0) is (r["cpu_share"] > 0)
    assert {(r["model"], r.get("handoff")) for r in fed} >= {("resnet50", "float"), ("resnet50", "uint8"),
                                                             ("resnet18", "float"), ("resnet18", "uint8")}
    for r in rows:
        assert r["images_per_s"] > 0 and len(r["epochs"]) == epochs
        if r["row"] != "gpu_resident":  # every sample once per epoch
            assert [e["images"] for e in r["epochs"]] == [n] * epochs, r
    for r in fed:
        assert r["share_of_gpu_resident"] > 0
    markdown = out.with_suffix(".md").read_text()
    assert result["status"] in markdown and markdown.count("\n| ") == len(rows) + 1
    acc = result["device_decode_accuracy"]["float32"]  # by the resize's precision
    assert acc["values"] == n * 3 * result["settings"]["size"] ** 2
    assert 0 <= acc["mean_abs_diff"] <= acc["max_abs_diff"] and acc["share_equal"] <= acc["share_within_1"] <= 1
