"""robocache-bench's CLI on the grid alone (no measurement): list, provider filters, usage errors."""
from __future__ import annotations

import pytest

from robocache import _versions
from robocache.bench import cli, specs


def test_list_counts_and_upper_bound_label(capsys: pytest.CaptureFixture) -> None:
    for suite in ("quick", "nightly"):
        assert cli.main(["list", "--suite", suite]) == 0
        out = capsys.readouterr().out
        n = len(specs.cases(suite, device="gpu"))
        assert f"\n{n} cases in suite {suite} for gpu" in out
        assert "| MB (upper bound) |" in out  # Case.bytes: the params-only bound, never the record's moved bytes


def test_every_provider_is_accepted(capsys: pytest.CaptureFixture) -> None:
    versions = [f"robocache@{v}" for v in _versions.all_versions()]
    assert set(versions) | {"torch_compile@max-autotune"} <= set(specs.GPU_PROVIDERS)
    every = [*versions, "torch_compile@max-autotune", *specs.DISPATCH_PROVIDERS, *specs.GPU_PROVIDERS, "numpy"]
    assert cli.main(["list", "--suite", "nightly", "--providers", ",".join(every)]) == 0
    out = capsys.readouterr().out
    for p in set(every) - {"numpy"}:  # numpy is a CPU provider: not in the GPU listing
        assert f"| {p} |" in out, p  # terminal text: no markdown escapes (issue 16)
    assert cli.main(["list", "--providers", "robocache@v0"]) == 2
    assert "unknown providers: robocache@v0" in capsys.readouterr().err
    # the help names them all, dispatch providers included
    assert all(p in cli._PROVIDERS_HELP for p in every)
    assert "report results/ --kernels" in cli._parser().format_help()
