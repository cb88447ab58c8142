"""The import graph of robocache/ and dashboard/ (issue 28): no cycle, and no arrow against the layers.

Every ``import`` counts, those inside functions too (a lazy import breaks nothing at import time, but two modules
that each need the other are one module in two files: ``pipelines/ddp.py`` and ``pipelines/run.py`` were). The
layers: the views render records and never import a suite's code (``pipelines/``) or the CLI; the pipelines suite
is run by the CLI, and no other module of the harness imports it. Across the packages the layers run library
(``robocache`` outside ``bench``) -> harness (``robocache.bench``) -> dashboard, each importing only those before it,
and within the dashboard no helper imports a page (``dashboard/views/``, ``app.py``) and no page another. Read from
the source (``ast``): nothing is imported, no torch needed.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = "robocache.bench"
PIPELINES = f"{BENCH}.pipelines"


def modules(root: Path, package: str = "robocache") -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's ``__init__``), for every module under ``root/package``."""
    out = {}
    for f in sorted((root / package).rglob("*.py")):
        parts = list(f.relative_to(root).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (f, is_pkg)
    return out


def import_graph(root: Path, package: str | tuple[str, ...] = "robocache") -> dict[str, set[str]]:
    """Module -> the modules of ``package`` (one, or several) it imports anywhere in its source (``from X import
    y`` counts as ``X.y`` when that is a module, else ``X``)."""
    mods: dict[str, tuple[Path, bool]] = {}
    for pkg in (package,) if isinstance(package, str) else package:
        mods.update(modules(root, pkg))
    graph: dict[str, set[str]] = {}
    for name, (path, is_pkg) in mods.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    here = name.split(".") if is_pkg else name.split(".")[:-1]
                    here = here[:len(here) - (node.level - 1)]
                    base = ".".join(here + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names)
        graph[name] = {m for m in found if m in mods and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


@functools.cache
def _graph() -> dict[str, set[str]]:
    return import_graph(ROOT)


@functools.cache
def _whole() -> dict[str, set[str]]:
    """The library, the harness and the dashboard together."""
    return import_graph(ROOT, ("robocache", "dashboard"))


def layer(module: str) -> int:
    """0 the library, 1 the harness, 2 the dashboard's helpers, 3 its pages: a module imports only lower layers
    (or its own, the pages excepted)."""
    if _in(module, "dashboard.views") or module == "dashboard.app":
        return 3
    if _in(module, "dashboard"):
        return 2
    return 1 if _in(module, BENCH) else 0


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_no_import_cycle() -> None:
    graph = _graph()
    assert len([m for m in graph if _in(m, BENCH)]) > 50
    found = cycles(graph)
    assert not found, "modules that import each other (move what both need into a third):\n" + \
        "\n".join(" <-> ".join(c) for c in found)


def test_no_import_cycle_across_library_harness_and_dashboard() -> None:
    graph = _whole()
    assert len([m for m in graph if _in(m, "dashboard")]) > 20
    found = cycles(graph)
    assert not found, "modules that import each other:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_no_upward_import_between_library_harness_dashboard_and_pages() -> None:
    graph = _whole()
    bad = [f"{m} imports {d}" for m, deps in sorted(graph.items()) for d in sorted(deps)
           if layer(d) > layer(m) or layer(d) == layer(m) == 3]
    assert not bad, "an arrow against the layers (library -> harness -> dashboard -> pages):\n" + "\n".join(bad)


def test_views_import_no_suite_code_and_no_cli() -> None:
    graph = _graph()
    bad = [f"{m} imports {d}" for m, deps in sorted(graph.items()) if _in(m, f"{BENCH}.views")
           for d in sorted(deps) if _in(d, PIPELINES) or d == f"{BENCH}.cli"]
    assert not bad, "the views render records; what they need of a suite lives in specs, schema or gate:\n" + \
        "\n".join(bad)


def test_only_the_cli_imports_the_pipelines_suite() -> None:
    graph = _graph()
    bad = [f"{m} imports {d}" for m, deps in sorted(graph.items()) if not _in(m, PIPELINES) and m != f"{BENCH}.cli"
           for d in sorted(deps) if _in(d, PIPELINES)]
    assert not bad, "the pipelines suite sits on the harness (its grid is declared in specs):\n" + "\n".join(bad)


def test_the_rules_see_a_cycle_and_a_lazy_import(tmp_path: Path) -> None:
    pkg = tmp_path / "robocache"
    (pkg / "sub").mkdir(parents=True)
    for f in ("__init__.py", "sub/__init__.py", "c.py"):
        (pkg / f).write_text("")
    (pkg / "a.py").write_text("def f():\n    from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("from .. import a\nimport robocache.c\n")
    graph = import_graph(tmp_path)
    assert graph["robocache.a"] == {"robocache.sub.b"}
    assert graph["robocache.sub.b"] == {"robocache.a", "robocache.c"}
    assert cycles(graph) == [["robocache.a", "robocache.sub.b"]]
    # across packages: an upward arrow is seen (the library importing the dashboard), a page importing a page too
    (tmp_path / "dashboard" / "views").mkdir(parents=True)
    for f in ("dashboard/__init__.py", "dashboard/views/__init__.py", "dashboard/views/p2.py"):
        (tmp_path / f).write_text("")
    (tmp_path / "dashboard" / "views" / "p1.py").write_text("from dashboard.views import p2\nimport robocache.c\n")
    (pkg / "c.py").write_text("def f():\n    import dashboard.views.p1\n")
    graph = import_graph(tmp_path, ("robocache", "dashboard"))
    assert graph["dashboard.views.p1"] == {"dashboard.views.p2", "robocache.c"}
    assert graph["robocache.c"] == {"dashboard.views.p1"}
    assert [layer(m) for m in ("robocache.c", "robocache.bench.x", "dashboard.data", "dashboard.views.p1")] == \
        [0, 1, 2, 3]
