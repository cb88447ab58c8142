"""The peers in robocache.providers against the NumPy reference, on the CPU (runs in CI).

torch_eager runs on CPU tensors; the numpy peer is the reference in the input dtype;
torch_compile gets one small compile. Inputs are random (seeded), never zeros.
Low-precision inputs are rounded to their dtype first and the reference runs on the
rounded values upcast to float64, so the tolerance covers only the peer's arithmetic
and the final rounding to the output dtype.
"""
from __future__ import annotations

import subprocess
import sys
import zlib

import numpy as np
import pytest

from robocache import reference
from robocache import providers
from robocache.providers import numpy_cpu, torch_eager

torch = pytest.importorskip("torch")

# (rtol, atol) of a peer's output against the float64 reference, per values dtype:
# float32 arithmetic (a few ulp of values ~1), then one rounding to the output dtype
# (half an ulp: 2**-11 for float16, 2**-8 for bfloat16, relative).
TOL = {"float32": (1e-5, 2e-6), "float16": (1e-3, 1e-3), "bfloat16": (8e-3, 8e-3)}
VALUE_DTYPES = list(TOL)
TIME_DTYPES = ["float32", "float64"]


def _rng(*key: object) -> np.random.Generator:
    """A Generator seeded from the test's parameters (stable across runs, unlike hash())."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _t(x: np.ndarray, dtype: str) -> torch.Tensor:
    """NumPy -> torch CPU tensor of ``dtype`` (rounded to it)."""
    return torch.from_numpy(np.ascontiguousarray(x)).to(getattr(torch, dtype))


def _np64(x: torch.Tensor) -> np.ndarray:
    """What the peer saw, exactly, as float64 for the reference."""
    return x.to(torch.float64).numpy()


def _times(rng: np.random.Generator, b: int, s: int, rate: float = 30.0, start: float = 0.0) -> np.ndarray:
    """Increasing, jittered sample times: ``rate`` Hz, a random phase per row."""
    dt = rng.uniform(0.5, 1.5, size=(b, s)) / rate
    return start + rng.uniform(0.01, 0.1, size=(b, 1)) + np.cumsum(dt, axis=1)


def _targets(rng: np.random.Generator, src: np.ndarray, t: int) -> np.ndarray:
    """Targets spread past both ends of each row, some exactly on source samples."""
    lo, hi = src[:, :1], src[:, -1:]
    span = hi - lo + 1e-3
    tgt = rng.uniform(lo - 0.2 * span, hi + 0.2 * span, size=(src.shape[0], t))
    hits = rng.integers(0, src.shape[1], size=(src.shape[0], t))
    on_sample = rng.random((src.shape[0], t)) < 0.2
    return np.where(on_sample, np.take_along_axis(src, hits, axis=1), tgt)


def _check(out: torch.Tensor, ref: np.ndarray, dtype: str) -> None:
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(out.to(torch.float64).numpy(), ref, rtol=rtol, atol=atol, equal_nan=True)


# ---- resample -------------------------------------------------------------------------------

# (B, S, T, D): general, S=2, T=1, D=1, D=270, S=1
SHAPES = [(3, 50, 40, 7), (2, 2, 5, 3), (4, 30, 1, 5), (2, 40, 33, 1), (2, 37, 29, 270), (2, 1, 4, 3)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "B{}_S{}_T{}_D{}".format(*s))
@pytest.mark.parametrize("tdtype", TIME_DTYPES)
@pytest.mark.parametrize("dtype", VALUE_DTYPES)
def test_torch_eager_resample_random(shape, tdtype, dtype):
    b, s, t, d = shape
    rng = _rng((shape, tdtype, dtype))
    src_np = _times(rng, b, s)
    values = _t(rng.standard_normal((b, s, d)), dtype)
    src = _t(src_np, tdtype)
    tgt = _t(_targets(rng, src_np, t), tdtype)
    out = torch_eager.resample(values, src, tgt)
    assert out.shape == (b, t, d) and out.dtype == values.dtype and out.device == values.device
    _check(out, reference.resample(_np64(values), _np64(src), _np64(tgt)), dtype)


def test_torch_eager_resample_epoch_seconds_float64():
    # float64 times keep epoch timestamps exact: the weight is computed in float64.
    rng = np.random.default_rng(7)
    src_np = _times(rng, 2, 60, rate=100.0, start=1.7e9)
    values = _t(rng.standard_normal((2, 60, 4)), "float32")
    src, tgt = _t(src_np, "float64"), _t(_targets(rng, src_np, 50), "float64")
    out = torch_eager.resample(values, src, tgt)
    _check(out, reference.resample(_np64(values), _np64(src), _np64(tgt)), "float32")


@pytest.mark.parametrize("tdtype", TIME_DTYPES)
@pytest.mark.parametrize("dtype", VALUE_DTYPES)
def test_torch_eager_resample_edges(tdtype, dtype):
    # repeated times at the start, middle and end; targets before, on, between, after, NaN
    src_np = np.array([[0.0, 0.0, 1.0, 1.0, 2.0, 3.0, 3.0]])
    tgt_np = np.array([[-1.0, 0.0, 0.5, 1.0, 1.5, 2.5, 3.0, 4.0, np.nan]])
    rng = np.random.default_rng(11)
    values = _t(rng.uniform(1.0, 2.0, size=(1, 7, 3)) * rng.choice([-1, 1], size=(1, 7, 3)), dtype)
    src, tgt = _t(src_np, tdtype), _t(tgt_np, tdtype)
    out = torch_eager.resample(values, src, tgt)
    ref = reference.resample(_np64(values), _np64(src), _np64(tgt))
    _check(out, ref, dtype)
    v = values[0]
    # equal source times: the last sample with that time wins, exactly
    assert torch.equal(out[0, 0], v[0]) and torch.equal(out[0, 1], v[1])
    assert torch.equal(out[0, 3], v[3]) and torch.equal(out[0, 6], v[6]) and torch.equal(out[0, 7], v[6])
    assert torch.isnan(out[0, 8].float()).all()
    assert not torch.isnan(out[0, :8].float()).any()


def test_torch_eager_resample_infinite_neighbour():
    # On a sample or clamped (w == 0) the result is exactly that sample, even next to an inf.
    values = torch.tensor([[[1.0], [float("inf")], [3.0]]])
    src = torch.tensor([[0.0, 1.0, 2.0]], dtype=torch.float64)
    tgt = torch.tensor([[-1.0, 0.0, 0.5, 2.0, 5.0]], dtype=torch.float64)
    out = torch_eager.resample(values, src, tgt)
    ref = reference.resample(_np64(values), _np64(src), _np64(tgt))
    np.testing.assert_array_equal(out[0, :, 0].numpy(), ref[0, :, 0])
    assert out[0, :, 0].tolist() == [1.0, 1.0, float("inf"), 3.0, 3.0]


def test_torch_eager_resample_noncontiguous_times():
    rng = np.random.default_rng(5)
    src_np = _times(rng, 3, 20)
    values = _t(rng.standard_normal((3, 20, 2)), "float32")
    src = _t(np.ascontiguousarray(src_np.T), "float64").T  # same values, transposed strides
    tgt = _t(_targets(rng, src_np, 15).T.copy(), "float64").T
    assert not src.is_contiguous() and not tgt.is_contiguous()
    out = torch_eager.resample(values, src, tgt)
    _check(out, reference.resample(_np64(values), _np64(src), _np64(tgt)), "float32")


# ---- fuse -----------------------------------------------------------------------------------

@pytest.mark.parametrize("tdtype", TIME_DTYPES)
@pytest.mark.parametrize("dtype", VALUE_DTYPES)
def test_torch_eager_fuse_three_rates(tdtype, dtype):
    # one second of a 30 Hz camera, a 100 Hz joint stream and a 333 Hz IMU
    rng = _rng((tdtype, dtype))
    b, t = 2, 50
    streams, ref_streams = [], []
    for rate, d in ((30.0, 7), (100.0, 12), (333.0, 3)):
        times = _times(rng, b, int(rate), rate=rate)
        v, ts = _t(rng.standard_normal((b, int(rate), d)), dtype), _t(times, tdtype)
        streams.append((v, ts))
        ref_streams.append((_np64(v), _np64(ts)))
    tgt = _t(rng.uniform(-0.05, 1.05, size=(b, t)), tdtype)
    out = torch_eager.fuse(streams, tgt)
    assert out.shape == (b, t, 22) and out.dtype == getattr(torch, dtype)
    _check(out, reference.fuse(ref_streams, _np64(tgt)), dtype)


# ---- voxelize -------------------------------------------------------------------------------

GRID = (8, 6, 5)
BOUNDS = ((-1.0, -2.0, -0.5), (1.0, 2.0, 1.5))


def _cloud(rng: np.random.Generator, b: int, n: int, c: int) -> tuple[np.ndarray, np.ndarray]:
    """Points over a box 20% larger than BOUNDS, plus NaN/inf coordinates and points on lo and hi."""
    lo, hi = np.array(BOUNDS[0]), np.array(BOUNDS[1])
    pad = 0.2 * (hi - lo)
    pts = rng.uniform(lo - pad, hi + pad, size=(b, n, 3))
    pts[:, 0] = [np.nan, 0.0, 0.0]
    pts[:, 1] = [0.0, np.inf, 0.0]
    pts[:, 2] = [0.0, 0.0, -np.inf]
    pts[:, 3] = lo  # kept (lo is inclusive)
    pts[:, 4] = hi  # dropped (hi is exclusive)
    pts[:, 5] = [0.0, hi[1], 0.0]  # dropped on one axis
    # just below hi in float32: (p - lo) * inv rounds up to g, so the index must be clamped to g - 1
    pts[:, 6] = np.nextafter(hi.astype(np.float32), np.float32(-np.inf))
    feats = rng.uniform(0.5, 2.0, size=(b, n, c)) * rng.choice([-1, 1], size=(b, n, c))
    return pts, feats


@pytest.mark.parametrize("mode", ["count", "occupancy", "mean"])
@pytest.mark.parametrize("dtype", VALUE_DTYPES)
def test_torch_eager_voxelize(mode, dtype):
    rng = _rng((mode, dtype))
    pts_np, feats_np = _cloud(rng, 3, 600, 4)
    pts, feats = _t(pts_np, dtype), _t(feats_np, dtype)
    out = torch_eager.voxelize(pts, feats, GRID, BOUNDS, mode)
    ref = reference.voxelize(_np64(pts), _np64(feats), GRID, BOUNDS, mode)
    if mode == "mean":
        assert out.shape == (3, *GRID, 4) and out.dtype == feats.dtype
        _check(out, ref, dtype)
    else:
        assert out.shape == (3, *GRID)
        assert out.dtype == (torch.int32 if mode == "count" else torch.bool)
        np.testing.assert_array_equal(out.numpy(), ref)
    if mode == "count":
        kept = int(out.sum())
        assert 0 < kept < 3 * 600  # the cloud straddles the bounds: some kept, some dropped


def test_torch_eager_voxelize_empty_cloud():
    pts, feats = torch.empty(2, 0, 3), torch.empty(2, 0, 3)
    assert int(torch_eager.voxelize(pts, None, GRID, BOUNDS, "count").sum()) == 0
    mean = torch_eager.voxelize(pts, feats, GRID, BOUNDS, "mean")
    assert mean.shape == (2, *GRID, 3) and not mean.any()


def test_torch_eager_voxelize_bad_mode():
    pts = torch.ones(1, 4, 3)
    with pytest.raises(ValueError, match="mode"):
        torch_eager.voxelize(pts, None, GRID, BOUNDS, "max")
    with pytest.raises(ValueError, match="features"):
        torch_eager.voxelize(pts, None, GRID, BOUNDS, "mean")


# ---- numpy peer -----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_numpy_peer(dtype):
    rng = np.random.default_rng(3)
    src = _times(rng, 2, 25)
    values = rng.standard_normal((2, 25, 4)).astype(dtype)
    tgt = _targets(rng, src, 19)
    out = numpy_cpu.resample(values, src, tgt)
    assert out.dtype == values.dtype
    np.testing.assert_array_equal(out, reference.resample(values, src, tgt).astype(dtype))

    src2 = _times(rng, 2, 40, rate=100.0)
    v2 = rng.standard_normal((2, 40, 3)).astype(dtype)
    fused = numpy_cpu.fuse([(values, src), (v2, src2)], tgt)
    assert fused.dtype == values.dtype and fused.shape == (2, 19, 7)
    np.testing.assert_array_equal(fused[..., 4:], reference.resample(v2, src2, tgt).astype(dtype))

    pts, feats = _cloud(rng, 2, 200, 3)
    pts, feats = pts.astype(dtype), feats.astype(dtype)
    count = numpy_cpu.voxelize(pts, None, GRID, BOUNDS, "count")
    assert count.dtype == np.int32
    np.testing.assert_array_equal(count, reference.voxelize(pts, None, GRID, BOUNDS, "count"))
    assert numpy_cpu.voxelize(pts, None, GRID, BOUNDS, "occupancy").dtype == np.bool_
    mean = numpy_cpu.voxelize(pts, feats, GRID, BOUNDS, "mean")
    assert mean.dtype == feats.dtype
    np.testing.assert_array_equal(mean, reference.voxelize(pts, feats, GRID, BOUNDS, "mean").astype(dtype))


# ---- CuPy peer's algorithm, run with NumPy as the array module -------------------------------

def _cupy_alg_inputs(rng: np.random.Generator, b: int, s: int, t: int, d: int, dup: bool = True,
                     start: float = 0.0, rate: float = 30.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Values, source times with repeated runs (when ``dup``), targets past both ends, on samples, and NaN."""
    src = _times(rng, b, s, rate=rate, start=start)
    if dup and s > 2:
        rep = rng.random((b, s)) < 0.25
        rep[:, 0] = False
        idx = np.where(rep, 0, np.arange(s))  # a repeated sample copies the time before it
        idx = np.maximum.accumulate(idx, axis=1)
        src = np.take_along_axis(src, idx, axis=1)
    tgt = _targets(rng, src, t)
    if t > 1:
        tgt[rng.random((b, t)) < 0.1] = np.nan
    return rng.standard_normal((b, s, d)), src, tgt


CUPY_ALG_DTYPES = ["float32", "float16"]  # bfloat16 runs on the GPU (CuPy holds it through ml_dtypes)


@pytest.mark.parametrize("shape", SHAPES + [(1, 1, 1, 1), (64, 9, 3, 2)], ids=lambda s: "B{}_S{}_T{}_D{}".format(*s))
@pytest.mark.parametrize("tdtype", TIME_DTYPES)
@pytest.mark.parametrize("dtype", CUPY_ALG_DTYPES)
def test_cupy_algorithm_resample_numpy(shape, tdtype, dtype):
    from robocache.providers import cupy_provider

    b, s, t, d = shape
    v, src, tgt = _cupy_alg_inputs(_rng(("cupy", shape, tdtype, dtype)), b, s, t, d)
    v, src, tgt = v.astype(dtype), src.astype(tdtype), tgt.astype(tdtype)
    out = cupy_provider.resample_xp(np, v, src, tgt)
    assert out.shape == (b, t, d) and out.dtype == v.dtype
    ref = reference.resample(v.astype(np.float64), src.astype(np.float64), tgt.astype(np.float64))
    _check(torch.from_numpy(out), ref, dtype)
    assert np.array_equal(np.isnan(out), np.isnan(ref))  # NaN exactly at NaN targets


@pytest.mark.parametrize("tdtype", TIME_DTYPES)
def test_cupy_algorithm_resample_edges_numpy(tdtype):
    from robocache.providers import cupy_provider

    src = np.array([[0.0, 0.0, 1.0, 1.0, 2.0, 3.0, 3.0], [5.0, 6.0, 6.0, 6.0, 7.0, 8.0, 9.0]], dtype=tdtype)
    tgt = np.array([[-1.0, 0.0, 0.5, 1.0, 1.5, 2.5, 3.0, 4.0, np.nan, np.inf, -np.inf],
                    [6.0, 5.0, 9.0, 4.0, 10.0, 6.5, np.nan, 5.5, 8.0, -np.inf, np.inf]], dtype=tdtype)
    v = np.random.default_rng(11).uniform(1.0, 2.0, size=(2, 7, 3)).astype(np.float32)
    out = cupy_provider.resample_xp(np, v, src, tgt)
    ref = reference.resample(v.astype(np.float64), src.astype(np.float64), tgt.astype(np.float64))
    _check(torch.from_numpy(out), ref, "float32")
    # equal source times: the last sample with that time wins, exactly; clamped ends are exact too
    np.testing.assert_array_equal(out[0, [0, 1, 3, 6, 7, 9, 10]], v[0, [0, 1, 3, 6, 6, 6, 0]])
    np.testing.assert_array_equal(out[1, [0, 1, 2, 3, 4]], v[1, [3, 0, 6, 0, 6]])
    assert np.isnan(out[0, 8]).all() and np.isnan(out[1, 6]).all()


def test_cupy_algorithm_exact_where_a_float_offset_rounds():
    """Epoch-second float64 times one ulp apart, in many rows: the (row, time) key never merges them, where a
    float offset ``row * span + time`` would (ulp(1.7e9 + 4096 * span) >> ulp(1.7e9))."""
    from robocache.providers import cupy_provider

    b = 4096
    x = 1.7e9 + np.arange(b, dtype=np.float64)[:, None] * 1e-3
    up = np.nextafter(x, np.inf)
    src = np.concatenate([x, up, np.nextafter(up, np.inf)], axis=1)  # three times, one ulp apart
    tgt = np.concatenate([x, up, (x + up) / 2, src[:, 2:]], axis=1)
    v = np.random.default_rng(2).standard_normal((b, 3, 2)).astype(np.float32)
    out = cupy_provider.resample_xp(np, v, src, tgt)
    np.testing.assert_array_equal(out[:, 0], v[:, 0])
    np.testing.assert_array_equal(out[:, 1], v[:, 1])
    np.testing.assert_array_equal(out[:, 3], v[:, 2])
    ref = reference.resample(v.astype(np.float64), src, tgt)
    _check(torch.from_numpy(out), ref, "float32")


def test_cupy_algorithm_epoch_seconds_float64_and_float32_times():
    from robocache.providers import cupy_provider

    rng = np.random.default_rng(17)
    v, src, tgt = _cupy_alg_inputs(rng, 5, 80, 60, 4, start=1.7e9, rate=100.0)
    v = v.astype(np.float32)
    out = cupy_provider.resample_xp(np, v, src, tgt)
    _check(torch.from_numpy(out), reference.resample(v.astype(np.float64), src, tgt), "float32")
    # float32 times are what the caller gave: the reference sees the same rounded times
    v2, src2, tgt2 = _cupy_alg_inputs(rng, 7, 50, 40, 3)
    src2, tgt2 = src2.astype(np.float32), tgt2.astype(np.float32)
    out2 = cupy_provider.resample_xp(np, v2.astype(np.float32), src2, tgt2)
    ref2 = reference.resample(v2.astype(np.float32).astype(np.float64), src2.astype(np.float64),
                              tgt2.astype(np.float64))
    _check(torch.from_numpy(out2), ref2, "float32")


@pytest.mark.parametrize("dtype", CUPY_ALG_DTYPES)
def test_cupy_algorithm_fuse_numpy(dtype):
    from robocache.providers import cupy_provider

    rng = _rng(("cupy-fuse", dtype))
    b, t = 3, 45
    streams, ref_streams = [], []
    for rate, d, tdt in ((30.0, 7, "float64"), (100.0, 12, "float32"), (333.0, 3, "float64"), (5.0, 1, "float32")):
        v, ts, _ = _cupy_alg_inputs(rng, b, int(rate), 2, d, rate=rate)
        v, ts = v.astype(dtype), ts.astype(tdt)
        streams.append((v, ts))
        ref_streams.append((v.astype(np.float64), ts.astype(np.float64)))
    tgt = rng.uniform(-0.05, 1.05, size=(b, t))
    tgt[0, 3] = np.nan
    out = cupy_provider.fuse_xp(np, streams, tgt)
    assert out.shape == (b, t, 23) and out.dtype == np.dtype(dtype)
    _check(torch.from_numpy(out), reference.fuse(ref_streams, tgt), dtype)


def test_cupy_algorithm_bad_shapes():
    from robocache.providers import cupy_provider

    v = np.ones((2, 3, 1), np.float32)
    with pytest.raises(ValueError, match="shapes disagree"):
        cupy_provider.resample_xp(np, v, np.zeros((2, 4)), np.zeros((2, 5)))
    with pytest.raises(ValueError, match="S >= 1"):
        cupy_provider.resample_xp(np, np.ones((2, 0, 1), np.float32), np.zeros((2, 0)), np.zeros((2, 5)))
    with pytest.raises(TypeError, match="int32"):
        cupy_provider.resample_xp(np, v.astype(np.int32), np.zeros((2, 3)), np.zeros((2, 5)))
    with pytest.raises(ValueError, match="at least one"):
        cupy_provider.fuse_xp(np, [], np.zeros((2, 5)))


# ---- registry -------------------------------------------------------------------------------

def test_registry_names_and_get():
    names = providers.names()
    versions = [n for n in names if providers.version_of(n)]  # robocache@v1, ...: right after robocache
    assert names[:1 + len(versions)] == ["robocache", *versions]
    # robocache's NumPy path (ours on a CPU run), the peers (torch.compile first: the one to beat), then the
    # call-cost cases' own
    assert names[1 + len(versions):] == ["robocache@numpy", "torch_compile", "torch_compile@max-autotune",
                                         "torch_eager", "cupy", "numpy", "robocache@cupy", "bare_launch"]
    assert [p.name for p in providers.all_providers()] == providers.names()
    assert providers.get("torch_eager").ops["resample"] is torch_eager.resample
    with pytest.raises(ValueError) as e:
        providers.get("jax")
    for name in providers.names():
        assert name in str(e.value)


def test_table_facts():
    """One row per provider holds its facts; the grids, the array kinds and the roles are read from it."""
    get = providers.get
    assert [get(n).array_kind for n in ("robocache", "robocache@v1", "torch_eager", "torch_compile", "cupy",
                                        "numpy", "robocache@cupy", "bare_launch")] == [
        "torch", "torch", "torch", "torch", "cupy", "numpy", "cupy", "cupy"]
    assert {n for n in providers.names() if get(n).no_graph} == {"cupy", "numpy", "robocache@cupy", "bare_launch",
                                                                 "robocache@numpy"}
    assert providers.names("dispatch") == ["robocache", "robocache@cupy", "bare_launch"]
    assert providers.names("multigpu-gpu") == ["robocache"]
    assert set(providers.names("cpu")) == {"robocache@numpy", "numpy", "torch_eager", "torch_compile"}
    assert get("robocache@numpy").array_kind == "numpy" and get("robocache@numpy").device == "cpu"
    assert providers.names(wall=True) == ["robocache", "torch_compile", "numpy"]
    assert {n: providers.role(n) for n in ("robocache", "robocache@v2", "robocache@v9", "cupy", "robocache@cupy",
                                           "bare_launch", "mystery", "robocache@numpy")} == {
        "robocache": "ours", "robocache@v2": "version", "robocache@v9": "version", "cupy": "peer",
        "robocache@numpy": "ours",
        "robocache@cupy": "call", "bare_launch": "floor", "mystery": "peer"}
    assert [n for n in providers.names() if providers.gpu_only(n)] == [
        "robocache", *(n for n in providers.names() if providers.version_of(n)), "cupy", "robocache@cupy",
        "bare_launch"]
    assert not providers.gpu_only("tests.fault_providers:RAISE") and providers.gpu_only("robocache@v9")
    with pytest.raises(ValueError, match="unknown grid"):
        providers.names("tpu")
    for p in providers.all_providers():
        assert p.role in providers.ROLES and set(p.grids) <= set(providers.GRIDS), p.name
        assert p.array_kind in ("torch", "cupy", "numpy") and p.label, p.name
    # every provider has a distinct fixed colour, none of them one the palette of unknown names can pick
    colours = [get(n).color for n in providers.names()]
    assert all(c.startswith("#") and len(c) == 7 for c in colours) and len(set(colours)) == len(colours)
    assert not set(colours) & set(providers.OTHER_COLORS)


def test_unknown_providers_get_a_label_a_colour_and_a_place():
    # an old record's provider that the table no longer holds still gets a label, a stable colour and an order
    assert providers.label("robocache@v12") == "robocache v12"
    assert providers.label("torch_compile@reduce-overhead") == "torch.compile (reduce-overhead)"
    assert providers.label("mystery@x") == "mystery@x"
    assert providers.color("robocache@v99") == providers.VERSION_COLORS[-1]
    assert providers.color("torch_compile@reduce-overhead") in providers.COMPILE_COLORS
    out = subprocess.run([sys.executable, "-c", "from robocache import providers; print(providers.color('new_peer'))"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == providers.color("new_peer") in providers.OTHER_COLORS  # the same in another process
    names = ["zeta", "bare_launch", "robocache@v10", "torch_compile@reduce-overhead", "cupy", "robocache@v2",
             "robocache", "torch_compile"]
    assert sorted(names, key=providers.order) == ["robocache", "robocache@v2", "robocache@v10", "torch_compile",
                                                  "torch_compile@reduce-overhead", "cupy", "bare_launch", "zeta"]


def test_registry_every_op_implemented_or_explained():
    for p in providers.all_providers():
        assert p.device in ("cuda", "cpu", "any")
        assert set(p.ops) | set(p.not_applicable) == set(providers.OPS), p.name
        assert not set(p.ops) & set(p.not_applicable), p.name
        assert all(callable(f) for f in p.ops.values())
        assert all(isinstance(why, str) and why for why in p.not_applicable.values())


def test_registry_available_never_raises():
    for p in providers.all_providers():
        ok, why = p.available()
        assert isinstance(ok, bool) and isinstance(why, str)
        assert ok or why, f"{p.name} unavailable without a reason"
    assert providers.get("numpy").available() == (True, "")
    assert providers.get("torch_eager").available() == (True, "")  # torch is installed for this suite
    if not torch.cuda.is_available():  # CI: no GPU
        for name in ("robocache", "cupy"):
            ok, why = providers.get(name).available()
            assert not ok and why, name


def test_import_has_no_side_effects():
    # Importing the registry (and every peer module) must not import torch or cupy.
    code = ("import sys, robocache.providers; "
            "bad = [m for m in ('torch', 'cupy') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- torch.compile (one small compile on the CPU) -------------------------------------------

def test_torch_compile_resample_cpu():
    from robocache.providers import torch_compile

    rng = np.random.default_rng(13)
    src_np = _times(rng, 2, 16)
    values = _t(rng.standard_normal((2, 16, 3)), "float32")
    src, tgt = _t(src_np, "float64"), _t(_targets(rng, src_np, 9), "float64")
    from torch._dynamo.exc import BackendCompilerFailed

    try:
        out = torch_compile.resample(values, src, tgt)
    except BackendCompilerFailed as e:
        # Inductor could not build C++ here (no or broken compiler): an environment
        # problem, reported as a skip with the reason, never as a pass.
        pytest.skip(f"torch.compile cannot compile on this machine: {e}")
    _check(out, reference.resample(_np64(values), _np64(src), _np64(tgt)), "float32")
    assert torch_compile.compiled("resample") is torch_compile.compiled("resample")  # memoized
    assert torch_compile.compiled("resample") is torch_compile.compiled("resample", "default")


def test_torch_compile_max_autotune_resample_cpu():
    """The second compiled peer: same body, mode max-autotune-no-cudagraphs, through the registry."""
    from robocache.providers import torch_compile

    rng = np.random.default_rng(14)
    src_np = _times(rng, 2, 12)
    values = _t(rng.standard_normal((2, 12, 3)), "float32")
    src, tgt = _t(src_np, "float64"), _t(_targets(rng, src_np, 7), "float64")
    from torch._dynamo.exc import BackendCompilerFailed

    try:
        out = providers.get("torch_compile@max-autotune").ops["resample"](values, src, tgt)
    except BackendCompilerFailed as e:
        pytest.skip(f"torch.compile cannot compile on this machine: {e}")
    _check(out, reference.resample(_np64(values), _np64(src), _np64(tgt)), "float32")
    assert torch_compile.compiled("resample", "max-autotune") is not torch_compile.compiled("resample")
    with pytest.raises(ValueError, match="compile mode"):
        torch_compile.compiled("resample", "reduce-overhead")


def test_fork_safe_reports_a_poisoned_parent(monkeypatch):
    """fork_safe() asks a forked child whether torch considers it a bad fork (CUDA initialized in the parent)."""
    import torch

    from robocache.providers import torch_compile

    # In a fresh process (CPU machine, or GPU untouched) a forked child could use CUDA. This process may have
    # initialized CUDA in earlier GPU tests, where fork_safe() is rightly False.
    fresh = subprocess.run([sys.executable, "-c", "import sys; from robocache.providers import torch_compile; "
                            "sys.exit(0 if torch_compile.fork_safe() else 3)"], capture_output=True, text=True,
                           timeout=300)
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    assert torch_compile.fork_safe() == (not torch.cuda.is_initialized())
    monkeypatch.setattr(torch.cuda, "_is_in_bad_fork", lambda: True)
    assert not torch_compile.fork_safe()
    monkeypatch.setattr(torch.cuda, "_is_in_bad_fork", lambda: 1 / 0)  # a failing check is not "safe"
    assert not torch_compile.fork_safe()
