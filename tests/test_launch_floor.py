"""The call-cost floor timed interleaved (issue 25, item 5): ``timing.time_interleaved`` on a fake clock (every
figure exact), the schema's ``Dispatch.interleaved`` (additive: absent where not measured) and the report's
call-cost column, on SYNTHETIC records."""
from __future__ import annotations

import json

import msgspec
import pytest

from robocache.bench import schema, store, timing
from robocache.bench.views import kernels


class FakeClock:
    """A clock that moves only when a variant is called: each call costs its own fixed nanoseconds, so every
    time per call, ratio and quantile is known exactly."""

    def __init__(self) -> None:
        self.ns = 0
        self.calls: list[str] = []
        self.syncs = 0

    def __call__(self) -> int:
        return self.ns

    def variant(self, name: str, cost_ns) -> callable:
        def call() -> None:
            self.calls.append(name)
            self.ns += cost_ns(len(self.calls)) if callable(cost_ns) else cost_ns
        return call

    def sync(self) -> None:
        self.syncs += 1


def test_ratios_are_per_round_and_exact():
    clk = FakeClock()
    variants = {"bare": clk.variant("bare", 4000), "public": clk.variant("public", 10_000),
                "public_cupy": clk.variant("public_cupy", 6000)}
    got = timing.time_interleaved(variants, "bare", sync=clk.sync, clock=clk, min_rounds=5, max_rounds=9,
                                  warmup_s=0.0, target_loop_s=1e-4, noise_target=0.0, time_limit_s=60)
    # identical rounds: no spread, so even a zero noise target is met, at the minimum number of rounds
    assert got["rounds"] == 5 and got["noise_target_met"]
    assert got["calls_per_loop"] == 10  # 1e-4 s / the slowest variant's 10 us per call
    assert got["us"] == {"bare": 4.0, "public": 10.0, "public_cupy": 6.0}
    assert got["ratio"] == {"public": {"p20": 2.5, "p50": 2.5, "p80": 2.5},
                            "public_cupy": {"p20": 1.5, "p50": 1.5, "p80": 1.5}}
    assert "bare" not in got["ratio"] and got["noise"] == {"public": 0.0, "public_cupy": 0.0}


def test_rounds_interleave_in_a_rotated_order():
    clk = FakeClock()
    variants = {n: clk.variant(n, 1000) for n in ("bare", "a", "b")}
    got = timing.time_interleaved(variants, "bare", sync=clk.sync, clock=clk, min_rounds=3, max_rounds=3,
                                  warmup_s=0.0, target_loop_s=2e-6, noise_target=0.0)
    reps = got["calls_per_loop"]
    assert reps == 2
    timed = clk.calls[-3 * 3 * reps:]  # after the warm-up: 3 rounds of 3 loops of `reps` calls
    loops = [timed[i] for i in range(0, len(timed), reps)]
    assert all(timed[i:i + reps] == [timed[i]] * reps for i in range(0, len(timed), reps))
    assert loops == ["bare", "a", "b", "a", "b", "bare", "b", "bare", "a"]
    # the device drained before every timed loop (and around the warm-up)
    assert clk.syncs >= 9 + 1


def test_the_spread_of_the_per_round_ratios():
    """A public call costing 8 and 12 us on alternate calls over a steady 4 us floor, one call per loop: per-round
    ratios 2 and 3 alike, so p20 2, p50 2.5 and p80 3 (linear interpolation over ten rounds); the ratios never
    settle, so the rounds stop at the maximum."""
    clk = FakeClock()
    calls = {"public": 0}
    pub = clk.variant("public", lambda _: 8000 if calls["public"] % 2 else 12_000)

    def public() -> None:
        calls["public"] += 1
        pub()

    got = timing.time_interleaved({"bare": clk.variant("bare", 4000), "public": public}, "bare", sync=clk.sync,
                                  clock=clk, min_rounds=10, max_rounds=10, warmup_s=0.0, target_loop_s=1e-9,
                                  noise_target=0.0)
    assert got["calls_per_loop"] == 1 and got["rounds"] == 10 and not got["noise_target_met"]
    r = got["ratio"]["public"]
    assert (r["p20"], r["p50"], r["p80"]) == (2.0, 2.5, 3.0)


def test_bad_arguments():
    f = {"bare": lambda: None}
    with pytest.raises(ValueError, match="floor"):
        timing.time_interleaved(f, "bare")
    with pytest.raises(ValueError, match="floor"):
        timing.time_interleaved({"a": lambda: None, "b": lambda: None}, "bare")
    with pytest.raises(ValueError, match="min_rounds"):
        timing.time_interleaved({"bare": lambda: None, "a": lambda: None}, "bare", min_rounds=5, max_rounds=4)


def test_stops_on_noise_after_the_minimum_rounds():
    clk = FakeClock()
    got = timing.time_interleaved({"bare": clk.variant("bare", 3000), "a": clk.variant("a", 6000)}, "bare",
                                  clock=clk, min_rounds=15, max_rounds=400, warmup_s=0.0, noise_target=0.02)
    assert got["rounds"] == 15 and got["noise_target_met"]


# ---------------------------------------------------------------- the schema and the report

INTERLEAVED = {"rounds": 40, "calls_per_loop": 120, "bare_us": 5.0, "public_us": 11.0, "public_cupy_us": 9.0,
               "ratio_p20": 2.1, "ratio_p50": 2.2, "ratio_p80": 2.3, "cupy_ratio_p20": 1.7, "cupy_ratio_p50": 1.8,
               "cupy_ratio_p80": 1.9, "noise_target_met": True}


def _dispatch_run(tmp_path, interleaved: dict | None, cupy_own: dict | None = None):
    from tests.synthetic_kernels import DISPATCH, gpu_env, record

    cid, times = DISPATCH
    recs = []
    for prov, t in times.items():
        r = record(cid, "resample", "float32", {"B": 1, "S": 4, "T": 2, "D": 1, "kind": "dispatch"}, prov, t,
                   run="synthetic-dispatch", created="2026-03-01T00:00:00Z", suite="quick", ceiling=3000.0,
                   timer="host_loop")
        r["dispatch"] = {"device_us": 2.0, "gpu_keeps_up": True}
        if prov == "robocache" and interleaved is not None:
            r["dispatch"]["interleaved"] = dict(interleaved)
        if prov == "robocache@cupy" and cupy_own is not None:  # the harness since issue 27: its own ratio
            r["dispatch"]["interleaved"] = dict(cupy_own)
        recs.append(r)
    store.write_records(tmp_path, gpu_env("H100", "nvidia-h100-x1"), recs, name="dispatch")
    return store.load(tmp_path)


def test_schema_field_is_additive(tmp_path):
    loaded = _dispatch_run(tmp_path / "with", INTERLEAVED)
    assert not loaded.bad
    ours = next(r for r in loaded.records if r.case.provider == "robocache")
    assert ours.dispatch.interleaved.ratio_p50 == 2.2
    # a record without it writes no "interleaved" key (an older reader keeps reading such files)
    loaded = _dispatch_run(tmp_path / "without", None)
    (path,) = {r.source for r in loaded.records}
    assert "interleaved" not in json.loads(open(path).read())["records"][0]["dispatch"]
    bad = dict(INTERLEAVED, ratio_p50=-1.0)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"device_us": 1.0, "gpu_keeps_up": True, "interleaved": bad}, schema.Dispatch)


def test_call_cost_table_shows_the_interleaved_ratio(tmp_path):
    loaded = _dispatch_run(tmp_path, INTERLEAVED)
    rows = {r["provider"]: r for r in kernels.call_cost_rows(loaded.records)}
    assert (rows["robocache"]["interleaved_p20"], rows["robocache"]["interleaved_p50"],
            rows["robocache"]["interleaved_p80"], rows["robocache"]["interleaved_rounds"]) == (2.1, 2.2, 2.3, 40)
    assert rows["robocache@cupy"]["interleaved_p50"] == 1.8
    assert rows["bare_launch"]["interleaved_p50"] is None and rows["robocache@v1"]["interleaved_p50"] is None
    text = kernels.call_cost(loaded.records)
    assert "interleaved x bare (p20-p80)" in text and "| 2.20x (2.10-2.30, 40 rounds) |" in text
    assert "| 1.80x (1.70-1.90, 40 rounds) |" in text
    # records without it (older runs) keep their table, the column empty
    rows = kernels.call_cost_rows(_dispatch_run(tmp_path / "old", None).records)
    assert all(r["interleaved_p50"] is None for r in rows)


def test_the_cupy_row_shows_its_own_interleaved_ratio_when_its_record_has_one(tmp_path):
    """Since issue 27 the robocache@cupy record measures its own interleaved ratio (its public call on CuPy
    arrays): its row shows that, not the figure the robocache record measured beside it; check reads the same."""
    from robocache.bench.regressions.records import call_ratio

    own = dict(INTERLEAVED, ratio_p20=1.55, ratio_p50=1.6, ratio_p80=1.65, rounds=33)
    loaded = _dispatch_run(tmp_path, INTERLEAVED, cupy_own=own)
    rows = {r["provider"]: r for r in kernels.call_cost_rows(loaded.records)}
    assert (rows["robocache@cupy"]["interleaved_p50"], rows["robocache@cupy"]["interleaved_rounds"]) == (1.6, 33)
    assert rows["robocache"]["interleaved_p50"] == 2.2 and rows["bare_launch"]["interleaved_p50"] is None
    cupy = next(r for r in loaded.records if r.case.provider == "robocache@cupy")
    assert call_ratio(cupy)[0] == pytest.approx(1.6)  # compare and check judge the row on its own ratio
    # its own record without one (a run before issue 27): the robocache record's CuPy figure, as before
    rows = {r["provider"]: r for r in kernels.call_cost_rows(_dispatch_run(tmp_path / "old", INTERLEAVED).records)}
    assert rows["robocache@cupy"]["interleaved_p50"] == 1.8
