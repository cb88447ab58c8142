"""The EpisodeCache as the pipelines suite's third loader, on the CPU (its NumPy path; the records say so):
data-loading and training records in both regimes beside the two DataLoader pipelines, the equality gate and
the loss-curve gate against the CPU workers on the same episodes, the cache's cost in the records, the report's
tables with all three loaders, and what happens when the cache is wrong or cannot serve the dataset."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")
torch = pytest.importorskip("torch")

from robocache.bench import store  # noqa: E402
from robocache.bench.pipelines import __main__ as pcli  # noqa: E402
from robocache.bench.pipelines import dataset as ds  # noqa: E402
from robocache.bench.pipelines import loading  # noqa: E402
from robocache.bench.pipelines.run import Config, points, run  # noqa: E402
from robocache.bench.views.pipelines import pipeline_cache_rows, pipeline_dataload_rows, pipelines  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Twenty short episodes: half the cache holds a batch of 2 and a chunk copied ahead."""
    path = tmp_path_factory.mktemp("ds") / "d.h5"
    ds.generate(path, ds.Spec(seed=4, min_s=1.0, max_s=2.0, episodes=20))
    return str(path)


def _cfg(path: str, **kw) -> Config:
    base = dict(device="cpu", dataset=path, parts=("dataload", "train"), batch_sizes=(2,), workers=(0,),
                load_batches=3, load_warmup=1, models=("mlp",), train_steps=3, train_warmup=1, profile_steps=0)
    base.update(kw)
    return Config(**base)


@pytest.fixture(scope="module")
def suite(data: str, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("res")
    return run(_cfg(data, profile_steps=1), out, machine="ci-cpu"), out


def test_the_grid_has_three_loaders(data: str) -> None:
    cfg = _cfg(data, train_batches=(2, 4))
    info = {**ds.describe(data), "cached_bytes": loading.cached_payload_bytes(data)}
    pts = [(p["kind"], p["tag"], p["provider"]) for p in points(cfg, info)]
    assert ("dataload", "B2-cache-20ep-s4", "episode_cache") in pts
    assert ("dataload", "B2-cache-streamed-half-d1-20ep-s4", "episode_cache") in pts
    for b in (2, 4):
        for prov in ("cpu_workers", "robocache", "episode_cache"):  # the resident cache shares the tag
            assert ("train", f"mlp-B{b}-W0-20ep-s4", prov) in pts
        for prov in ("cpu_workers", "episode_cache"):  # the streamed cache and the CPU workers on its order
            assert ("train", f"mlp-B{b}-W0-cache-streamed-half-d1-20ep-s4", prov) in pts
    streamed = next(p for p in points(cfg, info) if p["tag"].startswith("B2-cache-streamed"))
    assert streamed["params"]["budget_mb"] == pytest.approx(info["cached_bytes"] / 2e6, rel=1e-3)
    assert streamed["params"]["prefetch_depth"] == 1 and streamed["params"]["workers"] == 0
    assert info["cached_bytes"] < info["payload_bytes"] + 1  # the four streams' times and values
    tag = _cfg(data, cache_budget_mb=0.75, prefetch_depth=2, cache_regimes=("streamed",))
    assert [p["tag"] for p in points(tag, info) if p["kind"] == "dataload" and p["provider"] == "episode_cache"] == \
        ["B2-cache-streamed0.75MB-d2-20ep-s4"]


def test_records_of_the_cache_in_both_regimes(suite) -> None:
    res, out = suite
    assert not res.failed, [(r["case"]["id"], r["case"]["provider"], r["reason"]) for r in res.failed]
    loaded = store.load(out)
    assert not loaded.bad and len(loaded.records) == len(res.records) == 4 + 5
    cache = [r for r in loaded.records if r.case.provider == "episode_cache"]
    assert {(r.case.op, r.case.params["regime"]) for r in cache} == {
        ("dataload", "resident"), ("dataload", "streamed"), ("train", "resident"), ("train", "streamed")}
    for r in cache:
        f = r.pipeline.figures
        assert r.pipeline.resample_on == "numpy_fallback" and any("NumPy path" in n for n in r.pipeline.notes)
        assert f["cache_mb"] > 0 and f["cache_build_s"] > 0 and r.check.passed
        assert any(n.startswith("EpisodeCache: " + r.case.params["regime"]) for n in r.pipeline.notes)
        if r.case.params["regime"] == "streamed":
            assert f["cache_mb"] <= r.case.params["budget_mb"] + 1e-3 < f["cache_host_mb"]  # budget_mb: 3 decimals
            assert f["chunks"] > f["slots"] >= 2 and f["chunk_copies"] >= 1 and f["prefetch_depth"] == 1
    dl = {r.case.params["regime"]: r for r in cache if r.case.op == "dataload"}
    assert dl["resident"].check.max_rel_err == 0.0  # the NumPy path: the CPU workers' batches to the bit
    assert dl["resident"].pipeline.split_ms["transfer"] == 0 and dl["resident"].pipeline.split_ms["read"] == 0
    base = max(r.pipeline.figures["traj_per_s"] for r in loaded.records
               if r.case.op == "dataload" and r.case.provider == "cpu_workers")
    assert dl["resident"].pipeline.figures["speedup_vs_baseline"] == pytest.approx(
        dl["resident"].pipeline.figures["traj_per_s"] / base)
    tr = {(r.case.provider, r.case.params.get("regime")): r for r in loaded.records if r.case.op == "train"}
    assert set(tr) == {("cpu_workers", None), ("robocache", None), ("episode_cache", "resident"),
                       ("cpu_workers", "streamed"), ("episode_cache", "streamed")}
    # the same episodes and seed: the cache's loss curves are the CPU workers' (equal to the bit on the CPU)
    assert tr[("episode_cache", "resident")].pipeline.loss == tr[("cpu_workers", None)].pipeline.loss
    assert tr[("episode_cache", "streamed")].pipeline.loss == tr[("cpu_workers", "streamed")].pipeline.loss
    assert tr[("episode_cache", "resident")].case.id == tr[("cpu_workers", None)].case.id
    assert tr[("cpu_workers", "streamed")].check is None  # the streamed case's reference
    assert tr[("episode_cache", "resident")].pipeline.kernels and tr[("cpu_workers", "streamed")].pipeline.kernels == []
    sp = tr[("episode_cache", "streamed")].pipeline.figures["speedup_vs_baseline"]
    assert sp == pytest.approx(tr[("episode_cache", "streamed")].pipeline.figures["steps_per_s"]
                               / tr[("cpu_workers", "streamed")].pipeline.figures["steps_per_s"])


def test_report_shows_all_three_loaders(suite) -> None:
    _, out = suite
    recs = store.load(out).records
    text = pipelines(recs)
    assert "## EpisodeCache: data loading from the device" in text
    assert "EpisodeCache (resident)" in text and "EpisodeCache (streamed, depth 1)" in text
    assert "CPU workers (NumPy), the streamed cache's order" in text and "robocache.fuse" in text
    rows = pipeline_dataload_rows(recs)
    assert len(rows) == 1 and rows[0]["cache_tps"] > 0 and rows[0]["cache_speedup"] > 0
    cache = pipeline_cache_rows(recs)
    assert [r[2] for r in cache] == ["resident", "streamed, depth 1"]
    assert cache[1][9] != "-" and cache[0][9] == "-"  # chunks / slots: streamed only


def test_a_wrong_cache_is_incorrect_and_the_suite_goes_on(data: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from robocache.episodes import EpisodeCache

    real = EpisodeCache._numpy_batch

    def off(self, *a):
        x, mask, win = real(self, *a)
        return x + 0.5, mask, win

    monkeypatch.setattr(EpisodeCache, "_numpy_batch", off)
    res = run(_cfg(data, cache_regimes=("resident",)), tmp_path, machine="ci-cpu")
    st = {(r["case"]["op"], r["case"]["provider"]): r for r in res.records}
    bad = st[("dataload", "episode_cache")]
    assert bad["status"] == "incorrect" and "EpisodeCache's batch differs" in bad["reason"] and bad["metrics"] is None
    assert st[("train", "episode_cache")]["status"] == "incorrect"
    assert "loss curve differs" in st[("train", "episode_cache")]["reason"]
    assert st[("dataload", "cpu_workers")]["status"] == st[("train", "robocache")]["status"] == "ok"


def test_a_budget_too_small_is_the_cases_error(data: str, tmp_path: Path) -> None:
    res = run(_cfg(data, cache_regimes=("streamed",), cache_budget_mb=0.01, parts=("dataload",)), tmp_path,
              machine="ci-cpu")
    bad = [r for r in res.records if r["case"]["provider"] == "episode_cache"]
    assert len(bad) == 1 and bad[0]["status"] == "error" and "too small for one batch" in bad[0]["reason"]
    assert not store.load(tmp_path).bad


def test_rgb_runs_skip_the_cache(tmp_path: Path) -> None:
    path = tmp_path / "rgb.h5"
    ds.generate(path, ds.Spec(seed=1, min_s=1.0, max_s=1.5, episodes=4, rgb=True))
    res = run(_cfg(str(path), rgb=True, cache_regimes=("resident",), parts=("dataload",)), tmp_path / "res",
              machine="ci-cpu")
    cache = [r for r in res.records if r["case"]["provider"] == "episode_cache"]
    assert [r["status"] for r in cache] == ["skipped"] and "RGB frames are not cached" in cache[0]["reason"]
    assert not res.failed


def test_make_pipeline_builds_a_shard_cache(data: str) -> None:
    """Without a cache (DDP: each rank), the loader builds a resident cache of the episodes it is given."""
    idx = [3, 7, 7, 1]
    p = loading.make_pipeline("episode_cache", data, batch=2, workers=0, device="cpu", indices=idx)
    assert p.cache.mode == "resident" and p.cache.episodes.tolist() == [1, 3, 7]
    got = [p.finish(b)[0] for b, _ in zip(p.loader, range(3))]
    assert got[0]["x"].shape[0] == 2 and got[0]["rgb"] is None
    assert p.batch_bytes == pytest.approx(2 * np.mean([dict(zip(p.cache.episodes.tolist(),
                                                                p.cache.episode_nbytes.tolist()))[i] for i in idx]))
    with pytest.raises(ValueError, match="RGB frames are not cached"):
        loading.make_pipeline("episode_cache", data, batch=2, workers=0, device="cpu", indices=idx, rgb=True)
    with pytest.raises(ValueError, match="unknown cache regime"):
        loading.build_cache(data, batch=2, device="cpu", seed=0, regime="floating")


def test_cli_options(data: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert pcli.main(["run", "--device", "cpu", "--cache-regimes", "resident,floating", "--out", str(tmp_path)]) == 2
    assert pcli.main(["run", "--device", "cpu", "--prefetch-depth", "-1", "--out", str(tmp_path)]) == 2
    assert pcli.main(["run", "--device", "cpu", "--cache-budget-mb", "0", "--out", str(tmp_path)]) == 2
    assert pcli.main(["run", "--device", "cpu", "--train-batches", "0", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown cache regimes: floating" in err and "prefetch_depth must be >= 0" in err
    assert "cache_budget_mb must be > 0" in err and "train_batches must be" in err
    assert not any(tmp_path.iterdir())
    assert pcli.main(["list", "--device", "cpu", "--train-batches", "8,16", "--cache-regimes", ""]) == 0
    out = capsys.readouterr().out
    assert "train/mlp-B16-W2-Nep-s0" in out and "episode_cache" not in out
