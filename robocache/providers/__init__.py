"""Every provider a benchmark case can name, and every fact about it, in one table (:data:`_PROVIDERS`).

A provider is an implementation of the ops with the reference's signatures: robocache itself (the public
API, and each kernel version ``robocache@vN`` for the optimisation journey), the peers it is compared
against (PyTorch eager, torch.compile in two modes, CuPy, NumPy on the CPU), and the call-cost cases' own
(robocache on CuPy arrays, and the bare CuPy launch that is their floor). Tests use the peers as
cross-checks, the benchmark harness as baselines.

Each :class:`Provider` row holds what the rest of the project asks about it: its ops (or why it lacks
one), where it runs, the modules it needs, the array kind its ops take, whether a torch CUDA graph can
replay it, its readable label and dashboard colour, its role (ours, kernel version, peer, call-cost
variant, launch floor) and the grids that have cases for it. The harness (``robocache.bench``), the front
ends, the report and the dashboard read these facts here and nowhere else; :func:`info` answers for any
name found in a record (an old record's unknown provider included: a label and a stable colour from its
name). The table lives in the library beside the peers because the facts describe them (how to call them,
where they run); the presentation facts are inert strings, and importing this package still imports only
the standard library and NumPy: torch and cupy are imported inside the op functions and in
:meth:`Provider.available`.
"""
from __future__ import annotations

import hashlib
import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import cupy_provider, numpy_cpu, torch_compile, torch_eager
from .._versions import VERSIONS

OPS = ("resample", "fuse", "voxelize")
OURS = "robocache"  # the public API (the best kernel version): the provider every speedup is judged for
OURS_CPU = "robocache@numpy"  # the same public API on NumPy arrays (its CPU path): ours on a run without a GPU
VERSION_PREFIX = "robocache@"  # robocache@v1, robocache@v2, ...: kernel versions
COMPILE = "torch_compile"  # torch_compile (default mode) and torch_compile@<mode>: one peer, judged at its best
ROLES = ("ours", "version", "peer", "call", "floor")
# The grids a provider can have cases in (robocache.bench.specs builds them from :attr:`Provider.grids`): "gpu"
# the nightly grid's single-GPU points, "quick-gpu" the quick suite's (issue 25: no kernel versions, one compile
# mode, so a quick pass stays near 150 s per GPU), "sampled-gpu" the sampled suite's points (the public API and
# its peers, never the kernel versions), "cpu" every CPU point, "dispatch" the call-cost points, and the
# multi-GPU ones.
GRIDS = ("gpu", "quick-gpu", "sampled-gpu", "cpu", "dispatch", "multigpu-gpu", "multigpu-cpu")
_VERSION = re.compile(r"^v(\d+)$")

# Dashboard colours. Fixed ones are in the table; kernel versions take a light-to-dark purple ramp (v1
# lightest), other torch.compile modes an orange ramp, unknown names a palette entry picked by their name.
VERSION_COLORS = ("#c7b8e3", "#a58fd0", "#8466bb", "#663fa3", "#4b2386", "#33105f")
COMPILE_COLORS = ("#fdb863", "#e08214", "#7f3b08")
OTHER_COLORS = ("#17becf", "#bcbd22", "#e377c2", "#8c564b", "#9edae5", "#dbdb8d", "#f7b6d2", "#c49c94")


@dataclass(frozen=True)
class Provider:
    """One provider: its ops and every fact the harness, the report and the dashboard need about it."""

    name: str
    label: str  # readable name, in reports, tables and chart legends
    device: str  # "cuda" | "cpu" | "any" (runs wherever its inputs are)
    ops: dict[str, Callable[..., Any]]
    not_applicable: dict[str, str] = field(default_factory=dict)  # op -> why there is no implementation
    requires: tuple[str, ...] = ()  # modules that must import for it to run
    arrays: str = ""  # "torch" | "cupy" | "numpy": what its ops take ("": numpy on "cpu", torch otherwise)
    no_graph: str = ""  # why a torch CUDA graph cannot replay its calls ("": it can)
    color: str = ""  # the dashboard's colour ("": chosen by :func:`color` from the name)
    role: str = "peer"  # one of ROLES: ours, version (robocache@vN), peer, call (call-cost only), floor
    grids: tuple[str, ...] = ()  # the grids (GRIDS) with a case for it
    public_call: bool = False  # call-cost cases time ``robocache.<op>`` itself, not the wrapper in ``ops``
    wall: bool = False  # one of the front ends' wall-time benchmarks (the judged pair, cheap to set up)

    @property
    def array_kind(self) -> str:
        """The arrays its ops take: ``torch``, ``cupy`` or ``numpy``."""
        return self.arrays or ("numpy" if self.device == "cpu" else "torch")

    def available(self) -> tuple[bool, str]:
        """``(True, "")`` when it can run here, else ``(False, reason)``; never raises."""
        for mod in self.requires:
            try:
                importlib.import_module(mod)
            except Exception as e:  # noqa: BLE001 - a broken install is "unavailable", not a crash
                return False, f"{mod} cannot be imported: {type(e).__name__}: {e}"
        if self.device == "cuda":
            ok, why = _cuda_device_present()
            if not ok:
                return False, why
        return True, ""


def _cuda_device_present() -> tuple[bool, str]:
    # The CUDA providers run through CuPy, so ask CuPy's runtime (not torch).
    try:
        import cupy

        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - no driver raises CUDARuntimeError
        return False, f"no CUDA device: {type(e).__name__}: {e}"
    if n < 1:
        return False, "no CUDA device: CuPy sees 0 GPUs"
    return True, ""


# robocache/__init__.py imports the CUDA wrappers; import it on first call only.
def _rc(op: str, version: str | None = None) -> Callable[..., Any]:
    """robocache's ``op`` through the public wrapper's validation (one kernel ``version``, or the best)."""
    def call(*args: Any, **kwargs: Any) -> Any:
        import robocache

        if version is not None:
            kwargs["_version"] = version
        return getattr(robocache, op)(*args, **kwargs)
    call.__name__ = f"{op}_{version}" if version else op
    return call


def _bare_op(*args: Any, **kwargs: Any) -> Any:
    raise TypeError("bare_launch is the launch floor of a dispatch case, not an implementation of the op")


def _ops(mod: Any) -> dict[str, Callable[..., Any]]:
    return {op: getattr(mod, op) for op in OPS}


def _versioned() -> tuple[Provider, ...]:
    """robocache@v1, robocache@v2, ...: every kernel version, for the optimisation journey."""
    names_ = sorted({v for vs in VERSIONS.values() for v in vs}, key=lambda v: int(v[1:]))
    out = []
    for v in names_:
        ops = {op: _rc(op, v) for op, vs in VERSIONS.items() if v in vs}
        missing = {op: f"robocache has no kernel version {v} of {op}" for op in VERSIONS if op not in ops}
        out.append(Provider(f"{VERSION_PREFIX}{v}", f"robocache {v}", "cuda", ops, missing, requires=("cupy",),
                            color=_version_color(int(v[1:])), role="version", grids=("gpu",)))
    return tuple(out)


def _version_color(n: int) -> str:
    return VERSION_COLORS[min(max(n, 1), len(VERSION_COLORS)) - 1]


_CUPY_STREAM = "CuPy launches on its own (legacy) stream, which a torch CUDA graph does not capture"
_ROBOCACHE_OPS = {op: _rc(op) for op in OPS}

# The table, in the order reports and legends list providers: robocache, its kernel versions, the peers
# (torch.compile first: the peer to beat), then the call-cost cases' own.
_PROVIDERS: tuple[Provider, ...] = (
    Provider(OURS, "robocache", "cuda", _ROBOCACHE_OPS, requires=("cupy",), color="#1f77b4", role="ours",
             grids=("gpu", "quick-gpu", "sampled-gpu", "dispatch", "multigpu-gpu"), public_call=True, wall=True),
    *_versioned(),
    # the public API on NumPy arrays: what a user without a GPU calls (validation, then the NumPy reference); on a
    # CPU run the report's speedups are judged for it, as for robocache on a GPU run (views.records.ours)
    Provider(OURS_CPU, "robocache (NumPy path)", "cpu", _ROBOCACHE_OPS, arrays="numpy", no_graph="CPU provider",
             color="#08306b", role="ours", grids=("cpu",), public_call=True),
    Provider(COMPILE, "torch.compile", "any", _ops(torch_compile), requires=("torch",), color="#ff7f0e",
             grids=("gpu", "quick-gpu", "sampled-gpu", "cpu"), wall=True),
    # mode="max-autotune-no-cudagraphs": the second compiled peer; the faster mode is the one to beat. Not a
    # wall-time benchmark: its setup autotunes (minutes per shape in a fresh process). Not in the quick suite:
    # its timing processes cost 7-18 s a case on the H100 (quick at af7336), the largest share of a quick pass.
    Provider(f"{COMPILE}@max-autotune", "torch.compile (max-autotune)", "any", torch_compile.ops("max-autotune"),
             requires=("torch",), color="#a64d00", grids=("gpu", "sampled-gpu")),
    Provider("torch_eager", "torch eager", "any", _ops(torch_eager), requires=("torch",), color="#d62728",
             grids=("gpu", "quick-gpu", "sampled-gpu", "cpu", "multigpu-cpu")),
    Provider("cupy", "CuPy", "cuda", _ops(cupy_provider), requires=("cupy",), arrays="cupy",
             no_graph=_CUPY_STREAM, color="#2ca02c", grids=("gpu", "quick-gpu", "sampled-gpu")),
    Provider("numpy", "NumPy (CPU)", "cpu", _ops(numpy_cpu), arrays="numpy", no_graph="CPU provider",
             color="#7f7f7f", grids=("cpu", "multigpu-cpu"), wall=True),
    # call-cost (dispatch) cases only: the public call on CuPy arrays, and a bare CuPy RawKernel launch of a
    # kernel with the same arguments (the floor; the harness times it with robocache.bench.timing.BareLaunch)
    Provider(f"{OURS}@cupy", "robocache (CuPy arrays)", "cuda", _ROBOCACHE_OPS, requires=("cupy",), arrays="cupy",
             no_graph=_CUPY_STREAM, color="#6baed6", role="call", grids=("dispatch",), public_call=True),
    Provider("bare_launch", "bare CuPy launch", "cuda", {op: _bare_op for op in OPS}, requires=("cupy",),
             arrays="cupy", no_graph=_CUPY_STREAM, color="#525252", role="floor", grids=("dispatch",)),
)
_BY_NAME = {p.name: p for p in _PROVIDERS}


def names(grid: str | None = None, *, wall: bool | None = None, op: str | None = None) -> list[str]:
    """Provider names in table order (robocache first); only those with cases in ``grid`` when given, only the
    wall-time ones with ``wall=True``, only those that implement ``op`` when given (``robocache@v3`` is a
    voxelize kernel only: a resample case of it could only ever skip)."""
    if grid is not None and grid not in GRIDS:
        raise ValueError(f"unknown grid {grid!r}; expected one of {', '.join(GRIDS)}")
    return [p.name for p in _PROVIDERS if (grid is None or grid in p.grids) and (wall is None or p.wall == wall)
            and (op is None or op in p.ops)]


def get(name: str) -> Provider:
    """The provider called ``name``; ``ValueError`` naming the valid ones otherwise."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown provider {name!r}; expected one of {', '.join(names())}") from None


def all_providers() -> list[Provider]:
    """Every provider, in :func:`names` order."""
    return list(_PROVIDERS)


# --- facts about any name a record may carry (unknown ones included) -----------------------------------

def version_of(provider: str) -> str | None:
    """The kernel version of a ``robocache@vN`` provider (``"v2"``), else None."""
    if not provider.startswith(VERSION_PREFIX):
        return None
    v = provider[len(VERSION_PREFIX):]
    return v if _VERSION.match(v) else None


def version_number(provider: str) -> int:
    """N of ``robocache@vN`` (a large number for anything else, so versions sort first and in order)."""
    v = version_of(provider)
    return int(v[1:]) if v else 1 << 30


def compile_mode(provider: str) -> str | None:
    """The torch.compile mode a provider measures (``default`` for ``torch_compile``), else None."""
    if provider == COMPILE:
        return "default"
    if provider.startswith(COMPILE + "@"):
        return provider.split("@", 1)[1] or "default"
    return None


def role(provider: str) -> str:
    """The provider's role (:data:`ROLES`); an unknown ``robocache@vN`` is a version, other unknowns peers."""
    p = _BY_NAME.get(provider)
    return p.role if p is not None else ("version" if version_of(provider) else "peer")


def label(provider: str) -> str:
    """A provider's readable name: the table's; ``robocache@v7`` -> ``robocache v7``,
    ``torch_compile@reduce-overhead`` -> ``torch.compile (reduce-overhead)``; other names as they are."""
    p = _BY_NAME.get(provider)
    if p is not None:
        return p.label
    if version_of(provider):
        return f"robocache {version_of(provider)}"
    base, sep, variant = provider.partition("@")
    if sep and base in _BY_NAME:
        return f"{_BY_NAME[base].label} ({variant})"
    return provider


def color(provider: str) -> str:
    """The provider's dashboard colour, the same on every page and in every process: the table's; by number
    for an unknown ``robocache@vN``; from the orange ramp for another torch.compile mode; else a palette entry
    picked by a hash of the name."""
    p = _BY_NAME.get(provider)
    if p is not None and p.color:
        return p.color
    if version_of(provider):
        return _version_color(version_number(provider))
    if compile_mode(provider):
        return stable_pick(provider, COMPILE_COLORS)
    return stable_pick(provider, OTHER_COLORS)


def stable_pick(text: str, palette: tuple[str, ...]) -> str:
    """A palette entry chosen by a hash of ``text`` that does not change between processes (unlike hash())."""
    return palette[int(hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()[:8], 16) % len(palette)]


def order(provider: str) -> tuple[int, int, str]:
    """Sort key: the table's order (robocache, its versions by number, the peers, the call-cost providers);
    other torch.compile modes beside torch.compile, names the table does not hold last, by name."""
    if provider == OURS:
        return (0, 0, provider)
    if version_of(provider):
        return (1, version_number(provider), provider)
    if provider in _BY_NAME:
        return (2 + _PROVIDERS.index(_BY_NAME[provider]), 0, provider)
    if compile_mode(provider):
        return (2 + _PROVIDERS.index(_BY_NAME[COMPILE]), 1, provider)
    return (2 + len(_PROVIDERS), 0, provider)


def gpu_only(provider: str) -> bool:
    """Whether ``provider`` needs a CUDA GPU (robocache, its kernel versions and call-cost variants, CuPy, the
    bare launch); False for a name the table does not hold (a ``module:attr`` test provider)."""
    p = _BY_NAME.get(provider)
    return p.device == "cuda" if p is not None else bool(version_of(provider))
