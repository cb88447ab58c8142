"""The CPU headline of `make run` (`robocache-bench report DIR --headline`, issue 24 item 7).

It names its case; it shows robocache (its public API on NumPy arrays, provider ``robocache@numpy``) against the
peers the run measured; it prints significant digits ("GB/s 0" was 0.2 rounded to an integer); it says when a
run's figures are unreliable, and ``contended`` comes from the load average against the cores (it stayed false at
load 6 on 2 cores). Records built here are synthetic fixtures; the worker test measures one real CPU case.
"""
from __future__ import annotations

import os

from test_store import make_env, make_record

from robocache import providers
from robocache.bench import env as envmod
from robocache.bench import specs, worker
from robocache.bench.messages import Task, TimingOptions
from robocache.bench.schema import Record
from robocache.bench.views import report as rep
from robocache.bench.views.tables import fmt_sig
from tests import typed

CLASSIC = "resample/B256-S100-T50-D32"


def _rec(provider: str, p50: float, gb: float, *, spread: float = 0.02, reasons: list[str] | None = None,
         contended: bool = False, noisy: bool = False) -> Record:
    r = make_record(0, run_id="cpu-run")
    r["case"].update(id=CLASSIC, provider=provider, op="resample")
    r["suite"], r["frontend"] = "quick", "cli"
    # a valid record (times >= 0): a wide spread lies mostly above the median, as a slow tail does
    lo = min(spread / 2, 0.5)
    r["metrics"]["time_us"].update(p20=p50 * (1 - lo), p50=p50, p80=p50 * (1 + spread - lo))
    r["metrics"]["gb_per_s"] = gb
    r["health"] = {"throttled": False, "contended": contended, "noisy": noisy, "reasons": reasons or []}
    r["env"] = make_env("laptop")
    return typed.record(r)


def test_cpu_headline_names_its_case_and_shows_robocaches_numpy_path() -> None:
    recs = [_rec("robocache@numpy", 60_000.0, 0.0851), _rec("numpy", 54_000.0, 0.0907),
            _rec("torch_eager", 112_940.0, 0.0433), _rec("torch_compile", 616.0, 7.94)]
    text = rep.headline(recs)
    title, cid = rep.headline_case()
    assert cid == CLASSIC and f"Case `{CLASSIC}`" in text and "classic case" in text
    rows = {line.split(" | ")[1]: line for line in text.splitlines() if line.startswith("| float32")}
    assert set(rows) == {"robocache (NumPy path)", "NumPy (CPU)", "torch eager", "torch.compile"}
    assert "| 1.00x |" in rows["robocache (NumPy path)"]
    assert "| 1.88x |" in rows["torch eager"] and "| 0.01x |" in rows["torch.compile"]  # peer p50 / ours
    # significant digits, never rounded to nothing
    assert "| 0.0433 |" in rows["torch eager"] and "| 7.94 |" in rows["torch.compile"]
    assert "Unreliable" not in text
    # a GPU run keeps the public API as ours (robocache@numpy never appears there)
    assert rep.ours([_rec("robocache", 5.0, 700.0), _rec("torch_compile", 8.0, 400.0)]) == "robocache"


def test_fmt_sig() -> None:
    assert [fmt_sig(x) for x in (0.2, 0.0433, 7.94, 43.31, 616.1, 2412.4, 0.0, None)] == [
        "0.200", "0.0433", "7.94", "43.3", "616", "2,412", "0", "-"]


def test_a_run_made_unreliable_by_load_or_spread_says_so() -> None:
    load = "contended: load average 6.0 over the last minute on 2 cores (more runnable tasks than cores)"
    recs = [_rec("robocache@numpy", 60_000.0, 0.085, contended=True, reasons=[load]),
            _rec("torch_compile", 28_581.0, 0.17, spread=26.0),  # p20-p80 across 26x its median: wide
            _rec("numpy", 54_000.0, 0.09, noisy=True, reasons=["noisy: noise target not met"])]
    text = rep.headline(recs)
    assert "**Unreliable figures**: 3 of 3 rows flagged" in text
    assert "load average 6.0 over the last minute on 2 cores" in text and "noise target not met" in text
    assert "wide" in text.split("| torch.compile |")[1].splitlines()[0]
    assert "p20-p80 us" in text


def test_contended_from_the_load_average_against_the_cores() -> None:
    h = envmod.assess_health(None, True, load=(6.0, 2), host_timed=True)
    assert h["contended"] and any("load average 6.0" in r and "2 cores" in r for r in h["reasons"])
    assert not envmod.assess_health(None, True, load=(1.5, 2), host_timed=True)["contended"]
    gpu = envmod.assess_health(None, True, load=(40.0, 16), host_timed=False)  # device timer: said, not flagged
    assert not gpu["contended"] and any(r.startswith("host busy: load average 40.0") for r in gpu["reasons"])


def _task(key: str) -> Task:
    return Task(run_id="t", suite="quick", frontend="test", device="cpu", synthetic=True, case_key=key,
                timing=TimingOptions(time_limit_s=0.2, noise_target=0.5))


def test_a_cpu_case_on_a_loaded_host_is_flagged_contended(monkeypatch) -> None:
    monkeypatch.delenv(envmod.IGNORE_LOAD_ENV, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (6.0, 5.0, 4.0))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    rec = worker.measure(_task(f"{CLASSIC}/float32/numpy"))
    assert rec.status == "ok" and rec.health.contended, rec.health
    assert any("load average 6.0 over the last minute on 2 cores" in r for r in rec.health.reasons)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    assert not worker.measure(_task(f"{CLASSIC}/float32/numpy")).health.contended
    monkeypatch.setattr(os, "getloadavg", lambda: (6.0, 5.0, 4.0))
    monkeypatch.setenv(envmod.IGNORE_LOAD_ENV, "1")  # the rehearsal's shared-machine switch
    assert not worker.measure(_task(f"{CLASSIC}/float32/numpy")).health.contended


def test_robocaches_numpy_path_is_a_cpu_provider_of_the_quick_suite() -> None:
    p = providers.get(providers.OURS_CPU)
    assert p.role == "ours" and p.device == "cpu" and p.array_kind == "numpy" and not providers.gpu_only(p.name)
    keys = {c.key for c in specs.cases("quick", device="cpu")}
    assert f"{CLASSIC}/float32/robocache@numpy" in keys
    assert not any(c.provider == providers.OURS_CPU for c in specs.cases("quick", device="gpu"))
    rec = worker.measure(_task(f"{CLASSIC}/float32/robocache@numpy"))
    assert rec.status == "ok" and rec.check.passed and rec.metrics.time_us.p50 > 0, rec.reason


def test_report_of_a_cpu_run_judges_against_robocaches_numpy_path() -> None:
    recs = [_rec("robocache@numpy", 60_000.0, 0.0851), _rec("numpy", 30_000.0, 0.17)]
    text = rep.report(recs)
    assert "robocache (NumPy path) p50 us" in text and "| 0.50x |" in text  # the peers table: numpy / ours
