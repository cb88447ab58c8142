"""The pipelines suite on the CPU (issue 18): the dataset generator, both data loaders and their equality
gate, the training step and its loss-curve gate, inference backends, records through the one schema and store,
the report's tables and the regression check. Tiny dataset, few steps; nothing touches a GPU (robocache runs its
NumPy fallback, and the records say so)."""
from __future__ import annotations

import json
from pathlib import Path

import msgspec
import numpy as np
import pytest

h5py = pytest.importorskip("h5py")
torch = pytest.importorskip("torch")

from robocache.bench import regressions, schema, store  # noqa: E402
from robocache.bench.views import report  # noqa: E402
from robocache.bench.views.kernels import kernels  # noqa: E402
from robocache.bench.views.pipelines import latest_pipeline_runs, pipeline_dataload_rows  # noqa: E402
from robocache.bench.pipelines import __main__ as pcli  # noqa: E402
from robocache.bench.pipelines import dataset as ds  # noqa: E402
from robocache.bench.pipelines import inference, loading, training  # noqa: E402
from robocache.bench.pipelines.run import Config, run  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One intra-op thread: on a busy 2-core machine torch's spinning threads make tiny steps 10x slower."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Six short episodes with RGB frames: a few MB."""
    path = tmp_path_factory.mktemp("ds") / "tiny.h5"
    ds.generate(path, ds.Spec(seed=3, min_s=1.0, max_s=2.5, rgb=True, episodes=6))
    return str(path)


# ---------------------------------------------------------------- the dataset

def test_dataset_streams_rates_and_jitter(tiny: str) -> None:
    info = ds.describe(tiny)
    assert info["episodes"] == 6 and info["rgb"] and info["seed"] == 3
    assert {k: (v["rate_hz"], v["dim"]) for k, v in info["streams"].items()} == {
        "vision": (30.0, 256), "proprio": (100.0, 14), "force": (333.0, 6), "action": (20.0, 7)}
    with h5py.File(tiny, "r") as f:
        lengths = []
        for i in range(6):
            g = f["episodes"][f"ep_{i:06d}"]
            dur = float(g.attrs["duration_s"])
            assert 1.0 <= dur <= 2.5
            for st in ds.STREAMS:
                t, x = g[st.name]["t"][()], g[st.name]["x"][()]
                assert t.dtype == np.float64 and x.dtype == np.float32 and x.shape == (t.shape[0], st.dim)
                assert t.shape[0] == max(2, int(dur * st.rate_hz))
                assert np.all(np.diff(t) >= 0) and t[0] >= 0
                off = t - np.arange(t.shape[0]) / st.rate_hz  # the jitter: non-zero, within 30% of a period
                assert np.abs(off).max() > 0 and np.abs(off).max() <= 0.3 / st.rate_hz + 1e-12
                assert np.abs(x).max() > 0.05  # a signal, not zeros
                lengths.append(t.shape[0])
            frames = g["rgb"]["frames"]
            assert frames.shape[0] == g["rgb"]["t"].shape[0]
            img = ds.decode_frame(frames[0])
            assert img.shape == ds.RGB_SHAPE and img.dtype == np.uint8 and len(frames[0]) < img.nbytes
    assert len(set(lengths)) > 4  # variable-length episodes, streams of different lengths


def test_dataset_is_seeded_and_prefix_stable(tmp_path: Path, tiny: str) -> None:
    a = tmp_path / "a.h5"
    ds.generate(a, ds.Spec(seed=3, min_s=1.0, max_s=2.5, episodes=8))
    with h5py.File(a, "r") as fa, h5py.File(tiny, "r") as fb:
        for i in range(6):  # the first episodes of a larger dataset with the same seed are the same episodes
            for st in ds.STREAMS:
                ga, gb = fa["episodes"][f"ep_{i:06d}"][st.name], fb["episodes"][f"ep_{i:06d}"][st.name]
                assert np.array_equal(ga["t"][()], gb["t"][()]) and np.array_equal(ga["x"][()], gb["x"][()])
    b = tmp_path / "b.h5"
    ds.generate(b, ds.Spec(seed=4, min_s=1.0, max_s=2.5, episodes=2))
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        assert not np.array_equal(fa["episodes/ep_000000/vision/x"][()][:5], fb["episodes/ep_000000/vision/x"][()][:5])


def test_dataset_size_option(tmp_path: Path) -> None:
    out = ds.generate(tmp_path / "s.h5", ds.Spec(size_mb=1.0, min_s=1.0, max_s=2.0))
    assert out["payload_bytes"] >= 1e6 and out["episodes"] >= 2
    smaller = ds.generate(tmp_path / "t.h5", ds.Spec(size_mb=1.0, min_s=1.0, max_s=2.0, episodes=out["episodes"] - 1))
    assert smaller["payload_bytes"] < 1e6  # it stopped at the first episode that reached the size
    assert not list(tmp_path.glob("*.tmp"))


def test_dataset_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    txt = tmp_path / "x.h5"
    txt.write_text("not hdf5")
    with pytest.raises(ValueError, match="not a readable HDF5 file"):
        ds.describe(txt)
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f.attrs["format"] = "something else"
    with pytest.raises(ValueError, match="not a robocache-bench/robot-synthetic"):
        ds.describe(other)
    assert ds.main([str(tmp_path / "y.h5"), "--episodes", "0"]) == 2
    assert ds.main([str(tmp_path / "y.h5"), "--min-s", "3", "--max-s", "1"]) == 2
    assert "min_s <= max_s" in capsys.readouterr().err and not (tmp_path / "y.h5").exists()


# ---------------------------------------------------------------- data loading

def _interp(t: np.ndarray, x: np.ndarray, tgt: np.ndarray) -> np.ndarray:
    return np.stack([np.interp(tgt, t, x[:, d].astype(np.float64)) for d in range(x.shape[1])], axis=1)


def test_baseline_item_is_numpy_interp(tiny: str) -> None:
    item = loading.EpisodeDataset(tiny, resample=True)[2]
    with h5py.File(tiny, "r") as f:
        g = f["episodes/ep_000002"]
        tgt = np.arange(int(g.attrs["duration_s"] * 50)) / 50
        want = np.concatenate([_interp(g[n]["t"][()], g[n]["x"][()], tgt) for n in loading.FUSED], axis=1)
    assert item["fused"].shape == (tgt.shape[0], loading.FUSED_DIM) == want.shape
    np.testing.assert_allclose(item["fused"], want.astype(np.float32), rtol=0, atol=0)


def test_padding_is_invisible_to_the_batched_resample(tiny: str) -> None:
    """collate_raw pads every stream to the batch's longest by repeating its last sample; one fuse over the
    padded batch equals each episode resampled alone (numpy.interp), rows past each end masked."""
    import robocache

    raw = loading.EpisodeDataset(tiny, resample=False)
    base = loading.EpisodeDataset(tiny, resample=True)
    items = [raw[i] for i in (0, 1, 4)]
    assert len({it["T"] for it in items}) > 1
    b = loading.collate_raw(items)
    out = robocache.fuse([(b[f"{n}_x"], b[f"{n}_t"]) for n in loading.FUSED], b["tgt"]).numpy()
    for k, i in enumerate((0, 1, 4)):
        n = items[k]["T"]
        np.testing.assert_array_equal(out[k, :n], base[i]["fused"])
        assert b["mask"][k, :n].all() and not b["mask"][k, n:].any()


def test_loaders_pass_the_gate_with_workers(tiny: str) -> None:
    chk = loading.gate(tiny, batch=2, workers=1, device="cpu", seed=0, rgb=True)
    assert chk["passed"] and chk["max_rel_err"] == 0.0 and "why" not in chk


def test_gate_catches_a_different_batch(tiny: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import robocache

    real = robocache.fuse
    monkeypatch.setattr(robocache, "fuse", lambda s, t: real(s, t) + 1e-3)
    chk = loading.gate(tiny, batch=2, workers=0, device="cpu", seed=0)
    assert not chk["passed"] and chk["max_abs_err"] == pytest.approx(1e-3, rel=1e-2)
    assert "differs from the CPU workers' batch" in chk["why"]


def test_time_pipeline_split(tiny: str) -> None:
    idx = loading.sample_indices(6, 2 * 4, 0)
    assert idx == loading.sample_indices(6, 2 * 4, 0) and len(set(idx)) > 1
    for prov in loading.PROVIDERS:
        p = loading.make_pipeline(prov, tiny, batch=2, workers=0, device="cpu", indices=idx, rgb=True)
        assert p.resample_on == ("cpu_workers" if prov == "cpu_workers" else "numpy_fallback")
        r = loading.time_pipeline(p, warmup=1, batches=3)
        assert len(r["per_s"]) == 3 and all(x > 0 for x in r["per_s"])
        read, decode, resample, collate = r["split_s"]
        assert read > 0 and decode > 0 and collate > 0  # RGB frames are decoded in both pipelines
        assert (resample > 0) == (prov == "cpu_workers")  # the robocache workers only read and pad
        assert (min(r["resample_s"]) > 0) == (prov == "robocache")
    with pytest.raises(ValueError, match="unknown data-loading provider"):
        loading.make_pipeline("gpu_magic", tiny, batch=2, workers=0, device="cpu", indices=idx)


# ---------------------------------------------------------------- training and inference

def test_training_same_loss_curve_and_profile(tiny: str, tmp_path: Path) -> None:
    idx = loading.sample_indices(6, 2 * 5, 1)
    curves = {}
    for prov in loading.PROVIDERS:
        p = loading.make_pipeline(prov, tiny, batch=2, workers=0, device="cpu", indices=idx)
        r = training.train(p, "mlp", steps=2, warmup=1, seed=0, profile_steps=1 if prov == "robocache" else 0,
                           trace_path=str(tmp_path / "t.json.gz"))
        curves[prov] = r["loss"]
        assert len(r["loss"]) == 3 and len(r["per_s"]) == 2 and all(c > 0 for c in r["compute_s"])
    assert training.curves_agree(curves["cpu_workers"], curves["robocache"])["passed"]
    assert r["kernels"] and abs(sum(k["share"] for k in r["kernels"]) - 1) < 0.5
    assert all(k["calls"] >= 1 and k["total_us"] > 0 for k in r["kernels"])
    assert (tmp_path / "t.json.gz").stat().st_size > 0
    bad = training.curves_agree(curves["cpu_workers"], [x * 1.01 for x in curves["cpu_workers"]])
    assert not bad["passed"] and bad["max_rel_err"] == pytest.approx(0.01)
    assert not training.curves_agree([1.0], [1.0, 2.0])["passed"]
    assert not training.curves_agree([1.0], [float("nan")])["passed"]


def test_models_shapes() -> None:
    x = torch.randn(2, 5, loading.FUSED_DIM)
    mask = torch.ones(2, 5, dtype=torch.bool)
    g = torch.Generator().manual_seed(0)
    for m in training.MODELS:
        loss = training.loss_fn(m, training.build(m), {"x": x, "mask": mask}, g)
        assert loss.ndim == 0 and torch.isfinite(loss)
    assert training.build("mlp")(x[..., :loading.OBS_DIM]).shape == (2, 5, 7)

    class Wrapped(torch.nn.Module):  # what DistributedDataParallel looks like to the loss: the model in .module
        def __init__(self, m):
            super().__init__()
            self.module = m

        def forward(self, *a):
            return self.module(*a)

    net = training.build("diffusion")
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    assert torch.equal(training.loss_fn("diffusion", Wrapped(net), {"x": x, "mask": mask}, g1),
                       training.loss_fn("diffusion", net, {"x": x, "mask": mask}, g2))
    with pytest.raises(ValueError, match="unknown model"):
        training.build("resnet")


def test_inference_backends_checked_against_eager() -> None:
    eager = inference.measure("eager", 2, "cpu", time_limit_s=0.0, min_calls=3)
    assert eager["check"] is None and len(eager["lat_s"]) == 3 and eager["peak_mb"] is None
    sdpa = inference.measure("sdpa", 2, "cpu", time_limit_s=0.0, min_calls=3, reference=eager["out"])
    assert sdpa["check"]["passed"] and sdpa["out"].shape == (2, inference.HORIZON, 7)
    off = inference.measure("sdpa", 2, "cpu", time_limit_s=0.0, min_calls=3, reference=eager["out"] + 0.01)
    assert not off["check"]["passed"]
    with pytest.raises(ValueError, match="unknown inference backend"):
        inference.make("onnx", "cpu", 0)


# ---------------------------------------------------------------- the suite: records, report, check

def _cfg(tiny: str, **kw) -> Config:
    """The two DataLoader pipelines (the EpisodeCache's cases: tests/test_pipelines_cache.py)."""
    base = dict(device="cpu", dataset=tiny, batch_sizes=(2,), workers=(0,), load_batches=3, load_warmup=1,
                train_steps=3, train_warmup=1, profile_steps=1, infer_batches=(1,), backends=("eager", "sdpa"),
                infer_time_s=0.0, cache_regimes=())
    base.update(kw)
    return Config(**base)


@pytest.fixture(scope="module")
def suite_run(tiny: str, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("res")
    return run(_cfg(tiny), out, machine="ci-cpu"), out


def test_suite_records_through_the_store(suite_run) -> None:
    res, out = suite_run
    assert not res.failed, [(r.case.id, r.reason) for r in res.failed]
    kinds = [(r.case.op, r.case.provider) for r in res.records]
    assert kinds == [("dataload", "cpu_workers"), ("dataload", "robocache"),
                     ("train", "cpu_workers"), ("train", "robocache"), ("train", "cpu_workers"), ("train", "robocache"),
                     ("infer", "eager"), ("infer", "sdpa")]
    loaded = store.load(out)
    assert not loaded.bad and len(loaded.records) == len(res.records)
    assert res.path.parent.name == "cpu-ci-cpu" and res.path.name.endswith("-pipelines.records.json")
    for r in loaded.records:
        assert r.suite == "pipelines" and r.method.timer == "host" and r.metrics.time_us.p50 > 0
        assert r.pipeline is not None
        # the references (training's cpu_workers curve, inference's eager output) are what the others are
        # checked against: no check of their own, never a check that compares a thing with itself
        reference = (r.case.op, r.case.provider) in (("train", "cpu_workers"), ("infer", "eager"))
        assert (r.check is None) if reference else (r.check is not None and r.check.passed)
        assert r.pipeline.gpu_util_pct is None and r.pipeline.gpu_util.startswith("unavailable")
    dl = {r.case.provider: r for r in loaded.records if r.case.op == "dataload"}
    assert dl["robocache"].pipeline.resample_on == "numpy_fallback"
    assert any("NumPy fallback" in n for n in dl["robocache"].pipeline.notes)
    assert dl["cpu_workers"].pipeline.resample_on == "cpu_workers"
    f = dl["robocache"].pipeline.figures
    assert f["speedup_vs_baseline"] == pytest.approx(f["traj_per_s"] / dl["cpu_workers"].pipeline.figures["traj_per_s"])
    assert set(dl["cpu_workers"].pipeline.split_ms) == {"read", "decode", "resampling", "collate", "wait", "transfer"}
    tr = [r for r in loaded.records if r.case.op == "train"]
    assert all(0 < r.pipeline.figures["data_wait_share"] < 1 and len(r.pipeline.loss) == 4 for r in tr)
    assert all(r.pipeline.kernels and r.pipeline.trace_file for r in tr)
    assert all((res.path.parent / r.pipeline.trace_file).exists() for r in tr)
    inf = {r.case.provider: r for r in loaded.records if r.case.op == "infer"}
    assert inf["eager"].pipeline.figures["speedup_vs_eager"] == 1.0 and inf["sdpa"].check.max_rel_err < 1e-4


def test_report_tables(suite_run) -> None:
    res, out = suite_run
    text = report.report(store.load(out).records)
    for title in ("## Data loading by batch size", "## Training step: where the time goes",
                  "## Policy inference by backend", "## Kernel breakdown of a training step"):
        assert title in text
    assert "NumPy fallback (no GPU)" in text and "CPU only" in text
    rows = pipeline_dataload_rows(store.load(out).records)
    assert len(rows) == 1 and rows[0]["B"] == 2 and rows[0]["speedup"] > 0
    assert "## Headline" not in text  # a pipelines run is not judged by the kernel sections
    # report --kernels (every machine): the pipelines tables of the newest run per machine and kind
    loaded = store.load(out).records
    older = [msgspec.structs.replace(r, run_id="19990101T000000Z-old", created="1999-01-01T00:00:00+00:00",
                                     env=loaded[0].env) for r in res.records]  # the same machine, an older run
    both = [*loaded, *older]
    assert {r.run_id for r in latest_pipeline_runs(both)} == {res.run_id}
    kern = kernels(both)
    assert "# End-to-end pipelines (the newest run per machine)" in kern and "## Data loading by batch size" in kern
    assert "End-to-end" not in kernels([])


def test_regression_check_covers_pipeline_series(suite_run, tmp_path: Path) -> None:
    """Six runs of the same records: the change-point check reads them as series; a 2x slower newest
    data-loading run of robocache is alerted."""
    res, out = suite_run
    env = json.loads((res.path).read_text())["env"]
    for k in range(6):
        recs = [store.to_plain(r) for r in res.records]
        for r in recs:
            r["run_id"] = f"2026010{k}T000000Z-run{k}"
            r["created"] = f"2026-01-0{k + 1}T00:00:00+00:00"
            scale = 2.0 if (k == 5 and r["case"]["op"] == "dataload" and r["case"]["provider"] == "robocache") else \
                1.0 + 0.002 * k
            r["metrics"]["time_us"] = {q: v * scale for q, v in r["metrics"]["time_us"].items()}
            r["health"] = {"throttled": False, "contended": False, "noisy": False, "reasons": []}
            r["method"]["noise"] = 0.01  # a few CPU samples give a wide interval: these runs are fixtures
            r["synthetic"] = True
        store.write_records(tmp_path, env, recs, name=f"run{k}-pipelines")
    got = regressions.check(store.load(tmp_path).records, machine="ci-cpu")
    assert got.series == got.series_checked == len(res.records), (got.series_checked, got.excluded_reasons)
    alerted = {(a.series["case_id"], a.series["provider"]) for a in got.alerts}
    assert ("dataload/" + res.records[1].case.id.split("/", 1)[1], "robocache") in alerted
    assert all(a.series["case_id"].startswith("dataload/") for a in got.alerts)


def test_schema_pipeline_section(suite_run, tmp_path: Path) -> None:
    from robocache.bench import ops

    assert not set(ops.names()) & set(schema.PIPELINE_KINDS)  # the kernel grid's op registry is untouched
    res, _ = suite_run
    env = json.loads(res.path.read_text())["env"]
    rec = store.to_plain(res.records[0])
    rec["suite"] = "quick"  # a pipeline kind is no op of the kernel suites
    with pytest.raises(schema.SchemaError, match="unknown op 'dataload'"):
        store.write_records(tmp_path, env, [rec], name="bad")
    rec = store.to_plain(res.records[0])
    rec["pipeline"]["kind"] = "teleport"
    with pytest.raises(schema.SchemaError, match="kind"):
        store.write_records(tmp_path, env, [rec], name="bad")
    rec = store.to_plain(res.records[0])
    rec["pipeline"]["figures"]["traj_per_s"] = float("inf")
    with pytest.raises(schema.SchemaError):
        store.write_records(tmp_path, env, [rec], name="bad")
    assert not list(tmp_path.iterdir())


def test_suite_marks_a_failed_gate_and_goes_on(tiny: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import robocache

    real = robocache.fuse
    monkeypatch.setattr(robocache, "fuse", lambda s, t: real(s, t) + 0.5)
    res = run(_cfg(tiny, parts=("dataload", "train"), models=("mlp",), profile_steps=0), tmp_path, machine="ci-cpu")
    st = {(r.case.op, r.case.provider): r for r in res.records}
    assert st[("dataload", "cpu_workers")].status == "ok"
    bad = st[("dataload", "robocache")]
    assert bad.status == "incorrect" and bad.metrics is None and not bad.check.passed
    assert st[("train", "robocache")].status == "incorrect" and "loss curve differs" in st[("train", "robocache")].reason
    assert {r.case.id for r in res.failed} == {bad.case.id, st[("train", "robocache")].case.id}
    assert not store.load(tmp_path).bad


def test_cli_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert pcli.main(["run", "--device", "cpu", "--batch-sizes", "0", "--out", str(tmp_path)]) == 2
    assert pcli.main(["run", "--device", "cpu", "--parts", "dataload,warp", "--out", str(tmp_path)]) == 2
    assert pcli.main(["run", "--device", "cpu", "--dataset", str(tmp_path / "none.h5"), "--out", str(tmp_path)]) == 2
    assert pcli.main(["run", "--device", "cpu", "--backends", "onnx", "--out", str(tmp_path)]) == 2
    assert pcli.main(["run", "--device", "cpu", "--parts", "", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "batch_sizes must be" in err and "unknown parts: warp" in err and "not a readable HDF5" in err
    assert "nothing to run" in err
    assert not any(tmp_path.iterdir())
    assert pcli.main(["list", "--device", "cpu"]) == 0
    assert "dataload/B8-W2-Nep-s0" in capsys.readouterr().out
    from robocache.bench import cli

    assert cli._parser().parse_args(["run", "--suite", "pipelines"]).suite == "pipelines"
    assert cli.main(["run", "--suite", "pipelines", "--ops", "fuse", "--out", str(tmp_path)]) == 2
    assert "--suite pipelines takes --device, --out, --machine and the pipelines options only (got --ops)" in \
        capsys.readouterr().err
    assert not any(tmp_path.iterdir())


# ---------------------------------------------------------------- the Nsight Compute profile suite

# The shape of `ncu --csv --metrics ...` output (details page): a parser fixture, not a measurement.
NCU_CSV = '''==PROF== Connected to process 123 (/usr/bin/python3)
==PROF== Profiling "rc_fuse2_kernel" - 0: 0%....50%....100% - 3 passes
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","123","python3","127.0.0.1","rc_fuse2_kernel","1","7","(128, 1, 1)","(2048, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","71.25"
"0","123","python3","127.0.0.1","rc_fuse2_kernel","1","7","(128, 1, 1)","(2048, 1, 1)","0","9.0","Command line profiler metrics","lts__t_sector_hit_rate.pct","%","40.10"
"0","123","python3","127.0.0.1","rc_fuse2_kernel","1","7","(128, 1, 1)","(2048, 1, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","1,003.5"
"1","123","python3","127.0.0.1","other_kernel","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","lts__t_sector_hit_rate.pct","%","n/a"
==PROF== Disconnected from process 123
'''


def test_ncu_csv_parsing() -> None:
    from robocache.bench.pipelines import ncu

    got = ncu.parse_csv(NCU_CSV)
    assert got == [{"kernel": "rc_fuse2_kernel", "dram_pct_of_peak": 71.25, "l2_hit_rate_pct": 40.1,
                    "achieved_occupancy_pct": 1003.5},
                   {"kernel": "other_kernel", "l2_hit_rate_pct": None}]
    assert ncu.parse_csv("==PROF== nothing profiled\n") == []


NCU_CSV_TIMES = '''"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","python3","h","zero_fill","1","7","(128, 1, 1)","(8, 1, 1)","0","9.0","m","gpu__time_duration.sum","nsecond","3,300"
"0","1","python3","h","zero_fill","1","7","(128, 1, 1)","(8, 1, 1)","0","9.0","m","dram__bytes_read.sum","Kbyte","12"
"1","1","python3","h","voxel_hashed_v2_float32","1","7","(256, 1, 1)","(392, 1, 1)","0","9.0","m","gpu__time_duration.sum","usecond","26.0"
"1","1","python3","h","voxel_hashed_v2_float32","1","7","(256, 1, 1)","(392, 1, 1)","0","9.0","m","dram__bytes_read.sum","Mbyte","12.0"
"1","1","python3","h","voxel_hashed_v2_float32","1","7","(256, 1, 1)","(392, 1, 1)","0","9.0","m","launch__registers_per_thread","register/thread","32"
'''


def test_ncu_units_and_the_longest_kernel_figures() -> None:
    """ncu's units become the figures' (ns -> us, Kbyte/Mbyte -> MB); the record's figures are the longest
    kernel's and every kernel carries its share of the profiled call."""
    from robocache.bench.pipelines import common, ncu

    got = ncu.parse_csv(NCU_CSV_TIMES)
    assert got[0]["ncu_time_us"] == pytest.approx(3.3) and got[0]["dram_read_mb"] == pytest.approx(0.012)
    assert got[1]["ncu_time_us"] == pytest.approx(26.0) and got[1]["registers"] == 32.0
    from robocache.bench import specs
    from robocache.bench.messages import Task

    ctx = Task(run_id="r", suite=ncu.SUITE, frontend="cli", device="gpu", git_commit=None, git_dirty=None)

    rc = specs.find("voxelize/B4-N100000-G64-mean-clustered-C4/float32/robocache").to_record_case()
    rec = ncu._record(common, ctx, rc, 0, NCU_CSV_TIMES, "", 1.0)
    assert rec.status == "ok" and rec.suite == "profile"
    assert rec.pipeline.figures["ncu_time_us"] == pytest.approx(26.0)
    shares = [k.share for k in rec.pipeline.kernels]
    assert shares == pytest.approx([3.3 / 29.3, 26.0 / 29.3])
    bad = ncu._record(common, ctx, rc, 1, "", "==ERROR== the profiler failed\n", 1.0)
    assert bad.status == "error" and "the profiler failed" in bad.reason


def test_profile_suite_without_a_gpu(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from robocache.bench.pipelines import ncu

    keys = ncu.default_cases()
    assert keys and all(k.endswith("/float32/robocache") for k in keys)
    assert pcli.main(["profile", "--device", "cpu", "--out", str(tmp_path), "--machine", "ci-cpu"]) == 0
    loaded = store.load(tmp_path)
    assert not loaded.bad and len(loaded.records) == len(keys)
    assert all(r.suite == "profile" and r.status == "skipped" and "no GPU" in r.reason for r in loaded.records)
    assert "Nsight Compute: robocache's kernels" in report.report(loaded.records)
    assert pcli.main(["profile", "--device", "cpu", "--cases", "resample/nope/float32/robocache",
                      "--out", str(tmp_path)]) == 2


def test_a_failed_baseline_never_leaves_an_unchecked_ok(tiny: str, tmp_path: Path, monkeypatch) -> None:
    """The training baseline (cpu_workers) fails: robocache's training record cannot be checked against its loss
    curve, so it is an error naming why, not an unchecked "ok"."""
    real = training.train

    def flaky(p, model, **kw):
        if getattr(p, "provider", None) == "cpu_workers" or "cpu_workers" in repr(p):
            raise RuntimeError("injected: the baseline's loader died")
        return real(p, model, **kw)

    monkeypatch.setattr(training, "train", flaky)
    res = run(_cfg(tiny, parts=("train",), models=("mlp",), profile_steps=0), tmp_path, machine="ci-cpu")
    by = {r.case.provider: r for r in res.records if r.case.op == "train"}
    assert by["cpu_workers"].status in ("error", "crash") and "injected" in by["cpu_workers"].reason
    assert by["robocache"].status == "error" and "no cpu_workers baseline" in by["robocache"].reason
    assert store.load(tmp_path).bad == []
