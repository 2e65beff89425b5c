"""hdmlp across MPI ranks: run tests/python/mpi_worker.py under mpirun (2 and 4 ranks,
oversubscribed on this 2-core machine) and check what every rank saw."""
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from hdmlp.datasets import make_image_folder

from conftest import make_folder, make_h5, make_tar_shards

WORKER = os.path.join(os.path.dirname(__file__), "mpi_worker.py")
MPIRUN = shutil.which("mpirun")
pytestmark = pytest.mark.skipif(MPIRUN is None, reason="mpirun (OpenMPI) is not installed")


def mpirun(n, scenario, data, out, timeout=120, mpirun_args=(), **opts):
    cmd = [MPIRUN, "--oversubscribe", "-np", str(n), *mpirun_args]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    cmd += [sys.executable, WORKER, scenario, str(data), str(out), json.dumps(opts)]
    env = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def results(out, n):
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(n)]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("mpi") / "data"
    digests = make_folder(str(root), classes=4, per_class=(11, 13, 9, 12))
    by_path = {os.path.join(str(root), rel): d for rel, d in digests.items()}
    total = sum(os.path.getsize(p) for p in by_path)
    return root, by_path, total


def check_exactly_once(res, by_path, epochs, drop_last=False):
    """Every epoch: each sample delivered exactly once across ranks, with its bytes on disk."""
    for e in range(epochs):
        seen = [p for r in res for p, _ in r["epochs"][e]]
        assert len(seen) == len(set(seen)), f"epoch {e}: a sample was delivered twice"
        if not drop_last:
            assert sorted(seen) == sorted(by_path), f"epoch {e}: samples missing"
        for r in res:
            for p, sha in r["epochs"][e]:
                assert sha == by_path[p], f"rank {r['rank']} got wrong bytes for {p}"


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("scheme", ["uniform", "local", "partial_local"])
def test_each_sample_once_per_epoch_across_ranks(dataset, tmp_path, n, scheme):
    root, by_path, _ = dataset
    proc = mpirun(n, "plain", root, tmp_path, batch_size=8, epochs=3, job={"distr_scheme": scheme, "seed": 5})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = results(tmp_path, n)
    assert [r["rank"] for r in res] == list(range(n))
    assert {r["world_size"] for r in res} == {n}
    assert len({r["seed"] for r in res}) == 1
    assert len({r["batches"] for r in res}) == 1  # every rank takes the same number of steps
    check_exactly_once(res, by_path, 3)
    # A rank lingers at close until its peers have closed too (at most 10 s);
    # the last one to close has nobody to wait for.
    assert min(r["close_seconds"] for r in res) < 2
    assert max(r["close_seconds"] for r in res) < 12


@pytest.fixture(scope="module")
def formats(dataset, tmp_path_factory):
    """The module's folder as tar shards and as a pack, and an HDF5 file of arrays:
    {format: (path, {sample path: sha256}, total bytes)}."""
    from hdmlp.pack import pack

    root, by_path, total = dataset
    base = tmp_path_factory.mktemp("formats")
    tar_digests, _ = make_tar_shards(root, base / "tars", shards=3)
    pack(str(root), str(base / "pack"), shard_size=20000, progress=False)  # samples keep the folder's paths
    h5_digests, data = make_h5(str(base / "set.h5"), n=45, chunks=(4, 3, 4, 5), compression="gzip")
    return {"tar": (str(base / "tars" / "shard-{000..002}.tar"), tar_digests, total),
            "pack": (str(base / "pack"), by_path, total),
            "hdf5": (str(base / "set.h5"), h5_digests, data.nbytes)}


@pytest.mark.parametrize("fmt", ["tar", "hdf5"])
def test_tar_and_hdf5_each_sample_once_per_epoch_across_4_ranks(formats, tmp_path, fmt):
    """Under every scheme (one job per scheme, in one MPI run to keep it quick)."""
    path, digests, _ = formats[fmt]
    schemes = ["uniform", "local", "partial_local"]
    proc = mpirun(4, "schemes", path, tmp_path, batch_size=8, epochs=2, schemes=schemes)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = results(tmp_path, 4)
    for scheme in schemes:
        runs = [r["by_scheme"][scheme] for r in res]
        assert len({r["batches"] for r in runs}) == 1, scheme
        check_exactly_once([{"rank": r["rank"], "epochs": run["epochs"]} for r, run in zip(res, runs)], digests, 2)
        assert {run["source"]["kind"] for run in runs} == {fmt}


@pytest.mark.parametrize("fmt", ["pack", "hdf5"])
def test_peers_serve_pack_and_hdf5_samples(formats, tmp_path, fmt):
    """As test_peers_serve_and_the_pfs_is_read_once, for a pack's and an HDF5 file's samples."""
    path, digests, total = formats[fmt]
    cfg = tmp_path / "agg.cfg"
    cfg.write_text("storage_classes = ( { capacity = 0.05; threads = 2; },\n"
                   f"  {{ backend = \"memory\"; capacity = {0.6 * total / 2**20}; threads = 2; }} );\n")
    proc = mpirun(2, "plain", path, tmp_path, epochs=3, lockstep_close=True,
                  job={"seed": 3, "config_path": str(cfg)})
    assert proc.returncode == 0, proc.stderr
    res = results(tmp_path, 2)
    check_exactly_once(res, digests, 3)
    assert sum(r["metrics"]["pfs_bytes"] for r in res) <= 1.1 * total
    assert sum(r["metrics"]["requests_served"] for r in res) > 0
    # Each rank opened the store's files a few times (index, shards), not once per sample.
    assert all(r["metrics"]["source"]["files_opened"] <= 4 for r in res)


def test_seed_from_rank_zero_and_reproducible(dataset, tmp_path):
    root, by_path, _ = dataset
    runs = []
    for i in range(2):
        out = tmp_path / str(i)
        out.mkdir()
        proc = mpirun(2, "plain", root, out, epochs=2, job={"seed": 11})
        assert proc.returncode == 0, proc.stderr
        runs.append([[[p for p, _ in e] for e in r["epochs"]] for r in results(out, 2)])
    assert runs[0] == runs[1]
    out = tmp_path / "drawn"
    out.mkdir()
    proc = mpirun(2, "plain", root, out, epochs=1)  # seed=None: drawn on rank 0, shared
    assert proc.returncode == 0, proc.stderr
    assert len({r["seed"] for r in results(out, 2)}) == 1


@pytest.mark.parametrize("scheme,lag", [("uniform", 0), ("partial_local", 0), ("uniform", 2)])
def test_peers_serve_and_the_pfs_is_read_once(dataset, tmp_path, scheme, lag):
    """Aggregate storage holds the dataset (each rank's RAM class 60% of it): over all
    epochs and ranks the PFS serves the dataset exactly once, peers serve the rest.

    No barrier before close: a rank that finishes first lingers in close(), serving its
    cache until its peer has closed too. With lag, rank 1 is 2 s behind in the last epoch."""
    root, by_path, total = dataset
    cfg = tmp_path / "agg.cfg"
    cfg.write_text("storage_classes = ( { capacity = 0.05; threads = 2; },\n"
                   f"  {{ backend = \"memory\"; capacity = {0.6 * total / 2**20}; threads = 2; }} );\n")
    proc = mpirun(2, "plain", root, tmp_path, epochs=4, lag_last_epoch_s=lag,
                  job={"seed": 3, "config_path": str(cfg), "distr_scheme": scheme, "exchange_fraction": 0.3})
    assert proc.returncode == 0, proc.stderr
    res = results(tmp_path, 2)
    check_exactly_once(res, by_path, 4)
    pfs = sum(r["metrics"]["pfs_bytes"] for r in res)
    assert pfs == total, f"PFS served {pfs / total:.3f}x the dataset"
    if lag:
        assert res[0]["close_seconds"] > lag / 2, "rank 0 closed without waiting for its peer"
        assert res[0]["close_seconds"] < lag + 8
    assert sum(r["metrics"]["requests_served"] for r in res) > 0
    remote = [sum(e["reads"].get("remote", {}).get("count", 0) for e in r["metrics"]["epochs"]) for r in res]
    assert all(x > 0 for x in remote), "every rank got samples from its peer"


def test_an_idle_rank_leaves_its_cpus_to_the_others(dataset, tmp_path):
    """Ranks whose peers ask nothing (here: between start-up and the first batch) poll MPI
    rarely: each used about 0.1 core polling every 50 us with two serving threads, which
    cost two ranks on a 2-core node a quarter of one rank's throughput. The bound (5% of a
    core) is several times what the backed-off poll takes, and the job still runs after."""
    root, by_path, total = dataset
    cfg = tmp_path / "cached.cfg"
    cfg.write_text("distributed_threads = 2;\n"
                   "storage_classes = ( { capacity = 0.05; threads = 1; },\n"
                   f"  {{ backend = \"memory\"; capacity = {0.6 * total / 2**20}; threads = 2; }} );\n")
    proc = mpirun(2, "idle", root, tmp_path, epochs=2, idle_s=3.0, job={"seed": 3, "config_path": str(cfg)})
    assert proc.returncode == 0, proc.stderr
    res = results(tmp_path, 2)
    check_exactly_once(res, by_path, 2)
    for r in res:
        idle = r["idle"]
        assert idle["threads"].count("hdmlp-serve") == 2, idle["threads"]  # serving threads exist, and wait
        assert idle["cpu_s"] < 0.05 * idle["seconds"], f"rank {r['rank']} used {idle['cpu_s']:.2f} CPU s idle"
    assert sum(r["metrics"]["requests_served"] for r in res) > 0  # peers were still served after the idle time


def test_mismatched_arguments_fail_on_every_rank(dataset, tmp_path):
    root, _, _ = dataset
    proc = mpirun(2, "plain", root, tmp_path, epochs=1, job={"seed": 1}, batch_size_by_rank=[8, 16])
    res = results(tmp_path, 2)
    for r in res:
        assert r.get("error") == "ValueError", r
        assert "batch_size" in r["message"] and "rank 0" in r["message"] and "rank 1" in r["message"]
    assert res[0]["message"] == res[1]["message"]


def test_one_rank_missing_its_dataset_fails_everywhere(dataset, tmp_path):
    """Every rank raises the failing rank's error type, with its message."""
    root, _, _ = dataset
    proc = mpirun(2, "plain", root, tmp_path, epochs=1, data_by_rank=[str(root), str(tmp_path / "nope")])
    res = results(tmp_path, 2)
    assert res[1]["error"] == "FileNotFoundError" and "nope" in res[1]["message"]
    assert res[0]["error"] == "FileNotFoundError" and "rank 1" in res[0]["message"] and "nope" in res[0]["message"]


@pytest.mark.parametrize("bad,error", [("config", "FileNotFoundError"), ("timeout", "ValueError"),
                                       ("bad_config", "ConfigError")])
def test_an_argument_refused_on_one_rank_fails_every_rank_at_once(dataset, tmp_path, bad, error):
    """Refused in Python before the C++ job exists (a missing config file, a NaN timeout)
    or in C++ (a bad config): the other rank raises the same type at once, not after timeout_s."""
    root, _, _ = dataset
    good = tmp_path / "good.cfg"
    good.write_text("storage_classes = ( { capacity = 0.05; threads = 2; } );\n")
    broken = tmp_path / "broken.cfg"
    broken.write_text("storage_classes = ( { capacity = 0.05; threads = 2; } );\nb_cc = 3;\n")
    opts = dict(epochs=1, job={"timeout_s": 60})
    if bad == "config":
        opts["config_by_rank"] = [str(good), str(tmp_path / "missing.cfg")]
    elif bad == "bad_config":
        opts["config_by_rank"] = [str(good), str(broken)]
    else:
        opts["config_by_rank"] = [str(good), str(good)]
        opts["timeout_by_rank"] = [60, float("nan")]
    proc = mpirun(2, "plain", root, tmp_path, timeout=90, **opts)
    res = results(tmp_path, 2)
    assert res[1]["error"] == error, res[1]
    assert res[0]["error"] == error, res[0]
    assert "rank 1" in res[0]["message"], res[0]["message"]
    assert res[0]["seconds"] < 30, "rank 0 waited for the timeout instead of hearing rank 1's error"


def test_early_break_on_all_ranks(dataset, tmp_path):
    root, by_path, _ = dataset
    proc = mpirun(4, "break", root, tmp_path, batch_size=4, epochs=3, job={"seed": 2})
    assert proc.returncode == 0, proc.stderr
    res = results(tmp_path, 4)
    for r in res:
        assert len(r["epochs"][0]) == 1  # one local batch of 1 = ceil(4 / 4), then break
    check_exactly_once([dict(r, epochs=r["epochs"][1:]) for r in res], by_path, 2)


def test_a_rank_that_dies_ends_the_job(dataset, tmp_path):
    root, _, _ = dataset
    proc = mpirun(2, "die", root, tmp_path, timeout=90, epochs=3, job={"timeout_s": 10})
    assert proc.returncode != 0
    assert "rank 1" in (proc.stdout + proc.stderr).lower() or "exit code" in (proc.stdout + proc.stderr).lower()


def test_a_rank_that_never_arrives_is_named(dataset, tmp_path):
    root, _, _ = dataset
    try:
        mpirun(2, "late", root, tmp_path, timeout=60, epochs=1, job={"timeout_s": 3})
    except subprocess.TimeoutExpired:
        pass  # rank 1 may still be asleep; rank 0's verdict is what counts
    r0 = json.loads((tmp_path / "rank0.json").read_text())
    assert r0["error"] == "OSError"
    assert "within 3 s" in r0["message"]


def test_a_rank_that_stops_answering_is_named(dataset, tmp_path):
    """Rank 1 freezes (SIGSTOP) in epoch 1; rank 0 still needs samples that only rank 1
    caches (each rank's RAM holds 60% of the dataset), so its requests time out. Its staging
    buffer (10 kB of the 57 kB dataset) cannot have read epochs 1 and 2 ahead before the freeze."""
    root, _, total = dataset
    cfg = tmp_path / "agg.cfg"
    cfg.write_text("storage_classes = ( { capacity = 0.01; threads = 2; },\n"
                   f"  {{ backend = \"memory\"; capacity = {0.6 * total / 2**20}; threads = 2; }} );\n")
    try:
        mpirun(2, "freeze", root, tmp_path, timeout=60, epochs=3,
               job={"seed": 4, "timeout_s": 3, "config_path": str(cfg)})
    except subprocess.TimeoutExpired:
        pass
    r0 = json.loads((tmp_path / "rank0.json").read_text())
    assert r0.get("error") == "OSError", r0.get("message")
    host = socket.gethostname()  # both ranks run here; the message names the lost rank's host
    assert f"rank 1 on {host} did not answer" in r0["message"] and "within 3 s" in r0["message"], r0["message"]


def test_reuses_an_mpi_the_application_initialised(dataset, tmp_path):
    root, by_path, _ = dataset
    proc = mpirun(2, "external", root, tmp_path, epochs=2, job={"seed": 6})
    assert proc.returncode == 0, proc.stderr
    res = results(tmp_path, 2)
    check_exactly_once(res, by_path, 2)
    assert not any(r["mpi_finalized_by_hdmlp"] for r in res)


def test_refuses_an_mpi_without_thread_multiple(dataset, tmp_path):
    root, _, _ = dataset
    proc = mpirun(2, "external_single", root, tmp_path, epochs=1)
    for r in results(tmp_path, 2):
        assert r["error"] == "ValueError" and "MPI_THREAD_MULTIPLE" in r["message"]


@pytest.mark.parametrize("transforms", [True, "python"])
def test_a_bad_image_stops_every_rank_naming_the_file(tmp_path, transforms):
    """Rank A meets a corrupt JPEG (transforms on, on_error='raise'); rank B raises too, naming it. With a Python
    transform the chain runs in the ranks' worker processes, and the rank that met it tells the others."""
    from hdmlp.datasets import make_image_folder
    root = make_image_folder(tmp_path / "data", num_images=24, num_classes=2, seed=4, min_side=64, max_side=96)
    bad = root / sorted(p.name for p in root.iterdir() if p.is_dir())[0] / "broken.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 this JPEG stops here")
    out = tmp_path / "out"
    out.mkdir()
    proc = mpirun(2, "plain", root, out, timeout=90, epochs=3, batch_size=4, transforms=transforms,
                  job={"seed": 3, "timeout_s": 5, "index_cache": False})
    res = results(out, 2)
    for r in res:
        assert "error" in r, f"rank {r.get('rank')} finished without an error: {proc.stderr[-2000:]}"
        assert str(bad) in r["message"], r["message"]
    kinds = sorted(r["error"] for r in res)
    decoded = "ValueError" if transforms is True else "TransformError"  # a ValueError naming the chain
    assert decoded in kinds, kinds  # the rank that decoded it
    assert any(r["error"] == "OSError" and "stopped" in r["message"] for r in res) or kinds == [decoded] * 2


def test_ranks_on_one_node_share_percent_capacities(dataset, tmp_path):
    root, by_path, _ = dataset
    cfg = tmp_path / "pct.cfg"
    cfg.write_text('storage_classes = ( { capacity = "1%"; threads = 2; },\n'
                   '  { backend = "memory"; capacity = "2%"; threads = 1; }, { backend = "memory"; capacity = 1; threads = 1; } );\n')
    import hdmlp
    with hdmlp.Job(root, 8, 1, seed=1, config_path=str(cfg)) as alone:
        single = [c["capacity_bytes"] for c in alone.metrics()["classes"]]
    proc = mpirun(2, "plain", root, tmp_path, epochs=1, job={"seed": 1, "config_path": str(cfg)})
    assert proc.returncode == 0, proc.stderr
    for r in results(tmp_path, 2):
        shared = [c["capacity_bytes"] for c in r["metrics"]["classes"]]
        assert 0.35 < shared[0] / single[0] < 0.65, (shared, single)  # "2%" of the node, halved
        assert shared[1] == single[1] == 2**20  # a fixed 1 MB is per rank


@pytest.mark.parametrize("mode", ["global", "cycle", "sys_exit", "caught"])
def test_exit_with_a_job_left_open_is_clean(dataset, tmp_path, mode):
    """A script that never closes its job (kept in a global, in a reference cycle, exiting by
    sys.exit, or after catching an exception): hdmlp closes it before finalising MPI. Without
    that, MPI went away under the serving and prefetch threads: a segfault, every time."""
    root, _, total = dataset
    cfg = tmp_path / "agg.cfg"
    cfg.write_text("storage_classes = ( { capacity = 0.05; threads = 2; },\n"
                   f"  {{ backend = \"memory\"; capacity = {0.6 * total / 2**20}; threads = 2; }} );\n")
    proc = mpirun(2, f"leave_open:{mode}", root, tmp_path, timeout=60, epochs=3, job={"config_path": str(cfg)})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert [r["mode"] for r in results(tmp_path, 2)] == [mode, mode]


def test_exit_after_a_peer_stopped_does_not_wait_for_it(dataset, tmp_path):
    """Rank 1 fails on a file and then hangs; rank 0 is told, catches the error and exits
    normally: it must end the MPI job instead of waiting in MPI_Finalize for rank 1."""
    root, by_path, _ = dataset
    import hdmlp
    cfg = tmp_path / "staging.cfg"
    cfg.write_text("storage_classes = ( { capacity = 0.05; threads = 2; } );\n")
    with hdmlp.Job(root, 8, 2, seed=1, config_path=str(cfg)) as probe:  # the first file rank 1 reads
        victim = probe.samples[hdmlp.AccessPlan(len(probe), 8, 2, 1, world_size=2).samples(0, 1)[0]][0]
    proc = mpirun(2, "stopped_exit", root, tmp_path, timeout=100, epochs=2,
                  job={"seed": 1, "timeout_s": 20, "config_path": str(cfg)}, failing_by_rank=[[], [victim]])
    res = results(tmp_path, 2)
    assert res[1]["error"] == "OSError" and os.path.basename(victim) in res[1]["message"]
    assert res[0]["error"] == "OSError" and "stopped" in res[0]["message"]
    assert proc.returncode != 0
    assert "aborting the MPI job" in proc.stderr


def test_ctrl_c_interrupts_the_start_up_check(dataset, tmp_path):
    """Rank 1 is 8 s late; rank 0 gets a KeyboardInterrupt 1 s into its wait for it."""
    root, _, _ = dataset
    try:
        mpirun(2, "interrupt", root, tmp_path, timeout=60, epochs=1, job={"timeout_s": 30})
    except subprocess.TimeoutExpired:
        pass
    r0 = json.loads((tmp_path / "rank0.json").read_text())
    assert r0["error"] == "KeyboardInterrupt", r0
    assert r0["seconds"] < 5
def test_ranks_sharing_cpus_split_the_auto_staging_threads(tmp_path):
    """threads = "auto": each rank runs its usable CPUs divided by the ranks of the node whose
    affinity overlaps its own (unbound ranks share every CPU)."""
    root = tmp_path / "images"
    make_image_folder(root, num_images=16, num_classes=2, seed=3, min_side=40, max_side=60)
    cfg = tmp_path / "auto.cfg"
    cfg.write_text('storage_classes = ( { capacity = 64; threads = "auto"; } );\n')
    out = tmp_path / "out"
    out.mkdir()
    proc = mpirun(2, "plain", root, out, epochs=1, batch_size=4, transforms=True, mpirun_args=["--bind-to", "none"],
                  job={"seed": 1, "config_path": str(cfg)})
    assert proc.returncode == 0, proc.stderr
    res = results(out, 2)
    for r in res:
        assert r["cpu_budget"]["cpus"] == sorted(os.sched_getaffinity(0))  # not bound: every CPU
        assert r["metrics"]["staging"]["threads"] == max(1, r["cpu_budget"]["usable_cpus"] // 2)


def test_an_uncaught_exception_on_one_rank_ends_the_whole_job(dataset, tmp_path):
    """Without the abort, rank 1 would wait in MPI_Finalize for rank 0, and rank 0 for it."""
    root, _, _ = dataset
    proc = mpirun(2, "raise", root, tmp_path, timeout=60, epochs=3, job={"seed": 2})
    assert proc.returncode != 0
    assert "KeyError" in proc.stderr and "aborting the MPI job" in proc.stderr


def test_python_transforms_without_a_main_guard_exit_in_bounded_time(dataset, tmp_path):
    """Issue 26: both ranks printed the clear error, then hung at exit until killed."""
    root, _, _ = dataset
    script = tmp_path / "noguard.py"
    script.write_text(f"""import sys
sys.path.insert(0, {os.path.dirname(__file__)!r})
import hdmlp, transform_fns
job = hdmlp.Job({str(root)!r}, batch_size=4, epochs=1, seed=1, index_cache=False,
                transforms=transform_fns.identity, python_workers=1, timeout_s=20)
for b in job.batches():
    pass
""")
    cmd = [MPIRUN, "--oversubscribe", "-np", "2"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    proc = subprocess.run(cmd + [sys.executable, str(script)], capture_output=True, text=True, timeout=90,
                          env=dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1"))
    assert proc.returncode != 0
    assert "if __name__ == '__main__':" in proc.stderr
    # Issue 40: the worker re-running the script stops before MPI does (no Open MPI start-up errors on every
    # rank), saying what to do.
    assert "Wrap the training code in `if __name__ == '__main__':`" in proc.stderr, proc.stderr[-3000:]
    for mpi_says in ("orte_init failed", "getting local rank failed", "error occurred in MPI_Init"):
        assert mpi_says not in proc.stderr, proc.stderr[-3000:]


def test_the_exit_after_a_start_up_failure_is_bounded(tmp_path):
    """Whatever MPI's finalisation waits for, a rank whose Job failed to start leaves within the bound."""
    script = tmp_path / "stuck_exit.py"
    script.write_text("""import time
import hdmlp.live_jobs as J
J._startup_failed = True
J._EXIT_AFTER_STARTUP_FAILURE_S = 1.0
J._core = type("Core", (), {"in_mpi_job": staticmethod(lambda: True),
                            "finalize_mpi": staticmethod(lambda: time.sleep(3600)),
                            "abort_mpi": staticmethod(lambda code: time.sleep(3600))})
""")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert time.monotonic() - started < 30
    assert proc.returncode == 1 and "leaving without it" in proc.stderr, proc.stderr


DDP_RUNS = [
    {"batch_size": 8, "scheme": "uniform", "drop_last": False},
    {"batch_size": 7, "scheme": "local", "drop_last": False},
    {"batch_size": 22, "scheme": "partial_local", "drop_last": False},
    {"batch_size": 44, "scheme": "uniform", "drop_last": False},
    {"batch_size": 4, "scheme": "uniform", "drop_last": True},
]


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_all_reduces_in_every_step_with_uneven_sizes(dataset, tmp_path):
    """45 samples: every run has a remainder (merged into the batch before when smaller than
    the ranks); DDP (gloo) all-reduces in every step, so a rank with a step more or less fails.
    3 ranks: the plans' global batches are the same as on 2 (8 x 5 + 5, 7 x 6 + 3, 22 + 23, 45,
    4 x 11), and 3 ranks also split them unevenly (8 = 3 + 3 + 2, 3 = 1 + 1 + 1, 4 = 2 + 1 + 1),
    so a second run on 2 ranks (~10 s: two more processes importing torch) took no other path."""
    n = 3
    root, by_path, _ = dataset
    proc = mpirun(n, "ddp", root, tmp_path, timeout=180, runs=DDP_RUNS, port=free_port())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = results(tmp_path, n)
    import hdmlp
    for k, run in enumerate(DDP_RUNS):
        plan = hdmlp.AccessPlan(len(by_path), run["batch_size"], 1, 0, run["drop_last"], n, run["scheme"])
        globals_ = [end - begin for begin, end in map(plan.global_batch, range(plan.batches_per_epoch()))]
        for e in range(2):
            steps = [r["runs"][k]["epochs"][e]["steps"] for r in res]
            for r in res:
                assert r["runs"][k]["len"] == len(globals_) and r["runs"][k]["transport"] == "mpi"
            assert [len(s) for s in steps] == [len(globals_)] * n, (run, steps)
            for h, step in enumerate(zip(*steps)):
                local = [size for size, _ in step]
                assert min(local) >= 1 and max(local) - min(local) <= 1, (run, h, local)
                assert {total for _, total in step} == {sum(local)} == {globals_[h]}
            seen = [p for r in res for p in r["runs"][k]["epochs"][e]["paths"]]
            assert len(seen) == len(set(seen)) == sum(globals_)


def test_mpi_and_launcher_disagreeing_is_an_error_on_every_rank(dataset, tmp_path, monkeypatch):
    root, _, _ = dataset
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "3")
    proc = mpirun(2, "plain", root, tmp_path, epochs=1, job={"seed": 1})
    for r in results(tmp_path, 2):
        assert r.get("error") == "ValueError", r
        assert "MPI says this process is rank" in r["message"] and "of 3" in r["message"], r["message"]


def plan_batches(n, batch, world, scheme, epoch, seed=5):
    """Each global batch of an uninterrupted job's epoch (sorted ids), from the plan alone."""
    import hdmlp
    plan = hdmlp.AccessPlan(n, batch, 2, seed, world_size=world, distr_scheme=scheme, exchange_fraction=0.5)
    ids = [plan.samples(epoch, r) for r in range(world)]
    out = []
    for b in range(plan.batches_per_epoch()):
        step = []
        for r in range(world):
            start = sum(plan.local_batch_size(k, r) for k in range(b))
            step += ids[r][start:start + plan.local_batch_size(b, r)]
        out.append(sorted(step))
    return out


@pytest.mark.parametrize("old,new", [(4, (2, 3)), (2, (4,))])
def test_stopped_mid_epoch_and_resumed_on_another_rank_count(dataset, tmp_path, old, new):
    """Issue 14: N ranks stop after 2 of 6 steps of epoch 0 and M ranks go on from the state:
    every sample of the interrupted epoch once; uniform keeps every global batch, the local
    schemes deliver the old ranks' unread samples in the same global batches and re-cut
    their shards for M ranks from the next epoch on. A state that differs on one rank makes
    every rank raise the same error."""
    root, by_path, _ = dataset
    n, schemes = len(by_path), ["uniform", "local", "partial_local"]
    states = tmp_path / "states"
    states.mkdir()
    opts = dict(schemes=schemes, states=str(states), batch_size=8, epochs=2, stop_after=2)
    (tmp_path / "stop").mkdir()
    proc = mpirun(old, "stop", root, tmp_path / "stop", **opts)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stopped = results(tmp_path / "stop", old)
    for scheme in schemes:  # every rank holds the same state after the same step
        assert len({(states / f"{scheme}.rank{r}.json").read_text() for r in range(old)}) == 1
    for m in new:
        out = tmp_path / f"resume{m}"
        out.mkdir()
        proc = mpirun(m, "resume", root, out, **opts)
        assert proc.returncode == 0, proc.stderr[-3000:]
        resumed = results(out, m)
        for scheme in schemes:
            mismatch = {r["schemes"][scheme]["mismatch"] for r in resumed}
            assert len(mismatch) == 1, mismatch  # the same error on every rank
            assert "ranks disagree on resume: rank 0 has epoch 0 after 2 global batches" in mismatch.pop()
            before = [sorted(i for r in stopped for i in r["schemes"][scheme]["steps"][k]) for k in range(2)]
            epochs = [[sorted(i for r in resumed for i in r["schemes"][scheme]["steps"][e][k])
                       for k in range(len(resumed[0]["schemes"][scheme]["steps"][e]))] for e in range(2)]
            whole = plan_batches(n, 8, old, scheme, 0)
            assert before == whole[:2]
            assert sorted(i for step in before + epochs[0] for i in step) == list(range(n)), scheme
            assert epochs[0] == whole[2:], scheme  # 45 = 5 * 8 + 5: no merge for 2, 3 or 4 ranks
            assert epochs[1] == plan_batches(n, 8, old if scheme == "uniform" else m, scheme, 1), scheme
            assert all(r["schemes"][scheme]["state"]["epoch"] == 2 for r in resumed)
