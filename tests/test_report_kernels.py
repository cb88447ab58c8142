"""The report's kernel tables on SYNTHETIC records (tests/synthetic_kernels.py; made-up times, not
measurements): the optimisation journey, torch.compile judged at its best mode, the vs-torch.compile summary,
the call-cost table, readable provider labels, and graceful skips when the records lack what a table needs."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from robocache import providers
from robocache.bench import store
from robocache.bench.views import kernels, report
from robocache.bench.views.records import is_dispatch, runs, runs_per_op
from tests import typed
from tests.synthetic_kernels import CASES, SCRIPT, write_fixture


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list:
    out = write_fixture(tmp_path_factory.mktemp("kernels"))
    loaded = store.load(out)
    assert not loaded.bad and all(r.synthetic for r in loaded.records)
    return loaded.records


def _run(records: list, run_id: str) -> list:
    return runs(records)[run_id]


def test_labels_and_order() -> None:
    assert providers.label("robocache@v2") == "robocache v2"
    assert providers.label("torch_compile@max-autotune") == "torch.compile (max-autotune)"
    assert providers.label("torch_compile@reduce-overhead") == "torch.compile (reduce-overhead)"
    assert providers.label("torch_compile") == "torch.compile"
    assert providers.label("mystery@x") == "mystery@x" and providers.label(SCRIPT) == SCRIPT
    assert providers.version_of("robocache@v12") == "v12" and providers.version_of("robocache@best") is None
    assert providers.compile_mode("torch_compile") == "default"
    assert providers.compile_mode("torch_compile@max-autotune") == "max-autotune"
    assert providers.compile_mode("torch_eager") is None
    provs = ["cupy", "robocache@v10", "torch_compile@max-autotune", "zeta", "robocache", "robocache@v2",
             "torch_compile", "torch_eager"]
    assert sorted(provs, key=providers.order) == [
        "robocache", "robocache@v2", "robocache@v10", "torch_compile", "torch_compile@max-autotune", "torch_eager",
        "cupy", "zeta"]


def test_journey_rows(records: list) -> None:
    rows = kernels.journey_rows(records)
    # one run per machine and op: the nightly runs (the newer quick run on the H200 is not picked)
    assert {r["run_id"] for r in rows} == {"synthetic-nvidia-h100-x1-nightly", "synthetic-nvidia-h200-nightly"}
    assert {(r["machine"], r["arch"]) for r in rows} == {("nvidia-h100-x1", "H100"), ("nvidia-h200", "H200")}
    for machine in ("nvidia-h100-x1", "nvidia-h200"):
        mine = [r for r in rows if r["machine"] == machine]
        assert [(r["op"], r["version"]) for r in mine] == [
            (op, v) for op in ("resample", "fuse", "voxelize") for v in ("v1", "v2", "public")]
        res = {r["version"]: r for r in mine if r["op"] == "resample"}
        assert (res["v1"]["case"], res["v1"]["dtype"]) == ("resample/B256-S100-T50-D32", "bfloat16")
        assert res["v1"]["speedup_vs_v1"] == pytest.approx(1.0)
        assert res["v2"]["speedup_vs_v1"] == pytest.approx(2.0)
        # torch.compile at its best on the standard case: default mode (1.2 vs 1.5 x base)
        assert res["v2"]["vs_compile"] == pytest.approx(1.2) and res["v2"]["compile_mode"] == "default"
        assert res["v1"]["vs_compile"] == pytest.approx(0.6)
        # geomean over the five resample cases both versions ran (the dispatch case is not one of them)
        assert res["v2"]["cases_vs_v1"] == 5
        assert res["v2"]["geomean_vs_v1"] == pytest.approx((2 * 2 * 4 * 3 * 1.5) ** 0.2)
        assert (res["v2"]["min_vs_v1"], res["v2"]["max_vs_v1"]) == (pytest.approx(1.5), pytest.approx(4.0))
        assert res["public"]["provider"] == "robocache" and res["public"]["speedup_vs_v1"] == pytest.approx(2.0)
        fuse = {r["version"]: r for r in mine if r["op"] == "fuse"}
        assert fuse["v2"]["case"] == "fuse/robot-B256-T100" and fuse["v2"]["geomean_vs_v1"] == pytest.approx(
            math.sqrt(2.0))
        vox = {r["version"]: r for r in mine if r["op"] == "voxelize"}
        assert vox["v2"]["case"] == "voxelize/B4-N100000-G64-count-uniform"
        assert vox["v2"]["speedup_vs_v1"] == pytest.approx(1.25)
        assert vox["v2"]["pct_of_ceiling"] is not None


def test_journey_representative_fallback(records: list) -> None:
    """Without the standard case, the journey reads the first case in grid order every version measured."""
    rs = [r for r in _run(records, "synthetic-nvidia-h200-nightly")
          if not (r.case.id == "resample/B256-S100-T50-D32")]
    assert kernels.representative(rs, "resample") == ("resample/B4096-S100-T50-D32", "bfloat16")
    # a version missing on a case: a case every version measured wins
    rs2 = [r for r in rs if not (r.case.id == "resample/B4096-S100-T50-D32"
                                 and r.case.provider == "robocache@v1")]
    assert kernels.representative(rs2, "resample") == ("resample/B16384-S100-T50-D32", "float32")


def test_journey_markdown(records: list) -> None:
    md = kernels.journey(records)
    assert md.count("| version |") == 6  # three ops x two GPUs
    assert "| v2 | 4.0 |" in md  # the H200's v2 on the standard case
    assert "1.20x (default)" in md and "2.00x" in md
    assert "public API (robocache)" in md
    assert SCRIPT not in md  # record text is escaped in markdown


def test_vs_compile_summary(records: list) -> None:
    cases = kernels.vs_compile_cases(records)
    h200 = [c for c in cases if c["machine"] == "nvidia-h200"]
    assert len(h200) == len(CASES)  # the dispatch case is host time: never compared with device time
    summary = {(s["machine"], s["op"]): s for s in kernels.vs_compile_summary(cases)}
    for machine in ("nvidia-h100-x1", "nvidia-h200"):
        res = summary[(machine, "resample")]
        # ratios min(default, max-autotune) per case: 1.2, 0.9, 0.4 (max-autotune), 0.8, 1.0 (max-autotune)
        assert res["cases"] == 5
        assert res["worst"] == pytest.approx(0.4) and res["worst_case"] == "resample/B4096-S100-T50-D32 bfloat16"
        assert res["median"] == pytest.approx(0.9)
        assert res["best"] == pytest.approx(1.2) and res["best_case"] == "resample/B256-S100-T50-D32 bfloat16"
        assert res["at_least_1x"] == 2
        assert res["compile_modes"] == "default 3, max-autotune 2"
        fuse = summary[(machine, "fuse")]
        assert (fuse["worst"], fuse["median"], fuse["best"], fuse["at_least_1x"]) == (
            pytest.approx(0.7), pytest.approx(1.6), pytest.approx(2.5), 1)
        assert fuse["worst_case"] == "fuse/robot-B32-T100 float32"
        vox = summary[(machine, "voxelize")]
        assert (vox["worst"], vox["best"], vox["at_least_1x"]) == (pytest.approx(1.5), pytest.approx(4.0), 2)
    md = kernels.vs_compile(records)
    assert "0.40x (resample/B4096-S100-T50-D32 bfloat16)" in md and "2 of 5" in md
    # a version against torch.compile: v1 is twice as slow on every resample case but one
    v1 = {s["op"]: s for s in kernels.vs_compile_summary(kernels.vs_compile_cases(records, "robocache@v1"))
          if s["machine"] == "nvidia-h200"}
    assert v1["resample"]["best"] == pytest.approx(1.0 / 1.5 * 1.0)  # the <script> case: min(1.1, 1.0) / 1.5


def test_call_cost(records: list) -> None:
    rows = kernels.call_cost_rows(records)
    h200 = {r["provider"]: r for r in rows if r["machine"] == "nvidia-h200"}
    assert set(h200) == {"robocache", "robocache@cupy", "robocache@v1", "bare_launch"}
    assert h200["robocache"]["vs_bare"] == pytest.approx(9.0 / 5.0) and h200["robocache"]["timer"] == "host"
    assert h200["robocache@cupy"]["vs_bare"] == pytest.approx(7.0 / 5.0)
    assert h200["robocache@v1"]["vs_bare"] == pytest.approx(9.0)
    assert h200["robocache"]["device_us"] is None  # no dispatch section in these records
    md = kernels.call_cost(records)
    assert "1.80x" in md and "robocache v1" in md and "robocache (CuPy arrays)" in md and "bare CuPy launch" in md
    assert kernels.call_cost([r for r in records if not is_dispatch(r)]).startswith("_No call-cost")


def test_call_cost_reads_the_dispatch_section() -> None:
    """A record's ``dispatch`` section (the GPU's own time per call; schema v3) shows when present."""
    from tests.synthetic_kernels import gpu_env, record

    recs = [record("fuse/dispatch-B1-T2", "fuse", "float32", {"B": 1, "T": 2, "kind": "dispatch"}, prov, t,
                   run="synthetic-r", created="2026-03-01T00:00:00Z", suite="quick", ceiling=1.0, timer="host")
            for prov, t in (("robocache", 8.0), ("bare_launch", 4.0))]
    recs[0]["dispatch"] = {"device_us": 2.5, "gpu_keeps_up": True}
    for r in recs:
        r["env"] = gpu_env("H200", "nvidia-h200")
    recs = typed.records(recs)
    rows = kernels.call_cost_rows(recs)
    assert [(r["provider"], r["vs_bare"], r["device_us"], r["gpu_keeps_up"]) for r in rows] == [
        ("robocache", 2.0, 2.5, True), ("bare_launch", 1.0, None, None)]
    assert "| 2.5 | yes |" in kernels.call_cost(recs)
    plain = typed.record(record("fuse/robot-B32-T100", "fuse", "float32", {"B": 32}, "robocache", 8.0,
                                run="synthetic-r", created="2026-03-01T00:00:00Z", suite="quick", ceiling=1.0))
    assert is_dispatch(recs[0]) and not is_dispatch(plain)


def test_report_of_one_run_has_the_kernel_sections(records: list) -> None:
    text = report.report(_run(records, "synthetic-nvidia-h200-nightly"))
    for section in ("## Optimisation journey", "## Against torch.compile at its best", "## Call cost",
                    "## Headline", "## Against the peers", "## Roofline view", "## Health"):
        assert section in text, section
    assert "SYNTHETIC" in text
    peers = text.split("## Against the peers")[1].split("##")[0]
    head = next(line for line in peers.splitlines() if line.startswith("| case |"))
    assert "vs torch.compile (best mode)" in head and "max-autotune" not in head and "robocache v1" not in head
    assert "0.40x (max-autotune)" in peers  # the mode that won is named
    assert "dispatch" not in peers  # host-time cases stay out of the device-time tables
    headline = text.split("## Headline")[1].split("##")[0]
    assert "torch.compile (faster mode)" in headline and "robocache v1" in headline
    assert "torch.compile (max-autotune) |" in headline  # the slower mode on this case, not marked


def test_kernel_sections_skip_gracefully(records: list) -> None:
    """A run without versions, a second compile mode or dispatch cases: no empty sections, no errors."""
    plain = [r for r in _run(records, "synthetic-nvidia-h200-nightly")
             if r.case.provider in ("robocache", "torch_eager") and not is_dispatch(r)]
    text = report.report(plain)
    assert "## Optimisation journey" not in text and "## Call cost" not in text
    assert "## Against torch.compile at its best" not in text
    assert kernels.journey(plain).startswith("_No kernel versions")
    assert kernels.vs_compile(plain).startswith("_No case with both")
    assert kernels.journey([]).startswith("_No kernel versions") and kernels.call_cost_rows([]) == []
    whole = kernels.kernels(records)
    assert whole.count("| version |") == 6 and "| op | GPU (machine) |" in whole


def test_cli_report_on_the_fixture(tmp_path: Path) -> None:
    """The CLI's report of the newest nightly run carries the kernel sections (cli.py is unchanged)."""
    from robocache.bench import cli

    write_fixture(tmp_path)
    out = tmp_path / "report.md"
    assert cli.main(["report", str(tmp_path), "--run", "synthetic-nvidia-h100-x1", "--out", str(out)]) == 0
    text = out.read_text()
    assert "## Optimisation journey" in text and "nvidia-h100-x1" in text


def test_cli_report_kernels_over_every_machine(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``report --kernels``: the kernel tables over every machine of PATHS (not one run); --run is a usage error."""
    from robocache.bench import cli

    write_fixture(tmp_path)
    out = tmp_path / "kernels.md"
    assert cli.main(["report", str(tmp_path), "--kernels", "--out", str(out)]) == 0
    text = out.read_text()
    assert text == kernels.kernels(store.load(tmp_path).records)
    assert "## Optimisation journey" in text and "## Call cost" in text
    machines = {r.env.machine for r in store.load(tmp_path).records}
    assert len(machines) > 1 and all(m in text for m in machines)
    assert cli.main(["report", str(tmp_path), "--kernels", "--run", "synthetic"]) == 2
    assert "drop --run" in capsys.readouterr().err
    assert cli.main(["report", str(tmp_path / "nothing-here"), "--kernels"]) == 2
    with pytest.raises(SystemExit) as e:
        cli.main(["report", str(tmp_path), "--kernels", "--headline"])
    assert e.value.code == 2


def test_runs_of_one_commit_and_suite_are_one_measurement():
    """A nightly split over two invocations at one commit (a lease ran out; `run --cases` finished it)
    is read as one measurement; a run at another commit never joins it. SYNTHETIC records."""
    from synthetic_kernels import CASES, gpu_env, nightly_records

    def tag(recs, env, commit):
        for r in recs:
            r["env"] = env
            r["git_commit"] = commit
        return recs

    env = gpu_env("H200", "nvidia-h200")
    first = [r for r in nightly_records(1.0, 4300.0, "run-a", "2026-03-01T00:00:00Z", with_dispatch=False)
             if r["case"]["id"] == CASES[0][0]]
    rest = [r for r in nightly_records(1.0, 4300.0, "run-b", "2026-03-01T01:00:00Z", with_dispatch=False)
            if r["case"]["id"] != CASES[0][0]]
    other = nightly_records(2.0, 4300.0, "run-c", "2026-02-01T00:00:00Z", with_dispatch=False)
    recs = tag(first, env, "c1") + tag(rest, env, "c1") + tag(other, env, "c0")
    got = {op: (rid, rs) for _, op, rid, rs in runs_per_op(typed.records(recs))}
    op0 = CASES[0][1]
    rid, rs = got[op0]
    assert all(r.git_commit == "c1" for r in rs)  # the frame's rows (columns.Row)
    want_ids = {c[0] for c in CASES if c[1] == op0}
    assert {r.case_id for r in rs} == want_ids  # both invocations' cases of the op
    if len(want_ids) > 1:
        assert rid == "run-a+run-b"


def test_headline_states_the_grid_wide_ratio_to_torch_compile(records: list) -> None:
    """The headline names its case and also the grid: median and worst ratio to torch.compile's faster mode over
    every case and dtype of the run (the kernels report's own vs_compile_cases), so one tie never stands for it."""
    run = _run(records, "synthetic-nvidia-h200-nightly")
    text = report.headline(run)
    cases = kernels.vs_compile_cases(run)
    assert cases
    ratios = sorted(c["ratio"] for c in cases)
    worst = min(cases, key=lambda c: c["ratio"])
    import statistics

    line = next(line for line in text.splitlines() if line.startswith("- H200"))
    assert f"{len(cases)} cases and dtypes" in line
    assert f"median {statistics.median(ratios):.2f}x" in line and f"worst {ratios[0]:.2f}x" in line
    assert worst["case"] in line and f"faster on {sum(r >= 1 for r in ratios)} of {len(cases)}" in line
    # the whole report's headline section carries it; a run without torch.compile has no such line
    assert "Across the grid" in report.report(run).split("## Headline")[1].split("\n## ")[0]
    plain = [r for r in run if r.case.provider in ("robocache", "torch_eager")]
    assert "Across the grid" not in report.headline(plain)


def test_report_links_its_dashboard_views(monkeypatch, tmp_path) -> None:
    """The report carries links to its views (issue 15): the run's Runs page and the machine's wins and History
    pages, on the base of $ROBOCACHE_DASHBOARD_URL; a bad base leaves the line out instead of printing it."""
    from robocache.bench import cli

    monkeypatch.setenv("ROBOCACHE_DASHBOARD_URL", "https://bench.example.org/rc/")
    line = report.dashboard_links("20261124T031558Z-51257c", "nvidia-h200 x")
    assert line == ("- **dashboard**: [this run](https://bench.example.org/rc/runs?run=20261124T031558Z-51257c), "
                    "[where robocache wins](https://bench.example.org/rc/wins?machine=nvidia-h200+x), "
                    "[history](https://bench.example.org/rc/history?machine=nvidia-h200+x)")
    out = tmp_path / "r.md"
    from pathlib import Path

    committed = Path(__file__).resolve().parents[1] / "results" / "h200-nvidia-h200"
    assert cli.main(["report", str(committed), "--out", str(out)]) == 0
    assert "- **dashboard**: [this run](https://bench.example.org/rc/runs?run=" in out.read_text()
    monkeypatch.setenv("ROBOCACHE_DASHBOARD_URL", "javascript:alert(1)")
    assert report.dashboard_links("r", "m") is None
