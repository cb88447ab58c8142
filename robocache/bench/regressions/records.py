"""What compare and check read from one record: its median time, its within-run noise, its health, its case,
its runner's fingerprint; the floor every verdict and alert shares."""
from __future__ import annotations

import math
from typing import Any

from ..schema import FAILED_STATUSES

FLOOR = 0.03  # a change smaller than 3% is never a verdict or an alert, whatever the noise
ENV_FIELDS = ("gpu_name", "driver", "cuda", "cpu", "kernel", "host_id")  # the runner's fingerprint


def safe_exp(d: float) -> float:
    """exp() that never overflows: a ratio of two schema-valid times (1e-300 and 1e300 us) stays finite."""
    return math.exp(max(min(float(d), 700.0), -700.0))


def check_floor(floor: float) -> None:
    if not (isinstance(floor, (int, float)) and math.isfinite(floor) and 0 <= floor < 10):
        raise ValueError(f"floor must be a finite number from 0 to 10 (a relative change), got {floor!r}")


def within_sigma(rec: Any) -> float:
    """One sigma of the median's relative uncertainty within its run (``method.noise`` is a 95% half-width)."""
    m = rec.get("method") or {}
    n = m.get("noise")
    return min(float(n) / 1.96, 1e6) if n is not None else 0.0


def p50(rec: Any) -> float | None:
    m = rec.get("metrics")
    if not m:
        return None
    v = m["time_us"]["p50"]
    return float(v) if v and v > 0 and math.isfinite(v) else None


def unhealthy(rec: Any) -> str | None:
    """Why a record cannot be a point of comparison (None when it can)."""
    if rec["status"] in FAILED_STATUSES:
        return f"status {rec['status']}"
    if rec["status"] != "ok" or p50(rec) is None:
        return f"status {rec['status']}"
    h = rec.get("health") or {}
    if h.get("throttled"):
        return "throttled"
    if h.get("contended"):
        return "contended"
    return None


def case_label(rec: Any) -> str:
    c = rec["case"]
    return f"{c['id']} {c['dtype']} {c['provider']}"


def case_key(rec: Any) -> str:
    """The harness's case key (``op/tag/dtype/provider``), as ``robocache-bench run --cases`` takes it."""
    c = rec["case"]
    return f"{c['id']}/{c['dtype']}/{c['provider']}"


def env_fingerprint(rec: Any) -> dict[str, str]:
    """The runner's facts that move a series when they change (GPU, driver, CUDA, CPU model, kernel, host id);
    fields a record does not have are left out (older records lack the kernel and host id)."""
    env = rec.get("env") or {}
    return {k: str(env[k]) for k in ENV_FIELDS if env.get(k) not in (None, "")}


def env_changes(a: dict[str, str], b: dict[str, str]) -> list[str]:
    """Fields known on both sides that differ, as ``field: old -> new``."""
    return [f"{k}: {a[k]} -> {b[k]}" for k in ENV_FIELDS if k in a and k in b and a[k] != b[k]]

