"""NumPy models of voxelize v3's arithmetic and index math that differ from v2 (kernels/voxelize.cu), on the CPU.

- The mean's quotient: v3 computes one reciprocal y = RN(1/n) per voxel, then q0 = RN(s*y),
  r = fma(-q0, n, s), q = fma(r, y, q0) (Markstein's correction), and the division s / n itself for
  non-finite or tiny sums. Modelled here with exact float32 roundings (float64 products are exact for
  float32 operands; sums are split exactly with TwoSum) and compared bit for bit with NumPy's float32
  division (IEEE, correctly rounded: what v2's `/` computes). So v3's means equal v2's on the same
  sums, and the GPU tests' tolerances need no widening for it.
- The zero fill's head / 16-byte body / tail split: every word written exactly once for any alignment.
- The launch shapes chosen on the host (hash table size, threads, the mean pass's vector width).
"""
from __future__ import annotations

import importlib

import numpy as np
import pytest

vx = importlib.import_module("robocache.voxelize")  # the module (robocache.voxelize is also the function)

F32, F64 = np.float32, np.float64


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(s, e) with s = RN64(a + b) and s + e == a + b exactly (Knuth)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def _rn32(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """float32 nearest (ties to even) to the exact value hi + lo, where hi = RN64(hi + lo)."""
    m = hi.astype(F32)
    m64 = m.astype(F64)
    other = np.nextafter(m, np.where(m64 < hi, F32(np.inf), F32(-np.inf)).astype(F32))
    o64 = other.astype(F64)
    at_mid = (m64 != hi) & ((m64 + o64) / 2 == hi)  # hi on a float32 midpoint: lo decides
    up, down = np.maximum(m, other), np.minimum(m, other)
    return np.where(at_mid & (lo > 0), up, np.where(at_mid & (lo < 0), down, m))


def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """RN32(a*b + c) for float32 arrays: the product is exact in float64 (48 bits), the sum split exactly."""
    hi, lo = _two_sum(a.astype(F64) * b.astype(F64), c.astype(F64))
    return _rn32(hi, lo)


def mul32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.astype(F64) * b.astype(F64)).astype(F32)  # exact product, rounded once


def div_by_rcp(s: np.ndarray, n: np.ndarray, corrected: bool = True) -> np.ndarray:
    """rc_div_by_rcp of kernels/voxelize.cu (corrected=False: the plain s * RN(1/n))."""
    d = n.astype(F32)
    with np.errstate(all="ignore"):
        y = F32(1) / d  # __frcp_rn: the correctly rounded reciprocal
        q0 = mul32(s, y)
        if not corrected:
            return q0
        r = fma32(-q0, d, s)
        q = fma32(r, y, q0)
        exact = s / d
    use = np.isfinite(s) & (np.abs(s) >= F32(2.0**-64))
    return np.where(use, q, exact)


def _bits(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=F32).view(np.uint32)


def _cases(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    m = 400_000
    counts = np.concatenate([
        rng.integers(1, 64, m), rng.integers(1, 100_000, m), rng.integers(1, 2**31 - 1, m),
        np.array([1, 2, 3, 5, 7, 9, 10, 11, 13, 2**24 - 1, 2**24, 2**24 + 1, 2**31 - 1] * (m // 13 + 1))[:m],
    ])
    k = counts.size
    # sums: random float32 bit patterns over every finite exponent (tiny and huge ones included), gaussian
    # sums of features, exact sums of small integers (the mean of a constant or label channel), ones
    bits = rng.integers(0, 0x7F800000, k, dtype=np.uint32).view(F32) * rng.choice([-1, 1], k).astype(F32)
    gauss = (rng.standard_normal(k) * np.sqrt(np.minimum(counts, 1e6))).astype(F32)
    ints = (rng.integers(-50, 50, k) * np.minimum(counts, 2**17)).astype(F32)
    ones = np.minimum(counts, 2**24).astype(F32)  # the sum of n ones (exact up to 2^24)
    s = np.concatenate([bits, gauss, ints, ones, np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45,
                                                          2.0**-64, 2.0**-65, 3.4028235e38], F32)])
    n = np.concatenate([counts, counts, counts, counts, np.array([3, 3, 3, 3, 3, 3, 7, 7, 7])])
    return s, n


def test_reciprocal_with_correction_equals_the_division_bit_for_bit():
    s, n = _cases(np.random.default_rng(0))
    with np.errstate(all="ignore"):
        want = s / n.astype(F32)  # IEEE float32 division: v2's (and v1's) quotient
    got = div_by_rcp(s, n)
    same = (_bits(got) == _bits(want)) | (np.isnan(got) & np.isnan(want))
    bad = np.flatnonzero(~same)
    assert bad.size == 0, (f"{bad.size} quotients differ, e.g. s={s[bad[:3]].tolist()} n={n[bad[:3]].tolist()}: "
                           f"{got[bad[:3]].tolist()} vs {want[bad[:3]].tolist()}")


def test_plain_reciprocal_would_differ():
    """Without the fma correction s * RN(1/n) is up to an ulp off the division (why v2 kept `/`): the
    comparison above has teeth, and the ones channel shows a mean of ones below 1 for some counts."""
    s, n = _cases(np.random.default_rng(1))
    with np.errstate(all="ignore"):
        want = s / n.astype(F32)
    plain = div_by_rcp(s, n, corrected=False)
    fin = np.isfinite(want) & (np.abs(s) >= 2.0**-64)
    assert np.count_nonzero(_bits(plain[fin]) != _bits(want[fin])) > 1000
    ulps = np.abs(_bits(plain[fin]).astype(np.int64) - _bits(want[fin]).astype(np.int64))
    assert ulps.max() == 1  # the bound a tolerance would have had to cover
    counts = np.arange(1, 5000)
    assert np.count_nonzero(div_by_rcp(counts.astype(F32), counts, corrected=False) < 1) > 100  # 610: n = 41, ...
    assert np.all(div_by_rcp(counts.astype(F32), counts) == 1)


def test_rn32_model_against_exact_rationals():
    """The float32 rounding helper on random hi + lo splits, checked with exact fractions."""
    from fractions import Fraction

    rng = np.random.default_rng(2)
    a = rng.standard_normal(3000).astype(F32)
    b = rng.standard_normal(3000).astype(F32)
    c = (rng.standard_normal(3000) * 10.0 ** rng.integers(-8, 8, 3000)).astype(F32)
    got = fma32(a, b, c)
    for ai, bi, ci, gi in zip(a, b, c, got):
        x = Fraction(float(ai)) * Fraction(float(bi)) + Fraction(float(ci))
        g = Fraction(float(gi))
        for nb in (np.nextafter(gi, F32(np.inf)), np.nextafter(gi, F32(-np.inf))):
            e_g, e_n = abs(x - g), abs(x - Fraction(float(nb)))
            assert e_g < e_n or (e_g == e_n and (int(_bits(gi)) & 1) == 0), (ai, bi, ci, gi)


def zero_words_model(offset_words: int, n: int, nt: int) -> list[int]:
    """Indices written by rc_zero_words for a buffer starting offset_words (mod 4) past a 16-byte boundary."""
    written: list[int] = []
    head = min((16 - 4 * offset_words) % 16 // 4, n) if n > 0 else 0
    if n <= 0:
        return written
    nq = (n - head) >> 2
    done = head + 4 * nq
    for t in range(nt):
        written += list(range(t, head, nt))
        written += [head + 4 * i + j for i in range(t, nq, nt) for j in range(4)]
        written += [done + i for i in range(t, n - done, nt)]
    return written


@pytest.mark.parametrize("nt", [1, 3, 4, 256])
def test_zero_fill_writes_every_word_once(nt):
    for off in range(4):
        for n in list(range(41)) + [1021, 4099]:
            assert sorted(zero_words_model(off, n, nt)) == list(range(n)), (off, n, nt)
            head = min((16 - 4 * off) % 16 // 4, n)
            if n - head >= 4:  # the 16-byte stores start on a 16-byte boundary
                assert (off + head) % 4 == 0


def test_v3_hash_shape_spreads_small_clouds():
    # the ncu case (B4, N100k, C4) on a 132-SM GPU: the 2048-slot table of v2, 512 threads, 3 blocks per SM fit
    assert vx._v3_hash_shape(4, 4, 100_000, 132) == (11, 1024, 2048 * 6 * 4, 512)
    # one small cloud: the table halves to 512 slots (128 threads) so its blocks cover more SMs
    hs_log2, ppb, smem, threads = vx._v3_hash_shape(4, 1, 20_000, 132)
    assert (hs_log2, ppb, threads) == (9, 256, 128) and smem == 512 * 6 * 4
    # counts only (C = 0): the largest table, 512 threads looping twice over its 2048 points
    assert vx._v3_hash_shape(0, 16, 1_000_000, 132) == (12, 2048, 4096 * 2 * 4, 512)
    assert vx._v3_hash_shape(30, 4, 100_000, 132) is None  # too many channels: v2's accumulate kernel
    for c in range(23):
        shape = vx._v3_hash_shape(c, 1, 1000, 132)
        assert shape is not None and shape[2] <= vx.HASH_SMEM and 128 <= shape[3] <= vx.V3_MAX_THREADS


def test_v3_hash_shape_flat_insert_layout():
    """voxel_hashed_flat_v3's shared memory as hashed_v3_body<T, true> indexes it: keys, counts and C sums per slot
    (HS * (2 + C) ints), the used-slot bitmap (((HS + 127) >> 7) << 2 words, a whole number of uint4), the new-slot
    counter (4 words), one slot index per thread; every region before rc_slot 16-byte aligned (the uint4 clear)."""
    for c in range(1, 40):
        for b, n in ((1, 1000), (1, 20_000), (4, 100_000), (16, 1_000_000)):
            shape = vx._v3_hash_shape(c, b, n, 132, True)
            if shape is None:  # the table (with the reserve) would hold fewer than 512 slots
                assert 512 * (2 + c) * 4 > vx.HASH_SMEM - (4 * vx.V3_MAX_THREADS + 4096 // 8 + 16)
                continue
            hs_log2, ppb, smem, threads = shape
            hs = 1 << hs_log2
            used_words = ((hs + 127) >> 7) << 2
            assert smem == 4 * (hs * (2 + c) + used_words + 4 + threads) <= vx.HASH_SMEM, (c, b, n)
            assert (hs * (2 + c)) % 4 == 0 and used_words * 32 >= hs and ppb % threads == 0
            assert 128 <= threads <= vx.V3_MAX_THREADS


def test_v3_mean_routing_at_the_flat_guard(monkeypatch):
    """mean takes voxel_accumulate_flat_v3 only while N * C < 2^31 - BLOCK * PPT (its 32-bit element index), else the
    thread-per-point hash (C <= 22) or v2's accumulate; TUNING's vox_flat / vox_hash as _plan_v3's comment says."""
    import types

    L = vx.L
    monkeypatch.setattr(L, "kernel", lambda op, name, dev: types.SimpleNamespace(ptr=0, name=name))
    monkeypatch.setattr(L, "sm_count", lambda dev: 132)
    names = []
    real_fl = L.FastLaunch

    class Rec(real_fl):
        __slots__ = ()

        def __init__(self, fn, args):
            super().__init__(fn, args)
            names.append(fn.name)

    monkeypatch.setattr(L, "FastLaunch", Rec)
    lo, hi, inv = np.full(3, -1.0, F32), np.full(3, 1.0, F32), np.full(3, 4.0, F32)
    g = (8, 8, 8)
    lim = 2**31 - vx.BLOCK * vx.PPT
    p = types.SimpleNamespace(kind="torch", dtype="float16", device_index=0)

    def main(n, c, vflat=None, vhash=None):
        monkeypatch.setitem(L.TUNING, "vox_flat", vflat)
        monkeypatch.setitem(L.TUNING, "vox_hash", vhash)
        names.clear()
        plan = vx._plan_v3(p, 1, n, c, g, lo, hi, inv, "mean", (1, *g, c), "float16")
        return names[0].removesuffix("_float16"), plan

    name, plan = main(lim // 4 - 1, 4)
    assert name == "voxel_accumulate_flat_v3" and plan.grid == -(-(lim - 4) // 1024) and plan.block == vx.BLOCK
    assert main(lim // 4, 4)[0] == "voxel_hashed_v3"  # N * C = 2^31 - 1024: the hash
    assert main(lim // 4, 4, vflat=True)[0] == "voxel_hashed_v3"  # forced flat still respects the guard
    assert main(lim // 30 + 1, 30)[0] == "voxel_accumulate_v2"  # beyond the guard and the table's channels
    assert main(1000, 4, vflat=False)[0] == "voxel_hashed_v3"
    assert main(1000, 4, vhash=True)[0] == "voxel_hashed_v3"
    assert main(1000, 4, vhash=False)[0] == "voxel_accumulate_v2"
    assert main(1000, 4, vflat=True, vhash=False)[0] == "voxel_accumulate_flat_v3"
    assert main(1000, 4, vflat="hash")[0] == "voxel_hashed_flat_v3"
    assert main(1000, 4, vflat="hash", vhash=False)[0] == "voxel_accumulate_v2"


@pytest.mark.parametrize("inplace,c,ptr,want", [
    (True, 4, 0, 4), (True, 8, 256, 4), (True, 4, 4, 1), (True, 4, 8, 2), (True, 2, 0, 2), (True, 3, 0, 1),
    (False, 8, 0, 8), (False, 16, 0, 8), (False, 8, 8, 4), (False, 4, 0, 4), (False, 2, 0, 2), (False, 3, 0, 1),
    (False, 6, 0, 2), (False, 8, 2, 1),
])
def test_mean_vector_width(inplace, c, ptr, want):
    vw = vx._mean_vw(inplace, c, ptr)
    assert vw == want
    assert c % vw == 0 and ptr % (vw * (4 if inplace else 2)) == 0  # what the kernel relies on


def stub_launcher(monkeypatch, record) -> None:
    """The launcher stubbed on the CPU: ``L.kernel`` a named stub, 132 SMs, every FastLaunch keeping its kernel's name
    (``.name``) and argument list (``.args``), and ``record(fl, grid, block, smem, ptrs)`` called for each launch."""
    import types

    L = vx.L
    monkeypatch.setattr(L, "kernel", lambda op, name, dev, options=(): types.SimpleNamespace(ptr=0, name=name))
    monkeypatch.setattr(L, "sm_count", lambda dev: 132)
    real_fl = L.FastLaunch

    class Rec(real_fl):
        __slots__ = ("args", "name")

        def __init__(self, fn, args):
            super().__init__(fn, args)
            self.name, self.args = fn.name, args

    monkeypatch.setattr(L, "FastLaunch", Rec)
    monkeypatch.setattr(L, "fast_launch", lambda fl, grid, kind, dev, ptrs, smem=0, struct_ptrs=None, block=256:
                        record(fl, grid, block, smem, dict(ptrs)))


def test_v3_plan_wiring(monkeypatch):
    """The v3 plan's launches on the CPU with the launcher stubbed: the kernels in order, each pointer in
    its argument slot (kernels/voxelize.cu's signatures), the zero fill covering exactly what is read."""
    import types

    torch = pytest.importorskip("torch")
    L = vx.L
    launches: list[tuple] = []
    stub_launcher(monkeypatch, lambda fl, grid, block, smem, ptrs:
                  launches.append((fl.name, grid, block, smem, ptrs, fl.args)))
    memsets: list[tuple[int, int]] = []

    def memset(kind, dev, ptr, nbytes):  # the output's clear, on the host's memory here
        import ctypes

        memsets.append((ptr, nbytes))
        ctypes.memset(ptr, 0, nbytes)
    monkeypatch.setattr(L, "memset_zero", memset)
    lo, hi = np.full(3, -1.0, F32), np.full(3, 1.0, F32)
    inv = np.full(3, 4.0, F32)
    g = (8, 8, 8)
    # mean: TUNING vox_flat None (the default: one feature element a thread straight to the grid), False (a thread
    # per point through the hash; v2's accumulate beyond the table's channels), "hash" (the hash inserted flat)
    for vflat in (None, False, "hash"):
        monkeypatch.setitem(L.TUNING, "vox_flat", vflat)
        for dtype, c in (("float32", 4), ("float16", 3), ("float32", 30), ("bfloat16", 8)):
            launches.clear()
            tdt = getattr(torch, dtype)
            pts, feats = torch.zeros(2, 5000, 3, dtype=tdt), torch.zeros(2, 5000, c, dtype=tdt)
            p = types.SimpleNamespace(kind="torch", dtype=dtype, device_index=0)
            plan = vx._plan_v3(p, 2, 5000, c, g, lo, hi, inv, "mean", (2, *g, c), dtype)
            out = plan(pts, feats)
            assert tuple(out.shape) == (2, *g, c) and out.dtype == tdt
            names = [x[0] for x in launches]
            hashed = vflat is not None and vx._v3_hash_shape(c, 2, 5000, 132, vflat == "hash") is not None
            main = (f"voxel_accumulate_flat_v3_{dtype}" if vflat is None else
                    f"voxel_hashed{'_flat' * (vflat == 'hash')}_v3_{dtype}" if hashed else f"voxel_accumulate_v2_{dtype}")
            mean = "voxel_mean_inplace_v3_float32" if dtype == "float32" else f"voxel_mean_v3_{dtype}"
            assert names == ["voxel_zero_v3", main, mean]
            (_, _, _, _, zp, za), (_, grid, block, smem, mp, ma), (_, _, _, _, np_, na) = launches
            bv, bvc, o = 2 * 512, 2 * 512 * c, out.data_ptr()
            counts = zp[0]
            if dtype == "float32":  # counts in the scratch, sums in the output: both zeroed, nothing else
                assert (za[1][1], zp[2], za[3][1]) == (bv, o, bvc)
                sums = o
                assert np_ == {0: counts, 1: o, 4: {4: 4, 30: 2}[c]} and na[2][1] == bv and na[3][1] == c
            else:  # one scratch buffer of counts (padded to 16 bytes) and sums, zeroed whole
                cw = -(-bv // 4) * 4
                assert (za[1][1], zp[2], za[3][1]) == (cw + bvc, 0, 0)
                sums = counts + 4 * cw
                assert np_ == {0: counts, 1: sums, 2: o, 5: vx._mean_vw(False, c, o)}
            if hashed:  # hashed(points, feats, N, C, bpr, ppb, hs_log2, counts, sums, occupancy, geometry)
                assert mp == {0: pts.data_ptr(), 1: feats.data_ptr(), 7: counts, 8: sums}
                hs_log2, ppb, want_smem, threads = vx._v3_hash_shape(c, 2, 5000, 132, vflat == "hash")
                assert [a[1] for a in ma[2:7]] == [5000, c, -(-5000 // ppb), ppb, hs_log2]
                assert (grid, block, smem) == (2 * -(-5000 // ppb), threads, want_smem)
            else:  # accumulate_v2 / accumulate_flat_v3(points, feats, N, C, bpr, counts, sums, geometry)
                assert mp == {0: pts.data_ptr(), 1: feats.data_ptr(), 5: counts, 6: sums}
                if vflat is None:  # blocks over the row's N * C feature elements
                    bpr = -(-5000 * c // (vx.BLOCK * vx.PPT))
                    assert [a[1] for a in ma[2:5]] == [5000, c, bpr] and (grid, block, smem) == (2 * bpr, vx.BLOCK, 0)
            assert len(ma) == (22 if hashed else 19)  # 12 geometry arguments (RC_VOX_ARGS) last
    # count and occupancy into a zeroed output: v2's kernel where rows are sparse (n < HASH_DENSITY * V: counts
    # slot 3, occupancy slot 4), the hash kernel where they are dense (counts slot 7, occupancy slot 9)
    assert vx.HASH_DENSITY * 512 == 256
    for n, mode, slot, dt, kern in ((255, "count", 3, torch.int32, "voxel_count_v2_float32"),
                                    (255, "occupancy", 4, torch.bool, "voxel_count_v2_float32"),
                                    (256, "count", 7, torch.int32, "voxel_hashed_v3_float32"),
                                    (5000, "occupancy", 9, torch.bool, "voxel_hashed_v3_float32")):
        launches.clear()
        pts = torch.zeros(2, n, 3)
        p = types.SimpleNamespace(kind="torch", dtype="float32", device_index=0)
        memsets.clear()
        out = vx._plan_v3(p, 2, n, 0, g, lo, hi, inv, mode, (2, *g), {"count": "int32"}.get(mode, "bool"))(pts, None)
        assert out.dtype == dt and not out.any()
        assert memsets == [(out.data_ptr(), out.numel() * out.element_size())]  # one clear of the whole output
        [(name, _, block, smem, ptrs, args)] = launches
        assert name == kern and ptrs == {0: pts.data_ptr(), slot: out.data_ptr()}, (n, mode)
        if kern.startswith("voxel_hashed"):  # C = 0: the count-only table; the other outputs' pointers null
            hs_log2, ppb, want_smem, threads = vx._v3_hash_shape(0, 2, n, 132)
            assert (block, smem) == (threads, want_smem)
            assert [a[1] for a in args[2:7]] == [n, 0, -(-n // ppb), ppb, hs_log2]
            assert all(args[i][1] in (None, 0) for i in (1, 7, 8, 9) if i != slot)
