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
    for component in ("mpi", "mpi_abis", "libjpeg-turbo", "opencv"):
        assert f"  {component}: {info[component]}" in out
    # MPI is loaded at run time: the MPI this process would load and why, and the ABIs built.
    assert "openmpi" in info["mpi_abis"].split(", ")
    if shutil.which("mpirun"):
        assert info["mpi"].startswith("not loaded yet; would load Open MPI v"), info["mpi"]
        assert "libmpi.so.40" in info["mpi"] and "chosen by" in info["mpi"], info["mpi"]
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


def test_cmake_lists_every_missing_library_once_for_each_package_manager(tmp_path):
    """A bare machine gets one message naming every missing library, for apt, dnf, Spack and
    conda-forge, with an all-at-once line for each, as the last thing CMake prints."""
    cmake = shutil.which("cmake", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if cmake is None:
        pytest.skip("cmake is not installed")
    env = dict(os.environ, PKG_CONFIG_LIBDIR=str(tmp_path / "none"), PKG_CONFIG_PATH="")
    proc = subprocess.run([cmake, "-S", ROOT, "-B", str(tmp_path / "build"), "-DHDMLP_BUILD_PYTHON=OFF",
                           "-DCMAKE_DISABLE_FIND_PACKAGE_OpenCV=ON", "-DCMAKE_DISABLE_FIND_PACKAGE_HDF5=ON",
                           "-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode != 0
    err = proc.stderr
    assert err.count("missing build dependencies") == 1, err[-3000:]
    assert "4 missing build dependencies" in err, err[-3000:]
    message = " ".join(err.split())
    for line in ("sudo apt-get install libconfig++-dev libopencv-dev libopenmpi-dev openmpi-bin libhdf5-dev",
                 "sudo dnf install libconfig-devel opencv-devel openmpi-devel hdf5-devel",
                 "spack install libconfig opencv+imgproc+imgcodecs openmpi hdf5",
                 "conda install -c conda-forge libconfig libopencv openmpi hdf5"):
        assert line in message, err[-3000:]
    # Nothing of CMake's own follows the message but its call stack and the closing line.
    tail = err[err.index("All at once:"):]
    assert "CMake Error" not in tail and "CMake Warning" not in tail, tail


def test_runtime_dependencies_are_ranges_that_admit_numpy_1_24_to_2():
    tomllib = pytest.importorskip("tomllib")
    from packaging.requirements import Requirement

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        deps = [Requirement(r) for r in tomllib.load(f)["project"]["dependencies"]]
    by_name = {r.name: r for r in deps}
    assert set(by_name) == {"numpy", "tqdm"}
    for r in deps:
        assert not any(s.operator in ("==", "===") for s in r.specifier), f"{r} pins an exact version"
    for ok in ("1.24.0", "1.26.4", "2.0.0", "2.3.5"):
        assert by_name["numpy"].specifier.contains(ok), ok
    for ok in ("4.62.0", "4.67.1", "4.70.1"):
        assert by_name["tqdm"].specifier.contains(ok), ok
