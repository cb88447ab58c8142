"""Policy inference: a small transformer policy, eager vs SDPA vs torch.compile (default, max-autotune).

The policy reads 16 observation steps (276 features each), embeds them to 256, runs 4 pre-norm transformer
blocks (4 heads, MLP x4) and predicts 8 future 7-D actions. Backends, all with the same weights:

- ``eager``: attention written out (``softmax(q k^T / sqrt(d)) v``), as a user's own module would;
- ``sdpa``: the same block with ``torch.nn.functional.scaled_dot_product_attention`` (fused kernels);
- ``torch_compile``: the SDPA model under ``torch.compile`` (default mode);
- ``torch_compile@max-autotune``: the same under ``mode="max-autotune"``.

Latency is the wall time of one call, device synchronized (what a robot's control loop waits for), under
``torch.inference_mode``, p50 and p99 over the calls; peak memory is ``torch.cuda.max_memory_allocated``
over the timed calls (a CPU run records none). Each backend's output is checked against eager's first:
``|out - eager| / max(1, |eager|) <= OUT_RTOL``.
"""
from __future__ import annotations

import math
import time
from typing import Any

from ..specs import INFER_BACKENDS as BACKENDS
from ..specs import INFER_D_MODEL as D_MODEL, INFER_HEADS as HEADS, INFER_HORIZON as HORIZON
from ..specs import INFER_LAYERS as LAYERS, INFER_OBS_STEPS as OBS_STEPS

OUT_RTOL = 1e-4  # fused attention kernels reorder float32 sums


def build(attn: str):
    import torch
    from torch import nn
    from torch.nn import functional as F

    from .loading import OBS_DIM
    from .training import ACT_DIM

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.n1, self.n2 = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
            self.qkv, self.proj = nn.Linear(D_MODEL, 3 * D_MODEL), nn.Linear(D_MODEL, D_MODEL)
            self.mlp = nn.Sequential(nn.Linear(D_MODEL, 4 * D_MODEL), nn.GELU(), nn.Linear(4 * D_MODEL, D_MODEL))

        def forward(self, h):
            b, t, _ = h.shape
            q, k, v = self.qkv(self.n1(h)).view(b, t, 3, HEADS, D_MODEL // HEADS).permute(2, 0, 3, 1, 4)
            if attn == "sdpa":
                a = F.scaled_dot_product_attention(q, k, v)
            else:
                w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D_MODEL // HEADS), dim=-1)
                a = w @ v
            h = h + self.proj(a.transpose(1, 2).reshape(b, t, D_MODEL))
            return h + self.mlp(self.n2(h))

    class Policy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Linear(OBS_DIM, D_MODEL)
            self.pos = nn.Parameter(torch.randn(1, OBS_STEPS, D_MODEL) * 0.02)
            self.blocks = nn.Sequential(*[Block() for _ in range(LAYERS)])
            self.norm = nn.LayerNorm(D_MODEL)
            self.head = nn.Linear(D_MODEL, HORIZON * ACT_DIM)

        def forward(self, obs):
            h = self.norm(self.blocks(self.embed(obs) + self.pos))
            return self.head(h[:, -1]).view(-1, HORIZON, ACT_DIM)

    return Policy()


def make(backend: str, device: str, seed: int):
    """The backend's callable model (same weights for every backend: built from ``seed``)."""
    import torch

    from .common import torch_device

    if backend not in BACKENDS:
        raise ValueError(f"unknown inference backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    torch.manual_seed(seed)
    net = build("math" if backend == "eager" else "sdpa").to(torch_device(device)).eval()
    if backend.startswith("torch_compile"):
        mode = backend.partition("@")[2] or None
        return torch.compile(net, mode=mode)
    return net


def measure(backend: str, batch: int, device: str, *, seed: int = 0, time_limit_s: float = 1.0,
            min_calls: int = 20, max_calls: int = 2000, reference=None) -> dict[str, Any]:
    """Latencies (seconds, per call) of ``backend`` at ``batch``; the output compared with ``reference``."""
    import torch

    from .. import gate as gate_mod
    from ..worker import to_host
    from .common import sync, torch_device
    from .loading import OBS_DIM

    dev = torch_device(device)
    g = torch.Generator().manual_seed(seed + batch)
    obs = torch.randn(batch, OBS_STEPS, OBS_DIM, generator=g).to(dev)
    f = make(backend, device, seed)
    t0 = time.perf_counter()
    with torch.inference_mode():
        # compiles; a copy, since torch.compile's max-autotune replays CUDA graphs whose outputs the next call
        # overwrites
        out = f(obs).clone()
        sync(device)
        for _ in range(3):
            f(obs)
        sync(device)
        warm = time.perf_counter() - t0
        chk = None
        if reference is not None:
            chk = gate_mod.check(to_host(out), to_host(reference), "float32")
            chk["tolerance"] = OUT_RTOL
            chk["passed"] = chk["max_rel_err"] is not None and chk["max_rel_err"] <= OUT_RTOL
        if device == "gpu":
            torch.cuda.reset_peak_memory_stats()
        lat: list[float] = []
        start = time.perf_counter()
        while len(lat) < max_calls and (len(lat) < min_calls or time.perf_counter() - start < time_limit_s):
            a = time.perf_counter()
            f(obs)
            sync(device)
            lat.append(time.perf_counter() - a)
        peak = torch.cuda.max_memory_allocated() / 2**20 if device == "gpu" else None
    return {"lat_s": lat, "warmup_s": warm, "check": chk, "peak_mb": peak, "out": out}
