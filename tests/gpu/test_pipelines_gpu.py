"""The pipelines suite on a GPU, tiny: robocache.fuse and the EpisodeCache (resident, and streamed within half its
size) on the GPU give the CPU workers' batches (the equality gate), the training curves agree, inference backends
match eager, GPU utilisation, peak memory and the cache's cost are recorded. Skipped (loudly, see
tests/gpu/conftest.py) without a CUDA device."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("h5py")


def test_pipelines_on_the_gpu(tmp_path: Path) -> None:
    from robocache.bench import store
    from robocache.bench.pipelines import dataset as ds
    from robocache.bench.pipelines.run import Config, run

    path = tmp_path / "d.h5"
    # 24 episodes: half the cache holds a batch of 4 and a chunk copied ahead (the streamed regime's default)
    ds.generate(path, ds.Spec(seed=1, min_s=1.0, max_s=3.0, episodes=24))
    cfg = Config(device="gpu", dataset=str(path), batch_sizes=(4,), workers=(1,), load_batches=4, load_warmup=1,
                 train_steps=3, train_warmup=1, profile_steps=1, infer_batches=(2,), backends=("eager", "sdpa"),
                 infer_time_s=0.1)
    res = run(cfg, tmp_path / "res", machine="gpu-test")
    assert not res.failed, [(r["case"]["id"], r["case"]["provider"], r["reason"]) for r in res.failed]
    loaded = store.load(tmp_path / "res")
    # dataload: 2 DataLoader pipelines + the cache in 2 regimes; train per model: CPU workers, fuse, resident
    # cache, and the streamed cache with the CPU workers on its order; infer: 2 backends
    assert not loaded.bad and len(loaded.records) == len(res.records) == 4 + 2 * 5 + 2
    dl = {(r.case.provider, r.case.params.get("regime")): r for r in loaded.records if r.case.op == "dataload"}
    assert dl[("robocache", None)].pipeline.resample_on == "gpu" and dl[("robocache", None)].check.passed
    assert dl[("robocache", None)].check.max_rel_err <= 2e-6
    assert dl[("robocache", None)].pipeline.split_ms["transfer"] > 0
    for regime in ("resident", "streamed"):
        c = dl[("episode_cache", regime)]
        assert c.pipeline.resample_on == "gpu" and c.check.passed and c.check.max_rel_err <= 2e-6
        assert c.pipeline.split_ms["transfer"] == 0 and c.pipeline.figures["cache_mb"] > 0
        assert c.pipeline.figures["cache_build_s"] > 0 and any(n.startswith(f"EpisodeCache: {regime} on GPU")
                                                               for n in c.pipeline.notes)
    st = dl[("episode_cache", "streamed")].pipeline.figures
    assert st["cache_mb"] <= dl[("episode_cache", "streamed")].case.params["budget_mb"] + 1e-3 < st["cache_host_mb"]
    assert st["chunks"] > st["slots"] and st["chunk_copies"] >= 1
    for r in loaded.records:
        if r.pipeline.gpu_util != "ok":  # NVML may be missing: then said, never a made-up figure
            assert r.pipeline.gpu_util.startswith("unavailable") and r.pipeline.gpu_util_pct is None
    # the references (training's cpu_workers curve, inference's eager output) carry no check of their own
    reference = {("train", "cpu_workers"), ("infer", "eager")}
    for r in loaded.records:
        if (r.case.op, r.case.provider) in reference:
            assert r.check is None
        else:
            assert r.check is not None and r.check.passed, (r.case.op, r.case.provider, r.check)
    tr = [r for r in loaded.records if r.case.op == "train"]
    assert len(tr) == 10
    # profiled: all but the streamed case's CPU-workers reference
    assert all(bool(r.pipeline.kernels) != (r.case.params.get("regime") == "streamed" and
                                            r.case.provider == "cpu_workers") for r in tr)
    for r in tr:
        if r.case.provider == "episode_cache":
            assert r.pipeline.figures["speedup_vs_baseline"] > 0 and r.check.passed
            assert r.pipeline.figures["cache_mb"] > 0 and r.pipeline.resample_on == "gpu"
    inf = [r for r in loaded.records if r.case.op == "infer"]
    assert len(inf) == 2 and all(r.pipeline.figures["peak_mem_mb"] > 0 for r in inf)
