"""Train a small JAX model on Fashion-MNIST from hdmlp batches (no torch, no Flax).

    python examples/train_jax_fashion_mnist.py                   # 3 epochs, about 85% test accuracy
    python examples/train_jax_fashion_mnist.py --augment python  # + a Python transform in hdmlp's workers

The data is Debian's ``dataset-fashion-mnist`` package, written once as an image
folder of PNGs by :func:`hdmlp.datasets.make_fashion_mnist_folder` (``--data``).
hdmlp's staging threads read the PNGs in the job's clairvoyant order and its C++
pipeline decodes and normalises them into float32 batches; each batch reaches JAX
through DLPack (``jax.dlpack.from_dlpack``) without a copy. With ``--augment
python`` a Python function (:func:`random_shift`, NumPy) shifts every training
image by up to two pixels in hdmlp's Python worker processes, seeded from
(seed, epoch, sample), so a run is reproducible whatever ``--python-workers``.

The model is a two-layer perceptron (784-256-10, ReLU) trained with Adam, written
in plain JAX (``jax.grad``, ``jax.jit``). Reported per epoch: seconds, the time the
training loop waited for its next batch (stall), and the test accuracy.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import numpy as np

import hdmlp
import hdmlp.transforms as T
from hdmlp.datasets import make_fashion_mnist_folder

MEAN, STD = [0.286], [0.353]   # Fashion-MNIST's pixels, scaled to [0, 1]
NUM_CLASSES = 10


def random_shift(image: np.ndarray) -> np.ndarray:
    """A [3, 28, 28] float32 image shifted by up to 2 pixels each way (zero fill); hdmlp seeds NumPy per sample."""
    dy, dx = np.random.randint(-2, 3, size=2)
    out = np.zeros_like(image)
    h, w = image.shape[1:]
    out[:, max(dy, 0):h + min(dy, 0), max(dx, 0):w + min(dx, 0)] = \
        image[:, max(-dy, 0):h + min(-dy, 0), max(-dx, 0):w + min(-dx, 0)]
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", default=None, help="the image folder (train/ and test/), written there when missing; "
                                                "default data/fashion-mnist, or data/fashion-mnist-<limit>")
    p.add_argument("--source", default=None, help="folder of the IDX files (default: Debian's package)")
    p.add_argument("--limit", type=int, default=None, help="use the first N images of each split")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--augment", choices=["none", "python"], default="none",
                   help="python: shift the training images in hdmlp's Python workers")
    p.add_argument("--python-workers", type=int, default=None, help="hdmlp's Python worker processes")
    return p.parse_args(argv)


def init_params(key: Any) -> dict:
    import jax
    k1, k2 = jax.random.split(key)
    scale1, scale2 = (2.0 / 784) ** 0.5, (2.0 / 256) ** 0.5
    return {"w1": jax.random.normal(k1, (784, 256)) * scale1, "b1": jax.numpy.zeros(256),
            "w2": jax.random.normal(k2, (256, NUM_CLASSES)) * scale2, "b2": jax.numpy.zeros(NUM_CLASSES)}


def make_steps(lr: float) -> tuple[Any, Any]:
    import jax
    import jax.numpy as jnp

    def logits(params: dict, images: Any) -> Any:
        x = images[:, 0].reshape(images.shape[0], -1)   # the grayscale channel of [B, 3, 28, 28]
        h = jax.nn.relu(x @ params["w1"] + params["b1"])
        return h @ params["w2"] + params["b2"]

    def loss(params: dict, images: Any, labels: Any) -> Any:
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits(params, images)) * jax.nn.one_hot(labels, NUM_CLASSES),
                                 axis=-1))

    @jax.jit
    def train_step(params: dict, state: dict, images: Any, labels: Any) -> tuple[dict, dict, Any]:
        value, grads = jax.value_and_grad(loss)(params, images, labels)
        t = state["t"] + 1
        m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, state["m"], grads)
        v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, state["v"], grads)
        params = jax.tree_util.tree_map(
            lambda p, m, v: p - lr * (m / (1 - 0.9 ** t)) / (jnp.sqrt(v / (1 - 0.999 ** t)) + 1e-8), params, m, v)
        return params, {"t": t, "m": m, "v": v}, value

    @jax.jit
    def correct(params: dict, images: Any, labels: Any) -> Any:
        return jnp.sum(jnp.argmax(logits(params, images), axis=-1) == labels)

    return train_step, correct


def to_jax(array: Any) -> Any:
    """An hdmlp array (or a NumPy one) as a JAX array on the CPU, through DLPack (no copy)."""
    import jax
    return jax.dlpack.from_dlpack(array)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import jax
    import jax.numpy as jnp

    data = args.data or os.path.join("data", "fashion-mnist" + (f"-{args.limit}" if args.limit else ""))
    root = make_fashion_mnist_folder(data, source=args.source, limit=args.limit)
    chain = [T.ImgDecode(), T.ToTensor(), T.Normalize(MEAN, STD)]
    train_chain = chain + [random_shift] if args.augment == "python" else chain
    train = hdmlp.Job(root / "train", batch_size=args.batch_size, epochs=args.epochs, seed=args.seed,
                      drop_last_batch=True, transforms=train_chain, python_workers=args.python_workers)
    test = hdmlp.Job(root / "test", batch_size=500, epochs=args.epochs, shuffle=False, transforms=chain,
                     seed=args.seed)
    train_step, correct = make_steps(args.lr)
    params = init_params(jax.random.PRNGKey(args.seed))
    state = {"t": 0, "m": jax.tree_util.tree_map(jnp.zeros_like, params),
             "v": jax.tree_util.tree_map(jnp.zeros_like, params)}
    print(f"JAX {jax.__version__} on {jax.devices()[0].platform}; hdmlp {hdmlp.__version__}; "
          f"{len(train)} training and {len(test)} test images; augment={args.augment}", flush=True)
    accuracy = 0.0
    try:
        for epoch in range(args.epochs):
            start, stall, steps, total = time.perf_counter(), 0.0, 0, 0.0
            batches = train.batches(epoch)
            while True:
                t = time.perf_counter()
                batch = next(batches, None)
                stall += time.perf_counter() - t
                if batch is None:
                    break
                images, labels = to_jax(batch.samples), to_jax(batch.labels)
                params, state, loss = train_step(params, state, images, labels)
                total += float(loss)
                steps += 1
            seconds = time.perf_counter() - start
            right = sum(int(correct(params, to_jax(x), to_jax(y))) for x, y in test.batches(epoch))
            accuracy = right / len(test)
            print(f"epoch {epoch}: {seconds:.1f} s, stall {stall:.2f} s, loss {total / max(steps, 1):.3f}, "
                  f"test accuracy {accuracy:.2%}", flush=True)
    finally:
        train.close()
        test.close()
    print(f"final test accuracy {accuracy:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
