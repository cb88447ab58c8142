"""Training step: a small policy trained for a fixed number of steps from each data-loading pipeline.

Models (both take the fused observation ``x[..., :276]``: vision 256 + proprio 14 + force 6, and learn the
action ``x[..., 276:]``, 7-D, every 50 Hz step, masked past each episode's end):

- ``mlp``: 276 -> 512 -> 256 -> 7 per time step (002's MLP, widened by the 6 force features), MSE.
- ``diffusion``: a small 1-D convolutional diffusion-policy head over time: the noised action sequence and
  the observation, a learned embedding of the noise level, two conv blocks (kernel 5, GroupNorm, Mish), a
  1x1 conv to the predicted noise; DDPM objective over 100 noise levels (linear betas 1e-4..2e-2).

The step time runs from the end of the previous step to the end of this one (``loss.item()`` synchronizes):
data = waiting for the loader, the copy to the device and (robocache) the GPU resampling; compute = forward,
backward and the optimizer. The gate: the same seed gives both pipelines the same initial weights and the
same diffusion noise, so their loss curves must agree within ``LOSS_RTOL``.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from .loading import OBS_DIM, Pipeline

MODELS = ("mlp", "diffusion")
ACT_DIM = 7
LOSS_RTOL = 1e-3  # relative, per step: float32 inputs that agree to ~1e-7 drift apart this little in 20 steps
NOISE_LEVELS = 100


def build(model: str):
    import torch
    from torch import nn

    if model == "mlp":
        return nn.Sequential(nn.Linear(OBS_DIM, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                             nn.Linear(256, ACT_DIM))
    if model == "diffusion":
        class ConvHead(nn.Module):
            def __init__(self, hidden: int = 128) -> None:
                super().__init__()
                self.level = nn.Embedding(NOISE_LEVELS, hidden)
                self.inp = nn.Conv1d(OBS_DIM + ACT_DIM, hidden, 5, padding=2)
                self.n1 = nn.GroupNorm(8, hidden)
                self.mid = nn.Conv1d(hidden, hidden, 5, padding=2)
                self.n2 = nn.GroupNorm(8, hidden)
                self.out = nn.Conv1d(hidden, ACT_DIM, 1)
                self.act = nn.Mish()
                betas = torch.linspace(1e-4, 2e-2, NOISE_LEVELS, dtype=torch.float64)
                self.register_buffer("abar", torch.cumprod(1 - betas, 0).float())

            def forward(self, obs, noisy, level):
                h = self.inp(torch.cat([obs, noisy], -1).transpose(1, 2))
                h = self.act(self.n1(h + self.level(level)[:, :, None]))
                h = self.act(self.n2(self.mid(h)))
                return self.out(h).transpose(1, 2)

        return ConvHead()
    raise ValueError(f"unknown model {model!r}; expected one of {', '.join(MODELS)}")


def loss_fn(model_name: str, net, batch: dict[str, Any], gen) -> Any:
    import torch

    x, mask = batch["x"], batch["mask"].to(batch["x"].dtype)
    obs, act = x[..., :OBS_DIM], x[..., OBS_DIM:]
    if model_name == "mlp":
        err = (net(obs) - act) ** 2
    else:
        b = x.shape[0]
        level = torch.randint(0, NOISE_LEVELS, (b,), device=x.device, generator=gen)
        noise = torch.randn(act.shape, device=x.device, generator=gen)
        ab = getattr(net, "module", net).abar[level][:, None, None]
        noisy = ab.sqrt() * act + (1 - ab).sqrt() * noise
        err = (net(obs, noisy, level) - noise) ** 2
    return (err.mean(-1) * mask).sum() / mask.sum().clamp_min(1)


def train(p: Pipeline, model_name: str, *, steps: int, warmup: int, seed: int, util=None,
          profile_steps: int = 0, trace_path: str | None = None, wrap=None) -> dict[str, Any]:
    """``warmup + steps`` optimizer steps from ``p``; the last ``steps`` are timed. Returns the per-step
    times, the split, the loss of every step, and (``profile_steps`` > 0) a profile of that many more steps.
    ``wrap``: applied to the model before the optimizer is built (DDP)."""
    import torch

    from .common import sync, torch_device

    dev = torch_device(p.device)
    torch.manual_seed(seed)
    net = build(model_name).to(dev)
    if wrap is not None:  # DistributedDataParallel (pipelines/ddp.py): gradients all-reduced in backward
        net = wrap(net)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    gen = torch.Generator(device=dev)
    gen.manual_seed(seed)
    it = iter(p.loader)
    losses, per, data, transfer, resample, compute = [], [], [], [], [], []

    def step(timed: bool) -> None:
        a = time.perf_counter()
        raw = next(it)  # noqa: F821  step() runs only before the `del it` below (which ends the loader's workers)
        batch, tr, rs = p.finish(raw)
        d = time.perf_counter()
        loss = loss_fn(model_name, net, batch, gen)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))  # synchronizes
        e = time.perf_counter()
        if timed:
            per.append(e - a)
            data.append(d - a)
            transfer.append(tr)
            resample.append(rs)
            compute.append(e - d)

    t0 = time.perf_counter()
    for _ in range(warmup):
        step(False)
    sync(p.device)
    warm_s = time.perf_counter() - t0
    with util if util is not None else _Null():
        for _ in range(steps):
            step(True)
    kernels: list[dict[str, Any]] = []
    if profile_steps > 0:
        kernels = profile(lambda: step(False), profile_steps, p.device, trace_path)
    del it
    return {"per_s": per, "data_s": data, "transfer_s": transfer, "resample_s": resample, "compute_s": compute,
            "loss": losses[:warmup + steps], "warmup_s": warm_s, "kernels": kernels}


def profile(fn, steps: int, device: str, trace_path: str | None, top: int = 15) -> list[dict[str, Any]]:
    """``torch.profiler`` over ``steps`` calls of ``fn``: the kernel table (GPU kernels by self device time;
    on a CPU run, operators by self CPU time), largest first, top ``top`` rows; the trace to ``trace_path``."""
    import torch
    from torch.profiler import ProfilerActivity

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "gpu" else [])
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(steps):
            fn()
        if device == "gpu":
            torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        if device == "gpu":
            if str(getattr(e, "device_type", "")).endswith("CUDA"):
                us = float(getattr(e, "self_device_time_total", 0.0) or getattr(e, "self_cuda_time_total", 0.0))
            else:
                continue
        else:
            us = float(e.self_cpu_time_total)
        if us > 0 and not e.key.startswith("ProfilerStep"):
            rows.append((e.key, int(e.count), us))
    total = sum(r[2] for r in rows) or 1.0
    rows.sort(key=lambda r: -r[2])
    if trace_path:
        prof.export_chrome_trace(trace_path)
    return [{"name": k[:200], "calls": c, "total_us": us, "avg_us": us / max(c, 1), "share": us / total}
            for k, c, us in rows[:top]]


def curves_agree(a: list[float], b: list[float], rtol: float = LOSS_RTOL) -> dict[str, Any]:
    """Schema ``Check`` of loss curve ``b`` against ``a`` (per step ``|b - a| / max(|a|, 1e-12)``)."""
    if len(a) != len(b) or not a:
        return {"passed": False, "max_abs_err": None, "max_rel_err": None, "tolerance": rtol, "bad_fraction": 1.0}
    x, y = np.asarray(a), np.asarray(b)
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        return {"passed": False, "max_abs_err": None, "max_rel_err": None, "tolerance": rtol, "bad_fraction": 1.0}
    absd = np.abs(x - y)
    rel = absd / np.maximum(np.abs(x), 1e-12)
    return {"passed": bool((rel <= rtol).all()), "max_abs_err": float(absd.max()), "max_rel_err": float(rel.max()),
            "tolerance": rtol, "bad_fraction": float((rel > rtol).mean())}


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False
