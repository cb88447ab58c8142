"""Every kernels/*.cu compiles for sm_80 (A100) and sm_90 (H100/H200) without a GPU.

Uses NVRTC from pip (nvidia-cuda-nvrtc + cuda-bindings, in the [dev] extra) on the
exact source text robocache feeds CuPy at run time (robocache._cuda.source), with
ptxas verbose output, and prints registers, shared memory and spills per kernel.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from robocache import _cuda
from robocache._versions import VERSIONS, entry_version

ARCHS = ("sm_80", "sm_90")
ENTRY = re.compile(r"Compiling entry function '(\w+)' for '(sm_\d+)'")
USED = re.compile(r"Used (\d+) registers")
SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
SMEM = re.compile(r"(\d+) bytes smem")

# voxelize kernels per version, each in three dtypes; v3 adds float32-only and dtype-free entries (count
# and occupancy of v3 call v2's kernels, float32 means are scaled in place; the list path's mean and zero fill)
VOXELIZE_KERNELS = {"v1": ("count", "accumulate", "mean"), "v2": ("count", "accumulate", "mean", "hashed"),
                    "v3": ("hashed", "hashed_flat", "accumulate_flat", "list")}
VOXELIZE_EXTRA = {"v1": (), "v2": (), "v3": ("voxel_mean_v3_float16", "voxel_mean_v3_bfloat16",
                                             "voxel_mean_inplace_v3_float32", "voxel_zero_v3",
                                             "voxel_list_mean_v3_float16", "voxel_list_mean_v3_bfloat16",
                                             "voxel_list_mean_inplace_v3_float32", "voxel_zero_list_v3")}
# every kernel version of robocache._versions keeps its entry points (providers robocache@vN call them)
EXPECTED_ENTRIES = {
    "resample": {f"resample_{entry_version('resample', n)}_{v}_{t}" for n in VERSIONS["resample"] for v in ("float32", "float16", "bfloat16")
                 for t in ("float32", "float64")},
    "fuse": {f"fuse_{entry_version('fuse', n)}_{v}_{t}" for n in VERSIONS["fuse"] for v in ("float32", "float16", "bfloat16")
             for t in ("float32", "float64")},
    "voxelize": {f"voxel_{k}_{n}_{v}" for n in VERSIONS["voxelize"]
                 for k in VOXELIZE_KERNELS[n] for v in ("float32", "float16", "bfloat16")}
    | {e for n in VERSIONS["voxelize"] for e in VOXELIZE_EXTRA[n]},
    # robocache.EpisodeCache (kernels/episodes.cu): one batch entry per output dtype, the ring's slot update
    "episodes": {f"episodes_batch_{v}" for v in ("float32", "float16", "bfloat16")} | {"episodes_place"},
    # the column split, the shifted vectors and the staged kernel of resample and fuse
    # (kernels/rows_wide.cu; robocache/_tune.py Config.cs, Config.shift, Config.stage)
    "rows_wide": {f"{op}_{k}_{v}_{t}" for op in ("resample", "fuse") for k in ("wide", "shift", "staged", "span", "tile")
                  for v in ("float32", "float16", "bfloat16") for t in ("float32", "float64")}
    # the flat kernel (Config.stage 5)
    | {f"{op}_flat_{v}_{t}" for op in ("resample", "fuse") for v in ("float32", "float16", "bfloat16")
       for t in ("float32", "float64")},
    # resample one output element a thread (kernels/rows_spec.cu; Config.stage 4), 64- and 32-bit indices
    "rows_spec": {f"resample_spec_{v}_{t}{i}" for v in ("float32", "float16", "bfloat16") for t in ("float32", "float64")
                  for i in ("", "_i32")},
}


# The autotuner's builds of the row kernels compiled here beyond the default (robocache/_tune.py Config.options):
# the walk and the prefetch, each with one target in flight, on the GPUs the tuner runs on (sm_90).
TUNER_BUILDS = {"resample": (("-DRC_V2_SEQ=1",), ("-DRC_V2_PREFETCH_BYTES=4096",)),
                "fuse": (("-DRC_V2_SEQ=1",), ("-DRC_V2_PREFETCH_BYTES=4096",))}
TUNER_ARCH = "sm_90"


def compile_nvrtc(op: str, arch: str, extra: tuple[str, ...] = ()) -> tuple[bool, str]:
    """(compiled, NVRTC's log) of kernels/<op>.cu for ``arch``, in a process of its own: on the H200 (2026-11-29) an
    NVRTC program log came back empty in a pytest process that had run tests/gpu/test_kernels_v2_gpu.py
    test_voxelize_mean_list_path before it (every compile after it: "entry points differ", the table empty), while
    the same compiles in a fresh process passed. What a GPU test leaves in its process must not decide this one."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); from tests.test_kernels_compile import _nvrtc; "
            "print(json.dumps(_nvrtc(sys.argv[2], sys.argv[3], tuple(sys.argv[4:]))))")
    root = str(Path(__file__).resolve().parent.parent)
    what = f"the NVRTC compile of kernels/{op}.cu ({arch}{''.join(' ' + e for e in extra)})"
    path = os.environ.get("PYTHONPATH")
    try:
        run = subprocess.run([sys.executable, "-c", code, root, op, arch, *extra], capture_output=True, text=True,
                             timeout=600, env={**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else "")})
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} did not finish in 600 s")
    assert run.returncode == 0, f"{what} failed to run (exit {run.returncode}):\n{run.stderr[-4000:]}"
    try:
        ok, log = json.loads(run.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        pytest.fail(f"{what} printed no result:\nstdout: {run.stdout[-2000:]}\nstderr: {run.stderr[-2000:]}")
    return ok, log


def _nvrtc(op: str, arch: str, extra: tuple[str, ...] = ()) -> tuple[bool, str]:
    """The compile itself (in :func:`compile_nvrtc`'s child): every NVRTC call's status checked."""
    from cuda.bindings import nvrtc

    ok_ = nvrtc.nvrtcResult.NVRTC_SUCCESS
    src = _cuda.source(op).encode()
    err, prog = nvrtc.nvrtcCreateProgram(src, f"{op}.cu".encode(), 0, [], [])
    assert err == ok_, err
    opts = [f"-arch={arch}".encode(), b"--ptxas-options=-v",
            *(o.encode() for o in (*_cuda.COMPILE_OPTIONS, *extra))]
    (res,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    err, n = nvrtc.nvrtcGetProgramLogSize(prog)
    assert err == ok_, err
    log = bytes(bytearray(max(n, 2)))  # a buffer of its own (never a cached one-byte object) for NVRTC to fill
    (err,) = nvrtc.nvrtcGetProgramLog(prog, log)
    assert err == ok_, err
    nvrtc.nvrtcDestroyProgram(prog)
    return res == ok_, log.decode(errors="replace").rstrip("\x00 ")


def resource_table(log: str) -> dict[str, dict[str, int]]:
    """Per entry point: registers, spill bytes, stack frame, static shared memory."""
    rows: dict[str, dict[str, int]] = {}
    current = None
    for line in log.splitlines():
        if m := ENTRY.search(line):
            current = m.group(1)
            rows[current] = {}
        elif current and (m := SPILL.search(line)):
            rows[current].update(stack=int(m.group(1)), spill_st=int(m.group(2)), spill_ld=int(m.group(3)))
        elif current and (m := USED.search(line)):
            rows[current]["regs"] = int(m.group(1))
            sm = SMEM.search(line)
            rows[current]["smem"] = int(sm.group(1)) if sm else 0
    return rows


# sources compiled in another op's test item (the slow tier's item budget, tests/test_durations.py): every op of
# _cuda.OPS is compiled, once
COMPILED_WITH = {"rows_wide": ("rows_spec",)}
ITEM_OPS = tuple(op for op in _cuda.OPS if all(op not in more for more in COMPILED_WITH.values()))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("op", ITEM_OPS)
def test_kernel_compiles(op, arch, capsys):
    try:
        from cuda.bindings import nvrtc  # noqa: F401
    except ImportError as e:  # the [dev] extra installs it: a missing one is a broken setup, not a skip
        pytest.fail(f"NVRTC bindings missing ({e}); run `make setup` (installs the [dev] extra)")
    for one in (op, *COMPILED_WITH.get(op, ())):
        check_source(one, arch, capsys)
    assert set(ITEM_OPS).union(*COMPILED_WITH.values()) == set(_cuda.OPS)


def check_source(op: str, arch: str, capsys) -> None:
    """kernels/<op>.cu for ``arch``: compiles without warnings or spills, with exactly its entry points (and, on the
    tuner's arch, every tuner build of it)."""
    ok, log = compile_nvrtc(op, arch)
    assert ok, f"kernels/{op}.cu failed to compile for {arch}:\n{log}"
    assert log.strip(), f"NVRTC returned an empty program log for kernels/{op}.cu ({arch}): no ptxas report to check"
    assert "warning" not in log.lower(), f"kernels/{op}.cu compiles with warnings for {arch}:\n{log}"
    table = resource_table(log)
    assert set(table) == EXPECTED_ENTRIES[op], f"entry points differ: {sorted(set(table) ^ EXPECTED_ENTRIES[op])}"
    assert _cuda.first_entry(op) in table  # the entry a warm-up (robocache/bench/runner.py) loads
    with capsys.disabled():
        print(f"\n  kernels/{op}.cu for {arch}: registers / spills per kernel")
        for name, r in sorted(table.items()):
            print(f"    {name:28s} regs {r['regs']:3d}  smem {r['smem']:5d} B  stack {r['stack']:3d} B  "
                  f"spill stores {r['spill_st']} B  spill loads {r['spill_ld']} B")
    spilled = {n: r for n, r in table.items() if r["spill_st"] or r["spill_ld"]}
    assert not spilled, f"register spills (local-memory traffic) in {sorted(spilled)}"
    assert all(r["regs"] <= 255 for r in table.values())
    if arch == TUNER_ARCH:
        for extra in TUNER_BUILDS.get(op, ()):
            check_build(op, arch, extra, capsys)


def check_build(op: str, arch: str, extra: tuple[str, ...], capsys) -> None:
    """One autotuner build of a row kernel: compiles without warnings or spills, every entry point there."""
    ok, log = compile_nvrtc(op, arch, extra)
    assert ok, f"kernels/{op}.cu {' '.join(extra)} failed to compile for {arch}:\n{log}"
    assert log.strip(), f"NVRTC returned an empty program log for kernels/{op}.cu {' '.join(extra)} ({arch})"
    assert "warning" not in log.lower(), f"kernels/{op}.cu {' '.join(extra)} warns for {arch}:\n{log}"
    table = resource_table(log)
    assert set(table) == EXPECTED_ENTRIES[op]
    v2 = {n: r for n, r in table.items() if "_v2_" in n}
    with capsys.disabled():
        print(f"  kernels/{op}.cu {' '.join(extra)} for {arch}: " + ", ".join(
            f"{n.split('_v2_')[1]} {r['regs']} regs" for n, r in sorted(v2.items())))
    spilled = {n: r for n, r in table.items() if r["spill_st"] or r["spill_ld"] or r["stack"]}
    assert not spilled, f"spills or a stack frame in {' '.join(extra)}: {spilled}"


def test_tuner_builds_are_the_ones_compiled_here():
    """Every build the tuner may ask for beyond the default and the U / feature-loop builds is compiled above."""
    from robocache import _tune

    new = {b for b in _tune.builds() if any("RC_V2_SEQ" in o or "RC_V2_PREFETCH" in o for o in b)}
    assert new == set(TUNER_BUILDS["resample"]) == set(TUNER_BUILDS["fuse"])


def test_source_inlines_common_header():
    for op in _cuda.OPS:
        src = _cuda.source(op)
        assert '#include "common.cuh"' not in src and "rc_to_float" in src
