"""What the CLI prints (issue 24 item 10, issue 27 "Hardening"): exact options, clean terminal text, escaped markdown.

- every argparse parser in the project refuses prefixes of long options (``run --suit quick`` was taken as ``--suite``);
- terminal output has no invisible characters (``compare`` put a U+2060 after ``@``: a copied provider name failed
  in ``--providers``) and no markdown escapes (``torch\\_compile``);
- record text (machine, case, provider, run names such as ``<script>`` or ``[x](javascript:...)``) never becomes
  markup in the markdown ``show``, ``report``, ``compare``, ``check`` and the nightly issues write: escaped, or in a
  code span, where markdown shows it literally;
- ``compare`` of runs of two machines says why nothing compares, and what to do, with exit 2.

Records here are synthetic fixtures (tests/test_store.py's factory).
"""
from __future__ import annotations

import ast
import importlib.util
import io
import re
import sys
import unicodedata
from pathlib import Path

import pytest
from test_store import make_env, make_record

from robocache.bench import cli, store
from robocache.bench import regressions as regress

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = "<script>alert(1)</script>"
LINK = "[x](javascript:alert(1))"
HOSTILE = (SCRIPT, LINK)


def _main(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    try:
        rc = cli.main(argv)
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


class _Terminal(io.StringIO):
    """stdout as a terminal: the CLI prints plain text to it."""

    def isatty(self) -> bool:
        return True


def _on_terminal(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    term = _Terminal()
    monkeypatch.setattr(sys, "stdout", term)
    rc = cli.main(argv)
    return rc, term.getvalue()


# --- every parser refuses prefixes ----------------------------------------------------------------------

def _parsers(p) -> list:
    import argparse

    out = [p]
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub in dict.fromkeys(a.choices.values()):
                out += _parsers(sub)
    return out


def test_every_cli_parser_refuses_abbreviations(capsys) -> None:
    from robocache.bench.pipelines import __main__ as pipelines

    parsers = _parsers(cli._parser()) + _parsers(pipelines.parser())
    assert len(parsers) >= 12  # robocache-bench and its 6 commands, the pipelines CLI and its 4
    assert [p.prog for p in parsers if p.allow_abbrev] == []
    rc, _, err = _main(["run", "--suit", "quick", "--device", "cpu"], capsys)
    assert rc == 2 and "unrecognized arguments: --suit" in err
    rc, _, err = _main(["compare", "a", "b", "--fail-on-slow"], capsys)
    assert rc == 2 and "--fail-on-slow" in err


def test_every_argparse_parser_in_the_repository_says_allow_abbrev_false() -> None:
    """A static walk: each ``ArgumentParser(...)`` and ``.add_parser(...)`` outside robocache-bench's own (whose
    parser class sets it, walked above) passes ``allow_abbrev=False``."""
    missing = []
    files = [p for d in ("robocache", "scripts", "benchmarks", "dashboard", "tests") for p in (ROOT / d).rglob("*.py")]
    for path in files:
        if path == ROOT / "robocache" / "bench" / "cli.py" or path == Path(__file__):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name not in ("ArgumentParser", "add_parser"):
                continue
            ok = any(k.arg == "allow_abbrev" and isinstance(k.value, ast.Constant) and k.value.value is False
                     for k in node.keywords)
            if not ok:
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert missing == []


# --- terminal text ----------------------------------------------------------------------------------------

def _rec(run: str, t: float, provider: str = "torch_compile@max-autotune", machine: str = "m",
         case: str = "resample/B32-S100-T50-D32", night: int = 0) -> dict:
    r = make_record(0, run_id=run)
    r["case"]["id"], r["case"]["provider"] = case, provider
    r["frontend"] = "cli"
    r["created"] = f"2026-01-{1 + night:02d}T03:00:00+00:00"
    r["git_commit"] = f"{night:04d}" + "a" * 36
    r["metrics"]["time_us"].update(p20=t * 0.99, p50=t, p80=t * 1.01)
    r["env"] = make_env(machine)
    return r


def _write(folder: Path, recs: list[dict], machine: str = "m") -> Path:
    return store.write_records(folder, make_env(machine), recs, name="run")


def test_compare_on_a_terminal_prints_copyable_names_without_escapes(tmp_path, monkeypatch) -> None:
    a = _write(tmp_path / "a", [_rec("run-a", 100.0)])
    b = _write(tmp_path / "b", [_rec("run-b", 160.0, night=1)])
    rc, out = _on_terminal(["compare", str(a), str(b), "--history"], monkeypatch)
    assert rc == 0 and "torch_compile@max-autotune" in out  # as --providers takes it
    assert [ch for ch in out if unicodedata.category(ch) == "Cf"] == []
    assert not re.search(r"\\[!-/:-@\[-`{-~]", out), out  # no markdown escape left
    # into a file or pipe it stays markdown (escaped; the word joiner keeps a GitHub issue from mentioning anyone)
    rc = cli.main(["compare", str(a), str(b), "--history", "--out", str(tmp_path / "c.md")])
    md = (tmp_path / "c.md").read_text()
    assert rc == 0 and "torch\\_compile@\u2060max-autotune" in md


@pytest.mark.parametrize("argv", [["show", "{d}"], ["report", "{d}"], ["report", "{d}", "--headline"],
                                  ["check", "{d}", "--frontend", "all"]])
def test_terminal_text_of_every_markdown_command(argv, tmp_path, monkeypatch) -> None:
    # a provider the table does not know is shown by its name (with "_" and "@"), a step of 30% for an alert
    recs = [_rec(f"r{i}", 100.0 * (1.3 if i >= 7 else 1.0), provider="my_peer@fast_mode", night=i,
                 case="resample/B256-S100-T50-D32") for i in range(10)]
    d = tmp_path / "d"
    for r in recs:
        _write(d, [r])
    rc, out = _on_terminal([a.replace("{d}", str(d)) for a in argv], monkeypatch)
    assert rc == 0 and "my_peer@fast_mode" in out, out
    assert [ch for ch in out if unicodedata.category(ch) == "Cf"] == []
    assert not re.search(r"\\[!-/:-@\[-`{-~]", out), out


def test_a_name_copied_from_rendered_markdown_is_accepted(capsys) -> None:
    """A provider copied from an issue or a markdown file carries the word joiner after ``@``: it is dropped."""
    assert cli._csv("torch_compile@\u2060max-autotune, numpy\u200b") == ["torch_compile@max-autotune", "numpy"]
    rc, out, _ = _main(["list", "--suite", "nightly", "--providers", "torch_compile@\u2060max-autotune", "--ops",
                        "resample"], capsys)
    assert rc == 0 and ("torch\\_compile@max-autotune" in out or "torch_compile@max-autotune" in out), out[-300:]


def test_terminal_text_drops_format_characters_and_every_escape() -> None:
    assert cli.terminal_text("a@\u2060b \u202eevil\u202c \\(x\\) \\#1 \\+ \\! \\{y\\} **b** `c`") == "a@b evil (x) #1 + ! {y} b c"


# --- compare across machines -------------------------------------------------------------------------------

def test_compare_of_two_machines_says_why_and_what_to_do(tmp_path, capsys) -> None:
    a = _write(tmp_path / "a", [_rec("run-a", 100.0, machine="gpu-h200")], machine="gpu-h200")
    b = _write(tmp_path / "b", [_rec("run-b", 100.0, machine="cpu-laptop", night=1)], machine="cpu-laptop")
    rc, out, err = _main(["compare", str(a), str(b)], capsys)
    assert rc == 2 and out == ""
    line = err.strip().splitlines()[-1]
    assert "gpu-h200" in line and "cpu-laptop" in line and "different machines" in line
    assert "compare two runs of one machine" in line


# --- record text never becomes markup -----------------------------------------------------------------------

_CODE_SPAN = re.compile(r"`[^`\n]*`")


def _markup_from_records(md: str) -> list[str]:
    """Hostile record text that markdown would render as markup: outside code spans (shown literally), an unescaped
    ``<script>`` or an unescaped link ``[x](javascript:...)``."""
    outside = _CODE_SPAN.sub("", md)
    return [h for h in HOSTILE if h in outside]


def _hostile_history(tmp_path: Path) -> Path:
    """Nine nights of a hostile machine, case and provider, the last two 30% slower (an alert), plus a failed case."""
    d = tmp_path / "hostile"
    for i in range(9):
        r = _rec(f"run{SCRIPT}{i}", 100.0 * (1.3 if i > 6 else 1.0), provider=LINK, machine=SCRIPT + LINK,
                 case=f"resample/{SCRIPT}", night=i)
        r["suite"] = "quick" + LINK
        bad = _rec(f"run{SCRIPT}{i}", 100.0, provider="numpy", machine=SCRIPT + LINK, case="resample/B1", night=i)
        bad.update(status="error", reason=SCRIPT + LINK, metrics=None, method=None)
        env = make_env(SCRIPT + LINK)
        env["cpu"] = LINK
        env["libs"] = {"numpy": SCRIPT}
        store.write_records(d, env, [r, bad], name=f"n{i}")
    return d


@pytest.mark.parametrize("argv", [["show", "{d}"], ["report", "{d}"], ["report", "{d}", "--headline"],
                                  ["report", "{d}", "--kernels"]])
def test_show_and_report_markdown_escape_record_text(argv, tmp_path, capsys) -> None:
    d = _hostile_history(tmp_path)
    rc, out, _ = _main([a.replace("{d}", str(d)) for a in argv], capsys)  # a pipe: the markdown itself
    assert rc == 0 and out.strip()
    assert _markup_from_records(out) == [], out
    if argv[0] == "report":
        rc, _, _ = _main([a.replace("{d}", str(d)) for a in argv] + ["--out", str(tmp_path / "r.md")], capsys)
        assert rc == 0 and _markup_from_records((tmp_path / "r.md").read_text()) == []


def test_check_and_compare_markdown_escape_record_text(tmp_path, capsys) -> None:
    d = _hostile_history(tmp_path)
    rc, out, _ = _main(["check", str(d), "--frontend", "all", "--markdown", str(tmp_path / "a.md"),
                        "--json", str(tmp_path / "a.json")], capsys)
    assert rc == 0 and "performance regression" in out  # the step was found: the alert's text is in it
    for text in (out, (tmp_path / "a.md").read_text()):
        assert _markup_from_records(text) == []
    files = sorted(d.glob("*.records.json"))
    rc, out, _ = _main(["compare", str(files[0]), str(files[-1]), "--history"], capsys)
    assert rc == 0 and _markup_from_records(out) == []


def test_nightly_issue_text_escapes_record_text(tmp_path, capsys) -> None:
    spec = importlib.util.spec_from_file_location("alerts_to_issues", ROOT / "scripts" / "alerts_to_issues.py")
    ati = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("alerts_to_issues", ati)
    spec.loader.exec_module(ati)
    d = _hostile_history(tmp_path)
    res = regress.check(list(store.load(d).records), frontend=None)
    doc = regress.alerts_json(res)
    assert doc["alerts"]
    alert = doc["alerts"][0]
    alert["after"]["created"] = SCRIPT + LINK  # a hand-edited alerts file: the date is record data too
    for text in (ati.issue_body([alert]), ati.comment_body([alert]), ati.comment_body(alert)):
        assert _markup_from_records(text) == [], text
    assert "an unknown date" in ati.comment_body(alert)
    assert ati._date(SCRIPT) == "" and ati._date("2026-11-24T03:00:00+00:00") == "2026-11-24"


def test_python_m_robocache_bench_is_the_cli(capsys, monkeypatch):
    """``python -m robocache.bench`` runs ``robocache-bench`` (a device machine has the tree, not the entry point)."""
    import runpy

    monkeypatch.setattr(sys, "argv", ["robocache.bench", "--help"])
    with pytest.raises(SystemExit) as e:
        runpy.run_module("robocache.bench", run_name="__main__")
    assert e.value.code == 0
    assert "robocache-bench" in capsys.readouterr().out
