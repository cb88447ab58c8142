"""The sampled suite (issue 25): its points drawn from the documented distribution (seeded, capped, every drawn
parameter in the params, the seed in every tag), its cases and providers, the fresh seed (``--sample-seed`` and
``$ROBOCACHE_SAMPLE_SEED``), its inputs, and its summary (``report --sampled``) on SYNTHETIC records
(tests/synthetic_sampled.py), whose every figure is computed here by hand."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from robocache.bench import cli, ops, specs, store
from robocache.bench.ops import base
from robocache.bench.views import sampled as views
from tests import synthetic_sampled as syn

OPS = ("resample", "fuse", "voxelize")


def _all(seed: int) -> dict[str, tuple]:
    return {op: specs.sampled_points(op, seed) for op in OPS}


# ---------------------------------------------------------------- the draw

def test_48_points_per_op_seeded_by_the_grid_version():
    assert specs.SAMPLE_SEED == specs.GRID_VERSION
    for op, pts in _all(specs.SAMPLE_SEED).items():
        assert len(pts) == base.SAMPLES_PER_OP == 48 and len({p.tag for p in pts}) == 48, op
        for i, p in enumerate(pts):
            assert p.tag.startswith(f"s{specs.SAMPLE_SEED}-{i:02d}-") and p.op == op
            assert p.params["kind"] == "sampled" and p.params["sample_seed"] == specs.SAMPLE_SEED
            assert p.params["sample_index"] == i and len(p.dtypes) == 1 and p.dtypes[0] in specs.GPU_DTYPES
            assert p.params["stratum"] == ("large" if i >= 48 - base.SAMPLE_LARGE else "base")
            assert p.suites == ("sampled", "nightly") and p.reason.startswith(f"sampled (seed {specs.SAMPLE_SEED}")
        # the default points are the grid's, in the sampled and nightly suites
        grid = [pt for pt in specs.all_points() if pt.op == op and pt.params.get("kind") == "sampled"]
        assert grid == list(pts)


def test_same_seed_same_points_another_seed_other_points():
    a, b, c = _all(5), _all(5), _all(6)
    for op in OPS:
        assert [(p.tag, p.params, p.dtypes) for p in a[op]] == [(p.tag, p.params, p.dtypes) for p in b[op]]
        assert not {p.tag for p in a[op]} & {p.tag for p in c[op]}
        assert all(p.tag.startswith("s6-") and p.params["sample_seed"] == 6 for p in c[op])
    # each op draws from its own stream: a new op's draw would not move another's points
    assert specs.sampled_points("resample", 5) == a["resample"]


def test_every_drawn_parameter_is_in_the_params():
    keys = {"resample": {"B", "S", "T", "D", "time_dtype", "rate_hz", "t0"},
            "fuse": {"B", "T", "streams", "time_dtype", "rates_hz", "target_hz", "window_s", "t0"},
            "voxelize": {"B", "N", "grid", "C", "mode", "cloud"}}
    for op, pts in _all(specs.SAMPLE_SEED).items():
        for p in pts:
            assert keys[op] <= set(p.params), (op, p.params)
            json.dumps(p.params)  # JSON scalars and lists only: a record carries them as they are
    for p in specs.sampled_points("fuse"):
        ps = p.params
        assert len(ps["streams"]) == len(ps["rates_hz"]) and 1 <= len(ps["streams"]) <= 6
        assert all(s == max(2, round(r * ps["window_s"])) for (s, _), r in zip(ps["streams"], ps["rates_hz"]))
        assert ps["T"] == max(1, round(ps["target_hz"] * ps["window_s"]))


def test_the_distribution_covers_what_users_pass():
    """Over three seeds (432 points): the ranges hold, and every kind of value the issue names appears."""
    pts = {op: [p for s in (2, 3, 4) for p in specs.sampled_points(op, s)] for op in OPS}
    rs = [p.params for p in pts["resample"]]
    assert all(1 <= p["B"] <= 65536 and 2 <= p["S"] <= 200_000 and 1 <= p["D"] <= 1024 for p in rs)
    assert all(1 / 16 - 1e-9 <= p["T"] / p["S"] <= 16 + 1 / p["S"] or p["T"] == 1 for p in rs)
    assert any(p["T"] < p["S"] for p in rs) and any(p["T"] > p["S"] for p in rs)
    assert any(p["D"] % 2 for p in rs) and any(p["D"] % 2 == 0 for p in rs) and any(p["D"] > 256 for p in rs)
    assert {p["time_dtype"] for p in rs} == {"float32", "float64"}
    assert all((p["t0"] > 1e9) == (p["time_dtype"] == "float64") for p in rs)  # float64: epoch seconds
    for op in OPS:
        assert {p.dtypes[0] for p in pts[op]} == set(specs.GPU_DTYPES), op
    fs = [p.params for p in pts["fuse"]]
    assert {len(p["streams"]) for p in fs} == {1, 2, 3, 4, 5, 6}
    assert all(10 <= r <= 1000 for p in fs for r in p["rates_hz"]) and all(10 <= p["target_hz"] <= 1000 for p in fs)
    assert any(len({d for _, d in p["streams"]}) > 1 for p in fs)  # mixed widths
    vs = [p.params for p in pts["voxelize"]]
    assert all(1000 <= p["N"] <= 2_000_000 and all(16 <= g <= 256 for g in p["grid"]) for p in vs)
    assert {p["cloud"] for p in vs} == {"uniform", "clustered", "sparse"}
    assert {p["mode"] for p in vs} == {"count", "occupancy", "mean"}
    assert all((1 <= p["C"] <= 16) if p["mode"] == "mean" else p["C"] == 0 for p in vs)
    assert len({p["C"] for p in vs if p["mode"] == "mean"}) >= 8


def test_caps_and_the_large_stratum():
    for op, pts in _all(specs.SAMPLE_SEED).items():
        model = ops.get(op)
        for p in pts:
            elements, seconds = model.sample_cost(p.params)
            assert model.case_bytes(p.params, p.dtypes[0]) <= base.SAMPLE_MAX_BYTES
            assert elements <= base.SAMPLE_MAX_ELEMENTS and seconds <= base.SAMPLE_MAX_HOST_S, (op, p.tag)
        large = pts[48 - base.SAMPLE_LARGE:]
        # a large draw's estimated minimal traffic is at least 256 MB, so its params-only bound is too
        assert all(model.case_bytes(p.params, p.dtypes[0]) >= base.LARGE_BYTES for p in large), op


def test_log_uniform_helpers():
    assert base.log_uniform_int(0.0, 1, 65536) == 1 and base.log_uniform_int(0.999999999, 1, 65536) == 65536
    assert base.log_uniform_int(0.5, 1, 3) == 2  # exp(ln 4 / 2) = 2
    assert base.log_uniform(0.5, 1 / 16, 16) == pytest.approx(1.0)
    assert base.pick(0.0, ("a", "b", "c")) == "a" and base.pick(0.99, ("a", "b", "c")) == "c"
    assert base.pick(1 / 3, ("a", "b", "c")) == "b"


def test_an_op_without_a_distribution_has_no_sampled_points():
    class Plain(base.Op):
        name = "plain"

    assert Plain().sampled_points(3) == ()


# ---------------------------------------------------------------- cases, providers, seeds

def test_sampled_cases_public_api_and_peers_only():
    cases = specs.cases("sampled", device="gpu")
    assert len(cases) == 3 * 48 * len(specs.SAMPLED_PROVIDERS)
    assert set(specs.SAMPLED_PROVIDERS) == {"robocache", "torch_compile", "torch_compile@max-autotune",
                                            "torch_eager", "cupy"}
    assert not any(c.provider.startswith("robocache@") for c in cases)
    # one dtype per shape: every provider of a shape sees the same dtype
    assert len({(c.id, c.dtype) for c in cases}) == 3 * 48
    # part of the nightly grid, with the same providers
    nightly = {c.key for c in specs.cases("nightly", device="gpu") if c.params.get("kind") == "sampled"}
    assert nightly == {c.key for c in cases}
    # on the CPU: float32 shapes under the CPU size limit, with the CPU providers
    cpu = specs.cases("sampled", device="cpu")
    assert cpu and all(c.dtype == "float32" and c.bytes <= specs.CPU_MAX_BYTES for c in cpu)
    assert {c.provider for c in cpu} <= set(specs.CPU_PROVIDERS)


def test_kernel_versions_on_sampled_points_only_when_named():
    """The versions are no default of the sampled suite, but a user comparing them out of sample names them."""
    named = specs.cases("sampled", device="gpu", sample_seed=777, ops=["resample", "fuse", "voxelize"],
                        providers=["robocache@v2", "robocache@v3", "torch_compile"])
    by_op = {op: {c.provider for c in named if c.op == op} for op in ("resample", "fuse", "voxelize")}
    for op, provs in by_op.items():
        assert provs == {p for p in ("robocache@v2", "robocache@v3", "torch_compile")
                         if p in specs.provider_table.names(op=op)}, op
    assert all(c.tag.startswith("s777-") for c in named)
    # a provider the op lacks is left out, never listed to skip
    assert not specs.cases("sampled", device="gpu", ops=["voxelize"], providers=["robocache@v1"]) or \
        "robocache@v1" in specs.provider_table.names(op="voxelize")
    # the CPU sampled points keep the CPU providers
    assert not specs.cases("sampled", device="cpu", providers=["robocache@v2"])


def test_fresh_seed_replaces_the_default_points(monkeypatch):
    fresh = specs.cases("sampled", device="gpu", sample_seed=11, providers=["robocache"])
    assert len(fresh) == 144 and all(c.tag.startswith("s11-") for c in fresh)
    night = [c for c in specs.cases("nightly", device="gpu", sample_seed=11) if c.params.get("kind") == "sampled"]
    assert night and all(c.tag.startswith("s11-") for c in night)
    # a case process finds any seed's case from its key alone
    for c in fresh[::17]:
        got = specs.find(c.key)
        assert (got.params, got.dtype, got.reason) == (c.params, c.dtype, c.reason)
        assert specs.devices_of(got) == ("gpu", "cpu")
    with pytest.raises(KeyError, match="no case"):
        specs.find("resample/s11-00-B1-S2-T1-D1/float32/robocache")  # not what seed 11 drew
    # the front ends' seed: the environment, when no seed is given
    monkeypatch.setenv(specs.SAMPLE_SEED_ENV, "11")
    assert [c.key for c in specs.cases("sampled", providers=["robocache"])] == [c.key for c in fresh]
    assert specs.cases("sampled", providers=["robocache"], sample_seed=2)[0].tag.startswith("s2-")
    monkeypatch.setenv(specs.SAMPLE_SEED_ENV, "eleven")
    with pytest.raises(ValueError, match="ROBOCACHE_SAMPLE_SEED"):
        specs.cases("sampled")
    # the grid itself never depends on the environment
    assert all(p.tag.startswith(f"s{specs.SAMPLE_SEED}-") for p in specs.all_points()
               if p.params.get("kind") == "sampled")
    with pytest.raises(ValueError, match="non-negative"):
        specs.sampled_points("resample", -1)


def test_cli_list_and_run_take_a_sample_seed(capsys, monkeypatch):
    monkeypatch.delenv(specs.SAMPLE_SEED_ENV, raising=False)
    assert cli.main(["list", "--suite", "sampled", "--ops", "fuse", "--providers", "robocache", "--sample-seed", "9",
                     "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["sample_seed"] == 9 and len(doc["cases"]) == 48
    assert all(c["id"].startswith("fuse/s9-") for c in doc["cases"])
    assert cli.main(["list", "--suite", "sampled", "--ops", "voxelize", "--providers", "cupy"]) == 0
    out = capsys.readouterr().out
    assert f"48 cases in suite sampled for gpu (grid version {specs.GRID_VERSION}, sample seed {specs.SAMPLE_SEED})" in out
    with pytest.raises(SystemExit) as e:
        cli.main(["list", "--suite", "sampled", "--sample-seed", "-1"])
    assert e.value.code == 2 and "--sample-seed" in capsys.readouterr().err
    assert cli.main(["run", "--suite", "pipelines", "--sample-seed", "3"]) == 2
    assert "--sample-seed" in capsys.readouterr().err


def test_cli_run_measures_the_seed_it_is_given(tmp_path, capsys, monkeypatch):
    from robocache.bench import runner

    monkeypatch.delenv(specs.SAMPLE_SEED_ENV, raising=False)
    got = {}

    def fake_run_suite(suite, **kw):
        got.update(suite=suite, cases=kw["cases"])
        return runner.RunResult(run_id="fake", path=None)

    monkeypatch.setattr(runner, "run_suite", fake_run_suite)
    assert cli.main(["run", "--suite", "sampled", "--sample-seed", "9", "--device", "cpu", "--ops", "resample",
                     "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    assert got["suite"] == "sampled" and got["cases"]
    assert all(c.tag.startswith("s9-") for c in got["cases"])
    assert {c.key for c in got["cases"]} == {c.key for c in specs.cases("sampled", device="cpu", ops=["resample"],
                                                                       sample_seed=9)}


# ---------------------------------------------------------------- inputs

def _small(op: str, seed: int = 2) -> list:
    pts = sorted(specs.sampled_points(op, seed), key=lambda p: ops.get(op).case_bytes(p.params, p.dtypes[0]))
    return pts[:6]


def test_sampled_inputs_are_valid_and_seeded():
    for op in OPS:
        for pt in _small(op):
            case = specs.Case(op, pt.tag, pt.params, pt.dtypes[0], "numpy", pt.reason, pt.suites)
            a, b = specs.host_inputs(case, 0), specs.host_inputs(case, 0)
            flat_a = [x for x in _arrays(a)]
            assert all(np.array_equal(x, y) for x, y in zip(flat_a, _arrays(b)))
            assert not all(np.array_equal(x, y) for x, y in zip(flat_a, _arrays(specs.host_inputs(case, 1))))
            assert all(np.isfinite(x).all() for x in flat_a)
            moved = specs.moved_bytes(case, a)
            assert 0 < moved <= case.bytes
            p = pt.params
            if op == "resample":
                assert a["values"].shape == (p["B"], p["S"], p["D"]) and a["tgt_times"].shape == (p["B"], p["T"])
                _sorted_as_seen(a["src_times"], p["time_dtype"])
                assert a["tgt_times"].flags.writeable and a["tgt_times"].flags.c_contiguous
            elif op == "fuse":
                for (v, t), (s, d) in zip(a["streams"], p["streams"]):
                    assert v.shape == (p["B"], s, d)
                    _sorted_as_seen(t, p["time_dtype"])
            else:
                assert a["points"].shape == (p["B"], p["N"], 3)
                assert (a["features"] is None) == (p["mode"] != "mean")


def _arrays(inputs: dict) -> list[np.ndarray]:
    out = []
    for v in inputs.values():
        if isinstance(v, np.ndarray):
            out.append(v)
        elif isinstance(v, list):
            out += [x for pair in v for x in pair]
    return out


def _sorted_as_seen(times: np.ndarray, time_dtype: str) -> None:
    """Non-decreasing per row as the provider sees them (rounded to the time dtype): the op's requirement."""
    t = times.astype(time_dtype)
    assert (np.diff(t, axis=1) >= 0).all()


def test_sensor_times_are_sorted_by_construction_even_at_the_largest_lengths():
    rng = np.random.default_rng(0)
    for s, t0, dur, dt in ((200_000, 0.0, 200_000 / 10.0, "float32"), (200_000, 1.75e9, 200.0, "float64"),
                           (2, 0.0, 0.01, "float32"), (1, 0.0, 1.0, "float32")):
        t = base.sensor_times(rng, 3, s, t0, dur)
        assert t.shape == (3, s) and t.dtype == np.float64
        _sorted_as_seen(t, dt)
        assert t0 - 0.3 * dur / max(s - 1, 1) <= t.min() and t.max() <= t0 + dur * (1 + 0.3 / max(s - 1, 1))


def test_the_three_clouds():
    from robocache.bench.ops.voxelize import sampled_cloud

    rng = np.random.default_rng(1)
    inside = {}
    for cloud in ("uniform", "clustered", "sparse"):
        pts = sampled_cloud(rng, 2, 20_000, cloud)
        assert pts.shape == (2, 20_000, 3) and pts.dtype == np.float32 and np.isfinite(pts).all()
        inside[cloud] = float((np.abs(pts) < 2.0).all(axis=-1).mean())
        occupied = len(np.unique(np.floor((pts[0] + 2) * 16).astype(np.int64), axis=0))
        inside[cloud + "_voxels"] = occupied
    assert 0.75 < inside["uniform"] < 0.9  # ~14% outside, as the grid's uniform clouds
    assert inside["sparse"] > 0.8
    # a ground plane and poles occupy far fewer voxels than a uniform cloud of the same size
    assert inside["sparse_voxels"] < inside["uniform_voxels"] / 2
    with pytest.raises(ValueError, match="unknown cloud"):
        sampled_cloud(rng, 1, 10, "fog")


# ---------------------------------------------------------------- the summary on SYNTHETIC records

@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list:
    loaded = store.load(syn.write_fixture(tmp_path_factory.mktemp("sampled")))
    assert not loaded.bad and all(r.synthetic for r in loaded.records)
    return loaded.records


def test_points(records):
    rows = views.point_rows(records)
    h200 = [r for r in rows if r["arch"] == "H200" and r["seed"] == 2]
    assert [r["case"].rsplit("-", 1)[1] for r in h200] == ["p0", "p1", "p2", "p3"]  # p4: no torch.compile
    by = {r["case"].rsplit("-", 1)[1]: r for r in h200}
    assert by["p0"]["ratio"] == pytest.approx(1.25) and by["p0"]["compile_mode"] == "default"
    assert by["p3"]["ratio"] == pytest.approx(1.2) and by["p3"]["compile_mode"] == "max-autotune"
    assert by["p2"]["pct_of_ceiling"] == pytest.approx(80.0) and by["p2"]["compile_pct"] == pytest.approx(40.0)
    assert by["p0"]["vs_torch_eager"] == pytest.approx(10.0) and by["p0"]["vs_cupy"] == pytest.approx(2.0)
    assert by["p3"]["vs_torch_eager"] is None and by["p1"]["flagged"] and not by["p0"]["flagged"]
    assert [by[p]["features"] for p in ("p0", "p1", "p2", "p3")] == [7, 64, 512, 1023]
    assert by["p2"]["bytes"] == 400 * 10**6 and by["p2"]["stratum"] == "large"
    # robocache's tuned launch per point, in words (record.launches): what a loser was measured with
    assert [by[p]["launch"] for p in ("p0", "p1", "p2", "p3")] == [
        "cs 2 (tuned)", None, "lg_shift 1, tpg 4 (shipped)", "default (cache)"]
    text = views.points_table(records)
    assert "robocache's launch (source)" in text and "| cs 2 (tuned) |" in text
    assert views.features("fuse", {"streams": [[10, 3], [20, 5]]}) == 8
    assert views.features("voxelize", {"C": 0}) == 1 and views.features("voxelize", {"C": 4}) == 4


def test_summary_is_exact(records):
    rows = {(r["arch"], r["seed"]): r for r in views.summary(views.point_rows(records))}
    assert set(rows) == {("H100", 2), ("H200", 2), ("H200", 7)}
    s = rows[("H200", 2)]
    assert (s["points"], s["at_least_1x"], s["share_1x"]) == (4, 3, 0.75)
    assert s["worst"] == pytest.approx(0.9) and s["worst_case"].endswith("p1 float32")
    assert s["median"] == pytest.approx((1.2 + 1.25) / 2)
    # large: p2 (exactly 80%: counts) and p3 (60%); slow compile: all four (10%, 11%, 40%, 50%), at 1.5x: p2
    assert (s["large"], s["large_with_ceiling"], s["large_at_80"], s["share_large_at_80"]) == (2, 2, 1, 0.5)
    assert (s["slow_compile"], s["slow_at_1_5x"], s["share_slow_1_5x"]) == (4, 1, 0.25)
    assert s["median_vs_torch_eager"] == pytest.approx(10.0) and s["points_vs_torch_eager"] == 3
    assert s["median_vs_cupy"] == pytest.approx(2.0) and s["points_vs_cupy"] == 1
    assert s["flagged"] == 1 and s["run_id"] == "synthetic-h200-sampled"
    h = rows[("H100", 2)]
    assert (h["points"], h["at_least_1x"], h["large_at_80"], h["slow_at_1_5x"]) == (4, 3, 0, 1)
    assert h["median"] == pytest.approx((1.25 + 1.3) / 2) and h["worst"] == pytest.approx(0.9)
    f = rows[("H200", 7)]
    assert (f["points"], f["median"], f["run_id"]) == (1, pytest.approx(3.0), "synthetic-h200-seed7")


def test_gpu_pairs(records):
    (pair,) = views.gpu_pairs(views.point_rows(records))
    assert pair["first"].startswith("H100") and pair["second"].startswith("H200") and pair["seed"] == 2
    assert pair["points"] == 2 and pair["worst"] == pytest.approx(1.2) and pair["median"] == pytest.approx(1.3)
    assert pair["at_least_1_3x"] == 1


def test_report_sampled_cli(records, tmp_path, capsys):
    src = syn.write_fixture(tmp_path / "r")
    assert cli.main(["report", str(src), "--sampled", "--out", str(tmp_path / "s.md")]) == 0
    text = (tmp_path / "s.md").read_text()
    assert "| resample | H200 (nvidia-h200) | 2 | synthetic-h200-sampled | 4 | 3 of 4 (75%) | 0.90x" in text
    assert "| 1.23x | 1 of 2 (50%) | 1 of 4 (25%) | 10.00x | 2.00x | 1 |" in text
    assert "| resample | 2 | H100 (nvidia-h100-x1) | H200 (nvidia-h200) | 2 | 1.20x | 1.30x | 1 of 2 (50%) |" in text
    capsys.readouterr()
    assert cli.main(["report", str(src), "--sampled", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "sampled" and [s["title"] for s in doc["sections"]] == [
        "Summary per op", "GPU over GPU on the large points", "Every point, worst first"]
    got = {(r["arch"], r["seed"]): r for r in doc["summary"]}
    assert got[("H200", 2)]["share_1x"] == 0.75 and math.isclose(got[("H200", 2)]["median"], 1.225)
    assert cli.main(["report", str(src), "--sampled", "--run", "x"]) == 2
    assert "--sampled picks one run" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli.main(["report", str(src), "--sampled", "--kernels"])
    assert e.value.code == 2


def test_report_sampled_escapes_record_text(tmp_path):
    src = syn.write_fixture(tmp_path, evil=True)
    text = views.sampled(store.load(src).records)
    assert syn.SCRIPT not in text and "h200-\\<script\\>" in text


def test_report_sampled_without_points():
    assert "No sampled point" in views.summary_table([])
    assert "No large sampled point" in views.pairs_table([])


def test_kernel_version_runs_are_points_of_their_own(tmp_path, capsys):
    """A kernel-version sampled run (``--providers robocache@v2,robocache@v3,torch_compile``: no ``robocache``
    record, as results/h100-nvidia-h100-x1/*-sampled) shows each version's points against torch.compile, named in
    the op cell; a later run of the versions alone (no torch.compile to take a ratio from) is not the measurement
    picked. The public API's points of another run keep their rows, unchanged."""
    from robocache.bench.store import write_records

    kv = [syn.sampled_record(2, i, name, prov, t, run="kv-sampled", created="2026-03-03T00:00:00Z")
          for i, (name, t2, t3, tc) in enumerate((("p0", 8.0, 4.0, 10.0), ("p1", 20.0, 25.0, 22.0)))
          for prov, t in (("robocache@v2", t2), ("robocache@v3", t3), ("torch_compile", tc))]
    later = [syn.sampled_record(2, 0, "p0", prov, 1.0, run="kv-alone", created="2026-03-04T00:00:00Z")
             for prov in ("robocache@v2", "robocache@v3")]
    for r in kv:
        r["git_commit"] = "e" * 40  # a commit of its own: its own measurement
    for r in later:
        r["git_commit"] = "f" * 40  # another commit: another measurement, the newer one
    src = syn.write_fixture(tmp_path / "r")
    write_records(src, syn.gpu_env("H200", "nvidia-h200"), kv, name="kv")
    write_records(src, syn.gpu_env("H200", "nvidia-h200"), later, name="kv-alone")
    recs = store.load(src).records
    rows = [r for r in views.point_rows(recs) if r["provider"] != "robocache"]
    assert [(r["provider"], r["case"].rsplit("-", 1)[1], r["run_id"]) for r in rows] == [
        ("robocache@v2", "p0", "kv-sampled"), ("robocache@v2", "p1", "kv-sampled"),
        ("robocache@v3", "p0", "kv-sampled"), ("robocache@v3", "p1", "kv-sampled")]
    assert [round(r["ratio"], 3) for r in rows] == [1.25, 1.1, 2.5, 0.88]
    assert views.ours_providers(recs) == ["robocache", "robocache@v2", "robocache@v3"]
    summ = {(r["arch"], r["seed"], r["provider"]): r for r in views.summary(views.point_rows(recs))}
    assert summ[("H200", 2, "robocache@v3")]["points"] == 2 and summ[("H200", 2, "robocache")]["points"] == 4
    text = views.sampled(recs)
    assert "| resample (robocache@v3) | H200 (nvidia-h200) | 2 | kv-sampled | 2 | 1 of 2 (50%) | 0.88x" in text
    assert "| resample | H200 (nvidia-h200) | 2 | synthetic-h200-sampled | 4 | 3 of 4 (75%) | 0.90x" in text
    assert cli.main(["report", str(src), "--sampled", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {r["provider"] for r in doc["summary"]} == {"robocache", "robocache@v2", "robocache@v3"}
