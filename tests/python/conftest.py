import hashlib
import os
import random

import pytest


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
