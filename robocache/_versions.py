"""Kernel versions of each op: numbered variants beside one reference (llm.c ``dev/cuda`` habit).

Every version stays in its op's ``kernels/<op>.cu`` (entry points ``<op>_v<N>_...``) and is selectable
as a benchmark provider ``robocache@v<N>``, so one nightly run measures the whole optimisation journey
side by side. The public API (:func:`robocache.resample`, ...) always calls :data:`BEST` (the best measured
version, which a new version becomes only after it is timed on a GPU). What each
version changed, and the measurement that justified it, is in ``docs/kernels.md``.
"""
from __future__ import annotations

VERSIONS: dict[str, tuple[str, ...]] = {
    "resample": ("v1", "v2", "v3"),
    "fuse": ("v1", "v2", "v3"),
    "voxelize": ("v1", "v2", "v3"),
}
# The version the public API calls: the newest one measured on a GPU and found best (docs/kernels.md). A newer
# version is listed in VERSIONS (a provider robocache@vN, tested like the others) but becomes BEST only once
# measured (voxelize v3: docs/kernels.md, H100 nightly of 2026-11-24, mean 1.25-1.62x faster than v2).
# resample and fuse v3 (v2's row kernel with the launch configuration chosen per bucket of shapes, robocache/_tune.py;
# docs/kernels.md): measured out of sample at 8f7b57f, v3 over v2 1.14x (H100 resample), 1.07x (H100 and H200 fuse)
# in geomean; BEST since the GPU check with it public passed on both GPUs (2026-11-27: H100 at 7060e97, H200 at
# 4eb8a02, 1265-1268 GPU tests passed, 0 failed).
BEST: dict[str, str] = {"resample": "v3", "fuse": "v3", "voxelize": "v3"}
# Versions that launch an older version's entry points (kernels/<op>.cu names ``<op>_<entry version>_...``) with
# another launch rule: resample and fuse v3 launch v2's row kernel with a tuned configuration.
ENTRY_VERSION: dict[str, dict[str, str]] = {"resample": {"v3": "v2"}, "fuse": {"v3": "v2"}}
# The version of each op whose launch configuration is tuned (robocache/_tune.py): what `robocache-bench tune` runs.
TUNED: dict[str, str] = {"resample": "v3", "fuse": "v3"}
if set(BEST) != set(VERSIONS) or not all(BEST[op] in VERSIONS[op] for op in VERSIONS):
    raise ImportError(f"robocache/_versions.py: BEST {BEST} must name one listed version of every op in VERSIONS")


def entry_version(op: str, version: str) -> str:
    """The version whose entry points (``<op>_<that version>_...`` in kernels/<op>.cu) ``version`` launches."""
    return ENTRY_VERSION.get(op, {}).get(version, version)


def check(op: str, version: str | None) -> str:
    """``version`` (or the best one when None) after checking it exists for ``op``."""
    if version is None:
        return BEST[op]
    if version not in VERSIONS[op]:
        raise ValueError(f"{op} has kernel versions {', '.join(VERSIONS[op])}, not {version!r}")
    return version


def all_versions() -> tuple[str, ...]:
    """Every version name any op has, in order (``v1``, ``v2``, ...)."""
    seen: list[str] = []
    for vs in VERSIONS.values():
        seen += [v for v in vs if v not in seen]
    return tuple(sorted(seen, key=lambda v: int(v[1:])))


def require_launchers(op: str, launchers: dict[str, object]) -> None:
    """Fail at import unless ``launchers`` (an op module's version -> launch function table) has exactly the
    versions listed for ``op``: a version listed without a launch function would otherwise time another
    version's kernel under its name."""
    if op not in VERSIONS or op not in BEST:
        raise ImportError(f"robocache.{op}: robocache/_versions.py lists no kernel versions of {op!r} (VERSIONS and "
                          "BEST; docs/architecture.md, 'Add an op with a kernel')")
    if set(launchers) != set(VERSIONS[op]):
        missing = sorted(set(VERSIONS[op]) - set(launchers))
        extra = sorted(set(launchers) - set(VERSIONS[op]))
        raise ImportError(f"robocache.{op}: kernel versions without a launch function {missing}, "
                          f"launch functions of unlisted versions {extra} (robocache/_versions.py)")
