"""The public API on the CPU path (NumPy arrays, PyTorch CPU tensors) and every bad input it must reject."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import robocache
from robocache import reference


def case(rng, b=3, s=12, t=7, d=5, dtype=np.float32, tdtype=np.float64):
    src = np.sort(rng.uniform(0, 1, (b, s)), axis=1).astype(tdtype)
    tgt = rng.uniform(-0.2, 1.2, (b, t)).astype(tdtype)
    vals = rng.standard_normal((b, s, d)).astype(dtype)
    return vals, src, tgt


# --- results on the CPU path --------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_resample_numpy_matches_reference_and_keeps_dtype(rng, dtype):
    v, s, t = case(rng, dtype=dtype)
    out = robocache.resample(v, s, t)
    assert isinstance(out, np.ndarray) and out.dtype == dtype and out.shape == (3, 7, 5)
    np.testing.assert_array_equal(out, reference.resample(v, s, t).astype(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_resample_torch_cpu_tensor(rng, dtype):
    v, s, t = case(rng)
    out = robocache.resample(torch.from_numpy(v).to(dtype), torch.from_numpy(s), torch.from_numpy(t))
    assert isinstance(out, torch.Tensor) and out.dtype == dtype and out.device.type == "cpu"
    want = reference.resample(torch.from_numpy(v).to(dtype).float().numpy(), s, t)
    tol = {torch.float32: 1e-6, torch.bfloat16: 1e-2, torch.float16: 2e-3}[dtype]
    np.testing.assert_allclose(out.float().numpy(), want, rtol=tol, atol=tol)


def test_non_contiguous_inputs(rng):
    v, s, t = case(rng, b=4, s=10, t=6, d=8)
    vt = np.asfortranarray(v)[:, :, ::2]  # strided features
    st = s[::2]
    tt = t[::2]
    vv = vt[::2]
    out = robocache.resample(vv, st, tt)
    np.testing.assert_array_equal(out, reference.resample(np.ascontiguousarray(vv), st, tt).astype(np.float32))
    tv = torch.from_numpy(v).transpose(1, 2).contiguous().transpose(1, 2)  # same values, other strides
    assert not tv.is_contiguous()
    np.testing.assert_array_equal(robocache.resample(tv, torch.from_numpy(s), torch.from_numpy(t)).numpy(),
                                  robocache.resample(v, s, t))


def test_fuse_and_voxelize_numpy(rng):
    streams = [case(rng, b=2, s=s, d=d)[:2] for s, d in ((5, 3), (40, 2), (13, 7))]
    tgt = rng.uniform(0, 1, (2, 9))
    out = robocache.fuse(streams, tgt)
    assert out.shape == (2, 9, 12) and out.dtype == np.float32
    np.testing.assert_array_equal(out, reference.fuse(streams, tgt).astype(np.float32))
    pts = rng.uniform(-1, 1, (2, 50, 3)).astype(np.float32)
    feats = rng.standard_normal((2, 50, 4)).astype(np.float32)
    bounds = ((-1, -1, -1), (1, 1, 1))
    c = robocache.voxelize(pts, None, (3, 3, 3), bounds, "count")
    assert c.dtype == np.int32 and c.shape == (2, 3, 3, 3) and c.sum() == 100
    o = robocache.voxelize(pts, None, (3, 3, 3), bounds, "occupancy")
    assert o.dtype == np.bool_ and np.array_equal(o, c > 0)
    m = robocache.voxelize(pts, feats, (3, 3, 3), bounds, "mean")
    assert m.dtype == np.float32 and m.shape == (2, 3, 3, 3, 4)
    np.testing.assert_allclose(m, reference.voxelize(pts, feats, (3, 3, 3), bounds, "mean"), rtol=1e-6)
    assert robocache.voxelize(np.zeros((1, 0, 3), np.float32), None, (2, 2, 2), bounds).sum() == 0


# --- bad input: a clear TypeError/ValueError naming the argument ----------------------------------

def bad(exc, match, fn, *args, **kw):
    with pytest.raises(exc, match=match):
        fn(*args, **kw)


def test_resample_bad_ranks_and_shapes(rng):
    v, s, t = case(rng)
    bad(ValueError, r"values must have 3 dimensions", robocache.resample, v[0], s, t)
    bad(ValueError, r"src_times must have 2 dimensions", robocache.resample, v, s[0], t)
    bad(ValueError, r"tgt_times must have 2 dimensions", robocache.resample, v, s, t[..., None])
    bad(ValueError, r"src_times must have shape \[B, S\]", robocache.resample, v, s[:2], t)
    bad(ValueError, r"src_times must have shape \[B, S\]", robocache.resample, v, s[:, :5], t)
    bad(ValueError, r"tgt_times must have batch B = 3", robocache.resample, v, s, t[:2])


def test_resample_empty_sizes(rng):
    v, s, t = case(rng)
    bad(ValueError, r"B \(batch\) must be at least 1", robocache.resample, v[:0], s[:0], t[:0])
    bad(ValueError, r"S \(source length\) must be at least 1", robocache.resample, v[:, :0], s[:, :0], t)
    bad(ValueError, r"D \(features\) must be at least 1", robocache.resample, v[:, :, :0], s, t)
    bad(ValueError, r"T \(target length\) must be at least 1", robocache.resample, v, s, t[:, :0])


def test_resample_bad_dtypes(rng):
    v, s, t = case(rng)
    bad(TypeError, r"src_times has dtype int64; times must be float32 or float64", robocache.resample,
        v, (s * 1000).astype(np.int64), t)
    bad(TypeError, r"all time arrays must share one dtype", robocache.resample, v, s.astype(np.float32), t)
    bad(TypeError, r"values has dtype int32", robocache.resample, v.astype(np.int32), s, t)
    bad(TypeError, r"values has dtype complex64", robocache.resample, v.astype(np.complex64), s, t)


def test_resample_bad_kinds_and_devices(rng):
    v, s, t = case(rng)
    bad(TypeError, r"values must be a NumPy array, a CuPy array or a PyTorch tensor, got list",
        robocache.resample, v.tolist(), s, t)
    bad(TypeError, r"mixed kinds: values is a numpy array but src_times is a torch array",
        robocache.resample, v, torch.from_numpy(s), t)
    tv, ts, tt = (torch.from_numpy(x) for x in (v, s, t))
    bad(ValueError, r"different devices: values is on cpu but tgt_times is on meta",
        robocache.resample, tv, ts, tt.to("meta"))
    bad(ValueError, r"on device 'meta'", robocache.resample, tv.to("meta"), ts.to("meta"), tt.to("meta"))


def test_resample_decreasing_or_nan_source_times(rng):
    v, s, t = case(rng)
    s2 = s.copy()
    s2[1, [3, 4]] = s2[1, [4, 3]]
    bad(ValueError, r"src_times must be non-decreasing", robocache.resample, v, s2, t)
    s3 = s.copy()
    s3[0, 5] = np.nan
    bad(ValueError, r"src_times must be non-decreasing along each row and free of NaN", robocache.resample, v, s3, t)


def test_fuse_bad_inputs(rng):
    v, s, t = case(rng)
    bad(TypeError, r"streams must be a list of \(values", robocache.fuse, v, t)
    bad(ValueError, r"streams is empty", robocache.fuse, [], t)
    bad(TypeError, r"streams\[1\] must be a \(values, times\) pair", robocache.fuse, [(v, s), (v,)], t)
    bad(ValueError, r"streams\[1\].values has batch 2 but tgt_times has batch 3", robocache.fuse,
        [(v, s), (v[:2], s[:2])], t)
    bad(ValueError, r"streams\[0\].times must have shape \(3, 12\)", robocache.fuse, [(v, s[:, :4])], t)
    bad(TypeError, r"all streams must share one values dtype", robocache.fuse,
        [(v, s), (v.astype(np.float16), s)], t)
    bad(TypeError, r"all time arrays must share one dtype", robocache.fuse, [(v, s.astype(np.float32))], t)
    bad(ValueError, r"streams\[0\].values must have 3 dimensions", robocache.fuse, [(v[0], s)], t)
    bad(TypeError, r"mixed kinds", robocache.fuse, [(torch.from_numpy(v), torch.from_numpy(s))], t)
    s2 = s.copy()
    s2[0] = s2[0, ::-1]
    bad(ValueError, r"streams\[0\].times must be non-decreasing", robocache.fuse, [(v, s2)], t)
    # an explicit kernel version runs as asked or says why (v2/v3's stream table holds 16); the best version
    # (no _version) and v1 take any number
    many = [(v, s)] * 17
    bad(ValueError, r"kernel version v2 takes at most 16 streams, got 17", robocache.fuse, many, t, _version="v2")
    assert robocache.fuse(many, t).shape == robocache.fuse(many, t, _version="v1").shape == (3, t.shape[1], 17 * v.shape[2])


def test_voxelize_bad_inputs(rng):
    pts = rng.uniform(-1, 1, (2, 10, 3)).astype(np.float32)
    f = rng.standard_normal((2, 10, 4)).astype(np.float32)
    bd = ((-1, -1, -1), (1, 1, 1))
    vz = robocache.voxelize
    bad(ValueError, r"points must have shape \[B, N, 3\]", vz, pts[..., :2], None, (2, 2, 2), bd)
    bad(ValueError, r"points must have 3 dimensions", vz, pts[0], None, (2, 2, 2), bd)
    bad(ValueError, r"B \(batch\) must be at least 1", vz, pts[:0], None, (2, 2, 2), bd)
    bad(ValueError, r"grid size along y must be at least 1", vz, pts, None, (2, 0, 2), bd)
    bad(ValueError, r"grid size along z must be at least 1", vz, pts, None, (2, 2, -3), bd)
    bad(TypeError, r"grid must be three integers", vz, pts, None, (2, 2), bd)
    bad(TypeError, r"grid size along x must be an integer", vz, pts, None, (2.5, 2, 2), bd)
    bad(ValueError, r"bounds must be finite", vz, pts, None, (2, 2, 2), ((-1, -np.inf, -1), (1, 1, 1)))
    bad(ValueError, r"bounds must be finite", vz, pts, None, (2, 2, 2), ((-1, np.nan, -1), (1, 1, 1)))
    bad(ValueError, r"lower < upper", vz, pts, None, (2, 2, 2), ((1, -1, -1), (1, 1, 1)))
    bad(ValueError, r"lower < upper", vz, pts, None, (2, 2, 2), ((-1, 2, -1), (1, 1, 1)))
    bad(ValueError, r"bounds must have shape \(2, 3\)", vz, pts, None, (2, 2, 2), (-1, 1))
    bad(ValueError, r"mode must be one of", vz, pts, None, (2, 2, 2), bd, "max")
    bad(ValueError, r"mode='mean' averages features", vz, pts, None, (2, 2, 2), bd, "mean")
    bad(ValueError, r"features must have shape \[B, N, C\]", vz, pts, f[:, :5], (2, 2, 2), bd, "mean")
    bad(TypeError, r"features have dtype float16 but points have float32", vz, pts, f.astype(np.float16),
        (2, 2, 2), bd, "mean")
    bad(TypeError, r"points has dtype int32", vz, pts.astype(np.int32), None, (2, 2, 2), bd)
    bad(TypeError, r"mixed kinds", vz, pts, torch.from_numpy(f), (2, 2, 2), bd, "mean")
    bad(ValueError, r"more than the limit", vz, pts, None, (10**5, 10**5, 10**5), bd)


def test_import_has_no_side_effects():
    """Importing robocache imports neither cupy nor torch and compiles nothing."""
    import subprocess
    import sys

    code = ("import sys, robocache; import robocache.providers; "
            "print(sorted(m for m in ('cupy', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_out_argument_cpu(rng):
    v, s, t = case(rng)
    out = np.full((3, 7, 5), np.nan, np.float32)
    assert robocache.resample(v, s, t, out=out) is out
    np.testing.assert_array_equal(out, robocache.resample(v, s, t))
    bad(ValueError, r"out must have shape \(3, 7, 5\)", robocache.resample, v, s, t, out=out[:2])
    bad(TypeError, r"out must have dtype float32, got float64", robocache.resample, v, s, t,
        out=out.astype(np.float64))
    bad(ValueError, r"out must be C-contiguous", robocache.resample, v, s, t,
        out=np.full((3, 5, 7), np.nan, np.float32).transpose(0, 2, 1))
    bad(TypeError, r"mixed kinds", robocache.resample, v, s, t, out=torch.from_numpy(out))
    o2 = np.full((3, 7, 10), np.nan, np.float32)
    assert robocache.fuse([(v, s), (v, s)], t, out=o2) is o2
    np.testing.assert_array_equal(o2[..., 5:], out)
    pts = rng.uniform(-1, 1, (2, 50, 3)).astype(np.float32)
    oc = np.full((2, 2, 2, 2), -7, np.int32)
    robocache.voxelize(pts, None, (2, 2, 2), ((-1, -1, -1), (1, 1, 1)), out=oc)
    assert oc.sum() == 100
