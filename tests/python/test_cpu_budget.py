"""Job(cpu_budget=...), its default on a GPU node, and the per-epoch data readiness in job.metrics().

Without a GPU the readiness is tested on the CPU path: a consumer that sleeps a fixed time per batch
(the loader waits for it) against a loader slowed down by ThrottledStorage (the consumer waits)."""
import time

import pytest

import hdmlp
import hdmlp.cpu_budget as cpu_budget_module
import hdmlp.transforms as T
from hdmlp.cpu_budget import gpu_node, resolve_cpu_budget
from hdmlp.datasets import make_image_folder
from hdmlp.readiness import add_readiness

CHAIN = [T.ImgDecode(), T.Resize(32), T.CenterCrop(32), T.ToTensor()]


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("budget") / "data"
    make_image_folder(root, num_images=96, num_classes=3, seed=5, min_side=64, max_side=128)
    return root


def usable():
    return hdmlp._core.cpu_budget()["usable_cpus"]


def test_cpu_budget_is_the_staging_workers(images):
    for budget in (1, 3):
        with hdmlp.Job(images, 8, 1, transforms=CHAIN, seed=1, cpu_budget=budget) as job:
            assert job.num_workers == budget
            assert sum(len(y) for _, y in job.batches()) == 96
            assert job.metrics()["staging"]["threads"] == budget


@pytest.mark.parametrize("bad, error", [(0, ValueError), (1025, ValueError), (True, TypeError), (1.5, TypeError),
                                        ("2", TypeError)])
def test_cpu_budget_rejects(images, bad, error):
    with pytest.raises(error, match="cpu_budget"):
        hdmlp.Job(images, 8, 1, transforms=CHAIN, cpu_budget=bad)


def test_cpu_budget_and_num_workers_conflict(images):
    with pytest.raises(ValueError, match="cpu_budget=2 and num_workers=2"):
        hdmlp.Job(images, 8, 1, transforms=CHAIN, cpu_budget=2, num_workers=2)


def test_default_leaves_the_training_thread_a_core_on_a_gpu_node(tmp_path, images, monkeypatch):
    assert not gpu_node(str(tmp_path))
    (tmp_path / "nvidiactl").touch()
    assert gpu_node(str(tmp_path))
    assert resolve_cpu_budget(None, None, 0, True, str(tmp_path)) == (0, 1)
    assert resolve_cpu_budget(None, None, 0, False, str(tmp_path)) == (0, 0)   # raw bytes: workers wait on reads
    assert resolve_cpu_budget(None, 4, 0, True, str(tmp_path)) == (4, 1)       # num_workers is a thread count
    assert resolve_cpu_budget(None, None, 1, True, str(tmp_path / "none")) == (0, 1)  # device="cuda"
    assert resolve_cpu_budget(2, None, 1, True, str(tmp_path)) == (2, 0)
    # The default config (threads = "auto") on a machine said to have a GPU: one CPU fewer, at least one.
    monkeypatch.setattr(cpu_budget_module, "gpu_node", lambda dev="/dev": True)
    with hdmlp.Job(images, 8, 1, transforms=CHAIN, seed=1) as job:
        assert job.num_workers == max(1, usable() - 1)
    monkeypatch.setattr(cpu_budget_module, "gpu_node", lambda dev="/dev": False)
    with hdmlp.Job(images, 8, 1, transforms=CHAIN, seed=1) as job:
        assert job.num_workers == usable()


def test_readiness_when_the_consumer_is_slow(images):
    """A training step of 25 ms per batch: the workers are ahead and wait for room; batches are ready."""
    with hdmlp.Job(images, 8, 2, transforms=CHAIN, seed=1, cpu_budget=1) as job:
        for epoch in range(2):
            for _ in job.batches():
                time.sleep(0.025)
        epochs = job.metrics()["epochs"]
    for e in epochs:
        assert e["batches"] == 12 and 0 <= e["ready_batches"] <= 12
        assert e["span_seconds"] >= 11 * 0.025  # to the last batch, before its step
        assert e["waiting"] == "loader", e
        assert e["consumer_wait_share"] < 0.2
    assert epochs[1]["data_readiness"] >= 11 / 12, epochs[1]   # the loader ran ahead from epoch 0 into 1


def test_readiness_when_the_loader_is_slow(images):
    """Every file open takes 20 ms and the consumer takes none: it waits for nearly every batch."""
    storage = hdmlp.ThrottledStorage(latency_s=0.02)
    with hdmlp.Job(images, 8, 1, transforms=CHAIN, seed=1, cpu_budget=1, storage=storage) as job:
        assert sum(len(y) for _, y in job.batches()) == 96
        (e,) = job.metrics()["epochs"]
    assert e["batches"] == 12
    assert e["waiting"] == "consumer", e
    assert e["data_readiness"] <= 0.5 and e["consumer_wait_share"] > 0.5, e


def test_readiness_before_any_batch():
    e = add_readiness({"batches": 0, "ready_batches": 0, "span_seconds": 0.0, "stall_seconds": 0.0,
                       "read_seconds": 0.0, "transform_seconds": 0.0}, 2)
    assert e["data_readiness"] is None and e["waiting"] is None
    e = add_readiness({"batches": 4, "ready_batches": 3, "span_seconds": 2.0, "stall_seconds": 0.5,
                       "read_seconds": 0.5, "transform_seconds": 1.5}, 2)
    assert e["data_readiness"] == 0.75 and e["consumer_wait_share"] == 0.25 and e["loader_idle_share"] == 0.5
    assert e["waiting"] == "loader"
    e = add_readiness({"batches": 4, "ready_batches": 0, "span_seconds": 2.0, "stall_seconds": 1.5,
                       "read_seconds": 3.0, "transform_seconds": 0.9}, 2)
    assert e["loader_idle_share"] == pytest.approx(0.025) and e["waiting"] == "consumer"
