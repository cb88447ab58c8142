"""The timers' statistics: the :class:`Timing` they return, quantiles, the median's confidence interval and
the stop rule every timer shares (sample until the median is known to ``noise_target``)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# the measuring method's version, part of every series (schema.Series.method_version)
from ..schema import METHOD_VERSION

_Z95 = 1.96


@dataclass
class Timing:
    """Per-call times of one measurement and how they were taken (schema ``Method``)."""

    timer: str  # "cuda_event" | "cuda_graph" | "host" | "host_loop"
    cache: str  # "warm" | "cold"
    samples_us: list[float]  # per-call time of each sample, microseconds
    reps_per_sample: int
    warmup_s: float  # wall time actually spent warming up (and calibrating / capturing)
    noise: float | None  # relative half-width of the median's distribution-free 95% CI
    noise_target: float
    noise_target_met: bool
    time_limit_s: float
    batches: int = 0  # sampling batches kept (GPU) or samples (host)
    uncovered_batches: int = 0  # GPU batches whose pre-blocking sleep ended before the enqueueing did
    launch_us: float | None = None  # time_lockstep on a GPU: median host time per call to enqueue the work

    @property
    def median_us(self) -> float:
        """Median per-call time (0.0 when there are no samples)."""
        return quantile(sorted(self.samples_us), 0.5)

    def quantiles(self) -> dict[str, float]:
        """Schema ``Quantiles`` in microseconds per call (zeros when there are no samples)."""
        xs = sorted(self.samples_us)
        mean = math.fsum(xs) / len(xs) if xs else 0.0
        return {"p20": quantile(xs, 0.2), "p50": quantile(xs, 0.5), "p80": quantile(xs, 0.8),
                "min": xs[0] if xs else 0.0, "max": xs[-1] if xs else 0.0, "mean": mean}

    def method(self) -> dict[str, Any]:
        """Schema ``Method`` dict."""
        return {"timer": self.timer, "cache": self.cache, "warmup_s": float(self.warmup_s),
                "samples": len(self.samples_us), "reps_per_sample": int(self.reps_per_sample),
                "noise_target": float(self.noise_target), "noise": self.noise,
                "noise_target_met": bool(self.noise_target_met), "time_limit_s": float(self.time_limit_s),
                "version": METHOD_VERSION}


def quantile(xs: list[float], q: float) -> float:
    """Linear-interpolation quantile of sorted ``xs`` (NumPy's default); 0.0 when empty."""
    if not xs:
        return 0.0
    pos = q * (len(xs) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median_ci(samples: list[float]) -> tuple[float, float, float]:
    """(low, median, high): a distribution-free 95% confidence interval of the median.

    Order statistics at ranks floor(n/2 - 0.98 sqrt(n)) and ceil(n/2 + 1 + 0.98 sqrt(n))
    (1-based; Le Boudec, *Performance Evaluation of Computer and Communication Systems*,
    Thm 2.1), clamped to the sample; no assumption on the distribution, which for kernel
    times is skewed with a long right tail.
    """
    xs = sorted(samples)
    n = len(xs)
    if n == 0:
        raise ValueError("no samples")
    half = _Z95 * math.sqrt(n) / 2
    j = max(1, math.floor(n / 2 - half))
    k = min(n, math.ceil(n / 2 + 1 + half))
    return xs[j - 1], quantile(xs, 0.5), xs[k - 1]


def stop_rule(samples: list[float], noise_target: float, min_samples: int) -> tuple[bool, float | None]:
    """(met, noise): noise is the 95% CI half-width of the median over the median.

    ``met`` when noise <= ``noise_target`` and there are at least ``min_samples`` samples.
    ``noise`` is None with fewer than 3 samples, or when the median is not positive (a relative
    width is then undefined); ``met`` is False then. Samples must be finite.
    """
    if any(not math.isfinite(x) for x in samples):
        raise ValueError("stop_rule: samples must be finite")
    if len(samples) < 3:
        return False, None
    lo, med, hi = median_ci(samples)
    if med <= 0:
        return False, None
    noise = (hi - lo) / 2 / med
    return (noise <= noise_target and len(samples) >= min_samples), noise


def check_args(noise_target: float, min_samples: int, max_samples: int, time_limit_s: float,
                warmup_s: float, target_sample_s: float) -> None:
    if not (math.isfinite(noise_target) and noise_target >= 0):
        raise ValueError(f"noise_target must be finite and >= 0, got {noise_target!r}")
    if min_samples < 1 or max_samples < min_samples:
        raise ValueError(f"need 1 <= min_samples <= max_samples, got {min_samples}, {max_samples}")
    if not (math.isfinite(time_limit_s) and time_limit_s > 0):
        raise ValueError(f"time_limit_s must be finite and > 0, got {time_limit_s!r}")
    if not (math.isfinite(warmup_s) and warmup_s >= 0):
        raise ValueError(f"warmup_s must be finite and >= 0, got {warmup_s!r}")
    if not (math.isfinite(target_sample_s) and target_sample_s > 0):
        raise ValueError(f"target_sample_s must be finite and > 0, got {target_sample_s!r}")
