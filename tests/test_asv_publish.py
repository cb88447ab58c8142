"""asv over our own history (issue 24): `asv publish` shows every machine's committed results, robocache apart.

`asv publish` over the committed ``results/asv`` dropped all five H200 files: their benchmarks
(``track_device_us``, ``track_gb_per_s``, ``*Ceiling.track_pct_of_ceiling``) no longer exist. They are migrated by
``scripts/migrate_asv_results.py`` (mapped, never made up), and asv's regressions leave the peers out
(``regressions_first_commits`` in asv.conf.json). Here asv publishes a COPY of ``results/asv`` into a temporary
html folder, with the repository's own asv.conf.json settings, and every machine with result files gets a graph.
"""
from __future__ import annotations

import importlib.util
import itertools
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import committed
import pytest

asv_util = pytest.importorskip("asv.util")

ROOT = Path(__file__).resolve().parents[1]
ASV = ROOT / "results" / "asv"
_spec = importlib.util.spec_from_file_location("migrate_asv_results", ROOT / "scripts" / "migrate_asv_results.py")
mig = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mig)


def _result_files(root: Path) -> dict[str, list[Path]]:
    """machine -> its asv result files (not machine.json)."""
    out: dict[str, list[Path]] = {}
    for p in sorted(root.glob("*/*.json")):
        if p.name != "machine.json":
            out.setdefault(p.parent.name, []).append(p)
    return out


def _published(tmp_path: Path) -> Path:
    """`asv publish` of a copy of results/asv into tmp_path/html, with asv.conf.json's settings; the html folder."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("no git checkout: asv places results by their commits in the repository's history")
    commits = {json.loads(p.read_text())["commit_hash"] for ps in _result_files(ASV).values() for p in ps}
    missing = [c[:8] for c in sorted(commits)
               if subprocess.run(["git", "cat-file", "-e", f"{c}^{{commit}}"], cwd=ROOT).returncode != 0]
    assert not missing, (f"commits of results/asv not in this clone ({', '.join(missing)}): a shallow clone? asv "
                         "needs the history (CI: actions/checkout with fetch-depth: 0)")
    results = tmp_path / "results"
    shutil.copytree(ASV, results)
    conf = asv_util.load_json(str(ROOT / "asv.conf.json"), js_comments=True)
    # the repository's settings (regressions included); its history at HEAD (a CI checkout has no branch "main")
    conf.update(repo=str(ROOT), branches=["HEAD"], benchmark_dir=str(ROOT / "benchmarks"), results_dir=str(results),
                html_dir=str(tmp_path / "html"), environment_type="existing")
    (tmp_path / "asv.conf.json").write_text(json.dumps(conf))
    run = subprocess.run([sys.executable, "-m", "asv", "publish", "--config", str(tmp_path / "asv.conf.json")],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return tmp_path / "html"


def _graph_values(graph: Path) -> list[float]:
    """The numbers of one published graph (a parameterized benchmark's points hold one value per combination)."""
    out = []
    for _rev, v in json.loads(graph.read_text()):
        for x in (v if isinstance(v, list) else [v]):
            if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x):
                out.append(float(x))
    return out


def test_asv_publish_shows_every_machine_and_keeps_peers_out_of_regressions(tmp_path) -> None:
    html = _published(tmp_path)
    machines = _result_files(ASV)
    assert "nvidia-h200" in machines and len(machines) >= 3
    for m in machines:
        graphs = [g for g in html.glob(f"graphs/**/machine-{m}/**/bench_*.json")]
        shown = [g for g in graphs if _graph_values(g)]
        assert shown, f"asv publish shows no graph with a value for machine {m}"
    h200 = {g.name for g in html.glob("graphs/**/machine-nvidia-h200/**/bench_*.json") if _graph_values(g)}
    assert {f"bench_{op}.{op.capitalize()}.time_device.json" for op in ("resample", "fuse", "voxelize")} <= h200
    # robocache apart: no peer in asv's regressions (its graphs stay)
    regs = json.loads((html / "regressions.json").read_text())["regressions"]
    provider = [r[0].rsplit("'", 2)[-2] for r in regs]
    assert all(p.startswith("robocache") for p in provider), provider


def test_the_committed_results_are_migrated_and_their_values_are_the_records() -> None:
    """Every H200 device time asv now shows is a committed asv-front-end record's median (same commit, case, dtype
    and provider), us -> s: mapped, never made up. The migration is done (running it again changes nothing)."""
    bench = json.loads((ASV / "benchmarks.json").read_text())
    for files in _result_files(ASV).values():
        for p in files:
            doc = json.loads(p.read_text())
            assert not [n for n in doc["results"] if mig.rule_for(n) and n not in bench], p
            assert mig.migrate_doc(doc, bench)[1] == [], p  # nothing left to migrate
    p50 = {}
    for r in committed.load().records:
        if r.frontend == "asv" and r.status == "ok" and r.git_commit:
            p50.setdefault((r.git_commit, r.case.op, r.case.id.split("/", 1)[1], r.case.dtype, r.case.provider),
                           []).append(r.metrics.time_us.p50 * 1e-6)
    matched = 0
    for p in _result_files(ASV)["nvidia-h200"]:
        doc = json.loads(p.read_text())
        cols = doc["result_columns"]
        for name, row in doc["results"].items():
            if not name.endswith(".time_device"):
                continue
            e = dict(zip(cols, row))
            op = name.split(".")[0].removeprefix("bench_")
            for combo, v in zip(itertools.product(*e["params"]), e["result"]):
                if v is None or (isinstance(v, float) and math.isnan(v)):
                    continue
                key = (doc["commit_hash"], op, *(x.strip("'") for x in combo))
                if key[0] not in {k[0] for k in p50}:
                    continue  # an asv run whose records were not committed
                assert any(math.isclose(v, x, rel_tol=1e-9) for x in p50.get(key, [])), (key, v)
                matched += 1
    assert matched >= 500


def _old_doc() -> dict:
    """An asv results file as the first asv front end wrote it (grid version 1), SYNTHETIC values."""
    cols = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25",
            "stats_q_75", "stats_number", "stats_repeat", "samples", "profile"]
    keys = ["'resample/B256-S100-T50-D32/float32/robocache'", "'resample/B256-S100-T50-D32/float32/cupy'",
            "'resample/B7-S1-T1-D1/float32/robocache'"]  # the last: no such case in today's grid
    return {"commit_hash": "0" * 40, "env_name": "e", "date": 1, "params": {"machine": "m"}, "python": "3",
            "requirements": {}, "env_vars": {}, "result_columns": cols, "durations": {}, "version": 2,
            "results": {
                "bench_resample.Resample.track_device_us": [[7.5, float("nan"), 3.0], [keys], mig.OLD_VERSION, 10, 2.0],
                "bench_resample.Resample.track_gb_per_s": [[600.0, 1.0, 2.0], [keys], mig.OLD_VERSION, 10, 1.0],
                "bench_resample.ResampleCeiling.track_pct_of_ceiling": [[15.0, 1.0, 2.0], [keys], mig.OLD_VERSION],
                "bench_resample.ResampleWall.time_wall": [[2e-4, 3e-4, 4e-4], [keys], mig.OLD_VERSION, 10, 5.0,
                                                          [1e-4, 2e-4, 3e-4], [3e-4, 4e-4, 5e-4], None, None, [1, 1, 1],
                                                          [10, 9, 8]],
                "bench_other.Other.track_thing": [[1.0], [["'x'"]], "v9"],  # not ours to touch
            }}


def test_migration_maps_renames_and_drops_mechanically() -> None:
    bench = json.loads((ASV / "benchmarks.json").read_text())
    new, said = mig.migrate_doc(_old_doc(), bench)
    res, cols = new["results"], new["result_columns"]
    assert set(res) == {"bench_resample.Resample.time_device", "bench_resample.ResampleWall.time_wall",
                        "bench_other.Other.track_thing"}
    dev = dict(zip(cols, res["bench_resample.Resample.time_device"]))
    target = bench["bench_resample.Resample.time_device"]
    assert dev["params"] == target["params"] and dev["version"] == target["version"]
    combos = list(itertools.product(*dev["params"]))
    at = {c: v for c, v in zip(combos, dev["result"]) if v is not None}
    assert at.keys() == {("'B256-S100-T50-D32'", "'float32'", "'robocache'"), ("'B256-S100-T50-D32'", "'float32'", "'cupy'")}
    assert at[("'B256-S100-T50-D32'", "'float32'", "'robocache'")] == pytest.approx(7.5e-6)
    assert math.isnan(at[("'B256-S100-T50-D32'", "'float32'", "'cupy'")])  # asv's "failed" stays failed
    wall = dict(zip(cols, res["bench_resample.ResampleWall.time_wall"]))
    j = list(itertools.product(*wall["params"])).index(("'B256-S100-T50-D32'", "'float32'", "'cupy'"))
    assert wall["result"][j] == 3e-4 and wall["stats_ci_99_a"][j] == 2e-4 and wall["stats_repeat"][j] == 9
    assert any("1 case(s) not in the current grid dropped" in s for s in said)
    assert sum(s.startswith("dropped") for s in said) == 2
    assert mig.migrate_doc(new, bench)[1] == []  # a second run changes nothing
    with pytest.raises(mig.MigrationError):
        mig.migrate_doc({"version": 1, "results": {}}, bench)


def test_migration_script_dry_run_and_bad_input(tmp_path, capsys) -> None:
    (tmp_path / "m").mkdir()
    shutil.copy(ASV / "benchmarks.json", tmp_path / "benchmarks.json")
    (tmp_path / "m" / "old.json").write_text(json.dumps(_old_doc()))
    before = (tmp_path / "m" / "old.json").read_text()
    assert mig.main(["--results", str(tmp_path), "--dry-run"]) == 0
    assert "would change" in capsys.readouterr().out and (tmp_path / "m" / "old.json").read_text() == before
    assert mig.main(["--results", str(tmp_path)]) == 0
    assert "time_device" in (tmp_path / "m" / "old.json").read_text()
    (tmp_path / "m" / "bad.json").write_text("{not json")
    assert mig.main(["--results", str(tmp_path)]) == 2
    assert "nothing written" in capsys.readouterr().err


def test_the_documented_pytest_benchmark_compare_selects_one_gpu() -> None:
    """The README's `pytest-benchmark compare 0001 0003` set the CPU's 0001 beside the H200's (a bare number selects
    every Python folder's save of it); docs/harness.md gives the command that names the GPU, and it selects H200
    saves only, as pytest-benchmark's own storage resolves them."""
    import logging
    import re

    from pytest_benchmark.storage.file import FileStorage

    docs = (ROOT / "docs" / "harness.md").read_text()
    m = re.search(r"`pytest-benchmark compare (0001_h200 0003_h200)\s", docs)
    assert m, "docs/harness.md: the pytest-benchmark compare example that names the GPU"
    storage = FileStorage(ROOT / "results" / "pytest", logging.getLogger("t"))

    def gpus(*globs: str) -> set[str]:
        return {p.name.split("_")[1].split("-")[0] for p in storage.query(*globs)}

    assert gpus(*m.group(1).split()) == {"h200"} and len(storage.query(*m.group(1).split())) == 2
    assert gpus("0001", "0003") == {"cpu", "h200"}  # the README's example: a CPU run beside H200 runs
