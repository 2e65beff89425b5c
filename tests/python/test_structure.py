"""scripts/structure.py: cpp/, hdmlp/ and benchmarks/ keep their layering (no include or import arrow
up, no circle), and the measuring tool itself finds arrows up, circles and long functions where they are."""
import importlib.util
import os
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def structure():
    spec = importlib.util.spec_from_file_location("hdmlp_structure", os.path.join(REPO, "scripts", "structure.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_cpp_has_no_arrow_up_and_no_include_circle(structure):
    report = structure.cpp_report()
    assert report.unplaced == [], "folders on no floor: add them to CPP_FLOORS in scripts/structure.py"
    ups = [f"{a.source} -> {a.target} ({a.example}; {a.why})" for a in report.up]
    assert ups == [], "C++ includes that point up the layering:\n" + "\n".join(ups)
    assert report.circles == [], f"headers that include each other: {report.circles}"
    assert report.folder_circles == [], f"folders that include each other: {report.folder_circles}"
    # The arrows the layering rests on are there (the graph is not empty because the scan missed files).
    arrows = {(a.source, a.target) for a in report.arrows}
    assert {("job", "cache"), ("cache", "transport"), ("sim", "plan"), ("binding", "job")} <= arrows


def test_python_has_no_arrow_up_and_no_import_circle(structure):
    report = structure.py_report()
    assert report.unplaced == [], "modules on no floor: add them to PY_FLOORS in scripts/structure.py"
    ups = [f"{a.source} -> {a.target} ({a.example}; {a.why})" for a in report.up]
    assert ups == [], "Python imports that point up the layering (hdmlp.torch is a front end, ...):\n" + "\n".join(ups)
    assert report.circles == [], f"modules that import each other (at load or in a function): {report.circles}"
    arrows = {(a.source, a.target) for a in report.arrows}
    # The scan sees imports in functions, re-exports and benchmarks' scenarios (not an empty graph).
    assert {("hdmlp.device.feeder", "hdmlp.device.host_tensors"), ("hdmlp.transforms", "hdmlp.python_chain"),
            ("hdmlp.torch", "hdmlp.job"), ("benchmarks.cluster.goals", "benchmarks.cluster.commands")} <= arrows


# Modules of hdmlp/ whose private reach (as scripts/structure.py roughly counts it) is not another module's.
_OWN_OR_PENDING = {
    "hdmlp/job.py": "a pass (_Pass) reads the Job of its own module",
    "hdmlp/simulate.py": "argparse._SubParsersAction, argparse's own",
}


def test_no_module_of_hdmlp_reads_another_modules_private_members(structure):
    """hdmlp.torch, the device stage and live_jobs use the Job's public pass API (open_pass, position, ...)."""
    reach = [p for p in structure.py_report().private_reach
             if p.startswith("hdmlp/") and p.split(":")[0] not in _OWN_OR_PENDING]
    assert reach == [], "private members read from another module:\n" + "\n".join(reach)


def test_no_function_in_the_simulator_above_120_lines(structure):
    long = [f for f in structure.cpp_report().long_functions if f[1].startswith("cpp/src/sim/")]
    assert long == []


def _write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_finds_arrows_up_and_circles(structure, tmp_path, monkeypatch):
    _write(tmp_path, "cpp/include/hdmlp/plan/order.h", '#include "hdmlp/transport/wire.h"\n')
    _write(tmp_path, "cpp/include/hdmlp/transport/wire.h", '#include "hdmlp/util/bytes.h"\n')
    _write(tmp_path, "cpp/include/hdmlp/util/bytes.h", '#include "hdmlp/util/more.h"\n')
    _write(tmp_path, "cpp/include/hdmlp/util/more.h", '#include "hdmlp/util/bytes.h"\n')
    _write(tmp_path, "cpp/include/hdmlp/env/env.h", '#include "hdmlp/job/job.h"\n')
    _write(tmp_path, "cpp/include/hdmlp/job/job.h", '#include "hdmlp/plan/order.h"\n')
    _write(tmp_path, "cpp/src/util/bytes.cc", '#include "hdmlp/cache/cache.h"\n')
    _write(tmp_path, "cpp/include/hdmlp/cache/cache.h", "")
    monkeypatch.setattr(structure, "ROOT", tmp_path)
    report = structure.cpp_report(with_binding=False)
    ups = {(a.source, a.target) for a in report.up}
    # plan -> transport breaks a rule on one floor; env -> job goes up floors; util -> cache both.
    assert ups == {("plan", "transport"), ("env", "job"), ("util", "cache")}
    assert report.circles == [["cpp/include/hdmlp/util/bytes.h", "cpp/include/hdmlp/util/more.h"]]
    assert report.folder_circles == []


def test_counts_function_lines(structure):
    code = textwrap.dedent("""\
        namespace hdmlp {
        // A comment with a brace {
        class Engine {
         public:
          Engine(int a) : a_(a), b_{a + 1} {
            Run();
          }
          int Get() const { return a_; }
         private:
          int a_;
          int b_;
        };

        template <class F>
        void ForEach(F&& f) {
          auto g = [&](int i) {
            f(i);
          };
          const char* s = "}";
          g(1);
        }

        const int kTable[] = {1, 2, 3};
        }  // namespace hdmlp
        """)
    functions = dict((name, lines) for lines, name in structure.cpp_functions(code))
    assert functions == {"Engine": 3, "Get": 1, "ForEach": 8}


def test_python_circles_and_floors(structure, tmp_path, monkeypatch):
    _write(tmp_path, "hdmlp/__init__.py", "from hdmlp.job import Job\n")
    _write(tmp_path, "hdmlp/job.py", "from hdmlp import device\n")
    _write(tmp_path, "hdmlp/device.py", "def f():\n    from hdmlp.torch import batches\n")
    _write(tmp_path, "hdmlp/torch.py", "from hdmlp.job import Job\nimport numpy\n")
    _write(tmp_path, "benchmarks/__init__.py", "")
    _write(tmp_path, "benchmarks/scenario.py", "import hdmlp.torch\n")
    monkeypatch.setattr(structure, "ROOT", tmp_path)
    report = structure.py_report()
    assert report.circles == [["hdmlp.device", "hdmlp.job", "hdmlp.torch"]]
    assert {(a.source, a.target) for a in report.up} == {("hdmlp.device", "hdmlp.torch")}
    assert ("benchmarks.scenario", "hdmlp.torch") in {(a.source, a.target) for a in report.arrows}
