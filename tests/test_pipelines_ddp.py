"""DDP training of the pipelines suite on the CPU: torchrun with Gloo processes (the harness's launcher, rank loop
and typed messages), each rank on its own shard, the three data-loading pipelines (the EpisodeCache: each rank's
own resident cache of its shard), the loss-curve gate on every rank,
rank 0's records with the ``distributed`` section (the efficiency against the one-rank launch), read back through
the store and the report; and a launch whose ranks fail: a ``crash`` record naming the error, the rest
``skipped``."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("h5py")
torch = pytest.importorskip("torch")

from robocache.bench import context, store  # noqa: E402
from robocache.bench.multigpu import launch  # noqa: E402
from robocache.bench.pipelines import dataset as ds  # noqa: E402
from robocache.bench.pipelines import ddp  # noqa: E402
from robocache.bench.pipelines.run import Config, points, run  # noqa: E402
from robocache.bench.views.pipelines import pipeline_training, pipelines  # noqa: E402

pytestmark = pytest.mark.skipif(not launch.available("cpu")[0], reason="torch.distributed with Gloo is missing")


def test_ddp_two_gloo_ranks(tmp_path: Path) -> None:
    path = tmp_path / "d.h5"
    ds.generate(path, ds.Spec(seed=5, min_s=1.0, max_s=2.0, episodes=6))
    cfg = Config(device="cpu", dataset=str(path), parts=(), batch_sizes=(2,), workers=(0,), models=("mlp",),
                 train_steps=3, train_warmup=1, profile_steps=0, ddp_ranks=(2, 1))
    res = run(cfg, tmp_path / "res", machine="ci-cpu")
    assert not res.failed, [(r.case.id, r.reason) for r in res.failed]
    loaded = store.load(tmp_path / "res")
    assert not loaded.bad
    assert len(loaded.records) == 6
    files = {Path(r.source).name.rsplit("-", 1)[1] for r in loaded.records}
    assert files == {"g1.records.json", "g2.records.json"}
    one = {r.case.provider: r for r in loaded.records if r.distributed.world_size == 1}
    recs = {r.case.provider: r for r in loaded.records if r.distributed.world_size == 2}
    assert set(recs) == set(one) == {"cpu_workers", "robocache", "episode_cache"}
    for prov, r in recs.items():
        d = r.distributed
        assert r.case.id.endswith("-ddp-g2") and r.case.params["ranks"] == 2 and r.case.items == 4
        assert Path(r.source).name.endswith("-pipelines-ddp-g2.records.json")
        assert d.world_size == 2 and d.backend == "gloo" and d.items_per_rank == [2, 2]
        assert d.step_us == max(d.per_rank_us) and r.metrics.time_us.p50 == pytest.approx(d.step_us)
        assert d.aggregate_items_per_s == pytest.approx(4 / (d.step_us * 1e-6))
        # weak scaling against the one-rank launch of the same point and pipeline (run first: ascending)
        base = one[prov].distributed
        assert one[prov].case.id.endswith("-ddp-g1") and base.world_size == 1 and base.efficiency == 1.0
        assert d.baseline_step_us == base.step_us
        assert d.efficiency == pytest.approx(base.step_us / d.step_us)
        assert r.check.passed and len(r.pipeline.loss) == 4 and r.pipeline.figures["ranks"] == 2
    # the same seed and shards: the pipelines' curves on rank 0 are the same (the cache: its rank's shard)
    assert recs["cpu_workers"].pipeline.loss == recs["robocache"].pipeline.loss == recs["episode_cache"].pipeline.loss
    assert recs["episode_cache"].case.params["regime"] == "resident"
    # the report: DDP records in their own table (the one-GPU training table leaves them out), each loader
    # against the CPU workers at the same rank count
    assert pipeline_training(loaded.records) == "_No training case in these records._"
    text = pipelines(loaded.records)
    assert "## DDP training over GPUs" in text
    vs = recs["robocache"].pipeline.figures["steps_per_s"] / recs["cpu_workers"].pipeline.figures["steps_per_s"]
    assert "| CPU (ci-cpu) | mlp | 2 | robocache.fuse | 2 | " in text and f"| {vs:.2f}x | ok |" in text


def test_ddp_failed_launch_records_why(tmp_path: Path) -> None:
    """Every rank fails in its first case (no dataset file): that case is a ``crash`` naming the ranks' error
    (through the launcher's typed failure files and torchrun's log), the case after it ``skipped``, both written."""
    cfg = Config(device="cpu", parts=("train",), batch_sizes=(2,), workers=(0,), models=("mlp",), train_steps=2,
                 train_warmup=1, ddp_ranks=(2,))
    info = {"episodes": 6, "seed": 0, "rgb": False, "payload_bytes": 0}
    pts = points(cfg, info)
    run_ctx = context.RunContext.start(suite="pipelines", device="cpu", out_dir=tmp_path / "res", machine="ci-cpu")
    recs = ddp.run_ddp(cfg, run_ctx, str(tmp_path / "missing.h5"), info, pts)
    assert [(r.case.provider, r.status) for r in recs] == [("cpu_workers", "crash"), ("robocache", "skipped"),
                                                                    ("episode_cache", "skipped")]
    assert "during the case" in recs[0].reason and "missing.h5" in recs[0].reason
    assert recs[1].reason.endswith(f"ended at {recs[0].case.id}/cpu_workers")
    loaded = store.load(tmp_path / "res")
    assert not loaded.bad and [r.status for r in loaded.records] == ["crash", "skipped", "skipped"]


def test_ddp_records_stay_in_their_own_files_when_a_part_follows(tmp_path: Path, monkeypatch) -> None:
    """The DDP launches write their records into their own files; a part run after them (infer, the default's
    last) rewrites the run file with its own records only, never the DDP ones (a report would list them twice).
    The launches and the inference are stand-ins here (committed records), the run's bookkeeping is the real one."""
    from robocache.bench.pipelines import run as run_mod

    repo = Path(__file__).resolve().parents[1]
    ddp_rec = store.load(repo / "results" / "h200-nvidia-h200-x4"
                         / "20261127T124551Z-6e2dd5-pipelines-ddp-g1.records.json").records[0]
    infer_rec = next(r for r in store.load(repo / "results" / "h200-nvidia-h200").records
                     if r.suite == "pipelines" and r.case.op == "infer")
    monkeypatch.setattr(ddp, "run_ddp", lambda *a, **k: [ddp_rec])
    monkeypatch.setattr(run_mod, "_infer", lambda cfg, ctx, pts, emit, say: emit(infer_rec))
    path = tmp_path / "d.h5"
    ds.generate(path, ds.Spec(seed=5, min_s=1.0, max_s=2.0, episodes=6))
    cfg = Config(device="cpu", dataset=str(path), parts=("infer",), batch_sizes=(2,), workers=(0,),
                 models=("mlp",), train_steps=3, train_warmup=1, profile_steps=0, ddp_ranks=(1,))
    res = run(cfg, tmp_path / "res", machine="ci-cpu")
    assert [r.case.op for r in res.records] == ["infer", "train"]  # the run's records: both parts'
    written = store.load(res.path)
    assert not written.bad and [r.case.op for r in written.records] == ["infer"]
