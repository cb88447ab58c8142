"""The EpisodeCache's GPU path on the CPU, against a model of CuPy and of kernels/episodes.cu.

No GPU here, yet the GPU path's host side is most of what can go wrong on a first GPU run: the kernel's argument
block and stream table (every offset the kernel reads), the launch geometry (every target of every stream
covered once), the device tables, and the streamed mode's copies and events. This test runs the cache with
``device="cuda"`` over a fake ``cupy`` whose "device memory" is host memory with bounds checks, whose
``launchKernel`` runs a Python model of the kernel (the semantics in the kernel's header: the window hash, the
1/rate grid, numpy.interp, zeros and mask past the end) reading only through the pointers it was given, and
whose streams carry vector clocks: every read of data another stream wrote, and every overwrite of data another
stream read, must be ordered by the events the cache records and waits for (a missing wait is a data race on
the GPU). The kernel's own arithmetic is checked on a GPU (tests/gpu/test_episodes_gpu.py)."""
from __future__ import annotations

import ctypes
import sys
import types
from collections import defaultdict

import numpy as np
import pytest

from robocache import _cuda
from robocache import _launch as L
from robocache import episodes as E
from robocache.episodes import EpisodeCache
from tests.test_episodes import expected, make_episodes

HOST = "host"  # synchronous copies: seen by every stream


class FakeGpu:
    """Memory with bounds, streams with vector clocks, kernels by name."""

    def __init__(self) -> None:
        self.allocs: dict[int, tuple[int, np.ndarray, str]] = {}  # start -> (end, buffer, "device" | "pinned")
        self.clock: dict[object, dict[object, int]] = defaultdict(lambda: defaultdict(int))
        self.events: dict[int, dict[object, int]] = {}
        self.writes: list[tuple[int, int, object, int]] = []
        self.reads: list[tuple[int, int, object, int]] = []
        self.launches: dict[str, int] = defaultdict(int)
        self.async_copies = 0
        self._next = 1000
        self.functions: dict[int, str] = {}

    # memory
    def alloc(self, shape, dtype, where: str) -> np.ndarray:
        a = np.empty(shape, dtype=dtype)
        a.view(np.uint8).reshape(-1)[:] = 0xFF  # never zeros: a value the kernel did not write shows
        self.allocs[a.ctypes.data] = (a.ctypes.data + a.nbytes, a, where)
        return a

    def view(self, addr: int, nbytes: int, where: str = "device") -> np.ndarray:
        for start, (end, buf, kind) in self.allocs.items():
            if start <= addr and addr + nbytes <= end and kind == where:
                return buf.view(np.uint8).reshape(-1)[addr - start:addr - start + nbytes]
        raise AssertionError(f"access outside every {where} allocation: {addr:#x} + {nbytes}")

    # ordering
    def _tick(self, stream) -> int:
        self.clock[stream][stream] += 1
        return self.clock[stream][stream]

    def _sees(self, stream, other, seq: int) -> bool:
        return other == HOST or other == stream or self.clock[stream][other] >= seq

    def read(self, stream, seq: int, addr: int, n: int) -> None:
        for a, b, s, q in self.writes:
            if a < addr + n and addr < b and not self._sees(stream, s, q):
                raise AssertionError(f"stream {stream} reads {addr:#x}+{n} written by stream {s} without an event")
        self.reads.append((addr, addr + n, stream, seq))

    def write(self, stream, seq: int, addr: int, n: int) -> None:
        for a, b, s, q in self.reads:
            if a < addr + n and addr < b and not self._sees(stream, s, q):
                raise AssertionError(f"stream {stream} overwrites {addr:#x}+{n} that stream {s} may still read")
        self.writes = [w for w in self.writes if not (addr <= w[0] and w[1] <= addr + n)]
        self.writes.append((addr, addr + n, stream, seq))

    # the runtime
    def memcpy(self, dst, src, size, kind, stream=HOST) -> None:
        assert kind == 1, "host to device only"
        if stream == HOST:
            source = np.frombuffer((ctypes.c_char * size).from_address(src), dtype=np.uint8)
        else:  # an asynchronous copy must come from pinned memory
            source = self.view(src, size, "pinned")
            self.async_copies += 1
        seq = self._tick(stream) if stream != HOST else 0
        self.write(stream, seq, dst, size)
        self.view(dst, size)[:] = source

    def launch(self, fn_ptr, gx, gy, gz, bx, by, bz, shmem, stream, params, extra) -> None:
        name = self.functions[fn_ptr]
        self.launches[name] += 1
        seq = self._tick(stream)
        if name == "episodes_place":
            p = (ctypes.c_void_p * 4).from_address(params)
            table = ctypes.c_uint64.from_address(p[0]).value
            evicted, chunk, slot = (ctypes.c_int32.from_address(p[i]).value for i in (1, 2, 3))
            for c, v in ((evicted, -1), (chunk, slot)):
                if c >= 0:
                    self.write(stream, seq, table + 4 * c, 4)
                    self.view(table + 4 * c, 4).view(np.int32)[0] = v
            return
        assert name.startswith("episodes_batch_") and bx == 256 and gy == gz == by == bz == 1
        run_batch(self, name.removeprefix("episodes_batch_"), gx, stream, seq, params)


def run_batch(gpu: FakeGpu, out_dtype: str, grid: int, stream, seq: int, params: int) -> None:
    """kernels/episodes.cu as the header says, reading only through its arguments."""
    p = (ctypes.c_void_p * 12).from_address(params)
    tb = np.frombuffer((ctypes.c_char * ((E._HEAD + E._FIELDS * E.MAX_STREAMS) * 8)).from_address(p[0]),
                       dtype=np.int64).copy()
    u64 = lambda i: ctypes.c_uint64.from_address(p[i]).value  # noqa: E731
    i64 = lambda i: ctypes.c_int64.from_address(p[i]).value  # noqa: E731
    i32 = lambda i: ctypes.c_int32.from_address(p[i]).value  # noqa: E731
    out, mask, win, order_off, pos0, epoch = u64(1), u64(2), u64(3), i64(4), i64(5), u64(6)
    tn, dtot, n_targets, mult = i32(7), i32(8), i64(9), u64(10)
    shift = ctypes.c_uint32.from_address(p[11]).value
    order, ep, origin, chunk_of, slot_of, k_n, lo, hi = (int(x) for x in tb[:8])
    seed = int(tb[8]) & E._M64
    rate = float(tb[9:10].view(np.float64)[0])
    w = 2 + 2 * k_n
    es_out = E._ITEMSIZE[out_dtype]
    rd = lambda addr, n, dt: gpu.read(stream, seq, addr, n * np.dtype(dt).itemsize) or \
        gpu.view(addr, n * np.dtype(dt).itemsize).view(dt)  # noqa: E731
    # the blocks of each stream: every target covered once
    covered: dict[int, list[int]] = defaultdict(list)
    for blk in range(grid):
        slot = 0
        while slot + 1 < k_n and tb[E._HEAD + E._FIELDS * (slot + 1) + 6] <= blk:
            slot += 1
        base = E._HEAD + E._FIELDS * slot
        packed = int(tb[base + 5])
        lg, tpg = (packed >> 8) & 0xFF, packed >> 16
        groups = 256 >> lg
        first = (blk - int(tb[base + 6])) * groups * tpg
        q = first + np.arange(tpg)[:, None] * groups + np.arange(groups)[None, :]
        covered[slot] += q[q < n_targets].ravel().tolist()
    for slot in range(k_n):
        assert sorted(covered[slot]) == list(range(n_targets)), f"stream slot {slot}: targets not covered once"
    for q in range(0, n_targets, tn):  # the multiply-shift division the host prepared
        b_ = (q * mult >> 64) >> shift if mult else q
        assert b_ == q // tn and q - b_ * tn == 0
    n_rows = n_targets // tn
    out_v = gpu.view(out, n_targets * dtot * es_out)
    mask_v = gpu.view(mask, n_targets)
    win_v = gpu.view(win, n_rows * 24).view(np.int64)
    gpu.write(stream, seq, out, n_targets * dtot * es_out)
    gpu.write(stream, seq, mask, n_targets)
    gpu.write(stream, seq, win, n_rows * 24)
    res = np.zeros((n_rows, tn, dtot))
    for b in range(n_rows):
        e = int(rd(order + 4 * (order_off + b), 1, np.int32)[0])
        row = rd(ep + 8 * w * e, w, np.int64)
        s, length = E.window_of(seed, epoch, pos0 + b, lo, hi, int(row[1]))
        mask_v[b * tn:(b + 1) * tn] = np.arange(tn) < length
        win_v[3 * b:3 * b + 3] = (row[0], s, length)
        slot_ = int(rd(slot_of + 4 * int(rd(chunk_of + 4 * e, 1, np.int32)[0]), 1, np.int32)[0])
        assert slot_ >= 0, f"row {b}: episode {e}'s chunk is not resident"
        x = float(rd(origin + 8 * e, 1, np.float64)[0]) + (s + np.arange(length)) / rate
        for sl in range(k_n):
            base = E._HEAD + E._FIELDS * sl
            values, times, cap, d, col, packed, _, k = (int(v) for v in tb[base:base + 8])
            dt = {0: np.float32, 1: np.float16, 2: np.uint16}[packed & 0xF]
            off = slot_ * cap + int(row[2 + 2 * k])
            cnt = int(row[3 + 2 * k])
            t = rd(times + 8 * off, cnt, np.float64)
            v = rd(values + np.dtype(dt).itemsize * off * d, cnt * d, dt).reshape(cnt, d)
            v = (v.astype(np.uint32) << 16).view(np.float32) if dt == np.uint16 else v.astype(np.float32)
            for j in range(d):
                res[b, :length, col + j] = np.interp(x, t, v[:, j].astype(np.float64))
    flat = res.reshape(-1)
    if out_dtype == "bfloat16":
        bits = flat.astype(np.float32).view(np.uint32)
        out_v.view(np.uint16)[:] = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    else:
        out_v.view(out_dtype)[:] = flat.astype(out_dtype)


def fake_cupy(gpu: FakeGpu) -> tuple[types.ModuleType, types.ModuleType]:
    cupy = types.ModuleType("cupy")

    class ndarray:  # noqa: N801 - CuPy's name
        def __init__(self, a: np.ndarray) -> None:
            self._a = a
            self.data = types.SimpleNamespace(ptr=a.ctypes.data)
            self.device = types.SimpleNamespace(id=0)
            self.shape, self.dtype, self.nbytes = a.shape, a.dtype, a.nbytes

        def get(self) -> np.ndarray:
            return self._a.copy()

    class Device:
        def __init__(self, i: int = 0) -> None:
            assert i == 0

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def use(self):
            return self

    class RawModule:
        def __init__(self, code: str, options=()) -> None:
            assert "episodes_batch_float32" in code

        def get_function(self, name: str):
            gpu._next += 1
            gpu.functions[gpu._next] = name
            return types.SimpleNamespace(ptr=gpu._next)

    def empty(shape, dtype=np.float64):
        return ndarray(gpu.alloc(shape, np.dtype(dtype), "device"))

    def asarray(a):
        out = empty(np.shape(a), np.asarray(a).dtype)
        out._a[...] = a
        gpu.write(HOST, 0, out.data.ptr, out.nbytes)
        return out

    def stream_create(flags):
        gpu._next += 1
        return gpu._next

    def event_create(flags):
        gpu._next += 1
        gpu.events[gpu._next] = {}
        return gpu._next

    def event_record(ev, stream):
        gpu.events[ev] = dict(gpu.clock[stream])

    def stream_wait(stream, ev, flags=0):
        for s, q in gpu.events[ev].items():
            gpu.clock[stream][s] = max(gpu.clock[stream][s], q)

    runtime = types.SimpleNamespace(
        getDeviceCount=lambda: 1, getDevice=lambda: 0, memGetInfo=lambda: (8 << 30, 16 << 30),
        getDeviceProperties=lambda i: {"multiProcessorCount": 4}, deviceSynchronize=lambda: None,
        memcpy=lambda d, s, n, k: gpu.memcpy(d, s, n, k), memcpyAsync=lambda d, s, n, k, st: gpu.memcpy(d, s, n, k, st),
        streamCreateWithFlags=stream_create, streamDestroy=lambda s: None, streamSynchronize=lambda s: None,
        eventCreateWithFlags=event_create, eventDestroy=lambda e: None, eventRecord=event_record,
        streamWaitEvent=stream_wait, streamNonBlocking=1, eventDisableTiming=2, memcpyHostToDevice=1)
    cupy.cuda = types.SimpleNamespace(runtime=runtime, Device=Device, driver=types.SimpleNamespace(
        launchKernel=gpu.launch), get_current_stream=lambda: types.SimpleNamespace(ptr=0))
    cupy.RawModule, cupy.ndarray, cupy.empty, cupy.asarray, cupy.bool_ = RawModule, ndarray, empty, asarray, np.bool_
    cupyx = types.ModuleType("cupyx")
    cupyx.empty_pinned = lambda shape, dtype=np.float64: gpu.alloc(shape, np.dtype(dtype), "pinned")
    return cupy, cupyx


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch):
    g = FakeGpu()
    cupy, cupyx = fake_cupy(g)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupyx", cupyx)
    monkeypatch.setattr(L, "_GET_DEVICE", None)  # the launch path binds the runtime's getDevice at first use
    monkeypatch.setattr(L, "_CUPY_STREAM", None)  # and CuPy's current stream: the fake's never outlives the test
    for f in (_cuda._module, _cuda._function, L.sm_count):
        f.cache_clear()
    yield g
    for f in (_cuda._module, _cuda._function, L.sm_count):
        f.cache_clear()


def _same(c, g, out="float32") -> None:
    from robocache.bench.gate import TOLERANCE

    np.testing.assert_array_equal(g.windows.get(), c.windows)
    np.testing.assert_array_equal(g.mask.get(), c.mask)
    gx = g.x.get()
    gx = (gx.astype(np.uint32) << 16).view(np.float32) if out == "bfloat16" else gx.astype(np.float64)
    cx = np.asarray(c.x, dtype=np.float64) if out != "bfloat16" else c.x.float().numpy().astype(np.float64)
    assert (np.abs(gx - cx) / np.maximum(1.0, np.abs(cx))).max() <= TOLERANCE[out]


def _pair(eps, **kw):
    cpu = EpisodeCache(eps, device="cpu", log=lambda s: None, **kw)
    gpu = EpisodeCache(eps, device="cuda", kind="cupy", log=lambda s: None, **kw)
    return cpu, gpu


@pytest.mark.parametrize("window", [None, 24, (5, 30)])
def test_resident_batches_through_the_kernels_arguments(gpu: FakeGpu, window) -> None:
    eps = make_episodes(9, seed=40, min_s=0.6, max_s=1.5)
    cpu, dev = _pair(eps, batch_size=4, window=window, seed=3)
    assert dev.mode == "resident" and dev.device == "cuda:0"
    for _ in range(3 * len(dev)):
        c, g = cpu.next_batch(), dev.next_batch()
        _same(c, g)
        want, _ = expected(eps, ("a", "b", "c"), c.windows, c.x.shape[1])
        assert np.abs(g.x.get() - want).max() < 1e-5
    assert gpu.launches["episodes_batch_float32"] == 3 * len(dev) and gpu.async_copies == 0


def test_widths_dtypes_and_vector_paths(gpu: FakeGpu) -> None:
    torch = pytest.importorskip("torch")
    eps = make_episodes(6, seed=41, streams=(("a", 30.0, 8, "float32"), ("b", 100.0, 16, "float16"),
                                             ("c", 7.0, 8, "float32")))
    cpu, dev = _pair(eps, batch_size=3, seed=2)
    assert dev._n_vec == [4, 4, 4]
    for _ in range(4):
        _same(cpu.next_batch(), dev.next_batch())
    bf = [{k: (t, torch.from_numpy(v.astype(np.float32)).to(torch.bfloat16)) for k, (t, v) in ep.items()}
          for ep in eps]
    with pytest.raises(TypeError, match="CuPy has no bfloat16"):  # all-bfloat16 streams: bfloat16 out
        EpisodeCache(bf, device="cuda", kind="cupy", batch_size=3, log=lambda s: None)
    dev = EpisodeCache(bf, device="cuda", kind="cupy", batch_size=3, out_dtype="float16", log=lambda s: None)
    cpu = EpisodeCache(bf, device="cpu", kind="torch", batch_size=3, out_dtype="float16", log=lambda s: None)
    assert dev._n_vec == [8, 8, 8]  # 16 bytes of bfloat16 in, of float16 out per lane
    for _ in range(3):
        c, g = cpu.next_batch(), dev.next_batch()
        np.testing.assert_array_equal(g.windows.get(), c.windows.numpy())
        ref = c.x.double().numpy()
        assert (np.abs(g.x.get().astype(np.float64) - ref) / np.maximum(1, np.abs(ref))).max() <= 2e-3


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_streamed_copies_and_events_are_ordered(gpu: FakeGpu, depth) -> None:
    """The streamed mode: copies from pinned memory on a side stream into a ring; the model flags any read of a
    slot before the main stream waited for its copy, and any copy into a slot a launched batch may still read."""
    eps = make_episodes(24, seed=42)
    full = EpisodeCache(eps, batch_size=2, device="cpu", log=lambda s: None).device_bytes
    cpu, dev = _pair(eps, batch_size=2, memory_budget=full // 2, prefetch_depth=depth, seed=5)
    assert dev.mode == "streamed" and (dev.chunks, dev.slots) == (cpu.chunks, cpu.slots)
    for _ in range(4 * len(dev)):
        _same(cpu.next_batch(), dev.next_batch())
    assert dev.chunk_copies == cpu.chunk_copies > dev.chunks
    assert gpu.async_copies == 2 * 3 * dev.chunk_copies  # times and values of three streams per chunk copied
    assert gpu.launches["episodes_place"] == dev.chunk_copies
    state = dev.state_dict()  # a jump (resume elsewhere) keeps the ring consistent
    dev.load_state_dict({**state, "epoch": 1, "batch": 3})
    cpu.load_state_dict({**cpu.state_dict(), "epoch": 1, "batch": 3})
    for _ in range(len(dev) + 2):
        _same(cpu.next_batch(), dev.next_batch())


def test_the_model_catches_a_missing_wait(gpu: FakeGpu, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ordering check is live: without the main stream's wait for a chunk's copy, the first batch fails."""
    monkeypatch.setattr(E._GpuOps, "wait", lambda self, slot: None)
    eps = make_episodes(24, seed=42)
    full = EpisodeCache(eps, batch_size=2, device="cpu", log=lambda s: None).device_bytes
    dev = EpisodeCache(eps, batch_size=2, device="cuda", kind="cupy", memory_budget=full // 2, log=lambda s: None)
    with pytest.raises(AssertionError, match="without an event"):
        dev.next_batch()


def test_the_model_catches_an_early_overwrite(gpu: FakeGpu, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(E._GpuOps, "release_point", lambda self, slots: None)
    eps = make_episodes(24, seed=42)
    full = EpisodeCache(eps, batch_size=2, device="cpu", log=lambda s: None).device_bytes
    dev = EpisodeCache(eps, batch_size=2, device="cuda", kind="cupy", memory_budget=full // 2, log=lambda s: None)
    with pytest.raises(AssertionError, match="may still read"):
        for _ in range(2 * len(dev)):
            dev.next_batch()
