"""The README as a front door: its API example runs as written (on the CPU path) and prints what it says, its
two commands exist, its headline table is the generator's output over the committed records, and no figure or
"no record yet" claim stands outside that generated block (where it could go stale by hand)."""
from __future__ import annotations

import contextlib
import importlib.util
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def _headline():
    """scripts/readme_headline.py as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("readme_headline", ROOT / "scripts" / "readme_headline.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _prose(text: str) -> str:
    """README without its fenced code blocks and without the generated headline block."""
    hl = _headline()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    head, rest = text.split(hl.BEGIN, 1)
    return head + rest.split(hl.END, 1)[1]


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
    targets = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), flags=re.M))
    assert {"run", "test", "test-fast", "lint"} <= targets
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"\bmake test(?![\w-])", ci), "CI no longer runs the README's test command"


def test_readme_is_a_front_door():
    text = README.read_text()
    assert len(text.splitlines()) <= 100
    first_screen = "\n".join(text.splitlines()[:50])  # the two commands and the headline without scrolling
    assert "make run" in first_screen and "make test" in first_screen and _headline().BEGIN in first_screen
    assert "docs/dashboard-overview.png" in text
    for link in re.findall(r"\]\(((?:docs/)[^)#]+)", text):
        assert (ROOT / link).exists(), link


def test_readme_headline_is_the_generators_output_over_results():
    hl = _headline()
    assert hl.block(README.read_text()) == hl.table(ROOT / "results"), (
        "README's headline table is not what the committed records give: python scripts/readme_headline.py "
        "--write README.md")


def test_readme_has_no_hand_kept_figure_or_absence_claim():
    prose = _prose(README.read_text())
    figures = re.findall(r"\b\d+(?:\.\d+)?\s?(?:x|%|us|ms|s|GB/s|GB|MB|minutes?|seconds?)(?![\w/])", prose)
    assert not figures, f"a measured figure outside the generated headline block: {figures}"
    claims = re.findall(r"(?i)\b(?:no (?:GPU )?records?|not (?:yet )?measured|no [\w-]+ record|yet)\b", prose)
    assert not claims, f"a claim about which records exist outside the generated block: {claims}"


def test_headline_generator(tmp_path):
    """The generator writes only between its markers, names every machine with records, and refuses a README
    without the markers (exit 2, one line) or records without a torch.compile comparison."""
    hl = _headline()
    text = f"intro\n{hl.BEGIN}\nold table\n{hl.END}\nafter\n"
    new = hl.replace_block(text, "| new |")
    assert new == f"intro\n{hl.BEGIN}\n| new |\n{hl.END}\nafter\n" and hl.block(new) == "| new |"
    with pytest.raises(ValueError, match="markers"):
        hl.replace_block("no markers", "x")
    table = hl.table(ROOT / "results")
    on_file = table.rsplit("\n", 1)[1]
    for machine in ("nvidia-h100-x1", "nvidia-h200"):
        assert f"`{machine}`" in table.splitlines()[0] and f"`{machine}`" in on_file
    readme = tmp_path / "README.md"
    readme.write_text("nothing to replace\n")
    assert hl.main(["--write", str(readme)]) == 2 and readme.read_text() == "nothing to replace\n"
    (tmp_path / "empty").mkdir()
    assert hl.main(["--results", str(tmp_path / "empty")]) == 2
