"""Every Python file of the project compiles: a script no test imports (scripts/screenshots.py once carried a
SyntaxError for a day because nothing ran it) fails here, not on the first person who runs it."""
from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _sources() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "*.py"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an sdist): every .py below the root
        out = [str(p.relative_to(REPO)) for p in REPO.rglob("*.py") if ".venv" not in p.parts]
    return sorted(out)


SOURCES = _sources()


def test_the_project_has_sources() -> None:
    assert len(SOURCES) > 50 and "scripts/screenshots.py" in SOURCES


def test_every_source_compiles() -> None:
    bad = []
    for path in SOURCES:
        try:
            compile((REPO / path).read_text(encoding="utf-8"), path, "exec", dont_inherit=True)
        except (SyntaxError, ValueError, UnicodeDecodeError) as e:
            bad.append(f"{path}: {type(e).__name__}: {e}")
    assert not bad, "sources that do not compile:\n" + "\n".join(bad)
