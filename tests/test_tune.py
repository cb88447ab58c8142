"""The launch-configuration chooser (robocache/_tune.py) without a GPU: configurations, buckets, the tuning
files (validated, atomic, merged), the order of choice, and the version -> launch-function tables."""
from __future__ import annotations

import json
import math
import re
import sys
import threading
import typing
from pathlib import Path

import numpy as np
import pytest

from robocache import _tune, _versions


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBOCACHE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_tune, "shipped_dir", lambda: tmp_path / "shipped")
    _tune.reset()
    yield tmp_path
    _tune.reset()


DEV = _tune.Device("Fake GPU 80GB", "9.0", 132)


def test_config_validation_and_options():
    assert _tune.DEFAULT.options() == ()
    assert _tune.Config(unroll=2, vunroll=4).options() == ("-DRC_V2_UNROLL=2", "-DRC_V2_MINB=4", "-DRC_V2_VUNROLL=4")
    for bad in ({"unroll": 3}, {"tpg": 32}, {"block": 1024}, {"lg_shift": -1}, {"unroll": True}, {"vunroll": 1.0}):
        with pytest.raises(ValueError):
            _tune.Config(**bad)
    with pytest.raises(ValueError):
        _tune.Config.from_json({"unroll": 1, "evil": 1})
    c = _tune.Config(unroll=4, lg_shift=2, tpg=1)
    assert _tune.Config.from_json(json.loads(json.dumps(c.to_json()))) == c


def test_candidates_start_with_the_default_and_have_no_duplicate_in_effect():
    for lg_nat in range(6):
        for iters in (1, 2, 8):
            cands = _tune.candidates(lg_nat, iters, 1000)
            assert cands[0] == _tune.DEFAULT
            eff = [(c.unroll, c.vunroll, c.lg_shift, c.tpg, c.cs) for c in cands]
            assert len(set(eff)) == len(eff)
            assert all(c.lg_shift <= lg_nat for c in cands)
            assert all(c.vunroll == 0 or (iters << c.lg_shift) >= 2 for c in cands)
    assert len(_tune.candidates(5, 8, 10**6)) == len(_tune.CANDIDATES)
    assert len(_tune.candidates(5, 8, 1)) == len(_tune.CANDIDATES) + 3  # and the column splits cs 1-3


def test_the_column_split_is_a_candidate_only_for_few_wide_rows():
    """Config.cs > 0 is kernels/rows_wide.cu (a launch option, no build): offered where the row kernel gives a row a
    warp and each lane loops over two vectors or more, on launches of at most WIDE_MAX_ROWS rows (the H200's
    sampled losers: fuse B5 T50 D717, 250 rows; resample B233 T3 D722 float16, 699); never beside the row kernel's
    own options; in JSON only when set, so the tables written before it load unchanged."""
    fuse_worst = _tune.candidates(5, 23, 250, n_tgt=50, n_src=234, time_bytes=4)
    assert [c.cs for c in fuse_worst if c.cs] == [1, 2, 3] and fuse_worst[0] == _tune.DEFAULT
    assert all(c == _tune.Config(cs=c.cs) for c in fuse_worst if c.cs)
    assert [c.cs for c in _tune.candidates(5, 3, 699) if c.cs] == [1]  # three trips: one halving leaves two
    for lg_nat, iters, rows in ((4, 8, 10), (5, 1, 10), (5, 8, _tune.WIDE_MAX_ROWS + 1), (5, 8, 0)):
        assert not any(c.cs for c in _tune.candidates(lg_nat, iters, rows)), (lg_nat, iters, rows)
    assert [c.cs for c in _tune.candidates(5, 8, _tune.WIDE_MAX_ROWS) if c.cs] == [1, 2, 3]
    assert [c.cs for c in _tune.exhaustive(5, 4) if c.cs] == [1, 2] and not any(c.cs for c in _tune.exhaustive(4, 9))
    for bad in ({"cs": 4}, {"cs": -1}, {"cs": True}, {"cs": 1, "tpg": 1}, {"cs": 2, "unroll": 2},
                {"cs": 1, "vunroll": 4}, {"cs": 1, "lg_shift": 1}, {"cs": 1, "seq": 1}, {"cs": 3, "prefetch": 4096}):
        with pytest.raises(ValueError):
            _tune.Config(**bad)
    wide = _tune.Config(cs=3, block=64)
    assert wide.options() == () and wide.to_json()["cs"] == 3 and "cs" not in _tune.DEFAULT.to_json()
    assert _tune.Config.from_json(json.loads(json.dumps(wide.to_json()))) == wide
    assert {c.options() for c in _tune.candidates(5, 8, 1)} <= set(_tune.builds())  # no module to pre-build


def test_shifted_vectors_are_a_candidate_only_for_rows_off_the_16_byte_grid():
    """Config.shift is kernels/rows_wide.cu's shifted vectors (a launch option, no build): offered where the row
    kernel's vectors are narrower than 16 bytes (an odd D: the H200's large sampled points at 41-56% of DRAM peak)
    on rows of SHIFT_MIN_BYTES or more; its lanes cover the aligned vectors a row may touch; never beside the row
    kernel's options or the column split; in JSON only when set."""
    assert _tune.shift_pays(4, 855 * 4) and _tune.shift_pays(8, 34 * 4) and _tune.shift_pays(2, 37 * 2)
    assert not _tune.shift_pays(16, 856 * 4) and not _tune.shift_pays(4, 7 * 4)
    assert _tune.candidates(5, 27, 34193, shifted=True)[-1] == _tune.Config(shift=1)
    assert not any(c.shift for c in _tune.candidates(5, 27, 34193))
    assert _tune.Config(shift=1) in _tune.exhaustive(5, 4, shifted=True)
    assert not any(c.shift for c in _tune.exhaustive(5, 4))
    # log2 lanes: ceil((bytes + 15) / 16) aligned vectors at most, rounded up to a power of two, a warp at most
    assert [_tune.shift_lanes(n) for n in (4, 16, 17, 33, 148, 500, 3420)] == [1, 1, 1, 2, 4, 5, 5]
    for bad in ({"shift": 2}, {"shift": 1, "cs": 1}, {"shift": 1, "tpg": 1}, {"shift": 1, "unroll": 2},
                {"shift": 1, "lg_shift": 1}, {"shift": 1, "seq": 1}, {"shift": 1, "prefetch": 4096}):
        with pytest.raises(ValueError):
            _tune.Config(**bad)
    sh = _tune.Config(shift=1, block=64)
    assert sh.options() == () and sh.to_json()["shift"] == 1 and "shift" not in _tune.DEFAULT.to_json()
    assert _tune.Config.from_json(json.loads(json.dumps(sh.to_json()))) == sh


def test_the_tile_is_a_candidate_where_a_row_takes_a_warp_and_a_block_fills():
    """Config.stage 3 is kernels/rows_wide.cu's tile (a warp's 32 targets bracketed by its lanes, then its rows by
    the whole warp): offered where the rule gives a row a whole warp and the launch fills a block, last."""
    assert _tune.tile_pays(5, _tune.STAGE_TARGETS) and not _tune.tile_pays(4, 10**6)
    assert not _tune.tile_pays(5, _tune.STAGE_TARGETS - 1)
    assert _tune.candidates(5, 8, 10**5, tiled=True)[-1] == _tune.Config(stage=3)
    assert not any(c.stage == 3 for c in _tune.candidates(5, 8, 10**5))
    assert _tune.Config(stage=3) in _tune.exhaustive(5, 8, tiled=True)
    assert _tune.Config(stage=3).options() == ()  # a launch option: no build of its own


def test_the_staged_kernel_is_a_candidate_for_narrow_rows_of_many_targets():
    """Config.stage is kernels/rows_wide.cu's staged kernel (a launch option, no build, its own block): offered where
    the rows (the widest stream's) hold at most STAGE_MAX_BYTES and the launch has a block of targets (the H200's
    mid-size sampled points at 15-55% of the ceiling); every other field at its default; in JSON only when set."""
    assert _tune.stage_pays(105 * 2, 95566) and _tune.stage_pays(_tune.STAGE_MAX_BYTES, _tune.STAGE_TARGETS)
    assert not _tune.stage_pays(_tune.STAGE_MAX_BYTES + 1, 10**6) and not _tune.stage_pays(4, _tune.STAGE_TARGETS - 1)
    assert _tune.candidates(5, 2, 95566, staged=True)[-1] == _tune.Config(stage=1)
    assert not any(c.stage for c in _tune.candidates(5, 2, 95566))
    assert _tune.Config(stage=1) in _tune.exhaustive(3, 2, staged=True)
    for bad in ({"stage": 6}, {"stage": 5, "block": 64}, {"stage": 4, "block": 64}, {"stage": 3, "block": 64},
                {"stage": 1, "block": 64},
                {"stage": 2, "shift": 1}, {"stage": 1, "shift": 1}, {"stage": 1, "cs": 1},
                {"stage": 1, "tpg": 1}, {"stage": 1, "unroll": 2}, {"stage": 1, "seq": 1}):
        with pytest.raises(ValueError):
            _tune.Config(**bad)
    st = _tune.Config(stage=1)
    assert st.options() == () and st.to_json()["stage"] == 1 and "stage" not in _tune.DEFAULT.to_json()
    assert _tune.Config.from_json(json.loads(json.dumps(st.to_json()))) == st
    # the host's block of targets is the kernel's (kernels/rows_wide.cu RC_STAGE_T)
    src = (Path(__file__).resolve().parents[1] / "kernels" / "rows_wide.cu").read_text(encoding="utf-8")
    assert re.search(rf"#define RC_STAGE_T {_tune.STAGE_TARGETS}\b", src)


def _fake_builds(monkeypatch) -> list[tuple]:
    """The plans' kernel builds recorded, not made (op, entry name, NVRTC options), on a GPU of 132 SMs."""
    import types

    from robocache import _launch as L

    seen: list[tuple] = []
    monkeypatch.setattr(L, "kernel", lambda op, name, dev, options=(): seen.append((op, name, options))
                        or types.SimpleNamespace(ptr=0))
    monkeypatch.setattr(L, "sm_count", lambda dev: 132)
    return seen


def test_the_build_for_the_calls_sizes_is_a_resample_candidate_for_narrow_rows(monkeypatch):
    """Config.stage 4 (kernels/rows_spec.cu): offered for rows of at most SPEC_MAX_BYTES; its plan launches one output
    element a thread with the sizes as arguments (one module for every shape; the 32-bit entry only where every
    offset fits), or, with SPEC_CONSTANTS (a probe's A/B), a module built with the sizes; fuse never takes it (a
    stage-4 configuration there plans the default launch)."""
    import types

    from robocache import _launch as L

    assert _tune.spec_pays(4) and _tune.spec_pays(_tune.SPEC_MAX_BYTES) and not _tune.spec_pays(_tune.SPEC_MAX_BYTES + 1)
    assert not _tune.spec_pays(0)
    assert _tune.candidates(0, 1, 2_163_420, spec=True)[-1] == _tune.Config(stage=4)
    assert not any(c.stage == 4 for c in _tune.candidates(0, 1, 2_163_420))
    assert _tune.spec_i32(12, 42, 1, 51510) and not _tune.spec_i32(2**20, 2**10, 4, 2**10)  # B*S*D = 2^32 values
    assert not _tune.spec_i32(1, 2**20, 2**10, 2**2)  # B*T*D = 2^32 outputs
    assert _tune.spec_options(12, 42, 1, 51510) == ()
    monkeypatch.setattr(_tune, "SPEC_CONSTANTS", True)
    assert _tune.spec_options(12, 42, 1, 51510) == ("-DRC_SPEC_S=12", "-DRC_SPEC_T=42", "-DRC_SPEC_D=1",
                                                   "-DRC_SPEC_N=2163420LL")
    monkeypatch.setattr(_tune, "SPEC_CONSTANTS", False)
    rs, fu = sys.modules["robocache.resample"], sys.modules["robocache.fuse"]
    seen = _fake_builds(monkeypatch)
    arr = types.SimpleNamespace(itemsize=4, data=types.SimpleNamespace(ptr=0))
    v = types.SimpleNamespace(shape=(51510, 12, 3), dtype="float32", kind="cupy", device_index=0)
    plan = rs._plan_v2(v, types.SimpleNamespace(dtype="float32"), arr, 0, 42, _tune.Config(stage=4))
    assert seen[-1] == ("rows_spec", "resample_spec_float32_float32_i32", ())
    assert plan.grid == -(-51510 * 42 * 3 // 256) and plan.block == 256 and len(plan.fl.slots) == 16
    slots = list(plan.fl.slots)
    dmult, dshift = L.fast_divmod(3)
    mult, shift = L.fast_divmod(42)
    assert slots[4:8] == [12, 42, 3, 51510 * 42 * 3] and slots[8:12] == [int(dmult), int(dshift), int(mult), int(shift)]
    assert slots[12:] == [*L.fast_divmod32(3), *L.fast_divmod32(42)]  # the 32-bit entries' dividers
    big = types.SimpleNamespace(shape=(2**10, 2**20, 4), dtype="float16", kind="cupy", device_index=0)
    plan = rs._plan_v2(big, types.SimpleNamespace(dtype="float64"), arr, 0, 8, _tune.Config(stage=4))
    assert seen[-1] == ("rows_spec", "resample_spec_float16_float64", ())
    assert list(plan.fl.slots)[12:] == [0, 0, 0, 0]  # the 64-bit entry reads no 32-bit dividers
    long_t = types.SimpleNamespace(shape=(1, 2, 1), dtype="float16", kind="cupy", device_index=0)
    plan = rs._plan_v2(long_t, types.SimpleNamespace(dtype="float32"), arr, 0, 2**31, _tune.Config(stage=4))
    assert seen[-1] == ("rows_spec", "resample_spec_float16_float32", ()) and list(plan.fl.slots)[12:] == [0, 0, 0, 0]
    pairs = [(types.SimpleNamespace(shape=(4, 9, 3), dtype="float32"), None)]
    ta = types.SimpleNamespace(shape=(4, 5), dtype="float32", kind="cupy", device_index=0)
    fu._plan_v2(pairs, ta, [(arr, arr)], 0, _tune.Config(stage=4))
    assert seen[-1][0] == "fuse" and seen[-1][1].startswith("fuse_v2_")


def test_the_flat_kernel_is_a_candidate_with_its_table_in_column_order(monkeypatch):
    """Config.stage 5 (kernels/rows_wide.cu rc_flat_block): offered for launches of 128 targets or more, at most the
    table's sixteen streams, a block's output elements below 2**31; its fuse plan: the stream table in column order
    (the kernel scans the first columns), 2**lg targets a block of 256 threads (lg in the first stream's packed field:
    128, fewer where the launch would give each SM fewer than 8 blocks), shared memory for the streams and targets;
    its resample plan the staged kernel's arguments with lg; the kernel's constants are the host's; a launch of
    fewer targets plans the default."""
    import types


    src = (Path(__file__).resolve().parents[1] / "kernels" / "rows_wide.cu").read_text(encoding="utf-8")
    assert re.search(rf"#define RC_FLAT_LG {_tune.FLAT_TARGETS.bit_length() - 1}\b", src)
    assert re.search(rf"#define RC_FLAT_THREADS {_tune.FLAT_THREADS}\b", src)
    assert re.search(r"#define RC_WIDE_MAX 16\b", src)
    assert _tune.flat_pays(128, 60, 4) and not _tune.flat_pays(127, 60, 4)
    assert _tune.flat_pays(10**6, 1, 16) and not _tune.flat_pays(10**6, 1, 17) and not _tune.flat_pays(10**6, 0, 1)
    assert _tune.flat_pays(10**6, 2**31 // 128 - 1, 2) and not _tune.flat_pays(10**6, 2**24, 2)
    assert _tune.flat_smem(16) <= 48 * 1024 and _tune.flat_smem(1) == 192 + 128 * 20 and _tune.flat_smem(2, 4) == 832
    # 128 targets a block while the launch gives every SM 8 blocks, else fewer, down to 16
    assert _tune.flat_lg(132 * 8 * 128, 132) == 7 and _tune.flat_lg(132 * 8 * 128 - 128, 132) == 6
    assert _tune.flat_lg(35872, 132) == 5 and _tune.flat_lg(300, 132) == 4 and _tune.flat_lg(10**9, 1) == 7
    assert _tune.candidates(5, 2, 95566, flat=True)[-1] == _tune.Config(stage=5)
    assert not any(c.stage == 5 for c in _tune.candidates(5, 2, 95566))
    assert _tune.Config(stage=5) in _tune.exhaustive(3, 2, flat=True)
    fl = _tune.Config(stage=5)
    assert fl.options() == () and _tune.Config.from_json(json.loads(json.dumps(fl.to_json()))) == fl
    rs, fu = sys.modules["robocache.resample"], sys.modules["robocache.fuse"]
    seen = _fake_builds(monkeypatch)
    arr = types.SimpleNamespace(itemsize=2, data=types.SimpleNamespace(ptr=0))
    dims, lens = (5, 4, 50, 1), (182, 353, 223, 88)  # s7741-47: the table sorts narrow streams first elsewhere
    pairs = [(types.SimpleNamespace(shape=(2195, s, d), dtype="bfloat16"), None) for s, d in zip(lens, dims)]
    ta = types.SimpleNamespace(shape=(2195, 257), dtype="float64", kind="cupy", device_index=0)
    plan = fu._plan_v2(pairs, ta, [(arr, arr)] * 4, 0, _tune.Config(stage=5))
    assert seen[-1] == ("rows_wide", "fuse_flat_bfloat16_float64", ())
    assert plan.grid == -(-2195 * 257 // 128) and plan.block == 256 and plan.smem == _tune.flat_smem(4)
    assert plan.slots == [0, 1, 2, 3]
    f = np.frombuffer(bytes(plan.fl.struct_buf), dtype=np.int64) if isinstance(plan.fl.struct_buf, bytes) \
        else np.asarray(plan.fl.struct_buf, dtype=np.int64)
    assert [int(f[fu.FUSE2_FIELDS * k + 4]) for k in range(4)] == [0, 5, 9, 59]  # first columns, ascending
    assert [int(f[fu.FUSE2_FIELDS * k + 3]) for k in range(4)] == list(dims)
    assert int(f[5]) == 7  # log2 of the targets a block, in the first stream's packed field
    few = [(types.SimpleNamespace(shape=(118, s, d), dtype="float32"), None) for s, d in ((270, 168), (119, 15), (899, 636))]
    plan = fu._plan_v2(few, types.SimpleNamespace(shape=(118, 304), dtype="float32", kind="cupy", device_index=0),
                       [(arr, arr)] * 3, 0, _tune.Config(stage=5))  # s4409-41: 35872 targets, 32 a block
    f = np.asarray(plan.fl.struct_buf, dtype=np.int64) if not isinstance(plan.fl.struct_buf, bytes) \
        else np.frombuffer(bytes(plan.fl.struct_buf), dtype=np.int64)
    assert int(f[5]) == 5 and plan.grid == 1121 and plan.smem == _tune.flat_smem(3, 5)
    small = [(types.SimpleNamespace(shape=(4, 9, 3), dtype="float32"), None)]  # 20 targets: the default launch
    fu._plan_v2(small, types.SimpleNamespace(shape=(4, 5), dtype="float32", kind="cupy", device_index=0),
                [(arr, arr)], 0, _tune.Config(stage=5))
    assert seen[-1][1].startswith("fuse_v2_")
    v = types.SimpleNamespace(shape=(300, 12, 3), dtype="float32", kind="cupy", device_index=0)
    plan = rs._plan_v2(v, types.SimpleNamespace(dtype="float32"), arr, 0, 42, _tune.Config(stage=5))
    assert seen[-1][1] == "resample_flat_float32_float32" and plan.block == 256  # 12600 targets: 16 a block
    assert plan.grid == -(-12600 // 16) and plan.smem == _tune.flat_smem(1, 4) and list(plan.fl.slots)[4:9] == [12, 42, 3,
                                                                                                      12600, 4]
    tiny = types.SimpleNamespace(shape=(2, 12, 3), dtype="float32", kind="cupy", device_index=0)
    rs._plan_v2(tiny, types.SimpleNamespace(dtype="float32"), arr, 0, 42, _tune.Config(stage=5))
    assert seen[-1][1].startswith("resample_v2_")  # 84 targets: the default launch
    # rows of 16-byte vectors are the row kernel's: never a candidate, and a bucket's stage 5 borrowed runs the default
    assert _tune.resample_flat_pays(4, 12600, 3) and not _tune.resample_flat_pays(16, 12600, 4)
    assert not _tune.resample_flat_pays(4, 127, 3)
    wide = types.SimpleNamespace(shape=(300, 12, 4), dtype="float32", kind="cupy", device_index=0)
    arr4 = types.SimpleNamespace(itemsize=4, data=types.SimpleNamespace(ptr=0))  # 16-byte rows, 16-byte aligned
    rs._plan_v2(wide, types.SimpleNamespace(dtype="float32"), arr4, 0, 42, _tune.Config(stage=5))
    assert seen[-1][1].startswith("resample_v2_")
    rs._plan_v2(types.SimpleNamespace(shape=(300, 12, 3), dtype="float32", kind="cupy", device_index=0),
                types.SimpleNamespace(dtype="float32"), arr4, 0, 42, _tune.Config(stage=5))
    assert seen[-1][1] == "resample_flat_float32_float32"  # 12-byte rows: 4-byte vectors


def test_the_span_is_a_candidate_where_a_blocks_source_rows_fit_its_shared_memory():
    """Config.stage 2 (kernels/rows_wide.cu rc_span_block) is offered with the staged kernel where a block's 256
    targets are expected to need a run of source rows that fits SPAN_BYTES: dense targets of narrow rows."""
    assert _tune.span_pays(52, 571, 490)  # fuse s2741-45's stream: about 300 rows of 52 bytes
    assert _tune.span_pays(292, 38, 151)  # resample s2741-06, upsampling: about 67 rows of 292 bytes
    assert not _tune.span_pays(604, 1508, 555)  # downsampling wide rows: about 700 rows of 604 bytes
    assert not _tune.span_pays(4, 100000, 10)  # sparse targets over long rows
    assert not _tune.span_pays(0, 10, 10) and not _tune.span_pays(4, 0, 10) and not _tune.span_pays(4, 10, 0)
    rows = -(-_tune.STAGE_TARGETS * 300 // 300) + 2
    edge = (_tune.SPAN_BYTES - 16) // rows
    assert _tune.span_pays(edge, 300, 300) and not _tune.span_pays(edge + 1, 300, 300)
    got = _tune.candidates(5, 2, 95566, staged=True, spanned=True)
    assert got[-2:] == [_tune.Config(stage=1), _tune.Config(stage=2)]
    assert _tune.Config(stage=2) not in _tune.candidates(5, 2, 95566, staged=False, spanned=True)
    assert _tune.Config(stage=2) in _tune.exhaustive(3, 2, staged=True, spanned=True)
    sp = _tune.Config(stage=2)
    assert sp.options() == () and sp.to_json() == {**_tune.DEFAULT.to_json(), "stage": 2}
    assert _tune.Config.from_json(sp.to_json()) == sp


def test_a_column_split_on_rows_of_one_warp_launches_the_row_kernel(cache, monkeypatch):
    """A cs > 0 choice made for another bucket (the nearest shipped bucket's, with tuning off or during a capture:
    the tuner offers cs for wide rows only) on rows of 32 vectors or fewer launches the row kernel, never 2**cs warps
    a row of idle lanes (a one-element row: 256 threads, one busy); a wider row takes the split, clamped to its runs
    of 32 vectors (as fuse's streams are). Plans built on the CPU (the kernel lookup stubbed)."""
    import types

    from robocache import _launch as L

    rs, fu = sys.modules["robocache.resample"], sys.modules["robocache.fuse"]
    # reachable: a shipped wide bucket's cs = 3 is the nearest choice for a narrow-row bucket of the same class
    ship = cache / "shipped"
    ship.mkdir()
    wide_key = _tune.bucket("resample", "float32", "float32", [(16, 256, 4)], 3, 233)
    (ship / f"{DEV.slug}.json").write_text(json.dumps(_doc({wide_key: {"config": {"cs": 3}}})))
    narrow_key = _tune.bucket("resample", "float32", "float32", [(4, 1, 100)], 50, 4096)
    assert _tune._Store(DEV).nearest(narrow_key) == _tune.Config(cs=3)

    names: list[str] = []
    monkeypatch.setattr(L, "kernel", lambda op, name, dev, options=(): names.append(name) or types.SimpleNamespace(ptr=0))
    monkeypatch.setattr(L, "sm_count", lambda dev: 132)
    arr = types.SimpleNamespace(itemsize=4, data=types.SimpleNamespace(ptr=0))  # what the plans read of an array
    # (D, cs, the split): float32 rows of 16-byte vectors where D allows (D % 4 == 0), else 8 or 4 bytes
    for d, cs, want in ((1, 3, 0), (32, 3, 0), (128, 3, 0), (132, 3, 1), (33, 1, 1), (256, 3, 1), (384, 3, 2),
                        (516, 3, 3), (2048, 2, 2)):
        v = types.SimpleNamespace(shape=(4096, 100, d), dtype="float32", kind="cupy", device_index=0)
        plan = rs._plan_v2(v, types.SimpleNamespace(dtype="float32"), arr, 0, 50, _tune.Config(cs=cs))
        if want:
            assert names[-1] == "resample_wide_float32_float32" and plan.fl.slots[9] == want, (d, cs, names[-1])
        else:
            assert names[-1] == "resample_v2_float32_float32", (d, cs, names[-1])
        assert _tune.wide_split(cs, d * 4 // L.vector_bytes(4, (d * 4,), (0, 0))) == want, (d, cs)

    t = types.SimpleNamespace(shape=(5, 50), dtype="float32", kind="cupy", device_index=0)
    narrow = [(types.SimpleNamespace(shape=(5, 40, d), dtype="float32"), None) for d in (3, 1, 128)]
    fu._plan_v2(narrow, t, [(arr, arr)] * 3, 0, _tune.Config(cs=3))
    assert names[-1] == "fuse_v2_float32_float32"  # no stream takes a split
    pairs = narrow + [(types.SimpleNamespace(shape=(5, 234, 717), dtype="float32"), None)]
    plan = fu._plan_v2(pairs, t, [(arr, arr)] * 4, 0, _tune.Config(cs=3))
    assert names[-1] == "fuse_wide_float32_float32"
    f = list(plan.fl.struct_buf)
    # slots by width (1, 3, 128, 717); an output row of 849 floats: 4-byte vectors, so the 128-feature stream has
    # 4 runs of 32 (split 2) and the 717-feature one 23 (the full split)
    assert [f[fu.FUSE2_FIELDS * k + 5] >> 24 for k in range(4)] == [0, 0, 2, 3]
    assert [f[fu.FUSE2_FIELDS * k + 3] for k in range(4)] == [1, 3, 128, 717]


def test_the_walk_and_the_prefetch_are_build_options_that_old_files_lack():
    """Config.seq (-DRC_V2_SEQ=1) and Config.prefetch (-DRC_V2_PREFETCH_BYTES=cap): validated, in the options, in
    JSON only when set, so a table or cache written before them loads as seq 0, prefetch 0 and a default-build
    choice writes what it wrote before."""
    walk, pre = _tune.Config(seq=1, tpg=16), _tune.Config(lg_shift=2, tpg=1, prefetch=4096)
    assert walk.options() == ("-DRC_V2_SEQ=1",) and pre.options() == ("-DRC_V2_PREFETCH_BYTES=4096",)
    for bad in ({"seq": 2}, {"seq": True}, {"prefetch": 100}, {"prefetch": 4096.0}, {"seq": 1, "unroll": 2},
                {"seq": 1, "vunroll": 4}, {"seq": 1, "prefetch": 4096}, {"tpg": 32}):
        with pytest.raises(ValueError):
            _tune.Config(**bad)
    for c in (walk, pre, _tune.Config(unroll=2, vunroll=4, tpg=4, prefetch=4096)):
        assert _tune.Config.from_json(json.loads(json.dumps(c.to_json()))) == c
    old = {"unroll": 1, "vunroll": 4, "lg_shift": 2, "tpg": 1, "block": 0}  # an entry of a table before them
    assert _tune.Config.from_json(old) == _tune.Config(vunroll=4, lg_shift=2, tpg=1)
    assert _tune.Config.from_json(old).to_json() == old and "seq" not in _tune.DEFAULT.to_json()
    assert walk.to_json()["seq"] == 1 and pre.to_json()["prefetch"] == 4096
    doc = {"format": _tune.FORMAT, "device": {"name": DEV.name}, "kernels": "x",
           "entries": {KEY: {"config": walk.to_json()}, KEY.replace("n20", "n21"): {"config": old}}}
    assert _tune.parse_table(json.dumps(doc), "t")
    doc["entries"][KEY]["config"] = {"seq": 1, "unroll": 4}
    with pytest.raises(_tune.TableError, match="seq"):
        _tune.parse_table(json.dumps(doc), "t")


def _kinds(cands):
    return {"seq": [c for c in cands if c.seq], "prefetch": [c for c in cands if c.prefetch]}


def test_the_walk_is_a_candidate_only_for_one_lane_upsampling():
    """D = 1 upsampling (one lane a row, T > S: the sampled worst point 63558, 31 -> 107, float32) times the
    walk with tpg 0, 4, 16 beside the 6 launches it timed before; a D = 32 or a downsampling bucket never."""
    base = _tune.candidates(0, 1, 63558 * 107)
    up = _tune.candidates(0, 1, 63558 * 107, n_tgt=107, n_src=31, time_bytes=4)
    assert up[:len(base)] == base and up[0] == _tune.DEFAULT and len(set(up)) == len(up)
    assert [c.tpg for c in _kinds(up)["seq"]] == list(_tune.SEQ_TPGS) and all(c.tpg != 1 for c in _kinds(up)["seq"])
    long_rows = _tune.candidates(0, 1, 13942 * 1630, n_tgt=1630, n_src=1500, time_bytes=8)
    assert len(_kinds(long_rows)["seq"]) == 3 and not _kinds(long_rows)["prefetch"]
    assert (len(base), len(long_rows), len(up)) == (6, 9, 11)  # the first-call cost of a D = 1 upsampling bucket
    for lg_nat, n_tgt, n_src in ((3, 50, 100), (0, 50, 100), (0, 100, 100), (1, 200, 100), (5, 2000, 100)):
        assert not _kinds(_tune.candidates(lg_nat, 1, 10**6, n_tgt=n_tgt, n_src=n_src, time_bytes=4))["seq"]
    assert all(c.tpg in _tune.TPGS and c.unroll == 1 for c in _kinds(up)["seq"])
    ex = _tune.exhaustive(0, 1, n_tgt=107, n_src=31, time_bytes=4)
    assert set(up) <= set(ex) and len(_kinds(ex)["seq"]) == len(_tune.TPGS) - 1
    assert not _kinds(_tune.exhaustive(3, 1, n_tgt=50, n_src=100, time_bytes=4))["seq"]


def test_the_prefetch_is_a_candidate_only_where_the_rows_times_fit_its_cap():
    """Short rows (B4096 S100 T50 D32 float32: 400 bytes of times, the +4.6% alert) time the default launch and
    the shipped tables' most chosen other launch with the prefetch; rows past 4096 bytes never."""
    base = _tune.candidates(3, 1, 4096 * 50)
    short = _tune.candidates(3, 1, 4096 * 50, n_tgt=50, n_src=100, time_bytes=4)
    assert short[:len(base)] == base and len(short) == len(base) + 2
    assert _kinds(short)["prefetch"] == [_tune.Config(prefetch=4096), _tune.Config(lg_shift=2, tpg=1, prefetch=4096)]
    assert not _kinds(short)["seq"]
    for n_src, tb, fits in ((1024, 4, True), (1025, 4, False), (512, 8, True), (513, 8, False), (2, 8, True)):
        assert bool(_kinds(_tune.candidates(5, 8, 1, n_tgt=1, n_src=n_src, time_bytes=tb))["prefetch"]) == fits
    assert _kinds(_tune.candidates(0, 1, 1, n_tgt=1, n_src=100, time_bytes=4))["prefetch"][1].lg_shift == 0
    ex = _tune.exhaustive(3, 1, n_tgt=50, n_src=100, time_bytes=4)
    assert set(short) <= set(ex) and not _kinds(_tune.exhaustive(3, 1))["prefetch"]
    assert len(set(ex)) == len(ex)


def test_builds_lists_every_module_a_candidate_may_need():
    every = {c.options() for lg_nat in range(6) for iters in (1, 2, 4, 8)
             for n_tgt, n_src in ((2, 1), (1, 2), (10**4, 100), (1, 10**4)) for tb in (4, 8)
             for c in _tune.candidates(lg_nat, iters, 1000, n_tgt=n_tgt, n_src=n_src, time_bytes=tb)}
    assert every == set(_tune.builds()) and _tune.builds()[0] == ()
    assert {("-DRC_V2_SEQ=1",), ("-DRC_V2_PREFETCH_BYTES=4096",)} <= every


def test_buckets_group_shapes_and_parse_back():
    k1 = _tune.bucket("resample", "float32", "float32", [(16, 8, 400)], 200, 8192)
    k2 = _tune.bucket("resample", "float32", "float32", [(16, 8, 450)], 210, 8000)
    k3 = _tune.bucket("resample", "bfloat16", "float32", [(16, 8, 400)], 200, 8192)
    assert k1 == k2 != k3
    fk = _tune.bucket("fuse", "float16", "float64", [(16, 8, 100), (4, 1, 30)], 50, 7)
    assert _tune._features(fk)[0] == "fuse|float16|float64|2"
    assert _tune._features(k1)[0] == "resample|float32|float32|1"
    assert _tune._features("garbage") is None


def _doc(entries, name=DEV.name, kernels=None):
    return {"format": _tune.FORMAT, "device": {"name": name, "cc": "9.0", "sms": 132},
            "kernels": kernels or _tune.kernels_hash(), "entries": entries}


KEY = "resample|float32|float32|n20|v16x8s8d-1"
CFG = _tune.Config(lg_shift=1, tpg=1)


@pytest.mark.parametrize("text,why", [
    ("not json", "not JSON"),
    ("[]", "not a robocache-tune/1"),
    (json.dumps({"format": "robocache-tune/1"}), "no device"),
    (json.dumps(_doc({KEY: {"config": {"unroll": 7}}})), "entry"),
    (json.dumps(_doc({"bogus-key": {"config": {}}})), "bad entry"),
    (json.dumps(_doc({KEY: {"config": {}, "us": float("nan")}})), "finite"),
])
def test_a_bad_tuning_file_is_refused_with_its_reason(text, why):
    with pytest.raises(_tune.TableError, match=why):
        _tune.parse_table(text, "x.json")


def test_order_user_cache_then_shipped_exact_then_nearest_then_default(cache):
    st = _tune._Store(DEV)
    assert st.lookup(KEY, use_user=True) == (None, "")
    assert st.nearest(KEY) is None
    # a shipped table: exact hit and nearest
    ship = cache / "shipped"
    ship.mkdir()
    near = "resample|float32|float32|n21|v16x8s8d-1"
    (ship / f"{DEV.slug}.json").write_text(json.dumps(_doc({near: {"config": CFG.to_json()}})))
    st = _tune._Store(DEV)
    assert st.lookup(near, use_user=True) == (CFG, "shipped")
    assert st.lookup(KEY, use_user=True) == (None, "")
    assert st.nearest(KEY) == CFG
    assert st.nearest("fuse|float32|float32|n20|v16x8s8d-1") is None  # another op: no neighbour
    # the user's cache wins over the shipped table, unless tuning is off
    user = _tune.Config(unroll=2, vunroll=4)
    st.save(near, {"config": user.to_json(), "us": 1.0})
    assert st.lookup(near, use_user=True) == (user, "cache")
    assert st.lookup(near, use_user=False) == (CFG, "shipped")


def test_another_gpus_table_serves_a_gpu_without_one_and_stale_kernels_are_ignored(cache):
    ship = cache / "shipped"
    ship.mkdir()
    (ship / "other-gpu.json").write_text(json.dumps(_doc({KEY: {"config": CFG.to_json()}}, name="Other GPU")))
    st = _tune._Store(DEV)
    assert st.lookup(KEY, use_user=True) == (None, "")  # not this GPU's table: no exact use
    assert st.nearest(KEY) == CFG
    (ship / "other-gpu.json").write_text(json.dumps(_doc({KEY: {"config": CFG.to_json()}}, name="Other GPU",
                                                         kernels="0" * 16)))
    assert _tune._Store(DEV).nearest(KEY) is None


def test_a_corrupt_cache_is_reported_once_and_rewritten(cache):
    st = _tune._Store(DEV)
    st.path.parent.mkdir(parents=True)
    st.path.write_text("{ truncated")
    with pytest.warns(RuntimeWarning, match="ignoring the tuning cache"):
        assert st.lookup(KEY, use_user=True) == (None, "")
    st.save(KEY, {"config": CFG.to_json(), "us": 2.0})
    doc = _tune.parse_table(st.path.read_text(), "cache")
    assert doc["entries"][KEY]["config"] == CFG.to_json()
    assert not list(st.path.parent.glob("*.tmp"))


def test_concurrent_saves_merge_every_entry(cache):
    keys = [f"resample|float32|float32|n{i}|v16x8s8d0" for i in range(24)]

    def save(k):
        _tune._Store(DEV).save(k, {"config": CFG.to_json(), "us": 1.0})

    threads = [threading.Thread(target=save, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    doc = _tune.parse_table(_tune._Store(DEV).path.read_text(), "cache")
    assert set(doc["entries"]) == set(keys)


def test_an_unwritable_cache_keeps_choices_in_memory_with_a_warning(cache, monkeypatch):
    blocker = cache / "file"
    blocker.write_text("")
    monkeypatch.setenv("ROBOCACHE_CACHE_DIR", str(blocker / "sub"))
    st = _tune._Store(DEV)
    with pytest.warns(RuntimeWarning, match="cannot write the tuning cache"):
        st.save(KEY, {"config": CFG.to_json()})


def test_write_table_refuses_what_would_not_load(cache):
    with pytest.raises(_tune.TableError):
        _tune.write_table(cache / "t.json", DEV, {"bad key": {"config": CFG.to_json()}}, {"command": "x"})
    _tune.write_table(cache / "t.json", DEV, {KEY: _tune.entry(CFG, {CFG: 3.0, _tune.DEFAULT: 4.0}, 12)},
                      {"command": "robocache-bench tune"})
    doc = _tune.parse_table((cache / "t.json").read_text(), "t")
    assert doc["entries"][KEY]["default_us"] == 4.0 and doc["provenance"]["command"] == "robocache-bench tune"


def test_autotune_switch(monkeypatch):
    for off in ("0", "false", "OFF", "no"):
        monkeypatch.setenv("ROBOCACHE_AUTOTUNE", off)
        assert not _tune.autotune_enabled()
    monkeypatch.setenv("ROBOCACHE_AUTOTUNE", "1")
    assert _tune.autotune_enabled()


def test_every_version_has_a_launch_function():
    import sys

    import robocache  # noqa: F401  (the op modules)

    for op in ("resample", "fuse", "voxelize"):
        mod = sys.modules[f"robocache.{op}"]
        assert set(mod._LAUNCH) == set(_versions.VERSIONS[op])
    with pytest.raises(ImportError, match="without a launch function"):
        _versions.require_launchers("resample", {"v1": None})


@pytest.mark.parametrize("op", ["resample", "fuse", "voxelize"])
def test_a_version_listed_without_a_launch_function_fails_the_import(op, monkeypatch):
    """The trap of issue 28: "v4" added to VERSIONS and nothing else would time another version's kernel under
    v4's name. The op module itself (a fresh copy, executed as robocache's import does) refuses to load."""
    import importlib.util
    from pathlib import Path

    import robocache

    monkeypatch.setitem(_versions.VERSIONS, op, (*_versions.VERSIONS[op], "v4"))
    spec = importlib.util.spec_from_file_location(f"robocache._{op}_probe", Path(robocache.__file__).parent / f"{op}.py")
    with pytest.raises(ImportError, match=rf"robocache\.{op}: kernel versions without a launch function \['v4'\]"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


def test_tune_command_refuses_bad_options_before_touching_a_gpu(tmp_path):
    from robocache.bench import cli, specs, tune

    assert tune.TUNE_SEED != specs.SAMPLE_SEED
    assert cli.main(["tune", "--ops", "voxelize", "--out", str(tmp_path)]) == 2
    assert cli.main(["tune", "--sample-seed", str(specs.SAMPLE_SEED), "--out", str(tmp_path)]) == 2
    assert not list(tmp_path.glob("*.json"))


def test_tuning_set_is_the_sampled_distribution_with_its_own_seed():
    from robocache.bench import specs, tune
    from robocache.bench.ops import base

    pts = base.sample_points(specs.ops.get("resample"), tune.TUNE_SEED, ("tune",), n=12, large=2)
    ev = specs.sampled_points("resample")
    assert len(pts) == 12 and not {p.tag for p in pts} & {p.tag for p in ev}
    assert all(p.params["sample_seed"] == tune.TUNE_SEED for p in pts)


def test_the_pre_pass_builds_every_module_the_tuner_may_load():
    from robocache import _cuda
    from robocache.bench import runner, specs

    cases = specs.cases("quick", device="gpu", providers=["robocache", "torch_compile"])
    builds = runner._module_builds(cases)
    want = set(_tune.builds())
    assert {b for op, b in builds if op == "resample"} == want == {b for op, b in builds if op == "fuse"}
    assert ("voxelize", ()) in builds and len(want) >= 3 and ("rows_wide", ()) in builds  # the column split's
    assert ("rows_spec", ()) in builds  # the element kernel's one module (sizes as arguments)
    # every first call's candidates are among them, whatever the geometry (the walk's and the prefetch's too)
    for lg_nat in range(6):
        for iters in (1, 2, 8):
            for n_tgt, n_src in ((2, 1), (50, 100), (107, 31), (1, 1)):
                for tb in (4, 8):
                    got = {c.options() for c in _tune.candidates(lg_nat, iters, 1, n_tgt=n_tgt, n_src=n_src,
                                                                 time_bytes=tb)}
                    assert got <= want, (lg_nat, iters, n_tgt, n_src, tb, got - want)
    assert runner._module_builds([c for c in cases if c.provider == "torch_compile"]) == []
    for op in _cuda.OPS:  # the entry a warm-up loads exists
        assert f'{_cuda.first_entry(op)}' in _cuda.source(op)


def test_tune_never_reads_the_table_it_writes(cache, monkeypatch):
    ship = cache / "shipped"
    ship.mkdir()
    (ship / f"{DEV.slug}.json").write_text(json.dumps(_doc({KEY: {"config": CFG.to_json()}})))
    assert _tune._Store(DEV).lookup(KEY, use_user=True) == (CFG, "shipped")
    monkeypatch.setattr(_tune, "USE_SHIPPED", False)
    st = _tune._Store(DEV)
    assert st.lookup(KEY, use_user=True) == (None, "") and st.nearest(KEY) is None


@pytest.fixture
def fake_gpu(cache, monkeypatch):
    """choose() on a fake device: the timing replaced by a table of times (tune() needs a GPU)."""
    monkeypatch.setattr(_tune, "device", lambda i: DEV)
    times: dict = {}
    calls = []

    def fake_tune(cands, trial, stream, budget_s=None, device_index=None):
        calls.append(list(cands))
        return {c: times.get(c, 10.0) for c in cands}, times.get("cut", False)

    monkeypatch.setattr(_tune, "tune", fake_tune)
    return times, calls


CANDS = _tune.candidates(3, 2, 1000)


def test_choose_tunes_once_persists_and_keeps_the_default_within_the_margin(fake_gpu):
    times, calls = fake_gpu
    fast = CANDS[3]
    times.update({_tune.DEFAULT: 10.0, fast: 9.8})  # 2% faster: noise may have made it, the default stays
    assert _tune.choose(0, KEY, CANDS, None, None, True) == (_tune.DEFAULT, True)
    times[fast] = 8.0
    key2 = KEY.replace("n20", "n21")
    assert _tune.choose(0, key2, CANDS, None, None, True) == (fast, True)
    assert _tune.choose(0, key2, CANDS, None, None, True) == (fast, True) and len(calls) == 2  # memory
    _tune.reset()
    assert _tune.choose(0, key2, CANDS, None, None, True) == (fast, True) and len(calls) == 2  # the file


def test_a_capture_reads_the_cache_and_a_fallback_stays_provisional(fake_gpu):
    times, calls = fake_gpu
    _tune._Store(DEV).save(KEY, {"config": CFG.to_json()})
    assert _tune.choose(0, KEY, CANDS, None, None, False) == (CFG, True)  # a file read is no stream work
    other = KEY.replace("n20", "n22")
    assert _tune.choose(0, other, CANDS, None, None, False) == (_tune.DEFAULT, False)  # provisional
    times[CANDS[2]] = 5.0
    assert _tune.choose(0, other, CANDS, None, None, True) == (CANDS[2], True) and len(calls) == 1  # tuned later


def test_a_cut_tuning_is_used_not_saved_and_a_failing_one_falls_back(fake_gpu, monkeypatch):
    times, calls = fake_gpu
    times.update({"cut": True, CANDS[1]: 5.0})
    assert _tune.choose(0, KEY, CANDS, None, None, True) == (CANDS[1], True)
    assert not _tune._Store(DEV).path.exists()

    def broken(*a, **k):
        raise RuntimeError("no GPU today")

    monkeypatch.setattr(_tune, "tune", broken)
    assert _tune.choose(0, KEY.replace("n20", "n23"), CANDS, None, None, True) == (_tune.DEFAULT, False)


def test_tune_measures_the_tuned_version_whatever_best_is():
    from robocache.bench import tune

    cases = tune.tuning_cases("resample", n=4)
    assert {c.provider for c in cases} == {f"robocache@{_versions.TUNED['resample']}"}
    assert _versions.ENTRY_VERSION["resample"][_versions.TUNED["resample"]] == "v2"


def test_each_choice_is_recorded_with_where_it_came_from(fake_gpu, monkeypatch):
    """What a record's ``launches`` will say (worker.launches_used): the configuration and its source, for the
    buckets used since the last forget_used(); a choice served from memory keeps its first source."""
    from robocache.bench import schema, worker

    times, _ = fake_gpu
    times[CANDS[2]] = 5.0
    _tune.forget_used()
    k_tuned, k_cache, k_prov = KEY, KEY.replace("n20", "n24"), KEY.replace("n20", "n25")
    _tune._Store(DEV).save(k_cache, {"config": CFG.to_json()})
    _tune.choose(0, k_tuned, CANDS, None, None, True)
    _tune.choose(0, k_cache, CANDS, None, None, True)
    _tune.choose(0, k_prov, CANDS, None, None, False)  # a capture: the default rule, provisional
    got = {c["bucket"]: (c["config"], c["source"]) for c in _tune.chosen()}
    assert got == {k_tuned: (CANDS[2].to_json(), "tuned"), k_cache: (CFG.to_json(), "cache"),
                   k_prov: (_tune.DEFAULT.to_json(), "provisional")}
    _tune.forget_used()
    _tune.choose(0, k_tuned, CANDS, None, None, True)  # from memory now: still "tuned"
    assert [(c["bucket"], c["source"]) for c in _tune.chosen()] == [(k_tuned, "tuned")]
    monkeypatch.setattr(_tune, "autotune_enabled", lambda: False)
    _tune.choose(0, KEY.replace("n20", "n26"), CANDS, None, None, True)
    assert {c["source"] for c in _tune.chosen()} == {"tuned", "default"}
    assert set(_tune.SOURCES) >= {c["source"] for c in _tune.chosen()}
    # into a record, through the schema (a source outside the schema's list would be refused on write)
    monkeypatch.setitem(sys.modules, "robocache._tune", _tune)
    launches = worker.launches_used()
    assert [x.source for x in launches] == [c["source"] for c in _tune.chosen()]
    assert set(typing.get_args(typing.get_type_hints(schema.Launch)["source"])) == set(_tune.SOURCES)


def test_every_shipped_table_was_tuned_for_these_kernels():
    """A table whose kernels hash is not the sources' is ignored at run time (stale kernels), so an edit of
    kernels/rows_v2.cuh, resample.cu, fuse.cu or common.cuh without a re-tune silently sends every user's first
    call of every bucket to the tuner or the default. The edit must come with the tables: re-tune on each GPU."""
    tables = sorted(_tune.shipped_dir().glob("*.json"))
    assert tables, f"no shipped table in {_tune.shipped_dir()}"
    stale = [p.name for p in tables if _tune.parse_table(p.read_text(), p.name)["kernels"] != _tune.kernels_hash()]
    assert not stale, (
        f"{stale} were tuned for other kernels than these ({_tune.kernels_hash()}): run "
        "`bash scripts/gpu_check.sh OUT tune` on each GPU and copy OUT/tuned/<gpu>.json to robocache/tuned/ "
        "(docs/gpu.md), or keep the kernel edit out of the default build's sources")


def _winners_curse(n_trials: int, with_runoff: bool, seed: int) -> tuple[float, float]:
    """(the share of choices that keep the one truly faster launch, the share that keep a launch no faster than
    the default) where 12 candidates are the default's equal, one is truly 5% faster and one 3% slower, timed with
    3% noise per sample: the first pass's median of three samples each, then (or not) the run-off, then the
    choice rule (:func:`_tune.pick`)."""
    rng = np.random.default_rng(seed)
    cands = [_tune.DEFAULT] + [_tune.Config(unroll=u, vunroll=v, lg_shift=s, tpg=t) for u in (1, 2) for v in (0, 4)
                               for s in (0, 1) for t in (0, 1, 4)][1:14]
    true = {c: 100.0 for c in cands}
    fast, slow = cands[7], cands[3]
    true[fast], true[slow] = 95.0, 103.0

    def sample(c):
        return true[c] * math.exp(rng.normal(0.0, 0.03))

    kept_fast = kept_noise = 0
    for _ in range(n_trials):
        first = {c: float(np.median([sample(c) for _ in range(3)])) for c in cands}
        choice = _tune.pick(_tune.runoff(first, sample) if with_runoff else first)
        kept_fast += choice == fast
        kept_noise += choice != _tune.DEFAULT and true[choice] >= true[_tune.DEFAULT]
    return kept_fast / n_trials, kept_noise / n_trials


def test_the_runoff_lifts_the_winners_curse_of_one_pass():
    """Among a dozen candidates within noise of each other, one pass's minimum is often the luckiest sample; the
    run-off (finalists timed again, interleaved) keeps the truly faster launch more often and a launch that is
    no faster than the default less often (seeded; measured: docs/kernels.md, "The tuner's run-off")."""
    one_fast, one_noise = _winners_curse(400, with_runoff=False, seed=5)
    two_fast, two_noise = _winners_curse(400, with_runoff=True, seed=5)
    assert two_fast >= one_fast + 0.1, (one_fast, two_fast)
    assert two_noise <= one_noise / 2, (one_noise, two_noise)


def test_runoff_times_only_finalists_interleaved_and_keeps_the_rest():
    d, a, b, far = (_tune.DEFAULT, _tune.Config(unroll=2), _tune.Config(tpg=4), _tune.Config(lg_shift=1))
    first = {d: 10.0, a: 9.9, b: 10.5, far: 20.0}
    order = []

    def sample(c):
        order.append(c)
        return {d: 10.0, a: 9.0, b: 11.0}[c] if len(order) % 5 else math.inf  # some samples uncovered: dropped

    out = _tune.runoff(first, sample)
    assert far not in order and out[far] == 20.0  # not within RUNOFF_WITHIN: its first time stays
    assert set(order) == {d, a, b} and len(order) == 3 * _tune.RUNOFF_ROUNDS
    firsts = [order[3 * r] for r in range(_tune.RUNOFF_ROUNDS)]
    assert len(set(firsts)) == 3  # the order rotates: no finalist always runs first
    assert out == {d: 10.0, a: 9.0, b: 11.0, far: 20.0}
    assert _tune.runoff({d: 10.0}, sample) == {d: 10.0}  # one candidate: nothing to run off
    calls = []
    t = iter([0.0, 5.0, 5.0, 5.0])  # the clock at the start, then before each round past the minimum
    _tune.runoff(first, lambda c: calls.append(c) or 10.0, budget_s=1.0, clock=lambda: next(t))
    assert len(calls) == 3 * _tune.RUNOFF_MIN_ROUNDS  # the minimum rounds always run, then the spent budget ends it
    # every candidate within the window is re-timed: none wins on its lucky first sample beside fresh medians
    # (with a cap of four finalists, the fifth's 96.8 beat the others' fresh 100s; the second review's input)
    many = {d: 100.0, **{_tune.Config(tpg=t_, lg_shift=s_): 96.0 + 0.2 * i
                         for i, (t_, s_) in enumerate([(1, 0), (4, 0), (0, 1), (1, 1), (4, 1)])}}
    assert _tune.pick(_tune.runoff(many, lambda c: 100.0)) == d
    assert _tune.pick(_tune.runoff(first, lambda c: {d: 10.0, a: 9.8, b: 11.0}[c])) == d  # within MARGIN


def test_the_users_cache_is_keyed_to_rows_wide_too_and_the_shipped_table_is_not(cache, monkeypatch):
    """An edit of kernels/rows_wide.cu (the column split, the shifted vectors, the staged kernel) changes what a
    cached choice of those launches means: the user's cache covers that file (cache_hash), so its buckets re-tune;
    the shipped tables stay keyed to the row kernels' files (kernels_hash) and keep serving."""
    assert _tune.cache_hash() != _tune.kernels_hash()
    ship = cache / "shipped"
    ship.mkdir()
    near = "resample|float32|float32|n21|v16x8s8d-1"
    (ship / f"{DEV.slug}.json").write_text(json.dumps(_doc({near: {"config": CFG.to_json()}})))
    st = _tune._Store(DEV)
    user = _tune.Config(shift=1)
    st.save(near, {"config": user.to_json(), "us": 1.0})
    assert _tune.parse_table(st.path.read_text(), "cache")["kernels"] == _tune.cache_hash()
    assert _tune._Store(DEV).lookup(near, use_user=True) == (user, "cache")
    real = _tune.kernels_hash
    monkeypatch.setattr(_tune, "kernels_hash", lambda ops=("resample", "fuse"): real(ops) + (
        "-edited" if "rows_wide" in ops else ""))  # rows_wide.cu edited, the row kernels not
    assert _tune._Store(DEV).lookup(near, use_user=True) == (CFG, "shipped")
    _tune._Store(DEV).save(KEY, {"config": CFG.to_json(), "us": 2.0})  # the stale entry is dropped, not merged
    assert set(_tune.parse_table(st.path.read_text(), "cache")["entries"]) == {KEY}


def test_a_cache_holding_a_removed_launch_is_reported_once_and_rewritten(cache):
    """A cache written while fuse a row at a time existed ({"rowwise": 1}, removed in 1494981): one warning, no
    crash, the bucket untuned, and the next save rewrites the file under cache_hash without the old entry."""
    st = _tune._Store(DEV)
    st.path.parent.mkdir(parents=True)
    old = _tune.bucket("fuse", "float32", "float32", [(4, 16, 100), (4, 8, 60)], 50, 7)
    st.path.write_text(json.dumps({"format": _tune.FORMAT, "device": {"name": DEV.name, "cc": "9.0", "sms": 132},
                                   "kernels": _tune.cache_hash(), "entries": {old: {"config": {"rowwise": 1}}}}))
    with pytest.warns(RuntimeWarning, match="ignoring the tuning cache.*rowwise") as rec:
        assert st.lookup(old, use_user=True) == (None, "")
        st.save(KEY, {"config": CFG.to_json(), "us": 2.0})
    assert len(rec) == 1
    doc = _tune.parse_table(st.path.read_text(), "cache")
    assert doc["kernels"] == _tune.cache_hash() and set(doc["entries"]) == {KEY}


def test_write_table_stamps_the_shipped_tables_hash_not_the_caches(cache):
    """`robocache-bench tune` writes a shipped table: keyed to the row kernels' hash (kernels_hash), which an edit
    of kernels/rows_wide.cu leaves valid, never to the user's cache hash."""
    _tune.write_table(cache / "t.json", DEV, {KEY: _tune.entry(CFG, {CFG: 3.0, _tune.DEFAULT: 4.0}, 12)},
                      {"command": "robocache-bench tune"})
    assert _tune.parse_table((cache / "t.json").read_text(), "t")["kernels"] == _tune.kernels_hash() != _tune.cache_hash()



def test_builds_for_call_sizes_are_kept_in_a_bounded_cache(monkeypatch):
    """rows_spec with its sizes compiled in builds a module per shape: at most _cuda.SPEC_MODULES are cached (least recently used out), a
    repeated shape is not compiled again, and every other op keeps its memoized module."""
    import types

    from robocache import _cuda

    built: list[tuple] = []

    class RawModule:
        def __init__(self, code, options):
            built.append(options)
            self.options = options

        def get_function(self, name):
            return types.SimpleNamespace(name=name, module=self)

    class Device:
        def __init__(self, i):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False
    fake = types.SimpleNamespace(RawModule=RawModule, cuda=types.SimpleNamespace(Device=Device))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(_cuda, "SPEC_MODULES", 3)
    monkeypatch.setattr(_cuda, "_SPEC", type(_cuda._SPEC)())
    monkeypatch.setattr(_tune, "SPEC_CONSTANTS", True)  # a module per shape (the probe's A/B)
    opts = [_tune.spec_options(s, 4, 1, 2) for s in (2, 3, 4, 5)]
    first = _cuda.function("rows_spec", "resample_spec_float32_float32", 0, opts[0])
    assert _cuda.function("rows_spec", "resample_spec_float32_float32", 0, opts[0]) is first and len(built) == 1
    for o in opts[1:]:
        _cuda.function("rows_spec", "resample_spec_float32_float32", 0, o)
    assert len(built) == 4 and len(_cuda._SPEC) == 3
    _cuda.function("rows_spec", "resample_spec_float32_float32", 0, opts[0])  # evicted: compiled again
    assert len(built) == 5 and first.module.options[-4:] == opts[0]
