"""scripts/wheels/chroot.sh's checks of its binds, which run before it mounts anything (so
without root): a bind source that does not exist, or a bind over a path that a Debian package
in the chroot owns, stops `chroot.sh run` with the path named. On a warm wheel cache neither
shows; a new machine met both (issue 36). scripts/wheels/cold_check.sh, in CI's wheel check,
tests the real chroots on an empty cache."""
import os
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CHROOT_SH = os.path.join(ROOT, "scripts", "wheels", "chroot.sh")


def fake_chroot(tmp_path, owned=()):
    """A folder that chroot.sh takes for one of its chroots, whose dpkg database lists `owned`."""
    root = tmp_path / "chroot"
    info = root / "var" / "lib" / "dpkg" / "info"
    info.mkdir(parents=True)
    (root / ".hdmlp-chroot").write_text("test\n")
    (info / "base-files.list").write_text("/.\n/etc\n/tmp\n")
    (info / "ca-certificates.list").write_text("\n".join(["/etc/ssl", "/etc/ssl/certs", *owned]) + "\n")
    return root


def run_chroot_sh(root, binds, marker):
    env = dict(os.environ, HDMLP_CHROOT_BINDS=binds)
    return subprocess.run(["bash", CHROOT_SH, "run", str(root), "touch", str(marker)],
                          env=env, capture_output=True, text=True, timeout=60)


def test_a_missing_bind_source_stops_the_run_with_its_name(tmp_path):
    root = fake_chroot(tmp_path)
    present = tmp_path / "present"
    present.mkdir()
    missing = tmp_path / "cache" / "src-x"
    marker = tmp_path / "ran"
    result = run_chroot_sh(root, f"{present}:/hdmlp:ro {missing}:/src:ro", marker)
    assert result.returncode == 2, result.stderr
    assert f"the bind source {missing} (for /src) does not exist" in result.stderr
    assert not marker.exists() and not (root / "src").exists()


def test_a_bind_over_a_package_path_is_refused(tmp_path):
    root = fake_chroot(tmp_path, owned=["/usr/share/ca-certificates"])
    source = tmp_path / "certs"
    source.mkdir()
    marker = tmp_path / "ran"
    for target in ("/etc/ssl/certs", "/usr/share/ca-certificates"):
        result = run_chroot_sh(root, f"{source}:{target}:ro", marker)
        assert result.returncode == 2, result.stderr
        assert f"the bind target {target} belongs to a Debian package in {root}" in result.stderr
    assert not marker.exists()


def test_a_malformed_bind_is_refused(tmp_path):
    root = fake_chroot(tmp_path)
    marker = tmp_path / "ran"
    for entry in ("no-target", f"{tmp_path}:relative", f"{tmp_path}:/x:rw"):
        result = run_chroot_sh(root, entry, marker)
        assert result.returncode == 2, (entry, result.stderr)
        assert f"HDMLP_CHROOT_BINDS entry '{entry}' is not HOSTDIR:/DIR_IN_CHROOT[:ro]" in result.stderr
    assert not marker.exists()
