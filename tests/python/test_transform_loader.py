"""Issue 5's loader outcomes: the C++ transform pipeline run by the staging workers,
batches written in place and handed to torch without a copy, bad images under both
policies."""
import io
import os
import shutil
import time
import warnings

import pytest
import torch
import torchvision.transforms as TV
from PIL import Image

import hdmlp
import hdmlp.transforms as T
from hdmlp.datasets import make_image_folder
from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def train_chain(size=48, fast=False):
    return [T.ImgDecode(fast=fast), T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)]


def write_config(path, threads, capacity_mb=64):
    path.write_text(f"storage_classes = ( {{ capacity = {capacity_mb}; threads = {threads}; }} );\n")
    return str(path)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("loader") / "data"
    make_image_folder(root, num_images=30, num_classes=3, seed=7, min_side=80, max_side=200)
    return root


def batches(job, epoch):
    """(ids, labels tensor, images tensor) per batch, through the public epoch_batches."""
    out = []
    for ids, labels, buf in job.epoch_batches(epoch):
        dtype = torch.float32 if memoryview(buf).format == "f" else torch.uint8
        out.append((ids, torch.frombuffer(labels, dtype=torch.int64),
                    torch.frombuffer(buf, dtype=dtype).view(buf.shape).clone()))
    return out


def test_loader_yields_image_batches_that_match_torchvision(images):
    chain = [T.ImgDecode(), T.Resize(40), T.CenterCrop(32), T.ToTensor()]
    reference = TV.Compose([TV.Resize(40), TV.CenterCrop(32), TV.ToTensor()])
    job = hdmlp.Job(images, batch_size=8, epochs=1, transforms=chain, seed=3)
    dataset = HDMLPImageFolder(images, job)
    seen = []
    for ids, labels, x in batches(job, 0):
        assert x.shape == (len(ids), 3, 32, 32) and x.dtype == torch.float32
        for row, i in enumerate(ids):
            path, label = dataset.samples[i]
            assert labels[row].item() == label
            with Image.open(path) as img:
                ref = reference(img.convert("RGB"))
            # Documented tolerance (docs/transforms.md): well under 1% of the range on average.
            assert (x[row] - ref).abs().mean().item() < 0.002, path
        seen += ids
    assert sorted(seen) == list(range(len(job)))


def test_data_loader_gives_tensors_without_copy(images):
    job = hdmlp.Job(images, batch_size=8, epochs=1, transforms=train_chain(), seed=3)
    loader = HDMLPDataLoader(HDMLPImageFolder(images, job))
    sizes = []
    for x, y in loader:
        assert isinstance(x, torch.Tensor) and x.shape[1:] == (3, 48, 48) and x.is_contiguous()
        assert y.dtype == torch.int64 and len(y) == len(x)
        assert x.data_ptr() % 64 == 0
        sizes.append(len(x))
    assert sizes == [8, 8, 8, 6]
    metrics = job.metrics()
    assert metrics["epochs"][0]["transform_seconds"] > 0
    assert metrics["skipped_samples"] == 0


@pytest.mark.parametrize("fast", [False, True])
def test_random_parameters_come_from_seed_epoch_and_sample(images, fast):
    """Each delivered image is apply(seed, epoch, sample) of its file; with ImgDecode(fast=True) too, whose DCT
    scale is chosen per sample (some of these samples decode at 1/2)."""
    chain = train_chain(fast=fast)
    pipeline = T.compile_pipeline(chain)
    job = hdmlp.Job(images, batch_size=8, epochs=2, transforms=chain, seed=11)
    paths = [p for p, _ in job.samples]
    by_epoch = []
    scales = set()
    for epoch in range(2):
        rows = {}
        for ids, _, x in batches(job, epoch):
            for row, i in enumerate(ids):
                with open(paths[i], "rb") as f:
                    expected = T.apply(pipeline, f.read(), seed=11, epoch=epoch, sample=i)
                assert torch.equal(x[row], expected), (epoch, i)
                rows[i] = x[row]
                with Image.open(paths[i]) as img:
                    scales.add(pipeline.jpeg_decode_plan(img.width, img.height, 11, epoch, i)["scale"][0])
        by_epoch.append(rows)
    assert sum(not torch.equal(by_epoch[0][i], by_epoch[1][i]) for i in by_epoch[0]) > len(by_epoch[0]) // 2
    assert (len(scales) > 1 if fast else scales == {8}), scales  # fast: some samples took a smaller scale


@pytest.mark.parametrize("fast", [False, True])
def test_tensors_do_not_depend_on_the_number_of_threads(images, tmp_path, fast):
    runs = []
    for threads in (1, 3):
        job = hdmlp.Job(images, batch_size=7, epochs=2, transforms=train_chain(fast=fast), seed=5,
                        config_path=write_config(tmp_path / f"t{threads}.cfg", threads))
        runs.append([[(ids, x) for ids, _, x in batches(job, e)] for e in range(2)])
        job.close()
    for e in range(2):
        assert [ids for ids, _ in runs[0][e]] == [ids for ids, _ in runs[1][e]]
        for (_, a), (_, b) in zip(runs[0][e], runs[1][e]):
            assert torch.equal(a, b)


def test_samples_decoded_in_the_ram_class_match_those_read_from_storage(images, tmp_path):
    # Later epochs decode each sample where the RAM class holds it (no copy out of it):
    # the tensors are those of a job that reads every epoch from the dataset's storage.
    ram = tmp_path / "ram.cfg"
    ram.write_text("storage_classes = ( { capacity = 64; threads = 2; },"
                   " { backend = \"memory\"; capacity = 64; threads = 2; } );\n")
    runs = []
    for config in (str(ram), write_config(tmp_path / "none.cfg", 2)):
        job = hdmlp.Job(images, batch_size=7, epochs=3, transforms=train_chain(), seed=5, config_path=config)
        runs.append([batches(job, e) for e in range(3)])
        reads = [e["reads"] for e in job.metrics()["epochs"]]
        job.close()
        if config == str(ram):
            assert all(set(r) == {"memory"} for r in reads[1:]), reads
        else:
            assert all("memory" not in r for r in reads), reads
    for e in range(3):
        assert [ids for ids, _, _ in runs[0][e]] == [ids for ids, _, _ in runs[1][e]]
        for (_, la, a), (_, lb, b) in zip(runs[0][e], runs[1][e]):
            assert torch.equal(la, lb) and torch.equal(a, b)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="thread names are read from Linux's /proc")
def test_the_jobs_threads_are_named_by_their_kind(images, tmp_path):
    # benchmarks/cpu_gap.py (and top -H, perf) split the job's CPU by these names.
    def names():
        out = []
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/comm") as f:
                    out.append(f.read().strip())
            except OSError:
                pass
        return out
    # A small staging buffer and 3 epochs: the workers wait for room, so they still run when listed.
    with hdmlp.Job(images, batch_size=7, epochs=3, transforms=train_chain(), seed=5,
                   config_path=write_config(tmp_path / "named.cfg", 2, capacity_mb=0.15)) as job:
        next(iter(job.epoch_batches(0)))
        running = names()
    assert sorted(n for n in running if n.startswith("hdmlp-stage-")) == ["hdmlp-stage-0", "hdmlp-stage-1"], running


def test_batch_memory_lives_as_long_as_a_tensor_and_is_reused_after(images, tmp_path):
    # A small staging buffer: the workers run at most a few samples ahead.
    job = hdmlp.Job(images, batch_size=4, epochs=3, transforms=train_chain(), seed=2,
                    config_path=write_config(tmp_path / "small.cfg", 2, capacity_mb=0.15))
    loader = HDMLPDataLoader(HDMLPImageFolder(images, job))
    kept, kept_copy, row = None, None, None
    addresses = []
    for epoch in range(3):
        for b, (x, _) in enumerate(loader):
            addresses.append(x.data_ptr())
            if epoch == 0 and b == 0:
                kept, kept_copy = x, x.clone()
                row = x[1]  # a view keeps the whole batch alive too
            del x
    # 24 batches later, the first batch's memory was never written again.
    assert torch.equal(kept, kept_copy)
    del kept
    assert torch.equal(row, kept_copy[1])
    # Released batches are reused: far fewer buffers than batches.
    assert len(addresses) == 24
    assert job._job.batch_allocations < 12
    assert len(set(addresses)) < 12


def test_uint8_output_for_normalising_on_the_gpu(images):
    job = hdmlp.Job(images, batch_size=8, epochs=1, seed=1,
                    transforms=[T.ImgDecode(), T.Resize(36), T.CenterCrop(32), T.ToUint8("HWC")])
    x, y = next(iter(HDMLPDataLoader(HDMLPImageFolder(images, job))))
    assert x.dtype == torch.uint8 and x.shape == (8, 32, 32, 3)
    assert job.sample_shape == ([32, 32, 3], "uint8")


def test_impossible_chains_are_refused_when_the_job_is_created(images):
    with pytest.raises(ValueError, match="ImgDecode"):
        hdmlp.Job(images, 8, 1, transforms=[T.RandomResizedCrop(32), T.ToTensor()])
    with pytest.raises(ValueError, match="CenterCrop"):
        hdmlp.Job(images, 8, 1, transforms=[T.ImgDecode(), T.Resize((32, 32)), T.CenterCrop(64), T.ToTensor()])
    # torchvision's op is a Python callable now (issue 16): it runs in worker processes, with a hint.
    from hdmlp.python_transforms import split_chain
    with pytest.warns(RuntimeWarning, match="hdmlp.transforms.ToTensor does the same in C\\+\\+"):
        assert split_chain([T.ImgDecode(), TV.ToTensor()]).callables[0].__class__ is TV.ToTensor
    with pytest.raises(ValueError, match="on_error"):
        hdmlp.Job(images, 8, 1, transforms=train_chain(), on_error="ignore")


def _png(side, value=0):
    buf = io.BytesIO()
    Image.new("L", (side, side), value).save(buf, "PNG")
    return buf.getvalue()


def test_chain_without_a_fixed_size_takes_the_first_images_size(tmp_path):
    root = tmp_path / "mnist"
    for c in range(2):
        (root / f"c{c}").mkdir(parents=True)
        for i in range(6):
            (root / f"c{c}" / f"{i}.png").write_bytes(_png(28, 40 * i + c))
    chain = [T.ImgDecode(), T.ToTensor()]
    job = hdmlp.Job(root, batch_size=4, epochs=1, transforms=chain, seed=1)
    shapes = {tuple(x.shape[1:]) for x, _ in HDMLPDataLoader(HDMLPImageFolder(root, job))}
    assert shapes == {(3, 28, 28)}
    job.close()

    odd = root / "c1" / "odd.png"
    odd.write_bytes(_png(30))
    job = hdmlp.Job(root, batch_size=4, epochs=1, transforms=chain, seed=1, index_cache=False)
    with pytest.raises(ValueError, match=r"odd\.png.*(30|size)"):
        for _ in HDMLPDataLoader(HDMLPImageFolder(root, job)):
            pass
    job.close()
    job = hdmlp.Job(root, batch_size=4, epochs=1, transforms=chain, seed=1, index_cache=False, on_error="skip")
    delivered = sum(len(y) for _, y in HDMLPDataLoader(HDMLPImageFolder(root, job)))
    assert delivered == 12 and job.metrics()["skipped_samples"] == 1


@pytest.fixture(scope="module")
def good_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("good") / "data"
    make_image_folder(root, num_images=20, num_classes=2, seed=3, min_side=80, max_side=160)
    return root


def bad_files(good_jpeg: bytes) -> dict[str, bytes]:
    sof = good_jpeg.index(b"\xff\xc0")
    png = _png(40)
    return {
        "corrupt.jpg": good_jpeg[: sof + 4] + bytes([99]) + good_jpeg[sof + 5:],  # data precision 99
        "truncated.jpg": good_jpeg[: len(good_jpeg) // 2],
        "empty.jpg": b"",
        "text.jpg": b"not an image",
        "bomb.png": png[:16] + (100000).to_bytes(4, "big") * 2 + png[24:],  # 10^10 pixels announced
    }


def copy_with_bad(good_folder, dest, names):
    """The good folder plus the named bad files, spread over the classes; returns (root, good, bad paths)."""
    root = dest / "mixed"
    shutil.copytree(good_folder, root)
    good = sorted(str(p) for p in root.rglob("*.JPEG"))
    files = bad_files(open(good[0], "rb").read())
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    bad_paths = []
    for k, name in enumerate(names):
        path = root / classes[k % len(classes)] / name
        path.write_bytes(files[name])
        bad_paths.append(str(path))
    return root, good, bad_paths


@pytest.fixture
def with_bad_images(good_folder, tmp_path):
    return copy_with_bad(good_folder, tmp_path, list(bad_files(b"\xff\xc0" * 4)))


@pytest.mark.parametrize("name", ["corrupt.jpg", "truncated.jpg", "empty.jpg", "text.jpg", "bomb.png"])
def test_each_bad_image_raises_naming_the_file(good_folder, tmp_path, name):
    root, _, (bad,) = copy_with_bad(good_folder, tmp_path, [name])
    job = hdmlp.Job(root, batch_size=4, epochs=1, transforms=train_chain(), seed=1, index_cache=False)
    loader = HDMLPDataLoader(HDMLPImageFolder(root, job))
    with pytest.raises(ValueError) as info:
        for _ in loader:
            pass
    assert bad in str(info.value)
    job.close()


def test_skip_leaves_bad_images_out_and_keeps_every_step(with_bad_images, capfd):
    root, good, bad_paths = with_bad_images
    job = hdmlp.Job(root, batch_size=7, epochs=2, transforms=train_chain(), seed=1, index_cache=False,
                    on_error="skip")
    paths = [p for p, _ in job.samples]
    for epoch in range(2):
        delivered, sizes = [], []
        for ids, labels, x in batches(job, epoch):
            assert x.shape[0] == len(ids)
            assert torch.isfinite(x).all()
            delivered += [paths[i] for i in ids]
            sizes.append(len(ids))
        assert sorted(delivered) == sorted(good), f"epoch {epoch}: every valid sample exactly once"
        # 25 files in batches of 7: 4 steps (7, 7, 7, 4), all taken and none empty; a hole
        # takes a sample from the last batch while that keeps one, else its batch is shorter.
        assert len(sizes) == len(HDMLPDataLoader(HDMLPImageFolder(root, job))) == 4
        assert all(s >= 1 for s in sizes) and sizes[-1] <= 4
        assert all(s == 7 or sizes[-1] == 1 for s in sizes[:-1]), sizes
        assert sum(sizes) == 20
    metrics = job.metrics()
    assert metrics["skipped_samples"] == 10
    assert [e["skipped"] for e in metrics["epochs"]] == [5, 5]
    assert len(metrics["skipped"]) == 5 and all(any(p in m for m in metrics["skipped"]) for p in bad_paths)
    err = capfd.readouterr().err
    for p in bad_paths:
        assert err.count(p) == 1, f"{p} must be logged once"


def test_pin_memory(images):
    if torch.cuda.is_available():
        job = hdmlp.Job(images, 8, 1, transforms=train_chain(), pin_memory=True)
        x, _ = next(iter(HDMLPDataLoader(HDMLPImageFolder(images, job))))
        assert x.is_pinned() and job.pin_memory
    else:
        with pytest.warns(RuntimeWarning, match="pin_memory=True ignored"):
            job = hdmlp.Job(images, 8, 1, transforms=train_chain(), pin_memory=True)
        assert not job.pin_memory
        x, _ = next(iter(HDMLPDataLoader(HDMLPImageFolder(images, job))))
        assert x.shape == (8, 3, 48, 48)


def test_per_stage_timers_account_for_the_epoch(images, tmp_path):
    """metrics() says where each epoch's time went: the loader's Python side, the consumer's
    step, the C++ consumer's stall and assembly, and the workers' read, decode and hand-off."""
    step = 0.03
    job = hdmlp.Job(images, batch_size=8, epochs=2, transforms=train_chain(), seed=1,
                    config_path=write_config(tmp_path / "t.cfg", 2))
    loader = HDMLPDataLoader(HDMLPImageFolder(images, job))
    batches_seen = 0
    t0 = time.perf_counter()
    for _ in loader:
        time.sleep(step)  # the training step
        batches_seen += 1
    wall = time.perf_counter() - t0
    e0, e1 = job.metrics()["epochs"]
    assert batches_seen == 4 and e0["samples"] == 30
    assert e0["consumer_seconds"] >= 4 * step * 0.99  # every step, measured between batches
    parts = e0["next_batch_seconds"] + e0["python_seconds"] + e0["consumer_seconds"]
    assert parts <= wall * 1.001 and wall - parts < 0.5  # they add up to the pass
    # The C++ call's stall and assembly happen inside what Python saw of it.
    assert 0 < e0["stall_seconds"] + e0["assembly_seconds"] <= e0["next_batch_seconds"] * 1.001
    assert e0["transform_seconds"] > 0 and e0["read_seconds"] > 0 and e0["handoff_wait_seconds"] >= 0
    # The chain's CPU, on the workers' clocks: real work, never more than the wall time it took.
    assert 0 < e0["transform_cpu_seconds"] <= e0["transform_seconds"] * 1.01 + 0.01
    assert all(e1[k] == 0.0 for k in ("next_batch_seconds", "consumer_seconds", "python_seconds"))  # not iterated
    assert job.metrics()["staging"]["threads"] == job.num_workers == 2
    job.close()


def test_auto_staging_threads_follow_the_usable_cpus(images, tmp_path):
    usable = hdmlp._core.cpu_budget()["usable_cpus"]
    assert usable == len(os.sched_getaffinity(0)) or hdmlp._core.cpu_budget()["quota_cpus"] > 0
    cfg = tmp_path / "auto.cfg"
    cfg.write_text('storage_classes = ( { capacity = 64; threads = "auto"; } );\n')
    with hdmlp.Job(images, 8, 1, transforms=train_chain(), config_path=str(cfg)) as job:
        assert job.num_workers == usable  # decoding: one worker per usable CPU
    with hdmlp.Job(images, 8, 1, config_path=str(cfg)) as job:
        assert job.num_workers == max(usable, 4)  # raw bytes: the workers wait for reads
    with hdmlp.Job(images, 8, 1, transforms=train_chain()) as job:  # the default config says "auto"
        assert job.num_workers == usable
    with hdmlp.Job(images, 8, 1, transforms=train_chain(), config_path=write_config(tmp_path / "3.cfg", 3)) as job:
        assert job.num_workers == 3  # an explicit number is kept
    with hdmlp.Job(images, 8, 1, transforms=train_chain(), config_path=str(cfg), num_workers=5) as job:
        assert job.num_workers == 5  # and so is num_workers, over "auto"
