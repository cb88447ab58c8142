"""robocache.EpisodeCache on the CPU (the NumPy path: the same tables, chunks and ring as on the GPU).

Every batch is checked against numpy.interp computed here from the windows the cache reports, and the HDF5
batches against the pipelines' CPU workers; the sampler (shuffle, windows, shards, resume), the streamed mode's
ring and every bad input the cache must refuse before it allocates anything.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

import robocache
from robocache import episodes as E
from robocache.episodes import EpisodeCache

RATE = 50.0


def make_episodes(n: int, seed: int = 0, *, min_s: float = 0.6, max_s: float = 2.0,
                  streams: tuple[tuple[str, float, int, str], ...] = (("a", 30.0, 5, "float32"),
                                                                       ("b", 100.0, 3, "float32"),
                                                                       ("c", 7.0, 2, "float32"))) -> list[dict]:
    """Ragged episodes: each stream at its own rate with jittered, sorted times from 0, random values."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        dur = float(rng.uniform(min_s, max_s))
        ep = {}
        for name, rate, d, dt in streams:
            s = max(1, int(dur * rate))
            t = np.sort(np.arange(s) / rate + rng.uniform(0, 0.3, s) / rate)
            ep[name] = (t, rng.standard_normal((s, d)).astype(dt))
        out.append(ep)
    return out


def expected(episodes: list[dict], names: tuple[str, ...], windows: np.ndarray, t_len: int,
             origins: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """numpy.interp of each row's window (float64), zero past its end, and the mask: the test's own reference."""
    dims = [np.asarray(episodes[0][n][1]).shape[1] for n in names]
    x = np.zeros((len(windows), t_len, sum(dims)))
    mask = np.zeros((len(windows), t_len), dtype=bool)
    for r, (g, s, length) in enumerate(np.asarray(windows).tolist()):
        ep = episodes[g]
        org = origins[g] if origins is not None else min(float(np.asarray(ep[n][0])[0]) for n in names)
        tgt = org + (s + np.arange(length)) / RATE
        col = 0
        for n in names:
            t, v = (np.asarray(a, dtype=np.float64) for a in ep[n])
            for d in range(v.shape[1]):
                x[r, :length, col + d] = np.interp(tgt, t, v[:, d])
            col += v.shape[1]
        mask[r, :length] = True
    return x, mask


def check_batch(batch, episodes, names, *, origins=None, atol=0.0) -> None:
    x, mask, win = (np.asarray(a) for a in (batch.x, batch.mask, batch.windows))
    want, want_mask = expected(episodes, names, win, x.shape[1], origins)
    np.testing.assert_array_equal(mask, want_mask)
    np.testing.assert_allclose(x.astype(np.float64), want, rtol=0, atol=atol or 2e-6 * max(1.0, np.abs(want).max()))


# ---------------------------------------------------------------- batches

def test_whole_episodes_match_numpy_interp_and_pad_with_zeros() -> None:
    eps = make_episodes(9)
    log = []
    cache = EpisodeCache(eps, batch_size=4, device="cpu", log=log.append)
    assert cache.mode == "resident" and len(cache) == 2 and cache.device == "cpu"
    assert len(log) == 1 and log[0].startswith("EpisodeCache: resident on the CPU") and log[0] == cache.summary
    seen = []
    for batch in cache:
        x, mask, win = batch.x, batch.mask, batch.windows
        assert x.dtype == np.float32 and mask.dtype == bool and win.dtype == np.int64 and x.shape[0] == 4
        n_tgt = [max(1, int(_dur(eps[g]) * RATE)) for g in win[:, 0]]
        assert win[:, 1].tolist() == [0] * 4 and win[:, 2].tolist() == n_tgt  # whole episodes
        assert x.shape[1] == max(n_tgt) and len(set(n_tgt)) > 1  # padded to the batch's longest
        check_batch(batch, eps, ("a", "b", "c"))
        assert not x[~mask].any()  # zero past each end
        seen += win[:, 0].tolist()
    assert len(set(seen)) == 8 and batch.epoch == 0  # one epoch: 8 of the 9 episodes, none twice (drop_last)


def _dur(ep: dict) -> float:
    first = min(float(t[0]) for t, _ in ep.values())
    return max(float(t[-1]) for t, _ in ep.values()) - first


def test_hdf5_batches_equal_the_cpu_workers_pipeline(tmp_path: Path) -> None:
    """The same episodes through the pipelines' CPU workers (EpisodeDataset: reference.resample in float64, cast
    to float32) and through the cache's NumPy path: equal to the bit, padding and mask included."""
    pytest.importorskip("h5py")
    from robocache.bench.pipelines import dataset as ds
    from robocache.bench.pipelines import loading

    path = tmp_path / "d.h5"
    ds.generate(path, ds.Spec(seed=3, min_s=1.0, max_s=2.5, episodes=7, rgb=True))
    cache = EpisodeCache.from_hdf5(path, batch_size=3, device="cpu", order=[6, 0, 3, 3, 5, 1], log=lambda s: None)
    assert cache.names == loading.FUSED and cache.batches_per_epoch == 2
    base = loading.EpisodeDataset(str(path), resample=True)
    for batch, want in zip(cache, ([6, 0, 3], [3, 5, 1])):
        assert batch.windows[:, 0].tolist() == want
        items = [base[i] for i in want]
        ref = loading.collate_resampled(items)
        np.testing.assert_array_equal(batch.x, ref["fused"].numpy())
        np.testing.assert_array_equal(batch.mask, ref["mask"].numpy())
    with pytest.raises(ValueError, match="no stream 'rgbx'"):
        EpisodeCache.from_hdf5(path, batch_size=3, device="cpu", streams=("vision", "rgbx"))
    bad = tmp_path / "x.h5"
    bad.write_text("no")
    with pytest.raises(ValueError, match="not a readable HDF5 file"):
        EpisodeCache.from_hdf5(bad, batch_size=3, device="cpu")


def test_kinds_and_sources_agree() -> None:
    """NumPy and PyTorch sources, NumPy and PyTorch results: the same batches."""
    torch = pytest.importorskip("torch")
    eps = make_episodes(6, seed=1)
    teps = [{k: (torch.from_numpy(t), torch.from_numpy(v)) for k, (t, v) in ep.items()} for ep in eps]
    a = EpisodeCache(eps, batch_size=2, device="cpu", seed=4, log=lambda s: None)
    b = EpisodeCache(teps, batch_size=2, device="cpu", seed=4, kind="torch", log=lambda s: None)
    for _ in range(5):
        x, y = a.next_batch(), b.next_batch()
        assert isinstance(y.x, torch.Tensor) and y.mask.dtype == torch.bool and y.windows.dtype == torch.int64
        np.testing.assert_array_equal(x.x, y.x.numpy())
        np.testing.assert_array_equal(x.windows, y.windows.numpy())


def test_single_sample_stream_and_explicit_origins() -> None:
    """A stream with one sample in some episodes (every target gets it), episodes with their own origin (epoch
    seconds) and duration."""
    eps = make_episodes(5, seed=2, streams=(("a", 30.0, 4, "float32"), ("one", 0.5, 3, "float32")))
    assert any(ep["one"][0].shape[0] == 1 for ep in eps)
    t0 = 1.7e9  # epoch seconds: float64 times keep the 50 Hz grid exact
    shifted = [{k: (t + t0 + i, v) for k, (t, v) in ep.items()} for i, ep in enumerate(eps)]
    origins = t0 + np.arange(5.0)
    durations = [1.0] * 5
    cache = EpisodeCache(shifted, batch_size=5, device="cpu", origins=origins, durations=durations, shuffle=False,
                         log=lambda s: None)
    batch = cache.next_batch()
    assert batch.windows[:, 0].tolist() == [0, 1, 2, 3, 4] and batch.x.shape[1] == 50
    check_batch(batch, shifted, ("a", "one"), origins=origins)
    for r, ep in enumerate(eps):
        if ep["one"][0].shape[0] == 1:
            assert (batch.x[r, :, 4:] == ep["one"][1][0]).all()


def test_windows_stay_inside_episodes_and_reach_both_edges() -> None:
    """Fixed and ranged windows: inside the episode, the start drawn over every allowed value (so the last
    window ends on the episode's last target), each window the matching slice of the whole episode's rows."""
    eps = make_episodes(6, seed=3, min_s=0.62, max_s=0.7)  # about 30..34 targets
    whole = EpisodeCache(eps, batch_size=6, device="cpu", shuffle=False, log=lambda s: None).next_batch()
    n_tgt = whole.windows[:, 2]
    assert n_tgt.min() >= 28
    cache = EpisodeCache(eps, batch_size=6, device="cpu", window=28, seed=9, log=lambda s: None)
    edges = set()
    for _ in range(40):
        b = cache.next_batch()
        assert b.x.shape == (6, 28, 10) and b.mask.all()
        for r, (g, s, length) in enumerate(b.windows.tolist()):
            assert length == 28 and 0 <= s <= n_tgt[g] - 28
            edges |= {"first"} if s == 0 else {"last"} if s == n_tgt[g] - 28 else set()
            np.testing.assert_array_equal(b.x[r], whole.x[g, s:s + 28])  # the same targets, the same rows
    assert edges == {"first", "last"}  # windows at both edges of episodes
    ranged = EpisodeCache(eps, batch_size=6, device="cpu", window=(5, 28), seed=1, log=lambda s: None)
    lengths = set()
    for _ in range(10):
        b = ranged.next_batch()
        assert b.x.shape[1] == 28
        for r, (g, s, length) in enumerate(b.windows.tolist()):
            lengths.add(length)
            assert 5 <= length <= 28 and s + length <= n_tgt[g]
            assert b.mask[r, :length].all() and not b.mask[r, length:].any() and not b.x[r, length:].any()
        check_batch(b, eps, ("a", "b", "c"))
    assert min(lengths) < 15 and max(lengths) > 25


def test_window_arithmetic_is_the_kernels() -> None:
    """The sampler's hash (splitmix64, floor(h * range / 2^64)): starts uniform over the range, deterministic."""
    got = [E.window_of(7, 2, p, 10, 10, 13) for p in range(4000)]
    assert {length for _, length in got} == {10}
    counts = np.bincount([s for s, _ in got], minlength=4)
    assert counts.size == 4 and counts.min() > 900  # 0..3, about 1000 each
    assert [E.window_of(7, 2, p, 10, 10, 13) for p in range(50)] == got[:50]  # deterministic
    assert [E.window_of(8, 2, p, 10, 10, 13) for p in range(50)] != got[:50]  # another seed, other windows
    assert [E.window_of(7, 3, p, 10, 10, 13) for p in range(50)] != got[:50]  # another epoch too
    assert E.window_of(1, 0, 0, 0, 0, 77) == (0, 77)
    assert E._sm64(0) == 0xE220A8397B1DCDAF  # splitmix64's first output from seed 0 (its reference value)


@pytest.mark.parametrize("out", [None, "float16", "bfloat16"])
def test_half_and_bfloat16_streams(out) -> None:
    """float16 and bfloat16 streams (bfloat16 from PyTorch) beside a float32 one; float32 out by default (the
    16-bit values interpolated exactly), or 16-bit out within that dtype's tolerance."""
    torch = pytest.importorskip("torch")
    from robocache.bench.gate import TOLERANCE

    eps = make_episodes(4, seed=5, streams=(("f32", 30.0, 3, "float32"), ("f16", 60.0, 2, "float16"),
                                            ("bf", 20.0, 4, "float32")))
    mixed = [{**ep, "bf": (ep["bf"][0], torch.from_numpy(ep["bf"][1]).to(torch.bfloat16))} for ep in eps]
    rounded = [{**ep, "bf": (ep["bf"][0], torch.from_numpy(ep["bf"][1]).to(torch.bfloat16).float().numpy())}
               for ep in eps]
    cache = EpisodeCache(mixed, batch_size=2, device="cpu", kind="torch", out_dtype=out, log=lambda s: None)
    b = cache.next_batch()
    assert b.x.dtype == getattr(torch, out or "float32")
    x = b.x.float().numpy()
    want, _ = expected(rounded, ("f32", "f16", "bf"), b.windows.numpy(), x.shape[1])
    tol = TOLERANCE[out or "float32"]
    assert (np.abs(x - want) / np.maximum(1.0, np.abs(want))).max() <= tol
    # all-bfloat16 streams: bfloat16 out unless asked otherwise
    only = [{"bf": ep["bf"]} for ep in mixed]
    assert EpisodeCache(only, batch_size=2, device="cpu", kind="torch", log=lambda s: None).next_batch().x.dtype \
        == torch.bfloat16


# ---------------------------------------------------------------- the sampler

def test_shuffle_per_epoch_is_seeded() -> None:
    eps = make_episodes(8, seed=6)
    orders = []
    for seed in (3, 3, 4):
        c = EpisodeCache(eps, batch_size=4, device="cpu", seed=seed, log=lambda s: None)
        orders.append([np.concatenate([b.windows[:, 0] for b in c]).tolist() for _ in range(3)])
    assert orders[0] == orders[1] and orders[0] != orders[2]
    for epoch in orders[0]:
        assert sorted(epoch) == list(range(8))  # each epoch a permutation
    assert len({tuple(e) for e in orders[0]}) == 3  # a fresh one each epoch
    c = EpisodeCache(eps, batch_size=4, device="cpu", shuffle=False, log=lambda s: None)
    assert np.concatenate([b.windows[:, 0] for b in c]).tolist() == list(range(8))


def test_explicit_order_peek_and_reset() -> None:
    eps = make_episodes(5, seed=7)
    c = EpisodeCache(eps, batch_size=2, device="cpu", order=[4, 4, 1, 0, 2], log=lambda s: None)
    assert len(c) == 2
    assert c.peek_episodes(3).tolist() == [[4, 4], [1, 0], [4, 4]]  # the order again in the next epoch
    got = [c.next_batch().windows[:, 0].tolist() for _ in range(3)]
    assert got == [[4, 4], [1, 0], [4, 4]]
    c.reset(order=[3, 2])
    assert c.next_batch().windows[:, 0].tolist() == [3, 2] and len(c) == 1
    with pytest.raises(ValueError, match="all held by this cache"):
        c.reset(order=[0, 9])


@pytest.mark.parametrize("budget", [None, "two thirds"])
def test_resume_reproduces_the_run(budget) -> None:
    eps = make_episodes(12, seed=8)
    kw = dict(batch_size=2, device="cpu", window=(20, 30), seed=11, log=lambda s: None)
    if budget:
        kw["memory_budget"] = EpisodeCache(eps, **kw).device_bytes * 2 // 3
    a = EpisodeCache(eps, **kw)
    assert a.mode == ("streamed" if budget else "resident")
    for _ in range(9):  # into the second epoch
        a.next_batch()
    state = json.loads(json.dumps(a.state_dict()))  # a checkpoint is JSON
    after = [a.next_batch() for _ in range(8)]
    b = EpisodeCache(eps, **kw)
    b.load_state_dict(state)
    for x, y in zip(after, (b.next_batch() for _ in range(8))):
        assert (x.epoch, x.batch) == (y.epoch, y.batch)
        np.testing.assert_array_equal(x.windows, y.windows)
        np.testing.assert_array_equal(x.x, y.x)
    other = EpisodeCache(eps, **{**kw, "batch_size": 3})
    with pytest.raises(ValueError, match="batch_size"):
        other.load_state_dict(state)
    with pytest.raises(ValueError, match="not an EpisodeCache state"):
        b.load_state_dict({"epoch": 1})


def test_ddp_shards_are_disjoint_and_even() -> None:
    eps = make_episodes(11, seed=9)
    shards = [EpisodeCache(eps, batch_size=2, device="cpu", rank=r, world_size=3, log=lambda s: None)
              for r in range(3)]
    held = [s.episodes.tolist() for s in shards]
    assert held == [[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8]]
    assert {len(s) for s in shards} == {1}  # 11 // 3 = 3 episodes per rank per epoch: one batch of 2 each
    for s in shards:
        for _ in range(3):
            b = s.next_batch()
            assert set(b.windows[:, 0].tolist()) <= set(s.episodes.tolist())
    sub = EpisodeCache(eps, batch_size=2, device="cpu", subset=[5, 1, 5], log=lambda s: None)
    assert sub.episodes.tolist() == [1, 5]
    with pytest.raises(ValueError, match="does not hold"):
        EpisodeCache(eps, batch_size=2, device="cpu", rank=1, world_size=3, order=[0, 1])
    with pytest.raises(ValueError, match="rank"):
        EpisodeCache(eps, batch_size=2, device="cpu", rank=3, world_size=3)


# ---------------------------------------------------------------- streamed mode

@pytest.mark.parametrize("depth", [0, 1, 3])
def test_streamed_mode_serves_every_batch_from_resident_chunks(depth) -> None:
    """A budget half the cache: chunks copied into a ring as the batches need them, over several epochs; each
    batch equal to numpy.interp (the NumPy path reads the ring through the same slot tables as the kernel, and
    refuses a batch whose chunk is not resident)."""
    eps = make_episodes(20, seed=10)
    full = EpisodeCache(eps, batch_size=2, device="cpu", log=lambda s: None).device_bytes
    lines = []
    c = EpisodeCache(eps, batch_size=2, device="cpu", memory_budget=full // 2, prefetch_depth=depth,
                     log=lines.append)
    assert c.mode == "streamed" and c.device_bytes <= full // 2 and c.host_bytes > 0
    assert c.slots < c.chunks and c.prefetch_depth == depth
    assert "streamed" in lines[0] and f"prefetch depth {depth}" in lines[0]
    for _ in range(3):
        seen = []
        for b in c:
            check_batch(b, eps, ("a", "b", "c"))
            seen += b.windows[:, 0].tolist()
        assert sorted(seen) == list(range(20))  # an epoch: every episode once
    assert c.chunk_copies >= 3 * c.chunks - c.slots  # every chunk copied in each epoch (a few kept across)


def test_streamed_order_is_chunk_by_chunk() -> None:
    eps = make_episodes(16, seed=10)
    full = EpisodeCache(eps, batch_size=2, device="cpu", log=lambda s: None).device_bytes
    c = EpisodeCache(eps, batch_size=2, device="cpu", memory_budget=full // 2, log=lambda s: None)
    chunk = c._chunk_of  # the episodes of one chunk come together in each epoch's order
    order = c.peek_episodes(len(c)).ravel()
    runs = [chunk[e] for i, e in enumerate(order) if i == 0 or chunk[e] != chunk[order[i - 1]]]
    assert len(runs) == len(set(runs))


# ---------------------------------------------------------------- bad input, before anything is allocated

@pytest.fixture
def no_alloc(monkeypatch: pytest.MonkeyPatch):
    def boom(self, src):
        raise AssertionError("allocated before the input was checked")

    monkeypatch.setattr(EpisodeCache, "_allocate_and_fill", boom)


def _swap(eps, i, name, times=None, values=None):
    out = [dict(ep) for ep in eps]
    t, v = out[i][name]
    out[i][name] = (t if times is None else times, v if values is None else values)
    return out


def test_bad_inputs_are_refused_before_allocation(no_alloc) -> None:
    eps = make_episodes(6, seed=12)
    t, v = eps[2]["b"]
    cases = [
        (_swap(eps, 2, "b", times=t[::-1].copy()), {}, ValueError,
         "episode 2 stream 'b': times must be non-decreasing"),
        (_swap(eps, 1, "a", times=np.where(np.arange(len(eps[1]["a"][0])) == 3, np.nan, eps[1]["a"][0])), {},
         ValueError, "episode 1 stream 'a': times must be finite"),
        (_swap(eps, 0, "c", values=eps[0]["c"][1].astype(np.float64)), {}, TypeError,
         "values have dtype float64; EpisodeCache stores float32, float16, bfloat16"),
        (_swap(eps, 0, "c", times=np.arange(len(eps[0]["c"][0]))), {}, TypeError, "times have dtype int64"),
        (_swap(eps, 3, "a", values=eps[3]["a"][1][:, :2]), {}, ValueError, "one dtype and D per stream"),
        (_swap(eps, 3, "a", values=eps[3]["a"][1][:-1]), {}, ValueError, "must have shape \\[S, D\\]"),
        (eps, {"window": 500}, ValueError, "shorter than a window of 500"),
        (eps, {"batch_size": 7}, ValueError, "fewer than one batch of 7"),
        (eps, {"memory_budget": 10_000}, ValueError, "too small for one batch"),
        (eps, {"window": (4, 2)}, ValueError, "window lengths"),
        (eps, {"window": "64"}, TypeError, "window must be"),
        (eps, {"out_dtype": "float64"}, TypeError, "out_dtype"),
        (eps, {"device": "tpu"}, ValueError, "device must be"),
        (eps, {"kind": "cupy"}, ValueError, "kind 'cupy' on the CPU"),
        (eps, {"prefetch_depth": -1}, ValueError, "prefetch_depth"),
        (eps, {"rate_hz": 0.0}, ValueError, "rate_hz"),
        (eps, {"order": [0, 1, 7]}, ValueError, "the dataset has 6 episodes"),
        (eps, {"streams": ("a", "zz")}, ValueError, "episode 0 has no stream 'zz'"),
        ([{}, {}], {}, ValueError, "no stream to cache"),
        ("episodes", {}, TypeError, "episodes must be a sequence"),
    ]
    for data, kw, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            EpisodeCache(data, **{"batch_size": 2, "device": "cpu", **kw})


def test_an_explicit_order_needs_the_resident_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    eps = make_episodes(20, seed=10)
    full = EpisodeCache(eps, batch_size=2, device="cpu", log=lambda s: None).device_bytes
    assert EpisodeCache(eps, batch_size=2, device="cpu", memory_budget=full // 2, log=lambda s: None).mode == \
        "streamed"
    monkeypatch.setattr(EpisodeCache, "_allocate_and_fill", lambda self, src: pytest.fail("allocated"))
    with pytest.raises(ValueError, match="explicit order needs the resident mode"):
        EpisodeCache(eps, batch_size=2, device="cpu", order=[0, 1, 2, 3], memory_budget=full // 2)


def test_the_error_names_the_budget_needed() -> None:
    eps = make_episodes(10, seed=13)
    full = EpisodeCache(eps, batch_size=4, device="cpu", log=lambda s: None).device_bytes
    with pytest.raises(ValueError, match=r"needs at least [0-9.]+ MB .* raise the budget"):
        EpisodeCache(eps, batch_size=4, device="cpu", memory_budget=full // 10)


def test_public_api_and_logger(caplog: pytest.LogCaptureFixture) -> None:
    assert robocache.EpisodeCache is EpisodeCache and "EpisodeCache" in robocache.__all__
    with caplog.at_level(logging.INFO, logger="robocache.episodes"):
        c = EpisodeCache(make_episodes(4), batch_size=2, device="cpu")
    assert any("EpisodeCache: resident" in r.message for r in caplog.records)
    assert "resident" in repr(c)
    c.close()
    assert "closed" in repr(c)
    with pytest.raises(RuntimeError, match="closed"):
        c.next_batch()
