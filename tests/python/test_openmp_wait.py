"""hdmlp/openmp_wait.py: OMP_WAIT_POLICY=PASSIVE only when unset, not opted out, and before any OpenMP runtime."""
import os
import subprocess
import sys

from hdmlp.openmp_wait import openmp_runtime_loaded, prefer_passive_wait


def maps(tmp_path, libs):
    p = tmp_path / "maps"
    p.write_text("".join(f"7f00-7f01 r-xp 0 0:0 0 /usr/lib/{lib}\n" for lib in libs))
    return str(p)


def test_sets_passive_only_before_a_runtime_loads(tmp_path):
    env = {}
    assert prefer_passive_wait(env, maps(tmp_path, ["libc.so.6"]))
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"
    for lib in ("libgomp.so.1", "libgomp-a34b3233.so.1", "libiomp5.so", "libomp.so.5"):
        env = {}
        assert openmp_runtime_loaded(maps(tmp_path, [lib]))
        assert not prefer_passive_wait(env, maps(tmp_path, [lib])) and env == {}


def test_keeps_what_the_user_set(tmp_path):
    quiet = maps(tmp_path, [])
    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert not prefer_passive_wait(env, quiet) and env == {"OMP_WAIT_POLICY": "ACTIVE"}
    env = {"HDMLP_OMP_WAIT_POLICY": "keep"}
    assert not prefer_passive_wait(env, quiet) and "OMP_WAIT_POLICY" not in env
    assert openmp_runtime_loaded(str(tmp_path / "missing"))  # cannot tell: change nothing
    assert not prefer_passive_wait({}, str(tmp_path / "missing"))


def run(code, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "HDMLP_OMP_WAIT_POLICY")} | env
    return subprocess.run([sys.executable, "-c", code], env=e, cwd="/", capture_output=True, text=True,
                          check=True).stdout.strip()


def test_import_order_decides():
    show = "import os; print(os.environ.get('OMP_WAIT_POLICY'))"
    assert run("import hdmlp; " + show) == "PASSIVE"
    # torch first: libgomp has read its settings already, so hdmlp leaves them alone.
    assert run("import torch, hdmlp; " + show) == "None"
