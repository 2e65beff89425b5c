"""hdmlp on an emulated cluster: 3 nodes (network namespaces, each with its own host name and
node-local folder) x 2 ranks, MPI over TCP between nodes, every node reading one PFS
(benchmarks/lab/cluster). Needs root and network namespaces; skips with the reason otherwise.

One cluster serves the module; each test runs its own mpirun on it.

HDMLP_CLUSTER_LAUNCHER runs the same tests under Debian's Slurm (benchmarks/lab/cluster/slurm.py:
slurmctld on a head node, slurmd on every node): "slurm:pmix" (srun --mpi=pmix), "slurm:pmi2"
(srun --mpi=pmi2, with MPICH: HDMLP_CLUSTER_MPI_LIBRARY, else the PyPI wheel scripts/dev.sh keeps)
or "slurm:mpirun" (mpirun inside salloc). `python -m benchmarks cluster slurm-tests` runs them
(docs/cluster.md, "Slurm"); CI runs them under mpirun."""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.append(REPO)  # benchmarks/ is not installed; appended, so hdmlp stays the installed one

from benchmarks.lab.cluster import EmulatedCluster, unavailable_reason  # noqa: E402
from benchmarks.lab.cluster import report  # noqa: E402
from benchmarks.lab.cluster.emulation import leftovers  # noqa: E402

NODES, RANKS_PER_NODE = 3, 2
WORLD = NODES * RANKS_PER_NODE
SCHEMES = ["uniform", "local", "partial_local"]  # every scheme hdmlp has (plan/access_plan.cc)

LAUNCHER = os.environ.get("HDMLP_CLUSTER_LAUNCHER", "mpirun")


def _mpich_library():
    """MPICH's libmpi for srun --mpi=pmi2 (Debian's Open MPI has no PMI-2 client)."""
    if os.environ.get("HDMLP_CLUSTER_MPI_LIBRARY"):
        return os.environ["HDMLP_CLUSTER_MPI_LIBRARY"]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    root = os.path.join(cache, "hdmlp", "mpich")
    for version in sorted(os.listdir(root), reverse=True) if os.path.isdir(root) else []:
        path = os.path.join(root, version, "lib", "libmpi.so.12")
        if os.path.isfile(path):
            return path
    return None


def cluster_options():
    """EmulatedCluster's launcher options for HDMLP_CLUSTER_LAUNCHER."""
    if LAUNCHER == "mpirun":
        return {}
    kind, _, mode = LAUNCHER.partition(":")
    assert kind == "slurm" and mode in ("pmix", "pmi2", "mpirun", ""), f"HDMLP_CLUSTER_LAUNCHER={LAUNCHER}"
    options = {"launcher": "slurm", "slurm_mode": mode or "pmix"}
    if mode == "pmi2":
        options["rank_env"] = {"HDMLP_MPI_LIBRARY": _mpich_library()}
    return options


def _launcher_reason():
    if LAUNCHER == "mpirun":
        return None
    from benchmarks.lab.cluster import slurm
    missing = sorted({pkg for tool, pkg in slurm.TOOLS.items() if shutil.which(tool) is None and not
                      os.path.exists(f"/usr/sbin/{tool}")})
    if missing:
        return f"Slurm is not installed ({' '.join(missing)}; python -m benchmarks cluster slurm-tests installs it)"
    if LAUNCHER == "slurm:pmi2" and not _mpich_library():
        return "srun --mpi=pmi2 needs MPICH (HDMLP_CLUSTER_MPI_LIBRARY, or scripts/dev.sh setup's MPICH wheel)"
    return None


_reason = unavailable_reason() if shutil.which("mpirun") else "mpirun (Open MPI) is not installed"
_reason = _reason or _launcher_reason()
pytestmark = pytest.mark.skipif(_reason is not None, reason=f"emulated cluster unavailable: {_reason}")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """80 files of random bytes (2-30 KB) in 4 classes: small, but enough for peer traffic to show."""
    root = tmp_path_factory.mktemp("cluster") / "data"
    rng = random.Random(22)
    for c in range(4):
        os.makedirs(root / f"class_{c}")
        for i in range(20):
            (root / f"class_{c}" / f"img_{i:02d}.jpg").write_bytes(rng.randbytes(rng.randint(2000, 30000)))
    files = report.dataset_files(str(root))
    total = sum(os.path.getsize(root / p) for p in files)
    return str(root), files, total


@pytest.fixture(scope="module")
def cluster(dataset):
    with EmulatedCluster(NODES, RANKS_PER_NODE, dataset[0], log=lambda *_: None, **cluster_options()) as c:
        yield c
    assert leftovers(os.getpid()) == [], "the teardown left something"


@pytest.fixture(scope="module")
def aggregate_config(dataset, tmp_path_factory):
    """Each rank's RAM class holds 30% of the dataset: one rank alone cannot hold it, the 6 together can."""
    _, _, total = dataset
    cfg = tmp_path_factory.mktemp("cfg") / "aggregate.cfg"
    cfg.write_text("storage_classes = ( { capacity = 0.1; threads = 2; },\n"
                   f"  {{ backend = \"memory\"; capacity = {0.3 * total / 2**20}; threads = 2; }} );\n")
    return str(cfg)


def ok_run(run):
    errors = [r.get("error") for r in run["ranks"] if r is not None and r.get("error")]
    assert run["returncode"] == 0 and not errors and all(run["ranks"]), \
        f"mpirun exit {run['returncode']}, errors {errors}\n{run['stderr'][-3000:]}"
    return run


@pytest.fixture(scope="module")
def schemes_run(cluster, aggregate_config):
    """One mpirun: a 3-epoch job under each distribution scheme, one after the other."""
    spec = {"epochs": 3, "batch_size": 12, "seed": 7, "schemes": SCHEMES, "config": aggregate_config,
            "timeout_s": 60, "exchange_fraction": 0.3}
    return spec, ok_run(report.run_ranks(cluster, spec, timeout=240))


def test_ranks_see_three_nodes_of_two(schemes_run):
    _, run = schemes_run
    hosts = [r["host"] for r in run["ranks"]]
    assert sorted(set(hosts)) == ["node1", "node2", "node3"]
    assert all(hosts.count(h) == RANKS_PER_NODE for h in set(hosts))


def test_every_scheme_delivers_each_sample_once_per_epoch(cluster, dataset, schemes_run):
    _, files, total = dataset
    _, run = schemes_run
    merged = report.merge(cluster, run, files, total, over_network=False)
    assert [j["scheme"] for j in merged["jobs"]] == SCHEMES
    for job in merged["jobs"]:
        for e in job["exactly_once"]:
            assert e["ok"], f"{job['scheme']}, epoch {e['epoch']}: {e}"
            assert e["samples"] == len(files)


def test_the_pfs_is_read_once_over_three_epochs(cluster, dataset, schemes_run):
    """The 6 ranks' RAM holds the dataset in aggregate: over 3 epochs the PFS serves it once."""
    _, files, total = dataset
    _, run = schemes_run
    merged = report.merge(cluster, run, files, total, over_network=cluster.pfs.over_network)
    for job in merged["jobs"]:
        assert job["pfs_bytes_x_dataset"] == pytest.approx(1.0, abs=0.005), (job["scheme"], job["pfs_bytes"], total)
    if cluster.pfs.over_network:  # the bytes on the PFS links, protocol overhead included
        assert 1.0 <= merged["pfs_link_bytes_x_dataset"] / len(SCHEMES) < 1.15


def test_each_epoch_records_the_ranks_cpu_and_its_cache_fills(cluster, dataset, schemes_run):
    """rank.py records per epoch the rank's CPU (all its threads) and how far its cache classes' fills had
    come (the evidence docs/cluster.md's goal 2 reads): CPU is spent every epoch, fills never go back, and
    none passes the class's plan; the report carries both per rank."""
    _, files, total = dataset
    _, run = schemes_run
    for r in run["ranks"]:
        for j in r["runs"]:
            planned = {c["name"]: c["planned_samples"] for c in j["classes"]}
            seen: dict[str, int] = {}
            for e in j["epochs"]:
                assert e["cpu_seconds"] > 0, (r["rank"], j["scheme"])
                for c in e["classes"]:
                    assert seen.get(c["name"], 0) <= c["filled_samples"] <= planned[c["name"]], (r["rank"], c)
                    seen[c["name"]] = c["filled_samples"]
            assert sum(seen.values()) > 0  # the RAM class filled something
    merged = report.merge(cluster, run, files, total, over_network=False)
    per_rank = merged["jobs"][0]["epochs"][0]["per_rank"][0]
    assert per_rank["cpu_seconds"] > 0 and per_rank["classes"]


def test_peer_reads_cross_the_bridge(cluster, dataset, schemes_run):
    """Under uniform and partial_local a rank reads samples other ranks cache; under local each rank
    keeps to its own shard, which it caches, so it asks no peer."""
    _, files, total = dataset
    _, run = schemes_run
    merged = report.merge(cluster, run, files, total, over_network=False)
    for job in merged["jobs"]:
        if job["scheme"] == "local":
            assert job["remote_reads"] == 0
        else:
            assert job["remote_reads"] > 0 and job["requests_served"] > 0, job["scheme"]
    remote_bytes = sum(e["reads"].get("remote", {}).get("bytes", 0)
                       for r in run["ranks"] for j in r["runs"] for e in j["epochs"])
    assert remote_bytes > 0
    # Part of the peers' samples came from another node: they crossed the compute links.
    carried = merged["node_to_node_bytes"]
    assert carried > remote_bytes / 4, (carried, remote_bytes)
    assert all(v["from_nodes"] > 0 and v["to_nodes"] > 0 for v in merged["links"].values())


def test_the_placement_exchange_is_counted_and_matches_the_planning_model(schemes_run):
    """metrics()["placement_exchange"] counts the start-up's all-to-all bytes; over all ranks they are the
    planning benchmark's model exactly (8 bytes per cached sample and per distinct read, 4 per answer),
    the model `python -m benchmarks cluster scale` compares against (benchmarks/cluster/goals.py).
    Under `local` every message is a rank's to itself."""
    from benchmarks.cluster.goals import exchange_model
    _, run = schemes_run
    for j, scheme in enumerate(SCHEMES):
        jobs = [r["runs"][j] for r in run["ranks"]]
        ex = [job["metrics"]["placement_exchange"] for job in jobs]
        assert all(e["rounds"] == 3 and e["seconds"] > 0 for e in ex), (scheme, ex)
        sent = sum(e["sent_bytes"] for e in ex)
        assert sent == sum(e["received_bytes"] for e in ex), (scheme, ex)
        # Under local a rank caches and reads its own shard, whose home it is: nothing leaves it.
        assert sent == 0 if scheme == "local" else sent > 0, (scheme, ex)
        cached = [sum(c["planned_samples"] for c in job["classes"]) for job in jobs]
        reads = [len({i for e in job["epochs"] for i in e["ids"]}) for job in jobs]
        assert sum(cached) > 0, [job["classes"] for job in jobs]
        model = exchange_model(cached, reads)
        measured = sum(e["sent_bytes"] + e["self_bytes"] for e in ex) / WORLD
        assert measured == pytest.approx(model["mean_sent_bytes"]), (scheme, ex, cached, reads)


def test_the_startup_phases_are_timed_on_every_rank_and_the_check_waits_for_the_last(schemes_run):
    """metrics()["startup"] on every rank of a real multi-node job: the phases `cluster scale` reports
    (benchmarks/cluster/goals.py), within the rank's own timing of hdmlp.Job(...); the exchange phase
    holds the exchange; and no rank gets through MPI's start and the start-up check (collectives) before
    the last rank has begun constructing its Job."""
    from benchmarks.cluster.goals import startup_phases
    _, run = schemes_run
    for j, scheme in enumerate(SCHEMES):
        jobs = [r["runs"][j] for r in run["ranks"]]
        for job in jobs:
            s = job["metrics"]["startup"]
            names = list(s["phases"])
            assert names[:4] == ["communicator", "config", "scan", "startup_check"] and names[-1] == "staging"
            assert all(p["wall_seconds"] >= 0 and p["process_cpu_seconds"] >= 0 for p in s["phases"].values())
            assert s["wall_seconds"] <= job["startup_seconds"], (scheme, s, job["startup_seconds"])
            assert s["phases"]["placement_exchange"]["wall_seconds"] >= job["metrics"]["placement_exchange"]["seconds"]
        last_start = max(job["metrics"]["startup"]["started_at"] for job in jobs)
        for job in jobs:
            s = job["metrics"]["startup"]
            through_check = sum(s["phases"][p]["wall_seconds"]
                                for p in ("communicator", "config", "scan", "startup_check"))
            assert s["started_at"] + through_check >= last_start - 1e-3, (scheme, s["started_at"], last_start)
        summary = startup_phases(jobs, run["ranks"])
        assert list(summary["phases"]) == names
        assert summary["arrival"]["called_spread_seconds"] >= 0 and len(summary["arrival"]["called_after_first_main"]) == WORLD


def test_the_dataloader_baseline_runs_on_the_cluster_and_rereads_the_pfs(cluster, dataset):
    """rank.py's baseline of `cluster vs-dataloader` (torchvision ImageFolder + DistributedSampler +
    DataLoader): each file's own bytes, every epoch from the PFS. 80 files on 6 ranks: the sampler
    pads each epoch to 84 with 4 repeats (drop_last=False), where hdmlp delivers each once."""
    pytest.importorskip("torchvision")
    _, files, total = dataset
    spec = {"epochs": 2, "batch_size": 12, "seed": 3, "loader": "dataloader", "num_workers": 1}
    run = ok_run(report.run_ranks(cluster, spec, timeout=180))
    merged = report.merge(cluster, run, files, total, over_network=cluster.pfs.over_network)
    job = merged["jobs"][0]
    assert job["scheme"] == "dataloader(num_workers=1)"
    padded = -len(files) % WORLD
    for e in job["exactly_once"]:
        assert (e["missing"], e["duplicated"], e["wrong_bytes"], e["samples"]) == (0, padded, 0, len(files) + padded)
    read = sum(os.path.getsize(os.path.join(dataset[0], p)) for p in files)
    assert job["pfs_bytes"] >= 2 * read  # no cache between epochs
    if cluster.pfs.over_network:  # netfs keeps no page cache: every epoch crosses the storage links
        assert merged["pfs_link_bytes_x_dataset"] >= 2.0


def test_same_seed_same_order_as_on_one_host(dataset, schemes_run, tmp_path):
    """The same job with 6 ranks under a plain local mpirun (one host): the same samples in the same order."""
    root, _, _ = dataset
    spec, run = schemes_run
    local = dict(spec, data=root, out=str(tmp_path))
    (tmp_path / "spec.json").write_text(json.dumps(local))
    cmd = ["mpirun", "--oversubscribe", "-np", str(WORLD), sys.executable, report.RANK_SCRIPT,
           str(tmp_path / "spec.json")]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240,
                          env=dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    one_host = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(WORLD)]
    assert {r["host"] for r in one_host} == {one_host[0]["host"]}
    for j, scheme in enumerate(SCHEMES):
        for r in range(WORLD):
            cluster_ids = [e["ids"] for e in run["ranks"][r]["runs"][j]["epochs"]]
            host_ids = [e["ids"] for e in one_host[r]["runs"][j]["epochs"]]
            assert cluster_ids == host_ids, f"{scheme}: rank {r} got another order on the cluster"
        assert run["ranks"][0]["runs"][j]["paths"] == one_host[0]["runs"][j]["paths"]


def test_each_node_splits_its_capacity_between_its_ranks(cluster, tmp_path):
    """A percent capacity is a share of the node: each of a node's 2 ranks gets half of it."""
    cfg = tmp_path / "percent.cfg"
    cfg.write_text('storage_classes = ( { capacity = 0.1; threads = 2; },\n'
                   '  { backend = "memory"; capacity = "0.2%"; threads = 1; } );\n')
    run = ok_run(report.run_ranks(cluster, {"epochs": 1, "batch_size": 12, "seed": 1, "schemes": ["uniform"],
                                            "config": str(cfg), "timeout_s": 60}, timeout=120))
    for r in run["ranks"]:
        capacity = r["runs"][0]["classes"][0]["capacity_bytes"]
        node_share = 0.002 * r["mem_available_bytes"]
        assert 0.4 < capacity / node_share < 0.6, (r["rank"], r["host"], capacity, node_share)


def test_a_node_killed_mid_epoch_ends_the_job_naming_it(cluster, aggregate_config):
    """node3's two ranks SIGKILL themselves in epoch 1 (a node failing). Under mpirun's defaults the job
    ends within timeout_s, mpirun naming the killed rank and its node's address; the surviving ranks
    are stopped by mpirun before hdmlp's own peer timeout could fire (the next test turns that off)."""
    timeout_s = 8
    spec = {"epochs": 3, "batch_size": 12, "seed": 4, "schemes": ["uniform"], "config": aggregate_config,
            "timeout_s": timeout_s, "die": {"node": "node3", "epoch": 1, "batch": 1}}
    t = time.monotonic()
    run = report.run_ranks(cluster, spec, timeout=60, mpirun_args=cluster.abort_args())
    wall = time.monotonic() - t
    assert run["returncode"] != 0
    assert all(r is None or r.get("error") for r in run["ranks"]), "a rank finished although node3 died"
    if cluster.slurm is None or cluster.slurm.mode == "mpirun":
        # --map-by node: ranks 2 and 5 are node3's, at 10.77.X.3 (inside Slurm's allocation: node3)
        named = re.search(r"process rank (\d+) with PID \d+ on node (\S+) exited on signal 9", run["stderr"])
        assert named, run["stderr"][-3000:]
        assert int(named.group(1)) in (2, 5) and named.group(2) in (cluster.address(3), "node3")
    else:  # srun --kill-on-bad-exit, --distribution=cyclic: node3's tasks are 2 and 5
        named = re.search(r"srun: error: node3: tasks? ([\d,-]+): Killed", run["stderr"])
        assert named, run["stderr"][-3000:]
        assert set(named.group(1).replace("-", ",").split(",")) <= {"2", "5"}, named.group(0)
    assert wall < timeout_s + 30, wall  # start-up and one epoch, then the abort
    _no_mpi_process_left(cluster)


def test_the_sbatch_example_runs_as_written(cluster, tmp_path):
    """docs/launching.md's batch script, examples/slurm_job.sbatch, submitted as it is with sbatch: on 2 of
    the nodes, 4 ranks train the Fashion-MNIST example with DDP (rendezvous on the first node), hdmlp
    joining MPI through srun --mpi=pmix; every rank finishes and rank 0 reports a world of 4."""
    if cluster.slurm is None:
        pytest.skip("needs Slurm: HDMLP_CLUSTER_LAUNCHER=slurm:pmix (python -m benchmarks cluster slurm-tests)")
    pytest.importorskip("torchvision")
    from test_fashion_mnist import make_source
    script = os.path.join(REPO, "examples", "slurm_job.sbatch")
    with open(script) as f:
        text = f.read()
    with open(os.path.join(REPO, "docs", "launching.md")) as f:
        assert text.strip() in f.read(), "docs/launching.md must show examples/slurm_job.sbatch as it is"
    shared = tempfile.mkdtemp(prefix="fashion-mnist-", dir=cluster.work)  # one path on every node
    make_source(os.path.join(shared, "idx"), 256, 64, seed=3)
    report = os.path.join(shared, "report.md")
    res = cluster.slurm.sbatch(script, ["--source", os.path.join(shared, "idx"), "--data", os.path.join(shared, "fm"),
                                        "--epochs", "2", "--batch-size", "32", "--report", report,
                                        # after the script's own --checkpoint: not into the checkout
                                        "--checkpoint", os.path.join(shared, "fashion-mnist.pt")],
                               env={"HDMLP_VENV": sys.prefix}, timeout=600, cwd=REPO)
    assert res["returncode"] == 0, res["output"][-4000:] + res["stderr"][-2000:]
    assert re.search(r"^  mpi: not loaded yet; would load Open MPI v", res["output"], re.M), res["output"][-3000:]
    assert "final test accuracy" in res["output"], res["output"][-3000:]
    with open(report[:-3] + ".json") as f:
        run = json.load(f)
    assert run["world_size"] == 4 and len(run["runs"][0]["epochs"]) == 2, run


def _task_ids(text):
    """srun's task list ("1,4" or "0-2,5") as a set of ranks."""
    ids = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        ids.update(range(int(first), int(last or first) + 1))
    return ids


def _no_mpi_process_left(cluster):
    for k in range(1, NODES + 1):  # the node's PFS client (netfs) stays; no Open MPI daemon or rank may
        left = []
        for pid in cluster.node_pids(k):
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            except OSError:
                continue
            if b"orted" in cmd or report.RANK_SCRIPT.encode() in cmd:
                left.append(pid)
        assert left == [], f"processes left on node{k}"


def test_a_node_killed_mid_epoch_hdmlp_names_it_on_every_survivor(cluster, aggregate_config):
    """As above, but mpirun told not to abort the job (--mca orte_abort_on_non_zero_status 0): hdmlp itself
    must end every surviving rank with an error naming a lost rank of node3 within timeout_s (plus a margin
    for start-up skew and a loaded machine), never hang; only a rank that needed nothing from node3 and
    finished its epochs before a peer's error reached it may end without one. Open MPI 4.1's mpirun itself does not exit once a
    rank died by a signal with abort off (even for ranks that never use MPI; docs/cluster.md), so the test
    stops it once the survivors have reported, and then checks that nothing is left on the nodes.
    timeout_s 5 (not 8 as above): the test waits it out, and the ranks need no torch, so a live peer
    answers within milliseconds even on a loaded 2-core machine."""
    timeout_s = 5
    # A training step of 50 ms a batch: the survivors still need node3's samples after it dies.
    spec = {"epochs": 3, "batch_size": 12, "seed": 4, "schemes": ["uniform"], "config": aggregate_config,
            "timeout_s": timeout_s, "die": {"node": "node3", "epoch": 0, "batch": 2}, "step_ms": 50}
    lost = {2, 5}  # --map-by node: node3 runs ranks 2 and 5
    survivors = [r for r in range(WORLD) if r not in lost]

    def until_survivors_reported(proc, out):
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            if all(os.path.exists(os.path.join(out, f"rank{r}.json")) for r in survivors):
                break
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGTERM)  # mpirun ends its daemons (and what is left of the job)

    run = report.run_ranks(cluster, spec, timeout=120, during=until_survivors_reported,
                           mpirun_args=cluster.keep_going_args())
    if cluster.slurm is not None and cluster.slurm.mode == "pmi2":
        # MPICH over libfabric's TCP blocks a survivor's fetch from node3 inside MPI_Isend to the dead rank,
        # polling for ever while it holds MPICH's global lock (gdb on the survivors), where no deadline of
        # hdmlp's can reach. hdmlp's watchdog (transport/watched_fabric.h) ends such a rank after timeout_s
        # with a report naming the call that has not returned (exit code 70), instead of the hang.
        assert set(run["died"]) == lost, run["died"]
        assert run["seconds"] < 60, f"the survivors did not end by themselves\n{run['stderr'][-3000:]}"
        reports = {}
        for r in survivors:
            if run["ranks"][r] is not None and run["ranks"][r].get("error"):
                reports[r] = run["ranks"][r]["error"]["message"]
                continue
            found = re.search(rf"^hdmlp: rank {r} on node\d: MPICH[^\n]* has not returned from ([^\n]*?) for \d+ s "
                              rf"\(timeout_s = {timeout_s}\)[^\n]*ending this process \(exit code 70\)",
                              run["stderr"], re.M)
            if found is None and run["ranks"][r] is not None:  # finished before it needed node3
                assert len(run["ranks"][r]["runs"][0]["epochs"]) == spec["epochs"], (r, run["ranks"][r])
                continue
            assert found, f"rank {r} ended without hdmlp's report\n{run['stderr'][-3000:]}"
            exited = [m.group(1) for m in re.finditer(r"node\d: tasks? ([\d,-]+): Exited with exit code 70",
                                                       run["stderr"])]
            assert any(r in _task_ids(ids) for ids in exited), (r, run["stderr"][-3000:])
            reports[r] = found.group(1)
        assert any(re.search(r"rank [25] on node3", m) for m in reports.values()), reports
        _no_mpi_process_left(cluster)
        return
    assert set(run["died"]) == lost, run["died"]
    died = min(run["died"].values())
    raised = 0
    for r in survivors:
        rank = run["ranks"][r]
        assert rank is not None, f"rank {r} reported nothing\n{run['stderr'][-3000:]}"
        if not rank.get("error"):
            # It needed nothing from node3 and finished before any peer's error reached it: then it
            # delivered every epoch (and at exit hdmlp aborts the MPI job rather than wait for node3).
            assert len(rank["runs"][0]["epochs"]) == spec["epochs"], (r, rank)
            continue
        raised += 1
        message = rank["error"]["message"]
        assert re.search(r"rank [25] on node3 did not answer", message), (r, message)
        assert rank["error"]["time"] - died < timeout_s + 6, (r, rank["error"]["time"] - died, message)
    assert raised >= 2, "node3 held samples the others needed: some survivors must have raised"
    _no_mpi_process_left(cluster)


def test_teardown_leaves_nothing_after_ctrl_c_and_sigkill(dataset, tmp_path):
    """A driver interrupted (SIGINT) while mpirun runs tears everything down; one killed (SIGKILL) leaves
    its namespaces behind, and the next cluster's start removes them."""
    root, _, _ = dataset
    script = tmp_path / "driver.py"
    script.write_text(
        f"import sys; sys.path.append({REPO!r})\n"
        "from benchmarks.lab.cluster import EmulatedCluster\n"
        f"with EmulatedCluster(2, 1, {root!r}, link_mbit=100, log=lambda *_: None, **{cluster_options()!r}) as c:\n"
        "    print('ready', flush=True)\n"
        "    c.run(['sleep', '60'], timeout=90)\n")
    for sig in (signal.SIGINT, signal.SIGKILL):
        proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        deadline = time.monotonic() + 20
        while not _sleep_runs_in(f"hc{proc.pid}n2"):  # started by Open MPI's daemon or by slurmd
            assert time.monotonic() < deadline, "the launcher did not start sleep on the nodes"
            time.sleep(0.2)
        proc.send_signal(sig)
        proc.wait(60)
        if sig == signal.SIGKILL:
            assert leftovers(proc.pid), "SIGKILL should have left the cluster behind"
            from benchmarks.lab.cluster import remove_stale
            remove_stale(log=lambda *_: None)
        assert leftovers(proc.pid) == [], f"after {sig.name}"
        ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
        assert f"hdmlp-cluster-{proc.pid}-" not in ps, ps  # mpirun (its agent's path) is gone too


def _sleep_runs_in(netns):
    """Whether `sleep 60` runs in the network namespace (slurmstepd runs it as /usr/bin/sleep)."""
    for pid in subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True).stdout.split():
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 1 and os.path.basename(argv[0]) == b"sleep" and argv[1] == b"60":
            return True
    return False
