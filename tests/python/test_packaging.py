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


# -- extras: ranges that keep what the user's environment has -------------------------

# The extras a user installs (`pip install 'hdmlp[torch]'`); test, bench and wheel are this project's
# own environments, which constraints/dev.txt pins.
USER_EXTRAS = ("torch", "jax", "tensorflow", "nvjpeg")


def _extras():
    tomllib = pytest.importorskip("tomllib")
    from packaging.requirements import Requirement

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    return {name: [Requirement(r) for r in reqs] for name, reqs in extras.items()}


def test_no_extra_pins_a_release_and_user_extras_run_to_the_next_major():
    extras = _extras()
    assert set(USER_EXTRAS) <= set(extras)
    for name, reqs in extras.items():
        for r in reqs:  # every extra is in the published metadata: none pins
            assert not any(s.operator in ("==", "===", "~=") for s in r.specifier), f"[{name}] pins {r}"
    for name in USER_EXTRAS:
        for r in extras[name]:
            lower = [s for s in r.specifier if s.operator == ">="]
            upper = [s for s in r.specifier if s.operator == "<"]
            assert len(lower) == 1 and len(upper) == 1, f"[{name}] {r}: give the oldest release tested and the next major"
            assert not r.extras, f"[{name}] {r}: an extra such as [cpu] picks a build for the user"
            major = int(lower[0].version.split(".")[0])
            assert upper[0].version in (str(major + 1), f"{major + 1}.0"), f"[{name}] {r}: up to the next major"
    assert [str(r) for r in extras["torch"]] == ["torch<3,>=2.11"]
    assert {r.name for r in extras["tensorflow"]} == {"tensorflow"}  # not tensorflow-cpu: a GPU build satisfies it


def test_the_built_metadata_has_no_pin_in_any_extra():
    """What the installed wheel says (the metadata scikit-build-core wrote), not only pyproject.toml."""
    import importlib.metadata

    from packaging.requirements import Requirement

    requires = [Requirement(r) for r in importlib.metadata.requires("hdmlp") or []]
    torch_reqs = [r for r in requires if r.marker is not None and r.marker.evaluate({"extra": "torch"})
                  and r.name == "torch"]
    assert torch_reqs, requires
    for r in requires:
        assert not any(s.operator in ("==", "===") for s in r.specifier), f"the installed hdmlp's metadata pins {r}"


def test_the_constraints_pin_what_the_test_extra_installs_within_its_ranges():
    extras = _extras()
    pins = {}
    with open(os.path.join(ROOT, "constraints", "dev.txt")) as f:
        for line in f:
            line = line.split("#")[0].strip()
            if line:
                name, version = line.split("==")
                pins[name.lower()] = version
    for name in ("test", "wheel", "bench"):
        for r in extras[name]:
            if r.specifier:  # a range in the extra, one release in the constraints, inside the range
                assert r.name.lower() in pins, f"constraints/dev.txt does not pin {r.name} of the {name} extra"
                assert r.specifier.contains(pins[r.name.lower()], prereleases=True), (r, pins[r.name.lower()])
    assert pins["torch"] == "2.14.1" and pins["torchvision"] == "0.29.1"
    with open(os.path.join(ROOT, "scripts", "dev.sh")) as f:
        dev = f.read()
    assert 'install -c "$CONSTRAINTS" "${extra[@]}"' in dev and "CONSTRAINTS=constraints/dev.txt" in dev


def _wheel(folder, name, version, files=None, metadata_extra=""):
    """A minimal pure-Python wheel (no download needed to install it)."""
    import base64
    import hashlib
    import zipfile

    dist = f"{name.replace('-', '_')}-{version}"
    path = os.path.join(folder, f"{dist}-py3-none-any.whl")
    files = dict(files or {})
    files[f"{dist}.dist-info/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{metadata_extra}"
    files[f"{dist}.dist-info/WHEEL"] = "Wheel-Version: 1.0\nGenerator: hdmlp-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for rel, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{rel},sha256={digest},{len(text.encode())}")
    files[f"{dist}.dist-info/RECORD"] = "\n".join(record + [f"{dist}.dist-info/RECORD,,"]) + "\n"
    with zipfile.ZipFile(path, "w") as z:
        for rel, text in files.items():
            z.writestr(rel, text)
    return path


def test_installing_hdmlp_with_the_torch_extra_keeps_the_users_torch(tmp_path):
    """A node's own torch (a CUDA build, 2.11.0+cu130) stays when `pip install WHEEL[torch]` runs beside it.

    Stand-ins keep it offline and quick: a wheel with the installed hdmlp's real metadata (its
    Requires-Dist lines, as scikit-build-core wrote them from pyproject.toml), and small torch,
    numpy and tqdm distributions in a local folder that also offers the release the project's
    own environment pins (torch 2.14.1), which an exact pin would install over the user's."""
    import importlib.metadata
    import json

    links = tmp_path / "links"
    links.mkdir()
    requires = importlib.metadata.requires("hdmlp") or []
    version = importlib.metadata.version("hdmlp")
    meta = "Requires-Python: >=3.11\nProvides-Extra: torch\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    hdmlp_wheel = _wheel(str(tmp_path), "hdmlp", version, {"hdmlp_stand_in/__init__.py": ""}, meta)
    for name, ver in (("torch", "2.11.0+cu130"), ("torch", "2.14.1"), ("numpy", "2.0.0"), ("tqdm", "4.70.1")):
        _wheel(str(links), name, ver, {f"{name}/__init__.py": f"__version__ = {ver!r}\n"})
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=60)
    py = str(env_dir / "bin" / "python")
    # The machine's pip configuration (its indexes, find-links, constraints) stays out of it.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    pip = [sys.executable, "-m", "pip", "--python", py]
    offline = ["--no-index", "--find-links", str(links)]
    subprocess.run(pip + ["install", "-q", *offline, "torch==2.11.0+cu130"], check=True, env=env, timeout=120,
                   capture_output=True)
    proc = subprocess.run(pip + ["install", *offline, hdmlp_wheel + "[torch]"], env=env, timeout=120,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    listing = subprocess.run(pip + ["list", "--format", "json"], env=env, timeout=60, capture_output=True, text=True,
                             check=True)
    installed = {d["name"]: d["version"] for d in json.loads(listing.stdout)}
    assert installed.get("torch") == "2.11.0+cu130", installed
    assert installed.get("hdmlp") == version, installed
