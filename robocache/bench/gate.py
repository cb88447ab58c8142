"""The correctness gate: a provider's output against the float64 reference, before any timing.

Tolerances are per dtype on ``|out - ref| / max(1, |ref|)``: every backend does fp32
math, so the error is dominated by rounding the result to its storage dtype
(float16: 2^-11, bfloat16: 2^-8 relative) plus the interpolation in fp32.
Integer and boolean outputs (voxel counts, occupancy) must match exactly.
"""
from __future__ import annotations

import numpy as np

# The profile suite's check of Nsight Compute against the harness (robocache.bench.pipelines.ncu): the longest kernel
# of the profiled call against the harness's device time of the same case in the same run. ncu replays a kernel
# with its caches flushed and clocks left alone, so a few tens of percent apart is normal; beyond this factor either
# way one of the two is not measuring what it says (a unit, a wrong kernel).
NCU_AGREE = 3.0
TOLERANCE = {"float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2, "float64": 1e-12}


def check(out: np.ndarray, ref: np.ndarray, dtype: str) -> dict:
    """Schema ``Check`` dict: passed, max_abs_err, max_rel_err, tolerance, bad_fraction."""
    out = np.asarray(out)
    ref = np.asarray(ref)
    if out.shape != ref.shape:
        return {"passed": False, "max_abs_err": None, "max_rel_err": None, "tolerance": 0.0,
                "bad_fraction": 1.0}
    if out.dtype.kind in "biu" or ref.dtype.kind in "biu":
        diff = np.abs(out.astype(np.int64) - ref.astype(np.int64))
        bad = diff > 0
        return {"passed": not bool(bad.any()), "max_abs_err": float(diff.max(initial=0)),
                "max_rel_err": None, "tolerance": 0.0, "bad_fraction": float(bad.mean()) if bad.size else 0.0}
    tol = TOLERANCE.get(dtype, 2e-6)
    o = out.astype(np.float64)
    r = ref.astype(np.float64)
    nan_mismatch = np.isnan(o) != np.isnan(r)
    with np.errstate(invalid="ignore"):
        absdiff = np.where(np.isnan(o) | np.isnan(r), 0.0, np.abs(o - r))
    rel = absdiff / np.maximum(1.0, np.abs(np.nan_to_num(r)))
    bad = (rel > tol) | nan_mismatch
    finite_or_none = lambda x: float(x) if np.isfinite(x) else None  # noqa: E731 - the schema refuses Inf
    return {"passed": not bool(bad.any()), "max_abs_err": finite_or_none(absdiff.max(initial=0.0)),
            "max_rel_err": finite_or_none(rel.max(initial=0.0)), "tolerance": tol,
            "bad_fraction": float(bad.mean()) if bad.size else 0.0}
