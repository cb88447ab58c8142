"""The Triton code Inductor generates for torch_eager.resample on one shape (TORCH_LOGS=output_code), and its time."""
import sys

import torch

from robocache.providers import torch_eager

b, s, t, d = (int(x) for x in sys.argv[1:5])
dt = getattr(torch, sys.argv[5])
v = torch.randn(b, s, d, device="cuda").to(dt)
base = torch.linspace(0, 2, s, device="cuda", dtype=torch.float64)
st = torch.sort(base[None] + (torch.rand(b, s, device="cuda", dtype=torch.float64) - 0.5) * (0.6 * 2 / max(s, 2)),
                dim=1).values.float()
tt = torch.linspace(-0.02, 2.02, t, device="cuda")[None].expand(b, t).contiguous()
f = torch.compile(torch_eager.resample, dynamic=False)
f(v, st, tt)
torch.cuda.synchronize()
e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
for _ in range(20):
    f(v, st, tt)
e0.record()
for _ in range(200):
    f(v, st, tt)
e1.record()
torch.cuda.synchronize()
print(f"torch.compile B{b} S{s} T{t} D{d} {sys.argv[5]}: {e0.elapsed_time(e1) / 200 * 1e3:.1f} us per call")
