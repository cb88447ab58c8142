"""DDP training of the pipelines suite on the CPU: torchrun with 2 Gloo processes (the harness's launcher and
rank setup), each rank on its own shard, both data-loading pipelines, the loss-curve gate on every rank, rank
0's records with the ``distributed`` section, read back through the store and the report."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("h5py")
torch = pytest.importorskip("torch")

from robocache.bench import launch, report, store  # noqa: E402
from robocache.bench.pipelines import dataset as ds  # noqa: E402
from robocache.bench.pipelines.run import Config, run  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not launch.available("cpu")[0], reason="torch.distributed with Gloo is missing")]


def test_ddp_two_gloo_ranks(tmp_path: Path) -> None:
    path = tmp_path / "d.h5"
    ds.generate(path, ds.Spec(seed=5, min_s=1.0, max_s=2.0, episodes=6))
    cfg = Config(device="cpu", dataset=str(path), parts=(), batch_sizes=(2,), workers=(0,), models=("mlp",),
                 train_steps=3, train_warmup=1, profile_steps=0, ddp_ranks=(2,))
    res = run(cfg, tmp_path / "res", machine="ci-cpu")
    assert not res.failed, [(r["case"]["id"], r["reason"]) for r in res.failed]
    loaded = store.load(tmp_path / "res")
    assert not loaded.bad
    recs = {r.case.provider: r for r in loaded.records}
    assert set(recs) == {"cpu_workers", "robocache"} and len(loaded.records) == 2
    assert Path(loaded.records[0].source).name.endswith("-pipelines-ddp-g2.records.json")
    for r in recs.values():
        d = r.distributed
        assert r.case.id.endswith("-ddp-g2") and r.case.params["ranks"] == 2 and r.case.items == 4
        assert d.world_size == 2 and d.backend == "gloo" and d.items_per_rank == [2, 2]
        assert d.step_us == max(d.per_rank_us) and d.efficiency is None  # no one-rank launch in this run
        assert d.aggregate_items_per_s == pytest.approx(4 / (d.step_us * 1e-6))
        assert r.check.passed and len(r.pipeline.loss) == 4 and r.pipeline.figures["ranks"] == 2
    # the same seed and shards: the two pipelines' curves on rank 0 are the same
    assert recs["cpu_workers"].pipeline.loss == recs["robocache"].pipeline.loss
    text = report.pipeline_training(loaded.records)
    assert "| CPU (ci-cpu) | mlp | robocache.fuse | 2 | 2 | 0 |" in text
