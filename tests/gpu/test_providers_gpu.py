"""GPU peers against the NumPy reference: torch eager and torch.compile on CUDA tensors, CuPy on CuPy arrays.

Skipped without a CUDA device. Inputs are random (seeded), created in the tested
dtype on the device; the reference runs on exactly those values read back as
float64, so the tolerance covers only the peer's float32 arithmetic and the final
rounding to the output dtype.
"""
from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest

from robocache import providers, reference


def _cuda_present() -> bool:
    """A CUDA device through torch or CuPy (importing cupy alone proves nothing)."""
    try:
        import torch

        if torch.cuda.is_available():
            return True
    except Exception:  # noqa: BLE001 - a broken torch is just "no device through torch"
        pass
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no driver / no cupy
        return False


pytestmark = pytest.mark.skipif(not _cuda_present(), reason="no CUDA GPU: GPU provider tests not run")

# the GPU grid's peers, from the provider table (torch_compile, torch_compile@max-autotune, torch_eager, cupy)
PEERS = [n for n in providers.names("gpu") if providers.role(n) == "peer"]
# (rtol, atol) against the float64 reference; see tests/test_providers.py for the reasoning.
TOL = {"float32": (1e-5, 2e-6), "float16": (1e-3, 1e-3), "bfloat16": (8e-3, 8e-3)}
DTYPES = list(TOL)
GRID = (8, 6, 5)
BOUNDS = ((-1.0, -2.0, -0.5), (1.0, 2.0, 1.5))


def _rng(*key: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


class _Lib:
    """How one peer's inputs are made on the device and read back for the reference."""

    def __init__(self, peer: str):
        self.peer = peer
        if peer == "cupy":
            self.xp = pytest.importorskip("cupy")
            from robocache.providers import cupy_provider as mod
        else:
            self.xp = pytest.importorskip("torch")
            if not self.xp.cuda.is_available():
                pytest.skip("torch has no CUDA device here")
            if peer == "torch_eager":
                from robocache.providers import torch_eager as mod
            elif peer == "torch_compile":
                from robocache.providers import torch_compile as mod
            else:  # another compile mode: the registered provider's ops
                import types

                mod = types.SimpleNamespace(**providers.get(peer).ops)
            if peer.startswith("torch_compile"):
                # A fresh compile per test: keeps each shape under dynamo's recompile limit
                # (past it torch silently runs eager, and this test would not test compile).
                self.xp._dynamo.reset()
                from torch._dynamo.utils import counters

                counters.clear()
        self.mod = mod

    def check_compiled(self) -> None:
        """For torch_compile (every mode): the op ran as compiled graphs without graph breaks (not eager)."""
        if self.peer.startswith("torch_compile"):
            from torch._dynamo.utils import counters

            assert counters["stats"]["unique_graphs"] >= 1, dict(counters["stats"])
            assert not counters["graph_break"], dict(counters["graph_break"])

    def dev(self, x: np.ndarray, dtype: str) -> Any:
        """NumPy -> device array of ``dtype`` (rounded to it on the device)."""
        if self.peer == "cupy":
            from robocache.providers import cupy_provider

            try:
                dt = cupy_provider.value_dtype(dtype)
            except TypeError as e:
                pytest.skip(str(e))
            arr = self.xp.asarray(np.ascontiguousarray(x))
            if dtype == "bfloat16":  # round through float32, as torch's .to(bfloat16) does
                arr = arr.astype(self.xp.float32)
            return arr.astype(dt)
        return self.xp.from_numpy(np.ascontiguousarray(x)).to("cuda").to(getattr(self.xp, dtype))

    def host(self, x: Any) -> np.ndarray:
        """Device array -> float64 NumPy (bool and int stay as they are)."""
        if self.peer == "cupy":
            if x.dtype.kind == "V" or x.dtype.name == "bfloat16":
                x = x.astype(self.xp.float32)
            out = self.xp.asnumpy(x)
        else:
            if x.is_floating_point():
                x = x.to(self.xp.float64)
            out = x.cpu().numpy()
        return out.astype(np.float64) if out.dtype.kind == "f" else out

    def dtype_name(self, x: Any) -> str:
        return x.dtype.name if self.peer == "cupy" else str(x.dtype).removeprefix("torch.")


def _check(out: np.ndarray, ref: np.ndarray, dtype: str) -> None:
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol, equal_nan=True)


def _times(rng: np.random.Generator, b: int, s: int, rate: float = 30.0) -> np.ndarray:
    dt = rng.uniform(0.5, 1.5, size=(b, s)) / rate
    return rng.uniform(0.01, 0.1, size=(b, 1)) + np.cumsum(dt, axis=1)


def _targets(rng: np.random.Generator, src: np.ndarray, t: int) -> np.ndarray:
    lo, hi = src[:, :1], src[:, -1:]
    span = hi - lo + 1e-3
    tgt = rng.uniform(lo - 0.2 * span, hi + 0.2 * span, size=(src.shape[0], t))
    hits = rng.integers(0, src.shape[1], size=(src.shape[0], t))
    return np.where(rng.random((src.shape[0], t)) < 0.2, np.take_along_axis(src, hits, axis=1), tgt)


# (B, S, T, D): general; B=1 and D=1 (CuPy's cupy.interp path); D=270 with S=2
SHAPES = [(3, 50, 40, 7), (1, 20, 17, 1), (2, 2, 29, 270)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "B{}_S{}_T{}_D{}".format(*s))
@pytest.mark.parametrize("tdtype", ["float32", "float64"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("peer", PEERS)
def test_resample(peer, dtype, tdtype, shape):
    lib = _Lib(peer)
    b, s, t, d = shape
    rng = _rng(dtype, tdtype, shape)
    src_np = _times(rng, b, s)
    values = lib.dev(rng.standard_normal((b, s, d)), dtype)
    src, tgt = lib.dev(src_np, tdtype), lib.dev(_targets(rng, src_np, t), tdtype)
    out = lib.mod.resample(values, src, tgt)
    lib.check_compiled()
    assert tuple(out.shape) == (b, t, d) and lib.dtype_name(out) == dtype
    _check(lib.host(out), reference.resample(lib.host(values), lib.host(src), lib.host(tgt)), dtype)


@pytest.mark.parametrize("d", [1, 3], ids=["D1", "D3"])  # D=1 with B=1 is cupy.interp
@pytest.mark.parametrize("peer", PEERS)
def test_resample_edges(peer, d):
    lib = _Lib(peer)
    src = lib.dev(np.array([[0.0, 0.0, 1.0, 1.0, 2.0, 3.0, 3.0]]), "float64")
    tgt = lib.dev(np.array([[-1.0, 0.0, 0.5, 1.0, 1.5, 2.5, 3.0, 4.0, np.nan]]), "float64")
    rng = _rng(peer, d)
    vnp = rng.uniform(1.0, 2.0, size=(1, 7, d)) * rng.choice([-1, 1], size=(1, 7, d))
    values = lib.dev(vnp, "float32")
    out = lib.host(lib.mod.resample(values, src, tgt))
    ref = reference.resample(lib.host(values), lib.host(src), lib.host(tgt))
    _check(out, ref, "float32")
    v = lib.host(values)[0]
    # repeated source times: the last sample with that time wins
    np.testing.assert_array_equal(out[0, [0, 1, 3, 6, 7]], v[[0, 1, 3, 6, 6]])
    assert np.isnan(out[0, 8]).all() and not np.isnan(out[0, :8]).any()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("peer", PEERS)
def test_fuse(peer, dtype):
    lib = _Lib(peer)
    rng = _rng(peer, dtype)
    b, t = 2, 50
    streams, ref_streams = [], []
    for rate, d in ((30.0, 7), (100.0, 12), (333.0, 3)):  # 30/100/333 Hz over one second
        v = lib.dev(rng.standard_normal((b, int(rate), d)), dtype)
        ts = lib.dev(_times(rng, b, int(rate), rate=rate), "float64")
        streams.append((v, ts))
        ref_streams.append((lib.host(v), lib.host(ts)))
    tgt = lib.dev(rng.uniform(-0.05, 1.05, size=(b, t)), "float64")
    out = lib.mod.fuse(streams, tgt)
    lib.check_compiled()
    assert tuple(out.shape) == (b, t, 22) and lib.dtype_name(out) == dtype
    _check(lib.host(out), reference.fuse(ref_streams, lib.host(tgt)), dtype)


@pytest.mark.parametrize("mode", ["count", "occupancy", "mean"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("peer", PEERS)
def test_voxelize(peer, dtype, mode):
    lib = _Lib(peer)
    rng = _rng(peer, dtype, mode)
    b, n, c = 3, 2000, 4
    lo, hi = np.array(BOUNDS[0]), np.array(BOUNDS[1])
    pts_np = rng.uniform(lo - 0.2 * (hi - lo), hi + 0.2 * (hi - lo), size=(b, n, 3))
    pts_np[:, :4] = [[np.nan, 0, 0], [0, np.inf, 0], [0, 0, -np.inf], lo]
    pts_np[:, 4] = np.nextafter(hi.astype(np.float32), np.float32(-np.inf))  # index clamped to g - 1
    feats_np = rng.uniform(0.5, 2.0, size=(b, n, c)) * rng.choice([-1, 1], size=(b, n, c))
    pts, feats = lib.dev(pts_np, dtype), lib.dev(feats_np, dtype)
    out = lib.mod.voxelize(pts, feats, GRID, BOUNDS, mode)
    lib.check_compiled()
    ref = reference.voxelize(lib.host(pts), lib.host(feats), GRID, BOUNDS, mode)
    if mode == "mean":
        assert tuple(out.shape) == (b, *GRID, c) and lib.dtype_name(out) == dtype
        _check(lib.host(out), ref, dtype)
    else:
        assert tuple(out.shape) == (b, *GRID)
        assert lib.dtype_name(out) == ("int32" if mode == "count" else "bool")
        np.testing.assert_array_equal(lib.host(out), ref)


# ---- the CuPy peer's batched search on the GPU: the same code as the CPU tests run with NumPy ----------

@pytest.mark.parametrize("tdtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(64, 40, 33, 5), (3, 1, 7, 2), (5, 9, 1, 3), (1, 30, 20, 1)],
                         ids=lambda s: "B{}_S{}_T{}_D{}".format(*s))
def test_cupy_batched_search_edges(shape, tdtype):
    """Repeated source times, targets outside the range, on samples, NaN and +-inf, S=1, T=1: CuPy's
    complex-key search agrees with NumPy running the same code, and with the reference."""
    cupy = pytest.importorskip("cupy")
    from robocache.providers import cupy_provider

    b, s, t, d = shape
    rng = _rng("cupy-edges", shape, tdtype)
    src = _times(rng, b, s)
    if s > 2:
        idx = np.maximum.accumulate(np.where(rng.random((b, s)) < 0.25, 0, np.arange(s)), axis=1)
        src = np.take_along_axis(src, idx, axis=1)  # runs of repeated times
    tgt = _targets(rng, src, t)
    if t > 3:
        tgt[:, :3] = [np.nan, np.inf, -np.inf]
    src, tgt = src.astype(tdtype), tgt.astype(tdtype)
    v = rng.standard_normal((b, s, d)).astype(np.float32)
    got = cupy.asnumpy(cupy_provider.resample_xp(cupy, cupy.asarray(v), cupy.asarray(src), cupy.asarray(tgt)))
    np.testing.assert_allclose(got, cupy_provider.resample_xp(np, v, src, tgt), rtol=1e-6, atol=1e-7,
                               equal_nan=True)
    _check(got, reference.resample(v.astype(np.float64), src.astype(np.float64), tgt.astype(np.float64)),
           "float32")


def test_cupy_batched_search_exact_at_epoch_seconds():
    """float64 epoch times one ulp apart in 4096 rows: the (row, time) keys keep every bracket exact."""
    cupy = pytest.importorskip("cupy")
    from robocache.providers import cupy_provider

    b = 4096
    x = 1.7e9 + np.arange(b, dtype=np.float64)[:, None] * 1e-3
    up = np.nextafter(x, np.inf)
    src = np.concatenate([x, up, np.nextafter(up, np.inf)], axis=1)
    tgt = np.concatenate([x, up, src[:, 2:]], axis=1)
    v = np.random.default_rng(2).standard_normal((b, 3, 2)).astype(np.float32)
    got = cupy.asnumpy(cupy_provider.resample(cupy.asarray(v), cupy.asarray(src), cupy.asarray(tgt)))
    np.testing.assert_array_equal(got, v)  # each target sits on a sample: exactly that sample


def test_cupy_resample_is_one_search():
    """The batched path launches one searchsorted for the whole batch, not one per row."""
    cupy = pytest.importorskip("cupy")
    from unittest import mock

    from robocache.providers import cupy_provider

    rng = _rng("cupy-one-search")
    src = _times(rng, 256, 20)
    v = cupy.asarray(rng.standard_normal((256, 20, 4)).astype(np.float32))
    with mock.patch.object(cupy, "searchsorted", wraps=cupy.searchsorted) as spy:
        cupy_provider.resample(v, cupy.asarray(src), cupy.asarray(_targets(rng, src, 10)))
    assert spy.call_count == 1
