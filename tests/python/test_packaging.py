"""What a user meets before the first batch: the version and build information, the
installed example configurations, the error for a checkout without the extension, and
CMake's message for a missing system library."""
import os
import shutil
import subprocess
import sys

import pytest

import hdmlp
from hdmlp.cli import main

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_version_names_what_hdmlp_was_built_with(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"hdmlp {hdmlp.__version__}\n")
    info = hdmlp.build_info()
    for component in ("mpi", "libjpeg-turbo", "opencv"):
        assert f"  {component}: {info[component]}" in out
    assert info["mpi"].startswith(("Open MPI ", "MPICH ", "MPI "))
    assert info["libjpeg-turbo"][0].isdigit() and info["opencv"][0].isdigit()


def test_example_configs_are_installed_and_load():
    configs = hdmlp.example_configs()
    assert {"default", "laptop", "gpu_node_nvme", "hdmlp_paper"} <= set(configs)
    assert configs["default"] == hdmlp.default_config_path()
    for name, path in configs.items():
        cfg = hdmlp.job._core.load_config(path)
        assert cfg["storage_classes"], name


def test_importing_the_source_checkout_says_what_to_do():
    """From the checkout root, `import hdmlp` finds the sources, which have no _core."""
    if any(name.startswith("_core") for name in os.listdir(os.path.join(ROOT, "hdmlp"))):
        pytest.skip("the checkout has a built _core (an in-place build)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", "import hdmlp"], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode != 0
    assert "ImportError: hdmlp is being imported from its source checkout" in proc.stderr, proc.stderr[-2000:]
    assert "pip install ." in proc.stderr and "another directory" in proc.stderr
    assert "circular import" not in proc.stderr


@pytest.mark.parametrize("missing,package", [("libconfig++", "libconfig++-dev"), ("MPI", "libopenmpi-dev")])
def test_cmake_names_the_debian_package_of_a_missing_library(tmp_path, missing, package):
    cmake = shutil.which("cmake", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if cmake is None:
        pytest.skip("cmake is not installed")
    env = dict(os.environ)
    args = [cmake, "-S", ROOT, "-B", str(tmp_path / "build"), "-DHDMLP_BUILD_PYTHON=OFF"]
    if missing == "MPI":
        args.append("-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON")
    else:  # pkg-config finds nothing
        env.update(PKG_CONFIG_LIBDIR=str(tmp_path / "none"), PKG_CONFIG_PATH="")
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode != 0
    message = " ".join(proc.stderr.split())
    assert f"apt-get install {package}" in message, proc.stderr[-2000:]
