"""voxelize: point clouds scattered into dense voxel grids (counts, occupancy or mean features)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .base import (BOUNDS, CPU, GPU, ITEM_SIZE, MULTIGPU_COUNTS, MULTIGPU_CPU_COUNTS, N, Q, SWEEP_DTYPES, Op, Point,
                   dispatch_point, multigpu_points)


def point(b: int, n: int, g: int, mode: str, cloud: str, reason: str, suites=N, c: int = 4,
          dtypes=SWEEP_DTYPES) -> Point:
    """A voxelize point: ``b`` clouds of ``n`` points (``uniform`` or ``clustered``) into ``g``^3 voxels."""
    tag = f"B{b}-N{n}-G{g}-{mode}-{cloud}" + (f"-C{c}" if mode == "mean" else "")
    return Point("voxelize", tag, {"B": b, "N": n, "grid": [g, g, g], "C": c if mode == "mean" else 0,
                                   "mode": mode, "cloud": cloud}, reason, suites, dtypes)


# The output dtype per mode (mean: the case dtype).
_OUT_DTYPE = {"count": "int32", "occupancy": "bool"}


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

    def items(self, p: dict[str, Any]) -> int:
        return int(p["B"] * p["N"])

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
