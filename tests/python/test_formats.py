"""Datasets beyond image folders: hdmlp packs (hdmlp pack), WebDataset tar shards and HDF5,
through hdmlp.Job and hdmlp.torch. The readers' own edge cases are in tests/cpp/*_source_test.cc."""
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import time

import numpy as np
import pytest

import hdmlp
import hdmlp._core as core
import hdmlp.transforms as T
from conftest import make_folder, make_h5, make_tar_shards
from hdmlp.datasets import make_image_folder
from hdmlp.pack import pack


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """A small folder of real JPEGs (250-500 px sides) in 3 classes."""
    root = tmp_path_factory.mktemp("formats") / "images"
    make_image_folder(root, num_images=24, num_classes=3, seed=2)
    return root


def files_of(path):
    return {name: (path / name).read_bytes() for name in sorted(os.listdir(path))}


def epoch_bytes(job, epoch):
    """{sample id: bytes} of one epoch, checking each sample comes once."""
    got = {}
    for ids, _labels, samples in job.epoch_batches(epoch):
        for i, s in zip(ids, samples):
            assert i not in got
            got[i] = bytes(memoryview(s))
    return got


# -- packs -------------------------------------------------------------------

def test_folder_to_pack_round_trip_is_byte_identical(tmp_path):
    root = tmp_path / "data"
    digests = make_folder(str(root))
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "hdmlp"), "pack", str(root),
                           str(tmp_path / "pack"), "--shard-size-mb", "0.01"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "24 samples" in proc.stdout and "shard(s)" in proc.stdout
    with hdmlp.Job(root, 4, 2, seed=1) as folder, hdmlp.Job(tmp_path / "pack", 4, 2, seed=1) as packed:
        assert packed.source == "pack" and folder.source == "folder"
        # The folder's (torchvision's) listing, paths included.
        assert packed.samples == folder.samples
        assert packed.classes == folder.classes and packed.class_to_idx == folder.class_to_idx
        assert packed.targets == folder.targets
        for epoch in range(2):
            got = epoch_bytes(packed, epoch)
            assert len(got) == len(digests)
            for i, data in got.items():
                rel = os.path.relpath(packed.samples[i][0], root)
                assert hashlib.sha256(data).hexdigest() == digests[rel]
        shards = len([n for n in os.listdir(tmp_path / "pack") if n.endswith(".hdmlp-shard")])
        assert shards > 2
        # Opens: the index and each shard once, however many samples were read.
        assert packed.metrics()["source"] == {"kind": "pack", "files_opened": 1 + shards}


def test_pack_is_deterministic_and_resumes_after_an_interruption(images, tmp_path):
    whole = pack(images, tmp_path / "a", shard_size=400_000, progress=False)
    assert whole.shards >= 3 and whole.resumed_samples == 0

    class Stop(KeyboardInterrupt):
        pass

    def stop_at(k):
        if k == 15:
            raise Stop()

    with pytest.raises(Stop):
        pack(images, tmp_path / "b", shard_size=400_000, progress=False, on_sample=stop_at)
    assert not (tmp_path / "b" / "index.hdmlp-pack").exists()  # unfinished: no index
    resumed = pack(images, tmp_path / "b", shard_size=400_000, progress=False)
    assert 0 < resumed.resumed_samples < 15
    assert files_of(tmp_path / "a") == files_of(tmp_path / "b")
    # A finished pack is left as it is; a pack of other options replaces it.
    assert pack(images, tmp_path / "b", shard_size=400_000, progress=False).resumed_samples == whole.samples
    assert pack(images, tmp_path / "b", shard_size=10**9, progress=False).shards == 1


def test_max_side_packs_smaller_jpegs_of_the_same_samples(images, tmp_path):
    from PIL import Image

    summary = pack(images, tmp_path / "small", max_side=128, quality=85, progress=False)
    assert summary.bytes < summary.source_bytes / 3
    small = core.Source(str(tmp_path / "small"))
    folder = core.Source(str(images))
    assert small.names == folder.names and small.labels == folder.labels
    for i in range(len(small)):
        with Image.open(io.BytesIO(small.read(i))) as img, Image.open(io.BytesIO(folder.read(i))) as orig:
            assert img.format == "JPEG" and max(img.size) == 128
            assert abs(img.size[0] / img.size[1] - orig.size[0] / orig.size[1]) < 0.02
    # The training chain reads it like the folder.
    chain = [T.ImgDecode(), T.RandomResizedCrop(64), T.ToTensor()]
    with hdmlp.Job(tmp_path / "small", 8, 1, transforms=chain, seed=0) as job:
        assert sum(len(ids) for ids, _, _ in job.epoch_batches(0)) == 24


def test_raw_pack_skips_the_decode_with_the_same_pixels(images, tmp_path):
    pack(images, tmp_path / "raw", raw=True, progress=False)
    raw = core.Source(str(tmp_path / "raw"))
    assert raw.format == "raw"
    for chain in ([T.ImgDecode(), T.RandomResizedCrop(48), T.RandomHorizontalFlip(), T.ToTensor(),
                   T.Normalize([0.5, 0.4, 0.3], [0.2, 0.2, 0.2])],
                  [T.ImgDecode(), T.Resize(40), T.CenterCrop(32), T.ToUint8()]):
        with hdmlp.Job(tmp_path / "raw", 8, 2, transforms=chain, seed=4) as rj, \
                hdmlp.Job(images, 8, 2, transforms=chain, seed=4) as fj:
            for epoch in range(2):
                for (ids_r, _, xr), (ids_f, _, xf) in zip(rj.epoch_batches(epoch), fj.epoch_batches(epoch)):
                    assert ids_r == ids_f
                    assert np.array_equal(np.asarray(xr), np.asarray(xf))


def test_grey_raw_images_expand_as_pil_converts_them(tmp_path):
    from PIL import Image

    root = tmp_path / "grey"
    rng = np.random.default_rng(0)
    for c in range(2):
        os.makedirs(root / f"c{c}")
        for i in range(3):
            Image.fromarray(rng.integers(0, 256, (28, 28), dtype=np.uint8), "L").save(root / f"c{c}" / f"{i}.png")
    pack(root, tmp_path / "raw", raw=True, progress=False)
    assert len(core.Source(str(tmp_path / "raw")).read(0)) == 16 + 28 * 28  # one channel stored
    chain = [T.ImgDecode(), T.ToTensor()]
    with hdmlp.Job(tmp_path / "raw", 6, 1, transforms=chain, seed=1) as rj, \
            hdmlp.Job(root, 6, 1, transforms=chain, seed=1) as fj:
        (_, _, xr), = rj.epoch_batches(0)
        (_, _, xf), = fj.epoch_batches(0)
        assert np.asarray(xr).shape == (6, 3, 28, 28)
        assert np.array_equal(np.asarray(xr), np.asarray(xf))


def test_a_changed_shard_is_an_error_naming_it_and_skip_leaves_it_out(images, tmp_path):
    pack(images, tmp_path / "p", progress=False)
    shard = tmp_path / "p" / "shard-00000.hdmlp-shard"
    data = bytearray(shard.read_bytes())
    victim = core.Source(str(tmp_path / "p"))
    offset = int(victim.describe(5).split(" at offset ")[1].split(" ")[0])
    data[offset + 1000] ^= 0xFF
    shard.write_bytes(bytes(data))
    with hdmlp.Job(tmp_path / "p", 4, 1, seed=0) as job:
        with pytest.raises(ValueError, match=r"shard-00000.*offset.*sample 5.*checksum"):
            for _ in job.epoch_batches(0):
                pass
    chain = [T.ImgDecode(), T.CenterCrop(32), T.ToTensor()]
    with hdmlp.Job(tmp_path / "p", 4, 1, seed=0, transforms=chain, on_error="skip") as job:
        ids = [i for b, _, _ in job.epoch_batches(0) for i in b]
        assert sorted(ids) == [i for i in range(24) if i != 5]
        assert job.metrics()["skipped_samples"] == 1


# -- WebDataset tar shards ---------------------------------------------------------

def test_tar_shards_read_in_place_with_labels_and_long_names(images, tmp_path):
    digests, labels = make_tar_shards(images, tmp_path / "tars", shards=3)
    # PAX and GNU long names (over 100 bytes) are read too.
    long_key = "deep/" + "d" * 120 + "/x"
    for fmt, name in ((tarfile.PAX_FORMAT, "pax.tar"), (tarfile.GNU_FORMAT, "gnu.tar")):
        with tarfile.open(tmp_path / "tars" / name, "w", format=fmt) as tar:
            for member, payload in ((long_key + ".cls", b"2"), (long_key + ".png", b"PNGDATA" + name.encode())):
                info = tarfile.TarInfo(member)
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
    spec = str(tmp_path / "tars" / "shard-{000..002}.tar") + "," + str(tmp_path / "tars" / "pax.tar") + "," + \
        str(tmp_path / "tars" / "gnu.tar")
    with hdmlp.Job(spec, 5, 1, seed=3, index_cache=False) as job:
        assert job.source == "tar"
        assert job.targets == labels + [2, 2]
        assert job.classes == ["0", "1", "2"]
        assert job.samples[-1][0].endswith("gnu.tar/" + long_key + ".png")
        got = epoch_bytes(job, 0)
        for i, data in got.items():
            path = job.samples[i][0]
            if path in digests:
                assert hashlib.sha256(data).hexdigest() == digests[path]
            else:
                assert data == b"PNGDATA" + os.path.basename(path.split("/deep/")[0]).encode()
        assert job.metrics()["source"]["files_opened"] == 5
    # A pack made from the shards has their samples.
    pack(str(tmp_path / "tars" / "shard-{000..002}.tar"), tmp_path / "from-tar", progress=False)
    assert core.Source(str(tmp_path / "from-tar")).labels == labels


# -- HDF5 ----------------------------------------------------------------------------

def test_hdf5_batches_are_arrays_of_the_stored_dtype(tmp_path):
    import h5py
    import torch
    from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder

    digests, data = make_h5(str(tmp_path / "set.h5"), n=21, chunks=(4, 3, 4, 5), compression="gzip")
    with hdmlp.Job(tmp_path / "set.h5", 6, 2, seed=2) as job:
        assert job.source == "hdf5" and job.array_spec == ([3, 4, 5], "float32", None)
        assert job.classes == ["0", "1", "2", "3"]
        loader = HDMLPDataLoader(HDMLPImageFolder(tmp_path / "set.h5", job))
        for _ in range(2):
            seen = []
            for x, y in loader:
                assert x.dtype == torch.float32 and x.shape[1:] == (3, 4, 5) and y.dtype == torch.int64
                for row, label in zip(x, y):
                    i = int(np.flatnonzero((data == row.numpy()).all(axis=(1, 2, 3)))[0])
                    assert label == i % 4
                    seen.append(i)
            assert sorted(seen) == list(range(21))
    # int16 samples with a label array per sample, one file per sample (CosmoFlow's layout).
    os.makedirs(tmp_path / "cosmo")
    for i in range(5):
        with h5py.File(tmp_path / "cosmo" / f"univ_{i}.h5", "w") as f:
            f["full"] = np.full((2, 4, 4, 4), i, np.int16)
            f["unitPar"] = np.array([i, -i], np.float32)
    with hdmlp.Job(tmp_path / "cosmo", 2, 1, seed=0, source="hdf5",
                   source_options={"hdf5_samples": "full", "hdf5_labels": "unitPar"}) as job:
        loader = HDMLPDataLoader(HDMLPImageFolder(tmp_path / "cosmo", job))
        batches = list(loader)
        assert [tuple(x.shape) for x, _ in batches] == [(2, 2, 4, 4, 4), (2, 2, 4, 4, 4), (1, 2, 4, 4, 4)]
        for x, y in batches:
            assert x.dtype == torch.int16 and y.dtype == torch.float32 and y.shape[1:] == (2,)
            assert torch.equal(y[:, 0].to(torch.int16), x[:, 0, 0, 0, 0])


def test_corrupt_hdf5_chunk_is_named_and_skip_leaves_its_samples_out(tmp_path):
    import h5py

    path = tmp_path / "set.h5"
    make_h5(str(path), n=20, chunks=(5, 3, 4, 5), compression="gzip")
    with h5py.File(path, "r") as f:
        info = f["data"].id.get_chunk_info_by_coord((5, 0, 0, 0))
    with open(path, "r+b") as f:
        f.seek(info.byte_offset)
        f.write((bytes(range(256)) * (info.size // 256 + 1))[:info.size])
    with hdmlp.Job(path, 4, 1, seed=0) as job:
        with pytest.raises(ValueError, match=r"set\.h5.*'data'.*sample [5-9]"):
            for _ in job.epoch_batches(0):
                pass
    with hdmlp.Job(path, 4, 1, seed=0, on_error="skip") as job:
        ids = [i for b, _, _ in job.epoch_batches(0) for i in b]
        assert sorted(ids) == [i for i in range(20) if not 5 <= i < 10]
        assert job.metrics()["skipped_samples"] == 5


# -- choosing the source -------------------------------------------------------------

def test_unrecognised_paths_and_options_say_what_is_supported(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(NotADirectoryError, match="supported datasets are.*pack.*HDF5.*tar"):
        hdmlp.Job(tmp_path / "notes.txt", 4, 1)
    with pytest.raises(ValueError, match="unknown source 'zarr'"):
        hdmlp.Job(tmp_path, 4, 1, source="zarr")
    with pytest.raises(ValueError, match="unknown source option 'hdf5_data'"):
        hdmlp.Job(tmp_path, 4, 1, source_options={"hdf5_data": "x"})
    with pytest.raises(ValueError, match="has no dataset 'images'.*data, label"):
        make_h5(str(tmp_path / "x.h5"), n=4)
        hdmlp.Job(tmp_path / "x.h5", 4, 1, source_options={"hdf5_samples": "images"})
    with pytest.raises(ValueError, match="holds arrays"):
        hdmlp.Job(tmp_path / "x.h5", 4, 1, transforms=[T.ImgDecode(), T.CenterCrop(2), T.ToTensor()])


# -- issue 26: cut shards, odd names, packs in odd places ------------------------------

def test_a_tar_shard_cut_short_is_an_error_or_counted_under_skip(images, tmp_path):
    """200 samples in 4 shards, one cut at a member boundary, inside a header or to 0 bytes: never fewer
    samples in silence. Under on_error="skip" the job starts with the whole samples before the cut, and
    warns; without an index cache nothing lists the rest, which is one entry of its own
    (test_fault_classes.py has the exact count from the shard's last listing)."""
    make_tar_shards(images, tmp_path / "tars", shards=4)
    shard = tmp_path / "tars" / "shard-001.tar"
    whole = shard.read_bytes()
    chain = [T.ImgDecode(), T.CenterCrop(32), T.ToTensor()]
    # Member k's header: after the PAX headers tarfile writes, find the third sample's header.
    for cut in (0, 512 * 7, 512 * 7 + 100, len(whole) - 1024 * 10):
        shard.write_bytes(whole[:cut])
        with pytest.raises(ValueError, match=rf"tar shard '.*shard-001.tar' is cut short at offset \d+"):
            hdmlp.Job(str(tmp_path / "tars"), 4, 1, seed=0, index_cache=False)
        with pytest.warns(RuntimeWarning, match="skipping the rest of a damaged shard"):
            job = hdmlp.Job(str(tmp_path / "tars"), 4, 1, seed=0, index_cache=False, transforms=chain,
                            on_error="skip")
        with job:
            assert len(job) < 24
            ids = [i for b, _, _ in job.epoch_batches(0) for i in b]
            assert sorted(ids) == list(range(len(job)))
            m = job.metrics()
            assert m["skipped_samples"] == len(m["skipped"]) and 1 <= len(m["skipped"]) <= 2, m["skipped"]
            assert "nothing lists it): not delivered: tar shard" in m["skipped"][-1]
            assert all("shard-001.tar' is cut short at offset" in entry for entry in m["skipped"])
    shard.write_bytes(whole)


def test_a_key_with_two_jpg_members_is_an_error_naming_shard_and_key(tmp_path):
    path = tmp_path / "two.tar"
    with tarfile.open(path, "w") as tar:
        for member, payload in (("a.jpg", b"1"), ("a.cls", b"0"), ("b.jpg", b"2"), ("b.jpg", b"3")):
            info = tarfile.TarInfo(member)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    with pytest.raises(ValueError, match=r"sample 'b' in tar shard '.*two.tar' has two 'jpg' members"):
        hdmlp.Job(str(path), 1, 1, seed=0, index_cache=False)


def test_non_utf8_names_pack_and_read(images, tmp_path):
    src = tmp_path / "src"
    os.makedirs(src / "cls")
    jpeg = next(p for p in images.rglob("*.JPEG"))
    bad_name = os.fsdecode(b"caf\xff.jpg")
    (src / "cls" / bad_name).write_bytes(jpeg.read_bytes())
    (src / "cls" / "plain.jpg").write_bytes(jpeg.read_bytes())
    assert any(bad_name in n for n in core.Source(str(src), use_index_cache=False).names)
    pack(src, tmp_path / "p", progress=False)
    assert sorted(core.Source(str(tmp_path / "p")).names) == sorted(core.Source(str(src)).names)
    # A tar member with such a name.
    with tarfile.open(tmp_path / "odd.tar", "w", format=tarfile.GNU_FORMAT, encoding="utf-8",
                      errors="surrogateescape") as tar:
        info = tarfile.TarInfo(os.fsdecode(b"k\xfe.jpg"))
        info.size = 3
        tar.addfile(info, io.BytesIO(b"abc"))
    odd = core.Source(str(tmp_path / "odd.tar"), use_index_cache=False)
    assert os.fsencode(odd.names[0]).endswith(b"k\xfe.jpg")
    pack(str(tmp_path / "odd.tar"), tmp_path / "p2", progress=False)


def test_pack_destinations_and_raw_errors_are_named(images, tmp_path):
    src = tmp_path / "src"
    make_image_folder(src, num_images=6, num_classes=2, seed=3)
    with pytest.raises(ValueError, match=r"is inside the source"):
        pack(src, src / "packed", progress=False)
    with pytest.raises(ValueError, match=r"already holds files that are not a pack's"):
        pack(images, src, progress=False)
    victim = sorted(src.rglob("*.JPEG"))[2]
    victim.write_bytes(victim.read_bytes()[:400])  # a truncated JPEG
    with pytest.raises(ValueError, match=rf"{victim.name}.*cannot decode the image to store its pixels \(--raw\)"):
        pack(src, tmp_path / "raw", raw=True, progress=False)
    # An interrupted pack (shards, no index) opened without source= says it is unfinished.
    os.makedirs(tmp_path / "half")
    (tmp_path / "half" / "shard-00000.hdmlp-shard").write_bytes(b"x" * 100)
    with pytest.raises(FileNotFoundError, match="the pack was not finished"):
        hdmlp.Job(str(tmp_path / "half"), 1, 1, seed=0)


def test_one_pass_has_one_consumer(images):
    """Two threads on one pass: the second is told a pass has one consumer (not a bogus "batch 50 is bad")."""
    import threading
    slow = hdmlp.ThrottledStorage(latency_s=0.3)
    with hdmlp.Job(images, 24, 1, seed=0, index_cache=False, storage=slow, num_workers=1) as job:
        it = job.epoch_batches(0)
        first = threading.Thread(target=lambda: next(it))
        first.start()
        time.sleep(0.1)  # the first thread is inside next(), waiting for the slow reads
        with pytest.raises(RuntimeError, match="two threads iterate one pass over epoch 0 .* has one consumer"):
            next(it)
        first.join()
