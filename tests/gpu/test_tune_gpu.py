"""The tuned dispatch (resample and fuse v3, robocache/_tune.py) on the GPU: every launch configuration the tuner
may pick computes what the default does, bit for bit, and matches the NumPy reference; a first call tunes and
persists its choice, a second process reads it back; tuning off, a bad cache and a CUDA-graph capture still give
right answers. Random inputs, never zeros; outputs poisoned first. Skipped, loudly, without a GPU (conftest.py).
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np
import pytest

import robocache
from robocache import _arrays as A
from robocache import _tune, _versions, reference

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("PyTorch sees no CUDA device", allow_module_level=True)

rs = sys.modules["robocache.resample"]
fu = sys.modules["robocache.fuse"]
TOL = {torch.float32: 2e-6, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def _times(rng, b, s):
    return np.sort(rng.uniform(0.0, 1.0, (b, s)), axis=1)


def _check(got, want, dtype, what):
    g = got.double().cpu().numpy()
    assert np.array_equal(np.isnan(g), np.isnan(want)), f"{what}: NaN pattern differs"
    err = float(np.nanmax(np.abs(g - want) / np.maximum(1.0, np.abs(want)), initial=0.0))
    assert err <= TOL[dtype], f"{what}: max rel err {err:.3g} > {TOL[dtype]}"


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    # the public API with v3 (its tuned dispatch) as the best version, through the plan cache, whatever BEST says
    monkeypatch.setitem(_versions.BEST, "resample", "v3")
    monkeypatch.setitem(_versions.BEST, "fuse", "v3")
    monkeypatch.setenv("ROBOCACHE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ROBOCACHE_AUTOTUNE", "1")
    monkeypatch.setenv("ROBOCACHE_TUNE_BUDGET_S", "1e9")  # every candidate timed: a cut tuning is not saved
    monkeypatch.setattr(_tune, "USE_SHIPPED", False)  # a shipped table's exact bucket would skip the tuning
    _tune.reset()
    rs._PLANS.clear()
    fu._PLANS.clear()
    yield
    _tune.reset()
    rs._PLANS.clear()
    fu._PLANS.clear()


SHAPES = [(3, 17, 9, 1), (5, 40, 300, 3), (7, 64, 20, 14), (2, 33, 33, 33), (4, 300, 71, 64), (3, 50, 25, 130),
          (2, 20, 90, 435), (1, 9, 5, 1024)]


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.bfloat16), ids=str)
@pytest.mark.parametrize("b,s,t,d", SHAPES)
def test_every_candidate_equals_the_default_and_the_reference(dtype, b, s, t, d):
    rng = np.random.default_rng(b * 1000 + d)
    src = _times(rng, b, s)
    tgt = rng.uniform(-0.1, 1.1, (b, t))  # unsorted, outside the range on both sides
    vals = torch.from_numpy(rng.standard_normal((b, s, d))).cuda().to(dtype)
    st, tt = torch.from_numpy(src).cuda().float(), torch.from_numpy(tgt).cuda().float()
    want = reference.resample(vals.double().cpu().numpy(), st.double().cpu().numpy(), tt.double().cpu().numpy())
    v, sa = A.describe("v", vals), A.describe("s", st)
    es, vb, n_targets, _ = rs._geometry(v, vals, 0, t)
    nvec = max(1, d * es // vb)
    lg_nat = min(5, (nvec - 1).bit_length())
    default = None
    for cfg in _tune.exhaustive(lg_nat, -(-nvec // (1 << lg_nat)), n_tgt=t, n_src=s, time_bytes=4):
        out = torch.full((b, t, d), float("nan"), device="cuda", dtype=dtype)
        rs._plan_v2(v, sa, vals, out.data_ptr(), t, cfg)(vals, st, tt, out)
        torch.cuda.synchronize()
        if default is None:
            default = out.clone()
            _check(out, want, dtype, f"default D={d}")
        else:
            assert torch.equal(out, default), f"{cfg} differs from the default at B{b} S{s} T{t} D{d} {dtype}"
    got = robocache.resample(vals, st, tt)  # the public API: tuned on this first call
    assert torch.equal(got, default)


def test_fuse_candidates_equal_the_default():
    rng = np.random.default_rng(5)
    b, t = 6, 37
    dims, lens = (3, 64, 7, 1, 130), (40, 9, 300, 2, 25)
    streams = [(torch.from_numpy(rng.standard_normal((b, s, d))).cuda().to(torch.bfloat16),
                torch.from_numpy(_times(rng, b, s)).cuda().float()) for s, d in zip(lens, dims)]
    tgt = torch.from_numpy(rng.uniform(-0.1, 1.1, (b, t))).cuda().float()
    want = reference.fuse([(v.double().cpu().numpy(), s.double().cpu().numpy()) for v, s in streams],
                          tgt.double().cpu().numpy())
    pairs = [(A.describe("v", v), A.describe("t", s)) for v, s in streams]
    ta = A.describe("tgt", tgt)
    default = None
    for cfg in (_tune.exhaustive(5, 4, n_tgt=t, n_src=max(lens), time_bytes=4) + WALKS + PREFETCHES
                + WIDES + SHIFTS + STAGES):
        out = torch.full((b, t, sum(dims)), float("nan"), device="cuda", dtype=torch.bfloat16)
        fu._plan_v2(pairs, ta, streams, out.data_ptr(), cfg)(streams, tgt, out)
        torch.cuda.synchronize()
        if default is None:
            default = out.clone()
            _check(out, want, torch.bfloat16, "fuse default")
        else:
            assert torch.equal(out, default), f"fuse {cfg} differs from the default"
    assert torch.equal(robocache.fuse(streams, tgt), default)


@pytest.mark.parametrize("time_dtype", (torch.float32, torch.float64), ids=str)
@pytest.mark.parametrize("dtype", (torch.float32, torch.float16), ids=str)
def test_the_column_split_of_wide_few_rows_equals_the_default(time_dtype, dtype):
    """kernels/rows_wide.cu where it is offered (few rows, wide rows: the H200's sampled losers fuse B5 T50 D717 and
    resample B233 T3 D722) and beside narrow streams, float64 times, NaN and clamped targets: bit for bit the row
    kernel's, and the reference's."""
    rng = np.random.default_rng(717)
    b, t = 5, 50
    dims, lens = (717, 3, 1, 130), (234, 40, 9, 25)
    streams = [(torch.from_numpy(rng.standard_normal((b, s, d))).cuda().to(dtype),
                torch.from_numpy(_times(rng, b, s)).cuda().to(time_dtype)) for s, d in zip(lens, dims)]
    tgt_np = np.sort(rng.uniform(-0.1, 1.1, (b, t)), axis=1)
    tgt_np[0, 3] = np.nan
    tgt = torch.from_numpy(tgt_np).cuda().to(time_dtype)
    for name, ss in (("fuse", streams), ("one stream", streams[:1])):
        want = reference.fuse([(v.double().cpu().numpy(), s.double().cpu().numpy()) for v, s in ss],
                              tgt.double().cpu().numpy())
        pairs = [(A.describe("v", v), A.describe("t", s)) for v, s in ss]
        default = None
        for cfg in [_tune.DEFAULT, *WIDES, *SHIFTS, *STAGES]:
            out = torch.full((b, t, sum(v.shape[2] for v, _ in ss)), float("nan"), device="cuda", dtype=dtype)
            fu._plan_v2(pairs, A.describe("tgt", tgt), ss, out.data_ptr(), cfg)(ss, tgt, out)
            torch.cuda.synchronize()
            _check(out, want, dtype, f"{name} {cfg} {dtype} {time_dtype}")
            if default is None:
                default = out.clone()
            else:
                assert torch.equal(out.nan_to_num(7.0), default.nan_to_num(7.0)), f"{name} {cfg} differs"
    vals = torch.from_numpy(rng.standard_normal((233, 4, 722))).cuda().to(dtype)
    st = torch.from_numpy(_times(rng, 233, 4)).cuda().to(time_dtype)
    tt = torch.from_numpy(rng.uniform(-0.1, 1.1, (233, 3))).cuda().to(time_dtype)
    want = reference.resample(vals.double().cpu().numpy(), st.double().cpu().numpy(), tt.double().cpu().numpy())
    v, sa = A.describe("v", vals), A.describe("s", st)
    default = None
    for cfg in [_tune.DEFAULT, *WIDES, *SHIFTS, *STAGES]:
        out = torch.full((233, 3, 722), float("nan"), device="cuda", dtype=dtype)
        rs._plan_v2(v, sa, vals, out.data_ptr(), 3, cfg)(vals, st, tt, out)
        torch.cuda.synchronize()
        _check(out, want, dtype, f"resample {cfg} {dtype} {time_dtype}")
        if default is None:
            default = out.clone()
        else:
            assert torch.equal(out, default), f"resample {cfg} differs from the default"


# The tuner's build choices (Config.seq: the walk, -DRC_V2_SEQ=1; Config.prefetch: -DRC_V2_PREFETCH_BYTES) on every
# rows-per-group value, whatever the shape (the tuner offers them on some shapes only; they must be right on all).
WALKS = [_tune.Config(seq=1, tpg=tpg) for tpg in _tune.TPGS] + [_tune.Config(seq=1, tpg=4, lg_shift=1),
                                                               _tune.Config(seq=1, tpg=16, block=64)]
PREFETCHES = [_tune.Config(prefetch=_tune.PREFETCH_CAP, lg_shift=sh, tpg=tpg, unroll=u)
              for sh, tpg, u in ((0, 0, 1), (2, 1, 1), (0, 4, 2), (1, 16, 4))]
# The column split (Config.cs: kernels/rows_wide.cu), small blocks; on rows of 32 vectors or fewer the row kernel's
# launch (_tune.wide_split 0), on rows just past them (33 vectors) a second warp with lanes without a vector
WIDES = [_tune.Config(cs=cs, block=blk) for cs, blk in ((1, 0), (2, 64), (3, 0), (3, 256))]
# The shifted vectors (Config.shift: kernels/rows_wide.cu rc_shift_row), the rule's block and a small one
SHIFTS = [_tune.Config(shift=1), _tune.Config(shift=1, block=64)]
# The staged kernel (Config.stage: kernels/rows_wide.cu rc_staged_block), blocks of 256 targets, and its span
# (stage 2, rc_span_block: a block's source rows in shared memory where they fit, else the staged copy)
# and the tile (stage 3, rc_tile_warp: a warp's 32 targets bracketed by its lanes, rows by the row kernel's vectors)
# and the build for the call's sizes (stage 4, kernels/rows_spec.cu, resample only; fuse plans its default for it)
# and the flat kernel (stage 5, rc_flat_block: a block's 16-128 targets of every stream, its output walked flat, where
# the launch has 128 targets)
STAGES = [_tune.Config(stage=1), _tune.Config(stage=2), _tune.Config(stage=3), _tune.Config(stage=4),
          _tune.Config(stage=5)]
# (B, S, T, D): D = 1 and 4-float rows (one lane), upsampling with runs longer than a row (T < 16: a group's run
# crosses rows), downsampling (walks past their cap), rows of times over the prefetch cap (S = 1500 float32,
# 600 float64), a single source sample
CHOICE_SHAPES = [(6, 31, 107, 1), (5, 3, 7, 1), (3, 25, 400, 4), (4, 300, 40, 1), (2, 1500, 3100, 1),
                 (3, 600, 900, 2), (2, 1, 9, 1), (7, 100, 50, 32)]


@pytest.mark.parametrize("time_dtype", (torch.float32, torch.float64), ids=str)
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
@pytest.mark.parametrize("b,s,t,d", CHOICE_SHAPES)
def test_the_walk_and_the_prefetch_equal_the_default_and_the_reference(time_dtype, dtype, b, s, t, d):
    rng = np.random.default_rng(b * 7919 + s * 31 + t)
    src = _times(rng, b, s)
    src[:, s // 3: s // 3 + min(3, s)] = src[:, s // 3: s // 3 + 1]  # repeated source times: the last one wins
    src = np.sort(src, axis=1)
    sorted_t = np.sort(rng.uniform(-0.1, 1.1, (b, t)), axis=1)  # the walk's case: non-decreasing runs
    unsorted = rng.uniform(-0.1, 1.1, (b, t))  # every target from the search
    vals = torch.from_numpy(rng.standard_normal((b, s, d))).cuda().to(dtype)
    st = torch.from_numpy(src).cuda().to(time_dtype)
    v, sa = A.describe("v", vals), A.describe("s", st)
    for name, tgt in (("sorted", sorted_t), ("unsorted", unsorted)):
        tt = torch.from_numpy(tgt).cuda().to(time_dtype)
        want = reference.resample(vals.double().cpu().numpy(), st.double().cpu().numpy(), tt.double().cpu().numpy())
        default = None
        for cfg in [_tune.DEFAULT, *WALKS, *PREFETCHES, *WIDES, *SHIFTS, *STAGES]:
            out = torch.full((b, t, d), float("nan"), device="cuda", dtype=dtype)
            rs._plan_v2(v, sa, vals, out.data_ptr(), t, cfg)(vals, st, tt, out)
            torch.cuda.synchronize()
            what = f"{cfg} B{b} S{s} T{t} D{d} {dtype} {time_dtype} {name} targets"
            _check(out, want, dtype, what)
            if default is None:
                default = out.clone()
            else:
                assert torch.equal(out, default), f"{what} differs from the default"


def test_a_one_lane_upsampling_bucket_times_the_walk_and_persists_its_choice(tmp_path):
    """The public call of a D = 1 upsampling shape (the sampled worst point's class) times the walk's candidates
    on its first call and writes whatever won into the cache; the answer equals v2's."""
    rng = np.random.default_rng(3)
    b, s, t = 512, 31, 107
    vals = torch.from_numpy(rng.standard_normal((b, s, 1))).cuda().float()
    st = torch.from_numpy(_times(rng, b, s)).cuda().float()
    tt = torch.from_numpy(np.sort(rng.uniform(0, 1, (b, t)), axis=1)).cuda().float()
    ref = robocache.resample(vals, st, tt, _version="v2")
    assert torch.equal(robocache.resample(vals, st, tt), ref)
    path = tmp_path / "cache" / f"tune-{_tune.device(0).slug}.json"
    (key, entry), = _tune.parse_table(path.read_text(), str(path))["entries"].items()
    # D = 1 float32: one 4-byte vector a row (too short for the shifted vectors), the staged kernel's rows
    want = _tune.candidates(0, 1, b * t, n_tgt=t, n_src=s, time_bytes=4, shifted=_tune.shift_pays(4, 4),
                            staged=_tune.stage_pays(4, b * t), spanned=_tune.span_pays(4, s, t),
                            spec=_tune.spec_pays(4), flat=_tune.flat_pays(b * t, 1, 1))
    assert entry["of"] == entry["candidates"] == len(want) and any(c.seq for c in want)
    assert any(c.prefetch for c in want)


def _inputs(b=64, s=200, t=100, d=14):
    rng = np.random.default_rng(1)
    return (torch.from_numpy(rng.standard_normal((b, s, d))).cuda().float(),
            torch.from_numpy(_times(rng, b, s)).cuda().float(),
            torch.from_numpy(np.sort(rng.uniform(0, 1, (b, t)), axis=1)).cuda().float())


def test_first_call_tunes_and_persists_and_a_new_process_reads_it_back(tmp_path):
    vals, st, tt = _inputs()
    before = dict(_tune.STATS)
    ref = robocache.resample(vals, st, tt, _version="v2")
    got = robocache.resample(vals, st, tt)
    assert torch.equal(got, ref)
    assert _tune.STATS["buckets_tuned"] == before["buckets_tuned"] + 1
    path = tmp_path / "cache" / f"tune-{_tune.device(0).slug}.json"
    doc = _tune.parse_table(path.read_text(), str(path))
    (key, entry), = doc["entries"].items()
    assert key.startswith("resample|float32|float32|") and entry["candidates"] == entry["of"] >= 2
    assert entry["us"] <= entry["default_us"]
    # as a new process: memory and plans forgotten, the file read back, nothing tuned again
    _tune.reset()
    rs._PLANS.clear()
    assert torch.equal(robocache.resample(vals, st, tt), ref)
    assert _tune.STATS["buckets_tuned"] == before["buckets_tuned"] + 1


def test_tuning_off_and_a_corrupt_cache_still_give_right_answers(tmp_path, monkeypatch):
    vals, st, tt = _inputs(d=33)
    ref = robocache.resample(vals, st, tt, _version="v2")
    path = tmp_path / "cache" / f"tune-{_tune.device(0).slug}.json"
    path.parent.mkdir(parents=True)
    path.write_text("{ corrupt")
    monkeypatch.setenv("ROBOCACHE_AUTOTUNE", "0")
    n = _tune.STATS["buckets_tuned"]
    assert torch.equal(robocache.resample(vals, st, tt), ref)
    assert _tune.STATS["buckets_tuned"] == n  # off: nothing timed
    monkeypatch.setenv("ROBOCACHE_AUTOTUNE", "1")
    _tune.reset()
    rs._PLANS.clear()
    with pytest.warns(RuntimeWarning, match="ignoring the tuning cache"):
        assert torch.equal(robocache.resample(vals, st, tt), ref)
    assert json.loads(path.read_text())["format"] == _tune.FORMAT  # rewritten valid


def test_a_graph_capture_of_a_new_shape_does_not_tune():
    vals, st, tt = _inputs(b=8, d=5)
    ref = robocache.resample(vals, st, tt, _version="v2")
    n = _tune.STATS["buckets_tuned"]
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        with torch.cuda.graph(g, stream=s):
            out = robocache.resample(vals, st, tt)
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, ref)
    assert _tune.STATS["buckets_tuned"] == n


def test_the_tuner_times_the_device_not_the_host():
    """The tuner's sampler on kernels of known relative length: a spin of 2N cycles measures twice a spin of N
    (device time scales with the work), and an empty kernel back to back measures a few microseconds, far below
    the spin and below the host's cost of a launch (the first tuner measured the host's ~10 us a call whatever
    the kernel did, so it could not tell a 3 us configuration from a 7 us one)."""
    import cupy

    kern, per_us = _tune._spinner(0)
    stream = cupy.cuda.get_current_stream()

    def spin_us(us: float) -> float:
        cycles = np.int64(us * per_us)

        def fn():
            kern((1,), (1,), (cycles,), stream=stream)

        fn()
        return min(_tune._device_us_per_call(fn, 50, stream, (kern, per_us), 10.0) for _ in range(3))

    spin_us(200.0)  # the clocks up
    t1, t2 = spin_us(40.0), spin_us(80.0)
    assert 1.7 <= t2 / t1 <= 2.3, (t1, t2)
    tiny = cupy.RawKernel('extern "C" __global__ void k(float* x) { if (x == 0) x[threadIdx.x] = 1; }', "k")
    buf = cupy.empty(1, cupy.float32)

    def empty():
        tiny((1,), (1,), (buf,), stream=stream)

    empty()
    host = []
    for _ in range(3):
        h0 = time.perf_counter()
        for _ in range(100):
            empty()
        host.append((time.perf_counter() - h0) / 100 * 1e6)
    stream.synchronize()
    t = min(_tune._device_us_per_call(empty, 100, stream, (kern, per_us), min(host)) for _ in range(3))
    assert t < 0.25 * t1 and t < min(host), (t, t1, min(host))


def _sliced(rng, shape, dtype, skip):
    """A C-contiguous tensor of ``shape`` starting ``skip`` elements into a larger allocation (a slice users pass),
    random values, its neighbours poisoned with NaN: an aligned vector that reads them must never store them."""
    n = int(np.prod(shape))
    base = torch.full((n + skip + 16,), float("nan"), device="cuda", dtype=dtype)
    t = base[skip: skip + n].view(shape)
    t.copy_(torch.from_numpy(rng.standard_normal(shape)).to(dtype))
    return t


@pytest.mark.parametrize("time_dtype", (torch.float32, torch.float64), ids=str)
@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.bfloat16), ids=str)
@pytest.mark.parametrize("d", (1, 3, 37, 130, 855))
def test_shifted_vectors_on_rows_of_any_alignment_equal_the_default(time_dtype, dtype, d):
    """Config.shift on odd and even D with the values and the output off the 16-byte grid by every element count
    (the row kernel then moves narrower vectors): bit for bit the row kernel's, the reference's, and no byte outside
    the output written (the output's neighbours, poisoned, stay NaN)."""
    rng = np.random.default_rng(d)
    b, s, t = 3, 41, 29
    per = 16 // torch.tensor([], dtype=dtype).element_size()
    st = torch.from_numpy(_times(rng, b, s)).cuda().to(time_dtype)
    tgt_np = rng.uniform(-0.1, 1.1, (b, t))
    tgt_np[1, 2] = np.nan
    tt = torch.from_numpy(tgt_np).cuda().to(time_dtype)
    for skip, oskip in ((0, 0), (1, 0), (0, per - 1), (per // 2, 3 % per), (per - 1, 1)):
        vals = _sliced(rng, (b, s, d), dtype, skip)
        want = reference.resample(vals.double().cpu().numpy(), st.double().cpu().numpy(), tt.double().cpu().numpy())
        v, sa = A.describe("v", vals), A.describe("s", st)
        default = None
        for cfg in [_tune.DEFAULT, *SHIFTS, *STAGES]:
            base = torch.full((b * t * d + oskip + 16,), 7.0, device="cuda", dtype=dtype)
            out = base[oskip: oskip + b * t * d].view(b, t, d)
            out.fill_(float("nan"))
            rs._plan_v2(v, sa, vals, out.data_ptr(), t, cfg)(vals, st, tt, out)
            torch.cuda.synchronize()
            what = f"resample {cfg} D{d} {dtype} {time_dtype} skip {skip}/{oskip}"
            _check(out, want, dtype, what)
            assert bool((base[:oskip] == 7).all()) and bool((base[oskip + b * t * d:] == 7).all()), what
            if default is None:
                default = out.clone()
            else:
                assert torch.equal(out.nan_to_num(5.0), default.nan_to_num(5.0)), f"{what} differs from the default"
    # fuse: the wide stream off the grid beside an aligned one and a narrow one, the output a slice
    streams = [(_sliced(rng, (b, 23, d), dtype, 1), torch.from_numpy(_times(rng, b, 23)).cuda().to(time_dtype)),
               (_sliced(rng, (b, 9, 8), dtype, 0), torch.from_numpy(_times(rng, b, 9)).cuda().to(time_dtype)),
               (_sliced(rng, (b, 5, 1), dtype, 2), torch.from_numpy(_times(rng, b, 5)).cuda().to(time_dtype))]
    want = reference.fuse([(v.double().cpu().numpy(), s_.double().cpu().numpy()) for v, s_ in streams],
                          tt.double().cpu().numpy())
    pairs = [(A.describe("v", v), A.describe("t", s_)) for v, s_ in streams]
    total = d + 9
    default = None
    for cfg in [_tune.DEFAULT, *SHIFTS, *STAGES]:
        base = torch.full((b * t * total + 17,), 7.0, device="cuda", dtype=dtype)
        out = base[1: 1 + b * t * total].view(b, t, total)
        fu._plan_v2(pairs, A.describe("tgt", tt), streams, out.data_ptr(), cfg)(streams, tt, out)
        torch.cuda.synchronize()
        what = f"fuse {cfg} D{d} {dtype} {time_dtype}"
        _check(out, want, dtype, what)
        assert bool(base[0] == 7) and bool((base[1 + b * t * total:] == 7).all()), what
        if default is None:
            default = out.clone()
        else:
            assert torch.equal(out.nan_to_num(5.0), default.nan_to_num(5.0)), f"{what} differs from the default"


def test_the_tuner_offers_shifted_vectors_for_rows_off_the_grid():
    """An odd-D bucket's first call times Config.shift among its candidates; an aligned one does not."""
    seen = []
    real = _tune.choose

    def spy(dev, key, cands, trial, stream, may_tune):
        seen.append(list(cands))
        return real(dev, key, cands, trial, stream, may_tune)

    rng = np.random.default_rng(3)
    try:
        _tune.choose = spy
        for d in (855, 856):
            vals = torch.from_numpy(rng.standard_normal((2, 40, d))).cuda().float()
            st = torch.from_numpy(_times(rng, 2, 40)).cuda().float()
            tt = torch.from_numpy(rng.uniform(0, 1, (2, 17))).cuda().float()
            got = robocache.resample(vals, st, tt)
            want = reference.resample(vals.double().cpu().numpy(), st.double().cpu().numpy(),
                                      tt.double().cpu().numpy())
            _check(got, want, torch.float32, f"D{d}")
    finally:
        _tune.choose = real
    assert _tune.Config(shift=1) in seen[0], seen[0]
    assert _tune.Config(shift=1) not in seen[1], seen[1]


@pytest.mark.parametrize("time_dtype", (torch.float32, torch.float64), ids=str)
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
def test_fuse_launches_of_several_blocks_a_stream_equal_the_default(time_dtype, dtype):
    """fuse with 561 targets (the staged kernel's three blocks a stream, the last ragged) over streams of odd and
    even widths off the 16-byte grid, a NaN target: the shifted vectors, the staged and the flat kernels bit
    for bit the row kernel's output and the reference's; the public call's first call times the staged kernel among
    its candidates, and the flat kernel."""
    rng = np.random.default_rng(561)
    b, t = 3, 187
    dims, lens = (37, 3, 64, 1, 130), (23, 11, 9, 5, 40)
    streams = [(_sliced(rng, (b, s, d), dtype, k % 3), torch.from_numpy(_times(rng, b, s)).cuda().to(time_dtype))
               for k, (s, d) in enumerate(zip(lens, dims))]
    tgt_np = rng.uniform(-0.1, 1.1, (b, t))
    tgt_np[2, 100] = np.nan
    tgt = torch.from_numpy(tgt_np).cuda().to(time_dtype)
    want = reference.fuse([(v.double().cpu().numpy(), s.double().cpu().numpy()) for v, s in streams],
                          tgt.double().cpu().numpy())
    pairs = [(A.describe("v", v), A.describe("t", s)) for v, s in streams]
    default = None
    for cfg in [_tune.DEFAULT, *SHIFTS, *STAGES]:
        out = torch.full((b, t, sum(dims)), float("nan"), device="cuda", dtype=dtype)
        fu._plan_v2(pairs, A.describe("tgt", tgt), streams, out.data_ptr(), cfg)(streams, tgt, out)
        torch.cuda.synchronize()
        what = f"fuse {cfg} {dtype} {time_dtype}"
        _check(out, want, dtype, what)
        if default is None:
            default = out.clone()
        else:
            assert torch.equal(out.nan_to_num(5.0), default.nan_to_num(5.0)), f"{what} differs from the default"
    seen = []
    real = _tune.choose

    def spy(dev, key, cands, trial, stream, may_tune):
        seen.append(list(cands))
        return real(dev, key, cands, trial, stream, may_tune)

    try:
        _tune.choose = spy
        got = robocache.fuse(streams, tgt)
    finally:
        _tune.choose = real
    assert torch.equal(got.nan_to_num(5.0), default.nan_to_num(5.0))
    assert _tune.Config(stage=1) in seen[0], seen[0]
    assert _tune.Config(stage=5) in seen[0], seen[0]  # the flat kernel: 561 targets, five streams


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.bfloat16), ids=str)
@pytest.mark.parametrize("d", (1, 5, 17, 64))
def test_the_span_equals_the_row_kernel_where_runs_fit_and_where_they_do_not(dtype, d):
    """The span (Config.stage 2) loads a block's source rows into shared memory only where their run fits
    RC_SPAN_BYTES; here one launch mixes both: targets crowded into the first 5% of each row (a block's 256 of them
    within about 40 source rows) and then spread over the rest (about 600 rows a block: more than the budget's 24 KB
    for rows of 68 bytes or more, so D 17 in float32 and D 64 mix both kinds of block), some unsorted, one
    NaN, a row of repeated source times, outputs into a view off the 16-byte grid. Bit for bit the row kernel's
    default launch, and the reference."""
    rng = np.random.default_rng(d * 131 + 7)
    b, s, t = 3, 2000, 1500
    src = np.sort(_times(rng, b, s), axis=1)
    src[1, 40:60] = src[1, 40]  # repeated source times: the last one wins
    lo, hi = src.min(), src.max()
    crowded = np.sort(rng.uniform(lo, lo + 0.05 * (hi - lo), (b, 700)), axis=1)
    spread = np.sort(rng.uniform(lo + 0.05 * (hi - lo), hi + 0.01, (b, t - 700)), axis=1)
    tgt = np.concatenate([crowded, spread], axis=1)
    tgt[2, 900:1100] = rng.permutation(tgt[2, 900:1100])  # unsorted targets: every one bracketed on its own
    tgt[0, 5] = np.nan
    vals = torch.from_numpy(rng.standard_normal((b, s, d))).cuda().to(dtype)
    st = torch.from_numpy(src).cuda().float()
    tt = torch.from_numpy(tgt).cuda().float()
    want = reference.resample(vals.double().cpu().numpy(), st.double().cpu().numpy(), tt.double().cpu().numpy())
    v, sa = A.describe("v", vals), A.describe("s", st)
    outs = {}
    for cfg in (_tune.DEFAULT, _tune.Config(stage=2)):
        buf = torch.full((b * t * d + 3,), 7.0, device="cuda", dtype=dtype)
        out = buf[3:].view(b, t, d)  # 3 elements past the allocation's start: off the 16-byte grid
        rs._plan_v2(v, sa, vals, out.data_ptr(), t, cfg)(vals, st, tt, out)
        torch.cuda.synchronize()
        assert torch.equal(buf[:3], torch.full((3,), 7.0, device="cuda", dtype=dtype)), f"{cfg}: wrote before out"
        _check(out, want, dtype, f"{cfg} D{d} {dtype}")
        outs[cfg] = out
    assert torch.equal(outs[_tune.DEFAULT].nan_to_num(123.0), outs[_tune.Config(stage=2)].nan_to_num(123.0))


@pytest.mark.parametrize("time_dtype", (torch.float32, torch.float64), ids=str)
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
def test_the_flat_kernel_of_sixteen_wide_streams_through_every_public_path(time_dtype, dtype, monkeypatch):
    """Config.stage 5 (kernels/rows_wide.cu fuse_flat_body) where its shared memory is largest (the table's sixteen
    streams at 128 targets a block, 41 KB; here 16 a block, the launch being small) and its output rows wide (Dtot 4696),
    the last block ragged, values and output off the 16-byte grid, the output's neighbours poisoned, NaN
    and unsorted targets: the plan is the flat kernel's, its output the staged kernel's bit for bit and the reference's;
    then the public call with the tuner's choice forced to it, a second call through the recent-plan check (the tensor
    path's `launch`), and a CUDA-graph replay, all equal to it."""
    rng = np.random.default_rng(4696)
    b, t = 2, 150  # 300 targets
    dims = [1 + (k * 389) % 400 for k in range(16)]
    lens = [1 + (k * 7) % 40 for k in range(16)]
    streams = [(_sliced(rng, (b, s, d), dtype, k % 5), torch.from_numpy(_times(rng, b, s)).cuda().to(time_dtype))
               for k, (s, d) in enumerate(zip(lens, dims))]
    tgt_np = rng.uniform(-0.1, 1.1, (b, t))
    tgt_np[1, 77] = np.nan
    tgt = torch.from_numpy(tgt_np).cuda().to(time_dtype)
    total = sum(dims)
    want = reference.fuse([(v.double().cpu().numpy(), s.double().cpu().numpy()) for v, s in streams],
                          tgt.double().cpu().numpy())
    pairs = [(A.describe("v", v), A.describe("t", s)) for v, s in streams]
    from robocache import _launch as L

    built: list[str] = []
    real_kernel = L.kernel
    monkeypatch.setattr(L, "kernel", lambda op, name, dev, options=(): built.append(name)
                        or real_kernel(op, name, dev, options))
    outs = []
    # the flat kernel at 128 targets a block (its rule told to want no more blocks: 41 KB of shared memory), at the
    # rule's (16 a block on a GPU of 19 SMs or more), then the staged kernel
    for cfg, per_sm in ((_tune.Config(stage=5), 0), (_tune.Config(stage=5), _tune.FLAT_BLOCKS_PER_SM),
                        (_tune.Config(stage=1), _tune.FLAT_BLOCKS_PER_SM)):
        monkeypatch.setattr(_tune, "FLAT_BLOCKS_PER_SM", per_sm)
        base = torch.full((b * t * total + 19,), 7.0, device="cuda", dtype=dtype)
        out = base[3: 3 + b * t * total].view(b, t, total)
        plan = fu._plan_v2(pairs, A.describe("tgt", tgt), streams, out.data_ptr(), cfg)
        if cfg.stage == 5:
            lg = _tune.flat_lg(b * t, L.sm_count(0))
            assert lg == 7 if per_sm == 0 else lg < 7, (lg, per_sm)
            assert built[-1].startswith("fuse_flat_") and plan.smem == _tune.flat_smem(16, lg), (built, plan.smem)
            assert plan.grid == -(-(b * t) >> lg) and plan.block == _tune.FLAT_THREADS
        plan(streams, tgt, out)
        torch.cuda.synchronize()
        assert bool((base[:3] == 7).all()) and bool((base[3 + b * t * total:] == 7).all()), cfg
        outs.append(out.clone())
    _check(outs[0], want, dtype, f"flat 16 streams {dtype} {time_dtype}")
    for o in outs[1:]:
        assert torch.equal(outs[0].nan_to_num(5.0), o.nan_to_num(5.0)), "flat differs from flat or staged"
    real = _tune.choose
    try:
        _tune.choose = lambda dev, key, cands, trial, stream, may_tune: (_tune.Config(stage=5), True)
        first = robocache.fuse(streams, tgt)
        second = robocache.fuse(streams, tgt)  # the recent plan's tensor check, then its launch
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        g = torch.cuda.CUDAGraph()
        with torch.cuda.stream(s):
            with torch.cuda.graph(g, stream=s):
                captured = robocache.fuse(streams, tgt)
        g.replay()
        torch.cuda.synchronize()
    finally:
        _tune.choose = real
    for got in (first, second, captured):
        assert torch.equal(got.nan_to_num(5.0), outs[0].nan_to_num(5.0))
