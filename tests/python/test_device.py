"""Batches on a device (hdmlp.device): the same code path on the CPU, the CUDA parts where a GPU is."""
import weakref

import pytest
import torch

import hdmlp
import hdmlp.numpy
import hdmlp.transforms as T
from hdmlp.datasets import make_image_folder
from hdmlp.device import DeviceFeeder, FloatTail, Streams
from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (torch.cuda.is_available() "
                                                                  "is False on this machine)")


def chain(tail=("ToTensor", "Normalize")):
    ops = [T.ImgDecode(), T.RandomResizedCrop(24), T.RandomHorizontalFlip()]
    ends = {"ToTensor": T.ToTensor(), "Normalize": T.Normalize(MEAN, STD), "ToUint8": T.ToUint8(),
            "RandomErasing": T.RandomErasing(p=1.0)}
    return ops + [ends[t] for t in tail]


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("device") / "data"
    make_image_folder(root, num_images=22, num_classes=3, seed=5, min_side=40, max_side=90)
    return root


def loader(root, device=None, loader_device=None, batch_size=4, epochs=2, seed=9, transforms=None, **kw):
    job = hdmlp.Job(root, batch_size, epochs, transforms=transforms or chain(), seed=seed, device=device, **kw)
    return job, HDMLPDataLoader(HDMLPImageFolder(root, job), device=loader_device)


def run(dl):
    return [(x.clone(), y.clone()) for x, y in dl]


def assert_same_batches(got, expected, atol=0.0):
    assert len(got) == len(expected)
    for (x, y), (ex, ey) in zip(got, expected):
        assert torch.equal(y.cpu(), ey)
        assert x.dtype == ex.dtype and x.shape == ex.shape
        assert torch.allclose(x.cpu(), ex, rtol=0, atol=atol), (x.cpu() - ex).abs().max()


def test_uint8_hand_off_with_normalise_on_the_device_equals_the_float_chain(images):
    cpu_job, cpu = loader(images)
    expected = run(cpu)
    job, dev = loader(images, device="cpu")
    # The workers stop at 8-bit images; ToTensor and Normalize run on the device.
    assert job.sample_shape == ([3, 24, 24], "uint8")
    assert job.device == torch.device("cpu") and dev.device == torch.device("cpu")
    got = run(dev)
    assert_same_batches(got, expected, atol=1e-6)
    assert got[0][0].dtype == torch.float32
    # Without Normalize: ToTensor alone on the device.
    _, plain = loader(images, transforms=chain(("ToTensor",)))
    _, moved = loader(images, device="cpu", transforms=chain(("ToTensor",)))
    assert_same_batches(run(moved), run(plain), atol=1e-7)
    cpu_job.close()
    job.close()


def test_float_hand_off_and_chains_that_cannot_move_are_delivered_as_written(images):
    _, cpu = loader(images)
    job, dev = loader(images, device="cpu", handoff="float")
    assert job.sample_shape == ([3, 24, 24], "float32")
    assert_same_batches(run(dev), run(cpu))
    # RandomErasing works on the float tensor: the chain stays, by default...
    erasing = chain(("ToTensor", "Normalize", "RandomErasing"))
    _, cpu = loader(images, transforms=erasing)
    job, dev = loader(images, device="cpu", transforms=erasing)
    assert job.sample_shape[1] == "float32"
    assert_same_batches(run(dev), run(cpu))
    # ... and asking for the 8-bit hand-off says why not.
    with pytest.raises(ValueError, match="RandomErasing"):
        hdmlp.Job(images, 4, 1, transforms=erasing, device="cpu", handoff="uint8")
    # A ToUint8 chain gives uint8 tensors on the device, as on the host.
    _, cpu = loader(images, transforms=chain(("ToUint8",)))
    job, dev = loader(images, device="cpu", transforms=chain(("ToUint8",)))
    got = run(dev)
    assert got[0][0].dtype == torch.uint8
    assert_same_batches(got, run(cpu))


def test_a_device_given_to_the_loader_becomes_the_jobs_before_its_first_pass(images):
    _, cpu = loader(images)
    expected = run(cpu) + run(cpu)  # both epochs
    job, dev = loader(images, loader_device="cpu")
    assert job.device == torch.device("cpu") and job.sample_shape[1] == "uint8"
    assert_same_batches(run(dev) + run(dev), expected, atol=1e-6)
    # After a pass the job keeps its chain (a warning says so) and still delivers on the device.
    job = hdmlp.Job(images, 4, 2, transforms=chain(), seed=9)
    first = [(x.clone(), y.clone()) for x, y in HDMLPDataLoader(HDMLPImageFolder(images, job))]
    assert_same_batches(first, expected[:len(first)])
    with pytest.warns(RuntimeWarning, match="after the job's first pass"):
        late = HDMLPDataLoader(HDMLPImageFolder(images, job), device="cpu")
    assert job.sample_shape[1] == "float32"
    assert_same_batches(run(late), expected[len(first):])


def test_channels_last_layout(images):
    _, cpu = loader(images)
    expected = run(cpu)
    for device_kw in ({"device": "cpu"}, {"device": "cpu", "handoff": "float"}):
        job = hdmlp.Job(images, 4, 2, transforms=chain(), seed=9, **device_kw)
        dl = HDMLPDataLoader(HDMLPImageFolder(images, job), channels_last=True)
        got = []
        for x, y in dl:
            assert x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()
            got.append((x.clone(), y.clone()))
        assert_same_batches(got, expected, atol=1e-6)
    hwc = chain()[:3] + [T.ToUint8("HWC")]
    with pytest.raises(ValueError, match="already channels-last"):
        HDMLPDataLoader(HDMLPImageFolder(images, hdmlp.Job(images, 4, 1, transforms=hwc)), device="cpu",
                        channels_last=True)
    job = hdmlp.Job(images, 4, 1, transforms=chain(), seed=9)
    with pytest.raises(ValueError, match="channels_last needs a device"):
        next(job.batches(channels_last=True))
    with pytest.raises(ValueError, match="channels_last=True needs a device"):
        HDMLPDataLoader(HDMLPImageFolder(images, job), channels_last=True)


@pytest.mark.parametrize("handoff", ["uint8", "float"])
def test_batches_kept_across_iterations_stay_valid(images, handoff):
    job, dl = loader(images, device="cpu", handoff=handoff, epochs=3)
    kept = []
    for epoch in range(3):
        for b, (x, y) in enumerate(dl):
            if b in (0, 2):
                kept.append((x, x.clone(), y, y.clone()))
    for x, x_copy, y, y_copy in kept:  # three epochs later, nothing was written into them
        assert torch.equal(x, x_copy) and torch.equal(y, y_copy)


def test_breaking_out_and_resuming_follow_the_batches_handed_out(images):
    _, cpu = loader(images, epochs=2)
    reference = run(cpu) + run(cpu)  # both epochs
    per_epoch = len(reference) // 2
    job, dl = loader(images, device="cpu", epochs=2)
    got = []
    for x, y in dl:
        got.append((x.clone(), y.clone()))
        if len(got) == 2:
            break
    # The feeder took batches ahead of these two; the position is the two handed out.
    state = job.state_dict()
    assert (state["epoch"], state["batches"]) == (0, 2)
    job.close()
    assert job.state_dict()["batches"] == 2
    resumed = hdmlp.Job(images, 4, 2, transforms=chain(), resume=state, device="cpu")
    dl = HDMLPDataLoader(HDMLPImageFolder(images, resumed))
    got += run(dl)
    assert resumed.state_dict() == {**state, "epoch": 1, "batches": 0, "position": 0}
    got += run(dl)
    assert_same_batches(got, reference, atol=1e-6)
    # A break, then the next pass: the next epoch, whole.
    job, dl = loader(images, device="cpu", epochs=2)
    for _ in zip(range(1), dl):
        pass
    assert job.state_dict()["batches"] == 1
    assert_same_batches(run(dl), reference[per_epoch:], atol=1e-6)


def test_job_batches_on_a_device(images):
    with hdmlp.Job(images, 4, 1, transforms=chain(), seed=9) as job:
        expected = [(b.ids, b.index, torch.from_dlpack(b.samples).clone()) for b in job.batches()]
    with hdmlp.Job(images, 4, 1, transforms=chain(), seed=9) as job:
        got = list(job.batches(device="cpu", ahead=1))
        assert job.device == torch.device("cpu")
    assert [(b.ids, b.index, b.epoch) for b in got] == [(ids, i, 0) for ids, i, _ in expected]
    for b, (_, _, x) in zip(got, expected):
        assert isinstance(b.samples, torch.Tensor) and b.labels.dtype == torch.int64
        assert torch.allclose(b.samples, x, rtol=0, atol=1e-6)
    # Raw bytes: a list of tensors per batch, copied as they are.
    with hdmlp.Job(images, 4, 1, seed=9) as job:
        raw = [[s.clone() for s in b.samples] for b in job.batches(device="cpu")]
    with hdmlp.Job(images, 4, 1, seed=9) as job:
        host = [[torch.from_dlpack(s).clone() for s in b.samples] for b in job.batches()]
    assert all(torch.equal(a, b) for ra, rb in zip(raw, host) for a, b in zip(ra, rb))


def test_staging_threads_leave_the_training_process_a_core(images):
    with hdmlp.Job(images, 4, 1, transforms=chain()) as plain, \
            hdmlp.Job(images, 4, 1, transforms=chain(), device="cpu") as on_device:
        assert on_device.num_workers == max(1, plain.num_workers - 1)
    with hdmlp.Job(images, 4, 1, transforms=chain(), device="cpu", num_workers=3) as job:
        assert job.num_workers == 3  # a number given is kept


def test_bad_device_arguments_say_what_to_do(images):
    with pytest.raises(ValueError, match="handoff='float' needs a device"):
        hdmlp.Job(images, 4, 1, transforms=chain(), handoff="float")
    with pytest.raises(ValueError, match="handoff='uint8': the job has no C.. transform chain"):
        hdmlp.Job(images, 4, 1, device="cpu", handoff="uint8")
    hdmlp.Job(images, 4, 1, transforms=chain(("ToUint8",)), device="cpu", handoff="uint8").close()  # uint8 already
    with pytest.raises(ValueError, match="handoff must be"):
        hdmlp.Job(images, 4, 1, transforms=chain(), device="cpu", handoff="half")
    with pytest.raises(ValueError, match="not a device torch knows"):
        hdmlp.Job(images, 4, 1, transforms=chain(), device="gpu0")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="torch.cuda is not available.*device='cpu'"):
            hdmlp.Job(images, 4, 1, transforms=chain(), device="cuda")
    job = hdmlp.Job(images, 4, 1, transforms=chain(), seed=1)
    with pytest.raises(ValueError, match="ahead"):
        HDMLPDataLoader(HDMLPImageFolder(images, job), device="cpu", ahead=-1)
    with pytest.raises(TypeError, match="channels_last must be a bool"):
        HDMLPDataLoader(HDMLPImageFolder(images, job), device="cpu", channels_last="yes")
    assert job.device is None  # refused before the job took the device
    with pytest.raises(ValueError, match="delivers its batches on cpu"):
        next(hdmlp.numpy.batches(hdmlp.Job(images, 4, 1, transforms=chain(), device="cpu")))


class ManualStreams(Streams):
    """Events that complete only when the test says so: the GPU's copies, slowed down at will."""

    def __init__(self):
        self.done_events, self.synchronized, self.next_event = set(), [], 0

    def record(self):
        self.next_event += 1
        return self.next_event

    def done(self, event):
        return event in self.done_events

    def synchronize(self, event):
        self.synchronized.append(event)
        self.done_events.add(event)


def test_host_memory_is_released_only_when_its_copy_is_done():
    alive = []  # a weak reference to each host batch the feeder took
    streams = ManualStreams()
    handed = []

    def host_batches():  # made as taken, held by nothing but the feeder
        for i in range(5):
            host = torch.full((2, 3, 4, 4), i, dtype=torch.uint8)
            alive.append(weakref.ref(host))
            yield host, torch.tensor([i, i]), i

    feeder = DeviceFeeder(host_batches(), torch.device("cpu"), tail=FloatTail(), ahead=2, on_hand_out=handed.append,
                          streams=streams)
    batches = iter(feeder)
    x, y, extra = next(batches)
    assert extra == 0 and handed == [0] and x.dtype == torch.float32 and torch.all(x == 0)
    # Batch 0 is handed over, 1 and 2 are in flight; no copy has completed, so all three are held.
    assert [a() is not None for a in alive] == [True, True, True]
    x, _, _ = next(batches)
    assert torch.all(x == torch.tensor(1 / 255, dtype=torch.float32)) and alive[0]() is not None  # never handed back while a copy may read it
    streams.done_events.add(1)  # batch 0's copy completes
    next(batches)
    assert alive[0]() is None and all(a() is not None for a in alive[1:])  # released on the next step
    batches.close()  # a break: waits for every copy in flight, then drops the host batches
    assert sorted(streams.synchronized) == [2, 3, 4, 5]
    assert all(a() is None for a in alive)
    assert handed == [0, 1, 2]


@CUDA
def test_batches_on_a_cuda_device(images):
    _, cpu = loader(images)
    expected = run(cpu)
    job, dev = loader(images, device="cuda", epochs=2)
    assert job.pin_memory and job.sample_shape[1] == "uint8"
    got = []
    for x, y in dev:
        assert x.is_cuda and y.is_cuda
        got.append((x.clone(), y.clone()))
    torch.cuda.synchronize()
    assert_same_batches(got, expected, atol=1e-5)


def test_python_transforms_and_arrays_are_copied_as_they_are(images, tmp_path):
    import transform_fns as F
    from conftest import make_h5
    kw = dict(transforms=[T.ImgDecode(), T.Resize((8, 8)), F.mean_pixel], python_workers=1, seed=4)
    with hdmlp.Job(images, 4, 1, **kw) as job:
        expected = [(torch.from_dlpack(b.samples).clone(), b.ids) for b in job.batches()]
    with hdmlp.Job(images, 4, 1, device="cpu", **kw) as job:
        got = [(b.samples.clone(), b.ids) for b in job.batches()]
    assert [ids for _, ids in got] == [ids for _, ids in expected]
    assert all(torch.equal(a, b) for (a, _), (b, _) in zip(got, expected))
    make_h5(tmp_path / "a.h5", n=9)
    with hdmlp.Job(tmp_path / "a.h5", 4, 1, seed=1) as job:
        arrays = [(torch.from_dlpack(b.samples).clone(), torch.from_dlpack(b.labels).clone()) for b in job.batches()]
    with hdmlp.Job(tmp_path / "a.h5", 4, 1, seed=1, device="cpu") as job:
        assert_same_batches([(b.samples, b.labels) for b in job.batches()], arrays)


@pytest.mark.parametrize("old, new", [("hdmlp.device_decode", "hdmlp.device.decode"),
                                      ("hdmlp.nvjpeg", "hdmlp.device.nvjpeg")])
def test_the_old_module_names_are_the_device_packages_modules_and_warn(old, new, monkeypatch):
    """hdmlp.device_decode and hdmlp.nvjpeg moved into hdmlp.device (docs/migrating.md): the old names still
    import, as the very modules (so setting RESIZE_DTYPE or patching through them works), with a warning."""
    import importlib
    import sys
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: import {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert getattr(hdmlp, old.split(".")[1]) is module
