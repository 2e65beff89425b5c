"""examples/imagenet.py, the port of PyTorch's ImageNet example, under torchrun: two ranks
(gloo, CPU, DDP all-reduces in every step) of a tiny model for two epochs on a generated
folder with uneven sizes, drop_last_batch=False. hdmlp takes the ranks from torch.distributed,
agrees on a drawn seed through it, and every rank takes every step."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from hdmlp.datasets import make_image_folder

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "imagenet.py")
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")


def test_imagenet_example_on_two_ranks_with_uneven_batches(tmp_path):
    if not os.path.exists(TORCHRUN):
        pytest.skip("torchrun is not installed next to this Python")
    data = tmp_path / "data"
    # 50 training images in global batches of 8: 6 steps of 4 + 4 and a last of 1 + 1;
    # 21 validation images: 4 + 4, 4 + 4, 3 + 2.
    make_image_folder(data / "train", num_images=50, num_classes=6, seed=1, min_side=40, max_side=64)
    make_image_folder(data / "val", num_images=21, num_classes=6, seed=2, min_side=40, max_side=64)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_"))}
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    cmd = [TORCHRUN, "--standalone", "--nproc-per-node", "2", EXAMPLE, "--arch", "tiny", "--image-size", "32",
           "--no-accel", "--dist-url", "env://", "--dist-backend", "gloo", "--epochs", "2", "-b", "4", "-j", "1",
           "-p", "1", "--metrics-json", str(tmp_path / "metrics{rank}.json"), str(data)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"metrics{r}.json").read_text()) for r in range(2)]
    assert [r["len"] for r in ranks] == [{"train": 7, "val": 3}] * 2
    for split, size in (("train", 50), ("val", 21)):
        jobs = [r[split] for r in ranks]
        assert [j["rank"] for j in jobs] == [0, 1] and {j["world_size"] for j in jobs} == {2}
        assert {j["transport"] for j in jobs} == {"none"}
        assert jobs[0]["seed"] == jobs[1]["seed"], "the ranks agreed on rank 0's drawn seed"
        for e in range(2):
            assert sum(j["epochs"][e]["samples"] for j in jobs) == size
    # Every rank printed every step of every epoch (-p 1), and the summary of both validations.
    for e in range(2):
        assert proc.stdout.count(f"Epoch: [{e}][7/7]") == 2
    assert proc.stdout.count("Test: [3/3]") == 4
    assert proc.stdout.count(" * ") == 4
    assert (tmp_path / "checkpoint.pth.tar").exists()
