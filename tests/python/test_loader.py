"""End-to-end tests of hdmlp.Job and the PyTorch front end on raw bytes."""
import gc
import hashlib
import os
import signal
import threading
import time

import pytest
import torch
import torchvision

import hdmlp
from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder

from conftest import age_tree, make_folder, thread_count


def loader_for(root, batch_size=4, epochs=3, **kw):
    job = hdmlp.Job(root, batch_size, epochs, **kw)
    return job, HDMLPDataLoader(HDMLPImageFolder(root, job))


def test_matches_torchvision_image_folder(folder):
    root, _ = folder
    tv = torchvision.datasets.ImageFolder(str(root))
    with hdmlp.Job(root, 4, 1) as job:
        ds = HDMLPImageFolder(root, job)
        assert ds.classes == tv.classes
        assert ds.class_to_idx == tv.class_to_idx
        assert ds.samples == tv.samples
        assert ds.targets == tv.targets
        assert len(ds) == len(tv)


def test_every_epoch_delivers_each_file_once_with_its_bytes(folder):
    root, digests = folder
    tv = torchvision.datasets.ImageFolder(str(root))
    label_of = {os.path.relpath(p, root): t for p, t in tv.samples}
    job, loader = loader_for(root, batch_size=4, epochs=3, seed=3)
    n = len(digests)
    assert len(loader) == (n + 3) // 4
    orders = []
    for epoch in range(3):
        seen = []
        batches = 0
        for samples, labels in loader:
            batches += 1
            assert labels.dtype == torch.int64 and len(samples) == len(labels)
            for s in samples:
                assert s.dtype == torch.uint8 and s.dim() == 1
            seen.extend(zip([hashlib.sha256(s.numpy().tobytes()).hexdigest() for s in samples], labels.tolist()))
        assert batches == len(loader)
        # Each file exactly once, with its bytes and torchvision's label.
        expected = sorted((digests[rel], label_of[rel]) for rel in digests)
        assert sorted(seen) == expected
        orders.append(seen)
    assert orders[0] != orders[1] != orders[2]  # a fresh permutation every epoch
    m = job.metrics()
    assert [e["samples"] for e in m["epochs"]] == [n] * 3
    total = sum(os.path.getsize(p) for p, _ in tv.samples)
    for e in m["epochs"]:  # whichever source served them (PFS or a storage class)
        assert sum(r["count"] for r in e["reads"].values()) == n
        assert sum(r["bytes"] for r in e["reads"].values()) == total
    job.close()


def test_same_seed_same_order_other_seed_other_order(folder):
    root, _ = folder

    def order(seed):
        with hdmlp.Job(root, 5, 2, seed=seed) as job:
            return [ids for e in range(2) for ids, _, _ in job.epoch_batches(e)]

    assert order(42) == order(42)
    assert order(42) != order(43)
    with hdmlp.Job(root, 5, 2, seed=42) as job:
        # The plan is known without loading anything, and is what the loader delivered.
        delivered = order(42)
        assert job.plan(0) + job.plan(1) == [i for ids in delivered for i in ids]
        assert job.plan(0) == hdmlp.AccessPlan(len(job), 5, 2, 42).samples(0)
        assert sorted(job.plan(1)) == list(range(len(job)))


def test_seed_none_draws_one(folder):
    root, _ = folder
    with hdmlp.Job(root, 4, 1) as a, hdmlp.Job(root, 4, 1) as b:
        assert isinstance(a.seed, int) and a.seed != b.seed


def test_drop_last(folder):
    root, digests = folder
    n = len(digests)
    job, loader = loader_for(root, batch_size=5, epochs=1, drop_last_batch=True)
    assert len(loader) == n // 5
    sizes = [len(s) for s, _ in loader]
    assert sizes == [5] * (n // 5)
    job.close()


def test_iterating_past_the_last_epoch_is_a_clear_error(folder):
    root, _ = folder
    job, loader = loader_for(root, epochs=1)
    list(loader)
    it = iter(loader)  # starts nothing: the error comes with the first batch asked for
    with pytest.raises(RuntimeError, match="epochs"):
        next(it)
    job.close()


def test_the_jobs_pass_api_is_what_a_loader_builds_on(folder):
    """Job.open_pass / current_pass / position / set_epoch and the read-only members hdmlp.torch and the device
    stage use (no private member of the Job is read outside job.py)."""
    root, digests = folder
    with hdmlp.Job(root, 4, 3, seed=0, shuffle=False) as job:
        assert job.current_pass() is None and job.planned_epochs == 3
        assert job.worker_specs == [] and job.decode_chain is None  # file bytes
        assert sum(job.local_batch_size(b) for b in range(job.batches_per_epoch)) == job.rank_epoch_size
        assert job.describe_sample(0).endswith(job.samples[0][0][len(str(root)):])
        assert job.delivery(None) == (None, None)  # host buffers
        opened = job.open_pass()
        assert job.current_pass() is opened and opened.epoch == 0
        ids, _, _ = next(opened)
        assert job.position().epoch == 0 and job.position().batches == 1 and ids == job.plan(0)[:len(ids)]
        with pytest.raises(RuntimeError, match="still open"):
            job.open_pass()
        opened.close()
        assert job.current_pass() is None
        job.set_epoch(0)  # an evaluation job ignores an earlier epoch (trainers number its passes their way)
        job.set_epoch(2)  # a later one skips ahead: epoch 1 is never read
        assert job.next_epoch == 2
        assert sum(len(ids) for ids, _, _ in job.open_pass()) == len(digests)
        job.add_loop_seconds(2, python_seconds=0.25)
        assert job.metrics()["epochs"][-1]["python_seconds"] == pytest.approx(0.25)


def test_early_break_then_next_epoch_is_complete(folder, tmp_path):
    root, digests = folder
    # No cache classes and a 1 kB staging buffer: the workers cannot finish the
    # job ahead of the consumer, so they are still running when it closes.
    cfg = tmp_path / "small.cfg"
    cfg.write_text("storage_classes = ( { capacity = 0.001; threads = 2; } );\n")
    job, loader = loader_for(root, batch_size=2, epochs=3, storage=hdmlp.ThrottledStorage(latency_s=0.01),
                             config_path=cfg)
    start = time.monotonic()
    for _ in loader:
        break
    count = sum(len(s) for s, _ in loader)
    assert count == len(digests)
    assert time.monotonic() - start < 10
    before = thread_count()
    t = time.monotonic()
    job.close()
    assert time.monotonic() - t < 2
    assert thread_count() < before  # the staging workers are joined


def test_delete_mid_epoch_joins_threads(folder):
    root, _ = folder
    base = thread_count()
    job, loader = loader_for(root, batch_size=2, epochs=5, storage=hdmlp.ThrottledStorage(latency_s=0.05))
    it = iter(loader)
    next(it)
    assert thread_count() > base
    t = time.monotonic()
    del it, loader, job
    gc.collect()
    assert time.monotonic() - t < 2
    # Every thread of this job is joined; reads an earlier test left behind in
    # a slow storage (they own only shared state) may still end meanwhile.
    assert thread_count() <= base


def test_ctrl_c_during_a_stall_interrupts_promptly(folder):
    root, _ = folder
    job, loader = loader_for(root, batch_size=8, epochs=1, storage=hdmlp.ThrottledStorage(latency_s=1.0))
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        for _ in loader:
            pass
    assert time.monotonic() - start < 2
    t = time.monotonic()
    job.close()
    assert time.monotonic() - t < 2.5  # a read in flight may take its 1 s


def test_tensors_keep_their_bytes_after_later_batches_and_close(folder):
    root, digests = folder
    job, loader = loader_for(root, batch_size=3, epochs=2, seed=1)
    kept = []
    for samples, labels in loader:
        kept.extend(samples)
    for samples, labels in loader:  # a second epoch reuses nothing the first one still holds
        pass
    job.close()
    del loader
    gc.collect()
    assert sorted(hashlib.sha256(s.numpy().tobytes()).hexdigest() for s in kept) == sorted(digests.values())


def test_zero_copy_tensor_views_the_staging_memory(folder):
    root, _ = folder
    with hdmlp.Job(root, 4, 1) as job:
        ids, labels, buffers = next(job.epoch_batches(0))
        big = next(b for b in buffers if len(b) > 0)
        t = torch.frombuffer(big, dtype=torch.uint8)
        assert t.data_ptr() == torch.frombuffer(big, dtype=torch.uint8).data_ptr()
        view = memoryview(big)
        t[0] = (int(t[0]) + 1) % 256
        assert view[0] == int(t[0])  # same memory, no copy


def test_python_transform_and_target_transform(folder):
    root, _ = folder
    job = hdmlp.Job(root, 4, 1)
    ds = HDMLPImageFolder(root, job, transform=lambda s: s.numel(), target_transform=lambda t: t * 10)
    samples, labels = next(iter(HDMLPDataLoader(ds)))
    assert all(isinstance(s, int) for s in samples)
    assert all(lbl % 10 == 0 for lbl in labels)
    job.close()


def test_metrics_can_be_written_as_json(folder, tmp_path):
    root, _ = folder
    with hdmlp.Job(root, 4, 1) as job:
        for _ in job.epoch_batches(0):
            pass
        job.write_metrics(tmp_path / "m.json")
    import json
    m = json.loads((tmp_path / "m.json").read_text())
    e = m["epochs"][0]
    assert set(e) >= {"epoch", "samples", "stall_seconds", "read_seconds", "reads"}
    assert sum(r["count"] for r in e["reads"].values()) == e["samples"]
    assert {"name", "backend", "planned_samples", "filled_samples", "prefetch_seconds"} <= set(m["classes"][0])


def test_index_cache_is_reused_and_invalidated(tmp_path):
    root = tmp_path / "data"
    make_folder(str(root))
    age_tree(root)
    with hdmlp.Job(root, 4, 1) as job:
        assert not job.index_from_cache
        n = len(job)
    with hdmlp.Job(root, 4, 1) as job:
        assert job.index_from_cache and len(job) == n
    (root / "class_01" / "extra.jpg").write_bytes(b"new")
    with hdmlp.Job(root, 4, 1) as job:
        assert not job.index_from_cache and len(job) == n + 1
        assert os.path.join(str(root), "class_01", "extra.jpg") in [p for p, _ in job.samples]


# -- bad input ---------------------------------------------------------------

def test_missing_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope"):
        hdmlp.Job(tmp_path / "nope", 4, 1)


def test_path_is_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(NotADirectoryError, match="'.*f'"):
        hdmlp.Job(tmp_path / "f", 4, 1)


def test_empty_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="empty"):
        hdmlp.Job(tmp_path / "empty", 4, 1)


def test_class_folder_without_valid_file(tmp_path):
    root = tmp_path / "data"
    make_folder(str(root))
    (root / "zz_empty").mkdir()
    (root / "zz_empty" / "readme.txt").write_text("x")
    with pytest.raises(FileNotFoundError, match="zz_empty"):
        hdmlp.Job(root, 4, 1)


@pytest.mark.parametrize("kw,exc,match", [
    (dict(batch_size=0), ValueError, "batch_size"),
    (dict(batch_size=-3), ValueError, "batch_size"),
    (dict(batch_size=2.5), TypeError, "batch_size"),
    (dict(epochs=0), ValueError, "epochs"),
    (dict(distr_scheme="shuffle"), ValueError, "distr_scheme"),
    (dict(seed=-1), ValueError, "seed"),
    (dict(config_path="/nonexistent.cfg"), FileNotFoundError, "nonexistent.cfg"),
])
def test_bad_arguments(folder, kw, exc, match):
    root, _ = folder
    args = dict(batch_size=4, epochs=1) | kw
    with pytest.raises(exc, match=match):
        hdmlp.Job(root, **args)


def test_file_vanished_after_scan(folder, tmp_path):
    root, _ = folder
    # A 1 kB staging buffer admits about one file ahead of the consumer, so the
    # workers cannot have read the epoch's last file before it is removed.
    cfg = tmp_path / "small.cfg"
    cfg.write_text("storage_classes = ( { capacity = 0.001; threads = 2; } );\n")
    job = hdmlp.Job(root, 4, 1, seed=0, config_path=cfg)
    victim = job.samples[job.plan(0)[-1]][0]
    os.remove(victim)
    loader = HDMLPDataLoader(HDMLPImageFolder(root, job))
    start = time.monotonic()
    with pytest.raises(FileNotFoundError, match=os.path.basename(victim)):
        for _ in loader:
            pass
    assert time.monotonic() - start < 5
    job.close()


def test_unreadable_file(folder):
    root, _ = folder
    probe = hdmlp.Job(root, 4, 1, seed=0)
    victim = probe.samples[probe.plan(0)[0]][0]
    probe.close()
    job = hdmlp.Job(root, 4, 1, seed=0, storage=hdmlp.ThrottledStorage(failing_paths=[victim]))
    with pytest.raises(OSError, match=os.path.basename(victim)):
        next(job.epoch_batches(0))
    job.close()


def test_bad_config_names_the_key(folder, tmp_path):
    root, _ = folder
    cfg = tmp_path / "bad.cfg"
    cfg.write_text("storage_classes = ( { capacity = -5; threads = 2; } );\n")
    with pytest.raises(hdmlp.ConfigError, match="capacity"):
        hdmlp.Job(root, 4, 1, config_path=cfg)
    with pytest.raises(ValueError):  # ConfigError is a ValueError
        hdmlp.Job(root, 4, 1, config_path=cfg)


def test_closed_job_is_a_clear_error(folder):
    root, _ = folder
    job = hdmlp.Job(root, 4, 1)
    job.close()
    job.close()  # twice is fine
    with pytest.raises(RuntimeError, match="closed"):
        job.metrics()
