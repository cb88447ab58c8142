"""Reference fuse (= concatenated resamples) and voxelize (against a plain Python loop oracle)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robocache import reference


def robot_streams(rng, b=3, secs=1.0):
    out = []
    for hz, dim in ((30, 256), (100, 14), (333, 6)):
        n = max(1, int(hz * secs))
        out.append((rng.standard_normal((b, n, dim)), np.sort(rng.uniform(0, secs, (b, n)), axis=1)))
    return out


def test_fuse_is_concatenated_resample(rng):
    streams = robot_streams(rng)
    tgt = rng.uniform(-0.1, 1.1, (3, 50))
    got = reference.fuse(streams, tgt)
    want = np.concatenate([reference.resample(v, t, tgt) for v, t in streams], axis=2)
    assert got.shape == (3, 50, 256 + 14 + 6)
    np.testing.assert_array_equal(got, want)


def test_fuse_single_stream_equals_resample(rng):
    v, t = rng.standard_normal((2, 9, 5)), np.sort(rng.uniform(0, 1, (2, 9)), axis=1)
    tgt = rng.uniform(0, 1, (2, 4))
    np.testing.assert_array_equal(reference.fuse([(v, t)], tgt), reference.resample(v, t, tgt))


def loop_oracle(points, features, grid, bounds, mode):
    """Voxelize with plain Python floats rounded to float32 at each step, one point at a time."""
    f32 = np.float32
    lo = [f32(x) for x in bounds[0]]
    hi = [f32(x) for x in bounds[1]]
    inv = [f32(float(g) / (float(h) - float(lo_))) for g, lo_, h in zip(grid, lo, hi)]
    b_, n_, _ = points.shape
    counts = np.zeros((b_, *grid), dtype=np.int64)
    c_ = features.shape[2] if features is not None else 0
    sums = np.zeros((b_, *grid, c_))
    for b in range(b_):
        for i in range(n_):
            idx = []
            for a in range(3):
                x = f32(points[b, i, a])
                if not (x >= lo[a] and x < hi[a]):
                    break
                k = int(math.floor(f32(f32(x - lo[a]) * inv[a])))
                idx.append(min(k, grid[a] - 1))
            else:
                counts[(b, *idx)] += 1
                if features is not None:
                    sums[(b, *idx)] += features[b, i]
    if mode == "count":
        return counts.astype(np.int32)
    if mode == "occupancy":
        return counts > 0
    return np.where(counts[..., None] > 0, sums / np.maximum(counts, 1)[..., None], 0.0)


def cloud(rng, b, n, c, spread=1.3):
    pts = rng.uniform(-spread, spread, (b, n, 3)).astype(np.float32)
    if n >= 8:
        pts[0, 0] = [np.nan, 0, 0]
        pts[0, 1] = [0, np.inf, 0]
        pts[0, 2] = [0, 0, -np.inf]
        pts[0, 3] = [1.0, 0.0, 0.0]    # exactly on the upper bound: dropped (half-open)
        pts[0, 4] = [-1.0, -1.0, -1.0]  # exactly on the lower bound: kept, voxel 0
    feats = rng.standard_normal((b, n, c)) if c else None
    return pts, feats


@pytest.mark.parametrize("mode", ["count", "occupancy", "mean"])
@pytest.mark.parametrize("grid", [(4, 4, 4), (3, 5, 7), (1, 1, 1), (16, 2, 9)])
def test_voxelize_matches_loop_oracle(rng, mode, grid):
    pts, feats = cloud(rng, 2, 300, 3)
    bounds = ((-1.0, -1.0, -1.0), (1.0, 1.0, 1.0))
    got = reference.voxelize(pts, feats if mode == "mean" else None, grid, bounds, mode)
    want = loop_oracle(pts, feats, grid, bounds, mode)
    assert got.shape == want.shape
    # bit for bit, means too: the reference and the loop both sum each voxel's points in point order
    np.testing.assert_array_equal(got, want)
    if mode == "count":
        assert got[0, 0, 0, 0] >= 1  # the point on the lower bound


def test_voxelize_asymmetric_bounds_and_empty_cloud(rng):
    pts, feats = cloud(rng, 3, 200, 2, spread=5.0)
    bounds = ((-3.0, 0.5, -1.25), (2.0, 4.0, 0.75))
    for mode in ("count", "mean"):
        got = reference.voxelize(pts, feats, (5, 7, 3), bounds, mode)
        want = loop_oracle(pts, feats, (5, 7, 3), bounds, mode)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    empty = np.zeros((2, 0, 3), np.float32)
    assert reference.voxelize(empty, None, (2, 2, 2), bounds, "count").sum() == 0


def test_voxelize_counts_total(rng):
    pts, _ = cloud(rng, 2, 1000, 0, spread=0.9)  # all finite ones inside
    got = reference.voxelize(pts, None, (8, 8, 8), ((-1, -1, -1), (1, 1, 1)), "count")
    finite_inside = np.all(np.isfinite(pts) & (pts >= -1) & (pts < 1), axis=-1).sum(axis=1)
    np.testing.assert_array_equal(got.reshape(2, -1).sum(axis=1), finite_inside)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3), st.integers(0, 60), st.tuples(st.integers(1, 6), st.integers(1, 6), st.integers(1, 6)),
       st.integers(0, 2**32 - 1))
def test_property_voxelize_matches_oracle(b, n, grid, seed):
    rng = np.random.default_rng(seed)
    pts, feats = cloud(rng, b, n, 2, spread=2.0)
    lo = rng.uniform(-2, 0, 3)
    bounds = (tuple(lo), tuple(lo + rng.uniform(0.1, 3, 3)))
    for mode in ("count", "mean"):
        got = reference.voxelize(pts, feats, grid, bounds, mode)
        want = loop_oracle(pts, feats, grid, bounds, mode)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
