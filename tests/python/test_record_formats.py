"""The TFRecord and NumPy (.npy/.npz) sources through hdmlp.Job: byte-exact samples and labels on 1 and
3 ranks (mpirun), index files, and cut or corrupt files named (or counted under on_error="skip").
The readers' own edge cases are in tests/cpp/tfrecord_source_test.cc and npy_source_test.cc; the files
here are written by Python's own code (record_files.py) and by NumPy."""
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import hdmlp
import hdmlp.transforms as T
from hdmlp.datasets import make_image_folder
from record_files import example, record, write_shard

WORKER = os.path.join(os.path.dirname(__file__), "mpi_formats_worker.py")
MPIRUN = shutil.which("mpirun")


def sha(b):
    return hashlib.sha256(b).hexdigest()


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """3 TFRecord shards of tf.train.Examples (image bytes + label; one shard with an .idx file) and a
    folder of .npz files (stored and deflated) and .npy files of one float32 shape:
    {name: (path, options, {sample name: (sha256, label)})}."""
    base = tmp_path_factory.mktemp("records")
    rng = np.random.default_rng(3)
    tf_dir = base / "tfrecords"
    tf_dir.mkdir()
    tf_expect, tf_images = {}, {}
    n = 0
    for s, count in enumerate((9, 13, 7)):
        payloads = []
        for k in range(count):
            image = rng.integers(0, 256, size=int(rng.integers(50, 3000)), dtype=np.uint8).tobytes()
            payloads.append(example({"image/encoded": image, "image/class/label": n % 5, "id": [n, -n]}))
            name = f"{tf_dir}/train-{s:05d}-of-00003.tfrecord#{k}"
            tf_expect[name] = (sha(payloads[-1]), n % 5)
            tf_images[name] = (sha(image), n % 5)
            n += 1
        shard = tf_dir / f"train-{s:05d}-of-00003.tfrecord"
        write_shard(shard, payloads, index_path=f"{shard}.idx" if s == 1 else None)
    np_dir = base / "arrays"
    np_dir.mkdir()
    np_expect = {}
    for i in range(23):
        a = rng.standard_normal((4, 5, 6)).astype(np.float32)
        path = np_dir / f"case_{i:03d}.npz"
        if i % 3 == 0:
            np.savez_compressed(path, x=a, y=np.array([i % 4]))
        else:
            np.savez(path, x=a, y=np.array([i % 4], dtype=np.int32))
        np_expect[str(path)] = (sha(a.tobytes()), i % 4)
    return {"tfrecord": (str(tf_dir), {"tfrecord_label": "image/class/label"}, tf_expect),
            "tfrecord_image": (str(tf_dir / "train-{00000..00002}-of-00003.tfrecord"),
                               {"tfrecord_label": "image/class/label", "tfrecord_sample": "image/encoded"},
                               tf_images),
            "npz": (str(np_dir), {"npz_member": "x", "npz_label_member": "y"}, np_expect)}


def epoch(job, e):
    """{sample name: (sha256, label)} of one epoch, each sample once."""
    names = [p for p, _ in job.samples]
    got = {}
    for ids, labels, samples in job.epoch_batches(e):
        if job.array_spec is not None:
            rows = np.asarray(samples)
            parts = [rows[k].tobytes() for k in range(len(ids))]
        else:
            parts = [bytes(memoryview(s)) for s in samples]
        for i, p, lab in zip(ids, parts, labels):
            assert names[i] not in got
            got[names[i]] = (sha(p), int(lab))
    return got


@pytest.mark.parametrize("name", ["tfrecord", "tfrecord_image", "npz"])
def test_each_sample_once_byte_exact_with_its_label(datasets, name):
    path, options, expect = datasets[name]
    with hdmlp.Job(path, 5, 2, seed=1, source_options=options) as job:
        assert job.source == ("npy" if name == "npz" else "tfrecord")
        assert len(job) == len(expect)
        for e in range(2):
            assert epoch(job, e) == expect
        if name == "npz":
            assert job.array_spec == ([4, 5, 6], "float32", None)
        assert job.metrics()["source"]["files_opened"] <= (3 if name != "npz" else 2 * len(expect))


@pytest.mark.skipif(MPIRUN is None, reason="mpirun (OpenMPI) is not installed")
@pytest.mark.parametrize("ranks", [1, 3])
def test_each_sample_once_across_ranks(datasets, tmp_path, ranks):
    """Both sources in one MPI run: every epoch, each sample on exactly one rank, with its bytes and label."""
    jobs = [[datasets[n][0], datasets[n][1]] for n in ("tfrecord", "npz")]
    cmd = [MPIRUN, "--oversubscribe", "-np", str(ranks), sys.executable, WORKER, str(tmp_path), json.dumps(jobs)]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180,
                          env=dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(ranks)]
    for j, name in enumerate(("tfrecord", "npz")):
        expect = datasets[name][2]
        assert {r["jobs"][j]["world_size"] for r in res} == {ranks}
        for e in range(2):
            seen = [tuple(s) for r in res for s in r["jobs"][j]["epochs"][e]]
            names = [s[0] for s in seen]
            assert len(names) == len(set(names)), f"{name} epoch {e}: a sample came twice"
            # The last, partial global batch is kept: every sample comes.
            assert sorted(names) == sorted(expect), f"{name} epoch {e}: samples missing"
            for sample, digest, label in seen:
                assert (digest, label) == expect[sample], sample


def test_index_files_are_used_and_a_stale_one_is_named(datasets, tmp_path):
    src = datasets["tfrecord"][0]
    shutil.copytree(src, tmp_path / "t")
    shard = tmp_path / "t" / "train-00001-of-00003.tfrecord"
    with hdmlp.Job(tmp_path / "t", 4, 1, seed=0, index_cache=False) as job:
        assert len(job) == 29
    with open(shard, "ab") as f:
        f.write(record(b"one more record"))
    with pytest.raises(ValueError, match=r"TFRecord index '.*train-00001-of-00003.tfrecord.idx' does not match shard"):
        hdmlp.Job(tmp_path / "t", 4, 1, seed=0, index_cache=False)
    os.remove(f"{shard}.idx")
    with hdmlp.Job(tmp_path / "t", 4, 1, seed=0, index_cache=False) as job:
        assert len(job) == 30


def test_cut_and_corrupt_tfrecords_are_named_or_skipped(tmp_path):
    """Records of JPEG bytes: a shard cut inside its last record fails the open naming shard and offset,
    or under on_error="skip" (with transforms) keeps its whole records, counted; a record whose payload
    fails its CRC fails its read naming shard, offset and sample, or is left out and counted."""
    folder = tmp_path / "images"
    make_image_folder(folder, num_images=12, num_classes=2, seed=5)
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in (".jpeg", ".jpg", ".png"))
    shard = tmp_path / "t" / "a.tfrecord"
    shard.parent.mkdir()
    offsets = write_shard(shard, [p.read_bytes() for p in files])
    whole = shard.read_bytes()
    chain = [T.ImgDecode(), T.CenterCrop(24), T.ToTensor()]
    shard.write_bytes(whole[:offsets[-1] + 30])
    with pytest.raises(ValueError, match=rf"TFRecord shard '.*a.tfrecord' is damaged at offset {offsets[-1]}"):
        hdmlp.Job(shard, 4, 1, seed=0, index_cache=False)
    with hdmlp.Job(shard, 4, 1, seed=0, index_cache=False, transforms=chain, on_error="skip") as job:
        assert len(job) == len(files) - 1
        assert sum(len(ids) for ids, _, _ in job.epoch_batches(0)) == len(files) - 1
        m = job.metrics()
        assert m["skipped_samples"] == 1 and f"damaged at offset {offsets[-1]}" in m["skipped"][0]
    # A payload byte flipped: the headers still walk, the record's read finds it.
    damaged = bytearray(whole)
    damaged[offsets[4] + 12 + 100] ^= 0x20
    shard.write_bytes(bytes(damaged))
    with hdmlp.Job(shard, 4, 1, seed=0, index_cache=False) as job:
        with pytest.raises(ValueError, match=rf"a.tfrecord record at offset {offsets[4]} \(sample 4\) is corrupt: its "
                                             "payload fails its CRC-32C"):
            for _ in job.epoch_batches(0):
                pass
    with hdmlp.Job(shard, 4, 1, seed=0, index_cache=False, transforms=chain, on_error="skip") as job:
        ids = [i for b, _, _ in job.epoch_batches(0) for i in b]
        assert sorted(ids) == [i for i in range(len(files)) if i != 4]
        m = job.metrics()
        assert m["skipped_samples"] == 1 and "(sample 4) is corrupt" in m["skipped"][0]
    # Records read through for their features: found while indexing, that record left out.
    write_shard(shard, [example({"jpeg": p.read_bytes()}) for p in files])
    data = bytearray(shard.read_bytes())
    data[200] ^= 0x20
    shard.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"a.tfrecord' at offset 0 \(record 0 of the shard\): the record's payload fails"):
        hdmlp.Job(shard, 4, 1, seed=0, index_cache=False, source_options={"tfrecord_sample": "jpeg"})
    with hdmlp.Job(shard, 4, 1, seed=0, index_cache=False, source_options={"tfrecord_sample": "jpeg"},
                   transforms=chain, on_error="skip") as job:
        assert len(job) == len(files) - 1 and job.metrics()["skipped_samples"] == 1


def test_npy_files_bad_headers_cut_files_and_shapes_are_named(tmp_path):
    d = tmp_path / "n"
    d.mkdir()
    a = np.arange(24, dtype=">i4").reshape(2, 3, 4)
    np.save(d / "a.npy", a)
    np.save(d / "b.npy", a * 2)
    with hdmlp.Job(d, 2, 1, seed=0, index_cache=False) as job:
        assert job.array_spec == ([2, 3, 4], "int32", None)
    with hdmlp.Job(d, 2, 1, seed=0, index_cache=False, shuffle=False) as job:
        (ids, _, samples), = list(job.epoch_batches(0))
        assert ids == [0, 1]
        assert np.array_equal(np.asarray(samples), np.stack([a, a * 2]).astype("<i4"))  # this machine's order
    np.save(d / "c.npy", np.zeros((3, 4), dtype=np.float32))
    with pytest.raises(ValueError, match=r"c.npy' holds float32\[3, 4\].*npy_as"):
        hdmlp.Job(d, 2, 1, seed=0, index_cache=False)
    with hdmlp.Job(d, 2, 1, seed=0, index_cache=False, source_options={"npy_as": "bytes"}) as job:
        for ids, _, samples in job.epoch_batches(0):
            for i, s in zip(ids, samples):
                assert np.array_equal(np.load(io.BytesIO(bytes(memoryview(s)))), np.load(job.samples[i][0]))
    whole = (d / "c.npy").read_bytes()
    for cut, why in ((4, "cut short"), (40, "cut short"), (len(whole) - 1, "cut short")):
        (d / "c.npy").write_bytes(whole[:cut])
        with pytest.raises(ValueError, match=rf"NumPy file '.*c.npy' .*{why}"):
            hdmlp.Job(d, 2, 1, seed=0, index_cache=False, source_options={"npy_as": "bytes"})
    (d / "c.npy").write_bytes(b"\x93NUMPY\x01\x00\x20\x00{'descr': '<f4', 'shape': (3,)}   \n")
    with pytest.raises(ValueError, match=r"c.npy' has a bad header"):
        hdmlp.Job(d, 2, 1, seed=0, index_cache=False, source_options={"npy_as": "bytes"})
    with pytest.raises(ValueError, match=r"npy_as is 'pickle'"):
        hdmlp.Job(d, 2, 1, source_options={"npy_as": "pickle"})
