"""What `scripts/dev.sh wheel-test WHEEL SUITE` runs inside a fresh chroot, from outside any
checkout, with only `pip install WHEEL numpy` done: does an installed wheel work?

1. `import hdmlp` (timed) and `hdmlp --version`;
2. a Job with the C++ ImageNet training chain over a generated folder of 200 JPEGs (made from PNG
   "photos" this script writes, so the bundled PNG decoder and JPEG encoder run too), every
   sample exactly once per epoch, and over a folder of PNGs;
3. `hdmlp pack` and the pack read back, byte for byte;
4. `mpirun -np 2`: every sample exactly once per epoch across the ranks, checked by hashes;
5. `job.batches()` into NumPy.

Standard library and NumPy only. Exits non-zero with the failing check named.
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

CHECKS: list[str] = []


def check(name: str, ok: bool, detail: str = "") -> None:
    CHECKS.append(name)
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
    if not ok:
        sys.exit(f"wheel smoke test failed: {name}")


def write_png(path: pathlib.Path, rgb) -> None:
    """A PNG from an HxWx3 uint8 array (stdlib zlib, no imaging library)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                     chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def photos(folder: pathlib.Path, n: int):
    import numpy as np
    rng = np.random.default_rng(7)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        h, w = 240 + 16 * i, 320 - 8 * i
        y, x = np.mgrid[0:h, 0:w]
        img = np.stack([(x * 255 // w), (y * 255 // h), ((x + y + 40 * i) % 256)], axis=-1)
        img = np.clip(img + rng.normal(0, 12, img.shape), 0, 255).astype(np.uint8)
        p = folder / f"photo{i}.png"
        write_png(p, img)
        paths.append(p)
    return paths


MPI_SCRIPT = r"""
import hashlib, json, sys
import hdmlp
data, out = sys.argv[1], sys.argv[2]
with hdmlp.Job(data, batch_size=8, epochs=2, seed=3) as job:
    seen = {}
    for epoch in range(2):
        for batch in job.batches(epoch):
            for sample in batch.samples:
                seen.setdefault(epoch, []).append(hashlib.sha256(memoryview(sample).tobytes()).hexdigest())
    json.dump({"rank": job.rank, "world": job.world_size, "seen": seen}, open(f"{out}.{job.rank}", "w"))
"""


def main() -> int:
    t0 = time.perf_counter()
    import hdmlp
    import_s = time.perf_counter() - t0
    check("import hdmlp", True, f"{import_s:.3f} s (cold), from {pathlib.Path(hdmlp.__file__).parent}")
    check("installed, not a checkout", "site-packages" in hdmlp.__file__, hdmlp.__file__)
    version = subprocess.run(["hdmlp", "--version"], capture_output=True, text=True)
    check("hdmlp --version", version.returncode == 0 and "opencv" in version.stdout,
          " | ".join(line.strip() for line in version.stdout.splitlines()))
    probe = "import time; t = time.perf_counter(); import hdmlp; print(time.perf_counter() - t)"
    warm = sorted(float(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                                       check=True).stdout) for _ in range(5))
    check("import hdmlp (warm)", True, f"median {warm[2]:.3f} s of 5 fresh interpreters (min {warm[0]:.3f} s, "
          f"load average {os.getloadavg()[0]:.1f})")

    import numpy as np
    import hdmlp.numpy as hnp
    import hdmlp.transforms as T
    from hdmlp.datasets import make_image_folder

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="hdmlp-smoke-"))
    os.environ.setdefault("HDMLP_CACHE_DIR", str(tmp / "cache"))
    src = photos(tmp / "photos", 3)
    n = 200
    data = make_image_folder(tmp / "jpegs", num_images=n, num_classes=3, seed=1, photos=src, threads=2)
    jpegs = sorted(data.rglob("*.JPEG"))
    check("generated folder", len(jpegs) == n, f"{len(jpegs)} JPEGs from 3 PNG photos")

    chain = [T.ImgDecode(), T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
             T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]
    with hdmlp.Job(str(data), batch_size=16, epochs=2, transforms=chain, seed=5) as job:
        shapes, ids, finite = [], [], True
        for epoch in range(2):
            ids.append([])
            for batch in job.batches(epoch):
                samples = np.asarray(batch.samples)
                shapes.append(samples.shape)
                ids[epoch].extend(int(i) for i in batch.ids)
                finite = finite and bool(np.isfinite(samples).all())
    check("Job with the C++ training chain", shapes == ([(16, 3, 224, 224)] * 12 + [(8, 3, 224, 224)]) * 2
          and finite, f"{len(shapes)} batches of {shapes[0]} over 2 epochs")
    for epoch in range(2):
        check(f"training chain, epoch {epoch}: each sample exactly once", sorted(ids[epoch]) == list(range(n)),
              f"{len(ids[epoch])} deliveries, {len(set(ids[epoch]))} distinct, of {n}")

    png_root = tmp / "pngs" / "only"
    png_root.mkdir(parents=True)
    for p in src:
        shutil.copy(p, png_root / p.name)
    with hdmlp.Job(str(tmp / "pngs"), batch_size=3, epochs=1, transforms=[T.ImgDecode(), T.Resize(64),
                   T.CenterCrop(64), T.ToUint8()], seed=5) as job:
        b = next(iter(hnp.batches(job)))[0]
    check("PNG decode through the chain", b.shape in ((3, 3, 64, 64), (3, 64, 64, 3)) and b.dtype == np.uint8
          and int(b.max()) > 0, f"{b.shape} {b.dtype}")

    pack = tmp / "pack"
    r = subprocess.run(["hdmlp", "pack", str(data), str(pack)], capture_output=True, text=True)
    check("hdmlp pack", r.returncode == 0, (r.stdout + r.stderr).strip().splitlines()[-1] if r.stdout + r.stderr
          else "")
    want = sorted(hashlib.sha256(p.read_bytes()).hexdigest() for p in jpegs)
    with hdmlp.Job(str(pack), batch_size=16, epochs=1, seed=2) as job:
        got = sorted(hashlib.sha256(memoryview(s).tobytes()).hexdigest() for b in job.batches() for s in b.samples)
    check("pack read back", got == want, f"{len(got)} samples, the same bytes as the folder")

    mpirun = shutil.which("mpirun")
    check("mpirun present", mpirun is not None)
    script = tmp / "mpi_job.py"
    script.write_text(MPI_SCRIPT)
    out = tmp / "ranks"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run([mpirun, "-np", "2", "--oversubscribe", "--allow-run-as-root", sys.executable, str(script),
                        str(data), str(out)], capture_output=True, text=True, env=env,
                       timeout=float(os.environ.get("HDMLP_SMOKE_MPI_TIMEOUT") or 300))  # test.sh: longer under qemu
    if r.returncode != 0:
        print(r.stdout[-3000:], r.stderr[-3000:])
    check("mpirun -np 2 ran", r.returncode == 0)
    ranks = [json.loads(pathlib.Path(f"{out}.{i}").read_text()) for i in range(2)]
    check("two ranks of one world", sorted(x["rank"] for x in ranks) == [0, 1] and all(x["world"] == 2 for x in ranks))
    for epoch in ("0", "1"):
        seen = sorted(h for x in ranks for h in x["seen"][epoch])
        check(f"epoch {epoch}: each sample exactly once across the ranks", seen == want,
              f"{len(seen)} deliveries, {len(set(seen))} distinct, of {len(want)}")

    with hdmlp.Job(str(data), batch_size=12, epochs=1, seed=9) as job:
        arrays = [(np.asarray(s), np.asarray(b.labels)) for b in job.batches() for s in b.samples]
    check("job.batches() into NumPy", len(arrays) == n and all(a.dtype == np.uint8 and a.ndim == 1 for a, _ in arrays))

    shutil.rmtree(tmp, ignore_errors=True)
    print(f"all {len(CHECKS)} checks passed (python {sys.version.split()[0]}, import {import_s:.3f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
