"""scripts/probe_common.py, the sampled-point probes' shared parts that run without a GPU: the --cases check and a
point's two harness cases."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import probe_common  # noqa: E402  (scripts/probe_common.py)

from robocache.bench import specs  # noqa: E402


def test_a_case_id_must_be_a_sampled_one_of_the_ops_given():
    good = "resample/s6113-41-B163-S3425-T632-D213"
    assert probe_common.bad_case_ids([good]) is None
    assert probe_common.bad_case_ids([good, "fuse/s1-B2-T3-4x5"], ("resample", "fuse")) is None
    for bad in ("resample", "s6113-41-B163", "resample/B256-S100-T50-D32", "resample/sx-1"):
        msg = probe_common.bad_case_ids([good, bad])
        assert msg is not None and repr(bad) in msg, bad
    assert "resample/fuse" in probe_common.bad_case_ids(["voxelize/s6113-01-B3"], ("resample", "fuse"))


def test_a_point_gives_its_robocache_and_torch_compile_cases_or_none():
    case = next(c for c in specs.cases("sampled", ops=["fuse"], providers=["robocache"], sample_seed=7019))
    pair = probe_common.sampled_pair(case.id)
    assert pair is not None and sorted(pair) == ["robocache", "torch_compile"]
    assert {c.id for c in pair.values()} == {case.id} and pair["robocache"].params == case.params
    assert probe_common.sampled_pair(case.id + "-not-drawn") is None
    assert probe_common.sampled_pair(case.id.replace("s7019-", "s7020-", 1)) is None
