"""The v2 launch path's host arithmetic, without a GPU: multiply-shift division, vector width and launch
shape choice, the per-signature plan key, and the argument block handed to cuLaunchKernel (read back
through a fake CuPy driver)."""
from __future__ import annotations

import ctypes
import struct
import sys
import types

import numpy as np
import pytest

from robocache import _launch as L


def test_fast_divmod_matches_integer_division():
    rng = np.random.default_rng(0)
    divisors = [1, 2, 3, 7, 50, 100, 127, 128, 129, 5000, 2**31 - 1] + list(rng.integers(1, 2**31, 200))
    for d in divisors:
        m, s = L.fast_divmod(int(d))
        for q in [0, 1, int(d) - 1, int(d), int(d) + 1, 2**62, 2**63 - 1, *rng.integers(0, 2**63 - 1, 50)]:
            q = int(q)
            got = ((q * int(m)) >> 64) >> int(s) if int(m) else q
            assert got == q // int(d), (q, d)
        m32, s32 = L.fast_divmod32(int(d))  # 32-bit unsigned arithmetic throughout, numerators below 2**31
        assert 0 < m32 < 2**32 and 0 <= s32 <= 31
        for q in [0, 1, int(d) - 1, int(d), int(d) + 1, 2**31 - 1, *rng.integers(0, 2**31, 50)]:
            q = int(q)
            assert ((((q * m32) >> 32) + q) & 0xFFFFFFFF) >> s32 == q // int(d), (q, d)
    for bad in (0, 2**31):
        with pytest.raises(ValueError, match="outside"):
            L.fast_divmod32(bad)


@pytest.mark.parametrize("itemsize,row,ptrs,want", [
    (4, 128, (0, 256), 16), (2, 64, (0, 512), 16), (2, 14, (0, 0), 2), (4, 28, (0, 0), 4),
    (2, 24, (0, 0), 8), (4, 128, (4, 0), 4), (2, 64, (2, 0), 2), (4, 24, (8, 0), 8),
])
def test_vector_bytes(itemsize, row, ptrs, want):
    assert L.vector_bytes(itemsize, (row,), ptrs) == want


@pytest.mark.parametrize("d,itemsize,vb,n", [(1, 4, 4, 10), (32, 2, 16, 1_638_400), (1024, 2, 16, 5), (7, 4, 4, 3),
                                           (270, 4, 8, 12800)])
def test_row_geometry_covers_every_target(d, itemsize, vb, n):
    lg, tpg, blocks = L.row_geometry(d, itemsize, vb, n, sms=132)
    assert 0 <= lg <= 5 and 1 <= tpg <= 8
    nvec = d * itemsize // vb
    assert (1 << lg) >= min(32, nvec)  # one pass covers the row (or a whole warp loops over it)
    assert blocks * (L.BLOCK >> lg) * tpg >= n  # every target is someone's
    assert (blocks - 1) * (L.BLOCK >> lg) * tpg < n  # and no block is wholly idle


def test_fast_launch_argument_block(monkeypatch):
    seen = {}

    def launchKernel(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):  # noqa: N802 - CUDA's name
        ptrs = (ctypes.c_void_p * 5).from_address(params)
        seen.update(f=f, grid=(gx, gy, gz), block=(bx, by, bz), smem=smem, stream=stream,
                    p0=ctypes.c_uint64.from_address(ptrs[0]).value,
                    i32=ctypes.c_int32.from_address(ptrs[1]).value,
                    f32=ctypes.c_float.from_address(ptrs[2]).value,
                    i64=ctypes.c_int64.from_address(ptrs[3]).value,
                    table=bytes((ctypes.c_char * 16).from_address(ptrs[4])))

    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(driver=types.SimpleNamespace(launchKernel=launchKernel)))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    table = np.zeros(2, dtype=np.int64)
    fl = L.FastLaunch(types.SimpleNamespace(ptr=1234),
                      [("ptr", None), ("i32", -5), ("f32", 1.5), ("i64", 2**40), ("struct", table.tobytes())])
    fl(77, 99, 4096, {0: 0xDEADBEEF00}, {1: 42})
    assert seen["f"] == 1234 and seen["grid"] == (77, 1, 1) and seen["block"] == (L.BLOCK, 1, 1)
    assert seen["smem"] == 4096 and seen["stream"] == 99
    assert seen["p0"] == 0xDEADBEEF00 and seen["i32"] == -5 and seen["f32"] == 1.5 and seen["i64"] == 2**40
    assert struct.unpack("<qq", seen["table"]) == (0, 42)


def test_signature_is_none_for_host_arrays():
    assert L.signature(np.zeros(3)) is None
    assert L.signature([1, 2]) is None
    torch = pytest.importorskip("torch")
    assert L.signature(torch.zeros(3)) is None  # CPU tensors take the full (reference) path


def test_cupy_signature_and_pointer_by_cupy_fields(monkeypatch):
    """A CuPy array's signature reads its memory pointer's device and address and its _c_contiguous field (no Device
    or Flags object a call), the same tuple as the public attributes give; a CuPy without those fields keeps the
    public ones. Its address is read by its type (no AttributeError caught a call), learned on first sight."""
    class MemoryPointer:  # readonly fields, descriptors of the type as in CuPy
        def __init__(self, dev, p):
            self._dev, self._p = dev, p
        device_id = property(lambda self: self._dev)
        ptr = property(lambda self: self._p)

    class OldArray:  # the public attributes only (as a CuPy without the readonly field would be)
        def __init__(self, p, contiguous=True):
            self.shape, self.dtype, self._mem, self._cc = (2, 3), np.dtype("float32"), MemoryPointer(1, p), contiguous
            self.device = types.SimpleNamespace(id=1)
            self.flags = types.SimpleNamespace(c_contiguous=contiguous)
        data = property(lambda self: self._mem)

    class ndarray(OldArray):  # noqa: N801 - CuPy's name; its fields are descriptors of the type, as Cython's are
        _c_contiguous = property(lambda self: self._cc)

    fake = types.SimpleNamespace(ndarray=ndarray, cuda=types.SimpleNamespace(MemoryPointer=MemoryPointer))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(L, "_SIG_OF", {})
    monkeypatch.setattr(L, "_PTR_OF", {})
    a, b = ndarray(4096 + 8), ndarray(4096, contiguous=False)
    assert L.signature(a) == ((2, 3), np.dtype("float32"), 1, True, 8, 1) == L._sig_cupy_public(a)
    assert L.signature(b) == L._sig_cupy_public(b) and L.signature(b)[3] is False
    assert L._SIG_OF[ndarray] is L._sig_cupy
    fake.ndarray = OldArray
    old = OldArray(64)
    assert L.signature(old) == L._sig_cupy_public(old) and L._SIG_OF[OldArray] is L._sig_cupy_public
    assert L.ptr(b) == 4096 and L._PTR_OF[ndarray] is L._ptr_cupy and L.ptr(b) == 4096
    assert L.ptr_of("cupy") is L._ptr_cupy and L.ptr_of("torch") is L._ptr_torch  # a plan's reader by its kind
    assert L.signature_of(ndarray) is L._sig_cupy and L.signature_of(dict) is L.signature  # unlearned: the lookup
    import importlib

    fuse = importlib.import_module("robocache.fuse")  # a key from the target times' reader equals one by lookups
    fake.ndarray = ndarray
    streams = [(ndarray(512), ndarray(1024 + 4)), (old, ndarray(2048, contiguous=False))]
    assert fuse._signature(streams, a) == (L.signature(a),) + tuple(L.signature(x) for p in streams for x in p)
    assert fuse._signature([(a, [1.0])], a)[-1] is None and fuse._signature([(a,)], a) is None
    torch = pytest.importorskip("torch")
    x = torch.zeros(3)
    assert L.ptr(x) == x.data_ptr() and L.ptr(x) == x.data_ptr() and type(x) in L._PTR_OF


@pytest.mark.parametrize("d,n", [(1, 12800), (32, 12800), (1024, 4), (32, 1_638_400), (1, 1)])
def test_block_threads_spreads_small_problems(d, n):
    threads = L.block_threads(d, 4, 4 if d < 4 else 16, n, sms=132)
    assert threads in (32, 64, 128, 256)
    lg, tpg, blocks = L.row_geometry(d, 4, 4 if d < 4 else 16, n, 132, threads=threads)
    assert blocks * (threads >> lg) * tpg >= n
    if threads < 256:  # halved only because bigger blocks left SMs idle
        lg2, tpg2, blocks2 = L.row_geometry(d, 4, 4 if d < 4 else 16, n, 132, threads=threads * 2)
        assert blocks2 < 2 * 132


class _FakeGpuArray:
    """Stands in for a CUDA array in the plan-key tests (no GPU here)."""


def test_voxelize_plan_key_refuses_what_could_change_or_mislead(monkeypatch):
    import importlib

    vox = importlib.import_module("robocache.voxelize")  # the module (the package exports the function)

    monkeypatch.setitem(L._SIG_OF, _FakeGpuArray, lambda x: ("fake", id(type(x))))
    pts = _FakeGpuArray()
    bounds = ((-1.0, -1.0, -1.0), (1.0, 1.0, 1.0))
    assert vox._key(pts, None, (8, 8, 8), bounds, "count") is not None
    assert vox._key(pts, None, (8, 8, 8), ((-1, -1, -1), (1, 1, 1)), "count") is not None
    assert vox._key(pts, None, (True, 8, 8), bounds, "count") is None  # True == 1 must not share a plan
    assert vox._key(pts, None, [8, 8, 8], bounds, "count") is None
    assert vox._key(pts, None, (8, 8, 8), np.array(bounds), "count") is None  # arrays change in place
    assert vox._key(pts, None, (8, 8, 8), ((-1.0, -1.0, True), (1.0, 1.0, 1.0)), "count") is None
    torch = pytest.importorskip("torch")
    assert vox._key(pts, None, (8, 8, 8), (torch.zeros(3), torch.ones(3)), "count") is None
    # host features beside GPU points: never the features=None plan (the full path raises mixed kinds)
    assert vox._key(pts, np.zeros((1, 4, 2)), (8, 8, 8), bounds, "count") is None


def _guess_search(row: np.ndarray, x: float) -> tuple[int, int]:
    """A line-by-line emulation of rc_upper_bound_guess (kernels/rows_v2.cuh) with float32 guess arithmetic:
    (answer, the largest index it read)."""
    n = len(row)
    f32 = np.float32
    read = [0, n - 1]
    with np.errstate(all="ignore"):
        span = f32(row[-1] - row[0])
        gf = f32(f32(x - row[0]) / span) * f32(n - 1)
        if not gf >= 0:
            gf = f32(0)
        if gf > f32(n - 1):
            gf = f32(n - 1)
    j = min(int(gf) if gf < 2**31 else 2**31 - 1, n - 1)
    read.append(j)
    if row[j] <= x:
        lo, hi, step = j, j + 1, 2
        while hi < n and (read.append(hi) or row[hi] <= x):
            lo, hi, step = hi, min(n, hi + step), step * 2
    else:
        hi, lo, step = j, j - 1, 2
        while lo >= 0 and (read.append(lo) or not row[lo] <= x):
            hi, lo, step = lo, max(-1, lo - step), step * 2
    while hi - lo > 1:
        mid = lo + ((hi - lo) >> 1)
        read.append(mid)
        if row[mid] <= x:
            lo = mid
        else:
            hi = mid
    return lo, max(read)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 100, 2**24 + 4])
def test_guessed_search_is_exact_and_stays_in_the_row(n):
    """numpy.interp's bracket (last index with row[j] <= x) from the guessed, galloping search, on rows
    near-uniform, clustered, with repeats and all equal; no read past the row (2**24 + 4: float32 rounds
    n - 1 up to n)."""
    rng = np.random.default_rng(n)
    rows = [np.sort(rng.uniform(0, 1, n)), np.sort(np.round(rng.uniform(0, 1, n) * 4) / 4), np.full(n, 0.5),
            np.sort(np.concatenate([rng.uniform(0, 1e-3, n // 2), rng.uniform(1e3, 1e3 + 1, n - n // 2)]))]
    if n > 10**6:
        rows = [np.arange(n, dtype=np.float64)]  # uniform and huge: the float32 guess lands at n - 1 or beyond
    for row in rows:
        xs = np.concatenate([rng.uniform(row[0] - 1, row[-1] + 1, 40), row[rng.integers(0, n, 10)],
                             [row[0], row[-1], np.inf, -np.inf, np.nan]])
        for x in xs:
            got, top = _guess_search(row, float(x))
            want = -1 if np.isnan(x) else int(np.searchsorted(row, x, side="right")) - 1
            assert got == want, (n, x)
            assert top <= n - 1


def _seq_brackets(row: np.ndarray, xs: np.ndarray, walk: int = 4) -> list[int]:
    """A line-by-line emulation of the RC_V2_SEQ build's bracketing (kernels/rows_v2.cuh, rc_rows_v2 and
    rc_walk): one group's run of targets in one row, each bracketed by walking on from the previous target's
    answer when its time is not smaller, else by the guessed search."""
    n = len(row)
    out: list[int] = []
    jp, xp, first = -1, 0.0, True
    for x in xs:
        if not first and x >= xp:  # NaN (x or xp) compares false: the search
            j, s = jp, 0
            while s < walk and j + 1 < n and row[j + 1] <= x:
                j, s = j + 1, s + 1
            if j + 1 < n and row[j + 1] <= x:
                j = _guess_search(row, float(x))[0]
        else:
            j = _guess_search(row, float(x))[0]
        out.append(j)
        jp, xp, first = j, x, False
    return out


@pytest.mark.parametrize("n", [1, 2, 5, 100, 3000])
def test_seq_walk_brackets_like_the_search(n):
    """RC_V2_SEQ's walk gives numpy.interp's bracket for upsampled, downsampled, unsorted and NaN target runs on
    rows near-uniform, with repeats and all equal."""
    rng = np.random.default_rng(n + 7)
    rows = [np.sort(rng.uniform(0, 1, n)), np.sort(np.round(rng.uniform(0, 1, n) * 4) / 4), np.full(n, 0.5)]
    for row in rows:
        runs = [np.sort(rng.uniform(row[0] - 0.1, row[-1] + 0.1, 4 * n + 3)),  # upsampling: walks of 0-1 steps
                np.sort(rng.uniform(row[0], row[-1], max(2, n // 16))),       # downsampling: walks past the cap
                rng.uniform(row[0] - 0.1, row[-1] + 0.1, 50),                 # unsorted
                np.array([row[0], np.nan, row[-1], row[-1], np.inf, -np.inf, row[0]])]
        for xs in runs:
            want = [-1 if np.isnan(x) else int(np.searchsorted(row, x, side="right")) - 1 for x in xs]
            assert _seq_brackets(row, xs) == want, (n, xs[:5])


def test_output_allocates_fresh_contiguous_arrays_from_a_one_element_template(monkeypatch):
    """A plan's output (torch): the shape and dtype asked for, C-contiguous, a new storage every call, the template
    one element; ``dtype`` overrides the like array's; shapes of one and many dimensions."""
    torch = pytest.importorskip("torch")
    like = torch.zeros(2, 3, dtype=torch.bfloat16)
    for shape, dtype, want in (((4, 5, 6), None, torch.bfloat16), ((7,), "int32", torch.int32),
                               ((2, 3, 4, 5), "bool", torch.bool), ((1, 1, 1), "float32", torch.float32)):
        for fast in (True, False):
            if not fast:  # a torch without Inductor's allocation: the template
                monkeypatch.setattr(L, "_strided_empty", lambda *a: None)
            alloc = L.Output("torch", tuple(np.int64(n) for n in shape), 0, dtype)  # NumPy sizes too
            a, b = alloc(like), alloc(like)
            assert tuple(a.shape) == shape and a.dtype == want and a.is_contiguous() and b.is_contiguous()
            assert a.stride() == torch.empty(shape).stride() and type(a) is torch.Tensor
            assert a.data_ptr() != b.data_ptr() and a.untyped_storage().nbytes() == a.numel() * a.element_size()
            if fast:
                assert alloc.fn.func is torch._C._dynamo.guards._empty_strided_cpu
            else:
                assert alloc.fn.args[0].untyped_storage().nbytes() == want.itemsize  # the template: one element
            monkeypatch.undo()


def test_contiguous_strides_are_torchs_for_every_shape():
    """The strides handed to Inductor's allocation are torch's own contiguous strides, zero-size dimensions included."""
    torch = pytest.importorskip("torch")
    for shape in ((4, 5, 6), (7,), (2, 0, 3), (0,), (1, 1, 1), (3, 1, 0, 2)):
        assert L._contiguous_strides(shape) == torch.empty(shape).stride(), shape


def test_the_cuda_allocation_runs_only_on_the_plans_current_device(monkeypatch):
    """The CUDA branch of ``_strided_empty`` (no GPU here: a stand-in torch): Inductor's allocation with the plan's
    shape, torch's contiguous strides and dtype while the current device is the tensor's, the template (``slow``)
    otherwise, checked on every call; a torch without either function gets no fast path."""
    calls: list[tuple] = []
    current = [1]

    class Tensor:
        is_cuda = True

        def get_device(self) -> int:
            return 1

    guards = types.SimpleNamespace(_empty_strided_cuda=lambda size, stride, dt: calls.append(("fast", size, stride,
                                                                                            dt)) or "fast")
    fake = types.SimpleNamespace(Tensor=Tensor, _C=types.SimpleNamespace(_dynamo=types.SimpleNamespace(guards=guards),
                                                                         _cuda_getDevice=lambda: current[0]))
    runtime = [1]
    monkeypatch.setattr(L, "_GET_DEVICE", lambda: runtime[0])
    alloc = L._strided_empty(fake, Tensor(), (2, 3, 4), "bf16", lambda: calls.append(("slow",)) or "slow")
    assert calls == [("fast", (0,), (1,), "bf16")]  # the one trial of the argument form
    assert alloc() == "fast" and calls[-1] == ("fast", (2, 3, 4), (12, 4, 1), "bf16")
    current[0] = 0  # another device current (torch.cuda.device(0) around a call of a device-1 plan)
    assert alloc() == "slow" and calls[-1] == ("slow",)
    current[0], runtime[0] = 1, 0  # torch's view and the runtime's differ: the template
    assert alloc() == "slow"
    runtime[0] = 1
    assert alloc() == "fast"

    def changed(size, stride, dt):
        raise TypeError("a new argument form")
    fake._C._dynamo.guards._empty_strided_cuda = changed
    assert L._strided_empty(fake, Tensor(), (2,), "bf16", None) is None  # a torch whose form changed: the template
    assert L._strided_empty(fake, object(), (2,), "bf16", None) is None  # not a plain tensor
    del fake._C._cuda_getDevice
    assert L._strided_empty(fake, Tensor(), (2,), "bf16", None) is None  # an older torch


def test_output_of_a_subclass_keeps_the_template():
    """A tensor subclass never takes Inductor's allocation (it would come back a plain tensor): the template."""
    torch = pytest.importorskip("torch")

    class Sub(torch.Tensor):
        pass
    like = torch.zeros(2, 3).as_subclass(Sub)
    alloc = L.Output("torch", (4, 5), 0)
    out = alloc(like)
    assert type(out) is Sub and tuple(out.shape) == (4, 5) and alloc.fn.func is torch.empty_like


def test_zeros_clears_the_whole_output_once(monkeypatch):
    """``zeros`` for torch: an ``Output`` from the bounded cache, then one memset of exactly its bytes."""
    torch = pytest.importorskip("torch")
    seen = []

    def memset(kind, dev, ptr, nbytes):
        seen.append((kind, dev, ptr, nbytes))
        ctypes.memset(ptr, 0, nbytes)
    monkeypatch.setattr(L, "memset_zero", memset)
    like = torch.ones(3)
    for shape, dtype in (((2, 4, 4, 4), "int32"), ((5, 3), "bool"), ((2, 4, 4, 4), "int32")):
        seen.clear()
        x = L.zeros("torch", shape, dtype, like, 0)
        assert tuple(x.shape) == shape and str(x.dtype) == f"torch.{dtype}" and not x.any()
        assert seen == [("torch", 0, x.data_ptr(), x.numel() * x.element_size())]
    # keyed by the like's device (-1: the CPU) and type: this host template never serves a CUDA caller of device 0
    assert L._ZERO_OUTPUTS.get(((2, 4, 4, 4), "int32", -1, torch.Tensor)) is not None
    assert L._ZERO_OUTPUTS.get(((2, 4, 4, 4), "int32", 0, torch.Tensor)) is None

    class Sub(torch.Tensor):
        pass
    y = L.zeros("torch", (2, 4, 4, 4), "int32", like.as_subclass(Sub), 0)
    assert type(y) is Sub and not y.any()  # as new_empty of the caller's tensor: not the first caller's type
    assert type(L.zeros("torch", (2, 4, 4, 4), "int32", like, 0)) is torch.Tensor


def test_cupy_output_keeps_the_dtype_not_the_array():
    """A CuPy plan's Output reads its first array's dtype and holds no reference to it: a plan in the cache of 1024
    would otherwise keep a caller's input alive."""
    class Arr:  # what Output reads of a CuPy array
        dtype = np.dtype("float16")
    like = Arr()
    fn = L.Output("cupy", (2, 3), 0)._build(like)
    assert all(getattr(fn, a) is not like for a in type(fn).__slots__) and fn.dtype == np.float16
    assert fn.shape == (2, 3) and fn.dev == 0
    assert L.Output("cupy", (2, 3), 0, "int32")._build(like).dtype == np.int32


def test_cupy_output_and_stream_on_the_plans_device(monkeypatch):
    """A CuPy plan's output: cupy.ndarray(shape, dtype) (C order, what cupy.empty makes) on the current device when it
    is the plan's, else inside the plan's device; the launch stream is CuPy's current one, read through the function
    bound at first use."""
    made, entered, current = [], [], [0]

    class Device:
        def __init__(self, i):
            self.i = i

        def __enter__(self):
            entered.append(self.i)

        def __exit__(self, *a):
            entered.append(-1)

    def ndarray(shape, dtype):
        made.append((shape, dtype, entered[-1] if entered and entered[-1] >= 0 else current[0]))
        return made[-1]
    streams = iter([types.SimpleNamespace(ptr=111), types.SimpleNamespace(ptr=222)])
    fake = types.SimpleNamespace(ndarray=ndarray, cuda=types.SimpleNamespace(Device=Device,
                                                                            get_current_stream=lambda: next(streams)))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(L, "_GET_DEVICE", lambda: current[0])
    monkeypatch.setattr(L, "_CUPY_STREAM", None)
    alloc = L.Output("cupy", (2, 3), 1)._build(types.SimpleNamespace(dtype=np.dtype("float16")))
    current[0] = 1
    assert alloc() == ((2, 3), np.float16, 1) and entered == []  # the plan's device current: no device switch
    current[0] = 0
    assert alloc() == ((2, 3), np.float16, 1) and entered == [1, -1]  # another current: entered, then left
    assert L.raw_stream("cupy", 0) == 111 and L.raw_stream("cupy", 0) == 222  # read each call, bound once
    assert L._CUPY_STREAM is fake.cuda.get_current_stream


def test_recent_plans_newest_first_bounded_and_cleared(monkeypatch):
    """PlanCache.recent: the plans put or fetched with a tensor check, newest first, RECENT at most, a plan once; a
    plan without a check (not torch CUDA tensors, or no check on this torch) only in the dict; clear() empties both."""
    import torch

    cpu = torch.zeros(2, 3)
    assert L.tensor_check((cpu,)) is None  # host tensors never get a check
    arrays = [types.SimpleNamespace(data_ptr=lambda i=i: 256 + i) for i in range(L.RECENT + 3)]  # the last "host"
    monkeypatch.setattr(L, "tensor_check",
                        lambda tensors: (lambda *a: a == tensors) if tensors[0] is not arrays[-1] else None)
    pc = L.PlanCache(size=8)
    plans = [f"plan{i}" for i in range(L.RECENT + 2)]
    for i, p in enumerate(plans):
        pc.put(("k", i), p, (arrays[i],))
    assert [e[2] for e in pc.recent] == plans[::-1][:L.RECENT]
    assert pc.recent[0][1] == ((256 + len(plans) - 1) & 15,)  # the alignments the fast path compares
    assert pc.recent[0][0](arrays[len(plans) - 1]) and not pc.recent[0][0](arrays[0])
    assert pc.get(("k", 0)) == "plan0" and pc.recent[0][2] == "plan0"  # a dict hit moves its plan to the front
    assert pc.get(("k", 0)) == "plan0" and [e[2] for e in pc.recent].count("plan0") == 1
    assert len(pc.recent) == L.RECENT
    pc.put(("h",), "hostplan", (arrays[-1],))
    assert pc.get(("h",)) == "hostplan" and all(e[2] != "hostplan" for e in pc.recent)
    pc.put(("n",), "nocheck")
    assert pc.get(("n",)) == "nocheck" and pc.recent[0][2] == "plan0"
    pc.clear()
    assert pc.recent == () and pc.get(("k", 0)) is None


def test_a_tensor_passed_twice_keeps_the_check_bound_and_distinct_calls_pass_it(monkeypatch):
    """TensorGuards refuses a tensor repeated among its arguments (Dynamo's guards need them distinct). A plan first
    built from such a call (fuse onto one stream's own times, streams sharing a clock, resample(v, t, t)) gets a
    check built from a view of the repeated tensor: repeated calls fail it (the signature path), distinct tensors
    of the same signature pass it, and the check stays bound. A check that refuses its own tensors gives that plan
    none and stays bound; a constructor that raises turns it off for the process. Host tensors stand in for CUDA
    ones (is_cuda patched)."""
    import torch

    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    monkeypatch.setattr(L, "_TENSOR_GUARDS", None)
    v, t, t2 = torch.zeros(4, 8, 3), torch.zeros(4, 8), torch.zeros(4, 8)
    assert L.tensor_check((v, t, t2)) is not None
    bound = L._TENSOR_GUARDS
    assert bound not in (None, False)
    check = L.tensor_check((v, t, t))
    assert L._TENSOR_GUARDS is bound and check is not None
    assert check(v, t, t2) and not check(v, t, t)  # distinct tensors pass, a repeated one takes the signature path
    assert not check(v, t, torch.zeros(4, 9)) and not check(v, t, torch.zeros(4, 8, dtype=torch.float64))
    pc = L.PlanCache()
    pc.put(("k",), "plan", (v, t, t))
    assert [e[2] for e in pc.recent] == ["plan"] and pc.recent[0][0](v, t, t2)

    class Refuses:  # a check that refuses its own tensors: no check for this plan, the binding kept
        def __init__(self, *a, **kw):
            self.check = lambda *a: False
    monkeypatch.setattr(L, "_TENSOR_GUARDS", Refuses)
    assert L.tensor_check((v, t, t2)) is None and L._TENSOR_GUARDS is Refuses

    class Raises:
        def __init__(self, *a, **kw):
            raise RuntimeError("another form")
    monkeypatch.setattr(L, "_TENSOR_GUARDS", Raises)
    assert L.tensor_check((v, t, t2)) is None and L._TENSOR_GUARDS is False
    assert L.tensor_check((v, t, t2)) is None  # off for the process
    monkeypatch.setattr(L, "_TENSOR_GUARDS", None)  # the one-time test of the binding passes on this torch
    assert L._bind_tensor_guards(torch) is not False


def test_plan_cache_drops_the_least_recently_used():
    pc = L.PlanCache(size=2)
    pc.put(("a",), "A")
    pc.put(("b",), "B")
    assert pc.get(("a",)) == "A"  # a used: b is now the least recently used
    pc.put(("c",), "C")
    assert pc.get(("b",)) is None and pc.get(("a",)) == "A" and pc.get(("c",)) == "C"
