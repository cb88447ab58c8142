"""voxelize v3's list path of mean (kernels/voxelize.cu "v3, the list path"; robocache/voxelize.py _PlanV3List) on
the CPU: the byte rule, the scratch layout, the zero fill's coverage, and the plan's launches with the launcher stubbed
(the kernels in order, every pointer and scalar in its argument slot). The kernels themselves run in
scripts/kernel_emu/voxelize_v3.py (``--list``) and on a GPU in tests/gpu/test_kernels_v2_gpu.py."""
from __future__ import annotations

import importlib
import types

import numpy as np
import pytest

from tests.test_voxelize_v3_model import stub_launcher

vx = importlib.import_module("robocache.voxelize")  # the module (robocache.voxelize is also the function)
L = vx.L

F32 = np.float32
LO, HI, INV = np.full(3, -1.0, F32), np.full(3, 1.0, F32), np.full(3, 4.0, F32)


def test_list_path_is_off_by_default():
    """Off until the whole tests/gpu has run with the rule as the default (robocache/_launch.py TUNING)."""
    assert L.TUNING["vox_list"] is False


def _model_pays(n, vox, c, inplace, rows=1):
    """The byte model of robocache/voxelize.py, written out again: the dense passes' bytes a row beyond the list's."""
    dense = vox * 4 + (0 if inplace else vox * 4 * c)  # counts read by the mean pass; 16-bit: the sums zeroed
    occ = min(n, vox)
    per_voxel = vx.LIST_BYTES_PER_VOXEL + (0 if inplace else 4 * c)  # list entry; 16-bit: the row's clear
    sparse = n <= vx.LIST_MAX_POINTS_PER_VOXEL * vox  # the measured cap: denser rows lost on the H200
    return sparse and rows * dense > rows * (n * vx.LIST_BYTES_PER_POINT + occ * per_voxel) + vx.LIST_LAUNCH_BYTES


@pytest.mark.parametrize("inplace", [True, False])
def test_list_rule(inplace):
    # the per-point and per-voxel bytes stay estimates (the H200's A/B gave one verdict for 8-32 bytes a point): the
    # rule's shape is what is held here
    assert vx.LIST_BYTES_PER_POINT == 16
    rng = np.random.default_rng(3)
    for _ in range(2000):
        n, vox = int(rng.integers(0, 3_000_000)), int(rng.integers(1, 3_000_000))
        c, rows = int(rng.integers(1, 33)), int(rng.integers(1, 33))
        assert vx._list_pays(n, vox, c, inplace, rows) == _model_pays(n, vox, c, inplace, rows), (n, vox, c, rows)
    # monotone: fewer points or more voxels never turn it off
    for c in (1, 3, 16):
        vox = 1_000_000
        verdict = [vx._list_pays(n, vox, c, inplace, 8) for n in range(0, 2_000_000, 20_000)]
        assert verdict == sorted(verdict, reverse=True)
        n = 50_000
        verdict = [vx._list_pays(n, v, c, inplace, 8) for v in range(1, 4_000_000, 40_000)]
        assert verdict == sorted(verdict)
    # dense rows (more points than voxels) never pay; one launch of tiny rows does not either
    assert not vx._list_pays(2_000_000, 1_000_000, 3, inplace, 8)
    assert not vx._list_pays(10, 100, 3, inplace, 1)


def test_list_rule_on_the_sampled_points_that_motivated_it():
    """H200 sampled records (results/h200-nvidia-h200-x4): the 16-bit sparse points the dense passes hold at 11-20% of
    the copy ceiling take the list; float32 ones save only the mean pass's count reads, and most stay dense."""
    assert vx._list_pays(19293, 246 * 52 * 81, 3, False, 29)  # s6113-23 float16 C3, 388.7 us, 11%
    assert vx._list_pays(2813, 207 * 86 * 209, 5, False, 7)  # s6113-41 float16 C5, 319.2 us, 19%
    assert vx._list_pays(1378, 21 * 218 * 191, 7, False, 18)  # s6113-24 bfloat16 C7
    assert not vx._list_pays(423151, 60 * 53 * 243, 13, True, 5)  # s2-40 float32 C13 (N/V 0.55): atomics, not passes
    assert not vx._list_pays(822891, 125 * 21 * 17, 3, False, 10)  # s6113-33 float16, 18 points a voxel
    # the cap (H200 vox_probe, dense against list): uniform 16-bit rows of 0.13-0.2 points a voxel lost with the list
    assert not vx._list_pays(11170, 48 * 41 * 45, 7, False, 16)  # s6113-31 float16 C7: 57.8 us dense, 66.4 list
    assert not vx._list_pays(33486, 26 * 42 * 157, 8, False, 3)  # s6113-01 float16 C8: 25.0 dense, 27.5 list
    assert vx._list_pays(62086, 86 * 82 * 102, 5, False, 10)  # s6113-20 bfloat16 C5 (0.09 a voxel): 162.3 -> 97.1
    # the launch cost (8 MiB): a one-row cloud of 2155 points, 11.7 us dense against 16.1 through the list
    assert not vx._list_pays(2155, 61 * 30 * 172, 4, False, 1)  # s9437-05 bfloat16 C4


@pytest.mark.parametrize("inplace", [True, False])
def test_list_layout(inplace, monkeypatch):
    """Every region 16-byte aligned (whole groups of 4 words), the counts at word 4 after the header, room for every
    row's most occupied voxels, int64 entries from LIST_WIDE_VOXELS, the sums (16-bit) last and B*V*C long."""
    for b, n, vox, c in ((1, 1, 1, 1), (2, 3000, 210, 3), (3, 5001, 765, 7), (29, 19293, 1_036_152, 3),
                         (2, 0, 32000, 16), (1, 10, 2**31 - 1, 2)):
        for wide_from in (2**31, 0):
            monkeypatch.setattr(vx, "LIST_WIDE_VOXELS", wide_from)
            list_off, wide, sums_off, words = vx._list_layout(b, n, vox, c, inplace)
            bv = b * vox
            assert wide == int(bv >= wide_from)
            assert list_off % 4 == 0 and sums_off % 4 == 0 and list_off == 4 + -(-bv // 4) * 4
            assert sums_off - list_off >= b * min(n, vox) * (2 if wide else 1)
            assert sums_off - list_off < b * min(n, vox) * (2 if wide else 1) + 4
            assert words == sums_off + (0 if inplace else bv * c)


def zero_halves_model(offset_halves: int, n: int, nt: int) -> list[int]:
    """Indices written by rc_zero_halves_grid for a buffer starting offset_halves (mod 8) past a 16-byte boundary."""
    if n <= 0:
        return []
    head = min((16 - 2 * offset_halves) % 16 // 2, n)
    nq = (n - head) >> 3
    done = head + 8 * nq
    written: list[int] = []
    for t in range(nt):
        written += list(range(t, head, nt))
        written += [head + 8 * i + j for i in range(t, nq, nt) for j in range(8)]
        written += [done + i for i in range(t, n - done, nt)]
    return written


@pytest.mark.parametrize("nt", [1, 3, 256])
def test_zero_fill_of_the_output_writes_every_value_once(nt):
    for off in range(8):
        for n in list(range(41)) + [1021, 4099]:
            assert sorted(zero_halves_model(off, n, nt)) == list(range(n)), (off, n, nt)
            head = min((16 - 2 * off) % 16 // 2, n)
            if n - head >= 8:
                assert (off + head) % 8 == 0  # the 16-byte stores start on a 16-byte boundary


@pytest.fixture
def stubbed(monkeypatch):
    """The launcher stubbed as tests/test_tune.py does (L.kernel a named stub, 132 SMs), every FastLaunch keeping its
    kernel's name and argument list, every launch and the scratch buffer's size recorded."""
    torch = pytest.importorskip("torch")
    rec = types.SimpleNamespace(launches=[], scratch=[])
    stub_launcher(monkeypatch, lambda fl, grid, block, smem, ptrs:
                  rec.launches.append((fl.name, grid, block, smem, ptrs, fl.args, list(fl.slots))))
    real_scratch = vx._scratch

    def scratch(kind, words, like, dev):
        buf = real_scratch(kind, words, like, dev)
        rec.scratch.append((words, buf.data_ptr()))
        return buf

    monkeypatch.setattr(vx, "_scratch", scratch)
    rec.torch = torch
    return rec


def _plan(dtype, b, n, c, g, mode="mean"):
    p = types.SimpleNamespace(kind="torch", dtype=dtype, device_index=0)
    out_shape = (b, *g, c) if mode == "mean" else (b, *g)
    out_dtype = {"count": "int32", "occupancy": "bool"}.get(mode, dtype)
    return vx._plan_v3(p, b, n, c if mode == "mean" else 0, g, LO, HI, INV, mode, out_shape, out_dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("c", [1, 3, 16])
def test_list_plan_wiring(dtype, c, stubbed, monkeypatch):
    """TUNING vox_list True: the zero fill, the list kernel, the flat accumulate with null counts, the list's mean;
    every pointer where kernels/voxelize.cu's signatures read it, the grids from the plan's rules."""
    torch = stubbed.torch
    monkeypatch.setitem(L.TUNING, "vox_list", True)
    b, n, g = 2, 5000, (8, 8, 8)
    vox, inplace = 512, dtype == "float32"
    plan = _plan(dtype, b, n, c, g)
    assert isinstance(plan, vx._PlanV3List)
    tdt = getattr(torch, dtype)
    pts, feats = torch.zeros(b, n, 3, dtype=tdt), torch.zeros(b, n, c, dtype=tdt)
    out = plan(pts, feats)
    assert tuple(out.shape) == (b, *g, c) and out.dtype == tdt
    mean = "voxel_list_mean_inplace_v3_float32" if inplace else f"voxel_list_mean_v3_{dtype}"
    assert [x[0] for x in stubbed.launches] == ["voxel_zero_list_v3", f"voxel_list_v3_{dtype}",
                                                f"voxel_accumulate_flat_v3_{dtype}", mean]
    (_, zg, _, _, zp, za, _), (_, lg, lb, lsmem, lp, la, _), (_, ag, ab, _, ap, aa, aslots), \
        (_, mg, mb, _, mp, ma, _) = stubbed.launches
    list_off, wide, sums_off, words = vx._list_layout(b, n, vox, c, inplace)
    [(swords, base)] = stubbed.scratch
    assert swords == words == plan.scratch_words and wide == 0
    o, counts, lst = out.data_ptr(), base + 16, base + 4 * list_off
    sums = o if inplace else base + 4 * sums_off
    assert sums % 16 == 0 or inplace  # the 16-bit sums rows start 16-byte aligned (the list kernel's clears)
    bvc = b * vox * c
    # voxel_zero_list_v3(a, na, o, no): the header and the counts (padded), the output's 16-bit values
    assert zp == {0: base, 2: o} and za[1][1] == list_off and za[3][1] == bvc * (2 if inplace else 1)
    assert zg == max(1, min(-(-max(list_off, bvc * (4 if inplace else 2) // 4) // 1024), 16 * 132))
    # voxel_list_v3_<T>(points, N, bpr, nslots, counts, list, wide, sums, C, geometry): 16 bytes of shared memory
    assert lp == ({0: pts.data_ptr(), 3: base, 4: counts, 5: lst} | ({} if inplace else {7: sums}))
    assert [a[1] for a in (la[1], la[2], la[6], la[7], la[8])] == [n, -(-n // 1024), wide, 0, c]
    assert (lg, lb, lsmem) == (b * -(-n // 1024), 256, 16) and len(la) == 21
    # voxel_accumulate_flat_v3_<T>(points, feats, N, C, bpr, counts, sums, geometry): counts null (slot 5 holds 0)
    assert ap == {0: pts.data_ptr(), 1: feats.data_ptr(), 6: sums} and aa[5] == ("ptr", 0) and aslots[5] == 0
    assert ag == b * -(-n * c // 1024) and ab == 256 and len(aa) == 19
    # the list's mean over the worst case of listed elements, at most LIST_MEAN_BLOCKS_PER_SM blocks a SM
    if inplace:  # (nslots, counts, list, wide, out, C)
        assert mp == {0: base, 1: counts, 2: lst, 4: o} and (ma[3][1], ma[5][1]) == (wide, c) and len(ma) == 6
    else:  # (nslots, counts, list, wide, sums, out, C)
        assert mp == {0: base, 1: counts, 2: lst, 4: sums, 5: o} and (ma[3][1], ma[6][1]) == (wide, c) and len(ma) == 7
    assert mg == min(-(-b * min(n, vox) * c // 256), vx.LIST_MEAN_BLOCKS_PER_SM * 132) and mb == 256


def test_list_plan_caller_output_and_empty_cloud(stubbed, monkeypatch):
    """A caller's output is zeroed and written through its own pointer; an empty cloud launches the zero fill only."""
    torch = stubbed.torch
    monkeypatch.setitem(L.TUNING, "vox_list", True)
    g = (8, 8, 8)
    buf = torch.empty(2 * 512 * 3 + 1, dtype=torch.float16)
    out = buf[1:].view(2, *g, 3)
    plan = _plan("float16", 2, 700, 3, g)
    assert plan(torch.zeros(2, 700, 3, dtype=torch.float16), torch.zeros(2, 700, 3, dtype=torch.float16), out) is out
    assert stubbed.launches[0][4][2] == out.data_ptr() and stubbed.launches[-1][4][5] == out.data_ptr()
    stubbed.launches.clear()
    plan = _plan("bfloat16", 2, 0, 3, g)
    assert isinstance(plan, vx._PlanV3List) and plan.grid == plan.lgrid == 0
    plan(torch.zeros(2, 0, 3, dtype=torch.bfloat16), torch.zeros(2, 0, 3, dtype=torch.bfloat16))
    assert [x[0] for x in stubbed.launches] == ["voxel_zero_list_v3"]


def test_list_routing(stubbed, monkeypatch):
    """Where TUNING's vox_list leads: only mean, only where the flat accumulate is taken; None asks the rule."""
    g = (100, 100, 50)  # 500,000 voxels a row
    for vlist, n, want in ((False, 500, False), (True, 500, True), (True, 2_000_000, True),
                           (None, 500, True), (None, 2_000_000, False)):
        monkeypatch.setitem(L.TUNING, "vox_list", vlist)
        assert isinstance(_plan("float16", 2, n, 3, g), vx._PlanV3List) == want, (vlist, n)
    assert vx._list_pays(500, 500_000, 3, False, 2) and not vx._list_pays(2_000_000, 500_000, 3, False, 2)
    monkeypatch.setitem(L.TUNING, "vox_list", True)
    for mode in ("count", "occupancy"):
        assert not isinstance(_plan("float32", 2, 500, 3, g, mode), vx._PlanV3List)
    # the hash paths (vox_flat False or "hash", vox_hash True) keep their dense passes
    for key, val in (("vox_flat", False), ("vox_flat", "hash"), ("vox_hash", True)):
        monkeypatch.setitem(L.TUNING, key, val)
        assert not isinstance(_plan("float16", 2, 500, 3, g), vx._PlanV3List), (key, val)
        monkeypatch.setitem(L.TUNING, key, None)
    # beyond the flat kernel's 32-bit element index (N * C >= 2^31 - 1024): the hash, dense
    lim = 2**31 - vx.BLOCK * vx.PPT
    assert not isinstance(_plan("float16", 1, lim // 4, 4, (8, 8, 8)), vx._PlanV3List)
    assert isinstance(_plan("float16", 1, lim // 4 - 1, 4, (8, 8, 8)), vx._PlanV3List)
