"""Issue 3's outcomes: prefetching into configured storage classes."""
import hashlib
import os
import warnings

import pytest

import hdmlp

from conftest import make_folder


def write_config(path, classes):
    path.write_text("storage_classes = ( { capacity = 0.05; threads = 2; }" + "".join(classes) + " );\n")
    return path


def memory(mb):
    return f', {{ backend = "memory"; capacity = {mb}; threads = 2; }}'


def disk(folder, mb):
    return f', {{ backend = "filesystem"; capacity = {mb}; threads = 2; backend_options = {{ path = "{folder}"; }}; }}'


@pytest.fixture
def data(tmp_path):
    root = tmp_path / "data"
    digests = make_folder(str(root), classes=4, per_class=(12, 15, 9, 14))
    total = sum(os.path.getsize(os.path.join(root, rel)) for rel in digests)
    return root, digests, total


def run(job, digests):
    """Every epoch, checking each delivered sample's bytes; returns job.metrics()."""
    by_path = {os.path.join(job.dataset_path, rel): d for rel, d in digests.items()}
    paths = [p for p, _ in job.samples]
    for epoch in range(job.epochs):
        seen = []
        for ids, _, samples in job.epoch_batches(epoch):
            for i, s in zip(ids, samples):
                assert hashlib.sha256(bytes(memoryview(s))).hexdigest() == by_path[paths[i]]
                seen.append(i)
        assert sorted(seen) == list(range(len(job)))
    return job.metrics()


def pfs_bytes(epoch_metrics):
    return epoch_metrics["reads"].get("pfs", {}).get("bytes", 0)


@pytest.mark.parametrize("backend", ["memory", "filesystem"])
def test_class_holding_the_dataset_reads_nothing_from_the_pfs_after_epoch_one(data, tmp_path, backend):
    root, digests, total = data
    cls = memory(1) if backend == "memory" else disk(tmp_path / "ssd", 1)
    cfg = write_config(tmp_path / "c.cfg", [cls])
    with hdmlp.Job(root, 5, 4, seed=1, config_path=cfg) as job:
        m = run(job, digests)
        assert [pfs_bytes(e) for e in m["epochs"][1:]] == [0, 0, 0]
        assert all(e["reads"][backend]["count"] == len(digests) for e in m["epochs"][1:])
        assert m["classes"][0]["filled_bytes"] == total
    if backend == "filesystem":
        assert os.listdir(tmp_path / "ssd") == []  # the job's folder is removed at close


def test_class_holding_half_serves_half(data, tmp_path):
    root, digests, total = data
    cfg = write_config(tmp_path / "c.cfg", [memory(total / 2 / 2**20)])
    with hdmlp.Job(root, 5, 3, seed=2, config_path=cfg) as job:
        m = run(job, digests)
        cls = m["classes"][0]
        assert cls["planned_bytes"] <= total / 2
        for e in m["epochs"][1:]:
            assert e["reads"]["pfs"]["count"] == len(digests) - cls["planned_samples"]
            assert 0.3 * total <= pfs_bytes(e) <= 0.7 * total


def test_slow_pfs_is_read_once_and_later_epochs_are_local(data, tmp_path):
    root, digests, _ = data
    cfg = write_config(tmp_path / "c.cfg", [memory(0.02), disk(tmp_path / "ssd", 1)])
    job = hdmlp.Job(root, 5, 3, seed=3, config_path=cfg, storage=hdmlp.ThrottledStorage(latency_s=0.005))
    m = run(job, digests)
    for e in m["epochs"][1:]:
        assert "pfs" not in e["reads"]
        assert sum(r["count"] for r in e["reads"].values()) == len(digests)
    assert job._job.pfs_files_opened == len(digests)  # no sample read twice from the PFS
    assert m["pfs_bytes"] == sum(os.path.getsize(p) for p, _ in job.samples)
    job.close()


def test_unknown_key_names_key_file_and_line(data, tmp_path):
    root, _, _ = data
    cfg = tmp_path / "typo.cfg"
    cfg.write_text("storage_classes = ( { capacity = 1; threads = 2; },\n  { backend = \"memory\"; capacity = 1; thread = 2; } );\n")
    with pytest.raises(hdmlp.ConfigError, match=r"typo\.cfg:2.*thread"):
        hdmlp.Job(root, 5, 1, config_path=cfg)


def test_full_default_config_loads_and_sizes_itself(data):
    root, digests, _ = data
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the default config must not warn on a healthy machine
        with hdmlp.Job(root, 5, 2, seed=0) as job:
            m = run(job, digests)
    assert m["staging"]["capacity_bytes"] > 0
    assert [c["backend"] for c in m["classes"]] == ["memory", "filesystem"]
