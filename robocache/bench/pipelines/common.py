"""What the pipeline benchmarks share: the device, the NVML utilisation sampler, records in the one schema.

A pipeline record is an ordinary, typed :class:`robocache.bench.schema.Record` (so ``show``, ``report``, ``check``,
``compare`` and the dashboard read it) with ``suite: "pipelines"``, ``method.timer: "host"`` (wall clock per
batch, step or call, the device synchronized inside it) and the optional ``pipeline`` section.
"""
from __future__ import annotations

import math
import threading
import time
from datetime import UTC, datetime
from typing import Any

import msgspec

from .. import specs
from .. import timing as timer_mod
from ..messages import Task
from ..schema import Record
from ..timing.stats import quantile as _quantile

SUITE = "pipelines"
NOISE_TARGET = 0.05  # a pipeline's per-batch times are spread by design (workers, prefetch): 5% on the median


def torch_device(device: str):
    import torch

    if device == "gpu":
        if not torch.cuda.is_available():
            raise RuntimeError("device gpu asked for but torch sees no CUDA device")
        return torch.device("cuda")
    return torch.device("cpu")


def sync(device: str) -> None:
    if device == "gpu":
        import torch

        torch.cuda.synchronize()


class UtilSampler:
    """GPU utilisation (NVML ``nvmlDeviceGetUtilizationRates``) sampled every ``interval_s`` on a thread.

    ``with UtilSampler("gpu") as u: ...; u.mean_pct, u.status``. On a CPU run, or without NVML, nothing is
    sampled and ``status`` is ``"unavailable: <why>"`` (never a crash, never a made-up 0).
    """

    def __init__(self, device: str, index: int = 0, interval_s: float = 0.05) -> None:
        self.samples: list[float] = []
        self.status = "unavailable: CPU run (no GPU)" if device != "gpu" else "unavailable: not started"
        self._device, self._index, self._interval = device, index, interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nv = self._h = None

    def __enter__(self) -> UtilSampler:
        if self._device != "gpu":
            return self
        from .. import env

        nv, why = env.nvml()
        if nv is None:
            self.status = f"unavailable: NVML {why}"
            return self
        try:
            self._h = nv.nvmlDeviceGetHandleByIndex(self._index)
            nv.nvmlDeviceGetUtilizationRates(self._h)
        except Exception as e:  # noqa: BLE001 - NotSupported, NoPermission, ...
            self.status = f"unavailable: {type(e).__name__}: {e}"
            return self
        self._nv = nv
        self.status = "ok"
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.samples.append(float(self._nv.nvmlDeviceGetUtilizationRates(self._h).gpu))
            except Exception:  # noqa: BLE001
                pass

    def __exit__(self, *exc: Any) -> bool:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            if not self.samples:
                self.status = "unavailable: no sample taken (the timed part was shorter than one interval)"
        return False

    @property
    def mean_pct(self) -> float | None:
        return math.fsum(self.samples) / len(self.samples) if self.status == "ok" and self.samples else None


def quantile(xs: list[float], q: float) -> float:
    return _quantile(sorted(xs), q)


def timing(samples_us: list[float], warmup_s: float, time_limit_s: float = 0.0) -> timer_mod.Timing:
    """The harness's :class:`~robocache.bench.timing.Timing` of per-batch/step/call wall times (timer host)."""
    met, noise = timer_mod.stop_rule(samples_us, NOISE_TARGET, 5) if samples_us else (False, None)
    return timer_mod.Timing("host", "warm", list(samples_us), 1, warmup_s, noise, NOISE_TARGET, met,
                            time_limit_s, len(samples_us))


def case(kind: str, tag: str, provider: str, params: dict[str, Any], items: int, unit: str, reason: str,
         nbytes: int = 0) -> dict[str, Any]:
    return {"id": f"{kind}/{tag}", "op": kind, "provider": provider, "dtype": "float32", "params": params,
            "grid_version": specs.GRID_VERSION, "bytes": int(nbytes), "items": int(items), "items_unit": unit,
            "reason": reason}


def record(ctx: Task, case_: dict[str, Any], *, status: str = "ok", reason: str | None = None,
           t: timer_mod.Timing | None = None, items: int = 0, check: dict | None = None,
           pipeline: dict | None = None, clocks: dict | None = None, duration_s: float = 0.0,
           distributed: dict | None = None, suite: str = SUITE) -> Record:
    """One :class:`~robocache.bench.schema.Record` (checked here: a field the schema refuses raises).

    ``ctx``: the run's :class:`~robocache.bench.messages.Task` (:meth:`RunContext.task
    <robocache.bench.context.RunContext.task>`): its run id, git state, front end, device and ``synthetic``."""
    from .. import env as envmod

    device = ctx.device
    rec: dict[str, Any] = {
        "run_id": ctx.run_id, "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "git_commit": ctx.git_commit, "git_dirty": ctx.git_dirty, "suite": suite,
        "frontend": ctx.frontend, "case": case_, "method": None, "metrics": None, "check": check,
        "clocks": clocks if device == "gpu" else None,
        "health": {"throttled": False, "contended": False, "noisy": False, "reasons": []},
        "status": status, "reason": reason, "duration_s": float(duration_s), "synthetic": ctx.synthetic,
    }
    if t is not None and t.samples_us:
        med_s = t.median_us * 1e-6
        rec["method"] = {**t.method(), "input_sets": 1}
        rec["metrics"] = {"time_us": t.quantiles(), "items_per_s": items / med_s if med_s > 0 else 0.0,
                          "gb_per_s": case_["bytes"] / med_s / 1e9 if med_s > 0 else 0.0,
                          "ceiling_gb_per_s": None, "pct_of_ceiling": None, "graph_time_us": None,
                          "event_vs_graph": None}
        health = envmod.assess_health(clocks if device == "gpu" else None, t.noise_target_met)
        if device != "gpu":
            health["reasons"] = [r for r in health["reasons"] if not r.startswith("clocks unknown")]
        rec["health"] = health
    if pipeline is not None:
        rec["pipeline"] = plain(pipeline)
    if distributed is not None:
        rec["distributed"] = plain(distributed)
    return msgspec.convert(rec, Record)


def p_resample_on(provider: str, device: str) -> str:
    """Where a pipeline's resampling runs (the record's ``pipeline.resample_on``): in the CPU workers, on the GPU,
    or robocache's NumPy fallback on a CPU run."""
    if provider == "cpu_workers":
        return "cpu_workers"
    return "gpu" if device == "gpu" else "numpy_fallback"


def plain(x: Any) -> Any:
    """NumPy scalars to Python numbers, recursively (the schema takes JSON types only)."""
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        return x.item()
    return x


def now() -> float:
    return time.perf_counter()
