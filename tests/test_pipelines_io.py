"""The pipelines suite's outside: the Pipelines dashboard page (Streamlit AppTest, record text never markup)
and scripts/gpu_check.sh's ``pipelines`` part (python and nvidia-smi stubbed: the commands it would run)."""
from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
pytest.importorskip("h5py")
torch = pytest.importorskip("torch")
from streamlit.testing.v1 import AppTest  # noqa: E402

from dashboard import data  # noqa: E402
from robocache.bench import store  # noqa: E402
from robocache.bench.pipelines import dataset as ds  # noqa: E402
from robocache.bench.pipelines import loading  # noqa: E402
from robocache.bench.pipelines.run import Config, run  # noqa: E402
from tests.test_gpu_check_script import _stub  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SCRIPT = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tiny CPU pipelines run, plus a copy of it relabelled as an H100 GPU run whose case ids carry
    markup (to check the page keeps record text as data)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        tmp = tmp_path_factory.mktemp("pipe")
        path = tmp / "d.h5"
        ds.generate(path, ds.Spec(seed=2, min_s=1.0, max_s=2.0, episodes=8))
        out = tmp / "results"
        # the EpisodeCache streamed within 80% of its size (half would not hold a batch of 2 of these 8 episodes
        # and a chunk copied ahead)
        cfg = Config(device="cpu", dataset=str(path), batch_sizes=(2,), workers=(0,), load_batches=3, load_warmup=1,
                     models=("mlp",), train_steps=3, train_warmup=1, profile_steps=1, infer_batches=(1,),
                     backends=("eager", "sdpa"), infer_time_s=0.0,
                     cache_budget_mb=round(0.8 * loading.cached_payload_bytes(str(path)) / 1e6, 2))
        res = run(cfg, out, machine="ci-cpu")
        assert not res.failed, [(r["case"]["id"], r["case"]["provider"], r["reason"]) for r in res.failed]
    finally:
        torch.set_num_threads(n)
    env = store.load(out).records[0].env
    gpu_env = {**store.to_dict(env), "device": "gpu", "arch": "H100", "gpu_name": "NVIDIA H100 80GB HBM3",
               "machine": "nvidia-h100-x1"}
    recs = copy.deepcopy(res.records)
    for r in recs:
        r["case"]["id"] += SCRIPT
        r["run_id"] = "20990101T000000Z-fixture"
        r["synthetic"] = True
        if r["pipeline"].get("resample_on") == "numpy_fallback":
            r["pipeline"]["resample_on"] = "gpu"
    store.write_records(out / "h100", gpu_env, recs, name="fixture-pipelines")
    return out


def _page(results: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv(data.ENV_VAR, str(results))
    monkeypatch.setenv(data.NO_DEFAULT_ENV_VAR, "1")
    return AppTest.from_file(str(REPO / "dashboard" / "views" / "pipelines.py"), default_timeout=60).run()


def test_pipelines_page_per_gpu(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = _page(results, monkeypatch)
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    gpu = at.selectbox[0]
    assert gpu.options == ["CPU", "H100"]
    # the first screen is the GPU (the other pages' default rule), not the CPU run that sorts first
    assert gpu.value == "H100"
    warnings = " ".join(w.value for w in at.warning)
    assert "SYNTHETIC" in warnings and "NumPy fallback" not in warnings
    assert list(at.dataframe[0].value.columns[:6]) == ["GPU", "machine", "batch", "workers", "CPU workers traj/s",
                                                       "robocache traj/s"]
    ids = set(at.dataframe[0].value["case"])
    assert any(SCRIPT in i for i in ids)  # record text shown as data in a dataframe
    for kind in ("markdown", "caption", "subheader", "info", "warning", "text"):
        for el in at.get(kind):
            assert SCRIPT not in str(getattr(el, "value", "")) or kind == "text", (kind, el.value)
    fig = at.get("plotly_chart")[0].proto.spec
    assert "<script>" not in fig
    at = gpu.select("CPU").run()
    assert not at.exception and not at.error
    assert "NumPy fallback" in " ".join(w.value for w in at.warning)  # the CPU run says it is no GPU figure
    heads = [s.value for s in at.subheader]
    assert heads[0] == "Data loading by batch size on CPU" and "Kernel breakdown of a training step" in heads
    assert heads[1] == "EpisodeCache: data loading from the device"
    assert at.get("plotly_chart") and len(at.dataframe) >= 5
    assert list(at.dataframe[1].value["regime"]) == ["resident", "streamed, depth 1"]  # the cache's table
    pipelines_col = list(at.dataframe[2].value["pipeline"])  # the training step: all three loaders
    assert "EpisodeCache (resident)" in pipelines_col and "robocache.fuse" in pipelines_col
    assert "EpisodeCache (streamed, depth 1)" in pipelines_col
    names = [t["name"] for t in json.loads(at.get("plotly_chart")[0].proto.spec)["data"]]
    assert names == ["CPU workers (NumPy)", "robocache.fuse", "EpisodeCache"]


def test_pipelines_page_without_pipeline_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.test_store import make_env, make_record

    store.write_records(tmp_path, make_env("m"), [make_record()], name="kernels")
    at = _page(tmp_path, monkeypatch)
    assert not at.exception and not at.error
    assert "No pipeline results yet" in " ".join(i.value for i in at.info)


def test_app_lists_the_page() -> None:
    assert 'st.Page(_PAGES / "pipelines.py", title="Pipelines")' in (REPO / "dashboard" / "app.py").read_text()


def test_gpu_check_pipelines_part(tmp_path: Path) -> None:
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "calls.log"
    _stub(bin_ / "nvidia-smi", 'case "$*" in *noheader*) echo "NVIDIA H200";; *-L*) echo "GPU 0: NVIDIA H200 (UUID: x)";; '
                               '*) echo stub;; esac\n')
    _stub(bin_ / "fakepy", f'[ "${{1:-}}" = -m ] && echo "$*" >> {log}\n[ "${{1:-}}" = - ] && cat > /dev/null\nexit 0\n')
    env = {"PATH": str(bin_) + os.pathsep + "/usr/bin:/bin", "PYTHON": str(bin_ / "fakepy"), "HOME": str(tmp_path),
           "PIPELINES_ARGS": "--parts dataload"}
    run_ = subprocess.run(["bash", "scripts/gpu_check.sh", str(tmp_path / "out"), "pipelines"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert run_.returncode == 0, run_.stdout + run_.stderr
    calls = [c.split() for c in log.read_text().splitlines()]
    pipe = next(c for c in calls if c[1] == "robocache.bench.pipelines")
    assert pipe[2] == "run" and pipe[pipe.index("--machine") + 1] == "nvidia-h200"
    assert pipe[pipe.index("--device") + 1] == "gpu" and pipe[-2:] == ["--parts", "dataload"]
    assert pipe[pipe.index("--train-batches") + 1] == "32,128"  # the EpisodeCache's training at both batch sizes
    assert pipe[pipe.index("--out") + 1] == str(tmp_path / "out" / "results")
    rep = next(c for c in calls if c[1:3] == ["robocache.bench.cli", "report"])
    assert rep[rep.index("--out") + 1].endswith("report-pipelines.md")
    assert "PIPELINES SUMMARY: machine nvidia-h200" in run_.stdout
