"""Decoding on the device (hdmlp.device.decode): the code path on the CPU, and on CUDA where a GPU is."""
import threading

import numpy as np
import pytest
import torch

import hdmlp
import hdmlp.transforms as T
from hdmlp.datasets import make_image_folder
from hdmlp.device.decode import plan_device_decode
from hdmlp.device.resize import resize_crops
from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (torch.cuda.is_available() "
                                                                  "is False on this machine)")
SIZE = 32


def chain(decode, end=("ToUint8",), flip=True):
    ends = {"ToTensor": T.ToTensor(), "Normalize": T.Normalize(MEAN, STD), "ToUint8": T.ToUint8()}
    return [decode, T.RandomResizedCrop(SIZE)] + ([T.RandomHorizontalFlip()] if flip else []) + \
        [ends[e] for e in end]


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("device_decode") / "data"
    make_image_folder(root, num_images=26, num_classes=3, seed=7, min_side=40, max_side=120)
    return root


def by_id(job, **kw):
    """{sample id: (image as a numpy array, label)} over one epoch, and the ids in delivery order."""
    out, order = {}, []
    for b in job.batches(**kw):
        samples = b.samples.cpu() if isinstance(b.samples, torch.Tensor) else torch.from_numpy(np.asarray(b.samples))
        labels = b.labels.cpu() if isinstance(b.labels, torch.Tensor) else torch.from_numpy(np.asarray(b.labels))
        for i, s, y in zip(b.ids, samples, labels):
            out[i] = (s.numpy().copy(), int(y))
            order.append(i)
    return out, order


def test_resize_crops_equals_pil_crop_resize_and_flip():
    from PIL import Image
    rng = np.random.default_rng(3)
    hwc = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in ((90, 70), (41, 130), (200, 160))]
    boxes = torch.tensor([[5, 3, 80, 60], [0, 10, 41, 100], [20, 30, 150, 110]])
    flips = torch.tensor([False, True, False])
    for size in ((24, 24), (48, 36), (160, 120)):  # shrinking, and enlarging the second
        chw = [torch.from_numpy(a).permute(2, 0, 1).contiguous() for a in hwc]
        got = resize_crops(chw, boxes, flips, size)
        assert torch.equal(got, resize_crops(chw, boxes, flips, size, group=2))  # groups padded apart: the same
        for a, (top, left, h, w), flip, g in zip(hwc, boxes.tolist(), flips.tolist(), got):
            ref = Image.fromarray(a).crop((left, top, left + w, top + h)).resize(size[::-1], Image.BILINEAR)
            if flip:
                ref = ref.transpose(Image.FLIP_LEFT_RIGHT)
            diff = np.abs(g.permute(1, 2, 0).numpy().astype(int) - np.asarray(ref).astype(int))
            # PIL rounds its weights to 22-bit fixed point; on noise that moves about 3% of values by 1
            assert diff.max() <= 1 and (diff > 0).mean() < 0.05, (size, diff.max(), (diff > 0).mean())


def test_half_precision_resize_is_within_a_level_of_float32():
    rng = np.random.default_rng(5)
    chw = [torch.from_numpy(rng.integers(0, 256, (3, h, w), dtype=np.uint8)) for h, w in ((300, 220), (120, 400))]
    boxes = torch.tensor([[10, 7, 280, 190], [0, 50, 120, 300]])
    flips = torch.tensor([True, False])
    full = resize_crops(chw, boxes, flips, (64, 48)).to(torch.int32)
    half = resize_crops(chw, boxes, flips, (64, 48), dtype=torch.float16).to(torch.int32)
    diff = (full - half).abs()
    assert diff.max() <= 1 and (diff > 0).float().mean() < 0.05, (diff.max(), (diff > 0).float().mean())


def test_apply_rows_and_crop_draws_equal_their_one_image_calls(images, tmp_path):
    pipeline = T.compile_pipeline(chain(T.ImgDecode()))
    files = sorted(p for p in images.glob("*/*") if p.is_file())[:9]
    data = [np.fromfile(f, dtype=np.uint8) for f in files]
    ids = list(range(100, 109))
    rows = np.empty((9, 3, SIZE, SIZE), dtype=np.uint8)
    pipeline.apply_rows(data, [str(f) for f in files], 3, 1, ids, rows, 4)
    for d, f, i, row in zip(data, files, ids, rows):
        buffer, shape = pipeline.apply(d, str(f), 3, 1, i)
        assert np.array_equal(np.frombuffer(buffer, dtype=np.uint8).reshape(shape), row)
    sizes = [(int(w), int(h)) for w, h in ((120, 90), (41, 77), (300, 200))]
    for (w, h), i, draw in zip(sizes, ids, pipeline.crop_draws(sizes, 3, 1, ids[:3])):
        one = {d["op"]: d for d in pipeline.random_draws(w, h, 3, 1, i)}
        crop = one["RandomResizedCrop"]
        assert tuple(draw) == (crop["top"], crop["left"], crop["height"], crop["width"],
                               int(one["RandomHorizontalFlip"]["flip"]))
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(files[1].read_bytes()[:300])
    with pytest.raises(ValueError, match="cut.jpg"):
        pipeline.apply_rows([data[0], np.fromfile(cut, dtype=np.uint8)], [str(files[0]), str(cut)], 3, 1, [0, 1],
                            rows, 2)
    with pytest.raises(ValueError, match="bytes, not the"):
        pipeline.apply_rows(data, [str(f) for f in files], 3, 1, ids, rows[:2], 2)


def test_decoding_on_the_device_path_matches_the_cpu_chain(images):
    cpu, _ = by_id(hdmlp.Job(images, 5, 1, transforms=chain(T.ImgDecode()), seed=4))
    job = hdmlp.Job(images, 5, 1, transforms=chain(T.ImgDecode(device="cpu")), seed=4)
    assert job.device == torch.device("cpu")
    got, order = by_id(job)
    assert sorted(order) == list(range(26))  # every sample once, none twice
    assert got.keys() == cpu.keys()
    diffs = np.stack([np.abs(got[i][0].astype(int) - cpu[i][0].astype(int)) for i in cpu])
    assert all(got[i][1] == cpu[i][1] for i in cpu)
    assert got[0][0].shape == (3, SIZE, SIZE) and got[0][0].dtype == np.uint8
    # libjpeg-turbo on both sides: only the resize's float rounding differs (at most 1 of 255, rarely).
    assert diffs.max() <= 1 and (diffs > 0).mean() < 0.03, (diffs.max(), (diffs > 0).mean())
    assert job.metrics()["device_decode"] == {"device": 26, "cpu": 0, "device_failed": 0, "jpeg_decoder": "torchvision"}


def test_hybrid_share_decodes_part_of_each_batch_with_the_cpu_chain(images):
    cpu, _ = by_id(hdmlp.Job(images, 6, 1, transforms=chain(T.ImgDecode()), seed=2))
    job = hdmlp.Job(images, 6, 1, transforms=chain(T.ImgDecode(device="cpu", cpu_share=0.5)), seed=2)
    got, order = by_id(job)
    assert sorted(order) == list(range(26))
    counts = job.metrics()["device_decode"]
    assert counts["device"] + counts["cpu"] == 26 and counts["cpu"] >= 12 and counts["device"] >= 12
    exact = sum(np.array_equal(got[i][0], cpu[i][0]) for i in cpu)
    assert exact >= counts["cpu"]  # the CPU's share is the C++ chain's output itself
    assert max(np.abs(got[i][0].astype(int) - cpu[i][0].astype(int)).max() for i in cpu) <= 1


def test_float_end_and_channels_last_through_the_loader(images):
    cpu_job = hdmlp.Job(images, 4, 1, transforms=chain(T.ImgDecode(), ("ToTensor", "Normalize")), seed=8)
    expected = [(x.clone(), y.clone()) for x, y in HDMLPDataLoader(HDMLPImageFolder(images, cpu_job))]
    job = hdmlp.Job(images, 4, 1, transforms=chain(T.ImgDecode(device="cpu"), ("ToTensor", "Normalize")), seed=8)
    loader = HDMLPDataLoader(HDMLPImageFolder(images, job), channels_last=True)
    got = list(loader)
    assert len(got) == len(expected)
    for (x, y), (ex, ey) in zip(got, expected):
        assert torch.equal(y, ey) and x.dtype == torch.float32 and x.shape == ex.shape
        assert x.is_contiguous(memory_format=torch.channels_last)
        # one level of 255, divided by the smallest std
        assert torch.allclose(x, ex, rtol=0, atol=1.01 / 255 / min(STD)), (x - ex).abs().max()


def test_files_the_device_cannot_decode_go_to_the_cpu_and_bad_ones_are_named(images, tmp_path):
    import shutil

    from PIL import Image
    root = tmp_path / "mixed"
    shutil.copytree(images, root)
    first_class = sorted(p for p in root.iterdir() if p.is_dir())[0]
    Image.fromarray(np.full((50, 60, 3), 120, np.uint8)).save(first_class / "zz_flat.png")
    job = hdmlp.Job(root, 9, 1, transforms=chain(T.ImgDecode(device="cpu")), seed=1)
    got, order = by_id(job)
    assert len(order) == 27
    counts = job.metrics()["device_decode"]
    assert counts["cpu"] == 1 and counts["device"] == 26
    png = [i for i, (img, _) in got.items() if (img == 120).all()]
    assert len(png) == 1
    # A JPEG cut short: the device's decoder gives up on it, the C++ chain names the file.
    victim = sorted(p for p in first_class.iterdir() if p.suffix != ".png")[0]
    victim.write_bytes(victim.read_bytes()[:200])
    job = hdmlp.Job(root, 9, 1, transforms=chain(T.ImgDecode(device="cpu")), seed=1)
    with pytest.raises(ValueError, match=victim.name):
        by_id(job)


def test_breaking_out_ends_the_decoder_threads(images):
    job = hdmlp.Job(images, 3, 2, transforms=chain(T.ImgDecode(device="cpu", cpu_share=0.3)), seed=3)
    for _ in zip(range(2), job.batches()):
        pass
    names = [t.name for t in threading.enumerate()]
    assert not any(n.startswith(("hdmlp-device-decode", "hdmlp-cpu-decode")) for n in names), names
    _, order = by_id(job)  # the next epoch still delivers every sample
    assert sorted(order) == list(range(26))


def test_chains_that_cannot_decode_on_the_device_say_what_to_do(images):
    with pytest.raises(ValueError, match="ColorJitter"):
        hdmlp.Job(images, 4, 1, transforms=[T.ImgDecode(device="cpu"), T.RandomResizedCrop(SIZE),
                                            T.ColorJitter(0.4), T.ToTensor()])
    with pytest.raises(ValueError, match="Resize"):
        hdmlp.Job(images, 4, 1, transforms=[T.ImgDecode(device="cpu"), T.Resize(40), T.CenterCrop(SIZE),
                                            T.ToTensor()])
    with pytest.raises(ValueError, match="bilinear"):
        hdmlp.Job(images, 4, 1, transforms=[T.ImgDecode(device="cpu"), T.RandomResizedCrop(SIZE, interpolation="bicubic"),
                                            T.ToTensor()])
    with pytest.raises(ValueError, match="differs from ImgDecode"):
        hdmlp.Job(images, 4, 1, transforms=chain(T.ImgDecode(device="cpu")), device="meta")
    with pytest.raises(ValueError, match="on_error='raise'"):
        hdmlp.Job(images, 4, 1, transforms=chain(T.ImgDecode(device="cpu")), on_error="skip")
    with pytest.raises(ValueError, match="Python transforms"):
        hdmlp.Job(images, 4, 1, transforms=[T.ImgDecode(device="cpu"), T.RandomResizedCrop(SIZE), abs])
    with pytest.raises(ValueError, match="cpu_share needs device"):
        T.ImgDecode(cpu_share=0.5)
    with pytest.raises(ValueError, match="cpu_share"):
        T.ImgDecode(device="cpu", cpu_share=1.5)
    plan = plan_device_decode([s for s in hdmlp.transforms.pipeline_specs(chain(T.ImgDecode(), ("ToTensor",)))], 0)
    assert plan.size == (SIZE, SIZE) and plan.tail is not None and plan.cpu_specs[-1][0] == "ToUint8"


@CUDA
def test_decoding_on_a_cuda_device_is_within_the_documented_tolerance(images):
    cpu, _ = by_id(hdmlp.Job(images, 5, 1, transforms=chain(T.ImgDecode()), seed=4))
    job = hdmlp.Job(images, 5, 1, transforms=chain(T.ImgDecode(device="cuda", cpu_share=0.2)), seed=4)
    got, order = by_id(job)
    assert sorted(order) == list(range(26))
    diffs = np.stack([np.abs(got[i][0].astype(int) - cpu[i][0].astype(int)) for i in cpu])
    # nvJPEG's IDCT and chroma upsampling are not libjpeg-turbo's: docs/gpu.md gives the measured spread.
    assert diffs.mean() < 2.0, diffs.mean()
    counts = job.metrics()["device_decode"]
    assert counts["device"] > 0 and counts["device"] + counts["cpu"] == 26


def test_which_files_the_device_decodes():
    import io

    from PIL import Image

    from hdmlp.device.decode import device_decodable

    def encoded(mode, fmt="JPEG", **kw):
        out = io.BytesIO()
        Image.new(mode, (30, 20), 90 if mode == "L" else (10, 20, 30, 40)[:len(mode)]).save(out, fmt, **kw)
        return torch.frombuffer(bytearray(out.getvalue()), dtype=torch.uint8)

    assert device_decodable(encoded("RGB"))
    assert device_decodable(encoded("L"))
    assert device_decodable(encoded("RGB", progressive=True))
    assert not device_decodable(encoded("CMYK"))  # the C++ chain converts CMYK as PIL does
    assert not device_decodable(encoded("RGB", "PNG"))
    whole = encoded("RGB")
    assert not device_decodable(whole[:-40].clone())  # cut short
    assert not device_decodable(torch.zeros(0, dtype=torch.uint8))
