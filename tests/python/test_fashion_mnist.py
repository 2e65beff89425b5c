"""Fashion-MNIST as an image folder (hdmlp.datasets.make_fashion_mnist_folder) and the
training example examples/train_fashion_mnist.py, on small synthetic IDX files (the
tests do not need Debian's dataset-fashion-mnist package)."""
import gzip
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys

import pytest
from PIL import Image

import hdmlp
from hdmlp.datasets import FASHION_MNIST_CLASSES, make_fashion_mnist_folder

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "train_fashion_mnist.py")
FOLDERS = ["0_T-shirt_top", "1_Trouser", "2_Pullover", "3_Dress", "4_Coat", "5_Sandal", "6_Shirt", "7_Sneaker",
           "8_Bag", "9_Ankle_boot"]


def write_idx(path, dims, data, compress):
    raw = b"\0\0\x08" + bytes([len(dims)]) + struct.pack(f">{len(dims)}I", *dims) + data
    with open(path, "wb") as f:
        f.write(gzip.compress(raw, mtime=0) if compress else raw)


def make_source(folder, n_train, n_test, seed=0, labels=None):
    """Four IDX files (train gzipped, test not) of random 28x28 images; returns the pixels and labels."""
    rng = random.Random(seed)
    os.makedirs(folder, exist_ok=True)
    out = {}
    for split, n, prefix, gz in [("train", n_train, "train", True), ("test", n_test, "t10k", False)]:
        pixels = rng.randbytes(n * 784)
        lab = bytes(labels[split]) if labels else bytes(rng.randrange(10) for _ in range(n))
        ext = ".gz" if gz else ""
        write_idx(os.path.join(folder, f"{prefix}-images-idx3-ubyte{ext}"), (n, 28, 28), pixels, gz)
        write_idx(os.path.join(folder, f"{prefix}-labels-idx1-ubyte{ext}"), (n,), lab, gz)
        out[split] = (pixels, lab)
    return out


def folder_files(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root) for f in files
                  if not f.startswith(".hdmlp_generated"))


def test_pixels_and_labels_round_trip(tmp_path):
    src = make_source(tmp_path / "idx", 40, 15)
    root = make_fashion_mnist_folder(tmp_path / "fm", source=tmp_path / "idx")
    for split, (pixels, labels) in src.items():
        files = folder_files(root / split)
        assert len(files) == len(labels)
        for i, label in enumerate(labels):
            path = root / split / FOLDERS[label] / f"{i:05d}.png"
            with Image.open(path) as im:
                assert im.format == "PNG" and im.mode == "L" and im.size == (28, 28)
                assert im.tobytes() == pixels[i * 784:(i + 1) * 784], path
    # hdmlp (and so torchvision's ImageFolder) gives every image its Fashion-MNIST label: the
    # class folders sort in label order (all ten classes are present here).
    with hdmlp.Job(root / "train", batch_size=8, epochs=1) as job:
        assert job.classes == FOLDERS
        for path, label in job.samples:
            assert label == src["train"][1][int(os.path.basename(path)[:5])], path
    assert len(FASHION_MNIST_CLASSES) == 10 and FASHION_MNIST_CLASSES[0] == "T-shirt/top"


def test_deterministic_idempotent_and_limit(tmp_path):
    make_source(tmp_path / "idx", 30, 10)
    a = make_fashion_mnist_folder(tmp_path / "a", source=tmp_path / "idx")
    b = make_fashion_mnist_folder(tmp_path / "b", source=tmp_path / "idx")
    files = folder_files(a)
    assert files == folder_files(b) and len(files) == 40
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    assert json.loads((a / ".hdmlp_generated").read_text())["state"] == "complete"

    mtimes = {f: os.stat(a / f).st_mtime_ns for f in files}
    os.unlink(a / files[3])
    make_fashion_mnist_folder(a, source=tmp_path / "idx")  # rewrites the missing file alone
    assert folder_files(a) == files
    assert all(os.stat(a / f).st_mtime_ns == mtimes[f] for f in files if f != files[3])
    assert (a / files[3]).read_bytes() == (b / files[3]).read_bytes()

    make_fashion_mnist_folder(a, source=tmp_path / "idx", limit=5)  # the other images go
    assert sorted(int(os.path.basename(f)[:5]) for f in folder_files(a / "train")) == list(range(5))
    assert len(folder_files(a / "test")) == 5
    assert all(os.listdir(a / split / c) for split in ("train", "test") for c in os.listdir(a / split))
    make_fashion_mnist_folder(a, source=tmp_path / "idx")
    assert folder_files(a) == files


def test_missing_idx_files_name_the_debian_package(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="dataset-fashion-mnist") as e:
        make_fashion_mnist_folder(tmp_path / "fm", source=tmp_path / "empty")
    assert "train-images-idx3-ubyte" in str(e.value) and "apt-get install" in str(e.value)


def test_bad_input(tmp_path):
    make_source(tmp_path / "idx", 6, 4)
    with pytest.raises(ValueError, match="limit"):
        make_fashion_mnist_folder(tmp_path / "fm", source=tmp_path / "idx", limit=0)
    write_idx(tmp_path / "idx" / "t10k-labels-idx1-ubyte", (3,), b"\0\1\2", False)  # 4 images, 3 labels
    with pytest.raises(ValueError, match="4 images but .*3 labels"):
        make_fashion_mnist_folder(tmp_path / "fm", source=tmp_path / "idx")
    (tmp_path / "idx" / "t10k-labels-idx1-ubyte").write_bytes(b"\0\0\x08\x01\0\0\0\x09abc")
    with pytest.raises(ValueError, match="announces 9"):
        make_fashion_mnist_folder(tmp_path / "fm", source=tmp_path / "idx")
    make_source(tmp_path / "idx", 6, 4)
    (tmp_path / "mine" / "train").mkdir(parents=True)  # someone's folder, not ours: never touched
    with pytest.raises(FileExistsError, match="not written by make_fashion_mnist_folder"):
        make_fashion_mnist_folder(tmp_path / "mine", source=tmp_path / "idx")


# ---------------------------------------------------------------- the example

@pytest.fixture(scope="module")
def source(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fashion-idx")
    # Every class in both splits, so both loaders see the same ten classes.
    labels = {"train": [i % 10 for i in range(320)], "test": [i % 10 for i in range(100)]}
    make_source(str(folder), 320, 100, labels=labels)
    return folder


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_report(report_md, ranks, loaders, epochs=1):
    report = json.loads(report_md.with_suffix(".json").read_text())
    assert report["world_size"] == ranks
    assert [r["loader"] for r in report["runs"]] == loaders
    for run in report["runs"]:
        assert len(run["epochs"]) == epochs
        for row in run["epochs"]:
            assert row["seconds"] > 0 and row["images"] == 320 and row["test_images"] == 100
            assert row["stall_s"] >= 0 and 0 <= row["test_accuracy"] <= 1
            assert set(row["per_step_ms"]) == {"read", "load_transform", "train", "stall"}
            assert row["per_step_ms"]["read"] > 0 and row["per_step_ms"]["load_transform"] > 0
            assert row["per_step_ms"]["train"] > 0
    md = report_md.read_text()
    for needle in [f"| {run['label']} | 0 |" for run in report["runs"]] + ["read | load/transform | train | stall",
                                                                          "do not edit"]:
        assert needle in md


def run_example(args, tmp_path, ranks=1):
    cmd = [sys.executable, EXAMPLE] + args
    env = dict(os.environ, MASTER_PORT=str(free_port()))
    if ranks > 1:
        mpirun = shutil.which("mpirun")
        if mpirun is None:
            pytest.skip("mpirun (OpenMPI) is not installed")
        cmd = [mpirun, "--oversubscribe", "-np", str(ranks)] + (["--allow-run-as-root"] if os.geteuid() == 0 else []) \
            + cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=150, env=env, cwd=tmp_path)


# One process with both loaders; two ranks (DDP over gloo, hdmlp over MPI) with hdmlp only,
# since every rank's start (importing torch) is most of the time here. The one process is this
# one (main(), as the resume test's first runs): the example's command line runs under mpirun
# here and in the resume test.
@pytest.mark.parametrize("ranks,loader", [(1, "both"), (2, "hdmlp")])
def test_example_trains_and_reports(source, tmp_path, ranks, loader, capsys):
    report = tmp_path / "out" / "fm.md"
    args = ["--source", str(source), "--data", str(tmp_path / "fm"), "--loader", loader, "--epochs", "1",
            "--batch-size", "32", "--workers", "1", "--report", str(report)]
    if ranks == 1:
        out = run_example_here(args, tmp_path, capsys)
    else:
        proc = run_example(args, tmp_path, ranks)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        out = proc.stdout
    loaders = ["torch", "hdmlp"] if loader == "both" else [loader]
    check_report(report, ranks, loaders)
    for label in ["torch (1 worker)", "hdmlp"] if loader == "both" else [loader]:
        assert f"[{label}] epoch 0:" in out and "test accuracy" in out


def run_example_here(args, tmp_path, capsys):
    """The example's main() in this process (no torch import to wait for); its signal handlers
    and torch's thread count are put back afterwards."""
    import importlib.util
    import signal
    import torch
    spec = importlib.util.spec_from_file_location("train_fashion_mnist", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGUSR1)}
    threads, cwd = torch.get_num_threads(), os.getcwd()
    try:
        os.chdir(tmp_path)
        assert example.main(args) == 0
    finally:
        os.chdir(cwd)
        torch.set_num_threads(threads)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    return capsys.readouterr().out


def test_an_interrupted_run_resumes_to_the_same_weights(source, tmp_path, capsys):
    """Issue 14's preemption recipe: a run stopped by SIGTERM in the middle of its second epoch
    and resumed from its checkpoint in a new process ends with the weights and the test
    accuracy of the uninterrupted run, bit for bit."""
    import torch
    common = ["--source", str(source), "--data", str(tmp_path / "fm"), "--loader", "hdmlp", "--epochs", "2",
              "--batch-size", "32"]
    whole = run_example_here(common + ["--checkpoint", str(tmp_path / "whole.pt")], tmp_path, capsys)
    # 320 images, 10 steps per epoch: stopped after step 13, in epoch 1.
    stopped = run_example_here(common + ["--checkpoint", str(tmp_path / "ck.pt"), "--simulate-preemption", "13"],
                               tmp_path, capsys)
    assert "stopped after epoch 1's global batch 3" in stopped
    assert "final test accuracy" not in stopped
    resumed = run_example(common + ["--checkpoint", str(tmp_path / "ck.pt"), "--resume", str(tmp_path / "ck.pt")],
                          tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    a, b = torch.load(tmp_path / "whole.pt"), torch.load(tmp_path / "ck.pt")
    assert a["model"].keys() == b["model"].keys()
    for name in a["model"]:
        assert torch.equal(a["model"][name], b["model"][name]), name
    final = [line for line in whole.splitlines() if line.startswith("final test accuracy")]
    assert final and final == [line for line in resumed.stdout.splitlines() if line.startswith("final test accuracy")]
    assert [r["test_accuracy"] for r in a["epochs"]] == [r["test_accuracy"] for r in b["epochs"]]
    assert a["job"] == b["job"] and a["job"]["epoch"] == 2
