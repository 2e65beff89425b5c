#!/usr/bin/env python3
"""hdmlp's structure, measured: the goals of issue 37 as numbers.

  .venv/bin/python scripts/structure.py                 a summary of everything below
  .venv/bin/python scripts/structure.py --arrows        ... plus every arrow between C++ folders and Python modules
  .venv/bin/python scripts/structure.py --check-cpp     exit 1 if cpp/ has an arrow up or an include circle
  .venv/bin/python scripts/structure.py --root DIR      measure another checkout (e.g. main, for a before/after)

C++ (cpp/, and the binding in python/*.cc): the include graph between the
folders of cpp/src (cache, config, ...; errors.h and build_info.h are folders
of their own), each folder on a floor (CPP_FLOORS). An arrow "up" goes to a
higher floor, or breaks one of the developers' guide's rules (CPP_NEVER: util
at the bottom; env, config and errors know no job; neither plan nor
transforms reaches cache or transport). A circle is a set of headers that
include each other (or of folders that do): networkx's strongly connected
components. Function sizes come from lizard's C++ reader (a body counts from
the line its declaration starts on to its closing brace).

Python (hdmlp/ and benchmarks/): the import graph from `ast`, imports inside
functions included (they close circles at run time too), `if TYPE_CHECKING:`
imports left out. Each module sits on a floor (PY_FLOORS, by module name; an
unlisted benchmarks module is a scenario, an unlisted hdmlp one is reported);
an arrow up goes to a higher floor. "Private reach" counts `from m import _x`
and `obj._x` where obj is neither self nor cls: a rough count of one module
reading another's private members.

The floors are this script's statement of the layering in docs/architecture.md
and the developers' guide: change them here when a folder or module moves.
tests/python/test_structure.py asserts no arrow up and no circle in cpp/.
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import lizard
import networkx

ROOT = Path(__file__).resolve().parent.parent

# ---- layering ---------------------------------------------------------------------------

# C++ folders, bottom (0) to top. Arrows may point down or sideways (same floor),
# except those in CPP_NEVER.
CPP_FLOORS = {
    "util": 0,
    "errors": 1,
    "env": 2, "config": 2,
    "plan": 3, "source": 3, "transforms": 3, "transport": 3, "tools": 3, "device": 3,
    "cache": 4,
    "build_info": 4,  # reports what the floors below it chose at run time (the MPI, the SIMD kernels): only the binding asks
    "job": 5, "sim": 5,
    "staging": 5,  # the job's hand-off between its workers and its consumer: no cache or transport knows it
    "binding": 6,  # python/*.cc
}
# The guide's rules that floors alone do not say ("*": any other folder).
CPP_NEVER = {
    ("util", "*"),
    ("env", "job"), ("config", "job"), ("errors", "job"),
    ("plan", "cache"), ("plan", "transport"),
    ("transforms", "cache"), ("transforms", "transport"),
}

# Python modules, bottom (0) to top. hdmlp: the pieces with no hdmlp import,
# the transform chain, the device stage, the job, the front ends.
PY_FLOORS = {
    "hdmlp._core": 0, "hdmlp.batches": 0, "hdmlp.datasets": 0, "hdmlp.launcher": 0,
    "hdmlp.live_jobs": 0, "hdmlp.main_guard": 0, "hdmlp.pack": 0,
    "hdmlp.pinned_memory": 0, "hdmlp.plan": 0, "hdmlp.python_worker": 0, "hdmlp.state": 0,
    "hdmlp.cpu_budget": 0, "hdmlp.openmp_wait": 0, "hdmlp.readiness": 0, "hdmlp.mpi": 0, "hdmlp.version": 0,
    "hdmlp.transform_base": 0, "hdmlp.argument_checks": 0,
    "hdmlp.transforms": 1, "hdmlp.python_chain": 1, "hdmlp.python_transforms": 1,
    # The device stage (hdmlp/device/), its modules side by side; the old names alias two of them.
    "hdmlp.device": 2, "hdmlp.device.hand_off": 2, "hdmlp.device.streams": 2, "hdmlp.device.cuda": 2,
    "hdmlp.device.feeder": 2, "hdmlp.device.host_tensors": 2, "hdmlp.device.decode": 2, "hdmlp.device.resize": 2,
    "hdmlp.device.nvjpeg": 2, "hdmlp.device_decode": 2, "hdmlp.nvjpeg": 2,
    "hdmlp.job_arguments": 3, "hdmlp.chain_plan": 3,  # the job's checked arguments and its chain's plan
    "hdmlp.job": 4,
    "hdmlp": 4, "hdmlp.__main__": 4, "hdmlp.cli": 4, "hdmlp.numpy": 4, "hdmlp.simulate": 4,
    "hdmlp.torch": 4, "hdmlp.dlio": 4,
    # benchmarks: helpers, the emulation lab (benchmarks/lab/, PY_LAB_FLOOR), scenarios (the default), entry points.
    "benchmarks._path": 0, "benchmarks.runner": 0,
    "benchmarks.lab.system_tools": 0, "benchmarks.lab.service": 0, "benchmarks.lab.machine": 0,
    "benchmarks": 3, "benchmarks.__main__": 3, "benchmarks.harness": 3,
    "benchmarks.cluster": 3, "benchmarks.cluster.cli": 3,
}
PY_LAB_FLOOR = 1  # an unlisted module of benchmarks/lab/: the emulated services (netfs, the PFS, the cluster)
PY_SCENARIO_FLOOR = 2  # an unlisted benchmarks module
PY_PACKAGES = ("hdmlp", "benchmarks")

# ---- graphs -------------------------------------------------------------------------------


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node, or a node that reaches itself."""
    g = networkx.DiGraph((source, target) for source, targets in graph.items() for target in targets)
    return sorted(sorted(c) for c in networkx.strongly_connected_components(g)
                  if len(c) > 1 or g.has_edge(next(iter(c)), next(iter(c))))


@dataclass
class Arrow:
    source: str
    target: str
    count: int = 0
    example: str = ""  # one file and what it includes or imports
    up: bool = False
    why: str = ""


@dataclass
class Report:
    arrows: list[Arrow] = field(default_factory=list)
    circles: list[list[str]] = field(default_factory=list)       # file or module level
    folder_circles: list[list[str]] = field(default_factory=list)
    long_functions: list[tuple[int, str, str]] = field(default_factory=list)  # (lines, file, name)
    unplaced: list[str] = field(default_factory=list)
    private_reach: list[str] = field(default_factory=list)

    @property
    def up(self) -> list[Arrow]:
        return [a for a in self.arrows if a.up]


# ---- C++ ------------------------------------------------------------------------------------

_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def cpp_folder(path: Path) -> str:
    """The folder a file of cpp/include/hdmlp, cpp/src or python/ belongs to."""
    parts = path.relative_to(ROOT).parts
    if parts[0] == "python":
        return "binding"
    rest = parts[3:] if parts[:3] == ("cpp", "include", "hdmlp") else parts[2:]
    return rest[0] if len(rest) > 1 else Path(rest[0]).stem


def cpp_files(with_binding: bool = True) -> list[Path]:
    files = [p for d in ("cpp/include", "cpp/src") for p in (ROOT / d).rglob("*") if p.suffix in (".h", ".cc")]
    if with_binding:
        files += sorted((ROOT / "python").glob("*.cc"))
    return sorted(files)


def cpp_includes(path: Path, text: str) -> list[Path]:
    out = []
    for name in _INCLUDE.findall(text):
        for base in (ROOT / "cpp" / "include", path.parent):
            target = base / name
            if target.is_file():
                out.append(target.resolve())
                break
    return out


def cpp_report(max_lines: int = 120, with_binding: bool = True, function_roots: tuple[str, ...] = ("cpp/src",)
               ) -> Report:
    report = Report()
    file_graph: dict[str, set[str]] = defaultdict(set)
    arrows: dict[tuple[str, str], Arrow] = {}
    for path in cpp_files(with_binding):
        text = path.read_text(errors="replace")
        rel = str(path.relative_to(ROOT))
        source = cpp_folder(path)
        for target_path in cpp_includes(path, text):
            target_rel = str(target_path.relative_to(ROOT))
            file_graph[rel].add(target_rel)
            target = cpp_folder(target_path)
            if target == source:
                continue
            arrow = arrows.setdefault((source, target), Arrow(source, target, example=f"{rel} -> {target_rel}"))
            arrow.count += 1
        if any(rel.startswith(r + "/") for r in function_roots):
            for lines, name in cpp_functions(text):
                if lines > max_lines:
                    report.long_functions.append((lines, rel, name))
    for arrow in arrows.values():
        for end in (arrow.source, arrow.target):
            if end not in CPP_FLOORS and end not in report.unplaced:
                report.unplaced.append(end)
        if (arrow.source, arrow.target) in CPP_NEVER or (arrow.source, "*") in CPP_NEVER:
            arrow.up, arrow.why = True, "the guide's layering"
        elif CPP_FLOORS.get(arrow.target, 99) > CPP_FLOORS.get(arrow.source, 99):
            arrow.up, arrow.why = True, f"floor {CPP_FLOORS.get(arrow.source)} -> {CPP_FLOORS.get(arrow.target)}"
    report.arrows = sorted(arrows.values(), key=lambda a: (a.source, a.target))
    # Headers only: a .cc is included by nothing, so it closes no circle.
    report.circles = circles(file_graph)
    folder_graph: dict[str, set[str]] = defaultdict(set)
    for a in report.arrows:
        folder_graph[a.source].add(a.target)
    report.folder_circles = circles(folder_graph)
    report.long_functions.sort(reverse=True)
    return report


def cpp_functions(text: str) -> list[tuple[int, str]]:
    """(lines, name) of every function body outside another function (lizard's C++ reader; lambdas count
    with theirs); a body counts from the line its declaration starts on, its template line included."""
    lines = text.splitlines()
    found = []
    for f in lizard.analyze_file.analyze_source_code("code.cc", text).function_list:
        start = f.start_line
        while start > 1 and lines[start - 2].lstrip().startswith("template"):
            start -= 1
        parts = f.name.split("::")  # the name as the declaration writes it (Class::Method out of its class)
        name = next(n for n in ("::".join(parts[k:]) for k in range(len(parts))) if n in lines[f.start_line - 1]
                    or n == f.unqualified_name)
        found.append((f.end_line - start + 1, name))
    return found


# ---- Python ---------------------------------------------------------------------------------


def py_modules() -> dict[str, Path]:
    modules = {}
    for package in PY_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    modules.setdefault("hdmlp._core", ROOT / "hdmlp")  # the extension module
    return modules


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """(node, inside a function) for every import not under `if TYPE_CHECKING:`."""
    def walk(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for sub in child.orelse:
                    yield from walk(ast.Module(body=[sub], type_ignores=[]), in_function)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, in_function
            yield from walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                         ast.Lambda)))
    yield from walk(tree, False)


def py_report(max_lines: int = 80, function_roots: tuple[str, ...] = ("hdmlp",)) -> Report:
    report = Report()
    modules = py_modules()
    graph: dict[str, set[str]] = defaultdict(set)
    arrows: dict[tuple[str, str], Arrow] = {}
    for name, path in modules.items():
        if path.is_dir():
            continue
        rel = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text(), filename=rel)
        is_package = path.name == "__init__.py"
        package = name if is_package else name.rpartition(".")[0]
        aliases: dict[str, str] = {}
        for node, lazy in _imports(tree):
            targets = []
            if isinstance(node, ast.Import):
                for alias in node.names:
                    resolved = _resolve(alias.name, modules, name)
                    if resolved:
                        targets.append(resolved)
                        aliases[alias.asname or alias.name.split(".")[0]] = resolved
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[:len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in node.names:
                    full = f"{base}.{alias.name}" if base else alias.name
                    if full in modules:
                        targets.append(full)
                        aliases[alias.asname or alias.name] = full
                    else:
                        resolved = _resolve(base, modules, name)
                        if resolved:
                            targets.append(resolved)
                            if alias.name.startswith("_") and not alias.name.startswith("__"):
                                report.private_reach.append(f"{rel}:{node.lineno} imports {resolved}.{alias.name}")
            for target in targets:
                if target == name:
                    continue
                graph[name].add(target)
                arrow = arrows.setdefault((name, target), Arrow(name, target, example=f"{rel}:{node.lineno}"
                                                                + (" (in a function)" if lazy else "")))
                arrow.count += 1
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                    and not (isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
                             and node.value.func.id == "super")):
                value = node.value
                if isinstance(value, ast.Name) and value.id in aliases and aliases[value.id] == "hdmlp._core":
                    continue
                if isinstance(value, ast.Name) and value.id in ("sys", "os", "torch", "np", "numpy"):
                    continue  # other projects' documented underscores (sys._getframe, os._exit, ...)
                report.private_reach.append(f"{rel}:{node.lineno} reads .{node.attr}")
        if any(rel.startswith(r + "/") for r in function_roots):
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > max_lines:
                        report.long_functions.append((lines, rel, node.name))
    for arrow in arrows.values():
        source_floor, target_floor = _py_floor(arrow.source, report), _py_floor(arrow.target, report)
        if target_floor > source_floor:
            arrow.up, arrow.why = True, f"floor {source_floor[1]} -> {target_floor[1]}"
    report.arrows = sorted(arrows.values(), key=lambda a: (a.source, a.target))
    report.circles = circles(graph)
    report.long_functions.sort(reverse=True)
    return report


def _resolve(dotted: str, modules: dict[str, Path], importer: str) -> str | None:
    parts = dotted.split(".") if dotted else []
    for k in range(len(parts), 0, -1):
        if ".".join(parts[:k]) in modules:
            return ".".join(parts[:k])
    # A bare `import system_tools` of a benchmarks script run with its folder on sys.path
    # (Python has no implicit relative imports: hdmlp's `import numpy` is numpy's).
    package = importer.rpartition(".")[0] if importer.startswith("benchmarks.") else ""
    while package and parts:
        candidate = f"{package}.{parts[0]}"
        if candidate in modules:
            return candidate
        package = package.rpartition(".")[0]
    return None


def _py_floor(module: str, report: Report) -> tuple[int, int]:
    """(package, floor): benchmarks/ stands on the whole of hdmlp/."""
    package = PY_PACKAGES.index(module.split(".")[0])
    if module in PY_FLOORS:
        return package, PY_FLOORS[module]
    if module.startswith("benchmarks."):
        return package, PY_LAB_FLOOR if module.split(".")[1] == "lab" else PY_SCENARIO_FLOOR
    if module not in report.unplaced:
        report.unplaced.append(module)
    return package, max(PY_FLOORS.values())


# ---- the summary ----------------------------------------------------------------------------


def _print_report(title: str, report: Report, arrows: bool, circle_word: str, max_lines: int, where: str) -> None:
    print(f"{title}: {len(report.arrows)} arrows, {len(report.up)} up; {len(report.circles)} {circle_word}"
          + (f", {len(report.folder_circles)} between folders" if report.folder_circles else ""))
    for a in report.arrows if arrows else report.up:
        mark = "UP " if a.up else "   "
        print(f"  {mark}{a.source} -> {a.target} ({a.count}; e.g. {a.example})" + (f"  [{a.why}]" if a.up else ""))
    for c in report.circles + report.folder_circles:
        print(f"  circle: {' <-> '.join(c)}")
    if report.unplaced:
        print(f"  not on a floor (place them in scripts/structure.py): {', '.join(sorted(report.unplaced))}")
    print(f"  functions above {max_lines} lines in {where}: {len(report.long_functions)}")
    for lines, rel, name in report.long_functions:
        print(f"    {lines:5d}  {rel}  {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arrows", action="store_true", help="list every arrow, not only those up")
    parser.add_argument("--cpp-lines", type=int, default=120, help="C++ function size goal (cpp/src)")
    parser.add_argument("--py-lines", type=int, default=80, help="Python and binding function size goal")
    parser.add_argument("--check-cpp", action="store_true", help="exit 1 on a C++ arrow up or include circle")
    parser.add_argument("--root", type=Path, help="measure another checkout (default: this one)")
    args = parser.parse_args(argv)
    if args.root:
        global ROOT
        ROOT = args.root.resolve()

    cpp = cpp_report(args.cpp_lines)
    _print_report("C++ folders (cpp/, binding python/*.cc)", cpp, args.arrows, "include circles", args.cpp_lines,
                  "cpp/src")
    binding = [(n, r, f) for r in sorted((ROOT / "python").glob("*.cc"))
               for n, f in cpp_functions(r.read_text()) if n > args.py_lines]
    print(f"  functions above {args.py_lines} lines in the binding (python/*.cc): {len(binding)}")
    for lines, path, name in sorted(binding, reverse=True):
        print(f"    {lines:5d}  {path.relative_to(ROOT)}  {name}")
    py = py_report(args.py_lines)
    for package in PY_PACKAGES:
        part = Report(arrows=[a for a in py.arrows if a.source.split(".")[0] == package],
                      circles=[c for c in py.circles if c[0].split(".")[0] == package],
                      long_functions=[f for f in py.long_functions if f[1].startswith(package + "/")],
                      unplaced=[m for m in py.unplaced if m.split(".")[0] == package])
        _print_report(f"Python {package}/", part, args.arrows, "import circles", args.py_lines, f"{package}/")
    private = Counter(p.split(":")[0] for p in py.private_reach)
    print(f"private reach (rough: `obj._x` with obj not self/cls, `from m import _x`): {len(py.private_reach)}"
          + "".join(f"\n    {n:4d}  {f}" for f, n in private.most_common()))
    if args.check_cpp and (cpp.up or cpp.circles or cpp.folder_circles or cpp.unplaced):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
