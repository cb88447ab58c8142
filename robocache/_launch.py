"""The launch path of the newer kernel versions: geometry chosen from the problem, at the launch floor.

Three things make a small call expensive in Python: validating the same shapes again, entering CuPy's
device and stream context managers, and building kernel arguments. Here validation is done once per
*signature* (array kind, shapes, dtypes, device, contiguity, pointer alignment: everything the checks
read; never data), its result cached as a :class:`Plan` that holds the kernel, the launch shape and the
constant arguments; a call then reads four pointers, allocates the output and launches on the caller's
current stream (PyTorch's or CuPy's), entering no context manager unless the current device differs.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib
import struct
import sys
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from . import _cuda

def cupy_module() -> Any:
    """CuPy, imported on first need: a process that holds only torch tensors may call robocache before anything
    imported CuPy (the tuner's device context, a launch), and ``sys.modules["cupy"]`` would then be a KeyError."""
    m = sys.modules.get("cupy")
    return m if m is not None else importlib.import_module("cupy")


BLOCK = 256
PLAN_CACHE_SIZE = 1024  # signatures; a training loop has a handful
# Launch-shape switches for kernel experiments (scripts/kernel_dev.py, scripts/vox_probe.py); None = the measured
# default (a rule). Plans built under one setting are cached: clear the op's plan cache after changing one.
# vox_list (voxelize mean through a list of the occupied voxels, robocache/voxelize.py _list_pays): None the rule
# (sparse rows, its constants set by an H200 A/B), True always (where the flat accumulate is taken), False never.
# False until the whole tests/gpu has run with the rule as the default and a fresh seed has measured it (the A/B that
# set the rule's launch cost was its own test set: docs/kernels.md, "... the list path measured").
TUNING: dict[str, Any] = {"vox_hash": None, "vox_flat": None, "vox_list": False}


def fast_divmod(d: int) -> tuple[np.uint64, np.uint32]:
    """(multiplier, shift) with q // d == umul64hi(q, m) >> s for 0 <= q < 2**63 (FastDivmod, 64-bit)."""
    if d == 1:
        return np.uint64(0), np.uint32(0)
    p = 63 + (d - 1).bit_length()
    return np.uint64(((1 << p) + d - 1) // d), np.uint32(p - 64)


def fast_divmod32(d: int) -> tuple[int, int]:
    """(multiplier, shift) with q // d == (umulhi(q, m) + q) >> s for 0 <= q < 2**31 and 1 <= d < 2**31 (PyTorch's
    IntDivider: 32-bit unsigned arithmetic throughout; kernels/rows_spec.cu's 32-bit entries)."""
    if not 1 <= d < 2**31:
        raise ValueError(f"fast_divmod32: divisor {d} outside [1, 2**31)")
    shift = (d - 1).bit_length()  # ceil(log2 d)
    return ((1 << 32) * ((1 << shift) - d)) // d + 1, shift


@functools.cache
def sm_count(device_index: int) -> int:
    import cupy

    return int(cupy.cuda.runtime.getDeviceProperties(device_index)["multiProcessorCount"])


def vector_bytes(itemsize: int, sizes_bytes: tuple[int, ...], ptrs: tuple[int, ...]) -> int:
    """The widest access (16, 8, 4 bytes or one element) that every row size, offset and pointer allows."""
    for vb in (16, 8, 4, 2):
        if vb < itemsize:
            break
        if all(s % vb == 0 for s in sizes_bytes) and all(p % vb == 0 for p in ptrs):
            return vb
    return itemsize


def row_geometry(d: int, itemsize: int, vb: int, n_targets: int, sms: int, streams_share: float = 1.0,
                 threads: int = BLOCK, lg_shift: int = 0, tpg: int = 0) -> tuple[int, int, int]:
    """(lg, tpg, blocks) for one stream: 2**lg lanes per output row, tpg rows per group per block.

    Lanes per row: enough to cover the row's vectors in one pass, at most a warp, then ``lg_shift`` times
    halved (down to one lane: fewer lanes repeat the row's search fewer times; a launch configuration's
    choice, robocache/_tune.py). Rows per group: ``tpg`` when given, else 1 while the launch has fewer than
    ~4 waves of full blocks and more when it has many more (amortises the block start and keeps each
    group's loads independent), at most 8.
    """
    nvec = max(1, (d * itemsize) // vb)
    lg = max(0, min(5, (nvec - 1).bit_length()) - max(0, lg_shift))
    groups = threads >> lg
    if tpg <= 0:
        want_blocks = max(1, int(sms * (2048 // threads) * 4 * streams_share))  # resident blocks per SM, 4 waves
        tpg = int(min(8, max(1, n_targets // (groups * want_blocks))))
    blocks = -(-n_targets // (groups * tpg))
    return lg, tpg, blocks


def block_threads(d: int, itemsize: int, vb: int, n_targets: int, sms: int, lg_shift: int = 0,
                  tpg: int = 0) -> int:
    """Threads per block for a one-stream launch: 256, halved (down to one warp) while the launch would
    leave SMs idle (fewer than two blocks per SM), so a small problem is spread over the whole chip
    (measured on an H100: B256 S100 T50 D1 ran on 50 of 132 SMs with 256-thread blocks)."""
    threads = BLOCK
    while threads > 32:
        lg, _, blocks = row_geometry(d, itemsize, vb, n_targets, sms, threads=threads, lg_shift=lg_shift, tpg=tpg)
        if blocks >= 2 * sms:
            break
        threads //= 2
    return max(threads, 32)


def wide_geometry(warps: int, sms: int, threads: int = 0) -> tuple[int, int]:
    """(threads per block, blocks) of a column-split launch (kernels/rows_wide.cu) of ``warps`` virtual warps (a
    row's 2**cs warps each): ``threads`` when given, else 256 halved (down to one warp) while the launch would
    leave SMs idle, as :func:`block_threads` does for the row kernel."""
    if threads <= 0:
        threads = BLOCK
        while threads > 32 and -(-warps // (threads // 32)) < 2 * sms:
            threads //= 2
    return threads, -(-warps // (threads // 32))


# --- launching without per-call argument marshalling ----------------------------------------------

class FastLaunch:
    """One kernel's launch with its argument block built once: ``cuLaunchKernel`` through CuPy's driver
    binding, as Triton's launcher does, instead of ``Function.__call__`` converting every argument on
    every call. Each argument has an 8-byte slot (a 4-byte int or float sits in the low half, as the
    kernel reads it on a little-endian host); a by-value struct gets its own buffer. A call writes
    only the pointers that change. The lock covers write + launch (the driver copies the arguments
    during ``cuLaunchKernel``), so threads sharing a plan never launch each other's pointers."""

    __slots__ = ("fn_ptr", "slots", "params", "params_ptr", "lock", "keep", "struct_buf", "launch")

    def __init__(self, fn: Any, args: list[tuple[str, Any]]):
        self.fn_ptr = int(fn.ptr)
        self.launch = None  # CuPy's launchKernel, bound at the first call (a plan can be built without CuPy)
        self.slots = (ctypes.c_uint64 * max(1, len(args)))()
        self.struct_buf = None
        base = ctypes.addressof(self.slots)
        addrs = []
        for i, (kind, val) in enumerate(args):
            if kind == "struct":  # by-value struct: bytes of a NumPy structured scalar
                raw = bytes(val)
                self.struct_buf = (ctypes.c_int64 * (len(raw) // 8))()
                ctypes.memmove(self.struct_buf, raw, len(raw))
                addrs.append(ctypes.addressof(self.struct_buf))
                continue
            addrs.append(base + 8 * i)
            if val is not None:
                self.slots[i] = _bits(kind, val)
        self.params = (ctypes.c_void_p * max(1, len(args)))(*addrs)
        self.params_ptr = ctypes.addressof(self.params)
        self.lock = threading.Lock()

    def __call__(self, grid: int, stream_ptr: int, shared_mem: int, ptrs: dict[int, int],
                 struct_ptrs: dict[int, int] | None = None, block: int = BLOCK) -> None:
        with self.lock:
            slots = self.slots
            for i, p in ptrs.items():
                slots[i] = p
            if struct_ptrs:
                buf = self.struct_buf
                for i, p in struct_ptrs.items():
                    buf[i] = p
            launch = self.launch
            if launch is None:
                launch = self.launch = cupy_module().cuda.driver.launchKernel
            launch(self.fn_ptr, grid, 1, 1, block, 1, 1, shared_mem, stream_ptr, self.params_ptr, 0)


def _bits(kind: str, val: Any) -> int:
    """The 8-byte slot holding one kernel argument."""
    if kind == "f32":
        return struct.unpack("<I", struct.pack("<f", float(val)))[0]
    if kind in ("i32", "u32"):
        return int(val) & 0xFFFFFFFF
    return int(val) & 0xFFFFFFFFFFFFFFFF  # i64, u64, ptr


def raw_stream(kind: str, device_index: int) -> int:
    """The caller's current stream as a raw handle: torch's current stream, or CuPy's."""
    if kind == "torch":
        return (_TORCH_RAW_STREAM or _bind_torch_raw_stream())(device_index)
    return (_CUPY_STREAM or _bind_cupy_stream())().ptr


# Bound on first use (a launch never walks torch._C or cupy.cuda.runtime for them again): torch's current raw stream,
# what Triton's launcher reads (no stream object), and the CUDA runtime's current device.
_TORCH_RAW_STREAM: Any = None
_CUPY_STREAM: Any = None
_GET_DEVICE: Any = None


def _bind_cupy_stream() -> Any:
    global _CUPY_STREAM
    _CUPY_STREAM = cupy_module().cuda.get_current_stream
    return _CUPY_STREAM


def _bind_torch_raw_stream() -> Any:
    global _TORCH_RAW_STREAM
    torch = sys.modules["torch"]
    fn = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    _TORCH_RAW_STREAM = fn if fn is not None else (lambda i: torch.cuda.current_stream(i).cuda_stream)  # older torch
    return _TORCH_RAW_STREAM


def _bind_get_device() -> Any:
    global _GET_DEVICE
    _GET_DEVICE = cupy_module().cuda.runtime.getDevice
    return _GET_DEVICE


def fast_launch(fl: FastLaunch, grid: int, kind: str, device_index: int, ptrs: dict[int, int],
                shared_mem: int = 0, struct_ptrs: dict[int, int] | None = None, block: int = BLOCK) -> None:
    """``fl`` on the caller's current stream of ``device_index``, switching device only when needed."""
    if (_GET_DEVICE or _bind_get_device())() == device_index:
        fl(grid, raw_stream(kind, device_index), shared_mem, ptrs, struct_ptrs, block)
    else:
        with cupy_module().cuda.Device(device_index):
            fl(grid, raw_stream(kind, device_index), shared_mem, ptrs, struct_ptrs, block)


# --- the caller's stream, cheaply -----------------------------------------------------------------

_EXT_STREAMS: dict[tuple[int, int], Any] = {}


def stream_for(kind: str, device_index: int) -> Any:
    """The stream to launch on: torch's current stream (as a cached CuPy ExternalStream) or CuPy's."""
    cupy = cupy_module()
    if kind == "torch":
        torch = sys.modules["torch"]
        try:
            ptr = torch._C._cuda_getCurrentRawStream(device_index)  # what Triton's launcher uses: no object
        except AttributeError:  # older torch
            ptr = torch.cuda.current_stream(device_index).cuda_stream
        key = (ptr, device_index)
        s = _EXT_STREAMS.get(key)
        if s is None:
            import warnings

            with warnings.catch_warnings():  # CuPy 14 deprecates ExternalStream; it works on 13 and 14
                warnings.simplefilter("ignore", DeprecationWarning)
                s = cupy.cuda.ExternalStream(ptr, device_index)
            if len(_EXT_STREAMS) > 256:
                _EXT_STREAMS.clear()
            _EXT_STREAMS[key] = s
        return s
    return cupy.cuda.get_current_stream()


def launch(fn: Any, grid: int, args: tuple, kind: str, device_index: int, shared_mem: int = 0) -> None:
    """Launch on the caller's current stream of ``device_index``, switching device only when needed."""
    cupy = cupy_module()  # imported by the plan's kernel lookup
    if cupy.cuda.runtime.getDevice() == device_index:
        fn((grid,), (BLOCK,), args, shared_mem=shared_mem, stream=stream_for(kind, device_index))
    else:
        with cupy.cuda.Device(device_index):
            fn((grid,), (BLOCK,), args, shared_mem=shared_mem, stream=stream_for(kind, device_index))


def kernel(op: str, name: str, device_index: int, options: tuple[str, ...] = ()) -> Any:
    """The loaded ``cupy.cuda.Function`` (its ``ptr`` is the CUfunction) of one entry point on one device,
    from the module built with the extra NVRTC ``options`` (a launch configuration's build)."""
    import cupy

    fn = _cuda.function(op, name, device_index, options)
    with cupy.cuda.Device(device_index):
        return getattr(fn, "kernel", fn)  # a RawKernel's Function for the current device


# --- signatures --------------------------------------------------------------------------------------

def _sig_torch(x: Any) -> tuple | None:
    dev = x.get_device()  # an int (-1 on the CPU): cheaper than building a torch.device
    if dev < 0:
        return None
    return (x.shape, x.dtype, dev, x.is_contiguous(), x.data_ptr() & 15)


def _sig_cupy(x: Any) -> tuple:
    # the array's memory pointer holds the device and the address; _c_contiguous is the flag flags.c_contiguous
    # reads (CuPy's readonly field): no Device or Flags object built a call (issue 25, the CuPy call's cost)
    d = x.data
    return (x.shape, x.dtype, d.device_id, x._c_contiguous, d.ptr & 15, 1)


def _sig_cupy_public(x: Any) -> tuple:  # a CuPy without those fields: the same tuple by its public attributes
    return (x.shape, x.dtype, x.device.id, x.flags.c_contiguous, x.data.ptr & 15, 1)


_SIG_OF: dict[type, Any] = {}


def signature(x: Any) -> tuple | None:
    """What validation reads of one array (kind, shape, dtype, device, contiguity, 16-byte alignment),
    or None for anything that is not a CUDA tensor / CuPy array (those take the full path every call).
    Keyed by exact type (one dict lookup); a subclass is learned on first sight."""
    f = _SIG_OF.get(type(x))
    if f is None:
        f = _learn(type(x))
        if f is None:
            return None
    return f(x)


def signature_of(t: type) -> Any:
    """The signature reader of arrays of exact type ``t`` (:func:`signature` without the type lookup), for a type
    :func:`signature` has learned; :func:`signature` itself otherwise."""
    return _SIG_OF.get(t, signature)


def _learn(t: type) -> Any:
    torch, cupy = sys.modules.get("torch"), sys.modules.get("cupy")
    if torch is not None and issubclass(t, torch.Tensor):
        _SIG_OF[t] = _sig_torch
    elif cupy is not None and issubclass(t, cupy.ndarray):
        mp = getattr(getattr(cupy, "cuda", None), "MemoryPointer", None)
        fields = all(hasattr(t, a) for a in ("_c_contiguous", "data")) and hasattr(mp, "device_id")
        _SIG_OF[t] = _sig_cupy if fields else _sig_cupy_public
    else:
        return None
    return _SIG_OF[t]


RECENT = 4  # plans a PlanCache keeps behind torch's tensor check (a loop alternating a few shapes finds each)


class PlanCache:
    """Bounded LRU of plans by signature, and the few most recently used plans of torch CUDA tensors behind torch's
    own C++ check of those tensors (:func:`tensor_check`; ``recent``: ``(check, alignments, plan)`` entries, newest
    first), which a call tries before it builds a signature: one C++ call for every tensor instead of five Python
    attribute reads each (the launch floor of fuse, with five arrays, is mostly those reads)."""

    def __init__(self, size: int = PLAN_CACHE_SIZE):
        self._d: OrderedDict[tuple, Any] = OrderedDict()
        self._size = size
        self.recent: tuple = ()
        self._lock = threading.Lock()  # writers only: put, a promotion, clear (a call's reads take no lock)

    def get(self, key: tuple) -> Any:
        e = self._d.get(key)
        if e is None:
            return None
        try:
            self._d.move_to_end(key)  # least recently used out first
        except KeyError:  # evicted or cleared by another thread meanwhile: the plan in hand still works
            pass
        if e[0] is not None and (not self.recent or self.recent[0] is not e):
            self._promote(key, e)
        return e[2]

    def put(self, key: tuple, plan: Any, tensors: tuple = ()) -> None:
        """Cache ``plan`` under ``key``; with ``tensors`` (the call's arrays, in the order the fast path checks
        them) also behind their tensor check, where :func:`tensor_check` gives one."""
        check = tensor_check(tensors) if tensors else None
        e = (check, tuple(ptr(x) & 15 for x in tensors) if check is not None else (), plan)
        with self._lock:
            self._d[key] = e
            if len(self._d) > self._size:
                self._d.popitem(last=False)
        if check is not None:
            self._promote(key, e)

    def _promote(self, key: tuple, e: tuple) -> None:
        # one tuple replaced at once (a reader sees the old or the new, never half of one), and only while ``e`` is
        # still the dict's entry: a promotion racing clear() never brings back a plan from before it
        with self._lock:
            if self._d.get(key) is e:
                self.recent = (e,) + tuple(x for x in self.recent if x is not e)[:RECENT - 1]

    def clear(self) -> None:
        with self._lock:
            self._d.clear()
            self.recent = ()


# torch's C++ tensor check (torch._C._dynamo.guards.TensorGuards): bound on first use; False where this torch has
# none that answers as expected (then every call keys by signature)
_TENSOR_GUARDS: Any = None


def tensor_check(tensors: tuple) -> Any:
    """A C++ check that a call's tensors match ``tensors`` in everything a plan depends on but the pointers: exact
    type, dtype, device, sizes, strides (so contiguity), requires_grad and dispatch keys, as torch.compile's tensor
    guards checked them (``TensorGuards.check``, one call for all; False for anything else, a CuPy array
    included). The check refuses a tensor passed twice (Dynamo's guards need them distinct): a call that repeats
    one (``fuse`` onto a stream's own times, streams sharing a clock) keeps the signature path, and where the plan
    was first built from such a call the check is built from a view of the repeated tensor, so later calls with
    distinct tensors still pass it. None unless every one is a plain torch CUDA tensor and the check passes the
    tensors it was built from. A private API: a torch without it, older than 2.2, failing the one-time test in
    :func:`_bind_tensor_guards`, or whose constructor raises, keeps the signature path for the process."""
    global _TENSOR_GUARDS
    torch = sys.modules.get("torch")
    if torch is None or _TENSOR_GUARDS is False:
        return None
    tt = torch.Tensor
    for x in tensors:
        if type(x) is not tt or not x.is_cuda:
            return None
    if _TENSOR_GUARDS is None:
        _TENSOR_GUARDS = _bind_tensor_guards(torch)
        if _TENSOR_GUARDS is False:
            return None
    # a tensor repeated among them (fuse onto a stream's own times, streams sharing a clock) is built from a view of
    # itself: the check then passes later calls' distinct tensors of the same signature and refuses repeated ones
    seen: set[int] = set()
    args = []
    for x in tensors:
        if id(x) in seen:
            x = x.view_as(x)
        seen.add(id(x))
        args.append(x)
    try:  # always with keywords: TensorGuards reads them without checking they are there
        check = _TENSOR_GUARDS(*args, dynamic_dims_sizes=None, dynamic_dims_strides=None).check
        ok = check(*args) is True
    except Exception:  # noqa: BLE001 - any surprise from a private API: the signature path from now on
        _TENSOR_GUARDS = False
        return None
    return check if ok else None  # a check that refuses its own tensors: this plan keeps the signature path


def _bind_tensor_guards(torch: Any) -> Any:
    try:
        major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    except ValueError:
        return False
    if (major, minor) < (2, 2):
        return False
    try:
        from torch._C._dynamo.guards import TensorGuards

        # once: it must tell sizes, strides and dtypes apart, not only pass its own tensors (a torch whose check
        # grew lax would launch plans on inputs they were not built for)
        a = torch.zeros(2, 3)
        check = TensorGuards(a, dynamic_dims_sizes=None, dynamic_dims_strides=None).check
        if not check(a) or check(torch.zeros(3, 3)) or check(torch.zeros(3, 2).t()) or check(a.double()):
            return False
    except Exception:  # noqa: BLE001 - missing, or another form: the signature path
        return False
    return TensorGuards


def empty(kind: str, shape: tuple[int, ...], like: Any, device_index: int) -> Any:
    """An uninitialised output of ``like``'s dtype on its device, allocated by the caller's library."""
    if kind == "torch":
        return like.new_empty(shape)
    cupy = cupy_module()
    if cupy.cuda.runtime.getDevice() == device_index:
        return cupy.empty(shape, dtype=like.dtype)
    with cupy.cuda.Device(device_index):
        return cupy.empty(shape, dtype=like.dtype)


class Output:
    """The uninitialised output of one plan (its shape, and ``dtype``, a name, or the ``like`` array's dtype), allocated
    by the caller's library. For torch, ``torch.empty_like`` of a one-element template expanded to the shape (stride
    0: the template holds one element), asked for the contiguous format: it parses no shape or dtype per call, where
    ``new_empty(shape)`` does (issue 25, call cost; on a CPU 0.98 against 1.46 us). The template is made on the first
    call, from that call's ``like`` (a plan's signature fixes its dtype and device). Where this torch has Inductor's
    allocation and ``like`` is a plain tensor, that allocation instead (:func:`_strided_empty`), the template kept
    for calls made on another current device. For CuPy, :class:`_CupyEmpty`."""

    __slots__ = ("kind", "shape", "dev", "dtype", "fn")

    def __init__(self, kind: str, shape: tuple[int, ...], device_index: int, dtype: str | None = None):
        self.kind, self.shape, self.dev, self.dtype, self.fn = kind, tuple(int(n) for n in shape), device_index, dtype, None

    def __call__(self, like: Any) -> Any:
        fn = self.fn
        if fn is None:
            fn = self.fn = self._build(like)
        return fn()

    def _build(self, like: Any) -> Any:
        if self.kind != "torch":
            return _CupyEmpty(self.shape, np.dtype(like.dtype if self.dtype is None else self.dtype), self.dev)
        torch = sys.modules["torch"]
        dt = like.dtype if self.dtype is None else _torch_dtype(self.dtype)
        tmpl = like.new_empty((1,), dtype=dt).expand(self.shape)
        slow = functools.partial(torch.empty_like, tmpl, memory_format=torch.contiguous_format)
        return _strided_empty(torch, like, self.shape, dt, slow) or slow


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(1, n)
    return tuple(reversed(strides))


def _strided_empty(torch: Any, like: Any, shape: tuple[int, ...], dt: Any, slow: Any) -> Any:
    """The allocation Inductor's generated code makes (``torch._C._dynamo.guards._empty_strided_cuda``: the caching
    allocator without the dispatcher, which parses no options; on a CPU 0.52 against 0.96 us for the template's
    ``empty_like``), or None where this torch lacks it or ``like`` is not a plain tensor (a subclass keeps its type
    through the template). It allocates on torch's current device (Inductor's code calls it inside a device guard;
    here torch's current device is checked on every call instead): a call whose current device is not ``like``'s
    takes ``slow`` (the template, on the template's device). Unlike ``empty_like`` it passes no dispatcher: torch
    dispatch modes do not see it, and ``torch.use_deterministic_algorithms(True)`` does not NaN-fill it (every
    element of an output is written by the kernel, or cleared by :func:`zeros`)."""
    if type(like) is not torch.Tensor:
        return None
    guards = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
    stride = _contiguous_strides(shape)
    if like.is_cuda:
        fast, current = getattr(guards, "_empty_strided_cuda", None), getattr(torch._C, "_cuda_getDevice", None)
        if fast is None or current is None:
            return None
        dev = like.get_device()
        runtime = _GET_DEVICE or _bind_get_device()  # the CUDA runtime's current device (CuPy's view)
        try:  # the private function's argument form, once: a torch that changed it keeps the template
            if current() == dev and runtime() == dev:
                fast((0,), (1,), dt)
        except (TypeError, RuntimeError):
            return None

        def alloc() -> Any:
            # torch's and the runtime's views of the current device both the tensor's (they differ after leaving a
            # torch.cuda.device block onto a GPU torch made no context on): else the template, under its guard
            if current() == dev and runtime() == dev:
                return fast(shape, stride, dt)
            return slow()
        return alloc
    if like.device.type == "cpu":  # no plan allocates on the host; the same path, testable without a GPU
        fast = getattr(guards, "_empty_strided_cpu", None)
        return functools.partial(fast, shape, stride, dt) if fast is not None else None
    return None


class _CupyEmpty:
    """A CuPy output's allocation: ``cupy.ndarray(shape, dtype)`` (what ``cupy.empty`` makes, without its Python
    wrapper; CuPy bound at the first call) on ``dev``, entering the device only when the current one differs, as
    :func:`empty` does. It holds the dtype, never an array: a cached plan must not keep a caller's input alive."""

    __slots__ = ("shape", "dtype", "dev", "nd")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, dev: int):
        self.shape, self.dtype, self.dev, self.nd = shape, dtype, dev, None

    def __call__(self) -> Any:
        nd = self.nd
        if nd is None:
            nd = self.nd = cupy_module().ndarray
        if (_GET_DEVICE or _bind_get_device())() == self.dev:
            return nd(self.shape, self.dtype)
        with cupy_module().cuda.Device(self.dev):
            return nd(self.shape, self.dtype)


def zeros(kind: str, shape: tuple[int, ...], dtype: str, like: Any, device_index: int) -> Any:
    """A zeroed array of ``dtype`` (a name: "int32", "bool", "float32") on ``like``'s device, allocated by the
    caller's library. A torch output is allocated uninitialised and cleared by one ``cudaMemsetAsync`` on the
    caller's current stream (:func:`memset_zero`), as CuPy's own ``zeros`` clears its arrays: ``torch.zeros``
    goes through the dispatcher twice and launches a fill kernel, host time a tiny call pays (issue 25)."""
    if kind != "torch":
        cupy = cupy_module()
        if cupy.cuda.runtime.getDevice() == device_index:
            return cupy.zeros(shape, dtype=dtype)
        with cupy.cuda.Device(device_index):
            return cupy.zeros(shape, dtype=dtype)
    # torch only (CuPy returned above). The template is the first like's: key by its device (-1 on the CPU, so a
    # host tensor's template never serves a CUDA caller) and its type (a subclass's, as new_empty keeps it)
    key = (shape, dtype, like.get_device(), type(like))
    alloc = _ZERO_OUTPUTS.get(key)
    if alloc is None:
        alloc = Output(kind, shape, device_index, dtype)
        _ZERO_OUTPUTS.put(key, alloc)
    x = alloc(like)
    memset_zero(kind, device_index, x.data_ptr(), x.numel() * x.element_size())
    return x


def memset_zero(kind: str, device_index: int, ptr: int, nbytes: int) -> None:
    """``nbytes`` zero bytes from ``ptr`` on the caller's current stream of ``device_index`` (stream-ordered with
    the allocation before it and the launches after it; a memset node inside a CUDA-graph capture)."""
    if nbytes <= 0:
        return
    cupy = cupy_module()
    rt = cupy.cuda.runtime
    if rt.getDevice() == device_index:
        rt.memsetAsync(ptr, 0, nbytes, raw_stream(kind, device_index))
    else:
        with cupy.cuda.Device(device_index):
            rt.memsetAsync(ptr, 0, nbytes, raw_stream(kind, device_index))


_TORCH_DTYPES: dict[str, Any] = {}
_ZERO_OUTPUTS: Any = None  # a PlanCache of torch Outputs by (shape, dtype, like's device, type), made below


def _torch_dtype(name: str) -> Any:
    t = _TORCH_DTYPES.get(name)
    if t is None:
        t = _TORCH_DTYPES[name] = getattr(sys.modules["torch"], name)
    return t


def on_device(kind: str, device_index: int) -> Any:
    """The context in which to copy or fill a caller's arrays: CuPy allocates and launches on the *current*
    device and its stream, so enter the arrays' device (torch ops run on the tensor's own device)."""
    if kind == "cupy":
        return cupy_module().cuda.Device(device_index)
    return contextlib.nullcontext()


def ptr(x: Any) -> int:
    """Device address of a CUDA tensor or CuPy array: by the array's exact type (one dict lookup; a CuPy array's
    address was an AttributeError caught on every call, the larger part of a CuPy call's cost over a torch one)."""
    f = _PTR_OF.get(type(x))
    return f(x) if f is not None else _ptr_learn(x)


def _ptr_cupy(x: Any) -> int:
    return x.data.ptr


def _ptr_torch(x: Any) -> int:
    return x.data_ptr()


def ptr_of(kind: str) -> Any:
    """The address reader of a plan's arrays: a plan's arrays are of its kind (its key holds their signatures, its
    ``out`` is checked to be of their kind), read without the type lookup of :func:`ptr`."""
    return _ptr_cupy if kind == "cupy" else _ptr_torch


_PTR_OF: dict[type, Any] = {}


def _ptr_learn(x: Any) -> int:
    t = type(x)
    torch, cupy = sys.modules.get("torch"), sys.modules.get("cupy")
    if torch is not None and issubclass(t, torch.Tensor):
        _PTR_OF[t] = t.data_ptr
    elif cupy is not None and issubclass(t, cupy.ndarray):
        _PTR_OF[t] = _ptr_cupy
    try:
        return x.data_ptr()
    except AttributeError:
        return x.data.ptr


_ZERO_OUTPUTS = PlanCache()
