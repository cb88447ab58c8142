"""The harness's forkserver parents preload torch.compile's modules: a child forked after them must still
get CUDA (importing some inductor modules initializes CUDA, which would break every forked case)."""
from __future__ import annotations

import subprocess
import sys

CHILD = r"""
import os, sys
import torch
from robocache.providers import torch_compile
torch_compile.prepare_process_env()
for m in torch_compile.PRELOAD:
    __import__(m)
assert torch_compile.fork_safe(), "fork_safe() says the preload initialized CUDA"
pid = os.fork()
if pid == 0:
    code = 3
    try:
        x = torch.arange(8, device="cuda", dtype=torch.float32)
        code = 0 if float(x.sum().item()) == 28.0 else 4
    finally:
        os._exit(code)
_, st = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(st))
"""


def test_preloaded_modules_leave_cuda_usable_in_forked_children():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-2000:]}"
