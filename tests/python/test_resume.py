"""Stop and resume (issue 14): job.state_dict(), Job(resume=...), loaders that follow the job,
set_epoch across a resume, one pass at a time, elastic rank counts through launcher ranks.

Several ranks without MPI are several Jobs in this process, each told its rank by the
RANK/WORLD_SIZE environment (as in test_equal_steps.py); tests/python/test_mpi.py runs the
same under mpirun.
"""
import hashlib
import inspect
import json
import os
import subprocess
import sys
import textwrap
import warnings

import pytest

import hdmlp
import hdmlp.transforms as T
from hdmlp.datasets import make_image_folder
from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder

from conftest import make_folder


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """37 files of random bytes: uneven for every batch size below."""
    root = tmp_path_factory.mktemp("resume") / "data"
    make_folder(str(root), classes=3, per_class=(13, 11, 13))
    return root


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume_images") / "data"
    make_image_folder(root, num_images=22, num_classes=2, seed=5, min_side=40, max_side=70)
    return root


def digest(ids, labels, samples):
    """One hash per delivered batch: ids, labels and every byte of the samples."""
    h = hashlib.sha256(json.dumps(list(ids)).encode())
    h.update(bytes(memoryview(labels)))
    for s in samples if isinstance(samples, list) else [samples]:
        h.update(bytes(memoryview(s).cast("B")))
    return h.hexdigest()


def run(job, stop_after=None):
    """Hashes of the job's batches from where it stands to its end, or to `stop_after` batches."""
    out = []
    while job.next_epoch < job.epochs and len(out) != stop_after:
        for batch in job.epoch_batches(job.next_epoch):
            out.append(digest(*batch))
            if len(out) == stop_after:
                break
    return out


def chain():
    return [T.ImgDecode(), T.RandomResizedCrop(16), T.RandomHorizontalFlip(), T.ToTensor()]


@pytest.mark.parametrize("transforms", [False, True], ids=["bytes", "transforms"])
@pytest.mark.parametrize("drop_last", [False, True], ids=["keep_last", "drop_last"])
def test_resumed_job_delivers_the_remaining_batches_bit_for_bit(files, images, transforms, drop_last):
    root = images if transforms else files
    kw = dict(batch_size=5, epochs=3, drop_last_batch=drop_last, index_cache=False,
              transforms=chain() if transforms else None)
    with hdmlp.Job(root, seed=8, **kw) as job:
        whole = run(job)
        per_epoch = job.batches_per_epoch
    assert len(whole) == 3 * per_epoch
    # The first batch, mid-epoch, an epoch boundary, the last batch of the job.
    for k in (0, per_epoch + 2, 2 * per_epoch, 3 * per_epoch - 1):
        with hdmlp.Job(root, seed=8, **kw) as first:
            assert run(first, stop_after=k) == whole[:k]
            state = first.state_dict()
        assert (state["epoch"], state["batches"]) == divmod(k, per_epoch)
        state = json.loads(json.dumps(state))  # what a checkpoint file holds
        with hdmlp.Job(root, resume=state, **kw) as resumed:
            assert resumed.seed == 8
            assert run(resumed) == whole[k:], f"stopped after {k} batches"


def test_a_new_process_resumes_bit_for_bit(files, tmp_path):
    """The stop, the state in a file, and the resume in a fresh Python process."""
    kw = dict(batch_size=4, epochs=2, distr_scheme="partial_local", index_cache=False)
    with hdmlp.Job(files, seed=3, **kw) as job:
        whole = run(job)
    with hdmlp.Job(files, seed=3, **kw) as job:
        run(job, stop_after=7)
        (tmp_path / "state.json").write_text(json.dumps(job.state_dict()))
    # The helpers that hash what a job delivers, then the resume (no torch imported).
    script = "import hashlib, json\nimport hdmlp\n" + inspect.getsource(digest) + inspect.getsource(run)
    script += textwrap.dedent(f"""
        state = json.load(open({str(tmp_path / "state.json")!r}))
        with hdmlp.Job({str(files)!r}, resume=state, **{kw!r}) as job:
            print(json.dumps(run(job)))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == whole[7:]


def test_a_pack_resumes_bit_for_bit(files, tmp_path):
    """Any source: the state of a job over an hdmlp pack, resumed on the pack."""
    from hdmlp.pack import pack
    pack(files, tmp_path / "pack", shard_size=8 << 10, progress=False)
    kw = dict(batch_size=4, epochs=2, distr_scheme="local", index_cache=False)
    with hdmlp.Job(tmp_path / "pack", seed=2, **kw) as job:
        assert job.source == "pack"
        whole = run(job)
    with hdmlp.Job(tmp_path / "pack", seed=2, **kw) as job:
        run(job, stop_after=5)
        state = job.state_dict()
    with hdmlp.Job(tmp_path / "pack", resume=state, **kw) as job:
        assert run(job) == whole[5:]


def test_state_dict_is_small_json_and_survives_close(files):
    job = hdmlp.Job(files, batch_size=4, epochs=2, seed=1, index_cache=False)
    state = job.state_dict()
    assert state["format"] == "hdmlp.JobState" and state["version"] == 1
    assert (state["epoch"], state["batches"], state["position"]) == (0, 0, 0)
    assert (state["seed"], state["batch_size"], state["samples"], state["world_size"]) == (1, 4, 37, 1)
    assert len(json.dumps(state)) < 600
    it = job.epoch_batches(0)
    next(it), next(it), next(it)
    assert (job.state_dict()["batches"], job.state_dict()["position"]) == (3, 12)
    del it
    job.close()
    assert job.state_dict()["batches"] == 3  # the position at close
    # After an epoch's last batch, the state is the start of the next epoch.
    with hdmlp.Job(files, batch_size=4, epochs=2, seed=1, index_cache=False) as job:
        for _ in job.epoch_batches(0):
            pass
        assert (job.state_dict()["epoch"], job.state_dict()["batches"]) == (1, 0)


def test_refusals_name_the_difference_and_a_changed_config_is_fine(files, tmp_path):
    with hdmlp.Job(files, batch_size=4, epochs=2, seed=1, index_cache=False) as job:
        next(job.epoch_batches(0))
        state = job.state_dict()
    cases = [
        (dict(batch_size=8), "global batch size is 4, this job's is 8"),
        (dict(batch_size=4, distr_scheme="local"), "its distr_scheme is 'uniform', this job's is 'local'"),
        (dict(batch_size=4, seed=2), "its seed is 1, but this job was given seed=2"),
        (dict(batch_size=4, shuffle=False), "shuffle=True, this job shuffle=False"),
        (dict(batch_size=4, start_epoch=1), "but start_epoch=1: they name different places"),
    ]
    for kw, message in cases:
        with pytest.raises(ValueError, match=message.replace("(", r"\(")):
            hdmlp.Job(files, epochs=2, index_cache=False, resume=state, **kw)
    other = tmp_path / "other"
    make_folder(str(other), classes=3, per_class=(13, 11, 12))
    with pytest.raises(ValueError, match="from another dataset: 37 samples"):
        hdmlp.Job(other, batch_size=4, epochs=2, index_cache=False, resume=state)
    with pytest.raises(ValueError, match="not an hdmlp job state"):
        hdmlp.Job(files, batch_size=4, epochs=2, resume={"epoch": 1})
    with pytest.raises(TypeError, match="'batches' must be int"):
        hdmlp.Job(files, batch_size=4, epochs=2, resume=dict(state, batches="3"))
    # Another configuration, transform chain or number of epochs (not fewer than delivered) is fine.
    cfg = tmp_path / "small.cfg"
    cfg.write_text("storage_classes = ( { capacity = 0.01; threads = 1; } );\n")
    with hdmlp.Job(files, batch_size=4, epochs=5, config_path=str(cfg), index_cache=False, resume=state) as job:
        assert job.state_dict()["batches"] == 1 and job.state_dict()["epochs"] == 5


def test_new_loader_per_epoch_follows_the_job(files):
    job = hdmlp.Job(files, batch_size=4, epochs=3, seed=2, index_cache=False)
    dataset = HDMLPImageFolder(files, job)
    for epoch in range(3):
        loader = HDMLPDataLoader(dataset)  # a script that builds its loader inside the epoch loop
        assert loader.epoch == epoch and len(loader) == 10
        seen = sorted(i for _, labels in loader for i in labels.tolist())
        assert len(seen) == 37
        assert sorted(job.plan(epoch)) == list(range(37))
    with pytest.raises(RuntimeError, match="all 3 epochs of the job have been delivered"):
        next(iter(HDMLPDataLoader(dataset)))
    job.close()


def test_one_pass_at_a_time(files):
    job = hdmlp.Job(files, batch_size=4, epochs=3, seed=2, index_cache=False)
    loader = HDMLPDataLoader(HDMLPImageFolder(files, job))
    first = iter(loader)
    next(first)
    second = iter(loader)  # starts nothing yet
    with pytest.raises(RuntimeError, match="a pass over epoch 0 of this job is still open"):
        next(second)
    with pytest.raises(RuntimeError, match="still open"):
        next(iter(HDMLPDataLoader(HDMLPImageFolder(files, job))))
    with pytest.raises(RuntimeError, match="still open"):
        job.epoch_batches(1)
    assert loader.epoch == 0
    del first  # dropping the iterator ends the pass (as a break does)
    assert loader.epoch == 1
    for _ in loader:
        break
    assert sum(1 for _ in loader) == len(loader)  # epoch 2, whole
    job.close()


def test_set_epoch_and_the_first_pass_after_a_resume(files):
    kw = dict(batch_size=4, epochs=5, seed=6, index_cache=False)
    with hdmlp.Job(files, **kw) as job:
        loader = HDMLPDataLoader(HDMLPImageFolder(files, job))
        for _ in loader:
            pass
        for b, _ in enumerate(loader):  # epoch 1: stop after 3 batches
            if b == 2:
                mid = loader.state_dict()
                break
        assert loader.state_dict()["batches"] == 3  # after the break, as torchdata's StatefulDataLoader
        loader.set_epoch(2)  # the next epoch, after a pass broken off: it starts now
        boundary = loader.state_dict()
    assert (mid["epoch"], mid["batches"], boundary["epoch"], boundary["batches"]) == (1, 3, 2, 0)

    job = hdmlp.Job(files, resume=mid, **{k: v for k, v in kw.items() if k != "seed"})
    loader = HDMLPDataLoader(HDMLPImageFolder(files, job))
    assert loader.epoch == 1
    loader.set_epoch(1)  # the next epoch (the one the state was taken in): no-op
    loader.set_epoch(0)  # the one before it: no-op, as for a current epoch
    assert sum(1 for _ in loader) == len(loader) - 3  # the rest of epoch 1
    with pytest.raises(ValueError, match="cannot go back"):
        loader.set_epoch(0)
    loader.set_epoch(3)  # skips epoch 2 unread
    assert loader.epoch == 3 and loader.state_dict()["epoch"] == 3
    job.close()

    job = hdmlp.Job(files, resume=boundary, **kw)
    loader = HDMLPDataLoader(HDMLPImageFolder(files, job))
    loader.set_epoch(2)
    assert loader.epoch == 2 and sum(1 for _ in loader) == len(loader)
    job.close()


def test_load_state_dict_before_the_first_pass_and_start_epoch(files):
    kw = dict(batch_size=4, epochs=3, index_cache=False)
    with hdmlp.Job(files, seed=4, **kw) as job:
        whole = run(job)
    with hdmlp.Job(files, seed=4, **kw) as job:
        run(job, stop_after=13)
        state = job.state_dict()
    job = hdmlp.Job(files, seed=4, **kw)
    loader = HDMLPDataLoader(HDMLPImageFolder(files, job))
    loader.load_state_dict(state)  # torchdata's order: make the loader, then load its state
    assert loader.epoch == 1
    assert run(job) == whole[13:]
    with pytest.raises(RuntimeError, match="before the job's first pass"):
        loader.load_state_dict(state)
    job.close()
    # start_epoch=k is a state at the start of epoch k.
    with hdmlp.Job(files, seed=4, start_epoch=2, **kw) as job:
        assert run(job) == whole[20:]
    with pytest.warns(RuntimeWarning, match="start_epoch=1 without a seed"):
        hdmlp.Job(files, start_epoch=1, **kw).close()


def test_a_resumed_job_plans_its_caches_for_what_is_left(files, tmp_path):
    """The placement counts only the reads after the resume point."""
    cfg = tmp_path / "mem.cfg"
    cfg.write_text('storage_classes = ( { capacity = 1; threads = 1; },\n'
                   '  { backend = "memory"; capacity = 1; threads = 1; } );\n')
    kw = dict(batch_size=4, epochs=3, seed=9, index_cache=False, config_path=str(cfg))
    with hdmlp.Job(files, **kw) as job:
        assert job.metrics()["classes"][0]["planned_samples"] == 37
    # In the last batch of the last epoch only those 1 + 4 samples are left to read.
    last = {"epoch": 2, "batches": 8, "position": 32}
    with hdmlp.Job(files, **kw) as job:
        state = dict(job.state_dict(), **last)
    with hdmlp.Job(files, resume=state, **kw) as job:
        assert job.metrics()["classes"][0]["planned_samples"] == 5
        assert sum(len(ids) for ids, _, _ in job.epoch_batches(2)) == 5


def launcher_job(monkeypatch, rank, world, root, **kw):
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", str(world))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # peers' caches are off
        return hdmlp.Job(root, index_cache=False, **kw)


def global_batches(jobs, epoch, stop_after=None):
    """Per step, the union of the ranks' sample ids; every rank steps together."""
    passes = [j.epoch_batches(epoch) for j in jobs]
    steps = []
    while stop_after is None or len(steps) < stop_after:
        batches = [next(p, None) for p in passes]
        if batches[0] is None:
            assert all(b is None for b in batches), "the ranks took different numbers of steps"
            break
        assert all(b is not None and len(b[0]) >= 1 for b in batches), "an empty or missing step"
        steps.append(sorted(i for ids, _, _ in batches for i in ids))
        states = {json.dumps(j.state_dict(), sort_keys=True) for j in jobs}
        assert len(states) == 1, "the ranks hold different states after the same step"
    return steps


@pytest.mark.parametrize("scheme", ["uniform", "local", "partial_local"])
@pytest.mark.parametrize("old,new", [(4, 2), (4, 3), (2, 4)])
def test_elastic_resume_delivers_the_interrupted_epoch_once(monkeypatch, files, scheme, old, new):
    kw = dict(batch_size=8, epochs=2, distr_scheme=scheme, exchange_fraction=0.5)
    whole_jobs = [launcher_job(monkeypatch, r, old, files, seed=5, **kw) for r in range(old)]
    whole = [global_batches(whole_jobs, e) for e in range(2)]
    for j in whole_jobs:
        j.close()
    jobs = [launcher_job(monkeypatch, r, old, files, seed=5, **kw) for r in range(old)]
    before = global_batches(jobs, 0, stop_after=2)
    state = jobs[0].state_dict()
    for j in jobs:
        j.close()
    assert before == whole[0][:2] and state["world_size"] == old
    jobs = [launcher_job(monkeypatch, r, new, files, resume=state, **kw) for r in range(new)]
    rest = global_batches(jobs, 0)
    after = global_batches(jobs, 1)
    for j in jobs:
        j.close()
    # Every sample of the interrupted epoch once, across both runs; the remaining global
    # batches hold the samples they would have held (37 = 4 * 8 + 5 is never merged here).
    assert sorted(i for step in before + rest for i in step) == list(range(37))
    assert rest == whole[0][2:]
    if scheme == "uniform":
        assert after == whole[1]  # the same global batches after the switch
    else:
        # From the next epoch on, the shards are re-cut for the new rank count: the epoch is
        # the one a job of `new` ranks plans.
        fresh = [launcher_job(monkeypatch, r, new, files, seed=5, start_epoch=1, **kw) for r in range(new)]
        assert after == global_batches(fresh, 1)
        for j in fresh:
            j.close()
