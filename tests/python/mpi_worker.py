"""Run by tests/python/test_mpi.py under mpirun: one rank of an hdmlp job.

    mpirun -np N python mpi_worker.py SCENARIO DATA OUT_DIR [options as JSON]

Writes OUT_DIR/rank<R>.json with what this rank saw: per epoch the sample
paths it delivered with each sample's sha256, and job.metrics().
"""
import hashlib
import json
import os
import signal
import sys
import time

import hdmlp


def main():
    scenario, data, out = sys.argv[1], sys.argv[2], sys.argv[3]
    opts = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    job_kw = opts.get("job", {})
    world_rank = int(os.environ.get("OMPI_COMM_WORLD_RANK") or os.environ.get("PMI_RANK") or "0")
    batch_size = opts.get("batch_size", 8)
    if "batch_size_by_rank" in opts:
        batch_size = opts["batch_size_by_rank"][world_rank]
    if "data_by_rank" in opts:
        data = opts["data_by_rank"][world_rank]
    if "timeout_by_rank" in opts:
        job_kw["timeout_s"] = opts["timeout_by_rank"][world_rank]
    if "config_by_rank" in opts:
        job_kw["config_path"] = opts["config_by_rank"][world_rank]
    if "failing_by_rank" in opts and opts["failing_by_rank"][world_rank]:
        job_kw["storage"] = hdmlp.ThrottledStorage(failing_paths=opts["failing_by_rank"][world_rank])
    if scenario == "interrupt":
        hdmlp.init_mpi()
        if world_rank == 1:
            time.sleep(8)  # rank 0 waits for it in the start-up check, and is interrupted meanwhile
        else:
            def interrupt(signum, frame):
                raise KeyboardInterrupt("test interrupt")
            signal.signal(signal.SIGALRM, interrupt)
            signal.setitimer(signal.ITIMER_REAL, 1.0)
    if scenario.startswith("leave_open"):
        leave_open(scenario.split(":")[1], data, batch_size, opts)
        return
    if scenario == "schemes":
        run_schemes(data, out, opts)
        return
    if scenario == "late":
        hdmlp.init_mpi()  # every rank is in MPI; rank 1 is then slow to create its Job
        if world_rank == 1:
            time.sleep(20)
    result = {"scenario": scenario}
    if scenario == "ddp":
        ddp(data, out, opts, world_rank)
        return
    if scenario in ("stop", "resume"):
        stop_and_resume(scenario, data, out, opts, world_rank)
        return
    libmpi = None
    if scenario.startswith("external"):
        # The application initialises MPI itself (as mpi4py would), before hdmlp.
        import ctypes
        libmpi = ctypes.CDLL("libmpi.so.40", mode=ctypes.RTLD_GLOBAL)
        provided = ctypes.c_int(0)
        level = 0 if scenario == "external_single" else 3  # MPI_THREAD_SINGLE / MPI_THREAD_MULTIPLE
        libmpi.MPI_Init_thread(None, None, level, ctypes.byref(provided))
    if opts.get("transforms"):
        import hdmlp.transforms as T
        job_kw["transforms"] = [T.ImgDecode(), T.RandomResizedCrop(32), T.ToTensor()]
        if opts["transforms"] == "python":  # the same chain, then a Python callable, in worker processes
            import transform_fns
            job_kw["transforms"].append(transform_fns.identity)
            job_kw["python_workers"] = 1
    started = time.monotonic()
    try:
        job = hdmlp.Job(data, batch_size, opts.get("epochs", 3), **job_kw)
    except BaseException as e:  # the test checks every rank's error
        result.update(error=type(e).__name__, message=str(e), seconds=time.monotonic() - started)
        write(out, world_rank, result)
        if scenario == "interrupt":
            os._exit(0)  # rank 1 is still on its way: do not wait for it
        if scenario.startswith("external"):
            libmpi.MPI_Finalize()
            return
        if scenario == "late":
            os._exit(0)  # the other rank is not coming: do not wait for it in MPI_Finalize
        return
    paths = [p for p, _ in job.samples]
    result.update(rank=job.rank, world_size=job.world_size, seed=job.seed, batches=job.batches_per_epoch)
    result["cpu_budget"] = hdmlp.job._core.cpu_budget()
    if scenario == "idle":
        result["idle"] = idle_cpu(opts.get("idle_s", 3.0))
    epochs = []
    for epoch in range(job.epochs):
        seen = []
        if scenario == "stopped_exit" and epoch == 1 and job.rank == 0:
            while not os.path.exists(os.path.join(out, "rank1.json")):
                time.sleep(0.05)  # rank 1 has failed and told us
            time.sleep(0.5)
        if scenario == "freeze" and epoch == 1:
            marker = os.path.join(out, "frozen")
            if job.rank == 1:
                open(marker, "w").close()
                os.kill(os.getpid(), signal.SIGSTOP)  # alive but answering nobody
            else:
                while not os.path.exists(marker):
                    time.sleep(0.05)
                time.sleep(0.5)
        try:
            for b, (ids, labels, samples) in enumerate(job.epoch_batches(epoch)):
                if scenario == "break" and epoch == 0 and b == 1:
                    break
                if scenario == "die" and epoch == 1 and job.rank == 1:
                    os._exit(3)
                if scenario == "raise" and epoch == 1 and job.rank == 1:
                    raise KeyError("an uncaught error in the training script")
                if opts.get("lag_last_epoch_s") and epoch == job.epochs - 1 and b == 0 and job.rank == 1:
                    time.sleep(opts["lag_last_epoch_s"])  # rank 0 closes first and must keep serving
                if job_kw.get("transforms"):
                    seen += [[paths[i], None] for i in ids]  # one batch buffer, not per-file bytes
                    continue
                seen += sample_digests(job, ids, samples, paths)
        except KeyError:
            raise  # scenario "raise": left uncaught on purpose
        except Exception as e:
            result.update(error=type(e).__name__, message=str(e), failed_epoch=epoch)
            write(out, result["rank"], result)
            if scenario == "stopped_exit":
                if job.rank == 1:
                    time.sleep(120)  # the failing rank hangs and never finalises
                return  # the other rank exits normally: MPI_Finalize must not wait for rank 1
            # A rank that leaves without MPI_Finalize makes mpirun kill the
            # others, possibly before they have written what they saw: leave
            # once every rank has (in the scenarios where every rank can).
            if scenario not in ("freeze", "die"):
                wait_for_files(out, [f"rank{r}.json" for r in range(job.world_size)], 30)
            os._exit(0)  # a peer is stuck: do not wait for it in MPI_Finalize
        epochs.append(seen)
    result.update(epochs=epochs, metrics=job.metrics())
    if opts.get("lockstep_close"):
        # As a training loop's last collective would: no rank closes (and so
        # stops serving its cache) before every rank has read its last batch.
        open(os.path.join(out, f"done{job.rank}"), "w").close()
        if not wait_for_files(out, [f"done{r}" for r in range(job.world_size)], 60):
            raise TimeoutError("lockstep_close: a rank did not finish within 60 s")
    t = time.monotonic()
    job.close()
    result["close_seconds"] = time.monotonic() - t
    if libmpi is not None:
        import ctypes
        hdmlp.job._core.finalize_mpi()  # what hdmlp's atexit hook does: must leave the application's MPI alone
        finalized = ctypes.c_int(0)
        libmpi.MPI_Finalized(ctypes.byref(finalized))
        result["mpi_finalized_by_hdmlp"] = bool(finalized.value)
        write(out, result["rank"], result)
        libmpi.MPI_Finalize()
        return
    write(out, result["rank"], result)


def idle_cpu(seconds):
    """CPU seconds this process spent while its job (open, its caches filled) waited
    `seconds` for the training loop, and its threads by name."""
    time.sleep(1.0)  # the prefetch threads fill the small caches meanwhile
    before = time.process_time()
    time.sleep(seconds)
    names = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            pass
    return {"cpu_s": time.process_time() - before, "seconds": seconds, "threads": names}


def wait_for_files(out, names, timeout_s):
    """Waits until every file exists in out; False after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while not all(os.path.exists(os.path.join(out, n)) for n in names):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def ddp(data, out, opts, world_rank):
    """DistributedDataParallel (gloo) over hdmlp batches: a backward pass, so a gradient
    all-reduce, in every step of every run; a rank with a step too few or too many hangs
    or fails the collective. Records each step's local and all-reduced batch size."""
    import torch
    import torch.distributed as dist
    from hdmlp.torch import HDMLPDataLoader, HDMLPImageFolder

    world = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(opts["port"])
    dist.init_process_group("gloo", rank=world_rank, world_size=world)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(1, 1))
    runs = []
    for run in opts["runs"]:
        job = hdmlp.Job(data, run["batch_size"], 2, distr_scheme=run["scheme"], drop_last_batch=run["drop_last"],
                        seed=7, timeout_s=30)
        loader = HDMLPDataLoader(HDMLPImageFolder(data, job))
        paths = [p for p, _ in job.samples]
        epochs = []
        for epoch in range(2):
            steps = []
            for samples, labels in loader:
                model(labels.float().unsqueeze(1)).sum().backward()  # DDP all-reduces the gradient
                total = torch.tensor([float(len(labels))])
                dist.all_reduce(total)
                steps.append([len(labels), int(total.item())])
            epochs.append({"steps": steps, "paths": [paths[i] for i in job.plan(epoch)]})
        runs.append({"len": len(loader), "epochs": epochs, "transport": job.metrics()["transport"]})
        dist.barrier()  # the ranks close together, after their last collective
        job.close()
    dist.destroy_process_group()
    write(out, world_rank, {"rank": world_rank, "runs": runs})


def sample_digests(job, ids, samples, paths):
    """[path, sha256] per sample of a batch (per file's bytes, or per row of an array batch)."""
    if job.array_spec is not None:
        rows = bytes(memoryview(samples))
        step = len(rows) // max(len(ids), 1)
        return [[paths[i], hashlib.sha256(rows[k * step:(k + 1) * step]).hexdigest()] for k, i in enumerate(ids)]
    return [[paths[i], hashlib.sha256(bytes(memoryview(s))).hexdigest()] for i, s in zip(ids, samples)]


def run_schemes(data, out, opts):
    """Scenario "schemes": one job per distribution scheme, one after another, in one MPI run."""
    result = {"scenario": "schemes", "by_scheme": {}}
    for scheme in opts["schemes"]:
        with hdmlp.Job(data, opts.get("batch_size", 8), opts.get("epochs", 2), distr_scheme=scheme, seed=5) as job:
            paths = [p for p, _ in job.samples]
            epochs = []
            for epoch in range(job.epochs):
                seen = []
                for ids, _labels, samples in job.epoch_batches(epoch):
                    seen += sample_digests(job, ids, samples, paths)
                epochs.append(seen)
            result["rank"] = job.rank
            result["by_scheme"][scheme] = {"epochs": epochs, "batches": job.batches_per_epoch,
                                           "source": job.metrics()["source"]}
    write(out, result["rank"], result)


_kept = []


def leave_open(mode, data, batch_size, opts):
    """Exits without closing a job that is still serving and prefetching."""
    job = hdmlp.Job(data, batch_size, opts.get("epochs", 3), seed=1, **opts.get("job", {}))
    next(job.epoch_batches(0))  # threads busy: staging, prefetch, serving
    with open(os.path.join(sys.argv[3], f"rank{job.rank}.json"), "w") as f:
        json.dump({"rank": job.rank, "mode": mode}, f)
    if mode == "global":
        _kept.append(job)
    elif mode == "cycle":
        holder = {"job": job}
        holder["self"] = holder  # only the cycle collector could free it
        import gc
        gc.disable()  # ... and it does not run before exit
        del holder
    elif mode == "sys_exit":
        _kept.append(job)
        sys.exit(0)
    elif mode == "caught":
        _kept.append(job)
        try:
            raise RuntimeError("an error the script catches at top level")
        except RuntimeError:
            pass
def stop_and_resume(phase, data, out, opts, world_rank):
    """Issue 14. "stop": per scheme, deliver opts["stop_after"] steps of epoch 0, then write
    the state (every rank its own copy). "resume": per scheme, first a start where rank 1
    holds another state (every rank must raise the same error), then resume from rank 0's
    state and deliver the rest of the job. Records each step's sample ids."""
    states = opts["states"]
    result = {"rank": world_rank, "schemes": {}}
    for scheme in opts["schemes"]:
        kw = dict(distr_scheme=scheme, exchange_fraction=0.5, timeout_s=30)
        record = result["schemes"][scheme] = {}
        if phase == "stop":
            job = hdmlp.Job(data, opts["batch_size"], opts["epochs"], seed=5, **kw)
            steps = []
            for ids, _, _ in job.epoch_batches(0):
                steps.append(ids)
                if len(steps) == opts["stop_after"]:
                    break
            state = job.state_dict()
            with open(os.path.join(states, f"{scheme}.rank{job.rank}.json"), "w") as f:
                json.dump(state, f)
        else:
            with open(os.path.join(states, f"{scheme}.rank0.json")) as f:
                state = json.load(f)
            other = dict(state, batches=state["batches"] - 1, position=state["position"] - state["batch_size"])
            try:
                hdmlp.Job(data, opts["batch_size"], opts["epochs"], resume=other if world_rank == 1 else state,
                          **kw).close()
                record["mismatch"] = "no error"
            except ValueError as e:
                record["mismatch"] = str(e)
            job = hdmlp.Job(data, opts["batch_size"], opts["epochs"], resume=state, **kw)
            steps = []
            while job.next_epoch < job.epochs:
                steps.append([ids for ids, _, _ in job.epoch_batches(job.next_epoch)])
        record.update(steps=steps, world_size=job.world_size, state=job.state_dict())
        job.close()
    write(out, world_rank, result)


def write(out, rank, result):
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
