"""A filesystem storage class on a scratch disk that several users share (issue 40): another
user can neither list nor read a running job's cached samples, nor steer its writes, and the
sweep of stale folders leaves other users' folders alone. The second user is `nobody`
(uid 65534), reached with setpriv; so these tests need root, as CI has (they skip otherwise).
The same rules at the Env level, with planted folders and links at the job's own paths, are in
tests/cpp/private_files_test.cc."""
import glob
import os
import shutil
import stat
import subprocess
import tempfile
import time

import pytest

import hdmlp
from conftest import make_folder

OTHER_UID = 65534
SETPRIV = shutil.which("setpriv")
pytestmark = pytest.mark.skipif(os.geteuid() != 0 or SETPRIV is None,
                                reason="needs root and setpriv to act as a second user")


def as_other_user(*argv):
    """Runs argv as uid/gid 65534 with no supplementary groups; returns the CompletedProcess."""
    return subprocess.run([SETPRIV, f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups", "--", *argv],
                          capture_output=True, text=True, timeout=30)


@pytest.fixture
def scratch():
    """A node's shared scratch folder: world-writable and sticky, as /tmp is."""
    path = tempfile.mkdtemp(prefix="hdmlp-i40-scratch-", dir="/tmp")
    os.chmod(path, 0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def disk_config(tmp_path, scratch):
    cfg = tmp_path / "disk.cfg"
    cfg.write_text("storage_classes = ( { capacity = 0.05; threads = 2; },\n"
                   f"  {{ backend = \"filesystem\"; capacity = 1; threads = 2; backend_options = {{ path = \"{scratch}\"; }}; }} );\n")
    return cfg


def test_another_user_can_neither_list_nor_read_a_running_jobs_cache(tmp_path, scratch):
    root = tmp_path / "data"
    make_folder(str(root))
    old = os.umask(0)  # the loosest umask: the modes must not come from it
    try:
        job = hdmlp.Job(root, 4, 2, seed=0, config_path=disk_config(tmp_path, scratch), index_cache=False)
        with job:
            for _ in job.epoch_batches(0):
                pass
            deadline = time.monotonic() + 10  # the prefetch threads fill the class
            while len(glob.glob(f"{scratch}/hdmlp-job-*/*.bin")) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            folders = glob.glob(f"{scratch}/hdmlp-job-*")
            assert len(folders) == 1, folders
            samples = glob.glob(f"{folders[0]}/*.bin")
            assert samples, "nothing was cached: the test would prove nothing"
            assert stat.S_IMODE(os.stat(folders[0]).st_mode) == 0o700
            assert {stat.S_IMODE(os.stat(s).st_mode) for s in samples} == {0o600}
            listing = as_other_user("ls", folders[0])
            assert listing.returncode != 0 and "Permission denied" in listing.stderr, listing
            for sample in samples[:3]:
                reading = as_other_user("cat", sample)
                assert reading.returncode != 0 and "Permission denied" in reading.stderr, reading
                assert reading.stdout == ""
            # Nor can they plant anything in it for the job to write through.
            planting = as_other_user("ln", "-s", "/etc/passwd", os.path.join(folders[0], "999.bin"))
            assert planting.returncode != 0, planting
        assert glob.glob(f"{scratch}/hdmlp-job-*") == []  # closed: nothing left
    finally:
        os.umask(old)


def test_another_users_stale_folder_and_planted_links_survive_the_sweep(tmp_path, scratch):
    """The sweep removes folders whose lock nobody holds; one of another user's (here an old one, unlocked)
    is theirs to remove, even for a job run as root, and a link planted under the prefix is not followed."""
    theirs = os.path.join(scratch, "hdmlp-job-otherhost-4242-0000beef")
    made = as_other_user("sh", "-c", f"mkdir -m 700 {theirs} && echo x > {theirs}/1.bin && : > {theirs}/.lock")
    assert made.returncode == 0, made
    two_hours_ago = time.time() - 7200
    os.utime(theirs, (two_hours_ago, two_hours_ago))
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / ".lock").write_text("")
    (precious / "keep.txt").write_text("keep")
    link = os.path.join(scratch, "hdmlp-job-otherhost-4243-0000cafe")
    assert as_other_user("ln", "-s", str(precious), link).returncode == 0
    root = tmp_path / "data"
    make_folder(str(root))
    started = time.monotonic()
    with hdmlp.Job(root, 4, 1, seed=0, config_path=disk_config(tmp_path, scratch), index_cache=False) as job:
        assert time.monotonic() - started < 10
        assert job.metrics()["warnings"] == []  # leaving them alone is no error
        for _ in job.epoch_batches(0):
            pass
    assert os.path.isdir(theirs) and os.stat(theirs).st_uid == OTHER_UID
    assert os.path.exists(os.path.join(theirs, "1.bin"))
    assert os.path.islink(link) and (precious / "keep.txt").read_text() == "keep"
    assert sorted(os.listdir(scratch)) == sorted(os.path.basename(p) for p in (theirs, link))
