"""hdmlp's nvJPEG decoder (hdmlp.device.nvjpeg, hdmlp._nvjpeg): the choice of decoder, the Python side's plumbing on the
CPU through a stand-in module, and the real decoder where a GPU is."""
import ctypes
import io
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

import hdmlp
import hdmlp.device.decode as dd
import hdmlp.transforms as T
from hdmlp.datasets import make_image_folder
from hdmlp.device.nvjpeg import NvjpegDecoder, status
from test_device_decode import by_id, chain  # the same chain and epoch reader as the device decode's tests

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (torch.cuda.is_available() "
                                                                  "is False on this machine)")


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    from PIL import Image
    root = tmp_path_factory.mktemp("nvjpeg") / "data"
    make_image_folder(root, num_images=22, num_classes=2, seed=5, min_side=40, max_side=110)
    first = sorted(p for p in root.iterdir() if p.is_dir())[0]
    Image.fromarray(np.full((50, 60, 3), 120, np.uint8)).save(first / "zz_flat.png")
    Image.fromarray(np.arange(48 * 64, dtype=np.uint8).reshape(48, 64)).save(first / "zz_gray.jpg")
    return root


class StandInModule:
    """hdmlp._nvjpeg's interface, decoding with libjpeg-turbo on the host: probe() reads each header (RGB JPEGs
    only, as the real one leaves grayscale to the CPU chain), decode() writes 3 planes at the given addresses."""

    class BatchDecoder:
        def __init__(self, backend: str) -> None:
            self.backend = "hardware" if backend == "auto" else backend
            self.batches: list[int] = []

        def probe(self, addresses, sizes):
            from PIL import Image
            out = []
            for address, size in zip(addresses, sizes):
                data = ctypes.string_at(address, size)
                try:
                    image = Image.open(io.BytesIO(data))
                    out.append((image.height, image.width,
                                image.format == "JPEG" and image.mode == "RGB" and data.endswith(b"\xff\xd9")))
                except Exception:
                    out.append((0, 0, False))
            return out

        def decode(self, addresses, sizes, shapes, outputs, stream):
            from torchvision.io import ImageReadMode, decode_jpeg
            assert stream == 0  # the CPU has no streams
            self.batches.append(len(addresses))
            for address, size, (h, w), out in zip(addresses, sizes, shapes, outputs):
                data = torch.frombuffer(bytearray(ctypes.string_at(address, size)), dtype=torch.uint8)
                image = decode_jpeg(data, mode=ImageReadMode.RGB).contiguous()
                assert tuple(image.shape) == (3, h, w)
                ctypes.memmove(out, image.data_ptr(), image.numel())


def test_the_decoders_plumbing_gives_torchvisions_images_and_sends_the_rest_to_the_cpu(images, monkeypatch):
    reference_job = hdmlp.Job(images, 7, 1, transforms=chain(T.ImgDecode(device="cpu", decoder="torchvision")),
                              seed=3)
    reference, _ = by_id(reference_job)
    decoder = NvjpegDecoder(torch.device("cpu"), module=StandInModule)
    monkeypatch.setattr(dd, "jpeg_decoder_for", lambda choice, device: (decoder, f"nvjpeg-{decoder.backend}"))
    job = hdmlp.Job(images, 7, 1, transforms=chain(T.ImgDecode(device="cpu", decoder="auto")), seed=3)
    got, order = by_id(job)
    assert sorted(order) == list(range(24))  # every sample once, none twice
    # The same decode underneath, and the batch's images read in place from one buffer: the very same values,
    # but for the grayscale JPEG, which the C++ chain decodes and resizes here (within a level of 255).
    exact = sum(np.array_equal(got[i][0], reference[i][0]) for i in reference)
    assert exact >= 23 and max(np.abs(got[i][0].astype(int) - reference[i][0].astype(int)).max() for i in got) <= 1
    counts = job.metrics()["device_decode"]
    # the decoder checks every file itself: the PNG and the grayscale JPEG are handed back, and go to the CPU
    assert counts == {"device": 22, "cpu": 2, "device_failed": 2, "jpeg_decoder": "nvjpeg-hardware"}
    assert sum(decoder._decoder.batches) == 22 and max(decoder._decoder.batches) <= 7


def test_decode_returns_none_for_what_the_backend_cannot_take(images):
    decoder = NvjpegDecoder(torch.device("cpu"), "gpu_hybrid", module=StandInModule)
    assert decoder.backend == "gpu_hybrid"
    files = sorted(p for p in images.glob("*/*") if p.is_file())
    png = next(f for f in files if f.suffix == ".png")
    jpegs = [f for f in files if f.suffix == ".JPEG"][:3]
    samples = [torch.from_numpy(np.fromfile(f, dtype=np.uint8)) for f in (jpegs[0], png, jpegs[1], jpegs[2])]
    out = decoder(samples, torch.device("cpu"))
    assert out[1] is None and all(o is not None for o in (out[0], out[2], out[3]))
    from torchvision.io import decode_jpeg
    for o, s in zip((out[0], out[2], out[3]), (samples[0], samples[2], samples[3])):
        assert torch.equal(o, decode_jpeg(s))
    # three images, one after the other in one buffer
    assert out[2].data_ptr() == out[0].data_ptr() + out[0].numel()
    assert decoder([samples[1]], torch.device("cpu")) == [None]
    assert decoder([samples[0][:-30].clone()], torch.device("cpu")) == [None]  # cut short: the CPU chain names it
    with pytest.raises(ValueError, match="contiguous uint8 tensor in host memory"):
        decoder([samples[0].to(torch.int32)], torch.device("cpu"))


def test_the_choice_of_decoder_is_checked():
    with pytest.raises(ValueError, match="decoder must be one of"):
        T.ImgDecode(device="cuda", decoder="nvjpg")
    with pytest.raises(ValueError, match="decoder needs device"):
        T.ImgDecode(decoder="nvjpeg")
    assert "decoder='nvjpeg:hardware'" in repr(T.ImgDecode(device="cuda", decoder="nvjpeg:hardware"))
    assert dd.jpeg_decoder_for("auto", torch.device("cpu"))[1] == "torchvision"
    assert dd.jpeg_decoder_for("torchvision", torch.device("cpu"))[1] == "torchvision"
    with pytest.raises(ValueError, match="needs a CUDA device"):
        dd.jpeg_decoder_for("nvjpeg", torch.device("cpu"))
    with pytest.raises(ValueError, match="use one of auto, hardware"):
        NvjpegDecoder(torch.device("cpu"), "fast", module=StandInModule)


def test_auto_takes_torchvisions_decoder_on_gpus_with_jpeg_engines_and_hdmlps_on_others(monkeypatch):
    import hdmlp.device.nvjpeg as nv
    cuda = torch.device("cuda")  # no GPU needed: the decoders are stand-ins

    def decoder_starting_as(backend):
        class StandIn:
            def __init__(self, device, wanted):
                if backend is None:
                    raise RuntimeError("no nvJPEG decoder could start (stand-in)")
                self.backend = backend if wanted == "auto" else wanted
        return StandIn

    monkeypatch.setattr(nv, "status", lambda: (True, "hdmlp._nvjpeg is available"))
    monkeypatch.setattr(nv, "NvjpegDecoder", decoder_starting_as("hardware"))
    assert dd.jpeg_decoder_for("auto", cuda)[1] == "torchvision"  # the same engines, torchvision's measured faster
    assert dd.jpeg_decoder_for("nvjpeg", cuda)[1] == "nvjpeg-hardware"
    assert dd.jpeg_decoder_for("nvjpeg:gpu_hybrid", cuda)[1] == "nvjpeg-gpu_hybrid"
    monkeypatch.setattr(nv, "NvjpegDecoder", decoder_starting_as("gpu_hybrid"))
    assert dd.jpeg_decoder_for("auto", cuda)[1] == "nvjpeg-gpu_hybrid"  # no engines: the GPU's Huffman decode
    monkeypatch.setattr(nv, "NvjpegDecoder", decoder_starting_as(None))
    with pytest.warns(RuntimeWarning, match="did not start"):
        assert dd.jpeg_decoder_for("auto", cuda)[1] == "torchvision"
    with pytest.raises(RuntimeError, match="could start"):
        dd.jpeg_decoder_for("nvjpeg", cuda)
    monkeypatch.setattr(nv, "status", lambda: (False, "hdmlp._nvjpeg is missing"))
    assert dd.jpeg_decoder_for("auto", cuda)[1] == "torchvision"


def test_status_says_why_the_decoder_is_missing_or_cannot_start():
    built, why = status()
    if not built:
        assert "hdmlp._nvjpeg" in why and "docs/gpu.md" in why, why
        with pytest.raises(RuntimeError, match="hdmlp._nvjpeg"):
            NvjpegDecoder(torch.device("cpu"))
    elif not torch.cuda.is_available():  # built here, but no GPU or driver: each backend's failure is named
        with pytest.raises(RuntimeError, match="no nvJPEG decoder could start.*hardware.*gpu_hybrid.*default"):
            NvjpegDecoder(torch.device("cpu"))
    else:
        assert NvjpegDecoder(torch.device("cuda")).backend in ("hardware", "gpu_hybrid", "default")


@CUDA
@pytest.mark.skipif(not status()[0], reason=f"hdmlp's nvJPEG decoder is not here: {status()[1]}")
def test_nvjpeg_on_the_gpu_matches_torchvisions_decode_and_the_cpu_chain(images, tmp_path):
    from torchvision.io import ImageReadMode, decode_jpeg
    root = tmp_path / "data"
    shutil.copytree(images, root)
    files = sorted(p for p in root.glob("*/*.JPEG"))
    samples = [torch.from_numpy(np.fromfile(f, dtype=np.uint8)) for f in files]
    hardware = NvjpegDecoder(torch.device("cuda"), "auto")
    if hardware.backend == "hardware":  # the same engines as torchvision's decoder: the very same pixels
        ours = hardware(samples, torch.device("cuda"))
        theirs = decode_jpeg(samples, mode=ImageReadMode.RGB, device="cuda")
        assert all(torch.equal(a, b) for a, b in zip(ours, theirs))
    cpu, _ = by_id(hdmlp.Job(root, 5, 1, transforms=chain(T.ImgDecode()), seed=4))
    for choice in ("nvjpeg", "nvjpeg:gpu_hybrid"):
        job = hdmlp.Job(root, 5, 1, transforms=chain(T.ImgDecode(device="cuda", decoder=choice)), seed=4)
        got, order = by_id(job)
        assert sorted(order) == list(range(24))
        diffs = np.stack([np.abs(got[i][0].astype(int) - cpu[i][0].astype(int)) for i in cpu])
        # nvJPEG's IDCT and chroma upsampling are not libjpeg-turbo's: docs/gpu.md gives the measured spread
        # (2.7 of 255 on average at 224 pixels; 2.1 on these small images).
        assert diffs.mean() < 3.0, (choice, diffs.mean())
        counts = job.metrics()["device_decode"]
        assert counts["device"] == 22 and counts["cpu"] == 2 and counts["jpeg_decoder"].startswith("nvjpeg-")
        assert counts["device_failed"] == 2  # the PNG, and the grayscale JPEG, which the C++ chain expands to RGB


@pytest.mark.skipif(os.environ.get("HDMLP_NVJPEG_BUILD_TEST") == "0", reason="HDMLP_NVJPEG_BUILD_TEST=0")
def test_the_module_builds_from_nvidias_wheels_and_starts_or_says_why_not(tmp_path):
    """scripts/wheels/nvjpeg_module.sh compiles the C++ decoder against NVIDIA's wheels (so CI compiles it on
    machines without CUDA), and an installed hdmlp with the module beside it finds libnvjpeg.so.13 in the
    nvidia-nvjpeg wheel: without a GPU it names each backend's failure, with one it starts."""
    repo = Path(__file__).resolve().parents[2]
    out = tmp_path / "out"
    built = subprocess.run([str(repo / "scripts/wheels/nvjpeg_module.sh"), str(out)], capture_output=True, text=True,
                           timeout=600)
    cache = Path(os.environ.get("HDMLP_NVJPEG_CACHE", Path.home() / ".cache/hdmlp/nvjpeg"))
    if built.returncode != 0 and not list(cache.glob("wheels/nvidia_nvjpeg-*.whl")):  # the download failed (offline)
        pytest.skip(f"NVIDIA's wheels could not be fetched from PyPI: {built.stderr.strip()[-300:]}")
    assert built.returncode == 0, built.stderr
    module = next(out.glob("_nvjpeg.cpython-*.so"))
    site = tmp_path / "site"
    shutil.copytree(Path(hdmlp.__file__).parent, site / "hdmlp", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(module, site / "hdmlp")
    with zipfile.ZipFile(next(out.glob("nvidia_nvjpeg-*.whl"))) as wheel:
        wheel.extractall(site)
    check = textwrap.dedent("""
        import torch
        import hdmlp.device.nvjpeg as nv
        built, why = nv.status()
        assert built, why
        try:
            print("started", nv.NvjpegDecoder(torch.device("cuda" if torch.cuda.is_available() else "cpu")).backend)
        except RuntimeError as e:
            print("refused", e)
    """)
    ran = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(site)})
    assert ran.returncode == 0, ran.stderr
    if torch.cuda.is_available():
        assert ran.stdout.startswith("started "), ran.stdout
    else:
        assert "refused no nvJPEG decoder could start (hardware: " in ran.stdout, ran.stdout
        assert "gpu_hybrid: " in ran.stdout and "default: " in ran.stdout, ran.stdout
