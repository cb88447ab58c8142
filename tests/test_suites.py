"""What each suite lists on a GPU (issue 25, item 6): no case that can only skip, torch.compile compiled once
per quick shape, kernel versions per op; and a torch.compile case compiles once in its process, whatever the
input sets it is timed over."""
from __future__ import annotations

from collections import Counter

import pytest

from robocache import providers
from robocache.bench import specs, worker


def _can_only_skip(case: specs.Case, device: str = "gpu") -> str | None:
    """Why ``case`` could only ever be ``skipped`` on a ``device`` (what :func:`worker.prepare` and
    :func:`worker.measure` skip on before anything runs, with every provider available), or None."""
    prov = providers.get(case.provider)
    if case.op not in prov.ops:
        return prov.not_applicable.get(case.op, f"{case.provider} has no {case.op}")
    if device == "gpu" and prov.device == "cpu":
        return f"{case.provider} runs on the CPU only"
    if device == "cpu" and prov.device == "cuda":
        return f"{case.provider} needs a CUDA GPU"
    return None


@pytest.mark.parametrize("suite", ["quick", "nightly", "sampled"])
def test_no_case_that_can_only_skip(suite):
    for device in ("gpu", "cpu"):
        bad = [(c.key, why) for c in specs.cases(suite, device=device) if (why := _can_only_skip(c, device))]
        assert not bad, bad[:5]


def test_kernel_versions_only_where_the_op_has_them():
    from robocache._versions import VERSIONS

    night = specs.cases("nightly", device="gpu")
    for op, versions in VERSIONS.items():
        listed = {c.provider for c in night if c.op == op and providers.version_of(c.provider)}
        assert listed == {f"robocache@{v}" for v in versions}, op
    for op, versions in VERSIONS.items():  # an op lists only its own versions among the GPU providers
        assert providers.names("gpu", op=op) == [p for p in providers.names("gpu")
                                                 if providers.version_of(p) in (None, *versions)]


def test_quick_compiles_once_per_shape():
    quick = specs.cases("quick", device="gpu")
    compiled = Counter(c.id for c in quick if providers.compile_mode(c.provider))
    shapes = {c.id for c in quick if not c.dispatch}
    assert set(compiled) == shapes and set(compiled.values()) == {1}
    assert all(c.dtype == "float32" and c.provider == "torch_compile" for c in quick
               if providers.compile_mode(c.provider))
    # the quick suite measures the public API, not the kernel versions (the nightly's journey)
    assert not any(providers.version_of(c.provider) for c in quick)
    # every dtype of a quick shape still has robocache and the eager peers
    for cid, dt in {(c.id, c.dtype) for c in quick if not c.dispatch}:
        assert {"robocache", "torch_eager", "cupy"} <= {c.provider for c in quick if (c.id, c.dtype) == (cid, dt)}
    # the classic case in every dtype (the headline) and the call-cost cases with their floor
    assert {c.dtype for c in quick if c.id == "resample/B256-S100-T50-D32"} == set(specs.GPU_DTYPES)
    assert Counter(c.provider for c in quick if c.dispatch) == Counter(
        {p: 3 for p in specs.DISPATCH_PROVIDERS})


@pytest.mark.parametrize("key", ["resample/B32-S100-T50-D32/float32/torch_compile",
                                 "fuse/robot-B32-T100/float32/torch_compile",
                                 "voxelize/B1-N10000-G32-count-uniform/float32/torch_compile"])
def test_a_compile_case_compiles_once_over_its_input_sets(key):
    """The gate compiles; the other input sets a warm GPU run rotates through (same shapes, new tensors) and the
    timed calls hit the compiled code: one graph, no recompile (each would be a compile in the timing process)."""
    torch = pytest.importorskip("torch")
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    case = specs.find(key)
    prep, skip = worker.prepare(case, "cpu")
    assert skip is None
    try:
        out, chk, failed = worker.gate(case, prep)
    except Exception as e:  # noqa: BLE001 - a machine without a C++ toolchain cannot compile at all
        pytest.skip(f"torch.compile cannot compile on this machine: {type(e).__name__}: {e}")
    assert failed is None, chk
    for seed in (1, 2, 3):
        args, kwargs = specs.call_args(case, specs.host_inputs(case, seed), prep.conv)
        prep.fn_op(*args, **kwargs)
        prep.call()
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
    assert not counters["recompiles"], dict(counters["recompiles"])
