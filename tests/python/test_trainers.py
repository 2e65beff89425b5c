"""What PyTorch Lightning and Hugging Face Accelerate need from hdmlp, without a workaround.

The loader's attributes, an iterator that starts nothing until its first batch, an unbounded
evaluation Job, resume= with start_epoch, a Job whose world disagrees with the launcher's
environment, and hdmlp following another launcher when MPI was started by an application
(mpi4py) in a process no MPI launcher started. The two examples run on 2 CPU processes in
test_trainer_examples.py.
"""
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import hdmlp
from hdmlp import launcher
from hdmlp.torch import HDMLPBatchSampler, HDMLPDataLoader, HDMLPImageFolder, HDMLPSampler

from conftest import make_folder

_LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE",
                       "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "PMIX_RANK", "PMI_SIZE", "PMI_RANK",
                       "SLURM_NTASKS", "HDMLP_NO_MPI")


@pytest.fixture
def files(tmp_path):
    root = tmp_path / "data"
    make_folder(root, classes=3, per_class=(7, 5, 9), nested=False)  # 21 files
    return root


@pytest.fixture
def clean_env(monkeypatch):
    for name in _LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def loader_for(root, **kw):
    job = hdmlp.Job(root, **kw)
    return job, HDMLPDataLoader(HDMLPImageFolder(root, job))


def test_the_attributes_trainers_read(files):
    job, loader = loader_for(files, batch_size=4, epochs=2, seed=1, drop_last_batch=True, index_cache=False)
    assert isinstance(loader.sampler, HDMLPSampler) and isinstance(loader.batch_sampler, HDMLPBatchSampler)
    assert loader.batch_sampler.sampler is loader.sampler
    assert (loader.batch_sampler.batch_size, loader.batch_sampler.drop_last) == (4, True)
    assert len(loader.batch_sampler) == len(loader) == 5 and loader.shuffle is True
    assert loader.dataset.job is job and loader.drop_last is True
    assert (loader.collate_fn, loader.worker_init_fn, loader.generator, loader.prefetch_factor) == (None,) * 4
    assert (loader.persistent_workers, loader.timeout, loader.multiprocessing_context) == (False, 0, None)
    planned = list(loader.batch_sampler)  # the next epoch's batches, from the plan: nothing is read
    assert [len(b) for b in planned] == [4] * 5 and sum(planned, []) == job.plan(0)[:20]
    assert job.metrics()["epochs"] == [] or all(e["samples"] == 0 for e in job.metrics()["epochs"])
    # What Lightning asks of a loader: is it shuffled (its batch_sampler's sampler is not a
    # SequentialSampler, nor a RandomSampler: Lightning then reports "not shuffled" and warns
    # only for a training loader that is a torch DataLoader).
    from torch.utils.data import RandomSampler, SequentialSampler
    assert not isinstance(loader.batch_sampler.sampler, (RandomSampler, SequentialSampler))
    delivered = []
    for images, labels in loader:
        delivered.append(labels.tolist())
    assert delivered == [[job.targets[i] for i in b] for b in planned]
    job.close()


def test_an_iterator_starts_nothing_until_its_first_batch(files):
    job, loader = loader_for(files, batch_size=4, epochs=2, seed=2, index_cache=False)
    before = loader.state_dict()
    for _ in range(3):
        it = iter(loader)  # what Lightning does to check a loader, then drops it
        del it
    assert loader.state_dict() == before and loader.epoch == 0 and job.next_epoch == 0
    unused = iter(loader)
    assert sum(len(labels) for _, labels in loader) == 21  # epoch 0, whole
    assert loader.epoch == 1 and loader.state_dict()["epoch"] in (0, 1)
    assert sum(len(labels) for _, labels in unused) == 21  # a made-earlier iterator: the next epoch
    with pytest.raises(RuntimeError, match="all 2 epochs"):
        next(iter(loader))
    job.close()


def test_an_unbounded_evaluation_job_takes_any_number_of_passes(files, clean_env):
    with pytest.raises(TypeError, match="epochs is required"):
        hdmlp.Job(files, batch_size=4)
    job, loader = loader_for(files, batch_size=4, epochs=None, shuffle=False, index_cache=False)
    assert job.epochs is None and len(loader) == 6
    sanity = iter(loader)
    next(sanity), next(sanity)  # a trainer's sanity check: two batches, then the iterator is dropped
    del sanity
    for validation in range(5):
        loader.set_epoch(validation)  # a trainer numbering the passes its own way: ignored, epochs are alike
        labels = [y for _, batch in loader for y in batch.tolist()]
        assert labels == job.targets  # index order, every sample once
    assert loader.epoch == 6
    loader.set_epoch(2)  # an earlier epoch: a shuffle=False job ignores it
    assert "epochs=None" in repr(job)
    job.close()
    shuffled, shuffled_loader = loader_for(files, batch_size=4, epochs=3, seed=1, index_cache=False)
    for _ in range(2):
        for _ in shuffled_loader:
            pass
    with pytest.raises(ValueError, match="cannot go back"):
        shuffled_loader.set_epoch(0)
    shuffled.close()


def test_resume_with_a_start_epoch_that_agrees(files):
    kw = dict(batch_size=4, epochs=3, seed=5, index_cache=False)
    with hdmlp.Job(files, **kw) as job:
        loader = HDMLPDataLoader(HDMLPImageFolder(files, job))
        for b, _ in enumerate(loader):  # epoch 0: 2 of its 6 batches
            if b == 1:
                mid = loader.state_dict()
                break
        rest = [labels.tolist() for _, labels in loader]  # epoch 1, for comparing
        end = loader.state_dict()  # after epoch 1's last batch
    with hdmlp.Job(files, resume=mid, start_epoch=0, **kw) as job:  # start_epoch 0: as if not given
        assert job.next_epoch == 0
    with pytest.raises(ValueError, match="start_epoch=1: they name different places"):
        hdmlp.Job(files, resume=mid, start_epoch=1, **kw)
    with hdmlp.Job(files, resume=end, start_epoch=2, **kw) as job:  # the state goes on in epoch 2
        assert job.next_epoch == 2
    with pytest.raises(ValueError, match="different places"):
        hdmlp.Job(files, resume=end, start_epoch=1, **kw)
    assert len(rest) == 6


def test_owned_buffer_labels_iterate_as_numbers(files):
    with hdmlp.Job(files, batch_size=4, epochs=1, seed=0, index_cache=False) as job:
        batch = next(job.batches())
        assert list(batch.labels) == batch.labels.tolist() == [job.targets[i] for i in batch.ids]
        assert all(type(y) is int for y in batch.labels)


def test_a_single_rank_job_where_the_environment_says_more_is_an_error(files, clean_env):
    clean_env.setenv("WORLD_SIZE", "2")  # Lightning's second process, a Job made in __init__
    with pytest.raises(ValueError, match=r"WORLD_SIZE=2.*setup\(\).*single_process=True"):
        hdmlp.Job(files, batch_size=4, epochs=1, seed=0, index_cache=False)
    with hdmlp.Job(files, batch_size=4, epochs=1, seed=0, index_cache=False, single_process=True) as job:
        assert job.world_size == 1 and len(list(job.batches())) == 6
    clean_env.delenv("WORLD_SIZE")
    clean_env.setenv("SLURM_NTASKS", "4")  # a batch script's one process, or srun without MPI: a warning
    with pytest.warns(RuntimeWarning, match=r"SLURM_NTASKS=4.*srun --mpi=pmix.*single_process=True"):
        hdmlp.Job(files, batch_size=4, epochs=1, seed=0, index_cache=False).close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hdmlp.Job(files, batch_size=4, epochs=1, seed=0, index_cache=False, single_process=True).close()
    with pytest.raises(TypeError, match="single_process must be a bool"):
        hdmlp.Job(files, batch_size=4, epochs=1, single_process=1)


def test_a_job_made_before_torch_distributed_started_fails_at_its_first_pass(files, clean_env, tmp_path):
    # As in a LightningDataModule.__init__ of Lightning's first process: then the launcher starts
    # torch.distributed (here a gloo group of 2 whose other rank is a second process).
    script = textwrap.dedent(f"""
        import os, sys, torch.distributed as dist, hdmlp
        from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder
        rank = int(sys.argv[1])
        job = hdmlp.Job({str(files)!r}, batch_size=4, epochs=1, seed=0, index_cache=False) if rank == 0 else None
        dist.init_process_group("gloo", init_method="file://{tmp_path}/rendezvous", rank=rank, world_size=2)
        if job is not None:
            it = iter(HDMLPDataLoader(HDMLPImageFolder({str(files)!r}, job)))
            try:
                next(it)
            except RuntimeError as e:
                print("ERROR", e)
        dist.barrier()
        dist.destroy_process_group()
    """)
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_VARIABLES}
    # cwd: not the checkout, whose hdmlp/ folder would shadow the installed package.
    procs = [subprocess.Popen([sys.executable, "-c", script, str(r)], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert "ERROR this Job was created for 1 rank" in outs[0][0]
    assert "torch.distributed now says this process is rank 0 of 2" in outs[0][0]
    assert "LightningDataModule.setup()" in outs[0][0]


def test_a_process_another_launcher_started_inside_mpirun_is_refused_before_mpi_starts(files, clean_env):
    # Lightning without mpi4py under `mpirun -np 2`: its second process inherits rank 0's mpirun
    # environment. MPI's own start-up would fail ("orte_init failed"); hdmlp says what to do first.
    for name, value in (("OMPI_COMM_WORLD_SIZE", "2"), ("OMPI_COMM_WORLD_RANK", "0"),
                        ("OMPI_COMM_WORLD_LOCAL_RANK", "0"), ("LOCAL_RANK", "1")):
        clean_env.setenv(name, value)
    world, use_mpi = None, None
    with pytest.raises(ValueError, match=r"LOCAL_RANK=1.*pip install mpi4py.*HDMLP_NO_MPI=1"):
        world, use_mpi = launcher.resolve(False, mpi_active=True)
    clean_env.setenv("RANK", "1")
    clean_env.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match=r"rank 0 by OMPI_COMM_WORLD_RANK but 1 by the RANK/WORLD_SIZE.*pip install mpi4py"):
        launcher.resolve(False, mpi_active=True)
    # The same numbers from both launchers (Lightning with mpi4py under mpirun): MPI it is.
    clean_env.setenv("RANK", "0")
    clean_env.setenv("LOCAL_RANK", "0")
    world, use_mpi = launcher.resolve(False, mpi_active=True)
    assert use_mpi and world.world_size == 2


def test_mpi_started_by_an_application_gives_way_to_the_launcher(clean_env):
    # mpi4py imported under Lightning's launcher or torchrun: MPI is initialised as a world of one
    # in a process no MPI launcher started; hdmlp follows RANK/WORLD_SIZE (or torch.distributed).
    clean_env.setenv("RANK", "1")
    clean_env.setenv("WORLD_SIZE", "2")
    world, use_mpi = launcher.resolve(False, mpi_active=True)
    assert not use_mpi and (world.rank, world.world_size) == (1, 2)
    clean_env.delenv("RANK")
    clean_env.delenv("WORLD_SIZE")
    world, use_mpi = launcher.resolve(False, mpi_active=True)  # no other launcher: MPI's world of one
    assert world is None and use_mpi
    assert launcher.resolve(True, mpi_active=True) == (None, False)  # single_process: neither


def test_mpi_initialised_by_the_application_under_torch_distributed_env(files, clean_env, tmp_path):
    """End to end: MPI initialised in each process (as `import mpi4py.MPI` does) without mpirun, two
    ranks from RANK/WORLD_SIZE: each reads its half, no 'MPI says rank 0 of 1' error."""
    script = textwrap.dedent(f"""
        import ctypes, ctypes.util, json, sys
        import hdmlp
        from hdmlp import _core
        lib = None
        for name in ("libmpi.so.40", "libmpi.so.12", "libmpi.so"):
            try:
                lib = ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
                break
            except OSError:
                continue
        if lib is None:
            print("NOMPI"); sys.exit(0)
        provided = ctypes.c_int(0)
        if lib.MPI_Init_thread(None, None, 3, ctypes.byref(provided)) != 0:
            print("NOMPI"); sys.exit(0)
        assert _core.in_mpi_job()
        with hdmlp.Job({str(files)!r}, batch_size=4, epochs=1, seed=3, index_cache=False) as job:
            ids = [i for b in job.batches() for i in b.ids]
            print(json.dumps({{"rank": job.rank, "world": job.world_size, "transport": job.transport, "ids": ids}}))
        lib.MPI_Finalize()
    """)
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_VARIABLES and not k.startswith("OMPI_")}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    procs = [subprocess.Popen([sys.executable, "-W", "ignore", "-c", script], cwd=tmp_path,
                              env={**env, "RANK": str(r), "WORLD_SIZE": "2"}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for r in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    if any("NOMPI" in o for o, _ in outs):
        pytest.skip("no MPI library to initialise as a singleton")
    assert [p.returncode for p in procs] == [0, 0], outs
    import json
    results = [json.loads(o.strip().splitlines()[-1]) for o, _ in outs]
    assert [(r["rank"], r["world"], r["transport"]) for r in results] == [(0, 2, "none"), (1, 2, "none")]
    assert sorted(results[0]["ids"] + results[1]["ids"]) == list(range(21))
