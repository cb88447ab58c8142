"""The README's API example runs as written (on the CPU path) and prints what it says."""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_api_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python example"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(blocks[0], "README.md", "exec"), {})  # noqa: S102 - our own README
    lines = buf.getvalue().splitlines()
    assert lines[0] == "(256, 50, 270)"
    assert lines[1].startswith("(2, 32, 32, 32) int32 ")


def test_readme_quick_start_is_two_commands():
    qs = README.read_text().split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    cmds = [ln.split("#")[0].strip() for ln in qs.strip().splitlines() if ln.split("#")[0].strip()]
    assert cmds == ["make run", "make test"]
