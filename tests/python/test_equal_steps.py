"""Equal steps on every rank, launchers without MPI, and DataLoader's surface (issue 12).

Several ranks without MPI are several Jobs in this process, each told its rank by the
RANK/WORLD_SIZE environment a launcher such as torchrun sets: they plan the same global
order and read their slices, exactly as separate processes would.
"""
import gc
import random
import warnings

import pytest
import torch

import hdmlp
import hdmlp.job
from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder

from conftest import make_folder


@pytest.fixture(scope="module")
def uneven(tmp_path_factory):
    """37 files: uneven for every batch size and rank count below."""
    root = tmp_path_factory.mktemp("uneven") / "data"
    digests = make_folder(str(root), classes=3, per_class=(13, 11, 13))
    return root, digests


def as_rank(monkeypatch, rank, world, local_world=None):
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", str(world))
    if local_world is None:
        monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    else:
        monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local_world))


def launcher_ranks(monkeypatch, root, world, **kw):
    jobs = []
    for r in range(world):
        as_rank(monkeypatch, r, world)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # peers' caches are off
            jobs.append(hdmlp.Job(root, index_cache=False, **kw))
    return jobs


@pytest.mark.parametrize("scheme", ["uniform", "local", "partial_local"])
@pytest.mark.parametrize("world,batch", [(2, 8), (3, 8), (3, 10), (4, 35)])
def test_launcher_ranks_take_equal_non_empty_steps_and_read_each_sample_once(monkeypatch, uneven, scheme, world,
                                                                            batch):
    root, digests = uneven
    jobs = launcher_ranks(monkeypatch, root, world, batch_size=batch, epochs=2, seed=4, distr_scheme=scheme)
    loaders = [HDMLPDataLoader(HDMLPImageFolder(root, j)) for j in jobs]
    assert len({len(loader) for loader in loaders}) == 1
    for epoch in range(2):
        sizes = [[len(labels) for _, labels in loader] for loader in loaders]
        for r, s in enumerate(sizes):
            assert len(s) == len(loaders[r]), f"rank {r} took {len(s)} steps, len(loader) = {len(loaders[r])}"
        for step in zip(*sizes):
            assert min(step) >= 1 and max(step) - min(step) <= 1, step
        assert sum(map(sum, sizes)) == len(digests)
        seen = [i for j in jobs for i in j.plan(epoch)]
        assert sorted(seen) == list(range(len(digests)))
    for j in jobs:
        assert j.world_size == world and j.metrics()["transport"] == "none"
        j.close()


def test_peer_serving_off_warns_once_and_a_seed_is_required(monkeypatch, uneven):
    root, _ = uneven
    monkeypatch.setattr(hdmlp.job, "_warned_without_peers", False)
    as_rank(monkeypatch, 1, 2)
    with pytest.warns(RuntimeWarning, match="peers. caches are off: no MPI"):
        job = hdmlp.Job(root, 4, 1, seed=1, index_cache=False)
    assert (job.rank, job.world_size) == (1, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hdmlp.Job(root, 4, 1, seed=1, index_cache=False).close()  # once per process
    job.close()
    with pytest.raises(ValueError, match="seed is None, but this job runs on 2 ranks"):
        hdmlp.Job(root, 4, 1, index_cache=False)


def test_bad_launcher_environment_is_named(monkeypatch, uneven):
    root, _ = uneven
    as_rank(monkeypatch, "x", 2)
    with pytest.raises(ValueError, match="RANK='x' is not an integer"):
        hdmlp.Job(root, 4, 1, seed=1)
    as_rank(monkeypatch, 2, 2)
    with pytest.raises(ValueError, match="RANK=2 and WORLD_SIZE=2"):
        hdmlp.Job(root, 4, 1, seed=1)


def test_more_ranks_than_samples_or_batch_is_refused_with_the_numbers(monkeypatch, uneven):
    root, _ = uneven
    as_rank(monkeypatch, 0, 40)
    with pytest.raises(ValueError, match="37 samples, fewer than the 40 ranks"):
        hdmlp.Job(root, 64, 1, seed=1, index_cache=False)
    as_rank(monkeypatch, 0, 8)
    with pytest.raises(ValueError, match="global batch_size 4 is smaller than the world size 8"):
        hdmlp.Job(root, 4, 1, seed=1, index_cache=False)


def test_skip_keeps_every_step_on_every_rank(monkeypatch, tmp_path):
    """Rank 0's first slice is all bad images: it still takes len(loader) steps, none empty."""
    from hdmlp.datasets import make_image_folder
    import hdmlp.transforms as T
    root = make_image_folder(tmp_path / "data", num_images=23, num_classes=2, seed=2, min_side=40, max_side=60)
    # Unshuffled, rank 0 of 2 reads the first half of each global batch of 8: index
    # order puts these files first, so its whole first slice and half of rank 1's are bad.
    classes = sorted(p for p in root.iterdir() if p.is_dir())
    for name in ("aaa0.jpg", "aaa1.jpg", "aaa2.jpg", "aaa3.jpg", "aaa4.jpg", "aaa5.jpg"):
        (classes[0] / name).write_bytes(b"not an image")
    chain = [T.ImgDecode(), T.Resize(16), T.CenterCrop(16), T.ToTensor()]
    jobs = launcher_ranks(monkeypatch, root, 2, batch_size=8, epochs=1, seed=1, shuffle=False, transforms=chain,
                          on_error="skip")
    loaders = [HDMLPDataLoader(HDMLPImageFolder(root, j)) for j in jobs]
    sizes = [[x.shape[0] for x, _ in loader] for loader in loaders]
    # 29 files: 3 batches of 8 and a last of 5 (3 + 2); every step taken on both ranks. Each
    # rank's holes take samples from its last batch while that keeps one: rank 0's first batch
    # gets 2 of its 4 back, rank 1's gets 1 of its 2.
    assert sizes == [[2, 4, 4, 1], [3, 4, 4, 1]], sizes
    assert all(n >= 1 for s in sizes for n in s)
    assert sum(map(sum, sizes)) == 23
    assert jobs[0].metrics()["skipped_samples"] + jobs[1].metrics()["skipped_samples"] == 6
    for j in jobs:
        j.close()


def bad_at_positions(tmp_path, positions, n=12):
    """One class of n images; the files at these positions of index order are not images."""
    from hdmlp.datasets import make_image_folder
    root = make_image_folder(tmp_path / "data", num_images=n, num_classes=1, seed=4, min_side=40, max_side=60)
    files = sorted(root.rglob("*.JPEG"))
    assert len(files) == n
    for k in positions:
        files[k].write_bytes(b"not an image")
    return root, files


def test_skip_pads_a_batch_of_only_bad_samples_by_repeating_a_good_one(tmp_path):
    """Issue 26: batch 1 is all bad and so are the samples that could fill it: instead of raising, the batch
    gets a good sample of the epoch again (as DistributedSampler pads), counted in padded_samples."""
    import hdmlp.transforms as T
    root, files = bad_at_positions(tmp_path, [4, 5, 6, 7, 9, 10, 11])
    chain = [T.ImgDecode(), T.Resize(16), T.CenterCrop(16), T.ToTensor()]
    with hdmlp.Job(root, batch_size=4, epochs=2, seed=1, shuffle=False, index_cache=False, transforms=chain,
                   on_error="skip") as job:
        for epoch in range(2):
            ids = [list(b.ids) for b in job.batches(epoch)]
            assert [len(b) for b in ids] == [4, 1, 1], ids
            assert ids[1] == [ids[0][-1]]  # the last good sample delivered, again
            flat = [i for b in ids for i in b]
            assert sorted(set(flat)) == [0, 1, 2, 3, 8]  # every good sample, once but for the repeat
        m = job.metrics()
        assert m["padded_samples"] == 2 and m["skipped_samples"] == 14


def test_dataloader_surface_and_set_epoch(uneven, tmp_path):
    root, digests = uneven
    # A small staging buffer and slow storage: the workers cannot have read ahead into the
    # epochs that set_epoch skips.
    cfg = tmp_path / "small.cfg"
    cfg.write_text("storage_classes = ( { capacity = 0.004; threads = 2; } );\n")
    job = hdmlp.Job(root, epochs=6, batch_size_per_rank=5, seed=2, num_workers=2, index_cache=False,
                    config_path=str(cfg), storage=hdmlp.ThrottledStorage(latency_s=0.002))
    loader = HDMLPDataLoader(HDMLPImageFolder(root, job))
    assert (loader.batch_size, job.batch_size, loader.drop_last, loader.num_workers) == (5, 5, False, 2)
    assert loader.dataset.job is job and len(loader) == 8
    sampler = loader.sampler
    assert len(sampler) == len(digests)
    assert list(sampler) == job.plan(0)
    sampler.set_epoch(0)  # the next epoch: nothing to do
    assert sum(len(labels) for _, labels in loader) == len(digests)
    loader.set_epoch(0)  # the current one: nothing to do
    loader.set_epoch(1)  # the next one: nothing to do
    assert loader.epoch == 1 and list(sampler) == job.plan(1)
    sampler.set_epoch(4)  # skip 1..3 without reading them
    assert loader.epoch == 4 and list(sampler) == job.plan(4)
    seen = []
    for _, labels in loader:
        assert loader.epoch == 4 and list(sampler) == job.plan(4)  # the pass being delivered
        seen += labels.tolist()
    assert len(seen) == len(digests)
    skipped_reads = sum(c["count"] for e in job.metrics()["epochs"][1:4] for c in e["reads"].values())
    assert skipped_reads < 8, f"the skipped epochs were read ({skipped_reads} samples)"
    with pytest.raises(ValueError, match="cannot go back"):
        loader.set_epoch(2)
    with pytest.raises(ValueError, match="epochs 0..5"):
        loader.set_epoch(6)
    job.close()


def test_batch_size_arguments(uneven):
    root, _ = uneven
    with pytest.raises(ValueError, match="exactly one of batch_size"):
        hdmlp.Job(root, 4, 1, batch_size_per_rank=4)
    with pytest.raises(ValueError, match="exactly one of batch_size"):
        hdmlp.Job(root, epochs=1)
    with pytest.raises(TypeError, match="epochs is required"):
        hdmlp.Job(root, 4)
    with pytest.raises(ValueError, match="num_workers must be at least 1"):
        hdmlp.Job(root, 4, 1, num_workers=0)


def test_unshuffled_epochs_are_in_index_order_and_cached_as_in_training(uneven, tmp_path):
    root, digests = uneven
    cfg = tmp_path / "ram.cfg"
    cfg.write_text('storage_classes = ( { capacity = 1; threads = 2; }, { backend = "memory"; capacity = 8; threads = 1; } );\n')
    with hdmlp.Job(root, 8, 3, shuffle=False, config_path=str(cfg), index_cache=False) as job:
        loader = HDMLPDataLoader(HDMLPImageFolder(root, job))
        for _ in range(3):
            order = [lab for _, labels in loader for lab in labels.tolist()]
            assert order == job.targets
        epochs = job.metrics()["epochs"]
        assert epochs[2]["reads"].get("memory", {}).get("count") == len(digests)  # later epochs from RAM


def test_plan_property_through_the_python_api():
    """A few hundred random shapes through hdmlp.AccessPlan (the C++ test covers thousands)."""
    rng = random.Random(12)
    for _ in range(300):
        world = rng.randint(1, 9)
        batch = rng.randint(world, 50)
        n = rng.randint(world, 400)
        drop = rng.random() < 0.3 and n >= batch
        scheme = rng.choice(["uniform", "local", "partial_local"])
        plan = hdmlp.AccessPlan(n, batch, 1, rng.randrange(2**32), drop, world, scheme, 0.3, rng.random() < 0.8)
        steps = plan.batches_per_epoch()
        for h in range(steps):
            sizes = [plan.local_batch_size(h, r) for r in range(world)]
            assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1
            begin, end = plan.global_batch(h)
            assert [plan.rank_slice(h, r) for r in range(world)][0][0] == begin
            assert sum(sizes) == end - begin
        seen = sorted(i for r in range(world) for i in plan.samples(0, r))
        assert len(seen) == len(set(seen)) == (n - n % batch if drop else n)


def test_jobs_of_one_process_share_the_memory_budget(uneven, tmp_path):
    """Train and val jobs together stay within what one job alone would use."""
    root, _ = uneven
    cfg = tmp_path / "pct.cfg"
    # A RAM class of a tiny percent of this machine's memory: a third of the dataset, so that
    # the first job fills it and the second gets what is left. A third keeps it between a few
    # files and the whole dataset even if MemAvailable moves by half before the job reads it
    # (other tests' processes come and go); a fixed 20 kB sometimes held no file at all.
    gc.collect()  # jobs that earlier tests left to the collector must not hold a share of the budget
    dataset_bytes = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    percent = dataset_bytes / 3 / (_mem_available_mb() * 1024 * 1024) * 100
    cfg.write_text(f'storage_classes = ( {{ capacity = "1%"; threads = 2; }},\n'
                   f'  {{ backend = "memory"; capacity = "{percent:.8f}%"; threads = 1; }} );\n')
    train = hdmlp.Job(root, 8, 1, config_path=str(cfg), index_cache=False, seed=1)
    alone = train.metrics()
    staging_alone = alone["staging"]["capacity_bytes"]
    ram_alone = alone["classes"][0]["capacity_bytes"]
    assert 0 < alone["classes"][0]["planned_bytes"] <= ram_alone
    val = hdmlp.Job(root, 8, 1, config_path=str(cfg), index_cache=False, seed=1, shuffle=False)
    both = [train.metrics(), val.metrics()]
    staging_both = sum(m["staging"]["capacity_bytes"] for m in both)
    assert abs(staging_both - staging_alone) <= 2, (staging_both, staging_alone)
    assert both[0]["staging"]["capacity_bytes"] == pytest.approx(staging_alone / 2, abs=1)
    held = both[0]["classes"][0]["planned_bytes"] + both[1]["classes"][0]["capacity_bytes"]
    assert held <= ram_alone + 1, (held, ram_alone)
    assert both[1]["classes"][0]["capacity_bytes"] < ram_alone
    val.close()
    assert train.metrics()["staging"]["capacity_bytes"] == staging_alone  # grows back
    train.close()


def _mem_available_mb() -> float:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    pytest.skip("no MemAvailable in /proc/meminfo")


def test_launcher_ranks_cache_for_themselves_alone(monkeypatch, uneven, tmp_path):
    """Without a communicator each rank plans its classes for the samples it reads, and
    reads its later epochs from them."""
    root, digests = uneven
    cfg = tmp_path / "ram.cfg"
    cfg.write_text('storage_classes = ( { capacity = 1; threads = 2; }, { backend = "memory"; capacity = 8; threads = 1; } );\n')
    jobs = launcher_ranks(monkeypatch, root, 2, batch_size=8, epochs=3, seed=9, config_path=str(cfg))
    for job in jobs:
        mine = set(i for e in range(3) for i in job.plan(e))
        assert len(mine) < len(digests)  # a rank does not read everything in 3 epochs of this seed
        loader = HDMLPDataLoader(HDMLPImageFolder(root, job))
        for _ in range(3):
            for _ in loader:
                pass
        metrics = job.metrics()
        assert metrics["classes"][0]["planned_samples"] == len(mine)
        pfs = sum(e["reads"].get("pfs", {}).get("count", 0) for e in metrics["epochs"])
        assert metrics["pfs_reads"] == len(mine) and pfs <= len(mine)  # each of its samples read once
        job.close()
