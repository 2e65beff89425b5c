"""Issue 16: Python transforms run in a pool of worker processes fed through shared memory.

The transforms the workers run live in transform_fns.py (spawned workers import them).
Every Job here starts its own workers (about half a second), so each test does several
things with few jobs.
"""
import hashlib
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import hdmlp
import hdmlp.transforms as T
import transform_fns as F
from conftest import make_folder
from hdmlp import _core
from hdmlp.datasets import make_image_folder
from hdmlp.python_transforms import PYTHON_KEY_DOMAIN, TransformError, split_chain

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("pyimages") / "data"
    make_image_folder(root, num_images=29, num_classes=3, seed=5, min_side=40, max_side=90)
    return root


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    """Files of random bytes (some empty): {relpath: sha256}."""
    root = tmp_path_factory.mktemp("pyraw") / "data"
    return root, make_folder(str(root))


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_gone(pids, seconds=10.0):
    deadline = time.monotonic() + seconds
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def mix64(z):
    m = 2**64 - 1
    z = (z + 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


def test_a_job_knows_hdmlps_ops_by_name_without_importing_hdmlp_transforms():
    """The chain split tells torchvision's namesakes of hdmlp's ops apart by name (transform_base.cpp_op),
    without importing hdmlp.transforms (which imports it): `import hdmlp` alone fills that table."""
    code = ("import sys, hdmlp\nfrom hdmlp.transform_base import cpp_op\n"
            "print(cpp_op('RandomHorizontalFlip').__module__, cpp_op('ToPIL'), cpp_op('Transform'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=HERE, check=True).stdout
    assert out.split() == ["hdmlp.transforms", "None", "None"]  # ToPIL is a Python transform; Transform the base
    assert T.ToPIL is hdmlp.python_transforms.ToPIL and T.Transform is hdmlp.transform_base.Transform


def test_chain_split_and_its_errors(images, tmp_path):
    assert split_chain(None) is None
    assert split_chain([T.ImgDecode(), T.ToTensor()]) is None  # all C++: the staging threads run it
    chain = split_chain([T.ImgDecode(), T.Resize(8), F.identity])
    assert [op for op, _ in chain.cpp_specs] == ["ImgDecode", "Resize", "ToUint8"]  # HWC uint8 for the callable
    assert chain.cpp_specs[-1][1]["layout"] == [1.0] and chain.callables == [F.identity]
    assert [op for op, _ in split_chain([T.ImgDecode(), T.ToTensor(), F.identity]).cpp_specs] == ["ImgDecode",
                                                                                              "ToTensor"]
    assert split_chain(F.sha256).cpp_specs == []
    with pytest.raises(TypeError, match="C\\+\\+ ops come first"):
        split_chain([F.identity, T.ToTensor()])
    with pytest.raises(TypeError, match="transform 1 is a builtins.int, neither"):
        split_chain([T.ImgDecode(), 3])
    with pytest.raises(ValueError, match="ImgDecode"):  # the C++ part is checked at once
        split_chain([T.Resize(8), F.identity])
    hidden = [None]
    torchvision = pytest.importorskip("torchvision")
    with pytest.warns(RuntimeWarning, match="torchvision's RandomHorizontalFlip runs in Python worker processes; "
                                            "hdmlp.transforms.RandomHorizontalFlip does the same in C\\+\\+"):
        split_chain([T.ImgDecode(), torchvision.transforms.RandomHorizontalFlip()])

    def local(x):  # not importable by a spawned worker
        return hidden[0]
    try:
        import cloudpickle  # noqa: F401
    except ImportError:
        with pytest.raises(TypeError, match="cannot be pickled .* module level"):
            split_chain(local)
    # A transform the workers cannot import fails when the Job is made, with the worker's traceback.
    module = tmp_path / "gone_transforms.py"
    module.write_text("def f(x):\n    return x\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import gone_transforms
    finally:
        sys.path.remove(str(tmp_path))
    with pytest.raises(TypeError, match="could not load f: define the transforms in a module(.|\n)*"
                                        "No module named 'gone_transforms'"):
        hdmlp.Job(images, 4, 1, transforms=gone_transforms.f, python_workers=1, seed=0, index_cache=False)
    # A source of arrays (HDF5) is refused with a Python transform, which takes file bytes.
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "arrays.h5", "w") as f:
        f["data"] = np.zeros((4, 2), np.float32)
        f["label"] = np.arange(4)
    with pytest.raises(ValueError, match="this source holds arrays \\(HDF5\\), which Python transforms do not take"):
        hdmlp.Job(tmp_path / "arrays.h5", 2, 1, seed=0, transforms=F.identity, python_workers=1)
    with pytest.raises(ValueError, match="python_start_method must be 'spawn' or 'forkserver'"):
        hdmlp.Job(os.path.join(HERE), 1, 1, transforms=F.identity, python_start_method="fork", seed=0,
                  index_cache=False)


def test_python_part_gives_the_cpp_chains_results_and_skip_rule(tmp_path):
    """A C++ prefix + identity in the workers = the same chain in the staging threads: the same ids per batch,
    the same pixels bit for bit, the same skipped samples and holes filled from the epoch's end (job.h's rule)."""
    root = make_image_folder(tmp_path / "data", num_images=37, num_classes=3, seed=3, min_side=40, max_side=90)
    rng = random.Random(1)
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))
    for p in rng.sample(files, 7):
        p.write_bytes(b"not an image" if rng.random() < 0.5 else p.read_bytes()[:40])
    chain = [T.ImgDecode(), T.RandomResizedCrop(12), T.RandomHorizontalFlip(), T.ToTensor(),
             T.Normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.3])]
    kw = dict(batch_size=6, epochs=3, seed=11, on_error="skip", index_cache=False)
    with hdmlp.Job(root, transforms=chain, **kw) as cpp, \
            hdmlp.Job(root, transforms=chain + [F.identity], python_workers=2, **kw) as py:
        for epoch in range(3):
            if epoch == 1:  # a break in the middle: the next epoch is whole on both
                for job in (cpp, py):
                    next(job.batches(epoch))
                continue
            a, b = list(cpp.batches(epoch)), list(py.batches(epoch))
            assert [x.ids for x in a] == [x.ids for x in b]
            assert len(a) == cpp.batches_per_epoch and all(len(x) >= 1 for x in a)
            for x, y in zip(a, b):
                assert np.asarray(y.samples).dtype == np.float32
                assert np.array_equal(np.asarray(x.samples), np.asarray(y.samples))
                assert np.array_equal(np.asarray(x.labels), np.asarray(y.labels))
            delivered = [i for x in b for i in x.ids]
            assert len(delivered) == len(set(delivered)) == 30  # each good sample once
        mc, mp = cpp.metrics(), py.metrics()
        assert mc["skipped_samples"] == mp["skipped_samples"] > 0
        assert sorted(mc["skipped"]) == sorted(mp["skipped"])  # the same files, the decoder's same words
        assert mp["epochs"][0]["transform_seconds"] > 0 and mp["epochs"][0]["samples"] == 30


def test_skip_keeps_every_step_on_every_rank_with_a_failing_python_callable(monkeypatch, tmp_path):
    """issue 12's test, with the bad images found by a Python callable (PIL) instead of the C++ decoder."""
    root = make_image_folder(tmp_path / "data", num_images=23, num_classes=2, seed=2, min_side=40, max_side=60)
    classes = sorted(p for p in root.iterdir() if p.is_dir())
    for name in ("aaa0.jpg", "aaa1.jpg", "aaa2.jpg", "aaa3.jpg", "aaa4.jpg", "aaa5.jpg"):
        (classes[0] / name).write_bytes(b"not an image")
    jobs = []
    for rank in range(2):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # peers' caches are off
            jobs.append(hdmlp.Job(root, batch_size=8, epochs=1, seed=1, shuffle=False, index_cache=False,
                                  transforms=[T.ToPIL(), F.pil_mean], on_error="skip", python_workers=1))
    try:
        sizes = [[len(b) for b in job.batches(0)] for job in jobs]
        assert sizes == [[2, 4, 4, 1], [3, 4, 4, 1]], sizes
        assert sum(j.metrics()["skipped_samples"] for j in jobs) == 6
        assert all("UnidentifiedImageError" in s for j in jobs for s in j.metrics()["skipped"])
    finally:
        for j in jobs:
            j.close()


def test_skip_pads_a_batch_of_only_bad_samples_with_a_python_callable(tmp_path):
    """Issue 26's padding rule in the Python stage: a batch with no good sample left repeats a good one."""
    root = make_image_folder(tmp_path / "data", num_images=12, num_classes=1, seed=4, min_side=40, max_side=60)
    files = sorted(root.rglob("*.JPEG"))
    for k in (0, 1, 2, 3, 9, 10, 11):  # batch 0 is all bad, and so is all but position 8 of the last
        files[k].write_bytes(b"not an image")
    with hdmlp.Job(root, batch_size=4, epochs=1, seed=1, shuffle=False, index_cache=False,
                   transforms=[T.ToPIL(), F.pil_mean], on_error="skip", python_workers=1) as job:
        ids = [list(b.ids) for b in job.batches(0)]
        # No sample was delivered before batch 0: a later good one (position 4, the first) is repeated.
        assert [len(b) for b in ids] == [1, 4, 1], ids
        flat = [i for b in ids for i in b]
        assert sorted(set(flat)) == [4, 5, 6, 7, 8] and len(flat) == 6
        assert job.metrics()["padded_samples"] == 1


def test_skip_with_a_python_chain_keeps_the_samples_of_a_cut_tar_shard(tmp_path):
    """Issue 26: on_error="skip" counts and names a cut shard with Python transforms too."""
    from conftest import make_tar_shards
    root = make_image_folder(tmp_path / "data", num_images=12, num_classes=2, seed=4, min_side=40, max_side=60)
    make_tar_shards(root, tmp_path / "tars", shards=2)
    shard = tmp_path / "tars" / "shard-001.tar"
    shard.write_bytes(shard.read_bytes()[:512 * 5])
    with hdmlp.Job(str(tmp_path / "tars"), batch_size=4, epochs=1, seed=1, index_cache=False,
                   transforms=[T.ToPIL(), F.pil_mean], on_error="skip", python_workers=1) as job:
        assert 6 <= len(job) < 12
        assert sum(len(b) for b in job.batches(0)) == len(job)
        m = job.metrics()
        # The sample the cut falls in, and what followed it (unknown without an index cache: one entry).
        assert m["skipped_samples"] == len(m["skipped"]) >= 1
        assert all("shard-001.tar' is cut short" in entry for entry in m["skipped"]), m["skipped"]


def seed_like_a_worker(seed, epoch, sample):
    """What a worker does before each call (the documented derivation, util/random.h's DeriveKey)."""
    import torch
    key = 0x6A09E667F3BCC909
    for w in (seed, epoch, sample, PYTHON_KEY_DOMAIN):
        key = mix64(key ^ mix64(w))
    assert key == _core.derive_key([seed, epoch, sample, PYTHON_KEY_DOMAIN])
    random.seed(_core.derive_key([key, 0]))
    np_key = _core.derive_key([key, 1])
    np.random.seed([np_key & 0xFFFFFFFF, np_key >> 32])
    torch.manual_seed(_core.derive_key([key, 2]))


def test_seeds_come_from_seed_epoch_sample_whatever_the_worker_count(raw):
    root, digests = raw
    kw = dict(batch_size=7, epochs=2, seed=21, index_cache=False, transforms=F.draws)
    rows = []
    for workers in (1, 3):
        with hdmlp.Job(root, python_workers=workers, **kw) as job:
            rows.append({e: {i: tuple(r) for b in job.batches(e) for i, r in zip(b.ids, np.asarray(b.samples))}
                         for e in range(2)})
            paths = [p for p, _ in job.samples]
    assert rows[0] == rows[1]
    for epoch in range(2):
        for sample, (r, n, t, first) in rows[0][epoch].items():
            seed_like_a_worker(21, epoch, sample)
            assert (r, n) == (random.random(), np.random.rand()) and r != n
            assert t == -1.0  # torch is not loaded in these workers (test_topil_... checks its seeding)
            with open(paths[sample], "rb") as f:
                data = f.read()
            assert first == (data[0] if data else -1.0)
    assert rows[0][0] != rows[0][1]  # another epoch, other draws
    assert len({r[:2] for r in rows[0][0].values()}) == len(digests)  # another sample, other draws


def test_callables_get_file_bytes_and_batches_collate_or_list(raw):
    root, digests = raw
    with hdmlp.Job(root, batch_size=8, epochs=2, seed=2, index_cache=False, transforms=F.sha256,
                   python_workers=2) as job:
        seen = {}
        for batch in job.batches():
            x = np.asarray(batch.samples)
            assert x.shape == (len(batch), 32) and x.dtype == np.uint8
            assert list(np.asarray(batch.labels)) == [job.targets[i] for i in batch.ids]
            seen.update({i: bytes(row).hex() for i, row in zip(batch.ids, x)})
        paths = [os.path.relpath(p, root) for p, _ in job.samples]
        assert {paths[i]: h for i, h in seen.items()} == digests
        # The same batches through hdmlp.torch: tensors on the workers' memory.
        import torch
        from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder
        loader = HDMLPDataLoader(HDMLPImageFolder(root, job))
        loader.set_epoch(1)
        again = set()
        for x, y in loader:
            assert isinstance(x, torch.Tensor) and x.dtype == torch.uint8 and x.shape[1:] == (32,)
            assert y.dtype == torch.int64 and len(y) == len(x)
            again.update(tuple(r.tolist()) for r in x)
        assert {bytes(k).hex() for k in again} == set(digests.values())
    # Results that are not arrays, big ones, arrays of varying shape: a list per batch.
    with hdmlp.Job(root, batch_size=16, epochs=1, seed=2, index_cache=False, transforms=F.mixed,
                   python_workers=2) as job:
        paths = [p for p, _ in job.samples]
        kinds = set()
        for batch in job.batches():
            assert isinstance(batch.samples, list) and len(batch.samples) == len(batch.ids)
            for i, got in zip(batch.ids, batch.samples):
                with open(paths[i], "rb") as f:
                    want = F.expected_mixed(f.read())
                kinds.add(type(want).__name__)
                if isinstance(want, np.ndarray):
                    assert type(got).__name__ == "OwnedBuffer" and np.array_equal(np.asarray(got), want)
                else:
                    assert got == want
        assert kinds == {"tuple", "dict", "ndarray"}


def test_topil_feeds_torchvision_as_imagefolder_does(images):
    """ToPIL + a random torchvision chain = ImageFolder + the chain with torch seeded as documented; its torch
    tensors are collated as arrays."""
    tv = pytest.importorskip("torchvision.transforms")
    from PIL import Image
    compose = tv.Compose([tv.RandomResizedCrop(16, scale=(0.2, 1.0)), tv.RandomHorizontalFlip(), tv.ToTensor()])
    with hdmlp.Job(images, batch_size=10, epochs=2, seed=4, index_cache=False, python_workers=1,
                   transforms=[T.ImgDecode(), T.ToPIL(), compose]) as job:
        paths = [p for p, _ in job.samples]
        for epoch in range(2):
            for batch in job.batches(epoch):
                x = np.asarray(batch.samples)
                assert x.shape == (len(batch), 3, 16, 16) and x.dtype == np.float32
                for row, i in zip(x, batch.ids):
                    with Image.open(paths[i]) as img:
                        seed_like_a_worker(4, epoch, i)
                        ref = compose(img.convert("RGB")).numpy()
                    assert np.array_equal(row, ref), paths[i]  # hdmlp's decode is PIL's, bit for bit
    with hdmlp.Job(images, batch_size=10, epochs=1, seed=4, index_cache=False, python_workers=1,
                   transforms=[T.ImgDecode(), T.CenterCrop(8), F.needs_pil]) as job:
        with pytest.raises(TransformError, match=r"ImgDecode, CenterCrop, needs_pil\) raised AttributeError") as e:
            next(job.batches())
        assert "shape (8, 8, 3) and type uint8; if it wants a PIL image, put hdmlp.transforms.ToPIL()" in str(e.value)
        assert e.value.path in [p for p, _ in job.samples]


def test_errors_name_the_file_and_show_the_workers_traceback(raw):
    root, _ = raw
    with hdmlp.Job(root, batch_size=4, epochs=1, seed=3, index_cache=False, transforms=F.fail_on_odd_first_byte,
                   python_workers=2) as job:
        paths = [p for p, _ in job.samples]
        good, failed = [], 0
        job._begin_epoch(0)
        while True:  # as the loaders do: after an error the epoch goes on with the next batch
            try:
                batch = job._next_batch(0)
            except TransformError as e:
                failed += 1
                assert e.path in paths and e.exc_type == "KeyError" and "odd first byte" in str(e)
                assert f"'{e.path}'" in str(e) and "fail_on_odd_first_byte" in e.worker_traceback
                assert "Worker traceback" in str(e) and "transform_fns.py" in str(e)
                assert type(e.__cause__).__name__ == "_RemoteTraceback"
                continue
            if batch is None:
                break
            good.append(batch)
        assert failed >= 1 and good, (failed, len(good))
        assert failed + len(good) == job.batches_per_epoch  # a failed batch is skipped, the others delivered


def test_workers_stop_on_close_break_exit_and_ctrl_c(raw, tmp_path):
    root, _ = raw
    job = hdmlp.Job(root, batch_size=4, epochs=3, seed=3, index_cache=False, transforms=F.sha256, python_workers=2)
    pids = job._python.pids
    assert len(pids) == 2 and all(alive(p) for p in pids)
    for epoch in range(2):
        it = job.batches(epoch)
        next(it)
        del it  # as a break does: the pass ends, and the next epoch starts whole
    assert len([i for b in job.batches(2) for i in b.ids]) == len(job)
    job.close()
    assert wait_gone(pids, 1.0) == []  # joined by close, not left to exit
    with pytest.raises(RuntimeError, match="closed"):
        job.batches(2)
    # A worker that dies (out of memory) is named, and the job still closes.
    job = hdmlp.Job(root, batch_size=4, epochs=1, seed=3, index_cache=False, transforms=F.slow, python_workers=2)
    os.kill(job._python.pids[1], signal.SIGKILL)
    with pytest.raises(RuntimeError, match="worker 1 .*killed by signal 9"):
        for _ in job.batches():
            pass
    job.close()
    # Exit without close, and Ctrl-C while waiting: no worker outlives the process.
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {HERE!r})
        import hdmlp, transform_fns
        if __name__ == "__main__":
            job = hdmlp.Job({str(root)!r}, batch_size=4, epochs=1, seed=3, index_cache=False,
                            transforms=transform_fns.slow if sys.argv[1] == "wait" else transform_fns.sha256,
                            python_workers=2)
            print(*job._python.pids, flush=True)
            if sys.argv[1] == "wait":
                print("waiting", flush=True)
                for batch in job.batches():
                    time.sleep(0.2)
            else:
                next(job.batches())   # and leave without closing
    """))
    for mode in ("exit", "wait"):
        proc = subprocess.Popen([sys.executable, str(script), mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        child = [int(p) for p in proc.stdout.readline().split()]
        if mode == "wait":
            assert proc.stdout.readline().strip() == "waiting"
            time.sleep(0.5)
            proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert len(child) == 2
        if mode == "wait":
            assert proc.returncode != 0 and "KeyboardInterrupt" in err, err
        else:
            assert proc.returncode == 0, err
        assert wait_gone(child) == [], f"workers of the {mode} run outlived it"
    assert not [f for f in os.listdir("/dev/shm") if "hdmlp" in f]  # memfd segments have no name to leak


def test_a_transform_that_never_returns_is_ended_after_timeout_s(raw):
    """Issue 26: the wait for a worker's result has a per-sample deadline (the Job's timeout_s)."""
    root, _ = raw
    job = hdmlp.Job(root, batch_size=4, epochs=1, seed=3, index_cache=False, transforms=F.hang_on_odd_first_byte,
                    python_workers=2, timeout_s=1.5)
    pids = job._python.pids
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"hang_on_odd_first_byte did not return within 1.5 s \(timeout_s\) "
                                           r"on '.*'") as info:
        for _ in job.batches():
            pass
    assert time.monotonic() - started < 30
    path = str(info.value).split(" on '")[1].split("'")[0]
    with open(path, "rb") as f:
        assert f.read(1)[0] % 2 == 1  # the file it hung on
    assert len(wait_gone(pids, 5.0)) == 1  # that worker was ended; the other lives until close
    job.close()
    assert wait_gone(pids, 5.0) == []


def test_sys_exit_in_a_transform_is_a_transform_error_not_a_missing_main_guard(raw):
    root, _ = raw
    for fn, exc_type in ((F.exit_on_odd_first_byte, "SystemExit"), (F.interrupt_on_odd_first_byte,
                                                                    "KeyboardInterrupt")):
        with hdmlp.Job(root, batch_size=4, epochs=1, seed=3, index_cache=False, transforms=fn,
                       python_workers=1) as job:
            with pytest.raises(TransformError) as info:
                for _ in job.batches():
                    pass
            assert info.value.exc_type == exc_type and "__main__" not in str(info.value)
            assert all(alive(p) for p in job._python.pids)  # the worker goes on


def test_a_worker_killed_from_outside_is_named_never_a_bare_broken_pipe(raw):
    """Issue 26: 3 of 12 runs gave BrokenPipeError (the task was sent to the dead worker's pipe)."""
    root, _ = raw
    for _ in range(3):
        job = hdmlp.Job(root, batch_size=4, epochs=1, seed=3, index_cache=False, transforms=F.slow, python_workers=2)
        os.kill(job._python.pids[0], signal.SIGKILL)
        time.sleep(0.3)  # dead before the first task is sent to it
        with pytest.raises(RuntimeError, match=r"worker 0 .*killed by signal 9"):
            for _ in job.batches():
                pass
        job.close()


def test_resume_with_a_python_transform_goes_on_bit_for_bit(raw):
    """job.state_dict() mid-epoch and at an epoch boundary, resumed by Job(resume=) and by
    load_state_dict on a job that drew its own seed: the remaining batches (ids, index, draws) are
    the uninterrupted run's, since the workers seed from the state's seed."""
    root, _ = raw
    kw = dict(batch_size=6, epochs=2, index_cache=False, transforms=F.draws, python_workers=2)

    def rest(job, stop_after=None):
        out = []
        while job.next_epoch < job.epochs and len(out) != stop_after:
            for b in job.batches():
                out.append((b.epoch, b.index, tuple(b.ids), np.asarray(b.samples).tobytes()))
                if len(out) == stop_after:
                    break
        return out

    with hdmlp.Job(root, seed=21, **kw) as job:
        whole = rest(job)
        per_epoch = job.batches_per_epoch
    assert [(e, i) for e, i, *_ in whole] == [(e, i) for e in range(2) for i in range(per_epoch)]
    for k in (2, per_epoch):
        with hdmlp.Job(root, seed=21, **kw) as first:
            assert rest(first, stop_after=k) == whole[:k]
            state = first.state_dict()
        with hdmlp.Job(root, resume=state, **kw) as resumed:
            assert rest(resumed) == whole[k:]
        with hdmlp.Job(root, **kw) as other:  # seed=None: drawn, then the state's
            other.load_state_dict(state)
            assert other.seed == 21 and rest(other) == whole[k:]
