"""docs/architecture.md's recipe "Add an op with a kernel", done and checked: a toy op ``toyop`` (``out = 2x + 1``
over ``x[B, L]``, one kernel version) added to a copy of the package (robocache/ and kernels/ in a temporary folder)
by editing exactly the files the recipe names, imported in this process in place of the checkout's package; then
the same copy with each step left out in turn fails the import (or the harness's first use) with an ImportError
naming that step's file, never an AttributeError at a first call. Then the recipe "Add a kernel variant": a ``v2``
of the toy op by editing exactly the three files it names, after which ``robocache@v2`` is a provider in the
nightly GPU grid; a ``v2`` listed without its launch function (or the reverse) fails the import. The CUDA source
is compiled with NVRTC (no GPU) where the [dev] extra's NVRTC is installed, as tests/test_kernels_compile.py
compiles the real kernels."""
from __future__ import annotations

import contextlib
import importlib
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
OP = "toyop"

KERNEL = r'''// toyop: out = 2 x + 1 (the toy op of tests/test_add_op.py)
#include "common.cuh"

template <typename T>
__device__ void toyop_body(const T* __restrict__ x, T* __restrict__ out, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = rc_from_float<T>(2.0f * rc_to_float(x[i]) + 1.0f);
}

extern "C" __global__ void toyop_v1_float32(const float* x, float* out, long long n) { toyop_body(x, out, n); }
extern "C" __global__ void toyop_v1_float16(const rc_half* x, rc_half* out, long long n) { toyop_body(x, out, n); }
extern "C" __global__ void toyop_v1_bfloat16(const rc_bf16* x, rc_bf16* out, long long n) { toyop_body(x, out, n); }
'''

REFERENCE = '''"""toyop's reference: 2 x + 1 in float64."""
from __future__ import annotations

import numpy as np


def toyop(x, out_dtype=None):
    r = 2.0 * np.asarray(x, dtype=np.float64) + 1.0
    return r if out_dtype is None else r.astype(out_dtype)
'''

WRAPPER = '''"""toyop: ``out = 2 x + 1`` over ``x[B, L]`` (the toy op of tests/test_add_op.py)."""
from __future__ import annotations

from typing import Any

import numpy as np

from . import _arrays as A
from . import _versions
from . import reference

BLOCK = 256


def toyop(x: Any, *, _version: str | None = None) -> Any:
    version = _versions.check("toyop", _version)
    p = A.describe("x", x)
    A.check_rank(p, 2, "[B, L]")
    A.check_value_dtype(p, on_gpu=p.on_gpu)
    if not p.on_gpu:
        return A.from_numpy_like(p, reference.toyop(A.to_numpy(p)), p.dtype)
    return _LAUNCH[version](p)


def _launch_v1(p: A.Arr) -> Any:
    with A.GpuContext(p.kind, p.device_index) as ctx:
        x = A.contiguous(p)
        out = ctx.empty(p.shape, "like", x)
        n = p.shape[0] * p.shape[1]
        ctx.launch("toyop", f"toyop_v1_{p.dtype}", max(1, min(-(-n // BLOCK), 65536)), BLOCK,
                   (A.ptr_arg(x), A.ptr_arg(out), np.int64(n)))
    return out


_LAUNCH = {"v1": _launch_v1}
_versions.require_launchers("toyop", _LAUNCH)
'''

PEER = '''

def toyop(x: np.ndarray) -> np.ndarray:
    """toyop's NumPy peer."""
    return reference.toyop(x, out_dtype=x.dtype)
'''

HARNESS = '''"""toyop in the harness: one CPU grid point."""
from __future__ import annotations

from typing import Any

import numpy as np

from .base import ITEM_SIZE, Q, Op, Point


class ToyOp(Op):
    name = "toyop"
    items_unit = "elements"

    def points(self) -> tuple[Point, ...]:
        return (Point("toyop", "B4-L64", {"B": 4, "L": 64}, "the toy op of tests/test_add_op.py", Q, ("float32",)),)

    def items(self, p: dict[str, Any]) -> int:
        return p["B"] * p["L"]

    def case_bytes(self, p: dict[str, Any], dtype: str) -> int:
        return 2 * p["B"] * p["L"] * ITEM_SIZE[dtype]

    def host_inputs(self, case: Any, rng: np.random.Generator) -> dict[str, Any]:
        return {"x": rng.standard_normal((case.params["B"], case.params["L"]))}

    def call_args(self, case, inputs, convert):
        return (convert(inputs["x"], "values"),), {}

    def rounded(self, case, args, to_host):
        return {"x": to_host(args[0])}

    def reference(self, case, rounded):
        return 2.0 * rounded["x"] + 1.0


OP = ToyOp()
'''


def _sub(old: str, new: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        assert old in text, f"the recipe's edit no longer applies: {old!r} not found"
        return text.replace(old, new, 1)
    return edit


def _append(more: str) -> Callable[[str], str]:
    return lambda text: text.rstrip("\n") + "\n" + more


def _versions_edit(text: str) -> str:
    text = _sub('"voxelize": ("v1", "v2", "v3"),\n', '"voxelize": ("v1", "v2", "v3"),\n    "toyop": ("v1",),\n')(text)
    return _sub('"voxelize": "v3"}', '"voxelize": "v3", "toyop": "v1"}')(text)


def _package_edit(text: str) -> str:
    text = _sub("from .voxelize import voxelize\n", "from .voxelize import voxelize\nfrom .toyop import toyop\n")(text)
    return _sub('__all__ = ["resample", "fuse", "voxelize",', '__all__ = ["resample", "fuse", "voxelize", "toyop",')(text)


# One entry per file the recipe names, in its order: a new file's text, or an edit of the file as it is.
STEPS: dict[str, str | Callable[[str], str]] = {
    "kernels/toyop.cu": KERNEL,
    "robocache/_cuda.py": _sub('OPS = ("resample", "fuse", "voxelize",', 'OPS = ("resample", "fuse", "voxelize", "toyop",'),
    "robocache/reference/toyop.py": REFERENCE,
    "robocache/reference/__init__.py": _append("from .toyop import toyop  # noqa: E402\n"),
    "robocache/toyop.py": WRAPPER,
    "robocache/_versions.py": _versions_edit,
    "robocache/__init__.py": _package_edit,
    "robocache/providers/__init__.py": _sub('OPS = ("resample", "fuse", "voxelize")',
                                            'OPS = ("resample", "fuse", "voxelize", "toyop")'),
    "robocache/providers/numpy_cpu.py": _append(PEER),
    "robocache/bench/ops/toyop.py": HARNESS,
    "robocache/bench/ops/__init__.py": _sub('BUILTIN = ("resample", "fuse", "voxelize")',
                                            'BUILTIN = ("resample", "fuse", "voxelize", "toyop")'),
}


def recipe_files(title: str = "Add an op with a kernel") -> list[str]:
    """The files a recipe of docs/architecture.md names, one per numbered step (``<op>`` as ``toyop``)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split(f"### {title}", 1)[1].split("\n### ", 1)[0]
    return [m.replace("<op>", OP) for m in re.findall(r"^\d+\. `([^`]+)`", section, flags=re.MULTILINE)]


def make_copy(dest: Path, steps: dict[str, str | Callable[[str], str]]) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "_kernels")
    shutil.copytree(ROOT / "robocache", dest / "robocache", ignore=ignore)
    shutil.copytree(ROOT / "kernels", dest / "kernels", ignore=ignore)
    for rel, step in steps.items():
        f = dest / rel
        f.write_text(step if isinstance(step, str) else step(f.read_text()))
    return dest


def _ours(name: str) -> bool:
    return name == "robocache" or name.startswith("robocache.")


@contextlib.contextmanager
def imported(root: Path) -> Iterator[None]:
    """``import robocache`` finds the copy at ``root`` while inside; the checkout's modules are put back after."""
    saved = {k: m for k, m in sys.modules.items() if _ours(k)}
    for k in saved:
        del sys.modules[k]
    sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    try:
        yield
    finally:
        sys.path.remove(str(root))
        for k in [k for k in sys.modules if _ours(k)]:
            del sys.modules[k]
        sys.modules.update(saved)
        importlib.invalidate_caches()


def use_everything() -> None:
    """What an op's steps make work: the package, the providers' table, the harness's registry."""
    import robocache  # noqa: F401
    import robocache.providers  # noqa: F401
    from robocache.bench import ops

    ops.names()


def test_the_recipe_names_exactly_the_files_the_toy_op_touches() -> None:
    assert recipe_files() == list(STEPS)


def test_a_toy_op_added_by_the_recipe_works_everywhere(tmp_path: Path) -> None:
    root = make_copy(tmp_path, STEPS)
    with imported(root):
        import robocache
        from robocache import _cuda, providers
        from robocache.bench import ops

        assert Path(robocache.__file__).parent == root / "robocache"
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        np.testing.assert_array_equal(robocache.toyop(x), 2 * x + 1)
        assert robocache.toyop(x).dtype == np.float32 and "toyop" in robocache.__all__
        with pytest.raises(ValueError, match="kernel versions v1, not 'v2'"):
            robocache.toyop(x, _version="v2")
        for name in ("robocache", "robocache@numpy", "robocache@v1", "numpy", "bare_launch"):
            assert OP in providers.get(name).ops, name
        np.testing.assert_array_equal(providers.get("robocache@numpy").ops[OP](x), 2 * x + 1)
        np.testing.assert_array_equal(providers.get("numpy").ops[OP](x), 2 * x + 1)
        for name in ("torch_eager", "torch_compile", "cupy"):  # peers without it: its cases skip, said why
            assert OP not in providers.get(name).ops and "has no toyop" in providers.get(name).not_applicable[OP]
        assert ops.names()[-1] == OP and ops.get(OP).name == OP
        src = _cuda.source(OP)
        assert "toyop_v1_float32" in src and "rc_from_float" in src  # common.cuh inlined
        compiled = _nvrtc(_cuda)
    if compiled is not None:
        ok, entries = compiled
        assert ok and {f"toyop_v1_{t}" for t in ("float32", "float16", "bfloat16")} <= entries


def _nvrtc(cuda_mod) -> tuple[bool, set[str]] | None:
    """The toy kernel compiled for sm_90 with NVRTC from pip (tests/test_kernels_compile.py's mechanism on the
    copy's source text); None where NVRTC is not installed."""
    try:
        import cuda.bindings.nvrtc  # noqa: F401
    except ImportError:
        return None
    from tests import test_kernels_compile as tkc

    real = tkc._cuda
    tkc._cuda = cuda_mod
    try:
        ok, log = tkc._nvrtc(OP, "sm_90")  # in this process: the copy's _cuda swapped in above
    finally:
        tkc._cuda = real
    assert log.strip(), "NVRTC returned an empty program log for the copy's toy kernel (tests/test_kernels_compile.py)"
    return ok, set(tkc.resource_table(log))


@pytest.mark.parametrize("left_out", list(STEPS))
def test_a_step_left_out_is_named(tmp_path: Path, left_out: str) -> None:
    root = make_copy(tmp_path, {k: v for k, v in STEPS.items() if k != left_out})
    dotted = left_out.removesuffix(".py").replace("/", ".")
    with imported(root), pytest.raises(ImportError) as e:
        use_everything()
    said = str(e.value)
    assert left_out in said or f"'{dotted}'" in said, said


def test_the_name_in_providers_ops_alone_says_what_is_missing(tmp_path: Path) -> None:
    """The trap of issue 28: the name added to providers.OPS and nothing else was an AttributeError."""
    root = make_copy(tmp_path, {k: v for k, v in STEPS.items() if k == "robocache/providers/__init__.py"})
    with imported(root), pytest.raises(ImportError, match=r"toyop in OPS but not a library op yet: "
                                                          r"robocache/_versions\.py lists no kernel versions"):
        use_everything()


# --- "Add a kernel variant (a version `vN` of an op)": v2 of the toy op, on top of the op's steps ---------------

KERNEL_V2 = r'''
// v2: the same body (a toy variant: the recipe's wiring is what is tested)
extern "C" __global__ void toyop_v2_float32(const float* x, float* out, long long n) { toyop_body(x, out, n); }
extern "C" __global__ void toyop_v2_float16(const rc_half* x, rc_half* out, long long n) { toyop_body(x, out, n); }
extern "C" __global__ void toyop_v2_bfloat16(const rc_bf16* x, rc_bf16* out, long long n) { toyop_body(x, out, n); }
'''

LAUNCH_V2 = '''def _launch_v2(p: A.Arr) -> Any:
    with A.GpuContext(p.kind, p.device_index) as ctx:
        x = A.contiguous(p)
        out = ctx.empty(p.shape, "like", x)
        n = p.shape[0] * p.shape[1]
        ctx.launch("toyop", f"toyop_v2_{p.dtype}", max(1, min(-(-n // BLOCK), 65536)), BLOCK,
                   (A.ptr_arg(x), A.ptr_arg(out), np.int64(n)))
    return out


'''


def _wrapper_v2(text: str) -> str:
    """The op module with v2's launch function, and its entry in ``_LAUNCH``."""
    text = _sub("_LAUNCH = {", LAUNCH_V2 + "_LAUNCH = {")(text)
    return _sub('_LAUNCH = {"v1": _launch_v1}', '_LAUNCH = {"v1": _launch_v1, "v2": _launch_v2}')(text)


# One entry per file the variant recipe names, in its order: each an edit of the file as the op's steps left it.
VARIANT_STEPS: dict[str, Callable[[str], str]] = {
    "kernels/toyop.cu": _append(KERNEL_V2),
    "robocache/toyop.py": _wrapper_v2,
    "robocache/_versions.py": _sub('"toyop": ("v1",),', '"toyop": ("v1", "v2"),'),
}


def make_variant_copy(dest: Path, steps: dict[str, Callable[[str], str]]) -> Path:
    """The toy op added (every step of the op's recipe), then ``steps`` of the variant's applied to it."""
    root = make_copy(dest, STEPS)
    for rel, step in steps.items():
        f = root / rel
        f.write_text(step(f.read_text()))
    return root


def test_the_variant_recipe_names_exactly_the_files_v2_touches() -> None:
    assert recipe_files("Add a kernel variant") == list(VARIANT_STEPS)


def test_a_kernel_variant_added_by_the_recipe_is_a_provider_in_the_gpu_grid(tmp_path: Path) -> None:
    root = make_variant_copy(tmp_path, VARIANT_STEPS)
    with imported(root):
        import robocache
        from robocache import _cuda, _versions, providers
        from robocache.bench import specs

        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        np.testing.assert_array_equal(robocache.toyop(x, _version="v2"), 2 * x + 1)
        assert _versions.BEST[OP] == "v1"  # the public API's version moves only once measured
        v2 = providers.get("robocache@v2")
        assert OP in v2.ops and "resample" in v2.ops  # beside resample's v2
        assert providers.label("robocache@v2") == "robocache v2" and providers.color("robocache@v2")
        assert providers.version_of("robocache@v2") == "v2"
        gpu = {c.provider for c in specs.cases("nightly", device="gpu", ops=[OP])}  # the journey: nightly
        assert {"robocache", "robocache@v1", "robocache@v2"} <= gpu
        assert not any(c.provider.startswith("robocache@v") for c in specs.cases("nightly", device="cpu", ops=[OP]))
        src = _cuda.source(OP)
        assert "toyop_v1_float32" in src and "toyop_v2_bfloat16" in src
        compiled = _nvrtc(_cuda)
    if compiled is not None:
        ok, entries = compiled
        assert ok and {f"toyop_v{n}_{t}" for n in (1, 2) for t in ("float32", "float16", "bfloat16")} <= entries


def test_a_variant_listed_without_its_launch_function_fails_the_import(tmp_path: Path) -> None:
    """The trap of issue 28: v2 named in VERSIONS and nothing else would time v1's kernel under v2's name."""
    root = make_variant_copy(tmp_path, {k: v for k, v in VARIANT_STEPS.items() if k != "robocache/toyop.py"})
    with imported(root), pytest.raises(ImportError, match=r"robocache\.toyop: kernel versions without a launch "
                                                          r"function \['v2'\]"):
        use_everything()


def test_a_launch_function_of_an_unlisted_version_fails_the_import(tmp_path: Path) -> None:
    root = make_variant_copy(tmp_path, {k: v for k, v in VARIANT_STEPS.items() if k != "robocache/_versions.py"})
    with imported(root), pytest.raises(ImportError, match=r"launch functions of unlisted versions \['v2'\]"):
        use_everything()
