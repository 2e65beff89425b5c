"""Issue 13's cases in one process: waits that end, bytes that are right, errors that are
clear at the edges, and close() that cleans up (the MPI cases are in test_mpi.py)."""
import hashlib
import math
import os
import pickle
import subprocess
import sys
import textwrap
import time
import warnings

import pytest
import torch
import torchvision

import hdmlp
from hdmlp.cli import main as cli_main
from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder

from conftest import make_folder


def staging_only(tmp_path, mb=0.05):
    cfg = tmp_path / "staging.cfg"
    cfg.write_text(f"storage_classes = ( {{ capacity = {mb}; threads = 2; }} );\n")
    return cfg


def epoch_bytes(job, epoch):
    """{path: sha256} of what ``epoch`` delivered."""
    paths = [p for p, _ in job.samples]
    out = {}
    for ids, _, samples in job.epoch_batches(epoch):
        for i, s in zip(ids, samples):
            out[paths[i]] = hashlib.sha256(bytes(memoryview(s))).hexdigest()
    return out


# -- clear errors at the edges ----------------------------------------------------

@pytest.mark.parametrize("kw,exc,match", [
    (dict(batch_size=2**63), ValueError, r"batch_size must be at most 2\*\*62 \(an int from 1 to 2\*\*62\)"),
    (dict(batch_size=2**62 + 1), ValueError, "batch_size"),
    (dict(epochs=2**31), ValueError, r"epochs must be at most 2\*\*31 - 1"),
    (dict(epochs=-2**70), ValueError, "epochs"),
    (dict(seed=2**63), ValueError, "seed"),
    (dict(timeout_s=math.nan), ValueError, "timeout_s"),
    (dict(timeout_s=math.inf), ValueError, "timeout_s"),
    (dict(timeout_s=1e300), ValueError, "timeout_s"),
    (dict(read_timeout_s=math.nan), ValueError, "read_timeout_s"),
    (dict(read_timeout_s=-1), ValueError, "read_timeout_s"),
    (dict(exchange_fraction=math.nan), ValueError, "exchange_fraction"),
    (dict(index_cache="yes"), TypeError, "index_cache"),
    (dict(storage=42), TypeError, "storage"),
    (dict(config_path="bad\0name.cfg"), ValueError, "NUL"),
])
def test_out_of_range_arguments_say_what_is_allowed(folder, kw, exc, match):
    root, _ = folder
    with pytest.raises(exc, match=match):
        hdmlp.Job(root, **(dict(batch_size=4, epochs=1) | kw))


@pytest.mark.parametrize("kw", [dict(latency_s=math.nan), dict(latency_s=-1), dict(mbps=math.inf),
                                dict(failing_paths="one/path")])
def test_throttled_storage_checks_its_fields(kw):
    with pytest.raises((ValueError, TypeError), match="ThrottledStorage"):
        hdmlp.ThrottledStorage(**kw)


def test_dataset_path_with_nul_is_refused(tmp_path):
    with pytest.raises(ValueError, match="NUL"):
        hdmlp.Job(str(tmp_path) + "\0x", 4, 1)


@pytest.mark.parametrize("args,exc,match", [
    ((10, 4, 1, -1), ValueError, "seed must be at least 0"),
    ((10, 4, 1, 2**64), ValueError, "seed"),
    ((2**63, 4, 1, 0), ValueError, r"num_samples must be at most 2\*\*62"),
    ((10, 2**63, 1, 0), ValueError, "batch_size"),
    ((10, 4, 2**31, 0), ValueError, "epochs"),
    ((10, 4, 1, 1.5), TypeError, "seed must be an int"),
])
def test_access_plan_checks_ranges(args, exc, match):
    with pytest.raises(exc, match=match):
        hdmlp.AccessPlan(*args)


def test_access_plan_queries_check_ranges():
    plan = hdmlp.AccessPlan(10, 4, 2, 0, world_size=2)
    with pytest.raises(ValueError, match=r"rank must be at most 1 \(an int from 0 to 1\)"):
        plan.samples(0, rank=2)
    with pytest.raises(ValueError, match="epoch"):
        plan.samples(-1)
    with pytest.raises(TypeError, match="epoch"):
        plan.samples("0")
    with pytest.raises(ValueError, match="batch"):
        plan.local_batch_size(3)
    assert plan.local_batch_size(2, rank=0) + plan.local_batch_size(2, rank=1) == 2  # the last batch: 2 samples


@pytest.mark.parametrize("argv,match", [
    (["plan", "--samples", "10", "--batch-size", "4", "--seed", "-1"], "seed must be at least 0"),
    (["plan", "--samples", "10", "--batch-size", "4", "--epoch", str(2**31)], "--epoch must be from 0"),
    (["plan", "--samples", "10", "--batch-size", "4", "--rank", "3", "--world-size", "2"], "rank"),
    (["plan", "--samples", "0", "--batch-size", "4"], "num_samples"),
])
def test_cli_plan_checks_ranges(argv, match, capsys):
    assert cli_main(argv) == 1
    err = capsys.readouterr().err
    assert "hdmlp: error:" in err and match in err, err


def test_non_utf8_names_round_trip_like_torchvision(tmp_path):
    root = tmp_path / "data"
    raw = os.fsencode(str(root))
    for cls, name in [(b"caf\xe9", b"\xff\xfeimg.jpg"), (b"caf\xe9", b"ok.png"), (b"plain", b"n\xe4me.jpg")]:
        os.makedirs(os.path.join(raw, cls), exist_ok=True)
        with open(os.path.join(raw, cls, name), "wb") as f:
            f.write(b"bytes of " + name)
    tv = torchvision.datasets.ImageFolder(str(root), loader=lambda p: p)
    with hdmlp.Job(root, 2, 1, seed=0) as job:
        ds = HDMLPImageFolder(root, job)
        assert ds.classes == tv.classes and ds.class_to_idx == tv.class_to_idx
        assert ds.samples == tv.samples
        delivered = epoch_bytes(job, 0)
        assert {os.fsencode(p) for p in delivered} == {os.fsencode(p) for p, _ in tv.samples}
        job.metrics()  # encodable
        json_safe = job.metrics()["epochs"][0]["samples"]
        assert json_safe == 3
    # An error naming such a file.
    victim = tv.samples[0][0]
    job = hdmlp.Job(root, 4, 1, seed=0, storage=hdmlp.ThrottledStorage(failing_paths=[victim]))
    with pytest.raises(OSError) as info:
        for _ in job.epoch_batches(0):
            pass
    assert victim in str(info.value)
    job.close()


def test_user_cache_dir_is_absolute_and_round_trips(tmp_path):
    script = "import hdmlp, os; d = hdmlp.user_cache_dir(); print(os.path.isabs(d), os.fsencode(d))"
    env = dict(os.environ, HDMLP_CACHE_DIR="rel/c\udcffche")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("True") and "c\\xffche" in out.stdout, out.stdout


# -- every wait is bounded ----------------------------------------------------------

def test_non_regular_files_are_refused_at_scan_time(folder):
    root, _ = folder
    fifo = root / "class_01" / "pipe.jpg"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"pipe\.jpg.*FIFO"):
        hdmlp.Job(root, 4, 1, index_cache=False)


def test_a_fifo_swapped_in_after_the_scan_fails_at_once(folder, tmp_path):
    root, _ = folder
    job = hdmlp.Job(root, 4, 1, seed=0, config_path=staging_only(tmp_path, 0.001), index_cache=False)
    victim = job.samples[job.plan(0)[-1]][0]
    os.remove(victim)
    os.mkfifo(victim)  # nobody ever writes to it
    start = time.monotonic()
    with pytest.raises(OSError, match=os.path.basename(victim)):
        for _ in job.epoch_batches(0):
            pass
    assert time.monotonic() - start < 10
    job.close()


def test_a_stuck_read_times_out_naming_the_file_and_close_is_quick(folder, tmp_path):
    root, _ = folder
    job = hdmlp.Job(root, 4, 1, seed=0, config_path=staging_only(tmp_path), read_timeout_s=1,
                    storage=hdmlp.ThrottledStorage(latency_s=8))
    start = time.monotonic()
    with pytest.raises(OSError, match=r"read_timeout_s") as info:
        next(job.epoch_batches(0))
    assert str(root) in str(info.value)
    assert time.monotonic() - start < 8
    start = time.monotonic()
    job.close()
    assert time.monotonic() - start < 3  # it waited for the slow reads (7 s here) before


def test_read_timeout_s_fires_after_read_timeout_s_not_a_multiple(folder, tmp_path):
    """Issue 26: read_timeout_s=5 fired after up to 10.1 s: the consumer waited for the batch's other (stuck)
    reads before raising the first one's error. 8 samples on 2 workers would have taken 4 rounds."""
    root, _ = folder
    # Staging only; and the default config, whose prefetch threads read the same samples (a staging worker
    # waited for a prefetcher's stuck read, then read again).
    for config in (staging_only(tmp_path), None):
        job = hdmlp.Job(root, 8, 1, seed=0, config_path=config, read_timeout_s=2, num_workers=2,
                        index_cache=False, storage=hdmlp.ThrottledStorage(latency_s=30))
        start = time.monotonic()
        with pytest.raises(OSError, match=r"read_timeout_s = 2 s"):
            next(job.epoch_batches(0))
        assert time.monotonic() - start < 3.5, config
        job.close()


def test_closing_during_slow_reads_is_quick(folder):
    root, _ = folder
    job = hdmlp.Job(root, 4, 2, seed=0, storage=hdmlp.ThrottledStorage(latency_s=8))  # with cache classes
    time.sleep(0.2)  # staging and prefetch threads are inside reads now
    start = time.monotonic()
    job.close()
    assert time.monotonic() - start < 3


def test_huge_epoch_counts_start_fast(folder):
    # Counting every read of 2**31 - 1 epochs would take hours: the planner counts a
    # bounded window of epochs (PlanningOptions::max_counted_reads). The staging
    # threads may run many epochs ahead of this loop on a tiny folder (as far as the
    # staging buffer's capacity allows), so the metrics list only what was read.
    root, digests = folder
    start = time.monotonic()
    with hdmlp.Job(root, 4, 2**31 - 1, seed=0) as job:  # the default config: classes to plan
        assert time.monotonic() - start < 30
        epochs = job.metrics()["epochs"]
        assert len(epochs) < 2**20  # not one entry per epoch of the job
        assert sum(e["samples"] for e in epochs) == 0  # nothing delivered yet
        assert len(epoch_bytes(job, 0)) == len(digests)


def test_a_forked_child_gets_a_clear_error(folder):
    root, digests = folder
    job = hdmlp.Job(root, 4, 2, seed=0)
    batches = job.epoch_batches(0)
    next(batches)
    pid = os.fork()
    if pid == 0:  # the child: the job's threads do not exist here
        code = 1
        try:
            next(batches)
        except RuntimeError as e:
            code = 0 if "forked child" in str(e) and "HDMLPDataLoader" in str(e) else 2
        except BaseException:
            code = 3
        try:
            job.metrics()
            code = 4
        except RuntimeError:
            pass
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert sum(1 for _ in batches) >= 0  # the parent's job still works
    assert len(epoch_bytes(job, 1)) == len(digests)
    job.close()


def test_a_forked_child_exits_without_hanging(folder, tmp_path):
    """A child that leaves normally (atexit, interpreter shutdown) with the job still referenced."""
    root, _ = folder
    script = textwrap.dedent(f"""
        import os, sys, hdmlp
        job = hdmlp.Job({str(root)!r}, 4, 2, seed=0)
        next(job.epoch_batches(0))
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # runs atexit and finalisation in the child
        _, status = os.waitpid(pid, 0)
        print("child", os.WEXITSTATUS(status))
        job.close()
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0 and "child 0" in out.stdout, out.stderr


@pytest.mark.parametrize("workers", [0, 2])
def test_torch_dataloader_around_the_dataset_says_to_use_hdmlp_loader(folder, workers):
    root, _ = folder
    with hdmlp.Job(root, 4, 1, seed=0) as job:
        loader = torch.utils.data.DataLoader(HDMLPImageFolder(root, job), batch_size=4, num_workers=workers)
        it = iter(loader)
        with pytest.raises(Exception, match="HDMLPDataLoader"):
            next(it)
        # torch's own shutdown of workers whose results nobody read waits 5 s a worker.
        for w in getattr(it, "_workers", []):
            w.terminate()
        del it


def test_a_job_cannot_be_pickled(folder):
    root, _ = folder
    with hdmlp.Job(root, 4, 1) as job:
        with pytest.raises(TypeError, match="cannot be pickled"):
            pickle.dumps(job)


# -- never wrong bytes --------------------------------------------------------------

def test_a_changed_cache_file_is_dropped_and_read_from_the_dataset(folder, tmp_path):
    root, digests = folder
    ssd = tmp_path / "ssd"
    cfg = tmp_path / "disk.cfg"
    # A 2 kB staging buffer: the workers read about one sample ahead, so the next
    # epochs read the class after its files were changed.
    cfg.write_text("storage_classes = ( { capacity = 0.002; threads = 2; },\n"
                   f"  {{ backend = \"filesystem\"; capacity = 1; threads = 2; backend_options = {{ path = \"{ssd}\"; }}; }} );\n")
    want = {os.path.join(str(root), rel): d for rel, d in digests.items()}
    with hdmlp.Job(root, 4, 3, seed=0, config_path=cfg) as job:
        assert epoch_bytes(job, 0) == want
        for _ in range(200):
            if job.metrics()["classes"][0]["filled_samples"] == len(want):
                break
            time.sleep(0.01)
        corrupted = 0
        for dirpath, _, files in os.walk(ssd):
            for name in files:
                path = os.path.join(dirpath, name)
                if name.endswith(".bin") and os.path.getsize(path) > 8:
                    with open(path, "r+b") as f:  # the same size, one byte changed
                        b = f.read(1)
                        f.seek(0)
                        f.write(bytes([b[0] ^ 0xFF]))
                    corrupted += 1
        assert corrupted > 0
        with pytest.warns(RuntimeWarning, match="checksum"):
            assert epoch_bytes(job, 1) == want
            assert epoch_bytes(job, 2) == want
        assert job.metrics()["classes"][0]["dropped_corrupt"] == corrupted


def test_a_source_file_changed_during_the_job_is_reported(folder, tmp_path):
    root, _ = folder
    job = hdmlp.Job(root, 4, 2, seed=0, config_path=staging_only(tmp_path), index_cache=False)
    victim = job.samples[0][0]
    with open(victim, "ab") as f:
        f.write(b"appended")  # another size and time than indexed
    with pytest.warns(RuntimeWarning, match=r"changed on the dataset's storage.*" + os.path.basename(victim)):
        epoch_bytes(job, 0)  # its staging threads may have read the victim before the append (a loaded machine)
        got = epoch_bytes(job, 1)  # read after it, whatever the timing
    with open(victim, "rb") as f:
        assert got[victim] == hashlib.sha256(f.read()).hexdigest()  # delivered as it is now, and reported
    m = job.metrics()
    assert m["changed_samples"] == 1 and m["changed"] == [victim]
    job.close()


def test_a_file_whose_stat_size_is_zero_is_read_to_its_end(tmp_path):
    root = tmp_path / "data"
    (root / "a").mkdir(parents=True)
    (root / "a" / "real.jpg").write_bytes(b"x" * 100)
    os.symlink("/proc/self/status", root / "a" / "proc.jpg")  # stat says 0 bytes
    with hdmlp.Job(root, 2, 1, seed=0, index_cache=False) as job:
        assert job._job.sizes == [0, 100]
        got = {}
        paths = [p for p, _ in job.samples]
        for ids, _, samples in job.epoch_batches(0):
            for i, s in zip(ids, samples):
                got[os.path.basename(paths[i])] = bytes(memoryview(s))
    assert got["proc.jpg"].startswith(b"Name:") and len(got["proc.jpg"]) > 100
    assert got["real.jpg"] == b"x" * 100


MEMORY_LIMITED = textwrap.dedent("""
    import json, os, resource, sys
    import hdmlp, hdmlp.transforms as T
    root, on_error = sys.argv[1], sys.argv[2]
    with open("/proc/self/status") as f:
        vm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
    limit = vm + 3 * 2**30  # far below the 10 GB file
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    cfg = os.path.join(os.path.dirname(root), "staging.cfg")
    chain = [T.ImgDecode(), T.Resize((8, 8)), T.ToTensor()]
    job = hdmlp.Job(root, 4, 1, seed=0, config_path=cfg, transforms=chain, on_error=on_error, index_cache=False)
    out = {"samples": 0}
    try:
        for ids, _, _ in job.epoch_batches(0):
            out["samples"] += len(ids)
    except Exception as e:
        out.update(error=type(e).__name__, message=str(e))
    out["skipped"] = job.metrics()["skipped_samples"]
    job.close()
    print(json.dumps(out))
""")


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_a_sample_too_large_for_memory_is_named_and_skippable(tmp_path, on_error):
    import json
    from hdmlp.datasets import make_image_folder
    root = make_image_folder(tmp_path / "data", num_images=12, num_classes=2, seed=1, min_side=32, max_side=48)
    staging_only(tmp_path, 1)
    huge = root / sorted(p.name for p in root.iterdir() if p.is_dir())[0] / "huge.jpg"
    with open(huge, "wb") as f:
        f.truncate(10 * 2**30)  # sparse: 10 GB that take no disk
    proc = subprocess.run([sys.executable, "-c", MEMORY_LIMITED, str(root), on_error], capture_output=True, cwd=tmp_path,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if on_error == "raise":
        assert out["error"] == "MemoryError", out
        assert str(huge) in out["message"]
    else:
        assert "error" not in out, out
        assert out["samples"] == 12 and out["skipped"] == 1


# -- the config's checkpoint keys -----------------------------------------------------

def test_checkpoint_keys_control_the_index_cache(folder, tmp_path):
    from conftest import age_tree
    root, _ = folder
    age_tree(root)
    where = tmp_path / "ckpt"
    on = tmp_path / "on.cfg"
    on.write_text(f"checkpoint = true;\ncheckpoint_path = \"{where}\";\n"
                  "storage_classes = ( { capacity = 0.05; threads = 2; } );\n")
    off = tmp_path / "off.cfg"
    off.write_text("checkpoint = false;\nstorage_classes = ( { capacity = 0.05; threads = 2; } );\n")
    with hdmlp.Job(root, 4, 1, config_path=on) as job:
        assert not job.index_from_cache
    assert len(os.listdir(where / "index")) == 1  # the index cache lives under checkpoint_path
    with hdmlp.Job(root, 4, 1, config_path=on) as job:
        assert job.index_from_cache
    with hdmlp.Job(root, 4, 1, config_path=off) as job:
        assert not job.index_from_cache


# -- cleanup ------------------------------------------------------------------------

def test_close_while_prefetching_leaves_no_folder(folder, tmp_path):
    root, _ = folder
    ssd = tmp_path / "ssd"
    cfg = tmp_path / "disk.cfg"
    cfg.write_text("storage_classes = ( { capacity = 0.05; threads = 2; },\n"
                   f"  {{ backend = \"filesystem\"; capacity = 1; threads = 3; backend_options = {{ path = \"{ssd}\"; }}; }} );\n")
    for i in range(15):
        job = hdmlp.Job(root, 4, 2, seed=i, config_path=cfg, storage=hdmlp.ThrottledStorage(latency_s=0.002))
        next(job.epoch_batches(0))
        job.close()
        assert os.listdir(ssd) == [], f"close {i} left {os.listdir(ssd)}"


TORCH_RANK = textwrap.dedent("""
    import json, os, sys, time
    import torch.distributed as dist
    import hdmlp
    rank, root, cfg, port = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank), WORLD_SIZE="2")
    dist.init_process_group("gloo", rank=rank, world_size=2)
    started = time.monotonic()
    try:  # rank 1 passes an endless timeout, refused in Python before the core starts
        hdmlp.Job(root, 4, 1, seed=1, config_path=cfg, timeout_s=float("nan") if rank == 1 else 60.0).close()
        out = {"error": None}
    except Exception as e:
        out = {"error": type(e).__name__, "message": str(e)}
    out["seconds"] = time.monotonic() - started
    print(json.dumps(out))
    os._exit(0)
""")


def test_under_torch_distributed_an_argument_refused_on_one_rank_fails_every_rank(folder, tmp_path):
    """Without MPI the ranks' start-up check runs over torch.distributed: a rank whose Python
    layer refuses its arguments still sends its error, so the other raises it at once."""
    import json
    import socket
    root, _ = folder
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_"))}
    procs = [subprocess.Popen([sys.executable, "-c", TORCH_RANK, str(r), str(root), str(staging_only(tmp_path)), port],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
             for r in range(2)]
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        assert p.returncode == 0, stderr[-2000:]
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    assert outs[1]["error"] == "ValueError" and "timeout_s" in outs[1]["message"]
    assert outs[0]["error"] == "ValueError", outs[0]
    assert "rank 1" in outs[0]["message"] and "timeout_s" in outs[0]["message"]
    assert outs[0]["seconds"] < 30
