"""Nsight Compute figures carry their units (issue 24: kernel times 1000x off, "ns" read as "us").

Each metric is scaled from the unit ncu printed beside it, for every unit ncu prints (older releases spell them
out, newer ones abbreviate); a unit not known is refused loudly (the record is an error saying which), never
guessed. The profiled call's ncu time is checked against the harness's device time of the same case in the same
run, and flagged beyond a factor of 3. The CSV text here is synthetic (the shape of ``ncu --csv``), not measured.
"""
from __future__ import annotations

import msgspec
import pytest
from test_store import make_env

from robocache.bench import specs
from robocache.bench.schema import Env
from robocache.bench.messages import Task
from robocache.bench.pipelines import common, ncu
from robocache.bench.views.pipelines import PROFILE_HEADER, pipeline_profile_rows

HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
        '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def _csv(*rows: tuple[str, str, str, str]) -> str:
    """(kernel id, metric, unit, value) rows as ncu's details page prints them, between its own lines."""
    body = [f'"{i}","1","python3","h","kern{i}","1","7","(128, 1, 1)","(8, 1, 1)","0","9.0","m","{m}","{u}","{v}"'
            for i, m, u, v in rows]
    return "\n".join(["==PROF== Connected to process 1", HEAD, *body, "==PROF== Disconnected from process 1"])


T = "gpu__time_duration.sum"


@pytest.mark.parametrize("unit,value,us", [
    ("ns", "5,184", 5.184), ("nsecond", "5184", 5.184),
    ("us", "4.5", 4.5), ("usecond", "4.5", 4.5),
    ("ms", "1.25", 1250.0), ("msecond", "1.25", 1250.0),
    ("s", "0.002", 2000.0), ("second", "0.002", 2000.0),
])
def test_kernel_time_in_every_unit_ncu_prints(unit: str, value: str, us: float) -> None:
    assert ncu.parse_csv(_csv(("0", T, unit, value)))[0]["ncu_time_us"] == pytest.approx(us)


@pytest.mark.parametrize("unit,value,mb", [
    ("byte", "3,271,936", 3.271936), ("B", "3271936", 3.271936), ("Kbyte", "3271.936", 3.271936),
    ("KB", "3271.936", 3.271936), ("Mbyte", "3.271936", 3.271936), ("MB", "3.271936", 3.271936),
    ("Gbyte", "0.5", 500.0), ("GB", "0.5", 500.0),
])
def test_bytes_in_every_unit_ncu_prints(unit: str, value: str, mb: float) -> None:
    got = ncu.parse_csv(_csv(("0", "dram__bytes_read.sum", unit, value), ("0", "dram__bytes_write.sum", unit, value)))
    assert got[0]["dram_read_mb"] == pytest.approx(mb) and got[0]["dram_write_mb"] == pytest.approx(mb)


@pytest.mark.parametrize("unit", ["%", "percent"])
def test_percentages_and_registers(unit: str) -> None:
    got = ncu.parse_csv(_csv(("0", "dram__throughput.avg.pct_of_peak_sustained_elapsed", unit, "71.25"),
                             ("0", "lts__t_sector_hit_rate.pct", unit, "40.1"),
                             ("0", "launch__registers_per_thread", "register/thread", "32")))
    assert got == [{"kernel": "kern0", "dram_pct_of_peak": 71.25, "l2_hit_rate_pct": 40.1, "registers": 32.0}]


def test_the_l2_throughput_and_the_stall_shares_are_read_and_shown() -> None:
    """The three figures added for the large sampled points (the L2's throughput, warps waiting on a load, warps held
    by a full load/store queue) are parsed as percentages and land in the report's profile table."""
    got = ncu.parse_csv(_csv(("0", "lts__throughput.avg.pct_of_peak_sustained_elapsed", "%", "88.4"),
                             ("0", "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct", "%", "54.6"),
                             ("0", "smsp__warp_issue_stalled_lg_throttle_per_warp_active.pct", "%", "0.0")))
    assert got == [{"kernel": "kern0", "l2_pct_of_peak": 88.4, "stall_memory_pct": 54.6, "stall_lsu_queue_pct": 0.0}]
    with pytest.raises(ncu.UnitError):
        ncu.parse_csv(_csv(("0", "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct", "inst", "3")))
    for h in ("L2 % of peak", "warps waiting on a load %", "warps held by a full load/store queue %"):
        assert h in PROFILE_HEADER


def test_the_committed_h100_profile_unit_is_read_as_nanoseconds() -> None:
    """The H100 profile of 2026-11-24 recorded 5,184 "us" for a kernel the harness timed at about 4.5 us: ncu had
    printed nanoseconds ("ns"), a spelling the old table did not know, and its value was kept unscaled."""
    got = ncu.parse_csv(_csv(("0", T, "ns", "5,184")))
    assert got[0]["ncu_time_us"] == pytest.approx(5.184)


@pytest.mark.parametrize("metric,unit", [(T, "ks"), (T, ""), (T, "cycle"), ("dram__bytes_read.sum", "KiB"),
                                         ("dram__bytes_read.sum", "sector"), ("lts__t_sector_hit_rate.pct", "ratio")])
def test_an_unknown_unit_is_refused_loudly(metric: str, unit: str) -> None:
    text = _csv(("0", metric, unit, "12"))
    with pytest.raises(ncu.UnitError, match="refusing to guess"):
        ncu.parse_csv(text)
    rc = specs.find("resample/B256-S100-T50-D32/float32/robocache").to_record_case()
    rec = ncu._record(common, _ctx(), rc, 0, text, "", 1.0, harness_us=4.5)
    assert rec.status == "error" and repr(unit) in rec.reason and metric in rec.reason
    assert rec.pipeline is None  # no figure of an unknown scale is kept


def test_na_values_stay_unknown_whatever_their_unit() -> None:
    assert ncu.parse_csv(_csv(("0", "lts__t_sector_hit_rate.pct", "%", "n/a"))) == [
        {"kernel": "kern0", "l2_hit_rate_pct": None}]


def _ctx() -> Task:
    return Task(run_id="r", suite=ncu.SUITE, frontend="cli", device="gpu", git_commit=None, git_dirty=None)


def test_profile_agrees_with_the_harness_or_is_flagged() -> None:
    rc = specs.find("voxelize/B4-N100000-G64-count-uniform/float32/robocache").to_record_case()
    text = _csv(("0", T, "ns", "3,264"), ("1", T, "ns", "9,184"))  # the committed H100 profile's two kernels
    good = ncu._record(common, _ctx(), rc, 0, text, "", 1.0, harness_us=10.5)
    figs = good.pipeline.figures
    assert figs["ncu_call_us"] == pytest.approx(12.448) and figs["harness_us"] == 10.5
    assert figs["ncu_vs_harness"] == pytest.approx(12.448 / 10.5) and good.reason is None
    assert any("within 3x" in n for n in good.pipeline.notes)
    # the old reading (nanoseconds taken for microseconds) against the same harness time: flagged
    bad = ncu._record(common, _ctx(), rc, 0, _csv(("0", T, "us", "3,264"), ("1", T, "us", "9,184")), "", 1.0,
                      harness_us=10.5)
    assert bad.status == "ok" and "disagree" in bad.reason and "beyond 3x" in bad.reason
    assert any("BEYOND 3x" in n for n in bad.pipeline.notes)
    # too fast is flagged too; no harness time: said unchecked, never assumed right
    fast = ncu._record(common, _ctx(), rc, 0, text, "", 1.0, harness_us=100.0)
    assert "disagree" in fast.reason
    none = ncu._record(common, _ctx(), rc, 0, text, "", 1.0, harness_why="the harness's measurement: crash")
    assert none.pipeline.figures["ncu_vs_harness"] is None and none.reason is None
    assert any("no agreement check with the harness: the harness's measurement: crash" in n
               for n in none.pipeline.notes)
    env = msgspec.convert({**make_env("gpu-x"), "arch": "H100", "gpu_name": "NVIDIA H100", "device": "gpu"}, Env)
    rows = pipeline_profile_rows([msgspec.structs.replace(r, env=env) for r in (good, bad, none)])
    col = PROFILE_HEADER.index("ncu / harness")
    assert sorted(row[col] for row in rows) == sorted(["1.19x", "1,186x: DISAGREE (beyond 3x)", "not checked"])
