"""robocache.EpisodeCache on a GPU: every batch of the kernel (kernels/episodes.cu) against the cache's NumPy path
on the same episodes and sampler (the windows drawn on the device equal the host's, the values within the output
dtype's tolerance) and against numpy.interp; ragged episodes, a single-sample stream, windows at episode edges,
float16/bfloat16 streams and outputs, the vector paths; the streamed mode (pinned host copy, a ring of slots
filled on a side stream) over several epochs at each prefetch depth; resume; the caller's stream; no
host-to-device copy per batch; memory. Skipped (loudly, see tests/gpu/conftest.py) without a CUDA device."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from robocache.bench.gate import TOLERANCE  # noqa: E402
from robocache.episodes import EpisodeCache  # noqa: E402
from tests.test_episodes import expected, make_episodes  # noqa: E402

QUIET = {"log": lambda s: None}


def _host(x):
    if isinstance(x, torch.Tensor):
        return x.detach().float().cpu().numpy() if x.is_floating_point() else x.cpu().numpy()
    return x.get() if hasattr(x, "get") else np.asarray(x)


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float((np.abs(a.astype(np.float64) - b) / np.maximum(1.0, np.abs(b))).max(initial=0.0))


def _same(cpu_batch, gpu_batch, out: str = "float32") -> None:
    """The GPU batch is the CPU path's: the same windows and mask exactly, values within the dtype's tolerance."""
    np.testing.assert_array_equal(_host(gpu_batch.windows), _host(cpu_batch.windows))
    np.testing.assert_array_equal(_host(gpu_batch.mask), _host(cpu_batch.mask))
    assert (gpu_batch.epoch, gpu_batch.batch) == (cpu_batch.epoch, cpu_batch.batch)
    g, c = _host(gpu_batch.x), _host(cpu_batch.x).astype(np.float64)
    assert g.shape == c.shape
    assert _rel(g, c) <= TOLERANCE[out], (out, _rel(g, c))
    assert not g[~_host(gpu_batch.mask)].any()  # zero past each window


def _pair(eps, **kw):
    return (EpisodeCache(eps, device="cpu", kind="torch", **QUIET, **kw),
            EpisodeCache(eps, device="cuda", kind="torch", **QUIET, **kw))


def test_whole_episodes_equal_the_cpu_path_and_numpy_interp() -> None:
    eps = make_episodes(11, seed=21)
    cpu, gpu = _pair(eps, batch_size=4, seed=3)
    assert gpu.mode == "resident" and gpu.device.startswith("cuda")
    for _ in range(3 * len(gpu)):
        c, g = cpu.next_batch(), gpu.next_batch()
        assert g.x.is_cuda and g.x.dtype == torch.float32 and g.mask.dtype == torch.bool
        _same(c, g)
        want, _ = expected(eps, ("a", "b", "c"), _host(g.windows), g.x.shape[1])
        assert _rel(_host(g.x), want) <= TOLERANCE["float32"]


def test_hdf5_batches_equal_the_cpu_workers(tmp_path: Path) -> None:
    pytest.importorskip("h5py")
    from robocache.bench.pipelines import dataset as ds
    from robocache.bench.pipelines import loading

    path = tmp_path / "d.h5"
    ds.generate(path, ds.Spec(seed=2, min_s=1.0, max_s=4.0, episodes=10))
    cache = loading.build_cache(str(path), batch=4, device="gpu", seed=0)
    chk = loading.gate(str(path), batch=4, workers=1, device="gpu", seed=0, provider="episode_cache", cache=cache,
                       batches=2)
    assert chk["passed"] and chk["max_rel_err"] <= TOLERANCE["float32"], chk
    streamed = loading.build_cache(str(path), batch=2, device="gpu", seed=0, regime="streamed",
                                   budget_mb=0.75 * loading.cached_payload_bytes(str(path)) / 1e6)
    chk = loading.gate(str(path), batch=2, workers=1, device="gpu", seed=0, provider="episode_cache",
                       cache=streamed, batches=3)
    assert chk["passed"], chk


def test_ragged_single_sample_and_epoch_second_origins() -> None:
    eps = make_episodes(6, seed=22, streams=(("a", 30.0, 4, "float32"), ("one", 0.5, 3, "float32"),
                                             ("fast", 400.0, 2, "float32")))
    assert any(ep["one"][0].shape[0] == 1 for ep in eps)
    t0 = 1.7e9
    shifted = [{k: (t + t0 + 3 * i, v) for k, (t, v) in ep.items()} for i, ep in enumerate(eps)]
    kw = dict(batch_size=3, origins=t0 + 3 * np.arange(6.0), durations=[1.2] * 6, seed=1)
    cpu, gpu = _pair(shifted, **kw)
    for _ in range(4):
        _same(cpu.next_batch(), gpu.next_batch())


def test_windows_at_episode_edges() -> None:
    """Windows nearly as long as the episodes: the device's hash draws the host's starts (both edges) and lengths."""
    eps = make_episodes(8, seed=23, min_s=0.62, max_s=0.7)
    for window in (28, (3, 28)):
        cpu, gpu = _pair(eps, batch_size=8, window=window, seed=5)
        edges = set()
        for _ in range(30):
            c, g = cpu.next_batch(), gpu.next_batch()
            _same(c, g)
            w = _host(g.windows)
            edges |= {"first" if s == 0 else "other" for s in w[:, 1]}
            assert (w[:, 1] + w[:, 2] <= np.array([_n_tgt(cpu, e) for e in w[:, 0]])).all()
        assert "first" in edges and "other" in edges


def _n_tgt(cache: EpisodeCache, g: int) -> int:
    return int(cache._lay.n_tgt[list(cache.episodes).index(g)])


@pytest.mark.parametrize("out", [None, "float16", "bfloat16"])
def test_half_and_bfloat16_streams(out) -> None:
    eps = make_episodes(6, seed=24, streams=(("f32", 30.0, 3, "float32"), ("f16", 60.0, 2, "float16"),
                                             ("bf", 20.0, 4, "float32")))
    mixed = [{**ep, "bf": (ep["bf"][0], torch.from_numpy(ep["bf"][1]).to(torch.bfloat16))} for ep in eps]
    cpu, gpu = _pair(mixed, batch_size=3, out_dtype=out, seed=2)
    for _ in range(4):
        c, g = cpu.next_batch(), gpu.next_batch()
        assert g.x.dtype == getattr(torch, out or "float32")
        _same(c, g, out or "float32")


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_vector_paths(dt) -> None:
    """Feature widths and an output row that allow 16-byte accesses (4 float32 or 8 bfloat16 per lane), and a
    width that allows none: the same values."""
    streams = (("a", 30.0, 8, "float32"), ("b", 100.0, 16, "float32"), ("c", 7.0, 8, "float32"))
    eps = make_episodes(6, seed=25, streams=streams)
    if dt == "bfloat16":
        eps = [{k: (t, torch.from_numpy(v).to(torch.bfloat16)) for k, (t, v) in ep.items()} for ep in eps]
    cpu, gpu = _pair(eps, batch_size=3, seed=4)
    assert max(gpu._n_vec) == (8 if dt == "bfloat16" else 4)
    for _ in range(3):
        _same(cpu.next_batch(), gpu.next_batch(), dt)
    odd = make_episodes(6, seed=26, streams=(("a", 30.0, 5, "float32"), ("b", 100.0, 3, "float32")))
    cpu, gpu = _pair(odd, batch_size=3)
    assert max(gpu._n_vec) == 1
    _same(cpu.next_batch(), gpu.next_batch())


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_streamed_mode_over_several_epochs(depth) -> None:
    """Half the cache's size as the budget: the GPU's ring (copies on a side stream, ordered by events) serves
    the same batches as the CPU path's ring, epoch after epoch; the device memory stays within the budget."""
    eps = make_episodes(24, seed=27)
    full = EpisodeCache(eps, batch_size=2, device="cpu", **QUIET).device_bytes
    before = torch.cuda.memory_allocated()
    cpu, gpu = _pair(eps, batch_size=2, memory_budget=full // 2, prefetch_depth=depth, seed=6)
    assert gpu.mode == cpu.mode == "streamed" and (gpu.chunks, gpu.slots) == (cpu.chunks, cpu.slots)
    assert gpu.device_bytes <= full // 2 and gpu.host_bytes > 0
    assert torch.cuda.memory_allocated() - before <= gpu.device_bytes + 64 * 1024  # the ring, the tables
    for _ in range(4 * len(gpu)):
        _same(cpu.next_batch(), gpu.next_batch())
    assert gpu.chunk_copies == cpu.chunk_copies >= 4 * gpu.chunks - gpu.slots
    gpu.close()


def test_streamed_batches_survive_a_slow_consumer() -> None:
    """Batches kept while later ones are made (their data copied out of the ring long ago) and a training step
    in between: the side stream never overwrites a slot a launched batch still reads."""
    eps = make_episodes(24, seed=28)
    full = EpisodeCache(eps, batch_size=2, device="cpu", **QUIET).device_bytes
    cpu, gpu = _pair(eps, batch_size=2, memory_budget=full // 2, prefetch_depth=2, seed=7)
    big = torch.randn(2048, 2048, device="cuda")
    kept = []
    for _ in range(3 * len(gpu)):
        g = gpu.next_batch()
        for _ in range(3):  # GPU work after the launch, before the next batch is asked for
            big = torch.tanh(big @ big * 1e-3)
        kept.append((cpu.next_batch(), g))
    torch.cuda.synchronize()
    for c, g in kept:
        _same(c, g)


@pytest.mark.parametrize("budget", [False, True])
def test_resume_on_the_gpu(budget) -> None:
    eps = make_episodes(24, seed=29)
    kw = dict(batch_size=2, window=(10, 20), seed=8, **QUIET)
    if budget:
        kw["memory_budget"] = EpisodeCache(eps, device="cpu", **kw).device_bytes // 2
    a = EpisodeCache(eps, device="cuda", **kw)
    for _ in range(len(a) + 3):
        a.next_batch()
    state = a.state_dict()
    after = [a.next_batch() for _ in range(6)]
    b = EpisodeCache(eps, device="cuda", **kw)
    b.load_state_dict(state)
    for x in after:
        y = b.next_batch()
        assert torch.equal(x.windows, y.windows) and torch.equal(x.x, y.x)


def test_kind_cupy_and_the_callers_stream() -> None:
    cupy = pytest.importorskip("cupy")
    eps = make_episodes(6, seed=30)
    t = EpisodeCache(eps, batch_size=3, device="cuda", kind="torch", seed=9, **QUIET)
    c = EpisodeCache(eps, batch_size=3, device="cuda", kind="cupy", seed=9, **QUIET)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):  # launched on the caller's current stream
        bt = t.next_batch()
    s.synchronize()
    bc = c.next_batch()
    assert isinstance(bc.x, cupy.ndarray) and bc.mask.dtype == cupy.bool_
    np.testing.assert_array_equal(cupy.asnumpy(bc.x), bt.x.cpu().numpy())
    np.testing.assert_array_equal(cupy.asnumpy(bc.windows), bt.windows.cpu().numpy())


def test_no_host_to_device_copy_per_batch() -> None:
    """Resident mode: after the first batch (which uploads the shuffled order for the next 256 batches), batches
    are kernel launches only: no host-to-device memcpy in 30 batches (torch.profiler's CUDA activity)."""
    from torch.profiler import ProfilerActivity, profile

    eps = make_episodes(12, seed=31)
    cache = EpisodeCache(eps, batch_size=4, device="cuda", **QUIET)
    cache.next_batch()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(30):
            cache.next_batch()
        torch.cuda.synchronize()
    names = [e.key for e in prof.key_averages()]
    assert any("episodes_batch_float32" in n for n in names), names
    assert not [n for n in names if "HtoD" in n], names


def test_memory_is_given_back() -> None:
    eps = make_episodes(12, seed=32)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    cache = EpisodeCache(eps, batch_size=4, device="cuda", **QUIET)
    assert torch.cuda.memory_allocated() - before >= cache.device_bytes - 64 * 1024
    cache.next_batch()
    cache.close()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() - before < 64 * 1024
