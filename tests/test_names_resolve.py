"""Code that no CPU test runs (tests/gpu/, benchmarks/, scripts/) still names only what the project has: every
``module.name`` it reads of a robocache or dashboard module it imports exists. A rename (issue 13 made private
names public) otherwise breaks it first on a GPU machine, as ``env._nvml()`` in tests/gpu/test_multigpu_gpu.py did."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("tests/gpu", "benchmarks", "scripts")
PACKAGES = ("robocache", "dashboard")  # the project's own modules


def _modules(tree: ast.Module) -> dict[str, str]:
    """Local name -> project module, for ``import robocache.x as y`` and ``from robocache.x import y`` (a
    submodule) anywhere in the file."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(PACKAGES) and a.asname:
                    out[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith(PACKAGES):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                try:
                    importlib.import_module(full)
                except ImportError:
                    continue  # a name of the module, not a submodule
                out[a.asname or a.name] = full
    return out


def missing_names(path: Path, root: Path = REPO) -> list[str]:
    """``file:line: module.name`` for each attribute read of an imported project module that it lacks."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    mods = _modules(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in mods:
            mod = importlib.import_module(mods[node.value.id])
            if isinstance(node.ctx, ast.Load) and not hasattr(mod, node.attr):
                out.append((node.lineno, f"{path.relative_to(root)}:{node.lineno}: {mods[node.value.id]}.{node.attr}"))
    return [x for _, x in sorted(out)]


def test_code_no_cpu_test_runs_names_what_exists() -> None:
    pytest.importorskip("msgspec")
    files = sorted(p for f in FOLDERS for p in (REPO / f).rglob("*.py"))
    assert any(p.name == "test_multigpu_gpu.py" for p in files)
    found = [x for p in files for x in missing_names(p)]
    assert not found, "names that robocache no longer has (renamed or removed):\n" + "\n".join(found)


def test_the_rule_sees_a_missing_name(tmp_path) -> None:
    bad = tmp_path / "probe.py"
    bad.write_text("from robocache.bench import env\nfrom robocache.bench.multigpu import launch\n"
                   "env.nvml()\nenv._nvml()\nlaunch.run_torchrun\nlaunch._launch\n")
    assert missing_names(bad, tmp_path) == ["probe.py:4: robocache.bench.env._nvml",
                                            "probe.py:6: robocache.bench.multigpu.launch._launch"]
