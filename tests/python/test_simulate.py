"""hdmlp simulate and hdmlp calibrate (issue #7): output shape, real sizes, errors, configs."""
import json
import os
import subprocess
import sys

import pytest

import hdmlp
from hdmlp import _core
from hdmlp.simulate import POLICIES, calibrate, simulate

from conftest import make_folder

HDMLP = os.path.join(os.path.dirname(sys.executable), "hdmlp")
CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "configs")
SCENARIO = os.path.join(CONFIGS, "sim_fits_all_nodes.cfg")
SMALL = ["--nodes", "4", "--batch-size", "32", "--epochs", "2", "--compute-mbps", "100", "--seed", "3"]


def run(*args):
    return subprocess.run([HDMLP, *args], capture_output=True, text=True, timeout=120)


def test_json_has_every_policy_with_times_and_bytes():
    out = run("simulate", "--config", SCENARIO, *SMALL, "--samples", "500", "--sample-mb", "0.1",
              "--sample-std-mb", "0.02", "--policy", "all", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert list(result["policies"]) == list(POLICIES)
    lower = result["policies"]["lower_bound"]["seconds"]
    for name, r in result["policies"].items():
        assert {"seconds", "stall_seconds", "epochs", "bytes"} <= set(r), name
        assert len(r["epochs"]) == 2
        assert r["seconds"] == pytest.approx(sum(r["epochs"]))
        assert r["seconds"] >= lower - 1e-9
        assert sum(r["bytes"].values()) == 2 * result["dataset_bytes"], name
    assert result["policies"]["naive"]["seconds"] > result["policies"]["hdmlp"]["seconds"]


def test_table_output_and_policy_list():
    out = run("simulate", "--config", SCENARIO, *SMALL, "--samples", "200", "--sample-mb", "0.1",
              "--policy", "hdmlp,naive")
    assert out.returncode == 0, out.stderr
    assert "hdmlp" in out.stdout and "naive" in out.stdout and "staging_pool" not in out.stdout
    assert "seconds per epoch" in out.stdout


def test_dataset_sizes_come_from_the_folder(tmp_path):
    make_folder(str(tmp_path / "d"))
    total = sum(p.stat().st_size for p in (tmp_path / "d").rglob("*") if p.suffix.lower() in (".jpg", ".jpeg", ".png", ".webp"))
    result = simulate(SCENARIO, nodes=2, batch_size=4, epochs=3, compute_mbps=50, policies="hdmlp",
                      dataset=tmp_path / "d")
    assert result["samples"] == 24
    assert result["dataset_bytes"] == total
    assert sum(result["policies"]["hdmlp"]["bytes"].values()) == 3 * total


def test_same_seed_same_prediction():
    kw = dict(nodes=3, batch_size=12, epochs=2, compute_mbps=80, policies=["hdmlp", "locality_aware"],
              samples=300, sample_mb=0.2, sample_std_mb=0.05)
    def prediction(result):  # without the wall times the simulator measured of itself
        for r in result["policies"].values():
            del r["planning_seconds"], r["simulation_seconds"]
        return result

    first = prediction(simulate(SCENARIO, seed=5, **kw))
    assert first == prediction(simulate(SCENARIO, seed=5, **kw))
    assert first != prediction(simulate(SCENARIO, seed=6, **kw))


@pytest.mark.parametrize("args, message", [
    (["--policy", "fastest"], "unknown policy \"fastest\""),
    (["--compute-mbps", "0"], "--compute-mbps"),
    (["--nodes", "0"], "--nodes"),
    (["--sample-std-mb", "-1"], "--sample-std-mb"),
])
def test_bad_arguments_give_clear_errors(args, message):
    base = ["--config", SCENARIO, *SMALL, "--samples", "100", "--sample-mb", "0.1"]
    out = run("simulate", *base, *args)
    assert out.returncode != 0
    assert message in out.stderr and "Traceback" not in out.stderr


def test_missing_sizes_and_bad_config(tmp_path):
    out = run("simulate", "--config", SCENARIO, *SMALL)
    assert out.returncode == 1 and "--dataset" in out.stderr and "--samples" in out.stderr
    bad = tmp_path / "bad.cfg"
    bad.write_text("b_fs = -1;\nstorage_classes = ( { capacity = 1; threads = 1; } );\n")
    out = run("simulate", "--config", str(bad), *SMALL, "--samples", "10", "--sample-mb", "1")
    assert out.returncode == 1 and "b_fs" in out.stderr and "Traceback" not in out.stderr
    out = run("simulate", "--config", str(tmp_path / "none.cfg"), *SMALL, "--samples", "10", "--sample-mb", "1")
    assert out.returncode == 1 and "none.cfg" in out.stderr


def test_scenario_configs_parse_with_the_runtime():
    names = sorted(f for f in os.listdir(CONFIGS) if f.startswith("sim_"))
    assert names == ["sim_fits_all_nodes.cfg", "sim_fits_node_memory.cfg", "sim_fits_node_storage.cfg",
                     "sim_larger.cfg", "sim_thesis_scenario2.cfg"]
    for name in names:
        config = _core.load_config(os.path.join(CONFIGS, name))
        assert len(config["storage_classes"]) >= 2 and config["pfs_bandwidth"], name


def test_calibrate_writes_a_config_the_runtime_parses(tmp_path):
    make_folder(str(tmp_path / "d"))
    cfg = tmp_path / "machine.cfg"
    out = run("calibrate", "-o", str(cfg), "--threads", "1,2", "--memory-test-mb", "2", "--files", "8",
              "--file-mb", "0.05", "--folder", str(tmp_path), "--dataset", str(tmp_path / "d"), "--pfs-files", "8",
              "--latency-ms", "1", "--mbps", "100")
    assert out.returncode == 0, out.stderr
    config = _core.load_config(str(cfg))
    names = [c["backend"] for c in config["storage_classes"]]
    assert names == ["staging", "memory", "filesystem"]
    assert [p["threads"] for p in config["storage_classes"][1]["bandwidth"]] == [1, 2]
    pfs = config["pfs_bandwidth"]
    assert [p["processes"] for p in pfs] == [1, 2]
    # Eight small files at 1 ms latency each: far below the unthrottled RAM copy.
    assert 0 < pfs[0]["mbps"] < config["storage_classes"][1]["bandwidth"][0]["mbps"]
    # The written config drives the simulator and the runtime alike.
    result = simulate(cfg, nodes=1, batch_size=4, epochs=2, compute_mbps=50, policies="hdmlp",
                      dataset=tmp_path / "d")
    assert result["policies"]["hdmlp"]["seconds"] > 0
    with hdmlp.Job(str(tmp_path / "d"), 4, 1, seed=0, config_path=str(cfg)) as job:
        assert sum(len(ids) for ids, _, _ in job.epoch_batches(0)) == 24


def test_calibrate_rejects_a_directory_as_output(tmp_path):
    with pytest.raises(IsADirectoryError, match="--output"):
        calibrate(tmp_path, threads=(1,), memory_test_mb=1, files=2, file_mb=0.01)


THESIS = os.path.join(CONFIGS, "sim_thesis_scenario2.cfg")
# The thesis's scenario 2 with 4,000 samples of 1 MB and 3 epochs (a node's share fits its RAM).
THESIS_SMALL = ["--config", THESIS, "--nodes", "4", "--batch-size", "100", "--epochs", "3", "--compute-mbps", "100",
                "--preprocess-mbps", "200", "--samples", "4000", "--sample-mb", "1", "--seed", "3"]


def test_thesis_model_preloads_and_counts_readers_per_node():
    def seconds(*extra):
        out = run("simulate", *THESIS_SMALL, "--policy", "deepio_ordered,parallel_staging,lower_bound", "--json",
                  *extra)
        assert out.returncode == 0, out.stderr
        return {k: (v["seconds"], v["startup_seconds"]) for k, v in json.loads(out.stdout)["policies"].items()}

    lower = seconds()["lower_bound"][0]
    thesis = seconds("--model", "thesis")
    # DeepIO preloads a node's 1,000 samples with the RAM class's 2 threads at t(4)/4 = 36.5 MB/s each,
    # paying the staging write 1/200 s per MB, then trains at the lower bound.
    preload = 500 * (1 / 36.5 + 1 / 200)
    assert thesis["deepio_ordered"][1] == pytest.approx(preload, rel=1e-3)
    assert thesis["deepio_ordered"][0] == pytest.approx(preload + lower, rel=0.01)
    # The physical reading (the default) has no preload for DeepIO: it caches on the way.
    assert seconds()["deepio_ordered"][1] == 0
    # Parallel staging reads its SSD at r_2(2) = 86 MB/s per thread (the artifact); at Eq. 3.7's 43 MB/s
    # two threads no longer keep up with the consumer.
    eq37 = seconds("--model", "thesis", "--without", "full-class-rate")
    assert eq37["parallel_staging"][0] - eq37["parallel_staging"][1] > \
        1.3 * (thesis["parallel_staging"][0] - thesis["parallel_staging"][1])


@pytest.mark.parametrize("args, message", [
    (["--model", "paper"], "--model"),
    (["--without", "full-class-rate"], "--model thesis"),
    (["--model", "thesis", "--without", "typo"], "--without"),
])
def test_model_arguments_give_clear_errors(args, message):
    out = run("simulate", *THESIS_SMALL, "--policy", "naive", *args)
    assert out.returncode != 0
    assert message in out.stderr and "Traceback" not in out.stderr
