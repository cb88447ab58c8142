"""voxelize: point clouds scattered into dense voxel grids (counts, occupancy or mean features)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .base import (BOUNDS, CPU, GPU, GPU_DTYPES, ITEM_SIZE, MULTIGPU_COUNTS, MULTIGPU_CPU_COUNTS, N, Q,
                   SWEEP_DTYPES, Draw, Op, Point, dispatch_point, host_seconds, log_uniform_int, multigpu_points, pick,
                   within_caps)


def point(b: int, n: int, g: int, mode: str, cloud: str, reason: str, suites=N, c: int = 4,
          dtypes=SWEEP_DTYPES) -> Point:
    """A voxelize point: ``b`` clouds of ``n`` points (``uniform`` or ``clustered``) into ``g``^3 voxels."""
    tag = f"B{b}-N{n}-G{g}-{mode}-{cloud}" + (f"-C{c}" if mode == "mean" else "")
    return Point("voxelize", tag, {"B": b, "N": n, "grid": [g, g, g], "C": c if mode == "mean" else 0,
                                   "mode": mode, "cloud": cloud}, reason, suites, dtypes)


# The output dtype per mode (mean: the case dtype).
_OUT_DTYPE = {"count": "int32", "occupancy": "bool"}
MODES = ("count", "occupancy", "mean")
CLOUDS = ("uniform", "clustered", "sparse")


def sampled_cloud(rng: np.random.Generator, b: int, n: int, cloud: str) -> np.ndarray:
    """float32 ``[b, n, 3]`` points of a sampled case's cloud (the bounds are +-2 on every axis).

    ``uniform``: over +-2.1 (about 14% outside the bounds); ``clustered``: 16 Gaussian blobs (sigma 0.08) per
    cloud, hot voxels; ``sparse``: a LiDAR-like sweep, 85% of the points on a ground plane (z = -1.6, 1 cm of
    noise) at a range whose density falls as 1/r from the sensor at the origin (0.05-2.8, so the far corners
    fall outside), 15% on 12 vertical poles: few occupied voxels, most of the grid empty.
    """
    if cloud == "uniform":
        return rng.random((b, n, 3), dtype=np.float32) * np.float32(4.2) - np.float32(2.1)
    if cloud == "clustered":
        centers = rng.uniform(-1.6, 1.6, (b, 16, 3)).astype(np.float32)
        pick = rng.integers(0, 16, (b, n))
        return (np.take_along_axis(centers, pick[..., None], axis=1)
                + np.float32(0.08) * rng.standard_normal((b, n, 3), dtype=np.float32))
    if cloud != "sparse":
        raise ValueError(f"unknown cloud {cloud!r}; expected one of {', '.join(CLOUDS)}")
    pts = np.empty((b, n, 3), dtype=np.float32)
    r = np.exp(rng.uniform(np.log(0.05), np.log(2.8), (b, n))).astype(np.float32)
    a = rng.uniform(0.0, 2 * np.pi, (b, n)).astype(np.float32)
    pts[..., 0] = r * np.cos(a)
    pts[..., 1] = r * np.sin(a)
    pts[..., 2] = np.float32(-1.6) + np.float32(0.01) * rng.standard_normal((b, n), dtype=np.float32)
    poles = rng.random((b, n)) < 0.15
    where = rng.uniform(-1.8, 1.8, (b, 12, 2)).astype(np.float32)
    pick = rng.integers(0, 12, (b, n))
    xy = np.take_along_axis(where, pick[..., None], axis=1) + np.float32(0.02) * rng.standard_normal(
        (b, n, 2), dtype=np.float32)
    z = rng.uniform(-1.6, 0.5, (b, n)).astype(np.float32)
    pts[..., :2] = np.where(poles[..., None], xy, pts[..., :2])
    pts[..., 2] = np.where(poles, z, pts[..., 2])
    return pts


class Voxelize(Op):
    name = "voxelize"
    items_unit = "points"
    # points, B, N, counts, occupancy, lo xyz, hi xyz, 1/size xyz, grid xyz
    launch_floor_args = ("ptr", "i64", "i32", "out", "ptr", *("f32",) * 9, *("i32",) * 3)
    representative = (("voxelize/B4-N100000-G64-count-uniform", "float32"),)
    scaling_views = (
        ("Points scaling (voxelize, B=4, 64^3 counts, uniform cloud, float32)", "N",
         {"B": 4, "grid": [64, 64, 64], "mode": "count", "cloud": "uniform"}),
    )

    def points(self) -> tuple[Point, ...]:
        return (
            point(4, 100_000, 64, "count", "uniform", "a LiDAR sweep per sample, 64^3 counts: scatter throughput", Q,
                  dtypes=("float32",)),
            point(4, 100_000, 64, "mean", "clustered", "clustered scene, mean features: atomic contention", Q,
                  dtypes=("float32",)),
            point(16, 100_000, 64, "count", "uniform", "batch of 16 sweeps, uniform cloud"),
            point(16, 100_000, 64, "count", "clustered", "batch of 16 sweeps, clustered cloud (hot voxels)"),
            point(1, 1_000_000, 128, "count", "uniform", "one dense cloud of 1M points into 128^3"),
            point(4, 100_000, 64, "occupancy", "uniform", "occupancy grids: idempotent stores, no atomics",
                  dtypes=("float32",)),
            point(4, 100_000, 64, "mean", "uniform", "mean features over a uniform cloud"),
            point(1, 10_000, 32, "count", "uniform", "tiny cloud: launch-bound regime", dtypes=("float32",)),
            # one axis at a time around the quick LiDAR point (B=4, N=100k, 64^3 counts, uniform, float32), so the
            # Sweeps page and the report can draw points and grid scaling as lines (the points above vary several
            # axes at once)
            *(point(4, n, 64, "count", "uniform", f"points scaling: N={n:,} per cloud into 64^3 counts "
                    f"({'the zeroed 64^3 grids outweigh the points' if n < 100_000 else 'scatter throughput'})", dtypes=("float32",))
              for n in (10_000, 1_000_000, 4_000_000)),
            *(point(4, 100_000, g, "count", "uniform", f"grid scaling: {g}^3 voxels for 100k points "
                    f"({'hot voxels, atomic contention' if g < 64 else 'output-bound: the zeroed grid outweighs the points'})",
                    dtypes=("float32",))
              for g in (16, 32, 128, 256)),
        )

    def dispatch_points(self) -> tuple[Point, ...]:
        return (dispatch_point("voxelize", "dispatch-B1-N16-G4-count-uniform",
                               {"B": 1, "N": 16, "grid": [4, 4, 4], "C": 0, "mode": "count", "cloud": "uniform"},
                               "voxelize (16 points into 4^3 counts)"),)

    def multigpu_points(self) -> tuple[Point, ...]:
        return tuple(multigpu_points(lambda b: point(b, 100_000, 64, "count", "uniform", ""), 4, 32,
                                     "LiDAR sweeps of 100k points into 64^3 counts", MULTIGPU_COUNTS,
                                     ("none", "all"), GPU))

    def multigpu_cpu_points(self) -> tuple[Point, ...]:
        return tuple(multigpu_points(lambda b: point(b, 10_000, 32, "count", "uniform", ""), 1, 2,
                                     "CPU rehearsal (Gloo), tiny clouds", MULTIGPU_CPU_COUNTS, ("none", "all"), CPU))

    sample_width = 9

    def sample(self, u: list[float], min_moved: int = 0) -> Draw | None:
        """log-uniform B in 1..32 clouds of a log-uniform N in 1k..2M points; each grid side a log-uniform
        16..256 on its own; the cloud uniform, clustered or sparse alike; count, occupancy or mean alike, mean
        with 1-16 channels (uniform); points (and features) float32, float16 or bfloat16 alike."""
        b = log_uniform_int(u[0], 1, 32)
        n = log_uniform_int(u[1], 1000, 2_000_000)
        grid = [log_uniform_int(x, 16, 256) for x in u[2:5]]
        cloud = pick(u[5], CLOUDS)
        mode = pick(u[6], MODES)
        c = pick(u[7], tuple(range(1, 17))) if mode == "mean" else 0
        dtype = pick(u[8], GPU_DTYPES)
        p = {"B": b, "N": n, "grid": grid, "C": c, "mode": mode, "cloud": cloud}
        moved = self.case_bytes(p, dtype)  # every point is read: the bound is the minimal traffic
        if moved < min_moved or not within_caps(moved, *self.sample_cost(p)):
            return None
        shape = f"B{b}-N{n}-G{grid[0]}x{grid[1]}x{grid[2]}-{mode}-{cloud}" + (f"-C{c}" if mode == "mean" else "")
        why = (f"{b} {cloud} cloud(s) of {n:,} points into {grid[0]}x{grid[1]}x{grid[2]} {mode}"
               + (f" of {c} channel(s)" if c else "") + f", {dtype}")
        return Draw(shape, p, dtype, why, moved)

    def sample_cost(self, p: dict[str, Any]) -> tuple[int, float]:
        """(elements the host builds and checks, modelled host seconds): the points and features; the
        reference indexes each point, bincounts per cloud, accumulates every feature (mean) and fills and
        compares the dense grids of B*V*(C or 1)."""
        b, n, c = p["B"], p["N"], p["C"]
        cells = b * math.prod(p["grid"]) * max(c, 1)
        return b * n * (3 + c) + cells, host_seconds(rows=b, generated=b * n * (3 + c), points=b * n, cells=cells,
                                                     scattered=b * n * c)

    def items(self, p: dict[str, Any]) -> int:
        return int(p["B"] * p["N"])

    def features(self, p: dict[str, Any]) -> int | None:
        """The channels averaged (mean); 1 for count and occupancy, which carry none."""
        return max(int(p.get("C") or 0), 1)

    def case_bytes(self, p: dict[str, Any], dtype: str) -> int:
        """Points, features in mean mode, the dense output (also the moved bytes: every point is read)."""
        es = ITEM_SIZE[dtype]
        b, n, c = p["B"], p["N"], p["C"]
        v = math.prod(p["grid"])
        out = {"count": 4 * b * v, "occupancy": b * v, "mean": es * b * v * c}[p["mode"]]
        feats = b * n * c * es if p["mode"] == "mean" else 0
        return b * n * 3 * es + feats + out

    def expected_dtype(self, case: Any) -> str:
        return _OUT_DTYPE.get(case.params["mode"], case.dtype)

    def host_inputs(self, case: Any, rng: np.random.Generator) -> dict[str, Any]:
        p = case.params
        b, n, c = p["B"], p["N"], p["C"]
        if p.get("kind") == "sampled":  # float32, built for size
            feats = rng.standard_normal((b, n, c), dtype=np.float32) if p["mode"] == "mean" else None
            return {"points": sampled_cloud(rng, b, n, p["cloud"]), "features": feats}
        if p["cloud"] == "clustered":
            centers = rng.uniform(-1.6, 1.6, (b, 16, 3))
            pts = centers[:, rng.integers(0, 16, n)] + 0.08 * rng.standard_normal((b, n, 3))
        else:
            pts = rng.uniform(-2.1, 2.1, (b, n, 3))  # ~14% of points fall outside the bounds
        feats = rng.standard_normal((b, n, c)) if p["mode"] == "mean" else None
        return {"points": pts, "features": feats}

    def call_args(self, case, inputs, convert):
        p = case.params
        feats = convert(inputs["features"], "values") if inputs["features"] is not None else None
        return (convert(inputs["points"], "values"), feats, tuple(p["grid"]), BOUNDS, p["mode"]), {}

    def rounded(self, case, args, to_host):
        return {"points": to_host(args[0]), "features": to_host(args[1]) if args[1] is not None else None}

    def reference(self, case, rounded):
        from ... import reference

        p = case.params
        return reference.voxelize(rounded["points"], rounded["features"], tuple(p["grid"]), BOUNDS, p["mode"])

    def bare_args(self, case, args):
        from ...reference.voxelize import voxel_geometry

        p = case.params
        points = args[0]
        g, lo, hi, inv = voxel_geometry(tuple(p["grid"]), BOUNDS)
        return ([points.data.ptr, 0], [p["B"], p["N"], *(int(x) for x in g)],
                [float(x) for x in (*lo, *hi, *inv)], [])


OP = Voxelize()
