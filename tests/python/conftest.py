import hashlib
import os
import random
import signal

import pytest

# A suite started in the background by a non-interactive shell (`nohup scripts/dev.sh test &`,
# some CI runners) inherits SIGINT ignored, and so would every process it starts: the tests of
# Ctrl-C could not send one. Handled here, it is the default again in every child (exec resets a
# handled signal, not an ignored one).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory):
    # Keep the index cache of the tests out of the user's cache directory.
    os.environ["HDMLP_CACHE_DIR"] = str(tmp_path_factory.mktemp("hdmlp-cache"))


def make_folder(root, classes=4, per_class=(5, 9, 3, 7), seed=0, nested=True):
    """A folder of files with image extensions and random bytes; returns {relpath: sha256}."""
    rng = random.Random(seed)
    digests = {}
    exts = [".jpg", ".JPEG", ".png", ".webp"]
    for c in range(classes):
        cls = f"class_{c:02d}"
        for i in range(per_class[c % len(per_class)]):
            sub = f"sub{i % 2}/" if nested and i % 3 == 0 else ""
            rel = f"{cls}/{sub}img_{i:03d}{exts[i % len(exts)]}"
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            data = rng.randbytes(rng.randint(0, 3000))
            with open(path, "wb") as f:
                f.write(data)
            digests[rel] = hashlib.sha256(data).hexdigest()
        # Files torchvision ignores.
        with open(os.path.join(root, cls, "notes.txt"), "w") as f:
            f.write("not an image")
    return digests


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "data"
    digests = make_folder(str(root))
    return root, digests


def age_tree(root, seconds=60):
    """Moves every folder's mtime into the past so the index cache trusts it."""
    for dirpath, _, _ in os.walk(root):
        st = os.stat(dirpath)
        os.utime(dirpath, ns=(st.st_atime_ns, st.st_mtime_ns - seconds * 10**9))


def thread_count():
    return len(os.listdir("/proc/self/task"))


def make_tar_shards(folder, out_dir, shards=3):
    """The samples of an image folder as WebDataset shards (key.<ext> and key.cls members,
    shard-000.tar ...); returns ({job sample path: sha256}, labels in sample order)."""
    import io
    import tarfile

    import hdmlp._core as core

    src = core.Source(str(folder), use_index_cache=False)
    os.makedirs(out_dir, exist_ok=True)
    n = len(src)
    per = -(-n // shards)
    digests, labels = {}, []
    for s in range(shards):
        path = os.path.join(str(out_dir), f"shard-{s:03d}.tar")
        with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
            for i in range(s * per, min(n, (s + 1) * per)):
                name = src.names[i]
                key = f"{i:05d}/" + name.replace("/", "_").rsplit(".", 1)[0].replace(".", "_")
                data = src.read(i)
                ext = name.rsplit(".", 1)[1].lower()
                for member, payload in ((f"{key}.{ext}", data), (f"{key}.cls", str(src.labels[i]).encode())):
                    info = tarfile.TarInfo(member)
                    info.size = len(payload)
                    tar.addfile(info, io.BytesIO(payload))
                digests[f"{path}/{key}.{ext}"] = hashlib.sha256(data).hexdigest()
                labels.append(src.labels[i])
    return digests, labels


def make_h5(path, n=37, shape=(3, 4, 5), seed=0, **dataset_kw):
    """An HDF5 file with "data" [n, *shape] float32 and "label" [n] ints; returns
    ({job sample path: sha256 of the row}, data array)."""
    import h5py
    import numpy as np

    data = np.random.default_rng(seed).standard_normal((n, *shape)).astype(np.float32)
    with h5py.File(path, "w") as f:
        f.create_dataset("data", data=data, **dataset_kw)
        f["label"] = np.arange(n) % 4
    return {f"{path}:data[{i}]": hashlib.sha256(data[i].tobytes()).hexdigest() for i in range(n)}, data
