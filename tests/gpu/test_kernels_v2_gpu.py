"""Kernel version 2 edge cases on the GPU: every vector width, misaligned inputs, the plan cache, wide rows.

v2 picks a vector width (16, 8, 4 bytes or one element) per stream from the row size, the column offset
and the pointers, and caches a validated launch plan per signature. These tests drive each choice on
random inputs (never zeros) against the NumPy reference and poison every output first. Every version
runs (the journey providers robocache@v1, @v2, ...). Skipped, loudly, without a GPU (conftest.py).
"""
from __future__ import annotations

import sys

import numpy as np
import pytest

import robocache
from robocache import reference
from robocache._versions import VERSIONS
from robocache.fuse import FUSE2_MAX

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("PyTorch sees no CUDA device", allow_module_level=True)

TOL = {torch.float32: 2e-6, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _times(rng, b, s, ties=False):
    t = np.sort(rng.uniform(0.0, 1.0, (b, s)), axis=1)
    if ties:
        t = np.sort(np.round(t * 8) / 8, axis=1)
    return t


def _check(got, want, dtype, what):
    g = got.double().cpu().numpy()
    err = np.abs(g - want) / np.maximum(1.0, np.abs(want))
    assert np.array_equal(np.isnan(g), np.isnan(want)), f"{what}: NaN pattern differs"
    worst = float(np.nanmax(err, initial=0.0))
    assert worst <= TOL[dtype], f"{what}: max rel err {worst:.3g} > {TOL[dtype]}"


@pytest.mark.parametrize("version", VERSIONS["resample"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 24, 31, 33, 64, 100, 1024])
def test_resample_every_width(version, dtype, d):
    rng = np.random.default_rng(d)
    b, s, t = 9, 23, 17
    vals = rng.standard_normal((b, s, d))
    src = _times(rng, b, s, ties=d % 2 == 1)
    tgt = rng.uniform(-0.2, 1.2, (b, t))  # unsorted, outside the range on both sides
    tgt[0, 0] = np.nan
    v = torch.from_numpy(vals).cuda().to(dtype)
    out = torch.full((b, t, d), float("nan"), device="cuda", dtype=dtype)
    robocache.resample(v, torch.from_numpy(src).cuda(), torch.from_numpy(tgt).cuda(), out=out, _version=version)
    want = reference.resample(v.double().cpu().numpy(), src, tgt)
    _check(out, want, dtype, f"{version} D={d}")


@pytest.mark.parametrize("version", VERSIONS["resample"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("offset", [1, 2, 3, 5])
def test_resample_misaligned_slices(version, dtype, offset):
    """Sliced inputs and outputs start off the 16-byte grid: v2 must fall back to narrower accesses."""
    rng = np.random.default_rng(offset)
    b, s, t, d = 6, 40, 21, 16
    big = torch.from_numpy(rng.standard_normal(b * s * d + offset)).cuda().to(dtype)
    v = big[offset:].view(b, s, d)
    src = _times(rng, b, s)
    tbig = torch.from_numpy(np.concatenate([[0.0] * offset, rng.uniform(0, 1, b * t)])).cuda().float()
    tg = tbig[offset:].view(b, t)
    obig = torch.full((b * t * d + offset,), float("nan"), device="cuda", dtype=dtype)
    out = obig[offset:].view(b, t, d)
    robocache.resample(v, torch.from_numpy(src).cuda().float(), tg, out=out, _version=version)
    want = reference.resample(v.double().cpu().numpy(), src.astype(np.float32).astype(np.float64),
                              tg.double().cpu().numpy())
    _check(out, want, dtype, f"{version} offset {offset}")


@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (1, 1, 7, 3), (65536, 2, 1, 1), (3, 300, 1, 5), (2, 3, 4000, 1)])
def test_resample_extreme_shapes(shape):
    b, s, t, d = shape
    rng = np.random.default_rng(sum(shape))
    vals, src, tgt = rng.standard_normal((b, s, d)), _times(rng, b, s), rng.uniform(-0.1, 1.1, (b, t))
    got = robocache.resample(torch.from_numpy(vals).cuda().float(), torch.from_numpy(src).cuda(),
                             torch.from_numpy(tgt).cuda())
    _check(got, reference.resample(vals.astype(np.float32).astype(np.float64), src, tgt), torch.float32, str(shape))


def test_plan_cache_uses_new_data_each_call():
    """A cached plan launches on the pointers of each call, never on the first call's data."""
    rng = np.random.default_rng(7)
    b, s, t, d = 16, 30, 12, 8
    src = torch.from_numpy(_times(rng, b, s)).cuda()
    tgt = torch.from_numpy(rng.uniform(0, 1, (b, t))).cuda()
    for i in range(3):
        vals = rng.standard_normal((b, s, d))
        got = robocache.resample(torch.from_numpy(vals).cuda().float(), src, tgt)
        _check(got, reference.resample(vals.astype(np.float32).astype(np.float64), src.cpu().numpy(),
                                       tgt.cpu().numpy()), torch.float32, f"call {i}")


def test_recent_plans_behind_the_tensor_check(monkeypatch):
    """The tensor-check path (robocache/_launch.py PlanCache.recent): bound on this torch, taken by repeated calls
    (counted), and every call right where only the check could tell plans apart: a tensor passed twice (fuse onto
    a stream's own times: the signature path, the check still bound and passed by distinct tensors), another
    alignment (a storage offset of one
    element), strides, requires_grad, more shapes in turn than it keeps, another number of fuse streams, CuPy arrays
    after torch."""
    from robocache import _launch as L

    rs, fu = sys.modules["robocache.resample"], sys.modules["robocache.fuse"]  # the modules (the package has functions)
    rng = np.random.default_rng(29)
    rs._PLANS.clear()
    fu._PLANS.clear()
    monkeypatch.setattr(L, "_TENSOR_GUARDS", None)
    taken = {"resample": 0, "fuse": 0}
    for mod, op in ((rs, "resample"), (fu, "fuse")):
        def counted(self, *a, _real=mod._Plan.launch, _op=op):
            taken[_op] += 1
            return _real(self, *a)
        monkeypatch.setattr(mod._Plan, "launch", counted)

    b, t = 6, 11  # fuse onto stream 0's own times, twice: a tensor passed twice never gets a check
    v0, tt = rng.standard_normal((b, t, 3)).astype(np.float32), _times(rng, b, t)
    v1, s1 = rng.standard_normal((b, 9, 2)).astype(np.float32), _times(rng, b, 9)
    tv0, ttt, tv1, ts1 = (torch.from_numpy(x).cuda() for x in (v0, tt, v1, s1))
    for _ in range(2):
        got = robocache.fuse([(tv0, ttt), (tv1, ts1)], ttt)
        _check(got, reference.fuse([(v0.astype(np.float64), tt), (v1.astype(np.float64), s1)], tt), torch.float32,
               "fuse onto a stream's own times")
    # repeated tensors fail the check (the signature path); the plan's check, built from a view of the repeated
    # one, passes the same call with distinct tensors
    assert len(fu._PLANS.recent) == 1 and L._TENSOR_GUARDS not in (None, False) and taken["fuse"] == 0
    got = robocache.fuse([(tv0, ttt.clone()), (tv1, ts1)], ttt)
    _check(got, reference.fuse([(v0.astype(np.float64), tt), (v1.astype(np.float64), s1)], tt), torch.float32,
           "fuse onto a copy of a stream's times")
    assert taken["fuse"] == 1

    def one(b, s, t, d, *, offset=0, grad=False, strided=False):
        vals, src, tgt = rng.standard_normal((b, s, d)).astype(np.float32), _times(rng, b, s), rng.uniform(0, 1, (b, t))
        if strided:  # [b, s, d] with d-major strides
            tv = torch.from_numpy(np.ascontiguousarray(vals.transpose(0, 2, 1))).cuda().transpose(1, 2)
        else:
            buf = torch.zeros(vals.size + offset, device="cuda")
            buf[offset:] = torch.from_numpy(vals.ravel()).cuda()
            tv = buf[offset:].view(b, s, d)
        tv.requires_grad_(grad)
        got = robocache.resample(tv, torch.from_numpy(src).cuda(), torch.from_numpy(tgt).cuda())
        _check(got.detach(), reference.resample(vals.astype(np.float64), src, tgt), torch.float32,
               f"{(b, s, t, d)} offset {offset} grad {grad} strided {strided}")

    for _ in range(3):
        one(8, 40, 20, 4)
    assert rs._PLANS.recent and rs._PLANS.recent[0][0] is not None, "the tensor check is not bound on this torch"
    assert taken["resample"] == 2, "repeated calls did not take the tensor-check path"
    for kw in ({"offset": 1}, {}, {"offset": 2}, {"grad": True}, {"strided": True}, {}):
        one(8, 40, 20, 4, **kw)
    shapes = [(8, 40, 20, 4), (3, 17, 9, 5), (8, 40, 21, 4), (5, 6, 7, 1), (8, 40, 20, 8), (2, 3, 4, 2)]
    for _ in range(2):
        for shape in shapes:  # more shapes than RECENT, in turn
            one(*shape)
    assert len(rs._PLANS.recent) <= L.RECENT

    def streams_of(widths, b, t):
        streams, np_streams = [], []
        for j, d in enumerate(widths):
            v, s = rng.standard_normal((b, 5 + 3 * j, d)).astype(np.float32), _times(rng, b, 5 + 3 * j)
            streams.append((torch.from_numpy(v).cuda(), torch.from_numpy(s).cuda()))
            np_streams.append((v.astype(np.float64), s))
        tgt = rng.uniform(0, 1, (b, t))
        return streams, np_streams, tgt

    for widths in ([4, 3], [4, 3], [4, 3, 2], [4, 3], [4], [4, 3, 2]):
        streams, np_streams, tgt = streams_of(widths, 6, 11)
        for as_list in (False, True):
            got = robocache.fuse([list(p) for p in streams] if as_list else streams, torch.from_numpy(tgt).cuda())
            _check(got, reference.fuse(np_streams, tgt), torch.float32, f"fuse {widths} list {as_list}")
    assert fu._PLANS.recent and fu._PLANS.recent[0][0] is not None and taken["fuse"] >= 7
    cupy = pytest.importorskip("cupy")
    vals, src, tgt = rng.standard_normal((8, 40, 4)).astype(np.float32), _times(rng, 8, 40), rng.uniform(0, 1, (8, 20))
    got = robocache.resample(cupy.asarray(vals), cupy.asarray(src), cupy.asarray(tgt))
    _check(torch.from_numpy(cupy.asnumpy(got)), reference.resample(vals.astype(np.float64), src, tgt), torch.float32,
           "cupy after torch")


def test_plan_cache_cupy_and_torch_streams():
    """The fast path launches on the caller's current stream (torch side stream, CuPy stream)."""
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(3)
    vals, src, tgt = rng.standard_normal((4, 10, 6)), _times(rng, 4, 10), rng.uniform(0, 1, (4, 5))
    want = reference.resample(vals.astype(np.float32).astype(np.float64), src, tgt)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        tv, ts, tt = (torch.from_numpy(x).cuda() for x in (vals.astype(np.float32), src, tgt))
        for _ in range(2):  # second call takes the cached plan
            got = robocache.resample(tv, ts, tt)
    side.synchronize()
    _check(got, want, torch.float32, "torch side stream")
    cs = cupy.cuda.Stream(non_blocking=True)
    with cs:
        cv, csrc, ctgt = cupy.asarray(vals.astype(np.float32)), cupy.asarray(src), cupy.asarray(tgt)
        for _ in range(2):
            gc = robocache.resample(cv, csrc, ctgt)
    cs.synchronize()
    _check(torch.from_numpy(cupy.asnumpy(gc)), want, torch.float32, "cupy stream")


@pytest.mark.parametrize("version", VERSIONS["fuse"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fuse_mixed_widths_and_many_streams(version, dtype):
    """Streams whose widths and column offsets give every vector width, and more streams than v2's table."""
    rng = np.random.default_rng(11)
    b, t = 7, 19
    widths = [256, 14, 6, 1, 8, 3, 16, 5, 32, 2, 9, 4, 7, 12, 20, 11, 13, 1, 2]  # 19 streams > 16
    for k in (3, len(widths)):
        streams, np_streams = [], []
        for j, d in enumerate(widths[:k]):
            s = 5 + 7 * j
            vals, ts = rng.standard_normal((b, s, d)), _times(rng, b, s, ties=j % 3 == 0)
            v = torch.from_numpy(vals).cuda().to(dtype)
            streams.append((v, torch.from_numpy(ts).cuda().float()))
            np_streams.append((v.double().cpu().numpy(), ts.astype(np.float32).astype(np.float64)))
        tgt = rng.uniform(-0.1, 1.1, (b, t))
        out = torch.full((b, t, sum(widths[:k])), float("nan"), device="cuda", dtype=dtype)
        if version != "v1" and k > FUSE2_MAX:
            # an explicit v2/v3 never falls back to v1 silently: it says why, and the best version takes them
            with pytest.raises(ValueError, match="at most 16 streams"):
                robocache.fuse(streams, torch.from_numpy(tgt).cuda().float(), out=out, _version=version)
            robocache.fuse(streams, torch.from_numpy(tgt).cuda().float(), out=out)
        else:
            robocache.fuse(streams, torch.from_numpy(tgt).cuda().float(), out=out, _version=version)
        want = reference.fuse(np_streams, tgt.astype(np.float32).astype(np.float64))
        _check(out, want, dtype, f"{version} {k} streams")


@pytest.mark.parametrize("version", VERSIONS["voxelize"])
@pytest.mark.parametrize("mode", ["count", "occupancy", "mean"])
def test_voxelize_hot_voxels(version, mode):
    """Every point of a warp in one voxel (the warp-aggregated atomics' worst and best case) and a mix."""
    rng = np.random.default_rng(5)
    b, n, c = 3, 5000, 5
    pts = rng.uniform(-1, 1, (b, n, 3))
    pts[:, : n // 2] = 0.01  # half the cloud in one voxel
    pts[1, 7] = np.nan
    feats = rng.standard_normal((b, n, c))
    p = torch.from_numpy(pts).cuda().float()
    f = torch.from_numpy(feats).cuda().float() if mode == "mean" else None
    got = robocache.voxelize(p, f, (8, 8, 8), ((-1, -1, -1), (1, 1, 1)), mode, _version=version)
    want = reference.voxelize(pts.astype(np.float32).astype(np.float64),
                              feats.astype(np.float32).astype(np.float64) if f is not None else None,
                              (8, 8, 8), ((-1, -1, -1), (1, 1, 1)), mode)
    g = got.double().cpu().numpy() if mode != "occupancy" else got.cpu().numpy()
    if mode == "mean":
        assert np.allclose(g, want, rtol=1e-4, atol=1e-5), f"{version} mean"
    else:
        assert np.array_equal(g, want), f"{version} {mode}"


@pytest.mark.parametrize("version", VERSIONS["resample"])
@pytest.mark.parametrize("rows", ["exponential", "all_equal", "two_clusters", "steps", "epoch_f64"])
def test_resample_adversarial_time_rows(version, rows):
    """Rows far from uniform, where v2's guessed search starts far from the answer and gallops."""
    rng = np.random.default_rng(len(rows))
    b, s, t, d = 5, 700, 300, 3
    if rows == "exponential":
        src = np.tile(np.cumsum(np.exp(np.linspace(0, 12, s))), (b, 1))
    elif rows == "all_equal":
        src = np.full((b, s), 0.5)
    elif rows == "two_clusters":
        src = np.sort(np.concatenate([rng.uniform(0, 1e-3, (b, s // 2)), rng.uniform(1e3, 1e3 + 1e-3, (b, s - s // 2))],
                                     axis=1), axis=1)
    elif rows == "steps":
        src = np.sort(np.round(rng.uniform(0, 1, (b, s)) * 4) / 4, axis=1)
    else:
        src = 1.7e9 + np.sort(rng.uniform(0, 2, (b, s)), axis=1)
    lo, hi = src.min(), src.max()
    span = hi - lo if hi > lo else 1.0
    tgt = rng.uniform(lo - 0.1 * span, hi + 0.1 * span, (b, t))
    tgt[:, :20] = src[:, rng.integers(0, s, 20)]  # exact hits, repeated times included
    tgt[0, -1] = np.nan
    vals = rng.standard_normal((b, s, d))
    tdt = torch.float64 if rows == "epoch_f64" or rows == "exponential" else torch.float32
    st, tt = torch.from_numpy(src).cuda().to(tdt), torch.from_numpy(tgt).cuda().to(tdt)
    got = robocache.resample(torch.from_numpy(vals).cuda().float(), st, tt, _version=version)
    want = reference.resample(vals.astype(np.float32).astype(np.float64), st.double().cpu().numpy(),
                              tt.double().cpu().numpy())
    _check(got, want, torch.float32, f"{version} {rows}")


# --- voxelize mean: every channel count, aligned and misaligned outputs, exact division, launch paths ------

VOX_BOUNDS = ((-1.0, -1.0, -1.0), (1.0, 1.0, 1.0))


def _vox_cloud(rng, b, n, c, clustered):
    if clustered:  # a few blobs: many points per voxel
        pts = rng.uniform(-0.8, 0.8, (b, 4, 3))[:, rng.integers(0, 4, n)] + 0.03 * rng.standard_normal((b, n, 3))
    else:
        pts = rng.uniform(-1.1, 1.1, (b, n, 3))  # some outside
    return pts, rng.standard_normal((b, n, c))


@pytest.mark.parametrize("version", VERSIONS["voxelize"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("c", [1, 2, 3, 4, 5, 8, 16, 24, 33])
@pytest.mark.parametrize("offset", [0, 1, 3])
def test_voxelize_mean_channels_and_out_alignment(version, dtype, c, offset):
    """Every vector width of the mean pass (rows of 1-33 channels; C > 22 takes the accumulate kernel in v2
    and v3) into a poisoned caller's buffer that starts ``offset`` elements past an aligned address."""
    rng = np.random.default_rng(100 * c + offset)
    b, n, grid = 2, 3000, (6, 5, 7)
    pts, feats = _vox_cloud(rng, b, n, c, clustered=bool(c % 2))
    p = torch.from_numpy(pts).cuda().to(dtype)
    f = torch.from_numpy(feats).cuda().to(dtype)
    size = b * 6 * 5 * 7 * c
    buf = torch.empty(size + offset, dtype=dtype, device="cuda")
    buf.view(torch.uint8).fill_(255)  # NaN everywhere: an element not written fails
    out = buf[offset:].view(b, *grid, c)
    robocache.voxelize(p, f, grid, VOX_BOUNDS, "mean", out=out, _version=version)
    want = reference.voxelize(p.double().cpu().numpy(), f.double().cpu().numpy(), grid, VOX_BOUNDS, "mean")
    _check(out, want, dtype, f"{version} C={c} offset={offset}")
    # and into a buffer of its own
    _check(robocache.voxelize(p, f, grid, VOX_BOUNDS, "mean", _version=version), want, dtype, f"{version} C={c}")


@pytest.mark.parametrize("version", VERSIONS["voxelize"])
@pytest.mark.parametrize("clustered", [False, True], ids=["uniform", "clustered"])
def test_voxelize_mean_is_the_division_bit_for_bit(version, clustered):
    """Integer features sum exactly in any order, so every version's float32 mean must be float32(sum) /
    float32(count) exactly (v1/v2 divide; v3 multiplies by a reciprocal and corrects it with two fmas)."""
    rng = np.random.default_rng(11)
    b, n, c, grid = 2, 50_000, 4, (16, 16, 16)
    pts, _ = _vox_cloud(rng, b, n, c, clustered)
    feats = rng.integers(-40, 40, (b, n, c)).astype(np.float64)
    p, f = torch.from_numpy(pts).cuda().float(), torch.from_numpy(feats).cuda().float()
    got = robocache.voxelize(p, f, grid, VOX_BOUNDS, "mean", _version=version).cpu().numpy()
    p32 = pts.astype(np.float32).astype(np.float64)
    counts = reference.voxelize(p32, None, grid, VOX_BOUNDS, "count")
    sums = reference.voxelize(p32, feats, grid, VOX_BOUNDS, "mean") * counts[..., None]  # exact: small integers
    with np.errstate(invalid="ignore", divide="ignore"):
        want = np.where(counts[..., None] > 0,
                        np.round(sums).astype(np.float32) / counts[..., None].astype(np.float32), np.float32(0))
    assert counts.max() > 5 and (want != np.round(want)).any()  # non-trivial quotients
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=f"{version}")


@pytest.mark.parametrize("version", [v for v in VERSIONS["voxelize"] if v != "v1"])
@pytest.mark.parametrize("mode", ["count", "occupancy", "mean"])
@pytest.mark.parametrize("use_hash", [True, False, None], ids=["hash", "nohash", "rule"])
def test_voxelize_tuning_paths(version, mode, use_hash, monkeypatch):
    """The launch paths TUNING["vox_hash"] forces everywhere (kernel_dev.py and vox_probe.py switch them): the
    hash for count (C = 0, counts into the output) and occupancy (v3: one word reduction per distinct voxel of a
    block), the plain kernels for mean, each against the reference; small and large clouds (v3 sizes its hash
    table from the launch, and picks the hash for count and occupancy by the points per voxel when not forced)."""
    from robocache import _launch

    monkeypatch.setitem(_launch.TUNING, "vox_hash", use_hash)
    for b, n in ((1, 700), (3, 120_000)):
        rng = np.random.default_rng(b * n)
        pts, feats = _vox_cloud(rng, b, n, 3, clustered=True)
        p = torch.from_numpy(pts).cuda().float()
        f = torch.from_numpy(feats).cuda().float() if mode == "mean" else None
        got = robocache.voxelize(p, f, (20, 20, 20), VOX_BOUNDS, mode, _version=version)
        want = reference.voxelize(pts.astype(np.float32).astype(np.float64),
                                  feats.astype(np.float32).astype(np.float64) if f is not None else None,
                                  (20, 20, 20), VOX_BOUNDS, mode)
        if mode == "mean":
            _check(got, want, torch.float32, f"{version} {mode} hash={use_hash} B{b} N{n}")
        else:
            assert np.array_equal(got.cpu().numpy(), want), f"{version} {mode} hash={use_hash} B{b} N{n}"


# (version, TUNING["vox_hash"]): v1 and v2 take no hash for occupancy (v2 refuses it, v1 reads no TUNING); v3 both
OCC_PATHS = [("v1", None), ("v2", None), ("v3", True), ("v3", False)]


def occupancy_cloud_with_edges(seed: int, b: int, n: int, grid: tuple[int, int, int]) -> np.ndarray:
    """A clustered cloud whose first four voxels of row 0 and last four of row b - 1 are occupied: the grid's
    first and last 32-bit words then get a reduction, whatever the output's offset."""
    pts, _ = _vox_cloud(np.random.default_rng(seed), b, n, 1, clustered=True)
    gx, gy, gz = grid

    def centre(k: int, g: int) -> float:
        return -1.0 + (k + 0.5) * 2.0 / g

    for z in range(4):
        pts[0, z] = [centre(0, gx), centre(0, gy), centre(z, gz)]
        pts[b - 1, z] = [centre(gx - 1, gx), centre(gy - 1, gy), centre(gz - 4 + z, gz)]
    return pts


@pytest.mark.parametrize("version, use_hash", OCC_PATHS, ids=[f"{v}-{h}" for v, h in OCC_PATHS])
@pytest.mark.parametrize("offset", [0, 1, 2, 3])
def test_voxelize_occupancy_into_a_view_leaves_its_neighbours(version, use_hash, offset, monkeypatch):
    """Occupancy sets a voxel by an atomicOr into the byte's aligned 32-bit word (kernels/voxelize.cu rc_occ_set):
    into an output that starts 0-3 bytes past a word boundary and ends mid-word inside a larger buffer, the grid
    equals the reference and not one byte around it changes. The grid's first and last voxels are occupied, so its
    edge words are written; the poison's low bit is clear, so a stray or-ed 1 shows; a 32-bit store would zero it
    (v3's hash kernel and every plain kernel; a grid of 1386 bytes, no multiple of 4)."""
    from robocache import _launch

    monkeypatch.setitem(_launch.TUNING, "vox_hash", use_hash)
    b, n, grid = 2, 50_000, (7, 9, 11)
    pts = occupancy_cloud_with_edges(offset, b, n, grid)
    want = reference.voxelize(pts.astype(np.float32).astype(np.float64), None, grid, VOX_BOUNDS, "occupancy")
    assert want[0, 0, 0, :4].all() and want[b - 1, -1, -1, -4:].all()  # the edge words are written
    p = torch.from_numpy(pts).cuda().float()
    size = b * grid[0] * grid[1] * grid[2]
    poison = 0x5A
    buf = torch.full((size + 8,), poison, dtype=torch.uint8, device="cuda")
    out = buf[offset:offset + size].view(torch.bool).view(b, *grid)
    robocache.voxelize(p, None, grid, VOX_BOUNDS, "occupancy", out=out, _version=version)
    host = buf.cpu().numpy()
    assert np.array_equal(host[offset:offset + size].reshape(b, *grid), want.astype(np.uint8)), version
    assert (host[:offset] == poison).all() and (host[offset + size:] == poison).all(), \
        f"{version}: a byte outside the view changed: {host[:offset]} ... {host[offset + size:]}"


@pytest.mark.parametrize("flat", [True, "hash"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("c", [1, 3, 13, 32])
def test_voxelize_flat_accumulate(flat, dtype, c, monkeypatch):
    """v3's mean summed one feature element a thread (TUNING["vox_flat"] True: straight to the grid; "hash":
    through the shared-memory table, C = 32 beyond it), against the reference: a small and a large clustered
    cloud (hot voxels: same-address atomics), channels that do and do not divide a warp."""
    from robocache import _launch

    monkeypatch.setitem(_launch.TUNING, "vox_flat", flat)  # _version="v3": no plan cache
    tdt = getattr(torch, dtype)
    # the last: a uniform cloud on a fine grid, so most of the flat-insert hash's rounds take new slots for most of
    # their points (its rounds straight to the grid, the used-slot bits mostly clear)
    for b, n, grid, clustered in ((1, 700, (20, 20, 20), True), (3, 120_000, (20, 20, 20), True),
                                  (2, 60_000, (64, 64, 64), False)):
        rng = np.random.default_rng(b * n + c)
        pts, feats = _vox_cloud(rng, b, n, c, clustered=clustered)
        p = torch.from_numpy(pts).cuda().to(tdt)
        f = torch.from_numpy(feats).cuda().to(tdt)
        got = robocache.voxelize(p, f, grid, VOX_BOUNDS, "mean", _version="v3")
        want = reference.voxelize(p.double().cpu().numpy(), f.double().cpu().numpy(), grid, VOX_BOUNDS, "mean")
        _check(got, want, tdt, f"flat {dtype} C{c} B{b} N{n} G{grid}")


def _lidar_cloud(rng, b, n, c):
    """A LiDAR-like sparse cloud: ranges log-uniform from 0.05 around the origin (a few voxels at the sensor hold many
    points, most voxels none), some beyond the bounds, one NaN point."""
    d = rng.standard_normal((b, n, 3))
    d /= np.linalg.norm(d, axis=2, keepdims=True)
    pts = d * np.exp(rng.uniform(np.log(0.05), np.log(1.5), (b, n, 1)))
    pts[0, 0] = np.nan
    return pts, rng.standard_normal((b, n, c))


LIST_POISON = 0x7FF0A5A5  # every scratch word before a call: NaN as a float32 sum, a huge count, a wild list entry


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("c", [1, 3, 16])
def test_voxelize_mean_list_path(dtype, c, monkeypatch):
    """v3's mean through the list of occupied voxels (TUNING["vox_list"] True: voxel_zero_list_v3, voxel_list_v3, the
    flat accumulate without counts, voxel_list_mean*_v3) against the dense passes (False) and the reference, on sparse
    (LiDAR-like and uniform on fine grids) and clustered clouds, into a poisoned scratch buffer and a poisoned caller's
    output one element off the 16-byte grid: the list kernels launched (and only on the list path), the scratch's
    counts equal to the reference's and its list the occupied voxels exactly once, empty voxels exactly +0 on both
    paths, means within tolerance on both; integer features (float32) bit for bit the division on both."""
    from robocache import _launch

    vmod = sys.modules["robocache.voxelize"]  # _version="v3" below: no plan cache, each call plans under TUNING
    names: list[str] = []
    real_kernel = _launch.kernel

    def kernel(op, name, dev, options=()):
        names.append(name)
        return real_kernel(op, name, dev, options)

    monkeypatch.setattr(_launch, "kernel", kernel)
    scratch: list = []
    real_scratch = vmod._scratch

    def poisoned(kind, words, like, dev):
        buf = real_scratch(kind, words, like, dev)
        buf.fill_(LIST_POISON)  # on the caller's stream, before the plan's launches
        scratch[:] = [buf]
        return buf

    monkeypatch.setattr(vmod, "_scratch", poisoned)
    tdt = getattr(torch, dtype)
    list_kernels = {"voxel_zero_list_v3", f"voxel_list_v3_{dtype}",
                    "voxel_list_mean_inplace_v3_float32" if dtype == "float32" else f"voxel_list_mean_v3_{dtype}"}
    cases = (("lidar", 3, 20_000, (64, 64, 64)), ("uniform", 2, 5_000, (96, 96, 32)), ("clustered", 2, 50_000, (96, 96, 32)),
             ("lidar", 1, 700, (20, 20, 20)))
    for cloud, b, n, grid in cases:
        rng = np.random.default_rng(b * n + c)
        pts, feats = _lidar_cloud(rng, b, n, c) if cloud == "lidar" else _vox_cloud(rng, b, n, c, cloud == "clustered")
        p, f = torch.from_numpy(pts).cuda().to(tdt), torch.from_numpy(feats).cuda().to(tdt)
        p64, f64 = p.double().cpu().numpy(), f.double().cpu().numpy()
        want = reference.voxelize(p64, f64, grid, VOX_BOUNDS, "mean")
        cnt = reference.voxelize(p64, None, grid, VOX_BOUNDS, "count")
        occ = np.flatnonzero(cnt)
        assert 0 < occ.size < cnt.size // 4, (cloud, occ.size, cnt.size)  # sparse rows: most voxels empty
        tag = f"list {dtype} C{c} {cloud} B{b} N{n} G{grid}"
        outs = {}
        for vlist in (False, True):
            monkeypatch.setitem(_launch.TUNING, "vox_list", vlist)
            names.clear()
            buf = torch.empty(cnt.size * c + 1, dtype=tdt, device="cuda")
            buf.view(torch.uint8).fill_(255)  # NaN everywhere: an element not written fails
            out = buf[1:].view(*cnt.shape, c)
            robocache.voxelize(p, f, grid, VOX_BOUNDS, "mean", out=out, _version="v3")
            torch.cuda.synchronize()
            assert (set(names) >= list_kernels) == vlist and (set(names) & list_kernels == set()) == (not vlist), \
                (tag, vlist, names)
            _check(out, want, tdt, f"{tag} vox_list={vlist}")
            g = out.double().cpu().numpy()
            assert not g[cnt == 0].any() and not np.signbit(g[cnt == 0]).any(), f"{tag}: an empty voxel is not +0"
            outs[vlist] = out
            if vlist:  # the scratch: its header, counts and list (kernels/voxelize.cu, "v3, the list path")
                list_off, wide, _, words = vmod._list_layout(b, n, cnt.size // b, c, dtype == "float32")
                host = scratch[0].cpu().numpy()
                assert host.size == words and wide == 0, tag
                assert host[0] == occ.size and not host[1:4].any(), (tag, host[:4], occ.size)
                np.testing.assert_array_equal(host[4:4 + cnt.size], cnt.reshape(-1), err_msg=f"{tag}: counts")
                np.testing.assert_array_equal(np.sort(host[list_off:list_off + occ.size]), occ,
                                              err_msg=f"{tag}: the list is not the occupied voxels")
        # the two paths' means, each within TOL of the reference above, so within twice TOL of each other (float32
        # sums in arrival order on both: their last bits may differ)
        a, d = (outs[v].double().cpu().numpy() for v in (True, False))
        worst = float((np.abs(a - d) / np.maximum(1.0, np.abs(d))).max())
        assert worst <= 2 * TOL[tdt], f"{tag}: list against dense, max rel err {worst:.3g}"
        if dtype == "float32":  # integer features sum exactly in any order: both paths the division bit for bit
            fi = torch.from_numpy(rng.integers(-40, 40, (b, n, c)).astype(np.float32)).cuda()
            sums = np.round(reference.voxelize(p64, fi.double().cpu().numpy(), grid, VOX_BOUNDS, "mean")
                            * cnt[..., None])
            with np.errstate(invalid="ignore", divide="ignore"):
                exact = np.where(cnt[..., None] > 0, sums.astype(np.float32) / cnt[..., None].astype(np.float32),
                                 np.float32(0))
            for vlist in (False, True):
                monkeypatch.setitem(_launch.TUNING, "vox_list", vlist)
                got = robocache.voxelize(p, fi, grid, VOX_BOUNDS, "mean", _version="v3").cpu().numpy()
                np.testing.assert_array_equal(got.view(np.uint32), exact.view(np.uint32),
                                              err_msg=f"{tag} integer features vox_list={vlist}")


@pytest.mark.parametrize("version", [v for v in VERSIONS["voxelize"] if v != "v1"])  # v1 caches no plans
def test_voxelize_as_public_default(version, monkeypatch):
    """Each version as the public API's BEST (the plan cache's path, CuPy and torch, a torch side stream):
    what making a new version the default would run, checked before it is made so."""
    cupy = pytest.importorskip("cupy")
    from robocache import _versions

    vmod = sys.modules["robocache.voxelize"]
    monkeypatch.setitem(_versions.BEST, "voxelize", version)
    vmod._PLANS.clear()
    try:
        rng = np.random.default_rng(21)
        for dtype in DTYPES:
            for call in range(2):  # the second call takes the cached plan
                pts, feats = _vox_cloud(rng, 2, 20_000, 4, clustered=bool(call))
                p, f = torch.from_numpy(pts).cuda().to(dtype), torch.from_numpy(feats).cuda().to(dtype)
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    got = robocache.voxelize(p, f, (12, 12, 12), VOX_BOUNDS, "mean")
                    cnt = robocache.voxelize(p, None, (12, 12, 12), VOX_BOUNDS, "count")
                side.synchronize()
                p64, f64 = p.double().cpu().numpy(), f.double().cpu().numpy()
                _check(got, reference.voxelize(p64, f64, (12, 12, 12), VOX_BOUNDS, "mean"), dtype, f"{version} {call}")
                assert np.array_equal(cnt.cpu().numpy(), reference.voxelize(p64, None, (12, 12, 12), VOX_BOUNDS))
        assert len(vmod._PLANS._d) > 0  # the calls above went through cached plans
        pts, feats = _vox_cloud(rng, 2, 5000, 3, clustered=True)
        cp, cf = cupy.asarray(pts.astype(np.float32)), cupy.asarray(feats.astype(np.float32))
        for _ in range(2):
            gc = robocache.voxelize(cp, cf, (9, 9, 9), VOX_BOUNDS, "mean")
        want = reference.voxelize(pts.astype(np.float32).astype(np.float64), feats.astype(np.float32).astype(np.float64),
                                  (9, 9, 9), VOX_BOUNDS, "mean")
        _check(torch.from_numpy(cupy.asnumpy(gc)), want, torch.float32, f"{version} cupy")
    finally:
        vmod._PLANS.clear()


def _extreme_module():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("_extreme", Path(__file__).resolve().parents[1] / "test_extreme_values.py")
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    return ext


def _extreme_rows(ext, tdtype):
    """tests/test_extreme_values.py's issue cases (each row: its target, its first and last time) and seeded rows
    drawn from the same extreme numbers (+-inf, +-1e308, +-3e38, 0, 1e-300, 5e-324) and ordinary ones."""
    rows = [(np.array(s, np.float64), np.array(v, np.float64), [t, s[0], s[-1]]) for s, v, t in ext.CASES]
    rows.append((np.array([0.0, 1e-300]), np.array([-3e38, 3e38]), [5e-301, 1e-301, 0.0]))  # the steep corner
    rng = np.random.default_rng(16)
    pool = np.array([-np.inf, np.inf, -1e308, 1e308, -3e38, 3e38, 0.0, -0.0, 1e-300, 5e-324, -2.5, 1.0, 7.0])
    for _ in range(40):
        s = np.sort(rng.choice(pool, 5))
        rows.append((s, rng.choice(pool, 5), list(rng.choice(np.concatenate([pool, [np.nan, 0.5]]), 3))))
    s_len = max(len(s) for s, _, _ in rows)
    src = np.array([np.concatenate([s, np.full(s_len - len(s), s[-1])]) for s, _, _ in rows])
    vals = np.array([np.concatenate([v, np.full(s_len - len(v), v[-1])]) for _, v, _ in rows])
    tgt = np.array([t for _, _, t in rows])
    d = 5
    with np.errstate(over="ignore"):
        v32 = (np.repeat(vals[:, :, None], d, axis=2) * np.array([1, -1, 0.5, 2, 1])).astype(np.float32)
        return v32, np.sort(src.astype(tdtype), axis=1), tgt.astype(tdtype)


@pytest.mark.parametrize("version", VERSIONS["resample"])
@pytest.mark.parametrize("tdtype", [np.float32, np.float64])
def test_resample_infinite_and_extreme_values(version, tdtype):
    """docs/semantics.md "Infinite and extreme values": the kernels give the reference's (numpy.interp's) NaN/+inf/-inf
    pattern exactly and its finite values within tolerance, except the documented corners (there: the documented
    outcome); and they are tests/test_extreme_values.py's line-by-line model ``kernel_rule`` (same pattern, finite
    values within float32 rounding). Every version of resample and fuse."""
    ext = _extreme_module()
    v32, s_t, t_t = _extreme_rows(ext, tdtype)
    want = reference.resample(v32, s_t, t_t, out_dtype=np.float32)
    model = ext.kernel_rule(v32, s_t, t_t, version)
    out = robocache.resample(torch.from_numpy(v32).cuda(), torch.from_numpy(s_t).cuda(), torch.from_numpy(t_t).cuda(),
                             _version=version).cpu().numpy()
    ext.check_kernel_outcome(out, want, v32, s_t, t_t)
    for name, f in (("nan", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
        assert np.array_equal(f(out), f(model)), f"{version} {tdtype.__name__}: {name} pattern differs from kernel_rule"
    fin = np.isfinite(model)
    np.testing.assert_allclose(out[fin], model[fin], rtol=1e-6, atol=1e-30)
    if version in VERSIONS["fuse"]:  # fuse's kernels of the same version: each stream follows the same rule
        vt, st_ = torch.from_numpy(v32).cuda(), torch.from_numpy(s_t).cuda()
        fused = robocache.fuse([(vt, st_), (vt[:, :, :2], st_)], torch.from_numpy(t_t).cuda(),
                               _version=version).cpu().numpy()
        both = np.concatenate([out, out[:, :, :2]], axis=2)
        for name, f in (("nan", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
            assert np.array_equal(f(fused), f(both)), f"fuse {version} {tdtype.__name__}: {name} pattern differs"
        fin = np.isfinite(both)
        np.testing.assert_allclose(fused[fin], both[fin], rtol=1e-6, atol=1e-30)
