"""The pipelines suite on a GPU, tiny: robocache.fuse on the GPU gives the CPU workers' batches (the equality
gate), the training curves agree, inference backends match eager, GPU utilisation and peak memory are recorded.
Skipped (loudly, see tests/gpu/conftest.py) without a CUDA device."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("h5py")


def test_pipelines_on_the_gpu(tmp_path: Path) -> None:
    from robocache.bench import store
    from robocache.bench.pipelines import dataset as ds
    from robocache.bench.pipelines.run import Config, run

    path = tmp_path / "d.h5"
    ds.generate(path, ds.Spec(seed=1, min_s=1.0, max_s=3.0, episodes=12))
    cfg = Config(device="gpu", dataset=str(path), batch_sizes=(4,), workers=(1,), load_batches=4, load_warmup=1,
                 train_steps=3, train_warmup=1, profile_steps=1, infer_batches=(2,), backends=("eager", "sdpa"),
                 infer_time_s=0.1)
    res = run(cfg, tmp_path / "res", machine="gpu-test")
    assert not res.failed, [(r["case"]["id"], r["case"]["provider"], r["reason"]) for r in res.failed]
    loaded = store.load(tmp_path / "res")
    assert not loaded.bad and len(loaded.records) == len(res.records) == 8
    dl = {r.case.provider: r for r in loaded.records if r.case.op == "dataload"}
    assert dl["robocache"].pipeline.resample_on == "gpu" and dl["robocache"].check.passed
    assert dl["robocache"].check.max_rel_err <= 2e-6
    assert dl["robocache"].pipeline.split_ms["transfer"] > 0
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
    assert len(tr) == 4 and all(r.pipeline.kernels for r in tr)
    inf = [r for r in loaded.records if r.case.op == "infer"]
    assert len(inf) == 2 and all(r.pipeline.figures["peak_mem_mb"] > 0 for r in inf)
