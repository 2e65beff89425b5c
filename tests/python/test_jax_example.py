"""examples/train_jax_fashion_mnist.py (issue 16): a JAX model trained from hdmlp batches, on small
synthetic IDX files whose label is written into the pixels (so that learning is checkable)."""
import os
import random
import re
import subprocess
import sys

import pytest

from test_fashion_mnist import write_idx

pytest.importorskip("jax")
EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "train_jax_fashion_mnist.py")


def learnable_source(folder, n_train=240, n_test=60):
    """Images with a bright block where their label says (a 2 x 5 grid of cells), noise elsewhere."""
    rng = random.Random(3)
    os.makedirs(folder, exist_ok=True)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        labels = [i % 10 for i in range(n)]
        pixels = bytearray()
        for label in labels:
            top, left = 14 * (label // 5) + 3, 5 * (label % 5) + 1
            pixels += bytes(220 if top <= y < top + 8 and left <= x < left + 4 else rng.randint(0, 60)
                            for y in range(28) for x in range(28))
        write_idx(os.path.join(folder, f"{prefix}-images-idx3-ubyte"), (n, 28, 28), bytes(pixels), False)
        write_idx(os.path.join(folder, f"{prefix}-labels-idx1-ubyte"), (n,), bytes(labels), False)


def test_jax_example_learns_from_hdmlp_batches_with_a_python_transform(tmp_path):
    learnable_source(tmp_path / "idx")
    cmd = [sys.executable, EXAMPLE, "--source", str(tmp_path / "idx"), "--data", str(tmp_path / "fm"),
           "--epochs", "3", "--batch-size", "16", "--augment", "python", "--python-workers", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "augment=python" in out.stdout and len(re.findall(r"^epoch \d: ", out.stdout, re.M)) == 3
    accuracy = float(re.search(r"final test accuracy ([0-9.]+)", out.stdout).group(1))
    assert accuracy >= 0.9, out.stdout  # easy, once the batches carry the right images and labels
