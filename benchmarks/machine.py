"""asv's machine description with the GPU: ``python -m benchmarks.machine --machine NAME``.

Does what ``asv machine --machine NAME --yes`` does (asv's defaults for os, arch, cpu, num_cpu and ram, values
already in ``~/.asv-machine.json`` kept) and adds the GPU facts asv has no field for, from the harness's
environment capture (:func:`robocache.bench.context.capture_env_in_child`, so this process stays CUDA-free):

* ``gpu``: the GPU's name (``NVIDIA H200``), or ``no GPU``; ``gpu_count``;
* ``gpu_driver``: the NVIDIA driver; ``cuda``: the CUDA version (``none`` where there is none).

``asv run --machine NAME`` then writes them into ``results/asv/NAME/machine.json`` and into every result's
``params``, so asv's UI shows and filters by them. asv keys a graph line by those params: a new driver or CUDA
starts a new line, as a new Python does (the harness's records keep one series across it).

Use it in place of ``asv machine`` before ``asv run`` (scripts/nightly.sh, scripts/gpu_check.sh).
"""
from __future__ import annotations

import argparse
import sys


def gpu_facts(device: str) -> dict[str, str]:
    """The GPU fields of the machine description for ``device`` ("gpu" or "cpu"), as strings (asv's params)."""
    from robocache.bench.context import capture_env_in_child

    env = capture_env_in_child(device, None)
    if device != "gpu":
        return {"gpu": "no GPU", "gpu_count": "0", "gpu_driver": str(env.get("driver") or "none"),
                "cuda": str(env.get("cuda") or "none")}
    return {"gpu": str(env.get("gpu_name") or "unknown GPU"), "gpu_count": str(env.get("gpu_count") or "unknown"),
            "gpu_driver": str(env.get("driver") or "unknown"), "cuda": str(env.get("cuda") or "unknown")}


def describe(name: str, device: str) -> dict[str, str]:
    """Write machine ``name``'s description (asv's fields and :func:`gpu_facts`) to asv's machine file."""
    from asv import util
    from asv.machine import Machine, MachineCollection

    try:
        known = MachineCollection.load(name)
    except util.UserError:
        known = {}
    values = {**Machine.get_defaults(), **{k: v for k, v in known.items() if v is not None},
              **gpu_facts(device), "machine": name}
    MachineCollection.save(name, values)
    return values


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m benchmarks.machine",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--machine", required=True, help="the machine name asv keys results by (as asv run --machine)")
    p.add_argument("--device", choices=("gpu", "cpu"), default=None,
                   help="the device to describe (default: ROBOCACHE_DEVICE, else detected without touching CUDA)")
    args = p.parse_args(argv)
    if not args.machine.strip() or "/" in args.machine:
        p.error(f"--machine {args.machine!r}: a non-empty name without '/'")
    from robocache.bench import frontend

    values = describe(args.machine, args.device or frontend.device_here())
    print(", ".join(f"{k}={values[k]}" for k in ("machine", "gpu", "gpu_count", "gpu_driver", "cuda")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
