"""A Job's arguments as one frozen value (job_arguments.parse), its chain's plan (chain_plan.plan_chain), and
the core's options bound as a struct (_core.JobOptions, _core.Job(options))."""
import dataclasses
import os

import pytest

import hdmlp
import hdmlp._core as core
import hdmlp.transforms as T
from hdmlp.chain_plan import ChainPlan, plan_chain
from hdmlp.job_arguments import JobOptions, ThrottledStorage, parse
from hdmlp.plan import MAX_EPOCHS
from hdmlp.python_chain import PythonChain

from conftest import make_folder

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def arguments(path, **given):
    """parse()'s arguments as hdmlp.Job's defaults give them, with ``given`` instead."""
    defaults = dict(dataset_path=path, batch_size=4, epochs=2, distr_scheme="uniform", drop_last_batch=False,
                    transforms=None, seed=None, config_path=None, exchange_fraction=0.1, timeout_s=300.0,
                    read_timeout_s=None, storage=None, index_cache=True, on_error="raise", pin_memory=None,
                    batch_size_per_rank=None, shuffle=True, num_workers=None, source=None, source_options=None,
                    python_workers=None, python_start_method="forkserver", resume=None, start_epoch=0,
                    single_process=False, world=None, use_mpi=False)
    return {**defaults, **given}


def test_parse_returns_the_checked_arguments_as_a_frozen_value(tmp_path):
    options = parse(**arguments(tmp_path, epochs=None, exchange_fraction=1, source_options={"npy_as": "bytes"}))
    assert isinstance(options, JobOptions)
    assert options.dataset_path == str(tmp_path) and options.epochs is None and options.epoch_count == MAX_EPOCHS
    assert options.exchange_fraction == 1.0 and isinstance(options.exchange_fraction, float)
    assert options.config_path == hdmlp.default_config_path() and options.storage == ThrottledStorage()
    assert options.source_options == {"npy_as": "bytes"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.epochs = 3


@pytest.mark.parametrize("given, error, match", [
    (dict(batch_size=None), ValueError, "give exactly one of batch_size"),
    (dict(epochs=hdmlp.job_arguments.REQUIRED), TypeError, "epochs is required"),
    (dict(on_error="ignore"), ValueError, "on_error must be 'raise' or 'skip'"),
    (dict(source_options={"hdf5_sample": "x"}), ValueError, "unknown source option 'hdf5_sample'"),
    (dict(start_epoch=3), ValueError, "start_epoch"),
])
def test_parse_names_a_bad_argument(tmp_path, given, error, match):
    with pytest.raises(error, match=match):
        parse(**arguments(tmp_path, **given))


def test_plan_chain_splits_the_chain_where_it_runs(tmp_path):
    def plan(transforms, device=None, **given):
        return plan_chain(parse(**arguments(tmp_path, transforms=transforms, **given)), device)

    assert plan(None) == ChainPlan()  # file bytes: nothing to run
    cpp = plan([T.ImgDecode(), T.Resize(8), T.ToTensor(), T.Normalize(MEAN, STD)])
    assert [op for op, _ in cpp.specs] == ["ImgDecode", "Resize", "ToTensor", "Normalize"]
    assert cpp.python_chain is None and cpp.device is None and cpp.tail is None
    python = plan([T.ImgDecode(), os.fspath])
    assert isinstance(python.python_chain, PythonChain) and python.specs == []
    # A device cuts the float tail: the workers stop at 8-bit images and leave the training process a core.
    torch = pytest.importorskip("torch")
    on_cpu = plan([T.ImgDecode(), T.Resize(8), T.ToTensor(), T.Normalize(MEAN, STD)], "cpu", num_workers=2)
    assert [op for op, _ in on_cpu.specs] == ["ImgDecode", "Resize", "ToUint8"]
    assert on_cpu.device == torch.device("cpu") and on_cpu.tail is not None
    assert (on_cpu.spare_cores, on_cpu.staging_threads, on_cpu.pin_memory) == (1, 2, False)
    with pytest.raises(ValueError, match="handoff='float' needs a device"):
        plan([T.ImgDecode()], handoff="float")
    with pytest.raises(ValueError, match="transforms is an empty list"):
        plan([])


def test_core_job_opens_on_bound_options(tmp_path):
    root = tmp_path / "data"
    digests = make_folder(str(root))
    options = core.JobOptions()
    assert (options.batch_size, options.epochs, options.seed, options.transforms) == (1, 1, None, [])
    options.dataset_path, options.config_path = os.fsencode(root), hdmlp.default_config_path()
    options.batch_size, options.epochs, options.seed, options.use_mpi = 3, 2, 7, False
    options.transforms = [("ImgDecode", {})]
    assert options.transforms == [("ImgDecode", {})] and options.seed == 7
    options.transforms = []  # file bytes
    options.set_source_option("tar_label_ext", "cls")
    with pytest.raises(ValueError, match="nope"):
        options.set_source_option("nope", "x")
    job = core.Job(options)
    try:
        assert (job.seed, job.batch_size, job.source_kind) == (7, 3, "folder")
        job.begin_epoch(0)
        seen = []
        while (batch := job.next_batch()) is not None:
            seen += memoryview(batch[2]).tolist()
        assert sorted(seen) == list(range(len(digests)))
    finally:
        job.close()


def test_the_job_reads_its_arguments_from_its_options(tmp_path):
    root = tmp_path / "data"
    make_folder(str(root))
    with hdmlp.Job(root, 4, 3, distr_scheme="local", seed=1, timeout_s=30) as job:
        assert (job.dataset_path, job.epochs, job.distr_scheme, job.timeout_s) == (str(root), 3, "local", 30.0)
        assert (job.shuffle, job.drop_last_batch, job.on_error, job.device, job.transforms) == \
            (True, False, "raise", None, None)
