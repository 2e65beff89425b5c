"""The hdmlp command: help, demo and plan."""
import argparse
import json
import os
import subprocess
import sys

import pytest

import hdmlp


# The installed console script (not "python -m" from the checkout, whose hdmlp/ has no built _core).
HDMLP = os.path.join(os.path.dirname(sys.executable), "hdmlp")


def run(*args):
    return subprocess.run([HDMLP, *args], capture_output=True, text=True, timeout=300)


def test_help_lists_the_verbs():
    out = run("--help")
    assert out.returncode == 0
    assert "demo" in out.stdout and "plan" in out.stdout


def test_demo_loads_a_generated_dataset_and_reports(tmp_path):
    data = tmp_path / "demo"
    out = run("demo", "--data", str(data), "--images", "60", "--classes", "3", "--epochs", "2", "--batch-size", "8",
              "--metrics-json", str(tmp_path / "m.json"))
    assert out.returncode == 0, out.stderr
    assert "img/s" in out.stdout and "stall" in out.stdout and "reads" in out.stdout
    assert "storage class memory" in out.stdout
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert [e["samples"] for e in metrics["epochs"]] == [60, 60]
    assert sorted(p.name for p in data.iterdir() if p.is_dir()) == sorted({p.parent.name for p in data.rglob("*.JPEG")})
    assert len(list(data.rglob("*.JPEG"))) == 60
    assert "transform s" in out.stdout and "float32 [8, 3, 224, 224]" in out.stdout
    # What the table's numbers mean, for a newcomer: 60 images in batches of 8 end with one of 4.
    assert "8 batches per epoch: 7 of 8 and a last of 4" in out.stdout
    assert "stall is about the whole epoch" in out.stdout and "summed over the threads" in out.stdout
    assert f"read {metrics['pfs_reads']} times" in out.stdout and metrics["pfs_reads"] >= 60
    assert all(e["transform_seconds"] > 0 for e in metrics["epochs"])
    # A second run reuses the dataset; without transforms it delivers raw bytes.
    again = run("demo", "--data", str(data), "--images", "60", "--classes", "3", "--epochs", "1",
                "--transforms", "none")
    assert again.returncode == 0, again.stderr
    assert "transform s" not in again.stdout


def test_demo_reports_a_bad_config_cleanly(tmp_path):
    cfg = tmp_path / "bad.cfg"
    cfg.write_text("storage_classes = ( { capacity = 1; threads = 0; } );\n")
    out = run("demo", "--data", str(tmp_path / "d"), "--images", "20", "--classes", "2", "--config", str(cfg))
    assert out.returncode == 1
    assert "threads" in out.stderr and "Traceback" not in out.stderr


def test_plan_prints_the_access_order():
    out = run("plan", "--samples", "10", "--batch-size", "3", "--epoch", "1", "--seed", "5")
    assert out.returncode == 0
    assert [int(x) for x in out.stdout.split()] == hdmlp.AccessPlan(10, 3, 2, 5).samples(1)


@pytest.mark.parametrize("verb", ["plan", "calibrate", "pack", "simulate", "demo"])
def test_every_option_has_help_and_says_its_default(verb):
    from hdmlp.cli import build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[verb]
    for action in sub._actions:
        if action.dest in ("help",) or not action.option_strings:
            continue
        assert action.help, f"hdmlp {verb} {action.option_strings[0]} has no help text"
        if action.default not in (None, False, [], argparse.SUPPRESS) and not action.required:
            assert "default" in action.help, f"hdmlp {verb} {action.option_strings[0]}: say the default"
    if verb == "pack":  # points at what a wheel carries, not only at the source tree's docs/
        assert "pydoc hdmlp.pack" in sub.description


def test_pack_shard_size_must_be_a_finite_positive_number(tmp_path):
    """Issue 26: inf gave a traceback, nan "cannot convert float NaN to integer" without the option."""
    for value in ("inf", "nan", "-1", "0", "abc"):
        out = run("pack", str(tmp_path / "src"), str(tmp_path / "dst"), "--shard-size-mb", value)
        assert out.returncode == 2, out
        assert "--shard-size-mb" in out.stderr and "Traceback" not in out.stderr, out.stderr
