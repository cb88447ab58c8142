"""The dashboard's Sampled page on SYNTHETIC records (tests/synthetic_sampled.py; made-up times, not
measurements): the report's own summary fed from the frame, the speedup charts per GPU, record text never
markup, and the page declared in app.py."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")
from streamlit.testing.v1 import AppTest  # noqa: E402

from dashboard import data, sampled  # noqa: E402
from robocache.bench import store  # noqa: E402
from robocache.bench.views import sampled as views  # noqa: E402
from tests import synthetic_sampled as syn  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
UNESCAPED_LT = re.compile(r"(?<!\\)<")


def _n(values) -> int:
    """How many values a figure's trace holds (Plotly writes numeric arrays as typed base64: ``bdata``)."""
    if isinstance(values, dict) and "bdata" in values:
        import base64

        import numpy as np

        return len(base64.b64decode(values["bdata"])) // np.dtype(values["dtype"]).itemsize
    return len(values)


def _page(results: Path, monkeypatch: pytest.MonkeyPatch, **query: str) -> AppTest:
    monkeypatch.setenv(data.ENV_VAR, str(results))
    monkeypatch.setenv(data.NO_DEFAULT_ENV_VAR, "1")
    at = AppTest.from_file(str(REPO / "dashboard" / "views" / "sampled.py"), default_timeout=90)
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()


def test_frame_points_are_the_reports(tmp_path: Path) -> None:
    """The page's points are the report's: the same rows from the frame as from the records (bytes included,
    rebuilt from GB/s and the median)."""
    src = syn.write_fixture(tmp_path)
    df, bad = data.load_frame([str(src)], cache=False)
    assert not bad
    got = sampled.points(df).sort_values(["machine", "seed", "case"]).to_dict("records")
    want = sorted(views.point_rows(store.load(src).records), key=lambda r: (r["machine"], r["seed"], r["case"]))
    assert len(got) == len(want) == 9
    for g, w in zip(got, want):
        assert g["bytes"] == w["bytes"] and g["case"] == w["case"] and g["ratio"] == pytest.approx(w["ratio"])
        assert g["pct_of_ceiling"] == pytest.approx(w["pct_of_ceiling"])
    s = sampled.summary(sampled.points(df))
    h200 = s[(s["arch"] == "H200") & (s["seed"] == 2)].iloc[0]
    assert (h200["points"], h200["share_1x"], h200["large_at_80"]) == (4, 0.75, 1)


def test_sampled_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = _page(syn.write_fixture(tmp_path), monkeypatch, seed="2")
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert "SYNTHETIC" in " ".join(w.value for w in at.warning)
    assert [h.value for h in at.header] == ["Summary", "Speedup against bytes moved and feature width"]
    summary = at.dataframe[0].value
    assert set(summary["GPU"]) == {"H100", "H200"} and set(summary["points"]) == {4}
    assert sorted(summary["share >= 1.0x"]) == [0.75, 0.75]
    figs = [json.loads(f.proto.spec) for f in at.get("plotly_chart")]
    assert len(figs) == 2
    for fig in figs:
        names = {t["name"] for t in fig["data"]}
        assert names == {"H100 (nvidia-h100-x1)", "H200 (nvidia-h200)"}
        assert all(_n(t["x"]) == _n(t["y"]) == 4 for t in fig["data"])
    assert figs[0]["layout"]["xaxis"]["type"] == "log"
    # another peer: CuPy ran on one point per GPU
    at = _page(tmp_path, monkeypatch, seed="2", peer="vs_cupy")
    assert not at.exception
    figs = [json.loads(f.proto.spec) for f in at.get("plotly_chart")]
    assert all(_n(t["x"]) == 1 for t in figs[0]["data"])


def test_sampled_page_escapes_record_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = _page(syn.write_fixture(tmp_path, evil=True), monkeypatch)
    assert not at.exception, at.exception
    for kind in ("markdown", "caption", "title", "header", "subheader", "info", "warning", "error"):
        for el in at.get(kind):
            assert not getattr(el.proto, "allow_html", False)
            assert syn.SCRIPT not in str(el.value) and not UNESCAPED_LT.search(str(el.value)), (kind, el.value)
    for f in at.get("plotly_chart"):
        assert syn.SCRIPT not in f.proto.spec


def test_sampled_page_without_sampled_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.synthetic_kernels import write_fixture

    at = _page(write_fixture(tmp_path), monkeypatch)
    assert not at.exception and not at.error
    assert "No sampled point" in " ".join(i.value for i in at.info)


def test_page_declared_in_the_app() -> None:
    assert 'st.Page(_PAGES / "sampled.py", title="Sampled")' in (REPO / "dashboard" / "app.py").read_text()


def test_page_points_are_the_public_apis_only() -> None:
    """The committed H100 sampled runs of seed 20261127 measured robocache (the public API) and, in another run, the
    kernel versions robocache@v2/v3 beside torch.compile: the report lists each provider's points, the page (no
    provider axis) only the public API's, so a version's figure never reads as the public API's."""
    folder = REPO / "results" / "h100-nvidia-h100-x1"
    df, bad = data.load_frame([str(folder)], cache=False)
    assert not bad
    report = views.point_rows(store.load(folder).records)
    provs = {r["provider"] for r in report if r["seed"] == 20261127 and r["op"] == "resample"}
    assert {"robocache", "robocache@v2", "robocache@v3"} <= provs
    pts = sampled.points(df)
    assert not pts.empty and set(pts["provider"]) == {"robocache"}
    assert len(pts) == sum(r["provider"] == "robocache" for r in report)
