"""Issue 16: batches for any framework (DLPack and the buffer protocol), and hdmlp without torch."""
import ctypes
import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hdmlp
import hdmlp.numpy
import hdmlp.transforms as T
import transform_fns as F
from hdmlp import _core
from hdmlp.datasets import make_image_folder

HERE = os.path.dirname(os.path.abspath(__file__))
CHAIN = [T.ImgDecode(), T.RandomResizedCrop(16), T.RandomHorizontalFlip(), T.ToTensor()]


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("frameworks") / "data"
    make_image_folder(root, num_images=40, num_classes=3, seed=9, min_side=40, max_side=90)
    return root


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _Versioned(ctypes.Structure):  # DLManagedTensorVersioned's head: version, manager_ctx, deleter, flags
    _fields_ = [("version", _Version), ("ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("data", ctypes.c_void_p)]


def capsule_head(capsule, name):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return _Versioned.from_address(get(capsule, name))


def test_arrays_export_dlpack_and_the_buffer_protocol_without_a_copy():
    segment = _core.SharedMemory(4096)
    a = segment.view(64, [3, 4], "float32")
    assert (a.shape, a.dtype, a.ndim, a.nbytes, len(a)) == ((3, 4), np.float32, 2, 48, 3)
    assert a.__dlpack_device__() == (1, 0)
    np.asarray(a)[:] = np.arange(12, dtype=np.float32).reshape(3, 4)
    for view in (np.asarray(a), np.from_dlpack(a), memoryview(a)):
        assert np.asarray(view).ctypes.data == a.address == segment.address + 64  # the same memory
        assert np.array_equal(np.asarray(view), np.arange(12).reshape(3, 4))
    # The 2023 protocol: a versioned capsule (1.0) for consumers that ask, the legacy one otherwise.
    versioned = a.__dlpack__(max_version=(1, 0))
    head = capsule_head(versioned, b"dltensor_versioned")
    assert (head.version.major, head.version.minor, head.flags) == (1, 0, 0) and head.data == a.address
    assert "dltensor" in repr(a.__dlpack__()) and "versioned" not in repr(a.__dlpack__())
    assert "dltensor\"" in repr(a.__dlpack__(max_version=(0, 8)))
    copied = a.__dlpack__(max_version=(1, 0), copy=True)
    head = capsule_head(copied, b"dltensor_versioned")
    assert head.flags & 2 and head.data != a.address  # IS_COPIED
    c = np.from_dlpack(a, copy=True)
    assert c.ctypes.data != a.address and np.array_equal(c, np.asarray(a))
    with pytest.raises(BufferError, match="host memory"):
        a.__dlpack__(dl_device=(2, 0))
    assert a.__dlpack__(dl_device=(1, 0)) is not None
    for dtype in ("bool", "int8", "uint16", "int32", "uint64", "float16", "float64"):
        v = segment.view(0, [2, 2], dtype)
        assert np.from_dlpack(v).dtype == np.dtype(dtype) == np.asarray(v).dtype
    # Unconsumed capsules, consumed ones and views all hold the memory; it is counted free after the last.
    del versioned, copied, v, c, view
    gc.collect()
    assert segment.views == 1
    held = np.from_dlpack(a)
    del a
    gc.collect()
    assert segment.views == 1 and held[2, 3] == 11
    del held
    gc.collect()
    assert segment.views == 0
    with pytest.raises(ValueError, match="does not fit"):
        segment.view(4090, [4], "float32")


def test_batches_are_framework_free_and_memory_is_never_overwritten_while_held(images):
    """numpy views of many batches held across epochs stay intact; the BatchPool reuses only released buffers."""
    with hdmlp.Job(images, batch_size=8, epochs=4, seed=5, transforms=CHAIN, index_cache=False) as job:
        held, copies = [], []
        for epoch in range(2):
            for batch in job.batches(epoch):
                x, y = batch
                assert batch.epoch == epoch and len(batch) == len(batch.ids) == len(np.asarray(y))
                assert np.from_dlpack(batch).ctypes.data == x.address  # the batch exports its images
                view = np.from_dlpack(x) if batch.index % 2 else np.asarray(x)
                assert view.ctypes.data == x.address
                assert x.address not in {h.ctypes.data for h in held}  # none reused while a view holds it
                held.append(view)
                copies.append(view.copy())
        for view, copy in zip(held, copies):
            assert np.array_equal(view, copy)
        del held, copies, view, x, y, batch
        gc.collect()
        before = job._job.batch_allocations
        for epoch in (2, 3):
            for images_np, labels_np in hdmlp.numpy.batches(job, epoch):
                assert isinstance(images_np, np.ndarray) and images_np.dtype == np.float32
                assert labels_np.dtype == np.int64
        assert job._job.batch_allocations == before  # released buffers were reused
    # Raw bytes: a list of per-sample 1-D uint8 arrays, each the file's exact bytes.
    with hdmlp.Job(images, batch_size=8, epochs=1, seed=5, index_cache=False) as job:
        paths = [p for p, _ in job.samples]
        for batch in job.batches():
            assert isinstance(batch.samples, list)
            for i, b in zip(batch.ids, batch.samples):
                with open(paths[i], "rb") as f:
                    assert np.from_dlpack(b).tobytes() == f.read() == bytes(memoryview(b))
            with pytest.raises(BufferError, match="samples are a list"):
                np.from_dlpack(batch)


def test_python_transform_batches_held_across_many_batches(images):
    with hdmlp.Job(images, batch_size=4, epochs=3, seed=5, index_cache=False, python_workers=2,
                   transforms=[T.ImgDecode(), T.Resize((6, 6)), F.identity]) as job:
        held, copies = [], []
        for batch in job.batches(0):
            held.append(np.from_dlpack(batch.samples))
            copies.append(held[-1].copy())
        for batch in job.batches(1):  # a whole epoch more through the same workers, not held
            pass
        for view, copy in zip(held, copies):
            assert np.array_equal(view, copy)
        segments = {s.id for s in job._python._outputs}
        assert len(segments) >= len(held) + 1  # each held batch kept its own shared memory
        del held, copies, view, batch
        gc.collect()
        for batch in job.batches(2):
            pass
        after = {s.id for s in job._python._outputs}
        assert after <= segments and len(after) < len(segments)  # released ones reused, extra ones given back


def test_jax_takes_batches_without_a_copy_and_holds_them(images):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    with hdmlp.Job(images, batch_size=8, epochs=2, seed=5, transforms=CHAIN, index_cache=False) as job:
        held, sums = [], []
        for batch in job.batches(0):
            x = jax.dlpack.from_dlpack(batch.samples)
            assert x.unsafe_buffer_pointer() == batch.samples.address  # zero-copy
            assert x.shape == batch.samples.shape and x.dtype == jnp.float32
            y = jax.dlpack.from_dlpack(batch.labels)
            assert list(np.asarray(y)) == [job.targets[i] for i in batch.ids]
            held.append(x)
            sums.append(float(jnp.sum(x)))
            assert float(jnp.sum(jnp.asarray(batch.samples))) == sums[-1]  # jnp.asarray takes them (with a copy)
        addresses = {x.unsafe_buffer_pointer() for x in held}
        for batch in job.batches(1):
            assert batch.samples.address not in addresses  # held by JAX: never written again
        assert [float(jnp.sum(x)) for x in held] == sums


def test_tensorflow_takes_batches(images):
    tf = pytest.importorskip("tensorflow", reason="TensorFlow is not installed (pip install 'hdmlp[tensorflow]')")
    with hdmlp.Job(images, batch_size=8, epochs=1, seed=5, transforms=CHAIN, index_cache=False) as job:
        for batch in job.batches():
            t = tf.experimental.dlpack.from_dlpack(batch.samples.__dlpack__())
            assert tuple(t.shape) == batch.samples.shape and np.array_equal(t.numpy(), np.asarray(batch.samples))


def test_hdmlp_works_without_torch(images, tmp_path):
    """import hdmlp, Job, batches(), hdmlp.numpy and Python transforms with torch blocked; hdmlp.torch names the extra."""
    script = tmp_path / "no_torch.py"
    script.write_text(textwrap.dedent(f"""
        import importlib.abc, sys
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith(("torch.", "torchvision")):
                    raise ImportError(f"No module named {{name!r}} (blocked by the test)")
        sys.meta_path.insert(0, Block())
        sys.path.insert(0, {HERE!r})
        import numpy as np
        import hdmlp, hdmlp.numpy, hdmlp.transforms as T, transform_fns
        if __name__ == "__main__":
            root = {str(images)!r}
            chain = [T.ImgDecode(), T.Resize((8, 8)), T.ToTensor()]
            with hdmlp.Job(root, 8, 1, seed=1, transforms=chain, index_cache=False) as job:
                x = np.concatenate([x for x, _ in hdmlp.numpy.batches(job)])
            with hdmlp.Job(root, 8, 1, seed=1, index_cache=False, python_workers=1,
                           transforms=[T.ImgDecode(), T.Resize((8, 8)), T.ToTensor(), transform_fns.identity]) as job:
                y = np.concatenate([np.asarray(b.samples) for b in job.batches()])
            with hdmlp.Job(root, 8, 1, seed=1, index_cache=False) as job:
                n = sum(len(b.samples) for b in job.batches())
                first = job.samples[0][0]
            assert np.array_equal(x, y) and n == len(x) == 40, (x.shape, y.shape, n)
            assert T.apply(chain, open(first, "rb").read()).shape == (3, 8, 8)
            try:
                import hdmlp.torch
            except ImportError as e:
                assert "hdmlp[torch]" in str(e), e
            else:
                raise AssertionError("hdmlp.torch imported without torch")
            assert "torch" not in sys.modules
            print("ok")
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
