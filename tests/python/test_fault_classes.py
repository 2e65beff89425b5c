"""Issue 40's fault classes: each bad input gets an error that names the file, sample, argument
or setting and says what to do, within 2 s of its cause, and leaves nothing behind. The
private cache folders are in test_cache_privacy.py, the extras in test_packaging.py."""
import inspect
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import hdmlp
import hdmlp.transforms as T
from conftest import make_folder

# -- an op's argument of the wrong type names the op and the argument -------------------

# What each op needs besides the argument under test.
_REQUIRED = {"Resize": dict(size=8), "CenterCrop": dict(size=8), "RandomResizedCrop": dict(size=8),
             "Normalize": dict(mean=[0.5] * 3, std=[0.5] * 3), "RandomCrop": dict(size=8),
             "RandomRotation": dict(degrees=10), "RandomAffine": dict(degrees=10), "GaussianBlur": dict(kernel_size=3),
             "Pad": dict(padding=2), "MixUp": dict(num_classes=10), "CutMix": dict(num_classes=10)}
# Checked when the Job starts: the device needs torch (docs/gpu.md).
_CHECKED_LATER = {("ImgDecode", "device")}


def _op_arguments():
    ops = [c for _, c in inspect.getmembers(T, inspect.isclass)
           if issubclass(c, (T.Transform, T._BatchMix)) and c not in (T.Transform, T._BatchMix)]
    for op in ops:
        for name, p in list(inspect.signature(op.__init__).parameters.items())[1:]:
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and (op.__name__, name) not in _CHECKED_LATER:
                yield pytest.param(op, name, id=f"{op.__name__}.{name}")


@pytest.mark.parametrize("op,argument", list(_op_arguments()))
@pytest.mark.parametrize("bad", ["x", "0.5"])
def test_an_op_argument_of_the_wrong_type_names_the_op_and_the_argument(op, argument, bad):
    """A string for a probability, a size, a flag...: never "could not convert string to float", and
    never taken as something else (bool("false") is True; "12" is not the sequence (1, 2))."""
    kwargs = dict(_REQUIRED.get(op.__name__, {}), **{argument: bad})
    with pytest.raises((TypeError, ValueError)) as info:
        op(**kwargs)
    message = str(info.value)
    assert message.startswith(f"{op.__name__}:"), message
    assert argument in message, message


def test_numbers_of_other_libraries_are_still_numbers():
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    assert T.RandomHorizontalFlip(np.float32(0.25)).p == 0.25
    assert T.RandomHorizontalFlip(torch.tensor(0.25)).p == 0.25
    assert T.Normalize(torch.tensor([0.5, 0.25, 0.125]), np.array([1.0, 2.0, 4.0])).std == [1.0, 2.0, 4.0]
    assert T.Resize(8, antialias=None).antialias is True and T.Resize(8, antialias=0).antialias is False


# -- too many Python workers: refused at once, with the reason ----------------------------

def _children():
    """The PIDs of this process's children (the forkserver and its workers are not ours)."""
    try:
        with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
            return set(f.read().split())
    except OSError:
        return set()


def test_more_python_workers_than_the_cpus_can_run_are_refused_at_once(tmp_path):
    from hdmlp.python_chain import MIN_WORKER_LIMIT, WORKERS_PER_CPU
    import transform_fns

    root = tmp_path / "data"
    make_folder(str(root))
    cpus = len(os.sched_getaffinity(0))
    limit = max(MIN_WORKER_LIMIT, WORKERS_PER_CPU * cpus)
    before = _children()
    for workers in (limit + 1, 1000):
        started = time.monotonic()
        with pytest.raises(ValueError, match=rf"python_workers={workers} is more than this process can run: it may "
                                             rf"use {cpus} CPU\(s\).*give at most {limit}"):
            hdmlp.Job(root, 4, 1, seed=0, transforms=transform_fns.identity, python_workers=workers)
        assert time.monotonic() - started < 2
    assert _children() == before  # nothing was started
    with hdmlp.Job(root, 4, 1, seed=0, transforms=transform_fns.identity, python_workers=min(limit, 3)) as job:
        assert job._python.workers == min(limit, 3)


# -- Ctrl-C while a Python transform hangs ------------------------------------------------

HANGING = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, sys.argv[2])
    import hdmlp, transform_fns
    if __name__ == "__main__":
        job = hdmlp.Job(sys.argv[1], 4, 1, seed=0, transforms=transform_fns.hang, python_workers=2, index_cache=False)
        print("workers", *job._python.pids, flush=True)
        try:
            for batch in job.batches():
                pass
        except KeyboardInterrupt:
            print("interrupted", time.time(), flush=True)
            raise
""")


def test_ctrl_c_while_a_python_transform_hangs_ends_the_job_at_once_leaving_no_worker(tmp_path):
    """The training process gets KeyboardInterrupt at once and exits within seconds; the hung workers
    (which ignore Ctrl-C, as DataLoader's do) are ended by its close, not waited for."""
    root = tmp_path / "data"
    make_folder(str(root))
    script = tmp_path / "hanging.py"
    script.write_text(HANGING)
    proc = subprocess.Popen([sys.executable, str(script), str(root), os.path.dirname(__file__)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("workers"), line + proc.stderr.read()
        workers = [int(p) for p in line.split()[1:]]
        time.sleep(1.0)  # the loop waits for the hung transforms
        sent = time.time()
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground process group
        out, err = proc.communicate(timeout=30)
        exited = time.time() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert "KeyboardInterrupt" in err, err[-3000:]
    interrupted = float(out.split("interrupted")[1].split()[0])
    assert interrupted - sent < 2, interrupted - sent
    assert exited < 3, f"the process took {exited:.1f} s to exit after Ctrl-C"
    for pid in workers:
        assert not os.path.exists(f"/proc/{pid}"), f"worker {pid} is left"
    # multiprocessing's forkserver and resource tracker leave when their pipes from the process close.
    deadline = time.monotonic() + 2
    while True:
        group = subprocess.run(["ps", "-o", "pid=,args=", "-g", str(proc.pid)], capture_output=True,
                               text=True).stdout.strip()
        if not group or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert group == "", f"processes left in the job's group:\n{group}"


# -- a script without the __main__ guard ----------------------------------------------------

UNGUARDED = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[2])
    import hdmlp, transform_fns
    job = hdmlp.Job(sys.argv[1], batch_size=4, epochs=1, seed=1, index_cache=False,
                    transforms=transform_fns.identity, python_workers=1, timeout_s=20)
    for b in job.batches():
        pass
""")


@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_a_script_without_the_main_guard_is_told_to_wrap_its_training_code(tmp_path, start_method):
    root = tmp_path / "data"
    make_folder(str(root))
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED.replace("python_workers=1,", f"python_workers=1, python_start_method={start_method!r},"))
    started = time.monotonic()
    proc = subprocess.run([sys.executable, str(script), str(root), os.path.dirname(__file__)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "MainGuardError: hdmlp: an hdmlp.Job was created in a worker process" in proc.stderr, proc.stderr[-3000:]
    assert "Wrap the training code in `if __name__ == '__main__':`" in proc.stderr, proc.stderr[-3000:]
    # The training process names it too (its worker ended during start-up).
    assert "wrap the training code in `if __name__ == '__main__':`" in proc.stderr, proc.stderr[-3000:]
    assert time.monotonic() - started < 20
