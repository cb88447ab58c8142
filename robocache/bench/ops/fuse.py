"""fuse: several sensor streams (own rates and widths) resampled onto one timeline and concatenated."""
from __future__ import annotations

from typing import Any

import numpy as np

from .base import (CPU, GPU, GPU_DTYPES, ITEM_SIZE, MULTIGPU_COUNTS, MULTIGPU_CPU_COUNTS, N, Q, SWEEP_DTYPES, Draw,
                   Op, Point, dispatch_point, even_times, host_seconds, jittered_times, log_uniform, log_uniform_int,
                   multigpu_points, normal_values, pick, round_times, rows_needed, sensor_times, uniform_times,
                   within_caps)
from .resample import estimated_moved, sample_time_dtype

# The robot mix: vision features 256-D at 30 Hz, proprioception 14-D at 100 Hz, force 6-D at 333 Hz, 2 s
# windows onto a 50 Hz timeline (100 targets).
ROBOT = [(60, 256), (200, 14), (666, 6)]
MAX_STREAMS = 6  # the sampled suite draws 1-6 streams


def point(mix: str, b: int, t: int, streams: list[tuple[int, int]], reason: str, suites=N,
          dtypes=SWEEP_DTYPES) -> Point:
    """A fuse point: ``b`` windows of the ``streams`` (source frames, width) onto ``t`` targets."""
    return Point("fuse", f"{mix}-B{b}-T{t}", {"B": b, "T": t, "streams": [list(x) for x in streams],
                                              "mix": mix, "time_dtype": "float32"}, reason, suites, dtypes)


class Fuse(Op):
    name = "fuse"
    items_unit = "trajectories"
    tuned_launch = True
    launch_floor_args = ("ptr", "i32", "ptr", "out", "i32", "i32", "i32")  # stream table, K, tgt, out, T, sum D, tiles
    representative = (("fuse/robot-B256-T100", "bfloat16"), ("fuse/robot-B256-T100", "float32"))

    def points(self) -> tuple[Point, ...]:
        return (
            point("robot", 256, 100, ROBOT, "realistic robot mix: vision 256-D@30 Hz, proprio 14-D@100 Hz, force "
                  "6-D@333 Hz onto 50 Hz", Q, dtypes=GPU_DTYPES),
            point("robot", 32, 100, ROBOT, "robot mix, small batch: launch-bound; one fused launch vs K+1", N),
            point("robot", 2048, 100, ROBOT, "robot mix, large batch: bandwidth-bound", N,
                  dtypes=("float32", "bfloat16")),
            point("eight", 256, 100, [(20 * (k + 1), 2 ** (k % 6 + 1)) for k in range(8)],
                  "eight streams of mixed rates and widths: per-stream overhead of the peers", N),
        )

    def dispatch_points(self) -> tuple[Point, ...]:
        return (dispatch_point("fuse", "dispatch-B1-T2", {"B": 1, "T": 2, "streams": [[4, 1], [3, 2]],
                                                          "mix": "dispatch", "time_dtype": "float32"},
                               "fuse (2 streams, B1 T2)"),)

    def multigpu_points(self) -> tuple[Point, ...]:
        # at the quick suite's batch per GPU (its float64 reference on the host costs ~2 s per 1000 windows,
        # and every rank gates its shard first)
        return tuple(multigpu_points(lambda b: point("robot", b, 100, ROBOT, ""), 256, 2048,
                                     "robot-mix windows (vision, proprio, force onto 50 Hz)", MULTIGPU_COUNTS,
                                     ("none", "all"), GPU))

    def multigpu_cpu_points(self) -> tuple[Point, ...]:
        return tuple(multigpu_points(lambda b: point("robot", b, 100, ROBOT, ""), 8, 16,
                                     "CPU rehearsal (Gloo), robot mix", MULTIGPU_CPU_COUNTS, ("none", "all"), CPU))

    sample_width = 3 + 2 * MAX_STREAMS + 4

    def sample(self, u: list[float], min_moved: int = 0) -> Draw | None:
        """log-uniform B in 1..65536 windows of a log-uniform 0.5..30 s; 1-6 streams (uniform), each at a
        log-uniform 10..1000 Hz with a log-uniform width D_k in 1..1024; targets at a log-uniform 10..1000 Hz
        over the same window; one value dtype for all streams, times as resample's sampled points."""
        b = log_uniform_int(u[0], 1, 65536)
        window = round(log_uniform(u[1], 0.5, 30.0), 3)
        k = pick(u[2], tuple(range(1, MAX_STREAMS + 1)))
        rates = [round(log_uniform(x, 10.0, 1000.0), 3) for x in u[3:3 + k]]
        widths = [log_uniform_int(x, 1, 1024) for x in u[3 + MAX_STREAMS:3 + MAX_STREAMS + k]]
        rest = u[3 + 2 * MAX_STREAMS:]
        target_hz = round(log_uniform(rest[0], 10.0, 1000.0), 3)
        dtype = pick(rest[1], GPU_DTYPES)
        tdt, t0 = sample_time_dtype(rest[2], rest[3])
        streams = [[max(2, round(r * window)), w] for r, w in zip(rates, widths)]
        t = max(1, round(target_hz * window))
        moved = sum(estimated_moved(b, s, t, w, dtype, tdt) for s, w in streams) - (k - 1) * b * t * ITEM_SIZE[tdt]
        if moved < min_moved:
            return None
        p = {"B": b, "T": t, "streams": streams, "mix": "sampled", "time_dtype": tdt, "rates_hz": rates,
             "target_hz": target_hz, "window_s": window, "t0": t0}
        if not within_caps(self.case_bytes(p, dtype), *self.sample_cost(p)):
            return None
        shape = f"B{b}-T{t}-" + "-".join(f"{s}x{w}" for s, w in streams) + ("-t64" if tdt == "float64" else "")
        why = (f"{b} windows of {window:g} s, {k} stream(s) " + ", ".join(f"{w}-D@{r:.0f} Hz" for r, w in
                                                                         zip(rates, widths))
               + f" onto {target_hz:.0f} Hz ({t} targets), {dtype} values, {tdt} times"
               + (" (epoch seconds)" if t0 else ""))
        return Draw(shape, p, dtype, why, moved)

    def sample_cost(self, p: dict[str, Any]) -> tuple[int, float]:
        """(elements the host builds and checks, modelled host seconds): every stream's values and times, the
        output, one reference row per window and stream, every stream's times and the targets bracketed."""
        b, t, streams = p["B"], p["T"], p["streams"]
        gen = b * sum(s * (w + 1) for s, w in streams)
        d_total = sum(w for _, w in streams)
        return gen + b * t * d_total, host_seconds(rows=b * len(streams), generated=gen, reference=b * t * d_total,
                                                   searched=b * sum(s + t for s, _ in streams))

    def features(self, p: dict[str, Any]) -> int | None:
        """The output's width: the sum of the streams' D."""
        return sum(int(d) for _, d in p.get("streams") or []) or None

    def case_bytes(self, p: dict[str, Any], dtype: str) -> int:
        es, ts = ITEM_SIZE[dtype], ITEM_SIZE[p.get("time_dtype", "float32")]
        b, t = p["B"], p["T"]
        streams = p["streams"]
        d_total = sum(d for _, d in streams)
        return sum(b * s * d * es + b * s * ts for s, d in streams) + b * t * ts + b * t * d_total * es

    def moved_bytes(self, case: Any, inputs: dict[str, Any]) -> int:
        """Per stream, the source rows the targets use and every source time; the targets read once for all
        streams; the output written once."""
        tdt = case.params.get("time_dtype", "float32")
        es, ts = ITEM_SIZE[case.dtype], ITEM_SIZE[tdt]
        tgt = round_times(inputs["tgt_times"], tdt)
        b, t = tgt.shape
        total, d_total = tgt.size * ts, 0
        for values, times in inputs["streams"]:
            src = round_times(times, tdt)
            d = np.shape(values)[2]
            total += int(rows_needed(src, tgt).sum()) * d * es + src.size * ts
            d_total += d
        return total + b * t * d_total * es

    def host_inputs(self, case: Any, rng: np.random.Generator) -> dict[str, Any]:
        p = case.params
        b, t = p["B"], p["T"]
        if p.get("kind") == "sampled":  # every stream and the targets over the same window, built for size
            w, t0 = p["window_s"], p["t0"]
            return {"streams": [(normal_values(rng, (b, s, d)), sensor_times(rng, b, s, t0, w))
                                for s, d in p["streams"]], "tgt_times": even_times(b, t, t0, w)}
        streams = []
        for s, d in p["streams"]:
            ts = jittered_times(rng, b, s)
            streams.append((rng.standard_normal((b, s, d)), ts))
        return {"streams": streams, "tgt_times": uniform_times(b, t)}

    def call_args(self, case, inputs, convert):
        streams = [(convert(v, "values"), convert(t, "times")) for v, t in inputs["streams"]]
        return (streams, convert(inputs["tgt_times"], "times")), {}

    def rounded(self, case, args, to_host):
        return {"streams": [(to_host(v), to_host(t)) for v, t in args[0]], "tgt_times": to_host(args[1])}

    def reference(self, case, rounded):
        from ... import reference

        return reference.fuse(rounded["streams"], rounded["tgt_times"])

    def bare_args(self, case, args):
        import cupy

        p = case.params
        streams, tgt = args
        table = cupy.asarray(np.array([[v.data.ptr, t.data.ptr, v.shape[1], v.shape[2], 0] for v, t in streams],
                                      dtype=np.int64))
        d_total = sum(v.shape[2] for v, _ in streams)
        return [table.data.ptr, tgt.data.ptr], [len(streams), p["T"], d_total, p["B"]], [], [table]


OP = Fuse()
