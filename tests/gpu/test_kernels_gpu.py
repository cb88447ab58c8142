"""Each CUDA kernel against the NumPy reference on the GPU.

Every op, every dtype (float32, float16, bfloat16) and both time dtypes; odd and
large shapes; non-contiguous inputs; CuPy arrays and PyTorch CUDA tensors. Inputs
are random (never zeros). Every output buffer is poisoned (NaN / -1 / 0xFF bytes)
before the call and passed as ``out=``, so an element the kernel fails to write
fails the comparison. Skipped, loudly, without a GPU (tests/gpu/conftest.py).
"""
from __future__ import annotations

import numpy as np
import pytest

import functools

import robocache
from robocache import reference
from robocache._versions import all_versions, VERSIONS

VALUE_DTYPES = ("float32", "float16", "bfloat16")
# max |err| / max(1, |ref|): fp32 math inside, so the error is the storage rounding of the output
# (float16: 2^-11, bfloat16: 2^-8) plus the rounding of the inputs being compared in float64.
TOL = {"float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2}


def pytest_generate_tests(metafunc):
    """Every test of this module runs once per kernel version of the op it is named after (robocache@v1, @v2,
    ...; resample and fuse have no v3, so theirs run v1 and v2 only), other tests once per version of any op."""
    if "kernel_version" in metafunc.fixturenames:
        named = [op for op in VERSIONS if metafunc.function.__name__.startswith(f"test_{op}")]
        metafunc.parametrize("kernel_version", VERSIONS[named[0]] if named else all_versions(), indirect=True)


@pytest.fixture(autouse=True)
def kernel_version(request, monkeypatch):
    """Each version is checked against the reference on the same inputs, the public API's best one included."""
    v = request.param
    for op in ("resample", "fuse", "voxelize"):
        if v in VERSIONS[op]:
            monkeypatch.setattr(robocache, op, functools.partial(getattr(robocache, op), _version=v))
    return v


# --- array plumbing for both kinds -----------------------------------------------------------------

class Kind:
    def __init__(self, name: str):
        self.name = name
        if name == "torch":
            import torch

            if not torch.cuda.is_available():
                pytest.skip("PyTorch sees no CUDA device")
            self.torch = torch
        else:
            import cupy

            self.cupy = cupy

    def dtype(self, name: str):
        if self.name == "torch":
            return getattr(self.torch, name)
        if name == "bfloat16":
            try:
                import ml_dtypes

                bf16 = np.dtype(ml_dtypes.bfloat16)
                self.cupy.asarray(np.ones(2, bf16))
                return bf16
            except Exception as e:  # noqa: BLE001
                pytest.skip(f"this CuPy has no bfloat16 arrays ({type(e).__name__}: {e}); "
                            "bfloat16 is covered by the PyTorch-tensor variant")
        return np.dtype(name)

    def put(self, a: np.ndarray, dtype: str | None = None):
        """Host float64 -> device array in ``dtype`` (rounded there)."""
        dtype = dtype or a.dtype.name
        if self.name == "torch":
            t = self.torch.from_numpy(np.ascontiguousarray(a)).cuda()
            return t.to(self.dtype(dtype))
        if dtype == "bfloat16":
            x = self.cupy.asarray(np.ascontiguousarray(a).astype(self.dtype("bfloat16")))
            return x
        return self.cupy.asarray(np.ascontiguousarray(a).astype(dtype))

    def get(self, x) -> np.ndarray:
        """Device array -> host float64 (or the integer/bool dtype)."""
        if self.name == "torch":
            if x.dtype in (self.torch.bfloat16, self.torch.float16):
                x = x.float()
            return x.cpu().numpy().astype(np.float64) if x.is_floating_point() else x.cpu().numpy()
        h = self.cupy.asnumpy(x)
        return h.astype(np.float64) if h.dtype.kind == "f" or h.dtype.name == "bfloat16" else h

    def poisoned(self, shape, dtype: str):
        """An output buffer whose every byte is 0xFF: NaN for floats, -1 for int32, 255 for bool."""
        if self.name == "torch":
            x = self.torch.empty(shape, dtype=self.dtype(dtype), device="cuda")
            x.view(self.torch.uint8).fill_(255)
            return x
        x = self.cupy.empty(shape, dtype=self.dtype(dtype))
        x.view(np.uint8).fill(255)
        return x

    def sync(self):
        (self.torch.cuda.synchronize if self.name == "torch" else self.cupy.cuda.Device().synchronize)()


@pytest.fixture(params=["cupy", "torch"])
def kind(request) -> Kind:
    return Kind(request.param)


def rounded(a: np.ndarray, dtype: str, kind: Kind) -> np.ndarray:
    """The values the kernel actually sees: ``a`` rounded to ``dtype`` and back to float64."""
    return kind.get(kind.put(a, dtype))


def assert_close(got: np.ndarray, want: np.ndarray, dtype: str, what: str):
    assert not np.isnan(got).any(), f"{what}: NaN in output (an element was not written, or bad math)"
    err = np.abs(got - want) / np.maximum(1.0, np.abs(want))
    worst = float(err.max(initial=0.0))
    assert worst <= TOL[dtype], f"{what}: max relative error {worst:.3g} > {TOL[dtype]:.3g} for {dtype}"


def times(rng, b, s, scale=1.0, dtype="float64", ties=False):
    t = np.sort(rng.uniform(0.0, scale, (b, s)), axis=1)
    if ties:
        t = np.sort(np.round(t * 16) / 16, axis=1)
    return t.astype(dtype).astype(np.float64)


# --- resample ---------------------------------------------------------------------------------------

SHAPES = [
    (1, 2, 1, 1),        # smallest: S=2, T=1, D=1
    (3, 1, 5, 4),        # S=1: every target clamps to the one sample
    (7, 37, 33, 3),      # odd everything, T just over a tile
    (256, 100, 50, 32),  # the classic case
    (5, 64, 129, 270),   # D=270 wider than a block
    (2, 5000, 3000, 17),  # long rows
    (4096, 64, 32, 8),   # many rows
]


@pytest.mark.parametrize("tdtype", ["float32", "float64"])
@pytest.mark.parametrize("dtype", VALUE_DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_resample(kind, rng, shape, dtype, tdtype):
    b, s, t, d = shape
    src = times(rng, b, s, dtype=tdtype, ties=(s > 8))
    tgt = rng.uniform(-0.1, 1.1, (b, t)).astype(tdtype).astype(np.float64)  # some outside the range
    vals = rng.standard_normal((b, s, d))
    v_in = kind.put(vals, dtype)
    out = kind.poisoned((b, t, d), dtype)
    res = robocache.resample(v_in, kind.put(src, tdtype), kind.put(tgt, tdtype), out=out)
    assert res is out
    want = reference.resample(kind.get(v_in), src, tgt)
    assert_close(kind.get(out), want, dtype, f"resample {shape} {dtype}/{tdtype} ({kind.name})")


@pytest.mark.parametrize("dtype", VALUE_DTYPES)
def test_resample_allocates_same_kind(kind, rng, dtype):
    b, s, t, d = 9, 40, 21, 6
    src, tgt, vals = times(rng, b, s), rng.uniform(0, 1, (b, t)), rng.standard_normal((b, s, d))
    v_in = kind.put(vals, dtype)
    res = robocache.resample(v_in, kind.put(src), kind.put(tgt))
    assert type(res) is type(v_in) and res.dtype == v_in.dtype and tuple(res.shape) == (b, t, d)
    assert_close(kind.get(res), reference.resample(kind.get(v_in), src, tgt), dtype, "allocated output")


def test_resample_non_contiguous(kind, rng):
    b, s, t, d = 6, 50, 20, 12
    src, tgt, vals = times(rng, 2 * b, s), rng.uniform(0, 1, (2 * b, t)), rng.standard_normal((2 * b, s, 2 * d))
    v_dev, s_dev, t_dev = kind.put(vals, "float32"), kind.put(src), kind.put(tgt)
    v_nc, s_nc, t_nc = v_dev[::2, :, ::2], s_dev[::2], t_dev[::2]  # strided views, not contiguous
    res = robocache.resample(v_nc, s_nc, t_nc)
    want = reference.resample(vals[::2, :, ::2], src[::2], tgt[::2])
    assert_close(kind.get(res), want, "float32", "non-contiguous resample")


def test_resample_nan_target_and_equal_times(kind, rng):
    src = np.array([[0.0, 1.0, 1.0, 1.0, 2.0]] * 2)
    vals = rng.standard_normal((2, 5, 3))
    tgt = np.array([[np.nan, 1.0, 0.5, 2.0, 3.0], [-1.0, 1.0, 1.5, 1.9999, 0.0]])
    res = kind.get(robocache.resample(kind.put(vals, "float32"), kind.put(src), kind.put(tgt)))
    want = reference.resample(vals.astype(np.float32), src, tgt)
    assert np.isnan(res[0, 0]).all()
    np.testing.assert_allclose(res[0, 1:], want[0, 1:], rtol=2e-6, atol=2e-6)
    np.testing.assert_array_equal(res[0, 1], vals.astype(np.float32)[0, 3])  # last sample at a repeated time
    np.testing.assert_allclose(res[1], want[1], rtol=2e-6, atol=2e-6)


def test_resample_check_times(kind, rng):
    src = times(rng, 3, 10)
    src[2, [4, 5]] = src[2, [5, 4]]
    vals = kind.put(rng.standard_normal((3, 10, 2)), "float32")
    with pytest.raises(ValueError, match="src_times must be non-decreasing"):
        robocache.resample(vals, kind.put(src), kind.put(rng.uniform(0, 1, (3, 4))), check_times=True)


def test_resample_rejects_float64_values_on_gpu(kind, rng):
    with pytest.raises(TypeError, match="on the GPU robocache supports float32, float16, bfloat16"):
        robocache.resample(kind.put(rng.standard_normal((2, 3, 4))), kind.put(times(rng, 2, 3)),
                           kind.put(rng.uniform(0, 1, (2, 2))))


# --- fuse -------------------------------------------------------------------------------------------

MIXES = {
    "robot": [(30, 256), (100, 14), (333, 6)],  # vision 30 Hz, proprioception 100 Hz, force 333 Hz
    "one": [(50, 7)],
    "many": [(h, d) for h, d in zip((10, 20, 33, 47, 60, 75, 90, 120), (1, 3, 5, 8, 13, 21, 34, 55))],
}


@pytest.mark.parametrize("tdtype", ["float32", "float64"])
@pytest.mark.parametrize("dtype", VALUE_DTYPES)
@pytest.mark.parametrize("mix", list(MIXES))
def test_fuse(kind, rng, mix, dtype, tdtype):
    b, secs = 17, 2.0
    tgt = rng.uniform(-0.05, secs + 0.05, (b, 100)).astype(tdtype).astype(np.float64)
    host, dev = [], []
    for hz, d in MIXES[mix]:
        n = int(hz * secs)
        ts = times(rng, b, n, scale=secs, dtype=tdtype)
        v = kind.put(rng.standard_normal((b, n, d)), dtype)
        host.append((kind.get(v), ts))
        dev.append((v, kind.put(ts, tdtype)))
    total = sum(d for _, d in MIXES[mix])
    out = kind.poisoned((b, 100, total), dtype)
    assert robocache.fuse(dev, kind.put(tgt, tdtype), out=out) is out
    got = kind.get(out)
    assert_close(got, reference.fuse(host, tgt), dtype, f"fuse {mix} {dtype}/{tdtype} ({kind.name})")
    # fuse == concatenated per-stream resample, on the GPU too
    parts = [kind.get(robocache.resample(v, ts, kind.put(tgt, tdtype))) for v, ts in dev]
    np.testing.assert_array_equal(got, np.concatenate(parts, axis=2))


def test_fuse_non_contiguous_streams(kind, rng):
    b = 4
    tgt = rng.uniform(0, 1, (b, 30))
    v1 = kind.put(rng.standard_normal((b, 40, 10)), "float32")[:, :, ::2]
    t1 = kind.put(times(rng, b, 40))
    v2 = kind.put(rng.standard_normal((2 * b, 25, 3)), "float32")[::2]
    t2 = kind.put(times(rng, 2 * b, 25))[::2]
    got = kind.get(robocache.fuse([(v1, t1), (v2, t2)], kind.put(tgt)))
    want = reference.fuse([(kind.get(v1), kind.get(t1)), (kind.get(v2), kind.get(t2))], tgt)
    assert_close(got, want, "float32", "non-contiguous fuse")


# --- voxelize ---------------------------------------------------------------------------------------

def cloud(rng, b, n, c, clustered=False):
    if clustered:  # a few dense blobs, as a real scene: many points per voxel (atomic contention)
        centers = rng.uniform(-1.5, 1.5, (b, 8, 3))
        pts = centers[:, rng.integers(0, 8, n)] + 0.05 * rng.standard_normal((b, n, 3))
    else:
        pts = rng.uniform(-2.2, 2.2, (b, n, 3))  # some outside the bounds
    if n >= 4:
        pts[0, 0] = [np.nan, 0, 0]
        pts[0, 1] = [0, np.inf, 0]
        pts[0, 2] = [2.0, 0, 0]    # on the upper bound: dropped
        pts[0, 3] = [-2.0, -2.0, -2.0]  # on the lower bound: kept
    return pts, rng.standard_normal((b, n, c))


BOUNDS = ((-2.0, -2.0, -2.0), (2.0, 2.0, 2.0))
VOX_CASES = [(1, 1, (1, 1, 1), 1), (2, 1000, (4, 5, 6), 3), (3, 100_000, (64, 64, 64), 4),
             (1, 2_000_000, (128, 128, 32), 2)]


@pytest.mark.parametrize("clustered", [False, True], ids=["uniform", "clustered"])
@pytest.mark.parametrize("dtype", VALUE_DTYPES)
@pytest.mark.parametrize("case", VOX_CASES, ids=lambda c: f"B{c[0]}N{c[1]}G{'x'.join(map(str, c[2]))}C{c[3]}")
def test_voxelize(kind, rng, case, dtype, clustered):
    b, n, grid, c = case
    pts, feats = cloud(rng, b, n, c, clustered)
    p_in, f_in = kind.put(pts, dtype), kind.put(feats, dtype)
    p_host, f_host = kind.get(p_in), kind.get(f_in)  # as rounded to dtype
    cnt = kind.poisoned((b, *grid), "int32")
    robocache.voxelize(p_in, None, grid, BOUNDS, "count", out=cnt)
    want_cnt = reference.voxelize(p_host, None, grid, BOUNDS, "count")
    np.testing.assert_array_equal(kind.get(cnt), want_cnt)  # voxel assignment is bit exact
    occ = kind.poisoned((b, *grid), "bool")
    robocache.voxelize(p_in, None, grid, BOUNDS, "occupancy", out=occ)
    np.testing.assert_array_equal(kind.get(occ), want_cnt > 0)
    mean = kind.poisoned((b, *grid, c), dtype)
    robocache.voxelize(p_in, f_in, grid, BOUNDS, "mean", out=mean)
    assert_close(kind.get(mean), reference.voxelize(p_host, f_host, grid, BOUNDS, "mean"), dtype,
                 f"voxelize mean {case} {dtype}")


def test_voxelize_determinism(kind, rng):
    pts, feats = cloud(rng, 2, 300_000, 3, clustered=True)
    p_in, f_in = kind.put(pts, "float32"), kind.put(feats, "float32")
    counts = [kind.get(robocache.voxelize(p_in, None, (32, 32, 32), BOUNDS, "count")) for _ in range(3)]
    assert all(np.array_equal(counts[0], c) for c in counts[1:]), "counts must be bitwise deterministic"
    means = [kind.get(robocache.voxelize(p_in, f_in, (32, 32, 32), BOUNDS, "mean")) for _ in range(3)]
    for m in means[1:]:  # float atomics: equal within fp32 rounding, not necessarily bitwise
        np.testing.assert_allclose(m, means[0], rtol=1e-5, atol=1e-6)


def test_voxelize_empty_cloud_and_non_contiguous(kind, rng):
    empty = kind.put(np.zeros((2, 0, 3)), "float32")
    assert kind.get(robocache.voxelize(empty, None, (3, 3, 3), BOUNDS)).sum() == 0
    pts, _ = cloud(rng, 4, 500, 1)
    p_nc = kind.put(np.concatenate([pts, pts], axis=2), "float32")[:, :, ::2][::2]  # strided
    got = kind.get(robocache.voxelize(p_nc, None, (5, 5, 5), BOUNDS))
    # every other column of [x,y,z,x,y,z] is x,z,y: compare against the same selection
    want = reference.voxelize(np.concatenate([pts, pts], axis=2)[::2, :, ::2].astype(np.float32), None,
                              (5, 5, 5), BOUNDS, "count")
    np.testing.assert_array_equal(got, want)


def test_cross_device_kinds_rejected(rng):
    torch = pytest.importorskip("torch")
    import cupy

    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    v = cupy.asarray(rng.standard_normal((2, 3, 4)).astype(np.float32))
    with pytest.raises(TypeError, match="mixed kinds"):
        robocache.resample(v, torch.rand(2, 3, device="cuda"), torch.rand(2, 2, device="cuda"))
