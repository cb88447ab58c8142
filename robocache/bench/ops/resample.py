"""resample: trajectories on jittered source timestamps interpolated onto a uniform target timeline."""
from __future__ import annotations

from typing import Any

import numpy as np

from .base import (GPU, GPU_DTYPES, ITEM_SIZE, MULTIGPU_COUNTS, MULTIGPU_CPU_COUNTS, CPU, GATHER_MODES, N, Q,
                   SWEEP_DTYPES, Draw, Op, Point,
                   dispatch_point, even_times, host_seconds, jittered_times, log_uniform, log_uniform_int, pick,
                   multigpu_points, normal_values, round_times, rows_needed, sensor_times, uniform_times,
                   within_caps)

CLASSIC = "resample/B256-S100-T50-D32"
# float64 times in the sampled suite are epoch seconds (why a user keeps them in float64), from this range
EPOCH = (1.6e9, 1.8e9)


def estimated_moved(b: int, s: int, t: int, d: int, dtype: str, time_dtype: str) -> int:
    """The minimal traffic of a sampled shape before its inputs exist: targets spread over the window use at
    most two source rows each (at most all ``s``), every time read once, the output written once."""
    es, ts = ITEM_SIZE[dtype], ITEM_SIZE[time_dtype]
    return b * (min(s, 2 * t) * d * es + (s + t) * ts + t * d * es)


def sample_time_dtype(u_kind: float, u_start: float) -> tuple[str, float]:
    """(time dtype, first time) from two uniforms: float64 epoch seconds with probability 1/4 (most loaders hand
    over float32 seconds from the episode's start), else float32 from 0."""
    if u_kind < 0.25:
        return "float64", round(EPOCH[0] + u_start * (EPOCH[1] - EPOCH[0]), 3)
    return "float32", 0.0

def point(b: int, s: int, t: int, d: int, reason: str, suites=N, dtypes=SWEEP_DTYPES,
          time_dtype: str = "float32") -> Point:
    """A resample point: ``b`` trajectories of ``s`` frames -> ``t`` frames, ``d`` features."""
    tag = f"B{b}-S{s}-T{t}-D{d}" + ("-t64" if time_dtype == "float64" else "")
    return Point("resample", tag, {"B": b, "S": s, "T": t, "D": d, "time_dtype": time_dtype}, reason, suites, dtypes)


class Resample(Op):
    name = "resample"
    items_unit = "trajectories"
    tuned_launch = True
    launch_floor_args = ("ptr", "ptr", "ptr", "out", "i32", "i32", "i32", "i32")  # values, src, tgt, out, S, T, D, tiles
    representative = ((CLASSIC, "bfloat16"), (CLASSIC, "float32"))
    headline = ("the classic case (B=256, 100 -> 50 frames, 32 features)", CLASSIC)
    scaling_views = (
        ("Batch scaling (resample, 100 -> 50, D=32, float32)", "B", {"S": 100, "T": 50, "D": 32}),
        ("Length scaling (resample, B=256, T=S/2, D=32, float32)", "S", {"B": 256, "D": 32, "T": lambda p: p["S"] // 2}),
        ("Dimension scaling (resample, B=256, 100 -> 50, float32)", "D", {"B": 256, "S": 100, "T": 50}),
    )

    def points(self) -> tuple[Point, ...]:
        return (
            # the classic case first
            point(256, 100, 50, 32, "the classic case: 256 trajectories, 100 -> 50 frames, 32 features", Q,
                  dtypes=GPU_DTYPES),
            point(4096, 100, 50, 32, "large batch: a data loader's full step; shows peak bandwidth", Q,
                  dtypes=("float32", "bfloat16")),
            point(32, 100, 50, 32, "small batch: launch-bound regime, latency matters", Q, dtypes=("float32",)),
            # batch scaling at the classic shape
            *(point(b, 100, 50, 32, f"batch scaling: B={b} at the classic shape")
              for b in (1, 16, 64, 1024, 16384)),
            # length scaling (T = S/2) at B=256, D=32
            *(point(256, s, s // 2, 32, f"length scaling: S={s}, T=S/2 (binary search depth log2 S)")
              for s in (32, 500, 2000, 10000)),
            # feature-dimension scaling at B=256, 100 -> 50
            *(point(256, 100, 50, d, f"dimension scaling: D={d} ({'sub-warp' if d < 32 else 'multi-warp'} rows)")
              for d in (1, 7, 128, 512)),
            point(256, 100, 50, 32, "float64 timestamps (epoch seconds stay exact): cost of double weights",
                  dtypes=("float32",), time_dtype="float64"),
        )

    def dispatch_points(self) -> tuple[Point, ...]:
        return (dispatch_point("resample", "dispatch-B1-S4-T2-D1",
                               {"B": 1, "S": 4, "T": 2, "D": 1, "time_dtype": "float32"}, "resample (B1 S4 T2 D1)"),)

    def multigpu_points(self) -> tuple[Point, ...]:
        def make(b):
            return point(b, 100, 50, 32, "")
        return (*multigpu_points(make, 4096, 32768, "trajectories at the classic shape (100 -> 50 frames, D=32)",
                                 MULTIGPU_COUNTS, GATHER_MODES, GPU),
                *multigpu_points(make, 4096, 32768, "two 8-GPU machines (torchrun over two nodes), classic shape",
                                 (16,), ("none", "all"), GPU))

    def multigpu_cpu_points(self) -> tuple[Point, ...]:
        return tuple(multigpu_points(lambda b: point(b, 100, 50, 32, ""), 64, 128,
                                     "CPU rehearsal (Gloo), classic shape", MULTIGPU_CPU_COUNTS, GATHER_MODES, CPU))

    sample_width = 8

    def sample(self, u: list[float], min_moved: int = 0) -> Draw | None:
        """log-uniform B in 1..65536, S in 2..200000, T/S in 1/16..16, D in 1..1024 (odd D as often as even);
        values float32, float16 or bfloat16 alike; times float32, or float64 epoch seconds (1/4); source
        clocks at a log-uniform 10..1000 Hz with 30% jitter, targets evenly over the same window."""
        b = log_uniform_int(u[0], 1, 65536)
        s = log_uniform_int(u[1], 2, 200_000)
        t = max(1, round(s * log_uniform(u[2], 1 / 16, 16)))
        d = log_uniform_int(u[3], 1, 1024)
        dtype = pick(u[4], GPU_DTYPES)
        tdt, t0 = sample_time_dtype(u[5], u[6])
        rate = round(log_uniform(u[7], 10.0, 1000.0), 3)
        moved = estimated_moved(b, s, t, d, dtype, tdt)
        if moved < min_moved:
            return None
        p = {"B": b, "S": s, "T": t, "D": d, "time_dtype": tdt, "rate_hz": rate, "t0": t0}
        if not within_caps(self.case_bytes(p, dtype), *self.sample_cost(p)):
            return None
        shape = f"B{b}-S{s}-T{t}-D{d}" + ("-t64" if tdt == "float64" else "")
        why = (f"{b} trajectories, {s} -> {t} frames (T/S {t / s:.3g}) at {rate:.0f} Hz, D={d}, {dtype} values, "
               f"{tdt} times" + (" (epoch seconds)" if t0 else ""))
        return Draw(shape, p, dtype, why, moved)

    def sample_cost(self, p: dict[str, Any]) -> tuple[int, float]:
        """(elements the host builds and checks, modelled host seconds) of a case process: the values and the
        output, one reference row per trajectory, every time bracketed for the bytes model."""
        b, s, t, d = p["B"], p["S"], p["T"], p["D"]
        return b * (s + t) * d, host_seconds(rows=b, generated=b * s * (d + 1), reference=b * t * d,
                                             searched=b * (s + t))

    def features(self, p: dict[str, Any]) -> int | None:
        """D."""
        return p.get("D")

    def case_bytes(self, p: dict[str, Any], dtype: str) -> int:
        es, ts = ITEM_SIZE[dtype], ITEM_SIZE[p.get("time_dtype", "float32")]
        b, s, t, d = p["B"], p["S"], p["T"], p["D"]
        return b * s * d * es + b * s * ts + b * t * ts + b * t * d * es

    def moved_bytes(self, case: Any, inputs: dict[str, Any]) -> int:
        """The distinct source rows the targets use x D x the value size, every source and target time read
        once, the output written once (times rounded to the time dtype first)."""
        tdt = case.params.get("time_dtype", "float32")
        es, ts = ITEM_SIZE[case.dtype], ITEM_SIZE[tdt]
        tgt = round_times(inputs["tgt_times"], tdt)
        src = round_times(inputs["src_times"], tdt)
        b, t = tgt.shape
        d = np.shape(inputs["values"])[2]
        rows = int(rows_needed(src, tgt).sum())
        return rows * d * es + src.size * ts + tgt.size * ts + b * t * d * es

    def host_inputs(self, case: Any, rng: np.random.Generator) -> dict[str, Any]:
        p = case.params
        b, s, t, d = p["B"], p["S"], p["T"], p["D"]
        if p.get("kind") == "sampled":  # built for size: float32 values, clocks sorted by construction
            dur = max(s - 1, 1) / p["rate_hz"]
            return {"values": normal_values(rng, (b, s, d)), "src_times": sensor_times(rng, b, s, p["t0"], dur),
                    "tgt_times": even_times(b, t, p["t0"], dur)}
        src = jittered_times(rng, b, s)
        return {"values": rng.standard_normal((b, s, d)), "src_times": src, "tgt_times": uniform_times(b, t)}

    def call_args(self, case, inputs, convert):
        return ((convert(inputs["values"], "values"), convert(inputs["src_times"], "times"),
                 convert(inputs["tgt_times"], "times")), {})

    def rounded(self, case, args, to_host):
        return {"values": to_host(args[0]), "src_times": to_host(args[1]), "tgt_times": to_host(args[2])}

    def reference(self, case, rounded):
        from ... import reference

        return reference.resample(rounded["values"], rounded["src_times"], rounded["tgt_times"])

    def bare_args(self, case, args):
        p = case.params
        values, src, tgt = args
        return [values.data.ptr, src.data.ptr, tgt.data.ptr], [p["S"], p["T"], p["D"], p["B"]], [], []


OP = Resample()
