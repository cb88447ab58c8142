"""`list`, `show` and `report --format json` (docs/report.md, "JSON output") and `robocache-bench --version`.

Every document is parsed (json.loads), checked against the records it was made from, and against the markdown
the same command prints: the JSON is the same rows and tables, with no markdown escapes.
"""
from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
from pathlib import Path

import pytest

from robocache.bench import cli, specs, store
from tests import committed
from robocache.bench.views import report as rep
from robocache.bench.views.records import pick_run, runs

ROOT = Path(__file__).resolve().parents[1]
MACHINES = sorted(p for p in committed.folders() if list(p.glob("*.records.json")))  # never results/local/
ESCAPE = re.compile(r"\\[\\|<>`*_\[\]]")  # a markdown escape, as views.tables.table writes them


def _main(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    try:
        rc = cli.main(argv)
    except SystemExit as e:  # argparse (usage errors, --version)
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


def _strings(x):
    if isinstance(x, str):
        yield x
    elif isinstance(x, dict):
        for k, v in x.items():
            yield k
            yield from _strings(v)
    elif isinstance(x, list):
        for v in x:
            yield from _strings(v)


def _no_escapes(doc) -> None:
    bad = [s for s in _strings(doc) if ESCAPE.search(s)]
    assert not bad, bad[:5]


def test_list_json(capsys):
    for suite, device in (("quick", "gpu"), ("nightly", "cpu")):
        rc, out, _ = _main(["list", "--suite", suite, "--device", device, "--format", "json"], capsys)
        assert rc == 0
        doc = json.loads(out)
        assert doc["schema"] == cli.LIST_SCHEMA == "robocache-list/1"
        assert (doc["suite"], doc["device"], doc["grid_version"]) == (suite, device, specs.GRID_VERSION)
        cases = specs.cases(suite, device=device)
        assert [c["key"] for c in doc["cases"]] == [c.key for c in cases]
        assert [c["bytes_upper_bound"] for c in doc["cases"]] == [c.bytes for c in cases]
        assert all(specs.find(c["key"]).reason == c["reason"] for c in doc["cases"])
        _no_escapes(doc)
    rc, _, err = _main(["list", "--format", "yaml"], capsys)
    assert rc == 2 and "--format" in err


@pytest.mark.parametrize("folder", MACHINES, ids=lambda p: p.name)
def test_show_json_on_committed_results(folder, capsys):
    rc, out, _ = _main(["show", str(folder), "--format", "json"], capsys)
    assert rc == 0
    doc = json.loads(out)
    rid, records = pick_run(store.load(folder).records)
    assert doc["schema"] == cli.SHOW_SCHEMA == "robocache-show/1"
    assert doc["run"]["run_id"] == rid and doc["skipped_files"] == []
    assert len(doc["cases"]) == len(records)
    by_key = {(r.case.id, r.case.dtype, r.case.provider): r for r in records}
    for c in doc["cases"]:
        r = by_key[(c["case"], c["dtype"], c["provider"])]
        assert c["status"] == r.status
        assert c["p50_us"] == (r.metrics.time_us.p50 if r.metrics else None)
    _no_escapes(doc)
    # the text `show` prints is rendered from the same rows: every case appears in it
    rc, text, _ = _main(["show", str(folder)], capsys)
    text = cli.terminal_text(text)  # into a pipe `show` writes markdown, record text escaped (issue 27)
    assert rc == 0 and all(f"| {c['case']} | {c['dtype']} | {c['provider']} | {c['status']} |" in text
                           for c in doc["cases"])


def _markdown_sections(text: str) -> list[tuple[str, list[list[str]]]]:
    """(heading, [header row of each table]) of a markdown report, cells unescaped."""
    out: list[tuple[str, list[list[str]]]] = []
    prev = ""
    for line in text.splitlines():
        if re.match(r"#{1,2} ", line):
            out.append((line.split(" ", 1)[1], []))
        elif line.startswith("|---") and out:
            out[-1][1].append([cli.terminal_text(c.strip()) for c in prev.strip().strip("|").split(" | ")])
        prev = line
    return out


@pytest.mark.parametrize("folder", MACHINES, ids=lambda p: p.name)
def test_report_json_on_committed_results_matches_the_markdown(folder, capsys):
    rc, out, _ = _main(["report", str(folder), "--format", "json"], capsys)
    assert rc == 0
    doc = json.loads(out)
    assert doc["schema"] == cli.REPORT_SCHEMA == "robocache-report/1" and doc["kind"] == "run"
    _no_escapes(doc)
    rc, md, _ = _main(["report", str(folder)], capsys)  # captured stdout is not a terminal: the markdown
    assert rc == 0
    sections = _markdown_sections(md)[1:]  # after the title
    titled = [s for s in doc["sections"] if s["title"]]
    assert [s["title"] for s in titled] == [cli.terminal_text(t) for t, _ in sections]
    for s, (_, headers) in zip(titled, sections):
        assert [t["columns"] for t in s["tables"]] == headers, s["title"]
        assert all(len(row) == len(t["columns"]) for t in s["tables"] for row in t["rows"])
        assert (s["note"] is None) == bool(s["tables"])


def test_report_json_headline_kernels_and_out(tmp_path, capsys):
    folder = ROOT / "results" / "h200-nvidia-h200"
    quick = pick_run([r for r in store.load(folder).records if r.suite == "quick"])[0]  # a run with a headline
    rc, out, _ = _main(["report", str(folder), "--run", quick, "--format", "json", "--headline"], capsys)
    doc = json.loads(out)
    assert rc == 0 and [s["title"] for s in doc["sections"]] == [f"Headline: {rep.headline_case()[0]}"]
    rc, out, _ = _main(["report", *map(str, committed.folders()), "--kernels", "--format", "json"], capsys)
    assert rc == 0
    doc = json.loads(out)
    assert doc["kind"] == "kernels" and doc["schema"] == cli.REPORT_SCHEMA
    assert {r["run_id"] for r in doc["runs"]} == set(runs(committed.load().records))
    assert [s["title"] for s in doc["sections"]][:3] == ["Optimisation journey", "Against torch.compile at its best",
                                                         "Call cost"]
    assert all(s["tables"] for s in doc["sections"][:3])  # the committed records fill every kernel table
    _no_escapes(doc)
    dest = tmp_path / "report.json"
    rc, out, _ = _main(["report", str(folder), "--format", "json", "--out", str(dest)], capsys)
    assert rc == 0 and "report written to" in out
    assert json.loads(dest.read_text())["run"]["run_id"] == pick_run(store.load(folder).records)[0]


def test_bad_file_is_reported_in_the_json(tmp_path, capsys):
    src = next((ROOT / "results" / "h200-nvidia-h200").glob("*.records.json"))
    (tmp_path / src.name).write_bytes(src.read_bytes())
    (tmp_path / "broken.records.json").write_text("{not json")
    rc, out, err = _main(["show", str(tmp_path), "--format", "json"], capsys)
    assert rc == 0 and "skipped bad results file" in err
    doc = json.loads(out)
    assert [Path(b["path"]).name for b in doc["skipped_files"]] == ["broken.records.json"]


def test_version(capsys):
    rc, out, _ = _main(["--version"], capsys)
    assert rc == 0
    assert out.startswith(f"robocache {importlib.metadata.version('robocache')}")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode == 0 and (ROOT / ".git").exists():  # a checkout: the commit is named
        assert f"git {head.stdout.strip()[:12]}" in out
    else:
        assert "git" not in out
