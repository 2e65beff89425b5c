"""examples/lightning_ddp.py and examples/accelerate_ddp.py on 2 CPU processes (gloo), 2 small epochs.

Every image is a class of its own, so the labels a rank records name the samples it got: every
rank takes the same steps, every sample comes once per epoch over the ranks, and a run resumed
from a checkpoint taken in the middle of the first epoch gets the rest of the batches bit for bit
(labels and a checksum of the augmented pixels) as the uninterrupted run did.
"""
import glob
import json
import os
import subprocess
import sys

import pytest

from hdmlp.datasets import make_image_folder

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")
TRAIN_IMAGES = 24  # batches of 3 per rank: 4 steps per epoch
_LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                       "NODE_RANK", "GROUP_RANK", "HDMLP_NO_MPI", "SLURM_NTASKS")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("trainers")
    make_image_folder(root / "train", num_images=TRAIN_IMAGES, num_classes=TRAIN_IMAGES, seed=1, min_side=40,
                      max_side=64)
    make_image_folder(root / "val", num_images=10, num_classes=5, seed=2, min_side=40, max_side=64)
    return root


def _env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMIX_", "PMI_")) and k not in _LAUNCHER_VARIABLES}
    env["OMP_NUM_THREADS"] = "1"
    return env


def _run(cmd, cwd):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=_env(), cwd=cwd)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc


def _records(folder):
    ranks = [json.loads((folder / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["world_size"] for r in ranks] == [2, 2]
    return [r["steps"] for r in ranks]


def _check_epochs(steps, epochs=2):
    assert len(steps[0]) == len(steps[1]) == epochs * 4, "every rank takes every step"
    for epoch in range(epochs):
        labels = [y for rank in steps for s in rank if s["epoch"] == epoch for y in s["labels"]]
        assert sorted(labels) == list(range(TRAIN_IMAGES)), f"epoch {epoch}: each sample once over the ranks"
    assert [s["labels"] for s in steps[0][:4]] != [s["labels"] for s in steps[0][4:]], "a new order each epoch"


def _same_batches(resumed, full, skipped):
    for rank in range(2):
        rest = full[rank][skipped:]
        assert [(s["epoch"], s["labels"], s["crc"]) for s in resumed[rank]] == \
               [(s["epoch"], s["labels"], s["crc"]) for s in rest], f"rank {rank}: the resumed run's batches"


def test_lightning_ddp_two_processes_and_a_mid_epoch_resume(data, tmp_path):
    pytest.importorskip("lightning")
    script = os.path.join(EXAMPLES, "lightning_ddp.py")
    args = [script, str(data), "--devices", "2", "--accelerator", "cpu", "--epochs", "2", "--batch-size", "3",
            "--workers", "1"]
    # The uninterrupted run as documented: Lightning starts the second process itself (after the first
    # has imported everything, so the two start-ups take turns).
    _run([sys.executable] + args + ["--record", str(tmp_path / "full"), "--checkpoint-every", "2",
                                    "--checkpoint-dir", str(tmp_path / "ckpt")], tmp_path)
    full = _records(tmp_path / "full")
    _check_epochs(full)
    # step=2: after the second of epoch 0's four steps.
    mid = glob.glob(str(tmp_path / "ckpt" / "*step=2*.ckpt"))
    assert len(mid) == 1, os.listdir(tmp_path / "ckpt")
    # The resumed run under torchrun, whose ranks Lightning takes (docs/launching.md): both processes start
    # at once, about 10 s less on 2 cores, and the resume is checked across launchers as well.
    if os.path.exists(TORCHRUN):
        launch = [TORCHRUN, "--standalone", "--nproc-per-node", "2"]
    else:
        launch = [sys.executable]
    _run(launch + args + ["--record", str(tmp_path / "resumed"), "--resume", mid[0]], tmp_path)
    _same_batches(_records(tmp_path / "resumed"), full, skipped=2)


def test_accelerate_two_processes_and_a_mid_epoch_resume(data, tmp_path):
    pytest.importorskip("accelerate")
    if not os.path.exists(TORCHRUN):
        pytest.skip("torchrun is not installed next to this Python")
    script = os.path.join(EXAMPLES, "accelerate_ddp.py")
    common = [TORCHRUN, "--standalone", "--nproc-per-node", "2", script, str(data), "--cpu", "--epochs", "2",
              "--batch-size", "3", "--workers", "1"]
    proc = _run(common + ["--record", str(tmp_path / "full"), "--checkpoint-every", "2", "--checkpoint-dir",
                          str(tmp_path / "ckpt")], tmp_path)
    assert proc.stdout.count("validation accuracy") == 2 and "(10 images)" in proc.stdout
    full = _records(tmp_path / "full")
    _check_epochs(full)
    _run(common + ["--record", str(tmp_path / "resumed"), "--resume", str(tmp_path / "ckpt" / "step2")], tmp_path)
    _same_batches(_records(tmp_path / "resumed"), full, skipped=2)
