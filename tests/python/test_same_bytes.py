"""The same bytes on every CPU (docs/transforms.md): the cheap part of it that CI can afford.

CI runs on x86-64 only, so it checks what would break the cross-CPU guarantee there: the portable
code (HDMLP_SIMD=portable, what a CPU without vector kernels runs) gives the AVX2 kernels' bytes
for the training, validation and timm chains over two epochs and for every resampling filter;
a wrong HDMLP_SIMD is a clear error; and the scripts that build and test the aarch64 wheels agree
with each other and leave binfmt_misc as they found it. The comparison with aarch64 itself runs
under emulation (`scripts/dev.sh same-bytes`, results in benchmarks/results/same_bytes.md).
"""
import json
import os
import subprocess
import sys

import pytest

import hdmlp
from hdmlp.datasets import make_image_folder

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
WHEELS = os.path.join(ROOT, "scripts", "wheels")


def test_portable_code_gives_the_vector_kernels_bytes(tmp_path):
    kernels = hdmlp.build_info()["simd"]
    if kernels.startswith("portable"):
        pytest.skip(f"no vector kernels here ({kernels})")
    data = make_image_folder(tmp_path / "data", num_images=40, num_classes=4, seed=5, threads=2)
    out = tmp_path / "hashes.json"
    proc = subprocess.run([sys.executable, os.path.join(WHEELS, "same_bytes.py"), "run", str(data), str(out),
                           "--batch-size", "8"], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["build"]["simd"].split()[0] in ("avx2", "neon")
    assert result["portable_kernels"].startswith("portable")
    assert result["portable_equal"] is True
    chains = result["chains"]
    assert {"train", "val", "timm", "train-fast"} <= set(chains)
    assert sum(name.startswith("filters/") for name in chains) == 18
    # Two epochs of 5 batches each, and the epochs differ (the random ops draw anew).
    for name in ("train", "val", "timm"):
        assert [(e, b) for e, b, _ in chains[name]] == [(e, b) for e in range(2) for b in range(5)], name
    assert chains["train"][0][2] != chains["train"][5][2]
    assert chains["val"][0][2] != chains["train"][0][2]
    # compare: equal files pass, a changed hash is found and named.
    same = subprocess.run([sys.executable, os.path.join(WHEELS, "same_bytes.py"), "compare", str(out), str(out)],
                          capture_output=True, text=True)
    assert same.returncode == 0 and "ALL EQUAL" in same.stdout, same.stdout
    result["chains"]["timm"][7][2] = "0" * 64
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(result))
    diff = subprocess.run([sys.executable, os.path.join(WHEELS, "same_bytes.py"), "compare", str(out), str(changed)],
                          capture_output=True, text=True)
    assert diff.returncode == 1 and "DIFFER timm" in diff.stdout and "(1, 2)" in diff.stdout, diff.stdout


def test_a_wrong_hdmlp_simd_is_a_clear_error():
    env = dict(os.environ, HDMLP_SIMD="avx512")
    proc = subprocess.run([sys.executable, "-c", "import hdmlp; print(hdmlp.build_info())"], env=env,
                          capture_output=True, text=True, cwd="/")
    assert proc.returncode != 0
    assert "HDMLP_SIMD='avx512'" in proc.stderr and "'portable'" in proc.stderr, proc.stderr[-2000:]
    ok = subprocess.run([sys.executable, "-c", "import hdmlp; print(hdmlp.build_info()['simd'])"],
                        env=dict(os.environ, HDMLP_SIMD="portable"), capture_output=True, text=True, cwd="/")
    assert ok.returncode == 0 and ok.stdout.startswith("portable (built: "), ok.stderr[-2000:]


def _bash(script: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=dict(os.environ, **env),
                          cwd=ROOT, timeout=120)


def test_the_wheel_scripts_agree_on_the_architectures():
    for name in os.listdir(WHEELS):
        if name.endswith(".sh"):
            assert _bash(f"bash -n scripts/wheels/{name}").returncode == 0, name
    proc = _bash("""source scripts/wheels/common.sh; source scripts/wheels/arch.sh
        for a in "${WHEEL_ARCHS_ALL[@]}"; do
          arch_vars "$a"
          echo "$a $DEB_ARCH $TRIPLET $BUILD_CHROOT cross=$CROSS packages=${#CROSS_PACKAGES[@]} $PLATFORM_TAG"
          [[ -z $CROSS || -f scripts/wheels/$CROSS.cmake ]] || echo "MISSING toolchain $CROSS.cmake"
          [[ $TRIPLET == $a-linux-gnu ]] || echo "BAD triplet"
        done
        wheel_arch dist/hdmlp-0.1.0-cp313-cp313-manylinux_2_31_aarch64.whl
        wheel_arch hdmlp-0.1.0-cp311-cp311-manylinux_2_31_x86_64.whl
        wheel_arch hdmlp-0.1.0-cp311-cp311-win_amd64.whl""")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "MISSING" not in proc.stdout and "BAD" not in proc.stdout, proc.stdout
    assert lines[0].startswith("x86_64 amd64 x86_64-linux-gnu chroot-bullseye-build cross= packages=0")
    assert lines[1].startswith("aarch64 arm64 aarch64-linux-gnu chroot-bullseye-cross-arm64 cross=aarch64-linux-gnu")
    assert lines[2:] == ["aarch64", "x86_64", "unknown"]
    # An unknown architecture stops the build at once, naming the known ones.
    bad = _bash("scripts/wheels/build.sh /tmp/none", HDMLP_WHEEL_ARCHS="riscv64")
    assert bad.returncode != 0 and "unknown wheel architecture 'riscv64'" in bad.stderr, bad.stderr
    # The cross build changes only the environment of build-deps.sh's recipes, never their text, so the
    # x86-64 libraries' stamps (which hash the text) stay valid.
    text = open(os.path.join(WHEELS, "build-deps.sh")).read()
    recipes = text[text.index("build_zlib() {"):text.index('mkdir -p $PREFIX/lib $PREFIX/include')]
    assert "HDMLP_CROSS" not in recipes and "host_alias" not in recipes


def _binfmt_state() -> str:
    return subprocess.run([os.path.join(WHEELS, "binfmt.sh"), "state"], capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="binfmt_misc needs root")
def test_binfmt_is_left_as_found(tmp_path):
    """binfmt.sh registers an aarch64 handler for one command and then restores the state it recorded:
    after success, failure and SIGTERM. /bin/true stands in for qemu (the kernel only opens it here)."""
    if subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode != 0:
        pytest.skip("no mount namespaces here")
    env = dict(os.environ, HDMLP_QEMU_AARCH64="/bin/true", HDMLP_WHEEL_CACHE=str(tmp_path))
    before = _binfmt_state()
    inside = subprocess.run([os.path.join(WHEELS, "binfmt.sh"), "run", "bash", "-c",
                             "grep -l '^magic 7f454c460201010000000000000000000200b700' "
                             "/proc/sys/fs/binfmt_misc/* | head -1"], capture_output=True, text=True, env=env)
    assert inside.returncode == 0 and inside.stdout.strip(), inside.stderr
    assert _binfmt_state() == before
    failed = subprocess.run([os.path.join(WHEELS, "binfmt.sh"), "run", "bash", "-c", "exit 7"], env=env)
    assert failed.returncode == 7
    assert _binfmt_state() == before
    proc = subprocess.Popen([os.path.join(WHEELS, "binfmt.sh"), "run", "sleep", "30"], env=env,
                            start_new_session=True)
    import time
    time.sleep(1.0)
    os.killpg(proc.pid, 15)
    proc.wait(timeout=30)
    assert _binfmt_state() == before
