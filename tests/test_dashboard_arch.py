"""Architectures (H100 and H200 side by side, % of each GPU's own ceiling, a roofline per GPU) and Sweeps (batch,
length, dimension, dtype; voxelize's points and grid) over the committed records and synthetic voxelize sweeps,
and the nightly grid points that make those sweeps one axis at a time.

Synthetic records here carry ``"synthetic": True``; nothing touches a GPU.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")
from streamlit.testing.v1 import AppTest  # noqa: E402

from dashboard import charts, data  # noqa: E402
from robocache.bench import frame, specs  # noqa: E402
from robocache.bench.store import write_records  # noqa: E402
from tests import committed  # noqa: E402
from tests.test_dashboard import gpu_env  # noqa: E402
from tests.test_store import make_record  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def page(name: str, results: Path, monkeypatch: pytest.MonkeyPatch, **params: Any) -> AppTest:
    monkeypatch.setenv(data.ENV_VAR, str(results))
    monkeypatch.setenv(data.NO_DEFAULT_ENV_VAR, "1")
    monkeypatch.setenv(frame.CACHE_ENV_VAR, "off")
    at = AppTest.from_file(str(REPO / "dashboard" / "views" / f"{name}.py"), default_timeout=90)
    at.query_params.update(params)
    at = at.run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return at


def arr(v: Any) -> list[Any]:
    """A trace's x/y as a list: plotly 6 ships numeric arrays as base64 typed arrays (``{"dtype", "bdata"}``)."""
    if isinstance(v, dict) and "bdata" in v:
        import base64

        import numpy as np

        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"]).tolist()
    return list(v)


def specs_of(at: AppTest) -> list[dict[str, Any]]:
    return [json.loads(f.proto.spec) for f in at.get("plotly_chart")]


# ---------------------------------------------------------------- the nightly grid

def _voxelize(suite: str) -> dict[str, dict[str, Any]]:
    return {c.id: c.params for c in specs.cases(suite, ops=["voxelize"], providers=["robocache"], dtypes=["float32"])}


def test_nightly_grid_varies_voxelize_points_and_grid_one_axis_at_a_time() -> None:
    nightly = _voxelize("nightly")
    lidar = [p for p in nightly.values() if p.get("B") == 4 and p.get("mode") == "count" and p.get("cloud") == "uniform"]
    by_n = sorted(p["N"] for p in lidar if p["grid"] == [64, 64, 64])
    by_g = sorted(p["grid"][0] for p in lidar if p["N"] == 100_000)
    assert by_n == [10_000, 100_000, 1_000_000, 4_000_000]
    assert by_g == [16, 32, 64, 128, 256]
    # the new points are nightly only: the quick suite keeps its two voxelize points
    assert sorted(_voxelize("quick")) == ["voxelize/B4-N100000-G64-count-uniform",
                                          "voxelize/B4-N100000-G64-mean-clustered-C4",
                                          "voxelize/dispatch-B1-N16-G4-count-uniform"]
    # every point states why it is there
    assert all(c.reason.strip() for c in specs.cases("nightly", ops=["voxelize"]))


def test_resample_nightly_has_batch_length_and_dimension_sweeps() -> None:
    cases = {c.id: c.params for c in specs.cases("nightly", ops=["resample"], providers=["robocache"],
                                                 dtypes=["bfloat16"])}
    ps = [p for p in cases.values() if p.get("time_dtype") == "float32" and "kind" not in p]
    assert len({p["B"] for p in ps if (p["S"], p["T"], p["D"]) == (100, 50, 32)}) >= 5
    assert len({p["S"] for p in ps if p["B"] == 256 and p["D"] == 32 and p["T"] == p["S"] // 2}) >= 4
    assert len({p["D"] for p in ps if (p["B"], p["S"], p["T"]) == (256, 100, 50)}) >= 4


# ---------------------------------------------------------------- Sweeps

def _sweeps_module() -> Any:
    """The page's helper functions without running the page (it calls run_page at import)."""
    import ast
    import types

    src = (REPO / "dashboard" / "views" / "sweeps.py").read_text(encoding="utf-8")
    tree = ast.parse(src)
    tree.body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Call))]
    mod = types.ModuleType("sweeps_helpers")
    exec(compile(tree, "sweeps.py", "exec"), mod.__dict__)  # noqa: S102 - our own page's source
    return mod


def test_length_sweep_keys() -> None:
    sw = _sweeps_module()
    follow = sw.followers("resample", "S")
    assert set(follow) == {"T"}
    key = lambda s, t: sw.slice_key(json.dumps({"B": 256, "S": s, "T": t, "D": 32, "time_dtype": "float32"}),  # noqa: E731
                                    "S", follow)
    assert key(32, 16) == key(100, 50) == key(10000, 5000)  # T = S/2: one line
    assert key(100, 25) != key(100, 50)  # a T off the rule is another line
    assert sw.followers("resample", "B") == {}
    g = sw.slice_key(json.dumps({"B": 4, "N": 100000, "grid": [32, 32, 32], "mode": "count"}), "G")
    assert g == sw.slice_key(json.dumps({"B": 4, "N": 100000, "grid": [128, 128, 128], "mode": "count"}), "G")


def test_sweeps_length_and_dtype_on_committed_records(monkeypatch: pytest.MonkeyPatch) -> None:
    at = page("sweeps", committed.dirs_env(), monkeypatch, op="resample", machine="nvidia-h200", against="S",
              dtype="bfloat16")
    assert {"S (length)", "B (batch)", "D (dimension)", "dtype"} <= set(at.radio[0].options)
    assert at.radio[0].value == "S"
    (fig,) = specs_of(at)
    ours = next(t for t in fig["data"] if t["name"] == "robocache")
    assert sorted(arr(ours["x"])) == [32, 100, 500, 2000, 10000]  # S=32..10000 with T=S/2 on one line
    assert any("follows S" in c.value for c in at.caption)
    # dtype as the axis: one case across its dtypes, grouped bars per provider
    at = page("sweeps", committed.dirs_env(), monkeypatch, op="resample", machine="nvidia-h200", against="dtype")
    (fig,) = specs_of(at)
    assert {t["type"] for t in fig["data"]} == {"bar"}
    ours = next(t for t in fig["data"] if t["name"] == "robocache")
    assert arr(ours["x"]) == ["float32", "float16", "bfloat16"]
    assert fig["layout"]["xaxis"]["categoryarray"] == ["float32", "float16", "bfloat16"]


def _voxelize_sweep_dir(tmp_path: Path) -> Path:
    """SYNTHETIC H200 records of the nightly voxelize points and grid sweeps (robocache and cupy)."""
    out = tmp_path / "vox"
    recs = []
    for c in specs.cases("nightly", ops=["voxelize"], providers=["robocache", "cupy"], dtypes=["float32"]):
        if "kind" in c.params:
            continue
        r = make_record(0, run_id="synthetic-vox")
        r["suite"] = "nightly"
        r["case"].update(id=c.id, op="voxelize", provider=c.provider, dtype="float32", params=dict(c.params),
                         items_unit="points", items=c.params["B"] * c.params["N"])
        r["method"]["timer"] = "cuda_event"
        t = 5.0 + c.params["B"] * c.params["N"] / 1e5 + c.params["grid"][0] ** 3 / 1e4
        t *= 1.0 if c.provider == "robocache" else 1.7
        r["metrics"]["time_us"] = {"p20": t, "p50": t, "p80": t, "min": t, "max": t, "mean": t}
        r["metrics"]["items_per_s"] = c.params["B"] * c.params["N"] / t * 1e6
        r["metrics"]["gb_per_s"] = specs.case_bytes("voxelize", c.params, "float32") / t / 1e3
        r["metrics"]["ceiling_gb_per_s"] = 4000.0
        r["metrics"]["pct_of_ceiling"] = 100 * r["metrics"]["gb_per_s"] / 4000.0
        recs.append(r)
    write_records(out, gpu_env("H200", "synthetic-h200"), recs, name="vox")
    return out


def test_sweeps_voxelize_points_and_grid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = _voxelize_sweep_dir(tmp_path)
    at = page("sweeps", d, monkeypatch, op="voxelize", against="N")
    assert {"N (points)", "G (grid side)", "B (batch)"} <= set(at.radio[0].options)
    (fig,) = specs_of(at)
    ours = next(t for t in fig["data"] if t["name"] == "robocache")
    assert sorted(arr(ours["x"])) == [10_000, 100_000, 1_000_000, 4_000_000]
    at = page("sweeps", d, monkeypatch, op="voxelize", against="G")
    (fig,) = specs_of(at)
    ours = next(t for t in fig["data"] if t["name"] == "robocache")
    assert sorted(arr(ours["x"])) == [16, 32, 64, 128, 256]
    assert {t["name"] for t in fig["data"]} == {"robocache", "CuPy"}


# ---------------------------------------------------------------- Architectures

def test_roofline_chart() -> None:
    df = pd.DataFrame({"op": ["resample", "resample", "voxelize"], "case_id": ["a", "b", "<v>"],
                       "dtype": ["float32", "bfloat16", "float32"], "gb_per_s": [100.0, 3000.0, 50.0],
                       "items_per_s": [1e6, 1e7, 1e9], "pct_of_ceiling": [2.5, 75.0, None],
                       "ceiling_gb_per_s": [4000.0, 4100.0, 3900.0]})
    fig = charts.roofline(df, title="H200 (<m>)").to_plotly_json()
    traces = {t["name"]: t for t in fig["data"]}
    assert list(traces) == ["resample", "voxelize"]  # the grid's op order
    assert arr(traces["resample"]["x"]) == pytest.approx([100e9 / 1e6, 3000e9 / 1e7])  # bytes per item
    assert list(traces["voxelize"]["customdata"][0])[0] == "&lt;v&gt;"  # record text escaped
    roof = [s for s in fig["layout"]["shapes"] if s.get("type") == "line"]
    assert len(roof) == 1 and roof[0]["y0"] == roof[0]["y1"] == 4000.0  # the median of the runs' ceilings
    assert fig["layout"]["xaxis"]["type"] == "log" and fig["layout"]["yaxis"]["type"] == "log"
    assert "&lt;m&gt;" in fig["layout"]["title"]["text"]
    empty = charts.roofline(df.iloc[:0]).to_plotly_json()
    assert not empty["data"] and "no case" in empty["layout"]["title"]["text"]


def test_architectures_on_committed_h100_and_h200(monkeypatch: pytest.MonkeyPatch) -> None:
    at = page("architectures", committed.dirs_env(), monkeypatch, op="resample", dtype="bfloat16")
    infos = " ".join(i.value for i in at.info)
    assert "No A100 results yet" in infos and "No H100" not in infos and "No H200" not in infos
    figs = specs_of(at)
    # the same cases side by side: every bar group has both GPUs
    bars = figs[0]
    assert {t["name"].split()[0] for t in bars["data"]} == {"H100", "H200"}
    xs = [set(t["x"]) for t in bars["data"]]
    assert xs[0] == xs[1] and xs[0]
    pct = figs[1]
    assert "% of each GPU" in pct["layout"]["title"]["text"]
    # each GPU's % is of its own ceiling: the frame's pct_of_ceiling equals gb_per_s / that record's ceiling
    df, _ = data.load_frame([str(p) for p in committed.folders()], cache=None)
    ok = df[(df["status"] == "ok") & df["pct_of_ceiling"].notna()]
    assert ((ok["gb_per_s"] / ok["ceiling_gb_per_s"] * 100 - ok["pct_of_ceiling"]).abs() < 0.05).all()
    # one roofline per GPU machine, each with its own measured roof
    roofs = [f for f in figs if "bytes moved per item" in str(f["layout"].get("xaxis", {}).get("title", {}))]
    titles = sorted(f["layout"]["title"]["text"] for f in roofs)
    # every machine with single-GPU robocache records: the two- and four-GPU H200s ran sampled seeds (and the x4
    # a profile) one op per GPU
    assert titles == ["H100 (nvidia-h100-x1)", "H200 (nvidia-h200)", "H200 (nvidia-h200-x2)", "H200 (nvidia-h200-x4)"]
    levels = {}
    for f in roofs:
        (line,) = [s for s in f["layout"]["shapes"] if s.get("type") == "line"]
        levels[f["layout"]["title"]["text"]] = line["y0"]
    # the roof is that machine's own ceiling (the median of the runs' ceilings of the robocache records)
    for title, level in levels.items():
        m = title.split("(")[1].rstrip(")")
        own = data.latest(df[(df["machine"] == m) & (df["provider"] == "robocache") & (df["status"] == "ok")
                             & df["world_size"].isna() & (df["timer"] == "cuda_event")])
        assert level == pytest.approx(float(own["ceiling_gb_per_s"].dropna().median()))
    assert levels["H200 (nvidia-h200)"] > levels["H100 (nvidia-h100-x1)"]  # HBM3e over HBM3


def test_architectures_a100_alone_keeps_its_empty_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = _voxelize_sweep_dir(tmp_path)  # H200 only
    at = page("architectures", d, monkeypatch)
    infos = " ".join(i.value for i in at.info)
    assert "No A100 results yet" in infos and "No H100 results yet" in infos
    assert any("Only 1 architecture" in c.value for c in at.caption)
    assert any("H200 (synthetic-h200)" == f["layout"]["title"]["text"] for f in specs_of(at))  # its roofline


def test_sweep_axis_ticks_are_the_values_measured() -> None:
    assert [charts.short_number(v) for v in (1, 16, 16384, 10_000, 100_000, 1_000_000, 4_000_000, 2_500_000,
                                             12_345_678, 0.5)] == \
        ["1", "16", "16384", "10k", "100k", "1M", "4M", "2.5M", "12345678", "0.5"]
    df = pd.DataFrame({"provider": ["robocache"] * 3, "case_id": ["a", "b", "c"], "N": [1e4, 1e5, 4e6],
                       "p50": [1.0, 2.0, 30.0]})
    ax = charts.sweep_lines(df, "N").to_plotly_json()["layout"]["xaxis"]
    assert list(ax["tickvals"]) == [1e4, 1e5, 4e6] and list(ax["ticktext"]) == ["10k", "100k", "4M"]
    assert ax["type"] == "log"
