"""Dataset indexing: hdmlp's parallel scan and its index cache against torchvision.

Makes a folder of N small files in C classes (once), then, side by side:
torchvision.datasets.ImageFolder(root) (what a PyTorch job does at every
start), hdmlp's first scan (parallel, no cache), and hdmlp's restart (the
index cache). Prints seconds and ratios.

    python benchmarks/index_scan.py --files 100000 --classes 1000
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import torchvision

import hdmlp


def make_tree(root: str, files: int, classes: int) -> None:
    marker = os.path.join(root, ".complete")
    if os.path.exists(marker):
        return
    for i in range(files):
        d = os.path.join(root, f"n{i % classes:08d}")
        if i < classes:
            os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"img_{i:08d}.JPEG"), "wb") as f:
            f.write(b"x")
    open(marker, "w").close()
    # Age the folders so the index cache accepts them (see docs/architecture.md).
    for dirpath, _, _ in os.walk(root):
        st = os.stat(dirpath)
        os.utime(dirpath, ns=(st.st_atime_ns, st.st_mtime_ns - 60 * 10**9))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", type=int, default=100_000)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--root", default=None)
    args = p.parse_args()
    root = args.root or os.path.join(hdmlp.user_cache_dir(), "datasets", f"scan-{args.files}-{args.classes}")
    make_tree(root, args.files, args.classes)

    with tempfile.TemporaryDirectory() as cache:
        os.environ["HDMLP_CACHE_DIR"] = cache
        t = time.perf_counter()
        tv = torchvision.datasets.ImageFolder(root)
        t_tv = time.perf_counter() - t

        t = time.perf_counter()
        with hdmlp.Job(root, 1, 1, seed=0, index_cache=False) as job:
            n = len(job)
        t_scan = time.perf_counter() - t

        with hdmlp.Job(root, 1, 1, seed=0):  # fills the cache
            pass
        t = time.perf_counter()
        job = hdmlp.Job(root, 1, 1, seed=0)
        t_cached = time.perf_counter() - t
        assert job.index_from_cache
        same = job.samples == tv.samples
        job.close()

    assert n == len(tv) and same
    print(f"{n} files in {args.classes} classes, {os.cpu_count()} cores")
    print(f"  torchvision ImageFolder          {t_tv:7.3f} s   1.00x")
    print(f"  hdmlp Job, parallel scan         {t_scan:7.3f} s   {t_tv / t_scan:5.2f}x faster")
    print(f"  hdmlp Job, restart (index cache) {t_cached:7.3f} s   {t_tv / t_cached:5.2f}x faster")


if __name__ == "__main__":
    main()
