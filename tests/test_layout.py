"""The harness's layout rules that a grep can hold (issue 13): no module imports another module's private name."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _private_imports(path: Path, root: Path = ROOT) -> list[str]:
    """``from M import _name`` in ``path`` where ``_name`` is not a module of the package ``M`` names."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = path.parent
        for _ in range(max(node.level - 1, 0)):
            base = base.parent
        pkg = (base if node.level else root).joinpath(*(node.module or "").split(".")) if node.module or node.level \
            else root
        for alias in node.names:
            name = alias.name
            if name.startswith("_") and not name.startswith("__") and not (
                    (pkg / f"{name}.py").exists() or (pkg / name / "__init__.py").exists()):
                out.append(f"{path.relative_to(root)}:{node.lineno}: from {'.' * node.level}{node.module or ''} "
                           f"import {name}")
    return out


def test_no_private_name_imported_across_modules() -> None:
    files = sorted((ROOT / "robocache").rglob("*.py")) + sorted((ROOT / "dashboard").rglob("*.py"))
    assert len(files) > 60
    found = [x for p in files for x in _private_imports(p)]
    assert not found, "a private name used by another module: make it public or move it where it is used:\n" + \
        "\n".join(found)


def test_the_rule_sees_a_private_name(tmp_path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "_mod.py").write_text("")
    bad = pkg / "user.py"
    bad.write_text("from . import _mod\nfrom .other import _helper\nfrom .other import public\n")
    assert _private_imports(bad, tmp_path) == ["pkg/user.py:2: from .other import _helper"]
