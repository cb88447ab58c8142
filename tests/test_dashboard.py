"""The dashboard: every page smoke-tested with AppTest on generated fixtures and on the committed
results, record text never rendered as markup (the loader's speed: scripts/bench_load.py).

The fixture records are synthetic (``"synthetic": True``); nothing touches a GPU.
"""
from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")
from streamlit.testing.v1 import AppTest  # noqa: E402

from dashboard import charts, data, tables  # noqa: E402
from robocache.bench import frame  # noqa: E402
from robocache.bench.store import write_records  # noqa: E402
from tests import committed, typed  # noqa: E402
from tests.test_store import make_env, make_record  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PAGES = ["overview", "wins", "sweeps", "architectures", "kernels", "history", "multigpu", "runs"]
SCRIPT = "<script>alert(1)</script>"
UNESCAPED_LT = re.compile(r"(?<!\\)<")
BAD_NAME = "<img src=x onerror=alert(1)>.records.json"
# Text elements whose value Streamlit renders as markdown: record text must reach them escaped.
MARKDOWN_KINDS = ("markdown", "caption", "title", "header", "subheader", "info", "warning", "error", "success",
                  "exception", "toast")


# ---------------------------------------------------------------- fixtures

def gpu_env(arch: str, machine: str) -> dict[str, Any]:
    env = make_env(machine)
    env.update(device="gpu", gpu_name=f"NVIDIA {arch} (synthetic)", arch=arch, compute_capability="9.0",
               gpu_count=1, gpu_memory_gb=80.0, sm_count=132, l2_mb=50.0, driver="0.0", cuda="13.0",
               nvml="unknown: synthetic fixture")
    return env


def fixture_record(run: int, op_case: str, provider: str, b: int, *, arch_scale: float, commit: str,
                   created: str) -> dict[str, Any]:
    r = make_record(b, run_id=f"synthetic-run-{run}")
    r["created"] = created
    r["git_commit"] = commit
    r["suite"] = "quick"
    r["case"].update(id=op_case, provider=provider, params={"B": b, "S": 100, "T": 50, "D": 32})
    r["method"]["timer"] = "cuda_event"
    speed = {"robocache": 1.0, "torch_eager": 4.0, "cupy": 2.5}[provider]
    t = (2.0 + b / 64) * speed * arch_scale * (1 + 0.01 * run)
    r["metrics"]["time_us"] = {"p20": t * 0.99, "p50": t, "p80": t * 1.01, "min": t * 0.98, "max": t * 1.05,
                               "mean": t}
    r["metrics"]["gb_per_s"] = 1e6 / t / 1e3
    r["metrics"]["ceiling_gb_per_s"] = 3000.0 / arch_scale
    r["metrics"]["pct_of_ceiling"] = 100 * r["metrics"]["gb_per_s"] / r["metrics"]["ceiling_gb_per_s"]
    return r


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two architectures, three commits, a B sweep, a failed case, a ``<script>`` case id and a bad file."""
    out = tmp_path_factory.mktemp("dash-results")
    for arch, machine, scale in (("H200", "synthetic-h200", 1.0), ("B200", "synthetic-b200", 0.6)):
        for run in range(3):
            commit = f"{run:x}" * 40
            created = f"2026-01-0{run + 1}T00:00:00Z"
            recs = []
            for provider in ("robocache", "torch_eager", "cupy"):
                for b in (16, 64, 256, 1024):
                    recs.append(fixture_record(run, f"resample/B{b}-S100-T50-D32", provider, b, arch_scale=scale,
                                               commit=commit, created=created))
                recs.append(fixture_record(run, f"resample/{SCRIPT}", provider, 8, arch_scale=scale, commit=commit,
                                           created=created))
            failed = copy.deepcopy(recs[0])
            failed["case"]["id"] = "resample/B4096-S100-T50-D32"
            failed.update(status="crash", reason=f"worker died with SIGSEGV {SCRIPT}", metrics=None, check=None)
            recs.append(failed)
            recs[1]["health"] = {"throttled": True, "contended": False, "noisy": True, "reasons": ["HW slowdown"]}
            write_records(out, gpu_env(arch, machine), recs, name=f"{machine}-run{run}")
    (out / BAD_NAME).write_text("{not json", encoding="utf-8")
    return out


def app(page: str, results: Path | str, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    """The page over ``results`` alone (the repository's results/ left out)."""
    monkeypatch.setenv(data.ENV_VAR, str(results))
    monkeypatch.setenv(data.NO_DEFAULT_ENV_VAR, "1")
    at = AppTest.from_file(str(REPO / "dashboard" / "views" / f"{page}.py"), default_timeout=60)
    return at.run()


def markdown_values(at: AppTest) -> list[tuple[str, str, Any]]:
    out = []
    for kind in MARKDOWN_KINDS:
        for el in at.get(kind):
            out.append((kind, str(getattr(el, "value", "")), el.proto))
    return out


def assert_no_markup(at: AppTest) -> None:
    """No element renders HTML, and record text (the <script> id, the <img> file name) is escaped."""
    for kind, value, proto in markdown_values(at):
        assert not getattr(proto, "allow_html", False), (kind, value)
        # every "<" that reaches markdown is escaped ("\\<"), so the text shows instead of becoming a tag
        assert not UNESCAPED_LT.search(value), (kind, value)
        assert SCRIPT not in value, (kind, value)


# ---------------------------------------------------------------- pages on fixtures

@pytest.mark.parametrize("page", PAGES)
def test_page_on_fixtures(page: str, fixture_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = app(page, fixture_dir, monkeypatch)
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert_no_markup(at)
    charts_ = at.get("plotly_chart")
    warnings = " ".join(w.value for w in at.warning)
    assert "SYNTHETIC" in warnings
    infos = " ".join(i.value for i in at.info)
    if page in ("overview", "wins", "sweeps", "architectures", "history"):
        assert charts_, page
    if page == "overview":
        assert at.dataframe and at.metric
        assert {m.label: m.value for m in at.metric}["failed"] == "1"
    if page == "architectures":
        assert "A100" in infos and "H100" in infos and "B200" not in infos
    if page == "history":  # the commit axis and the check's markers (tests/test_dashboard_history.py)
        assert any("commits in the order" in c.value for c in at.caption)
    if page == "multigpu":
        assert "No multi-GPU results yet" in infos and not charts_
    if page == "kernels":  # neither kernel versions nor torch.compile in these fixtures: said, not drawn
        assert "No kernel versions" in infos and "No case with both robocache and torch.compile" in infos
    if page == "runs":
        assert any("onerror" in w.value for w in at.warning)  # the bad file is listed, escaped
        assert len(at.dataframe) == 2  # clocks/health and the failed case
        assert "SIGSEGV" in at.dataframe[1].value["reason"].iloc[0]


def test_script_case_shows_as_data(fixture_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Selecting the <script> case keeps it data: in the selectbox and dataframes, never in markdown."""
    at = app("history", fixture_dir, monkeypatch)
    case = next(s for s in at.selectbox if s.label == "case")
    assert f"resample/{SCRIPT}" in case.options
    at = case.select(f"resample/{SCRIPT}").run()
    assert not at.exception and not at.error
    assert at.get("plotly_chart")
    assert set(at.dataframe[0].value["provider"].astype(str)) == {"robocache", "cupy"}  # and the strongest peer
    assert_no_markup(at)
    at = app("overview", fixture_dir, monkeypatch)
    assert any(f"resample/{SCRIPT}" in set(df.value.get("case", [])) for df in at.dataframe)


def test_sweep_axis_and_metric(fixture_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = app("sweeps", fixture_dir, monkeypatch)
    assert at.radio[0].options == ["B (batch)"]  # the axis named
    at = next(s for s in at.selectbox if s.label == "metric").select("gb_per_s").run()
    assert not at.exception and not at.error
    fig = at.get("plotly_chart")[0]
    spec = json.loads(fig.proto.spec)
    assert {t["name"] for t in spec["data"]} == {"robocache", "torch eager", "CuPy"}  # readable labels
    assert {t["name"]: t["line"]["color"] for t in spec["data"]} == {
        "robocache": charts.provider_color("robocache"), "torch eager": charts.provider_color("torch_eager"),
        "CuPy": charts.provider_color("cupy")}  # the same colour for a provider on every page
    assert spec["layout"]["xaxis"]["type"] == "log"


# ---------------------------------------------------------------- pages on the committed results

@pytest.mark.parametrize("page", PAGES)
def test_page_on_committed_results(page: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = app(page, committed.dirs_env(), monkeypatch)  # the committed records, never results/local/
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert_no_markup(at)
    infos = " ".join(i.value for i in at.info)
    if page in ("overview", "wins", "sweeps", "architectures", "history"):
        assert at.get("plotly_chart"), page
    if page == "architectures":
        assert "A100" in infos and "No H200" not in infos
        has_h100 = any(p.name.startswith("h100-") for p in committed.folders())
        assert ("No H100" in infos) != has_h100  # the H100 joins once its records are committed
    if page == "kernels":  # the committed H200 runs measured torch.compile beside robocache
        assert any(df.value.shape[0] for df in at.dataframe)
    if page == "multigpu":  # the committed H200 runs on 2- and 4-GPU machines
        assert "No multi-GPU results yet" not in infos
        # scaling lines and the gather bars of the first op, then DDP training's two charts per architecture
        from robocache.bench.views.multigpu import ddp_rows

        ddp_archs = {x["arch"] for x in ddp_rows(committed.load().records)}
        assert ddp_archs and len(at.get("plotly_chart")) == 2 + 2 * len(ddp_archs)
        table = at.dataframe[0].value
        assert {"nvidia-h200-x2", "nvidia-h200-x4"} <= set(table["machine"].astype(str))
        assert {1, 2, 4} <= set(table["world_size"].dropna().astype(int))
        assert (table["status"] == "ok").all()


def test_empty_and_missing_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for page in PAGES:
        at = app(page, tmp_path / "nowhere", monkeypatch)
        assert not at.exception, (page, at.exception)
        assert not at.get("plotly_chart")
        assert at.info or at.warning, page


# ---------------------------------------------------------------- pure pieces

def test_results_dirs_add_to_results(tmp_path: Path) -> None:
    """Given folders are added to results/ (CLI over environment), deduplicated, results/ optional."""
    default = str(data.DEFAULT_RESULTS)
    assert data.results_dirs([], {}) == (default,)
    env = {data.ENV_VAR: os.pathsep.join(["a", "b"])}
    assert data.results_dirs([], env) == (default, "a", "b")
    assert data.results_dirs(["--results", "c", "d"], env) == (default, "c", "d")
    assert data.results_dirs(["--results"], env) == (default, "a", "b")  # malformed: falls back, never exits
    # left out on request, by flag or environment
    assert data.results_dirs(["--results", "c", "--no-default-results"], env) == ("c",)
    assert data.results_dirs([], {**env, data.NO_DEFAULT_ENV_VAR: "1"}) == ("a", "b")
    assert data.results_dirs(["--no-default-results"], {}) == (default,)  # nothing else to show
    # a folder inside results/ (make run's results/local) is not listed twice; repeats go
    inner = data.DEFAULT_RESULTS / "h200-nvidia-h200"
    again = str(data.DEFAULT_RESULTS / "h200-nvidia-h200" / "..")
    assert data.results_dirs(["--results", str(inner), default, again], {}) == (default,)
    # inside a folder given explicitly, by real path, whatever the order
    (tmp_path / "run" / "sub").mkdir(parents=True)
    dirs = data.results_dirs(["--no-default-results", "--results", str(tmp_path / "run" / "sub"),
                              str(tmp_path / "run"), str(tmp_path / "run" / "sub" / "..")], {})
    assert dirs == (str(tmp_path / "run"),)
    # a symlink inside results/ to a folder elsewhere is kept: the store's walk does not follow links
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "run" / "link").symlink_to(tmp_path / "elsewhere")
    dirs = data.results_dirs(["--no-default-results", "--results", str(tmp_path / "run"),
                              str(tmp_path / "run" / "link")], {})
    assert dirs == (str(tmp_path / "run"), str(tmp_path / "run" / "link"))


def test_extra_folder_adds_records_loaded_once(fixture_dir: Path, tmp_path: Path) -> None:
    """results/ plus a fixture folder: both sets of records; a folder listed twice loads once."""
    committed, _ = data.load_frame([str(data.DEFAULT_RESULTS)])
    fixtures, _ = data.load_frame([str(fixture_dir)])
    dirs = data.results_dirs(["--results", str(fixture_dir), str(fixture_dir)], {})
    both, _ = data.load_frame(dirs)
    assert len(both) == len(committed) + len(fixtures)
    assert both["synthetic"].sum() == len(fixtures)


def test_frame_columns_and_series(fixture_dir: Path) -> None:
    df, bad = data.load_frame([str(fixture_dir)])
    assert [Path(p).name for p, _ in bad] == [BAD_NAME]
    for col in ("run_id", "created", "git_commit", "suite", "frontend", "machine", "arch", "gpu_name", "device",
                "op", "case_id", "provider", "dtype", "timer", "cache", "input_sets", "status", "reason", "p20",
                "p50", "p80", "gb_per_s", "pct_of_ceiling", "items_per_s", "ceiling_gb_per_s", "throttled",
                "contended", "noisy", "synthetic", "params", "B", "S", "T", "D", "N"):
        assert col in df.columns, col
    assert len(df) == 2 * 3 * 16
    assert df["synthetic"].all() and df["N"].isna().all() and set(df["B"].dropna()) >= {16, 1024}
    wide = tables.side_by_side(df)
    # the latest run per machine, never mixed across machines
    assert set(wide["machine"]) == {"synthetic-h200", "synthetic-b200"}
    assert set(wide["run_id"]) == {"synthetic-run-2"}
    assert (wide["best"] == "robocache").all()
    speed = tables.speedups(wide)
    assert speed[speed["peer"] == "torch_eager"]["speedup"].round(6).eq(4.0).all()
    fig = charts.ranked_bars(tables.wins(wide))
    assert fig.layout.xaxis.type == "log" and len(fig.data) == 1  # the strongest peer of every case: CuPy
    assert fig.data[0].orientation == "h"
    assert data.md_escape("<b>*x*</b>") == "\\<b\\>\\*x\\*\\</b\\>"


# ---------------------------------------------------------------- plotly never sees record text as markup

LINK = '<a href="javascript:alert(1)">x</a>'
BOLD = "<b>bold</b>"
# plotly's own markup in the builders' hover templates (constants, not record text)
TEMPLATE_TAGS = re.compile(r"<br>|<extra>|</extra>")


def _strings(node: Any, key: str = "") -> list[tuple[str, str]]:
    """Every (key, string) in a figure's JSON, recursively."""
    if isinstance(node, str):
        return [(key, node)]
    if isinstance(node, dict):
        return [x for k, v in node.items() for x in _strings(v, k)]
    if isinstance(node, list):
        return [x for v in node for x in _strings(v, key)]
    return []


def test_plain_escapes_plotly_markup() -> None:
    assert charts.plain(BOLD) == "&lt;b&gt;bold&lt;/b&gt;"
    assert charts.plain("a &lt; b") == "a &amp;lt; b"  # an entity in record text shows as typed, too
    assert charts.plain_col(pd.Series([LINK, None])).tolist() == [
        '&lt;a href="javascript:alert(1)"&gt;x&lt;/a&gt;', "None"]


def test_figures_escape_record_text(fixture_dir: Path) -> None:
    """Case ids, providers, dtypes, machines, architectures, run ids and commits carrying plotly markup
    come out escaped in every figure: legend names, axis categories, titles, hover data."""
    df, _ = data.load_frame([str(fixture_dir)])
    df = df[df["status"] == "ok"].copy()
    for col in ("case_id", "machine", "arch", "run_id", "git_commit", "dtype", "op"):
        evil = BOLD + " " + df[col].astype(str) + " " + LINK
        df[col] = evil.astype("category") if isinstance(df[col].dtype, pd.CategoricalDtype) else evil
    df["provider"] = df["provider"].astype(str).replace({"torch_eager": BOLD, "cupy": LINK}).astype("category")
    one = df[df["machine"].astype(str).str.contains("h200")]
    evil_title = f"{BOLD} {LINK}"
    figs = {
        "speedup": charts.ranked_bars(tables.wins(tables.side_by_side(one)), title=evil_title, prefix_machine=True),
        "sweep": charts.sweep_lines(one, "B", "p50", title=evil_title),
        "arch": charts.arch_bars(df, "p50", title=evil_title),
        "history": charts.history_lines(one, "p50", title=evil_title),
        "empty": charts.history_lines(one.iloc[:0], "p50", title=evil_title),
    }
    for name, fig in figs.items():
        doc = json.loads(fig.to_json())
        texts = _strings(doc)
        for key, text in texts:
            if key == "hovertemplate":
                text = TEMPLATE_TAGS.sub("", text)
            assert "<" not in text and ">" not in text, (name, key, text)
        joined = "\n".join(t for _, t in texts)
        assert charts.plain(LINK) in joined and charts.plain(BOLD) in joined, name
        assert doc["layout"]["title"]["text"] == charts.plain(evil_title), name
        names = {t.get("name") for t in doc["data"]}
        if name in ("sweep", "history"):  # providers (peers) in the legend, escaped
            assert any(n and charts.plain(BOLD) in n for n in names), (name, names)
        if name == "speedup":  # the strongest peer (CuPy, renamed to a link) in the legend, escaped
            assert names == {charts.plain(LINK)}, names
        if name == "arch":
            assert all(charts.plain(LINK) in n for n in names), names
    # the categories shown on the (ranked bars') y axis are the escaped architecture and case ids
    ys = [y for t in json.loads(figs["speedup"].to_json())["data"] for y in t["y"]]
    assert ys and all(y.startswith(charts.plain(BOLD)) for y in ys)


# ---------------------------------------------------------------- speed
# The 100,000-record load is a benchmark, not a test (a busy machine must not fail a test):
# scripts/bench_load.py, figures in docs/harness.md.


def test_no_html_rendering_in_source() -> None:
    """No page or helper can render markup: no unsafe_allow_html, st.html or components anywhere."""
    for path in (REPO / "dashboard").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for banned in ("unsafe_allow_html", "st.html", "components.v1", "st.components", "components.html",
                       "st.iframe"):
            assert banned not in text, (path, banned)


def test_make_run_ends_serving_the_dashboard() -> None:
    """`make run` ends with the dashboard on 127.0.0.1 over results/ + RUN_OUT, unless SERVE=0 (dry run:
    make -n prints the recipe and runs nothing, since no recipe line calls $(MAKE))."""
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("no make here")

    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}  # under make test

    def dry(*args: str) -> str:
        return subprocess.run(["make", "-n", "--no-print-directory", *args], cwd=REPO, env=env, capture_output=True,
                              text=True, check=True).stdout

    serve = ("streamlit run dashboard/app.py --server.address 127.0.0.1 --server.port 8765 "
             "--server.headless true --browser.gatherUsageStats false -- --results some/run")
    out = dry("run", "PORT=8765", "RUN_OUT=some/run")
    assert "robocache-bench run --suite quick --out some/run" in out
    assert out.index("--headline") < out.index("Dashboard: http://127.0.0.1:8765") < out.rindex("exec ")
    assert out.rstrip().endswith(serve), out[-400:]
    assert 'if [ "1" = 0 ]; then exit' in out
    assert 'if [ "0" = 0 ]; then exit' in dry("run", "SERVE=0")  # the opt-out exits before serving
    assert dry("serve", "PORT=8765", "RUN_OUT=some/run").rstrip().endswith(serve)


def test_app_declares_pages(fixture_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """app.py runs its default page (the overview) through st.navigation."""
    monkeypatch.setenv(data.ENV_VAR, str(fixture_dir))
    monkeypatch.setenv(data.NO_DEFAULT_ENV_VAR, "1")
    at = AppTest.from_file(str(REPO / "dashboard" / "app.py"), default_timeout=60).run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Overview"]
    assert at.get("plotly_chart")


# ---------------------------------------------------------------- the Multi-GPU page on synthetic multi-GPU records

def multigpu_record(arch_scale: float, op_tag: str, scaling: str, gather: str, k: int, provider: str = "robocache",
                    run: str = "synthetic-multigpu-run") -> dict[str, Any]:
    """A SYNTHETIC multi-GPU record (schema version 2): made-up times that scale a little worse than linearly."""
    b = 4096
    r = make_record(b, run_id=run)
    r["suite"] = "multigpu"
    gtag = {"none": "nogather", "all": "allgather", "one": "gather"}[gather]
    r["case"].update(id=f"resample/{op_tag}-{scaling}-g{k}-{gtag}",
                     provider=provider, params={"B": b, "S": 100, "T": 50, "D": 32, "world_size": k,
                                                "scaling": scaling, "gather": gather,
                                                "B_rank": b if scaling == "weak" else b // k,
                                                "B_total": b * k if scaling == "weak" else b},
                     items=b * k if scaling == "weak" else b)
    r["method"]["timer"] = "cuda_event"
    t1 = 100.0 * arch_scale * (1.3 if gather != "none" else 1.0)
    step = t1 * (1 + 0.05 * (k - 1)) if scaling == "weak" else t1 / k * (1 + 0.05 * (k - 1))
    items = r["case"]["items"]
    agg = items / (step * 1e-6)
    eff = t1 / step if scaling == "weak" else t1 / (k * step)
    r["metrics"]["time_us"] = {"p20": step * 0.99, "p50": step, "p80": step * 1.01, "min": step * 0.98,
                               "max": step * 1.05, "mean": step}
    r["metrics"]["items_per_s"] = agg
    ag = 2 * 50 * 32 * 4 * (b if scaling == "weak" else b // k) * k if gather != "none" else None
    r["distributed"] = {
        "world_size": k, "nodes": 1, "backend": "nccl", "scaling": scaling, "gather": gather,
        "items_per_rank": [items // k] * k, "per_rank_us": [step * 0.8] * k, "per_rank_step_us": [step] * k,
        "step_us": step, "aggregate_items_per_s": agg, "efficiency": eff, "baseline_step_us": t1,
        "gather_bytes": ag, "gather_us": 0.2 * step if ag else None,
        "gather_gb_per_s": ag / (0.2 * step * 1e-6) / 1e9 if ag else None,
        "collective_us": 0.15 * step if ag else None,
        "collective_gb_per_s": ag / (0.15 * step * 1e-6) / 1e9 if ag else None,
        "collective_busbw_gb_per_s": ag / (0.15 * step * 1e-6) / 1e9 * (k - 1) / k if ag else None}
    return r


@pytest.fixture(scope="module")
def multigpu_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SYNTHETIC multi-GPU records of two architectures, 1-8 GPUs, weak/strong, gathered or not, a failed case,
    and a <script> provider."""
    out = tmp_path_factory.mktemp("dash-multigpu")
    for arch, machine, scale in (("H200", "synthetic-h200-x8", 1.0), ("B200", "synthetic-b200-x8", 0.6)):
        recs = []
        for scaling in ("weak", "strong"):
            for gather in ("none", "all"):
                for k in (1, 2, 4, 8):
                    recs.append(multigpu_record(scale, "B4096-S100-T50-D32", scaling, gather, k))
        recs.append(multigpu_record(scale, "B4096-S100-T50-D32", "weak", "all", 2, provider=SCRIPT))
        crashed = multigpu_record(scale, "B4096-S100-T50-D32", "weak", "one", 8)
        crashed.update(status="crash", reason=f"rank 3 died without reporting an error {SCRIPT}", metrics=None,
                       method=None, distributed=None)
        recs.append(crashed)
        write_records(out, gpu_env(arch, machine), recs, name=f"{machine}-multigpu")
    return out


def _values(v: Any) -> list[float]:
    """A plotly array from a figure's JSON: a list, or plotly 6's typed-array form {"dtype", "bdata"}."""
    if isinstance(v, dict) and "bdata" in v:
        import base64

        import numpy as np

        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"]).tolist()
    return list(v)


def test_multigpu_page_on_synthetic_records(multigpu_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = app("multigpu", multigpu_dir, monkeypatch)
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert_no_markup(at)
    assert "SYNTHETIC" in " ".join(w.value for w in at.warning)
    assert any("failed" in w.value for w in at.warning)  # the crash is counted, never drawn
    figs = [json.loads(f.proto.spec) for f in at.get("plotly_chart")]
    # per architecture: the efficiency lines and the gather bars
    assert len(figs) == 4, [f["layout"]["title"]["text"] for f in figs]
    titles = [f["layout"]["title"]["text"] for f in figs]
    assert any("B200" in t for t in titles) and any("H200" in t for t in titles)
    lines = figs[0]
    names = {t["name"] for t in lines["data"]}
    assert "resample/B4096-S100-T50-D32-weak-nogather robocache" in names
    assert any(charts.plain(SCRIPT) in n for n in names)  # escaped, drawn as text
    weak = next(t for t in lines["data"] if t["name"] == "resample/B4096-S100-T50-D32-weak-nogather robocache")
    assert _values(weak["x"]) == [1, 2, 4, 8]
    assert _values(weak["y"])[0] == pytest.approx(1.0) and _values(weak["y"])[-1] < 1.0
    bars = figs[1]
    assert {t["name"] for t in bars["data"]} == {"the op's gather (algbw)", "all_gather alone (algbw)",
                                                 "all_gather alone (busbw)"}
    # side by side: the per-architecture table, then every record's
    both = at.dataframe[0].value
    assert {"B200 (synthetic-b200-x8)", "H200 (synthetic-h200-x8)"} <= set(both.columns)
    table = at.dataframe[-1].value
    assert set(table["world_size"].dropna()) == {1, 2, 4, 8}
    assert (table["status"] == "crash").sum() == 2  # one per machine
    # another metric and one scaling mode redraw without errors
    at = next(s for s in at.selectbox if s.label == "metric").select("aggregate_items_per_s").run()
    at = next(s for s in at.selectbox if s.label == "scaling").select("strong").run()
    assert not at.exception and not at.error
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["layout"]["yaxis"]["type"] == "log"
    assert all("strong" in t["name"] for t in spec["data"])


def test_multigpu_frame_columns(multigpu_dir: Path) -> None:
    df, bad = data.load_frame([str(multigpu_dir)])
    assert not bad and df["synthetic"].all()
    for col in frame.MULTI_COLUMNS:
        assert col in df.columns, col
    ok = df[df["status"] == "ok"]
    assert ok["world_size"].notna().all() and set(ok["backend"]) == {"nccl"}
    assert df[df["status"] == "crash"]["world_size"].isna().all()
    one = ok[(ok["world_size"] == 1)]
    assert (one["efficiency"].round(9) == 1.0).all()


H200_RUNS = ("h200-nvidia-h200-x4/20261121T045537Z-630882", "h200-nvidia-h200-x2/20261121T042149Z-b6f2f9")
DDP_LOADERS = ("cpu_workers", "robocache", "episode_cache")


def ddp_record(k: int, loader: str, *, steps: float, wait: float, run: str, model: str = "mlp",
               status: str = "ok") -> dict[str, Any]:
    """A SYNTHETIC DDP training record (the pipelines suite's training step over k ranks): made-up figures."""
    r = make_record(32, run_id=run)
    r["suite"] = "pipelines"
    step = 1e6 / steps
    r["case"].update(id=f"train/{model}-B32-W8-406ep-s0-ddp-g{k}", op="train", provider=loader,
                     params={"B": 32, "workers": 8, "model": model, "steps": 30, "ranks": k}, items=32 * k,
                     bytes=0)
    r["metrics"]["time_us"] = {"p20": step, "p50": step, "p80": step, "min": step, "max": step, "mean": step}
    r["metrics"]["items_per_s"] = 32 * k * steps
    r["pipeline"] = {"kind": "train", "resample_on": "cpu_workers" if loader == "cpu_workers" else "gpu",
                     "figures": {"steps_per_s": steps, "traj_per_s": 32 * k * steps, "data_wait_share": wait,
                                 "ranks": float(k)}}
    r["distributed"] = {"world_size": k, "nodes": 1, "backend": "nccl", "scaling": "weak", "gather": "none",
                        "items_per_rank": [32] * k, "per_rank_us": [step] * k, "per_rank_step_us": [step] * k,
                        "step_us": step, "aggregate_items_per_s": 32 * k * steps, "efficiency": None,
                        "baseline_step_us": None, **dict.fromkeys(
                            ("gather_bytes", "gather_us", "gather_gb_per_s", "collective_us", "collective_gb_per_s",
                             "collective_busbw_gb_per_s"))}
    if status != "ok":
        r.update(status=status, reason=f"DDP launch of {k} rank(s): rank 1 died {SCRIPT}", metrics=None,
                 method=None, distributed=None, pipeline=None)
    return r


@pytest.fixture(scope="module")
def h100_h200_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The committed H200 multi-GPU records (2- and 4-GPU machines, as recorded) beside SYNTHETIC H100 ones made
    here from them (a FIXTURE: the same cases, 10% lower efficiency past one GPU, never committed as results),
    and SYNTHETIC DDP training records of both architectures at 1, 2 and 4 GPUs with a failed case."""
    from robocache.bench import store
    from robocache.bench.schema import to_dict

    out = tmp_path_factory.mktemp("dash-h100-h200")
    for run in H200_RUNS:
        folder, prefix = run.split("/")
        (out / folder).mkdir(exist_ok=True)
        for f in sorted((REPO / "results" / folder).glob(prefix + "-multigpu-g*.records.json")):
            (out / folder / f.name).write_bytes(f.read_bytes())
    real = store.load(REPO / "results" / "h200-nvidia-h200-x4")
    h100 = []
    for rec in real.records:
        if not str(rec.source).rsplit("/", 1)[1].startswith(H200_RUNS[0].split("/")[1]):
            continue
        r = {k: v for k, v in to_dict(rec).items() if k not in ("env", "source")}
        r.update(synthetic=True, run_id="synthetic-h100-multigpu")
        d = r["distributed"]
        if d["world_size"] > 1 and d["efficiency"] is not None:
            d["efficiency"] *= 0.9
            d["step_us"] /= 0.9
        h100.append(r)
    env = gpu_env("H100", "synthetic-h100-x4")
    env["gpu_count"] = 4
    write_records(out / "synthetic-h100", env, h100, name="synthetic-h100-x4-multigpu")
    for arch, machine, fast in (("H100", "synthetic-h100-x4", 1.0), ("H200", "synthetic-h200-x4", 1.2)):
        recs = []
        for loader, steps, wait in (("cpu_workers", 40.0, 0.85), ("robocache", 65.0, 0.7),
                                    ("episode_cache", 90.0, 0.2)):
            for k in (1, 2, 4):
                recs.append(ddp_record(k, loader, steps=fast * steps / (1 + 0.1 * (k - 1)), wait=wait + 0.02 * k,
                                       run=f"synthetic-ddp-{arch}"))
        recs.append(ddp_record(4, "robocache", steps=1.0, wait=0.0, run=f"synthetic-ddp-{arch}", model="diffusion",
                               status="crash"))
        e = gpu_env(arch, machine)
        e["gpu_count"] = 4
        write_records(out / f"synthetic-ddp-{arch}", e, recs, name=f"{machine}-ddp")
    return out


def test_multigpu_page_compares_h100_and_h200(h100_h200_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both architectures' scaling side by side on one y scale, a table of each one's largest machine case by
    case, and DDP training (steps/s per GPU, data-wait share at 1/2/4 GPUs per loader) for both."""
    at = app("multigpu", h100_h200_dir, monkeypatch)
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert_no_markup(at)
    assert "SYNTHETIC" in " ".join(w.value for w in at.warning)
    assert [s.value for s in at.selectbox if s.label == "op"] == ["resample"]
    figs = [json.loads(f.proto.spec) for f in at.get("plotly_chart")]
    titles = [f["layout"]["title"]["text"] for f in figs]
    # two columns: per architecture its efficiency lines and gather bars; then DDP: steps/s and data wait each
    assert any(t.startswith("resample on H100: scaling efficiency") for t in titles), titles
    assert any(t.startswith("resample on H200: scaling efficiency") for t in titles), titles
    lines = [f for f, t in zip(figs, titles) if "scaling efficiency" in t]
    assert len(lines) == 2 and lines[0]["layout"]["yaxis"]["range"] == lines[1]["layout"]["yaxis"]["range"]
    h200 = next(f for f, t in zip(figs, titles) if t.startswith("resample on H200: scaling"))
    # the real records: both H200 machines (x2 and x4), their lines named by machine
    assert any("(nvidia-h200-x2)" in t["name"] for t in h200["data"]) and any(
        "(nvidia-h200-x4)" in t["name"] for t in h200["data"])
    both = at.dataframe[0].value
    assert {"H100 (synthetic-h100-x4)", "H200 (nvidia-h200-x4)"} <= set(both.columns), both.columns
    assert set(both["GPUs"]) == {1, 2, 4}
    four = both[(both["GPUs"] == 4) & (both["op/shape-scaling-gather"] == "resample/B4096-S100-T50-D32-weak-nogather")]
    assert len(four) == 1
    h1, h2 = four["H100 (synthetic-h100-x4)"].iloc[0], four["H200 (nvidia-h200-x4)"].iloc[0]
    assert h1 == pytest.approx(0.9 * h2)  # the fixture's H100 is the real H200 run at 0.9x past one GPU
    # DDP training for both architectures
    ddp = [(f, t) for f, t in zip(figs, titles) if "steps/s per GPU" in t or "data-wait share" in t]
    assert sorted(t for _, t in ddp) == ["H100: data-wait share of the step vs GPUs", "H100: steps/s per GPU vs GPUs",
                                         "H200: data-wait share of the step vs GPUs", "H200: steps/s per GPU vs GPUs"]
    steps = next(f for f, t in ddp if t == "H200: steps/s per GPU vs GPUs")
    fuse = next(t for t in steps["data"] if t["name"] == "mlp B32: robocache.fuse")
    assert _values(fuse["x"]) == [1, 2, 4] and _values(fuse["y"])[0] == pytest.approx(1.2 * 65.0)
    assert {t["name"] for t in steps["data"]} == {"mlp B32: CPU workers (NumPy)", "mlp B32: robocache.fuse",
                                                  "mlp B32: EpisodeCache"}
    table = at.dataframe[-1].value
    assert {"steps/s per GPU", "data-wait share", "GPUs", "loader"} <= set(table.columns)
    assert len(table) == 2 * (3 * 3 + 1) and (table["status"] == "crash").sum() == 2
    assert any("DDP case(s) failed" in w.value for w in at.warning)


def test_multigpu_figures_escape_record_text(multigpu_dir: Path) -> None:
    df, _ = data.load_frame([str(multigpu_dir)])
    df = df[df["status"] == "ok"].copy()
    for col in ("case_id", "machine"):
        df[col] = (BOLD + " " + df[col].astype(str) + " " + LINK).astype("category")
    evil_title = f"{BOLD} {LINK}"
    for fig in (charts.scaling_lines(df, "efficiency", title=evil_title), charts.gather_bars(df, title=evil_title),
                charts.scaling_lines(df.iloc[:0], "step_us", title=evil_title)):
        doc = json.loads(fig.to_json())
        for key, text in _strings(doc):
            if key == "hovertemplate":
                text = TEMPLATE_TAGS.sub("", text)
            assert "<" not in text and ">" not in text, (key, text)
        assert doc["layout"]["title"]["text"] == charts.plain(evil_title)


# ---------------------------------------------------------------- the Kernels page, labels and colours, two GPUs

@pytest.fixture(scope="module")
def kernels_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SYNTHETIC nightly runs on machines named like the lent H100 and H200 (tests/synthetic_kernels.py)."""
    from tests.synthetic_kernels import write_fixture

    return write_fixture(tmp_path_factory.mktemp("dash-kernels"))


def test_kernels_page_on_synthetic_records(kernels_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = app("kernels", kernels_dir, monkeypatch)
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert_no_markup(at)
    assert "SYNTHETIC" in " ".join(w.value for w in at.warning)
    assert [h.value for h in at.header] == ["Optimisation journey", "Against torch.compile at its best", "Call cost"]
    journey, summary, cases, cost = (df.value for df in at.dataframe)
    # the resample journey of both GPUs, from the nightly runs (the newer quick run is not picked)
    assert set(journey["machine"]) == {"nvidia-h100-x1", "nvidia-h200"}
    assert journey["version"].tolist() == ["v1", "v2", "public"] * 2
    assert journey["speedup vs first"].round(6).tolist() == [1.0, 2.0, 2.0] * 2
    assert set(journey["torch.compile mode"].dropna()) == {"default"}
    assert journey["run"].str.endswith("-nightly").all()
    # torch.compile at its best: the worst resample case is the max-autotune one
    assert summary["worst"].round(6).tolist() == [0.4, 0.4]
    assert (summary["worst case"] == "resample/B4096-S100-T50-D32 bfloat16").all()
    assert summary["cases >= 1.0x"].tolist() == [2, 2]
    assert any(SCRIPT in c for c in cases["case"])  # record text stays data in the dataframe
    # in the provider table's order: the public call, kernel version v1, the public call on CuPy arrays, the floor
    assert cost["x bare launch"].dropna().round(6).tolist() == [1.8, 9.0, 1.4, 1.0] * 2
    assert "robocache@cupy" not in next(s for s in at.selectbox if s.label == "robocache provider").options
    figs = [json.loads(f.proto.spec) for f in at.get("plotly_chart")]
    assert len(figs) == 2
    assert {t["name"] for t in figs[0]["data"]} == {"H100 (nvidia-h100-x1)", "H200 (nvidia-h200)"}
    assert any(charts.plain(SCRIPT) in x for t in figs[1]["data"] for x in t["x"])  # escaped in the chart
    # another op, and a kernel version against torch.compile
    at = next(s for s in at.selectbox if s.label == "op").select("voxelize").run()
    assert not at.exception and not at.error
    assert set(at.dataframe[0].value["case"]) == {"voxelize/B4-N100000-G64-count-uniform"}
    at = next(s for s in at.selectbox if s.label == "robocache provider").select("robocache@v1").run()
    assert not at.exception and not at.error
    assert at.dataframe[1].value["worst"].round(6).tolist() == [1.5, 1.5]  # mean-clustered: min(2, 1.5) / 1.0
    # one machine only
    at = next(m for m in at.multiselect if m.label == "machines").unselect("nvidia-h100-x1").run()
    assert not at.exception and set(at.dataframe[0].value["machine"]) == {"nvidia-h200"}


def test_architectures_page_compares_h100_and_h200(kernels_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = app("architectures", kernels_dir, monkeypatch)
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert_no_markup(at)
    infos = " ".join(i.value for i in at.info)
    assert "No H100" not in infos and "No H200" not in infos and "A100" in infos
    boxes = {s.label: s for s in at.selectbox}
    assert boxes["baseline machine"].value == "nvidia-h100-x1" and boxes["compared machine"].value == "nvidia-h200"
    ratio = at.dataframe[-1].value
    # the latest record of each series: the fixture's H100 is 1.4x slower than the H200's nightly run, and the
    # H200's newer quick run measured the standard case 3x slower again
    got = dict(zip(ratio["case"], ratio["ratio (x)"].round(6)))
    assert got == {"resample/B4096-S100-T50-D32": 1.4, "resample/B256-S100-T50-D32": round(1.4 / 3.0, 6)}
    figs = [json.loads(f.proto.spec) for f in at.get("plotly_chart")]
    assert len(figs) == 5 and "nvidia-h200 speedup over nvidia-h100-x1" in figs[-1]["layout"]["title"]["text"]  # 2 bars, 2 rooflines, the ratio
    # torch.compile in both modes beside robocache, with their readable labels
    at = next(m for m in at.multiselect if m.label == "providers").select("torch_compile@max-autotune").run()
    assert not at.exception and not at.error
    names = {t["name"] for t in json.loads(at.get("plotly_chart")[-1].proto.spec)["data"]}
    assert names == {"robocache", "torch.compile (max-autotune)"}


def test_provider_labels_and_colours() -> None:
    from robocache import providers

    assert charts.provider_label("robocache@v3") == "robocache v3"
    assert charts.provider_label("torch_compile@max-autotune") == "torch.compile (max-autotune)"
    versions = [charts.provider_color(f"robocache@v{n}") for n in range(1, 5)]
    assert len(set(versions)) == 4 and providers.get("robocache").color not in versions
    assert charts.provider_color("torch_compile@max-autotune") != charts.provider_color("torch_compile")
    # the dashboard's colour and label of every provider are the table's
    for name in providers.names():
        assert charts.provider_color(name) == providers.get(name).color
        assert charts.provider_label(name) == providers.get(name).label
    # an unknown provider gets a colour from its name alone: the same in every process and page
    assert charts.provider_color("new_peer") == charts.provider_color("new_peer") == providers.stable_pick(
        "new_peer", providers.OTHER_COLORS)
    assert charts.provider_color("robocache@v99") == providers.VERSION_COLORS[-1]
    # pickers list providers in the table's order too (robocache, its versions, the peers, unknown names last)
    frame = pd.DataFrame({"provider": ["zeta", "cupy", "robocache@v2", "torch_compile", "robocache"]})
    assert data.options(frame, "provider") == ["robocache", "robocache@v2", "torch_compile", "cupy", "zeta"]


def test_a_provider_has_one_colour_in_every_chart(fixture_dir: Path) -> None:
    """Speedup, ceiling, sweep, history and machine-ratio charts draw a provider in the table's colour."""
    df, _ = data.load_frame([str(fixture_dir)])
    one = df[(df["status"] == "ok") & df["machine"].astype(str).str.contains("h200")]
    figs = [charts.ranked_bars(tables.wins(tables.side_by_side(one))),
            charts.sweep_lines(one[one["run_id"] == "synthetic-run-2"], "B", "p50"),  # one run: the Sweeps page's
            charts.history_lines(one, "p50")]
    machines = data.options(df[df["status"] == "ok"], "machine")
    assert len(machines) >= 2  # the fixtures hold two machines: the Architectures page's ratio chart too
    figs.append(charts.machine_ratio_bars(tables.machine_ratio(df, machines[0], machines[1]), machines[0],
                                          machines[1]))
    labels = {charts.provider_name(p): p for p in df["provider"].astype(str).unique()}
    seen: dict[str, set[str]] = {}
    for fig in figs:
        matched = 0
        for t in json.loads(fig.to_json())["data"]:
            colour = (t.get("marker") or {}).get("color") or (t.get("line") or {}).get("color")
            # history legends are "<provider> <dtype>": the provider is all but the last word
            name = t["name"] if t["name"] in labels else t["name"].rsplit(" ", 1)[0]
            if name in labels:
                seen.setdefault(name, set()).add(colour)
                matched += 1
        assert matched, fig.layout.title.text  # every chart drew providers in the table's colours
    for name, colours in seen.items():
        assert colours == {charts.provider_color(labels[name])}, (name, colours)
    assert len(seen) >= 3, seen


def test_provider_facts_live_in_the_table_only() -> None:
    """No colour literal, provider label or provider list outside robocache/providers: the views, the harness and
    the front ends ask the table."""
    from robocache import providers

    colour = re.compile(r"[\"']#[0-9a-fA-F]{6}[\"']")
    # the tables these modules held before (colours, labels, peer lists, array kinds, graph notes, GPU-only names)
    facts = re.compile(r"^\s*(\w*COLORS|LABEL|PEERS|KIND|NO_GRAPH|GPU_ONLY|PUBLIC_API|CUPY_ARRAYS|BARE_HINTS|"
                       r"\w*_PROVIDERS)\s*=\s*[({\[]")
    # a list of provider names written out (names that are not also module names: those with _ or @)
    own = [n for n in providers.names() if "_" in n or "@" in n]
    named = re.compile("[\"'](" + "|".join(re.escape(n) for n in own) + ")[\"']")
    files = [*sorted((REPO / "dashboard").rglob("*.py")), *sorted((REPO / "robocache" / "bench").rglob("*.py")),
             *sorted((REPO / "benchmarks").rglob("*.py"))]
    hits = [f"{f.relative_to(REPO)}:{i}: {line.strip()}" for f in files
            for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1)
            if colour.search(line) or facts.search(line) or len(set(named.findall(line.split("  #")[0]))) >= 2]
    assert not hits, "\n".join(hits)
    assert len(own) >= 5  # the check has names to look for


def test_kernel_tables_from_the_frame(kernels_dir: Path) -> None:
    """The dashboard's kernel tables are the report's functions over the frame: the same numbers."""
    from robocache.bench import store
    from robocache.bench.views import kernels

    df, bad = data.load_frame([str(kernels_dir)])
    assert not bad
    recs = store.load(kernels_dir).records
    frame_rows = tables.journey(tables.kernel_rows(df)).to_dict("records")
    report_rows = kernels.journey_rows(recs)
    assert len(frame_rows) == len(report_rows) == 18
    for a, b in zip(frame_rows, report_rows):
        for k in ("machine", "op", "version", "case", "dtype", "p50_us", "speedup_vs_v1", "vs_compile",
                  "geomean_vs_v1", "cases_vs_v1"):
            assert a[k] == pytest.approx(b[k]) if isinstance(b[k], float) else a[k] == b[k], k
    cases, summary = tables.vs_compile(tables.kernel_rows(df))
    assert summary.to_dict("records") == kernels.vs_compile_summary(kernels.vs_compile_cases(recs))
    assert len(tables.call_cost(df)) == 8
    # robocache@vN are kernel versions, the call-cost variant and the bare launch are not peers either: the
    # overview's speedups leave them out (robocache "losing" to the launch floor is not a peer's win)
    peers = set(tables.speedups(tables.side_by_side(df))["peer"])
    assert peers == {"torch_compile", "torch_compile@max-autotune", "torch_eager"}
    assert tables.machine_pair(df) == ("nvidia-h100-x1", "nvidia-h200")
    assert tables.machine_pair(df[df["machine"] == "nvidia-h200"]) is None
    # a two-GPU H200 with more records of cases of its own (sampled seeds, one op per GPU) does not displace the
    # one-GPU H200 that shares cases with the H100; sharing cases, it would win on its records
    h200 = df[df["machine"] == "nvidia-h200"]
    own = pd.concat([h200, h200]).assign(machine="nvidia-h200-x2")
    own = own.assign(case_id=own["case_id"].astype(str) + "-own")
    assert tables.machine_pair(pd.concat([df, own], ignore_index=True)) == ("nvidia-h100-x1", "nvidia-h200")
    shared = pd.concat([h200, h200]).assign(machine="nvidia-h200-x2")
    assert tables.machine_pair(pd.concat([df, shared], ignore_index=True)) == ("nvidia-h100-x1", "nvidia-h200-x2")
    # a machine whose records name both architectures (a reused name) shares every case with itself: never a pair
    h100 = df[df["machine"] == "nvidia-h100-x1"]
    both = pd.concat([df, h100.assign(machine="nvidia-h200"), pd.concat([h200] * 3).assign(machine="nvidia-h200")],
                     ignore_index=True)
    assert tables.machine_pair(both) == ("nvidia-h100-x1", "nvidia-h200")
    assert tables.machine_pair(pd.concat([h200, h100.assign(machine="nvidia-h200")], ignore_index=True)) is None


def test_kernel_figures_escape_record_text(kernels_dir: Path) -> None:
    df, _ = data.load_frame([str(kernels_dir)])
    for col in ("machine", "arch", "case_id"):
        df[col] = (BOLD + " " + df[col].astype(str) + " " + LINK).astype("category")
    evil_title = f"{BOLD} {LINK}"
    recs = tables.kernel_rows(df)
    cases, _ = tables.vs_compile(recs)
    two = data.options(df, "machine")
    for fig in (charts.journey_bars(tables.journey(recs), title=evil_title), charts.ratio_bars(cases, title=evil_title),
                charts.machine_ratio_bars(tables.machine_ratio(df, two[0], two[1]), two[0], two[1], title=evil_title),
                charts.journey_bars(tables.journey([]), title=evil_title)):
        doc = json.loads(fig.to_json())
        for key, text in _strings(doc):
            if key == "hovertemplate":
                text = TEMPLATE_TAGS.sub("", text)
            assert "<" not in text and ">" not in text, (key, text)
        assert doc["layout"]["title"]["text"] == charts.plain(evil_title)


# ---------------------------------------------------------------- issue 15: ratio axes, defaults, tables, links

def test_ratio_axes_label_ratios() -> None:
    """Every ratio axis is log with 1-2-5 ticks labelled as ratios: 0.2x and 0.5x, never plotly's "2" and "5"."""
    vals, text = charts.ratio_ticks([0.3, 0.7, 1.6, 40.0])
    assert "0.2x" in text and "0.5x" in text and "1x" in text and "2x" in text and "50x" in text
    assert dict(zip(text, vals))["0.5x"] == 0.5 and dict(zip(text, vals))["20x"] == 20
    assert vals == sorted(vals) and min(vals) <= 0.3 and max(vals) >= 40
    assert "1x" in charts.ratio_ticks([])[1] and "1x" in charts.ratio_ticks([30.0, 80.0])[1]  # 1x always covered
    # a narrow range (kernel versions within 1.3x of each other) gets finer ticks, never "1x" alone
    vals, text = charts.ratio_ticks([1.0, 1.3])
    assert len(vals) >= 3 and "1x" in text and "1.3x" in text, text
    speed = pd.DataFrame({"case_id": ["a", "b"], "dtype": ["float32"] * 2, "peer": ["torch_eager"] * 2,
                          "speedup": [0.4, 3.0], "run_id": ["r", "r"], "machine": ["m"] * 2, "arch": ["H200"] * 2})
    cases = pd.DataFrame({"case": ["a"], "dtype": ["bf16"], "arch": ["H200"], "machine": ["m"], "ratio": [0.25],
                          "compile_mode": ["default"]})
    ratio = pd.DataFrame({"case_id": ["a"], "dtype": ["bf16"], "provider": ["robocache"], "ratio": [1.7]})
    journey = pd.DataFrame({"version": ["v1", "v2"], "geomean_vs_v1": [1.0, 2.4], "arch": ["H200"] * 2,
                            "machine": ["m"] * 2, "cases_vs_v1": [3, 3], "min_vs_v1": [1.0, 1.5],
                            "max_vs_v1": [1.0, 3.0]})
    for fig, y in ((charts.ranked_bars(speed), charts.ranked_bars(speed).layout.xaxis),
                   *((f, f.layout.yaxis) for f in (charts.ratio_bars(cases), charts.machine_ratio_bars(ratio, "a", "b"),
                                                   charts.journey_bars(journey)))):
        assert y.type == "log", fig.layout.title.text
        assert all(t.endswith("x") for t in y.ticktext) and "1x" in y.ticktext, y.ticktext
        assert len(y.tickvals) == len(y.ticktext)


def test_ratio_bars_start_at_1x() -> None:
    """A bar on a log ratio axis is drawn from the 1x line to its ratio (plotly: from base to base + y), so a 0.5x
    bar points down and a 2x bar up; the hover shows the ratio itself (customdata[0]); the ticks read 0.2x ...
    2x. Checked on the figure dict of every log-ratio bar chart."""
    ratios = [0.25, 0.5, 2.0, 4.0]
    speed = pd.DataFrame({"case_id": list("abcd"), "dtype": ["float32"] * 4, "peer": ["torch_eager"] * 4,
                          "speedup": ratios, "run_id": ["r"] * 4, "machine": ["m"] * 4, "arch": ["H200"] * 4})
    cases = pd.DataFrame({"case": list("abcd"), "dtype": ["bf16"] * 4, "arch": ["H200"] * 4, "machine": ["m"] * 4,
                          "ratio": ratios, "compile_mode": ["default"] * 4})
    ratio = pd.DataFrame({"case_id": list("abcd"), "dtype": ["bf16"] * 4, "provider": ["robocache"] * 4,
                          "ratio": ratios})
    journey = pd.DataFrame({"version": ["v1", "v2", "v3", "v4"], "geomean_vs_v1": ratios, "arch": ["H200"] * 4,
                            "machine": ["m"] * 4, "cases_vs_v1": [3] * 4, "min_vs_v1": ratios, "max_vs_v1": ratios})
    for fig, ax in ((charts.ranked_bars(speed), "x"), (charts.ratio_bars(cases), "y"),
                    (charts.machine_ratio_bars(ratio, "a", "b"), "y"), (charts.journey_bars(journey), "y")):
        bars = [t for t in fig.data if t.type == "bar"]  # plotly's objects: to_dict() packs arrays as bytes
        assert bars, fig.layout.title.text
        for t in bars:
            assert t.base == 1.0, t.base
            length = t.x if ax == "x" else t.y  # horizontal bars (the ranked ones) run along x
            tops = [1.0 + float(v) for v in length]
            assert tops == pytest.approx(ratios)  # each bar ends at its ratio
            assert [float(v) < 0 for v in length] == [True, True, False, False]  # below 1x: pointing down (left)
            assert [row[0] for row in t.customdata] == pytest.approx(ratios)
            assert "%{customdata[0]:.2f}x" in t.hovertemplate and "%{" + ax not in t.hovertemplate
        y = fig.to_dict()["layout"][f"{ax}axis"]
        assert y["type"] == "log"
        # (the ranked bars' axis ends just past its bars: the ticks inside it)
        want = {"0.5x", "1x", "2x"} if ax == "x" else {"0.2x", "0.5x", "1x", "2x", "5x"}
        assert want <= set(y["ticktext"]), y["ticktext"]
        # the range is set (plotly's autorange starts such bars' axis at 1x): every bar's end is inside it
        assert 10 ** y["range"][0] < min(ratios) and 10 ** y["range"][1] > max(ratios), y["range"]
        assert dict(zip(y["ticktext"], y["tickvals"]))["0.5x"] == 0.5
    # the journey ends at the public API (what `robocache` calls): with only v1 and it measured, a bar each
    two = pd.DataFrame({"version": ["v1", "public"], "geomean_vs_v1": [1.0, 1.7], "arch": ["H200"] * 2,
                        "machine": ["m"] * 2, "cases_vs_v1": [3, 3], "min_vs_v1": [1.0, 1.2], "max_vs_v1": [1.0, 2.0]})
    (t,) = charts.journey_bars(two).data
    assert list(t.x) == ["v1", charts.PUBLIC_LABEL] and [1 + v for v in t.y] == pytest.approx([1.0, 1.7])


def cpu_dir(tmp: Path) -> Path:
    """A local CPU run without robocache records, on a machine whose name sorts before every GPU machine."""
    recs = []
    for b in (16, 64):
        r = make_record(b, run_id="local-cpu-run")
        r["created"] = "2026-12-01T00:00:00Z"  # newer than every committed record
        r["case"]["provider"] = "numpy"
        recs.append(r)
    write_records(tmp, make_env("a-local-cpu"), recs, name="local")
    return tmp


def test_first_screen_without_gpu_shows_committed_gpu_results(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """`make run` on a machine without a GPU: results/ plus the local CPU run; every page's first machine or
    architecture is the newest GPU with robocache records, never the CPU run that sorts first."""
    monkeypatch.setenv(data.ENV_VAR, str(cpu_dir(tmp_path)))
    monkeypatch.delenv(data.NO_DEFAULT_ENV_VAR, raising=False)
    df, _ = data.load_frame()
    order = data.preferred_machines(df)
    assert order[0] == "nvidia-h200" and order.index("nvidia-h100-x1") < order.index("a-local-cpu")
    assert data.preferred(df, "arch") == "H200"
    for page, label, want in (("overview", "architecture", "H200"), ("sweeps", "machine", "nvidia-h200"),
                              ("history", "machine", "nvidia-h200")):
        at = AppTest.from_file(str(REPO / "dashboard" / "views" / f"{page}.py"), default_timeout=60).run()
        assert not at.exception and not at.error, page
        assert next(s for s in at.selectbox if s.label == label).value == want, page
        assert at.get("plotly_chart"), page
        figs = [json.loads(f.proto.spec) for f in at.get("plotly_chart")]
        assert any(t.get("y") is not None and len(t["y"]) for f in figs for t in f["data"]), page  # not empty
    # a CPU run with robocache records comes after every GPU machine, before machines without any
    d = pd.DataFrame({"machine": ["z-gpu", "cpu", "empty-gpu"], "arch": ["H100", "CPU", "H200"],
                      "device": ["gpu", "cpu", "gpu"], "provider": ["robocache", "robocache", "cupy"],
                      "status": ["ok"] * 3, "world_size": [None] * 3})
    assert data.preferred_machines(d) == ["z-gpu", "cpu", "empty-gpu"]
    # a machine of four GPUs with more single-GPU records (a sampled run spread over its GPUs) after the one-GPU kind
    d = pd.DataFrame({"machine": ["h200-x4"] * 3 + ["h200"], "arch": ["H200"] * 4, "device": ["gpu"] * 4,
                      "provider": ["robocache"] * 4, "status": ["ok"] * 4, "world_size": [None] * 4,
                      "gpu_count": [4, 4, 4, 1]})
    assert data.preferred_machines(d) == ["h200", "h200-x4"]
    assert data.preferred_machines(d.assign(gpu_count=[4, 4, 4, 4])) == ["h200-x4", "h200"]  # the most records
    # a missing count is one GPU (older records); one run filed under the one-GPU name from a bigger host does not
    # demote that machine: a machine is of several GPUs only if every counted record says so
    assert data.preferred_machines(d.assign(gpu_count=[None, None, None, 1])) == ["h200-x4", "h200"]
    two = pd.concat([d, d.iloc[[3]].assign(gpu_count=4)], ignore_index=True)
    assert data.preferred_machines(two) == ["h200", "h200-x4"]
    assert data.preferred_machines(d.drop(columns="gpu_count")) == ["h200-x4", "h200"]


def test_readable_tables() -> None:
    df = pd.DataFrame({"case_id": ["a", "b"], "p50": [23292.8165, None], "gb_per_s": [1.23456, 0.0123],
                       "pct_of_ceiling": [None, 55.5], "git_commit": ["0123456789abcdef" * 2 + "01234567", None],
                       "reason": [None, ""], "torch_eager": [3.0, 4.0], "noisy": [True, False],
                       "provider": ["torch_compile@max-autotune", "robocache"]})
    styled, config = tables.readable(df, provider_cols=["torch_eager"])
    cols = list(styled.data.columns)
    assert cols == ["case", "median (us)", "GB/s", "% of copy ceiling", "commit", "reason", "torch eager median (us)",
                    "noisy", "provider"]
    assert not {"p50", "gb_per_s", "case_id", "git_commit"} & set(cols)
    html = styled.to_html()
    assert "torch.compile (max-autotune)" in html and styled.data["provider"].iloc[0] == "torch_compile@max-autotune"
    assert "23,293" in html and "1.23" in html and "0.0123" in html and "0123456789" in html
    assert "0123456789abcdef0123" not in html  # short commit shown; the full hash stays the cell's value
    assert styled.data["commit"].iloc[0] == df["git_commit"].iloc[0]
    assert "None" not in html and "nan" not in html.lower().replace("nanos", "")
    assert "commit" in config
    assert tables.number(float("nan")) == "-" and tables.number(2.0) == "2" and tables.commit(None) == "-"
    # Streamlit draws an empty display value as "None": a missing figure shows as "-"
    disp = styled._translate(False, False)["body"]
    assert all(c["display_value"] not in ("", "None", "nan") for row in disp for c in row if c["type"] == "td")


def test_deep_links_restore_the_view(fixture_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Query parameters set the selections (a shared link opens the same view), and a change is written back."""
    monkeypatch.setenv(data.ENV_VAR, str(fixture_dir))
    monkeypatch.setenv(data.NO_DEFAULT_ENV_VAR, "1")
    at = AppTest.from_file(str(REPO / "dashboard" / "views" / "history.py"), default_timeout=60)
    at.query_params.update({"machine": "synthetic-b200", "case": "resample/B64-S100-T50-D32",
                            "provider": ["robocache", "cupy"], "metric": "gb_per_s"})
    at = at.run()
    assert not at.exception and not at.error
    boxes = {s.label: s.value for s in at.selectbox}
    assert boxes["machine"] == "synthetic-b200" and boxes["case"] == "resample/B64-S100-T50-D32"
    assert at.multiselect[0].value == ["robocache", "cupy"]
    assert at.radio[0].value == "gb_per_s"
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert {t["name"].split()[0] for t in spec["data"]} == {"robocache", "CuPy"}
    # the default choice of a multiselect (robocache and the strongest peer, CuPy) stays out of the URL (it follows
    # the options of the next machine); another one is written
    assert "provider" not in at.query_params
    at = at.multiselect[0].set_value(["robocache", "cupy", "torch_eager"]).run()
    assert at.query_params["provider"] == ["robocache", "cupy", "torch_eager"]
    at = at.multiselect[0].set_value(["cupy"]).run()
    assert at.query_params["provider"] in ("cupy", ["cupy"])
    at = at.multiselect[0].set_value(["robocache", "cupy"]).run()
    assert "provider" not in at.query_params
    # a parameter naming no option is ignored, the page still draws
    at2 = AppTest.from_file(str(REPO / "dashboard" / "views" / "overview.py"), default_timeout=60)
    at2.query_params["arch"] = "<b>nope</b>"
    at2 = at2.run()
    assert not at2.exception and not at2.error and at2.get("plotly_chart")
    assert next(s for s in at2.selectbox if s.label == "architecture").value == "B200"  # the default: newest GPU
    assert at2.query_params["arch"] in ("B200", ["B200"])  # the bad value replaced by the view shown
    # choosing writes the choice back into the URL
    at2 = next(s for s in at2.selectbox if s.label == "architecture").select("H200").run()
    assert at2.query_params["arch"] in ("H200", ["H200"])
    # every page binds its selections: each widget's label has a query parameter after a plain run
    for page in ("sweeps", "kernels", "architectures", "multigpu", "runs"):
        at3 = AppTest.from_file(str(REPO / "dashboard" / "views" / f"{page}.py"), default_timeout=60).run()
        assert not at3.exception and not at3.error, page
        assert len(at3.query_params) >= len(at3.selectbox) > 0 or page == "multigpu", (page, at3.query_params)


def test_wins_against_the_strongest_peer(fixture_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where robocache wins: the speedup over the strongest peer of the same run, a diverging log heat map centred
    at 1x (case x dtype), the table worst first; record text stays escaped."""
    wide = pd.DataFrame({"machine": ["m"] * 3, "arch": ["H200"] * 3, "op": ["resample"] * 3, "timer": ["t"] * 3,
                         "cache": ["warm"] * 3, "case_id": ["a", "b", "c"], "dtype": ["float32", "bfloat16", "float32"],
                         "run_id": ["r"] * 3, "created": [pd.Timestamp("2026-01-01", tz="UTC")] * 3,
                         "robocache": [1.0, 4.0, None], "robocache@v1": [0.1, 0.1, 0.1],
                         "torch_eager": [3.0, 2.0, 1.0], "cupy": [2.0, None, 1.0], "best": ["x"] * 3,
                         "best_p50": [1.0] * 3})
    w = tables.wins(wide)
    assert list(w["case_id"]) == ["b", "a"]  # worst first; c has no robocache figure; v1 is not a peer
    assert list(w["peer"]) == ["torch_eager", "cupy"] and list(w["speedup"]) == [0.5, 2.0]
    fig = charts.wins_heatmap(w.assign(case_id=["b", SCRIPT]))
    hm = fig.data[0]
    assert hm.type == "heatmap" and hm.zmid == 0.0 and hm.zmin == -hm.zmax
    assert "1x" in hm.colorbar.ticktext and "0.5x" in hm.colorbar.ticktext and "2x" in hm.colorbar.ticktext
    assert SCRIPT not in json.dumps(fig.to_plotly_json(), default=str)  # escaped for plotly
    z = {(y, x): v for y, row in zip(hm.y, hm.z) for x, v in zip(hm.x, row)}
    assert z[("b", "bfloat16")] == pytest.approx(-0.30103, abs=1e-4) and z[("b", "float32")] is None
    # the page over the fixtures: the default machine is the newest GPU, the table worst first
    at = app("wins", fixture_dir, monkeypatch)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert next(s for s in at.selectbox if s.label == "machine").value == "synthetic-b200"
    table = at.dataframe[0].value
    sp = list(table["speedup (x)"])
    assert sp == sorted(sp) and len(sp) > 0 and set(table["strongest peer"]) == {"cupy"}  # cupy 2.5x < eager 4x
    assert sp[0] == pytest.approx(2.5)
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["data"][0]["type"] == "heatmap"
    assert_no_markup(at)


def test_bound_widgets_keep_successive_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two choices in a row on one widget both hold (its identity does not follow the URL it rewrote), and a
    choice that the next options lack falls back to an offered one without an error."""
    at = app("history", committed.dirs_env(), monkeypatch)
    case = next(s for s in at.selectbox if s.label == "case")
    first, second = case.options[1], case.options[2]
    at = case.select(first).run()
    assert next(s for s in at.selectbox if s.label == "case").value == first
    at = next(s for s in at.selectbox if s.label == "case").select(second).run()
    assert next(s for s in at.selectbox if s.label == "case").value == second
    assert at.query_params["case"] in (second, [second])
    at = next(s for s in at.selectbox if s.label == "machine").select("nvidia-h200-x4").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    box = next(s for s in at.selectbox if s.label == "case")
    assert box.value in box.options


def test_history_switching_machines_offers_the_new_machines_providers(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The browser test's steps under AppTest: two machines with different peers; after switching machine the
    provider choice is the new machine's (the old one's default never sticks in the URL), then a case choice holds."""
    for arch, machine, provs in (("H200", "synthetic-h200", ("robocache", "torch_eager")),
                                 ("B200", "synthetic-b200", ("robocache", "cupy"))):
        for run in range(2):
            recs = [fixture_record(run, f"resample/B{b}-S100-T50-D32", p, b, arch_scale=1.0, commit=f"{run:x}" * 40,
                                   created=f"2026-01-0{run + 1}T00:00:00Z") for p in provs for b in (16, 64)]
            write_records(tmp_path, gpu_env(arch, machine), recs, name=f"{arch.lower()}-run{run}")
    at = app("history", tmp_path, monkeypatch)
    assert next(s for s in at.selectbox if s.label == "machine").value == "synthetic-b200"  # newest GPU first
    assert set(at.multiselect[0].value) == {"robocache", "cupy"}
    at = next(s for s in at.selectbox if s.label == "machine").select("synthetic-h200").run()
    assert set(at.multiselect[0].value) == {"robocache", "torch_eager"}
    at = next(s for s in at.selectbox if s.label == "case").select("resample/B64-S100-T50-D32").run()
    assert not at.exception and not at.error
    names = {t["name"] for t in json.loads(at.get("plotly_chart")[0].proto.spec)["data"]}
    assert names == {"robocache float32", "torch eager float32"}
    assert next(s for s in at.selectbox if s.label == "case").value == "resample/B64-S100-T50-D32"


# ---------------------------------------------------------------- issue 24: one run per line, History's defaults

def _runs_dir(tmp: Path) -> Path:
    """SYNTHETIC: the issue's CuPy sweep. An old run measured B=1024 with a slow CuPy peer; a newer run measured
    B=256 and B=4096 with a fast one. Joined, the CuPy line read 110 us, 17,365 us, 416 us."""
    for run, bs, cupy_scale, day in (("old-run", (1024,), 40.0, 1), ("new-run", (256, 4096), 1.0, 5)):
        recs = []
        for provider in ("robocache", "cupy"):
            for b in bs:
                r = fixture_record(0, f"resample/B{b}-S100-T50-D32", provider, b, arch_scale=1.0,
                                   commit=f"{day:x}" * 40, created=f"2026-01-0{day}T00:00:00Z")
                r["run_id"] = run
                if provider == "cupy":
                    r["metrics"]["time_us"] = {k: v * cupy_scale for k, v in r["metrics"]["time_us"].items()}
                recs.append(r)
        write_records(tmp, gpu_env("H200", "synthetic-h200"), recs, name=run)
    return tmp


def test_sweep_lines_never_join_two_runs(tmp_path: Path) -> None:
    """A sweep's line joins the points of one run only (provider, run, method version); every point's hover names
    its run, date, commit and machine."""
    df, _ = data.load_frame([str(_runs_dir(tmp_path))], cache=None)
    fig = json.loads(charts.sweep_lines(df[df["status"] == "ok"], "B", "p50").to_json())
    lines = fig["data"]
    assert len(lines) == 4  # robocache and CuPy, each from two runs
    for t in lines:
        assert "run %{customdata[1]}" in t["hovertemplate"] and "commit %{customdata[3]}" in t["hovertemplate"]
        assert "on %{customdata[4]}" in t["hovertemplate"]
        runs = {row[1] for row in t["customdata"]}
        assert len(runs) == 1, (t["name"], runs)  # one run per line
        assert {row[4] for row in t["customdata"]} == {"synthetic-h200"}
    cupy = [t for t in lines if t["name"].startswith("CuPy")]
    assert sorted(len(_values(t["x"])) for t in cupy) == [1, 2]
    assert {t["name"] for t in cupy} == {"CuPy (run old-run, 2026-01-01)", "CuPy (run new-run, 2026-01-05)"}
    new = next(t for t in cupy if "new-run" in t["name"])
    assert new["line"]["dash"] == "solid" and next(t for t in cupy if "old-run" in t["name"])["line"]["dash"] == "dot"


def test_sweeps_page_draws_one_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's example over the committed records: resample bf16 on the H200 against B. By default one run
    (the newest that swept at least two points); 'every run' draws each run's own line, never one across runs."""
    monkeypatch.setenv(data.ENV_VAR, str(REPO / "results"))
    monkeypatch.setenv(data.NO_DEFAULT_ENV_VAR, "1")
    at = AppTest.from_file(str(REPO / "dashboard" / "views" / "sweeps.py"), default_timeout=90)
    at.query_params.update({"machine": "nvidia-h200", "op": "resample", "against": "B", "dtype": "bfloat16"})
    at = at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    box = next(s for s in at.selectbox if s.label == "run")
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert {row[1] for t in spec["data"] for row in t["customdata"]} == {box.value}  # one run drawn
    assert all(len(_values(t["x"])) >= 2 for t in spec["data"])
    at = box.select("every run (one line each)").run()
    assert not at.exception and not at.error
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    cupy = [t for t in spec["data"] if t["name"].startswith("CuPy")]
    assert len(cupy) > 1
    for t in spec["data"]:
        assert len({row[1] for row in t["customdata"]}) == 1, t["name"]
    # no CuPy line holds both an older peer's B=1024 (~17 ms) and the newer peer's B=256 (~0.1 ms)
    for t in cupy:
        ys = _values(t["y"])
        assert not (min(ys) < 200 and max(ys) > 10_000 and len(ys) == 3), (t["name"], ys)


def test_history_opens_on_the_classic_case_with_the_peer_to_beat(monkeypatch: pytest.MonkeyPatch) -> None:
    """History's first screen over the committed records: the classic case (not the alphabetically first), the
    public API and the strongest peer of the newest run (not every provider in one chart), one colour per provider
    and one dash per dtype, the legend under the chart, every log tick labelled as the number it is."""
    from robocache.bench.ops.resample import CLASSIC

    at = app("history", REPO / "results", monkeypatch)
    assert not at.exception and not at.error, [e.value for e in at.error]
    boxes = {s.label: s.value for s in at.selectbox}
    assert boxes["machine"] == "nvidia-h200" and boxes["case"] == CLASSIC and boxes["front end"] == "cli"
    df, _ = data.load_frame([str(REPO / "results")])
    d = df[(df["machine"] == "nvidia-h200") & (df["case_id"] == CLASSIC) & (df["frontend"] == "cli")
           & (df["timer"] == "cuda_event") & (df["cache"] == "warm") & (df["status"] == "ok")]
    peer = tables.strongest_peer(d)
    assert peer is not None and at.multiselect[0].value == ["robocache", peer]
    assert "provider" not in at.query_params  # the default stays out of the URL
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    lines = [t for t in spec["data"] if t.get("mode") == "lines+markers"]
    # robocache and the peer only (not 45 series): per provider and dtype, one line per method or grid version
    assert {("robocache" if t["name"].startswith("robocache") else "peer") for t in lines} == {"robocache", "peer"}
    assert 2 <= len({t["meta"] for t in lines}) <= 24, len(lines)
    for t in lines:
        prov = "robocache" if t["name"].startswith("robocache") else peer
        assert t["line"]["color"] == charts.provider_color(prov)
        dtype = next(x for x in ("bfloat16", "float16", "float32") if x in t["name"].split())
        assert t["line"]["dash"] == charts.dtype_dash(dtype)
    assert {charts.dtype_dash(x) for x in ("float32", "float16", "bfloat16")} == {"solid", "dash", "dot"}
    assert spec["layout"]["legend"]["orientation"] == "h"
    y = spec["layout"]["yaxis"]
    assert y["type"] == "log" and y["ticktext"] and all(float(t) == v for t, v in zip(y["ticktext"], y["tickvals"]))


def test_history_cuts_a_peer_line_where_its_library_changed(tmp_path: Path) -> None:
    """A peer measured on another torch is another implementation: its History line is cut there (the runner did
    not change); robocache's line, on the same runs, is not."""
    from dashboard import history_charts, history_data

    for night, torch in enumerate(("2.11.0", "2.11.0", "2.12.0", "2.12.0")):
        env = gpu_env("H200", "synthetic-h200")
        env["libs"] = {**env["libs"], "torch": torch}
        recs = [fixture_record(night, "resample/B256-S100-T50-D32", p, 256, arch_scale=1.0, commit=f"{night:x}" * 40,
                               created=f"2026-01-0{night + 1}T00:00:00Z") for p in ("robocache", "torch_eager")]
        write_records(tmp_path, env, recs, name=f"night{night}")
    df, _ = data.load_frame([str(tmp_path)], cache=None)
    rows = history_data.history_rows(df, history_data.commit_order(df))
    seg = rows.groupby(rows["provider"].astype(str))["segment"].apply(list).to_dict()
    assert seg == {"robocache": [0, 0, 0, 0], "torch_eager": [0, 0, 1, 1]}
    changed = rows[(rows["provider"] == "torch_eager") & (rows["segment"] == 1)]["env_change"].iloc[0]
    assert changed == "torch: 2.11.0 -> 2.12.0"
    fig = history_charts.history_commits(rows, history_data.commit_order(df), history_data.events(history_data.no_alerts()),
                                         history_data.method_breaks(rows))
    eager = [t for t in fig.data if t.name.startswith("torch eager")]
    assert len(eager) == 2 and [list(t.x) for t in eager] == [[0.0, 1.0], [2.0, 3.0]]
    assert "peer changed" in [a.text for a in fig.layout.annotations]


# ---------------------------------------------------------------- issue 24: the morning page, tables, voice, routing

def _wide_rows(tmp: Path) -> pd.DataFrame:
    """SYNTHETIC: one H200 machine. Run 1 (cli, oldest) and run 3 (asv, newest) measured robocache beside CuPy;
    run 2 (cli) measured robocache alone. The morning page reads run 1: the newest cli run with a peer."""
    plan = (("run-1", "cli", 1, ("robocache", "cupy")), ("run-2", "cli", 2, ("robocache",)),
            ("run-3", "asv", 3, ("robocache", "cupy")))
    for run, front, day, provs in plan:
        recs = []
        for p in provs:
            for b in (16, 64, 256):
                r = fixture_record(0, f"resample/B{b}-S100-T50-D32", p, b, arch_scale=1.0, commit=f"{day:x}" * 40,
                                   created=f"2026-01-0{day}T00:00:00Z")
                r["run_id"], r["frontend"] = run, front
                # CuPy: 2.5x robocache's time (fixture_record), except at B=256 in run 1, where it is 0.8x
                if p == "cupy" and run == "run-1" and b == 256:
                    r["metrics"]["time_us"] = {k: v * 0.8 / 2.5 for k, v in r["metrics"]["time_us"].items()}
                recs.append(r)
        write_records(tmp, gpu_env("H200", "synthetic-h200"), recs, name=run)
    df, _ = data.load_frame([str(tmp)], cache=None)
    return df


def test_morning_headline_from_the_newest_run_with_a_peer(tmp_path: Path) -> None:
    df = _wide_rows(tmp_path)
    rows = tables.newest_runs(df, data.TIMER_ORDER)
    assert set(rows["run_id"]) == {"run-1"}  # run 2 has no peer; run 3 is another front end's
    w = tables.wins(tables.side_by_side(rows))
    h = tables.headline(w).iloc[0]
    assert (h["cases"], h["wins"]) == (3, 2) and h["runs"] == "run-1"
    assert h["worst"] == pytest.approx(0.8) and h["worst_case"] == "resample/B256-S100-T50-D32 float32"
    assert h["median"] == pytest.approx(2.5) and h["worst_peer"] == "cupy"
    # without the cli runs, the asv run is the newest with a peer
    rows3 = tables.newest_runs(df[df["frontend"] != "cli"], data.TIMER_ORDER)
    assert set(rows3["run_id"]) == {"run-3"}
    # the losses, worst first, as horizontal bars labelled with their ratio, on an axis scaled to them
    fig = charts.ranked_bars(w[w["speedup"] < 1], prefix_machine=True)
    (bar,) = fig.data
    assert bar.orientation == "h" and list(bar.y) == ["H200 resample/B256-S100-T50-D32 float32"]
    assert list(bar.text) == ["0.80x"] and bar.name == "CuPy"  # the peer: its colour and legend entry
    lo, hi = (10 ** v for v in fig.layout.xaxis.range)
    assert 0.6 < lo < 0.8 and 1.0 < hi < 1.3  # not a 20x axis under which a 0.8x loss is a sliver
    assert "0.8x" in fig.layout.xaxis.ticktext and "1x" in fig.layout.xaxis.ticktext


def test_overview_answers_the_morning_questions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over the committed records: the headline per GPU (median, worst, wins of total, from the newest run per
    machine and op), last night's check per machine (tested N of M, open alerts), H100 against H200, the losses
    worst first as horizontal bars on an axis scaled to them; no rotated, alphabetical case labels."""
    at = app("overview", REPO / "results", monkeypatch)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert_no_markup(at)
    heads = [s.value for s in at.subheader]
    assert heads[:3] == ["robocache against the strongest peer", "Last night's regression check", "H100 against H200"]
    metrics = [(m.label, m.value) for m in at.metric]
    df, _ = data.load_frame([str(REPO / "results")])
    rows = tables.newest_runs(df[df["world_size"].isna()], data.TIMER_ORDER)
    w = tables.wins(tables.side_by_side(rows))
    for machine in ("nvidia-h100-x1", "nvidia-h200"):  # every GPU machine with robocache beside a peer
        mine = w[w["machine"] == machine]
        assert ("robocache faster", f"{int((mine['speedup'] >= 1).sum())} of {len(mine)}") in metrics, machine
        assert ("worst", f"{mine['speedup'].min():.2f}x") in metrics
    # each op's figures come from one run: the newest cli run that measured robocache beside a peer
    ok = df[(df["machine"] == "nvidia-h200") & (df["op"] == "resample") & (df["frontend"] == "cli")
            & (df["status"] == "ok") & (df["timer"] == "cuda_event")]
    with_peer = ok.groupby("run_id", observed=True).filter(
        lambda g: (g["provider"] == "robocache").any() and g["provider"].isin(["torch_compile", "cupy",
                                                                                "torch_eager"]).any())
    newest = with_peer.sort_values("created")["run_id"].iloc[-1]
    per_op = next(d.value for d in at.dataframe if "robocache faster" in d.value.columns)
    assert per_op[(per_op["machine"] == "nvidia-h200") & (per_op["op"] == "resample")]["run"].tolist() == [newest]
    status = next(d.value for d in at.dataframe if "series tested" in d.value.columns)
    assert set(status["machine"]) == set(df["machine"].astype(str))
    # each machine's open alerts are its own nightly check's (`check --machine M` over the same records)
    from robocache.bench import regressions as regress

    recs = list(committed.load().records)
    want = {m: len(regress.check(recs, machine=m).alerts) for m in status["machine"]}
    assert dict(zip(status["machine"], status["open alerts"])) == want
    assert all(re.fullmatch(r"\d+ of \d+", t) for t in status["series tested"])
    assert not at.success  # 10 of the 130 series of the newest runs tested is no pass
    pair = next(d.value for d in at.dataframe if "cases on both" in d.value.columns)
    assert list(pair["op"]) == ["resample", "fuse", "voxelize"] and (pair["cases on both"] > 0).all()
    figs = [json.loads(f.proto.spec) for f in at.get("plotly_chart")]
    for f in figs:  # every chart horizontal: case names level, never rotated
        assert all(t.get("orientation") == "h" for t in f["data"] if t["type"] == "bar"), f["layout"]["title"]
        assert "tickangle" not in f["layout"].get("xaxis", {})
    head = next(h.value for h in at.subheader if h.value.startswith("Where robocache loses"))
    loss = next((f for f in figs if f["layout"]["title"]["text"].startswith("robocache slower")), None)
    if head.endswith("(0)"):  # the newest runs hold no loss: said in words, no empty chart
        assert loss is None and any(c.value.startswith("None: robocache is at least as fast") for c in at.caption)
        return
    assert loss is not None, head
    ys = [y for t in loss["data"] for y in t["y"]]
    ratios = {y: 1 + x for t in loss["data"] for y, x in zip(t["y"], _values(t["x"]))}
    order = loss["layout"]["yaxis"]["categoryarray"]
    assert sorted(ys) == sorted(order) and [ratios[y] for y in order] == sorted(ratios.values())  # worst first
    assert max(ratios.values()) < 1 and loss["layout"]["yaxis"]["autorange"] == "reversed"  # worst at the top
    lo, hi = (10 ** v for v in loss["layout"]["xaxis"]["range"])
    assert min(ratios.values()) / 1.3 < lo < min(ratios.values()) and 1 < hi < 1.3  # scaled to the losses


def test_overview_of_a_cpu_run_draws_no_empty_chart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CPU-only run (peers, no robocache beside them): the page says there is no speedup to draw, instead of two
    empty charts."""
    recs = []
    for p in ("numpy", "torch_eager", "torch_compile"):
        for b in (16, 64):
            r = make_record(b, run_id="local-cpu-run")
            r["case"]["provider"] = p
            recs.append(r)
    write_records(tmp_path, make_env("a-local-cpu"), recs, name="local")
    at = app("overview", tmp_path, monkeypatch)
    assert not at.exception and not at.error, [e.value for e in at.error]
    figs = [json.loads(f.proto.spec) for f in at.get("plotly_chart")]
    assert not [f["layout"]["title"]["text"] for f in figs if not any(t.get("x") or t.get("y") for t in f["data"])]
    assert not figs  # nothing to draw: said in words
    infos = " ".join(i.value for i in at.info)
    assert "no speedup to show" in infos and "no speedup to draw" in infos
    assert at.dataframe  # the CPU figures themselves are in the tables


def _shown(el: Any) -> pd.DataFrame:
    """A dataframe element's cells as the page shows them (a Styler's display values), else as text."""
    import pyarrow as pa

    arrow = el.proto.arrow_data
    if arrow.HasField("styler") and arrow.styler.display_values:
        return pa.ipc.open_stream(arrow.styler.display_values).read_all().to_pandas().astype(str)
    return el.value.astype(str)


def _significant(cell: str) -> int:
    """Significant digits of a decimal figure as shown (``324.4864`` -> 7, ``0.00123`` -> 3, ``1,234`` -> 0: whole
    numbers are not counted); 0 for text."""
    m = re.fullmatch(r"-?[\d,]*\.(\d+)(x|%)?", cell.strip())
    if not m:
        return 0
    digits = cell.strip().split(".")[0].lstrip("-").replace(",", "") + m.group(1)
    return len(digits.lstrip("0"))


@pytest.mark.parametrize("page", ["kernels", "pipelines"])
def test_report_tables_show_significant_digits(page: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels and Pipelines over the committed records: no figure printed with 7-8 digits (324.4864); about four
    significant digits, as every other table."""
    at = app(page, REPO / "results", monkeypatch)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert len(at.dataframe) >= 3
    worst = max(((_significant(c), c) for d in at.dataframe for c in _shown(d).to_numpy().ravel()),
                default=(0, ""))
    assert worst[0] <= 4, worst


def test_pages_speak_to_the_user() -> None:
    """No page speaks in the project's internal voice ("nobody here can measure an A100")."""
    internal = re.compile(r"nobody here|\bwe (can|cannot|can't)\b|lent (device|machine)|the lead\b", re.IGNORECASE)
    hits = [f"{f.name}:{i}: {line.strip()}" for f in sorted((REPO / "dashboard").rglob("*.py"))
            for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1) if internal.search(line)]
    assert not hits, "\n".join(hits)


def test_page_paths_ignore_case() -> None:
    """/History?... opens History (Streamlit matched paths exactly and showed the Overview instead); the server's
    base path is left out; an unknown path matches nothing (the page then says so)."""
    from dashboard import nav

    paths = ["", "wins", "history", "regressions"]
    assert nav.requested_path("http://127.0.0.1:8501/History") == "History"
    assert nav.match("History", paths) == "history" and nav.match("WINS", paths) == "wins"
    assert nav.requested_path("http://h:1/rb/History/", "/rb/") == "History"
    assert nav.requested_path("http://h:1/rb", "rb") == "" and nav.requested_path("http://h:1/", "") == ""
    assert nav.requested_path("http://h:1/other/History", "rb") is None and nav.requested_path(None) is None
    assert nav.match("histories", paths) is None and nav.match("", paths) is None


def test_ddp_markdown_table_against_the_cpu_workers_at_each_rank_count() -> None:
    """The report's DDP table (SYNTHETIC records): one row per loader and rank count, each loader's steps/s over
    the CPU workers' at the same rank count, efficiency as recorded; the one-GPU training table leaves DDP out."""
    from robocache.bench.views.multigpu import ddp, ddp_table_rows
    from robocache.bench.views.pipelines import pipeline_training

    recs = []
    for loader, steps in (("cpu_workers", 40.0), ("robocache", 60.0), ("episode_cache", 100.0)):
        for k in (1, 4):
            r = ddp_record(k, loader, steps=steps / k, wait=0.1 * k, run="synthetic-ddp")
            r["distributed"]["efficiency"] = 1.0 / k
            recs.append(r)
    recs = typed.records(recs)
    rows = ddp_table_rows(recs)
    assert [(x[3], x[4]) for x in rows] == [(lab, k) for lab in ("CPU workers (NumPy)", "robocache.fuse",
                                                                  "EpisodeCache") for k in (1, 4)]
    vs = {(x[3], x[4]): x[9] for x in rows}
    assert vs[("robocache.fuse", 4)] == "1.50x" and vs[("EpisodeCache", 1)] == "2.50x"
    assert vs[("CPU workers (NumPy)", 4)] == "-"
    assert {(x[4], x[7], x[8]) for x in rows if x[3] == "robocache.fuse"} == {(1, "10%", "1.00"), (4, "40%", "0.25")}
    assert "## " not in ddp(recs) and "| vs CPU workers |" in ddp(recs)
    assert pipeline_training(recs) == "_No training case in these records._"
    assert ddp([]) == "_No DDP training case in these records._"


def test_two_gpus_pair_is_chosen_over_every_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SYNTHETIC: the H100 and the one-GPU H200 share a quick case in older runs; each machine's newest run is a
    sampled draw of its own, and a two-GPU H200 has more sampled points of its own. In the newest runs no pair shares
    a case, so a choice over them falls to the most records: the two-GPU H200, which shares nothing with the H100.
    Over every record the one-GPU H200 shares the quick case, and the overview's glance compares it."""
    for arch, machine in (("H100", "synthetic-h100"), ("H200", "synthetic-h200")):
        quick = [fixture_record(0, "resample/B64-S100-T50-D32", p, 64, arch_scale=1.0 if arch == "H100" else 0.7,
                                commit="a" * 40, created="2026-01-01T00:00:00Z") for p in ("robocache", "cupy")]
        write_records(tmp_path, gpu_env(arch, machine), quick, name=f"{machine}-quick")
    for arch, machine, seed, points in (("H100", "synthetic-h100", 7, 1), ("H200", "synthetic-h200", 8, 1),
                                        ("H200", "synthetic-h200-x2", 9, 3)):
        sampled = []
        for i in range(points):
            for p in ("robocache", "cupy"):
                r = fixture_record(1, f"resample/s{seed}-{i:02d}-B3-S5-T9-D2", p, 3, arch_scale=1.0, commit="b" * 40,
                                   created="2026-01-02T00:00:00Z")
                r["suite"], r["run_id"] = "sampled", f"synthetic-sampled-{machine}"
                sampled.append(r)
        write_records(tmp_path, gpu_env(arch, machine), sampled, name=f"{machine}-sampled")
    df, bad = data.load_frame([str(tmp_path)])
    assert not bad
    rows = tables.newest_runs(df, data.TIMER_ORDER)
    assert set(rows["suite"].astype(str)) == {"sampled"}
    assert tables.machine_pair(rows) == ("synthetic-h100", "synthetic-h200-x2")  # the newest runs share nothing
    assert tables.machine_pair(df) == ("synthetic-h100", "synthetic-h200")
    at = app("overview", tmp_path, monkeypatch)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert not any("shares a robocache case" in i.value for i in at.info), [i.value for i in at.info]
    pair = next(d.value for d in at.dataframe if "cases on both" in d.value.columns)
    assert list(pair["op"]) == ["resample"] and list(pair["suite"]) == ["quick"] and list(pair["cases on both"]) == [1]


def test_two_gpus_compare_the_newest_suite_both_measured(tmp_path: Path) -> None:
    """H100 against H200 (SYNTHETIC records): the H100's newest run is a sampled draw of shapes the H200 never ran,
    so the glance falls back to the newest suite both measured (quick), per op, and names it."""
    for arch, machine in (("H100", "synthetic-h100"), ("H200", "synthetic-h200")):
        quick = [fixture_record(0, "resample/B64-S100-T50-D32", p, 64, arch_scale=1.0 if arch == "H100" else 0.7,
                                commit="a" * 40, created="2026-01-01T00:00:00Z") for p in ("robocache", "cupy")]
        write_records(tmp_path, gpu_env(arch, machine), quick, name=f"{machine}-quick")
    sampled = [fixture_record(1, "resample/s7-00-B3-S5-T9-D2", p, 3, arch_scale=1.0, commit="b" * 40,
                              created="2026-01-02T00:00:00Z") for p in ("robocache", "cupy")]
    for r in sampled:
        r["suite"], r["run_id"] = "sampled", "synthetic-sampled"
    write_records(tmp_path, gpu_env("H100", "synthetic-h100"), sampled, name="synthetic-h100-sampled")
    df, bad = data.load_frame([str(tmp_path)])
    assert not bad
    rows = tables.newest_runs(df, data.TIMER_ORDER)
    assert set(rows[rows["machine"] == "synthetic-h100"]["suite"].astype(str)) == {"sampled"}
    assert tables.pair_glance(rows, "synthetic-h100", "synthetic-h200").empty  # the newest runs share no case
    both = tables.pair_runs(df, "synthetic-h100", "synthetic-h200", data.TIMER_ORDER)
    assert set(both["suite"].astype(str)) == {"quick"}
    g = tables.pair_glance(both, "synthetic-h100", "synthetic-h200")
    assert list(g["op"]) == ["resample"] and g["cases"].iloc[0] == 1
    assert g["median"].iloc[0] == pytest.approx(1 / 0.7)
