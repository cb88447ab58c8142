"""What kind of array an argument is, where it lives, and the checks shared by the ops.

Three kinds are accepted: NumPy arrays (CPU), PyTorch tensors (CUDA, or CPU through
the NumPy reference) and CuPy arrays (CUDA). Neither torch nor cupy is imported
here: a value can only be a tensor of a library that is already imported.
All validation happens on shapes and dtypes, before any allocation or launch.
"""
from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

GPU_VALUE_DTYPES = ("float32", "float16", "bfloat16")
CPU_VALUE_DTYPES = ("float32", "float16", "float64", "bfloat16")
TIME_DTYPES = ("float32", "float64")
INT32_MAX = 2**31 - 1
TILE_T = 32  # targets per block in kernels/resample.cu and fuse.cu (RC_TILE_T)
MAX_FEATURES = INT32_MAX // TILE_T  # a tile's TILE_T * D elements are indexed with int32


@dataclass(frozen=True)
class Arr:
    """An input, described without touching its data."""

    name: str
    obj: Any
    kind: str  # "numpy" | "torch" | "cupy"
    device: str  # "cpu", "cuda:N", or another torch device string ("meta", ...)
    shape: tuple[int, ...]
    dtype: str  # canonical dtype name: float32, float16, bfloat16, float64, int64, ...

    @property
    def on_gpu(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def device_index(self) -> int:
        return int(self.device.split(":")[1])


def describe(name: str, x: Any) -> Arr:
    """Classify ``x`` or raise TypeError naming ``name``."""
    if isinstance(x, np.ndarray):
        return Arr(name, x, "numpy", "cpu", tuple(x.shape), x.dtype.name)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        dev = x.device
        device = f"cuda:{dev.index if dev.index is not None else torch.cuda.current_device()}" \
            if dev.type == "cuda" else dev.type
        return Arr(name, x, "torch", device, tuple(x.shape), str(x.dtype).removeprefix("torch."))
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(x, cupy.ndarray):
        return Arr(name, x, "cupy", f"cuda:{x.device.id}", tuple(x.shape), x.dtype.name)
    raise TypeError(
        f"{name} must be a NumPy array, a CuPy array or a PyTorch tensor, got {type(x).__name__}; "
        f"wrap Python lists with numpy.asarray(...)"
    )


def same_place(args: list[Arr]) -> tuple[str, str]:
    """All inputs of one call must be one kind on one device; returns (kind, device)."""
    first = args[0]
    for a in args[1:]:
        if a.kind != first.kind:
            raise TypeError(
                f"inputs of mixed kinds: {first.name} is a {first.kind} array but {a.name} is a "
                f"{a.kind} array; pass all inputs as the same kind (NumPy, CuPy or PyTorch)"
            )
        if a.device != first.device:
            raise ValueError(
                f"inputs on different devices: {first.name} is on {first.device} but {a.name} is on "
                f"{a.device}; move them to one device first"
            )
    if first.device not in ("cpu",) and not first.on_gpu:
        raise ValueError(f"{first.name} is on device {first.device!r}; robocache runs on CUDA devices or the CPU")
    return first.kind, first.device


def check_rank(a: Arr, ndim: int, layout: str) -> None:
    if len(a.shape) != ndim:
        raise ValueError(f"{a.name} must have {ndim} dimensions {layout}, got shape {a.shape}")


def check_positive(a: Arr, dims: dict[str, int], allow_zero: tuple[str, ...] = ()) -> None:
    """Every named size >= 1 (except those in allow_zero) and within int32 for the kernels."""
    for label, n in dims.items():
        if n < 1 and label not in allow_zero:
            raise ValueError(f"{a.name} has {label} = {n}; {label} must be at least 1 (shape {a.shape})")
        if n > INT32_MAX:
            raise ValueError(f"{a.name} has {label} = {n}, more than robocache's limit of {INT32_MAX}")


def check_value_dtype(a: Arr, on_gpu: bool) -> None:
    allowed = GPU_VALUE_DTYPES if on_gpu else CPU_VALUE_DTYPES
    if a.dtype not in allowed:
        where = "on the GPU" if on_gpu else "on the CPU"
        raise TypeError(f"{a.name} has dtype {a.dtype}; {where} robocache supports {', '.join(allowed)}")


def check_time_dtypes(*times: Arr) -> None:
    for t in times:
        if t.dtype not in TIME_DTYPES:
            raise TypeError(
                f"{t.name} has dtype {t.dtype}; times must be float32 or float64 "
                f"(convert integer timestamps with .astype(float64))"
            )
    dts = {t.dtype for t in times}
    if len(dts) > 1:
        names = ", ".join(f"{t.name}={t.dtype}" for t in times)
        raise TypeError(f"all time arrays must share one dtype, got {names}; cast them to one of {TIME_DTYPES}")


def check_grid(blocks: int, what: str) -> None:
    """A 1-D launch holds at most 2**31 - 1 blocks."""
    if blocks > INT32_MAX:
        raise ValueError(f"{what}: the problem needs {blocks} thread blocks, more than CUDA's {INT32_MAX}; split the batch")


def check_out(out: Any, like: Arr, shape: tuple[int, ...], dtype: str) -> Arr:
    """A caller-supplied output: same kind and device as the inputs, exact shape and dtype, C-contiguous."""
    o = describe("out", out)
    same_place([like, o])
    if o.shape != tuple(shape):
        raise ValueError(f"out must have shape {tuple(shape)}, got {o.shape}")
    if o.dtype != dtype:
        raise TypeError(f"out must have dtype {dtype}, got {o.dtype}")
    contiguous_ok = out.is_contiguous() if o.kind == "torch" else out.flags.c_contiguous
    if not contiguous_ok:
        raise ValueError("out must be C-contiguous (the kernels write it densely)")
    return o


def fill_out(out: Any | None, result: Any) -> Any:
    """CPU path: copy the result into a caller-supplied ``out`` (returned), or return the result."""
    if out is None:
        return result
    if isinstance(out, np.ndarray):
        out[...] = result
    else:
        out.copy_(result)
    return out


# --- data access (only after validation) -----------------------------------------------------

def to_numpy(a: Arr) -> np.ndarray:
    """CPU path: a NumPy view/copy of a NumPy array or CPU tensor (bfloat16 upcast to float32)."""
    if a.kind == "numpy":
        return a.obj
    t = a.obj.detach()
    if a.dtype == "bfloat16":
        t = t.float()
    return t.numpy()


def from_numpy_like(a: Arr, x: np.ndarray, dtype: str) -> Any:
    """Wrap a CPU-path result back into the caller's kind (NumPy or CPU tensor) and dtype."""
    if a.kind == "numpy":
        target = a.obj.dtype if dtype == a.dtype else np.dtype(dtype)  # keeps ml_dtypes' bfloat16
        return x.astype(target, copy=False)
    import torch

    return torch.from_numpy(np.ascontiguousarray(x)).to(getattr(torch, dtype))


def contiguous(a: Arr) -> Any:
    """The data, C-contiguous (copied only when needed)."""
    x = a.obj
    if a.kind == "torch":
        return x if x.is_contiguous() else x.contiguous()
    if a.kind == "cupy":
        import cupy

        return x if x.flags.c_contiguous else cupy.ascontiguousarray(x)
    return np.ascontiguousarray(x)


def data_ptr(x: Any) -> int:
    """Device pointer of a contiguous CuPy array or CUDA tensor."""
    return int(x.data_ptr()) if hasattr(x, "data_ptr") else int(x.data.ptr)


class GpuContext:
    """Device, stream and allocator of one call, in the caller's library.

    Kernels are launched on the caller's current stream (PyTorch's or CuPy's) so
    they are ordered with the caller's own work, and outputs are allocated by the
    caller's library so they come back as the same kind.
    """

    def __init__(self, kind: str, device_index: int):
        import cupy

        self.kind = kind
        self.device_index = device_index
        self._device = cupy.cuda.Device(device_index)
        if kind == "torch":
            import torch

            ptr = torch.cuda.current_stream(device_index).cuda_stream
            with warnings.catch_warnings():
                # CuPy 14 deprecates ExternalStream in favour of Stream.from_external (the
                # __cuda_stream__ protocol); ExternalStream still works on CuPy 13 and 14.
                warnings.simplefilter("ignore", DeprecationWarning)
                self._stream = cupy.cuda.ExternalStream(ptr, device_index)
        else:
            with self._device:
                self._stream = cupy.cuda.get_current_stream()

    @property
    def stream_ptr(self) -> int:
        return int(self._stream.ptr)

    def is_capturing(self) -> bool:
        """Is the call's stream being captured into a CUDA graph?"""
        if self.kind == "torch":
            import torch

            return bool(torch.cuda.is_current_stream_capturing())
        try:
            return bool(self._stream.is_capturing())
        except Exception:  # noqa: BLE001 - older CuPy: no capture API, so no capture
            return False

    def __enter__(self) -> GpuContext:
        self._device.__enter__()
        self._stream.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stream.__exit__(*exc)
        self._device.__exit__(*exc)

    def empty(self, shape: tuple[int, ...], dtype: str, like: Any) -> Any:
        return self._alloc(shape, dtype, like, zero=False)

    def zeros(self, shape: tuple[int, ...], dtype: str, like: Any) -> Any:
        return self._alloc(shape, dtype, like, zero=True)

    def _alloc(self, shape: tuple[int, ...], dtype: str, like: Any, zero: bool) -> Any:
        if self.kind == "torch":
            import torch

            dt = like.dtype if dtype == "like" else getattr(torch, dtype)
            f = torch.zeros if zero else torch.empty
            return f(shape, dtype=dt, device=like.device)
        import cupy

        dt = like.dtype if dtype == "like" else np.dtype(dtype)
        f = cupy.zeros if zero else cupy.empty
        return f(shape, dtype=dt)

    def to_device(self, host: np.ndarray, like: Any) -> Any:
        """Copy a small host array to the device, ordered on the call's stream."""
        if self.kind == "torch":
            import torch

            return torch.from_numpy(host).to(like.device, non_blocking=False)
        import cupy

        return cupy.asarray(host)

    def launch(self, op: str, name: str, grid: int, block: int, args: tuple) -> None:
        from . import _cuda

        fn = _cuda.function(op, name, self.device_index)
        fn((grid,), (block,), args)


def ptr_arg(x: Any) -> np.uint64:
    """A kernel pointer argument (8 bytes, passed by value)."""
    return np.uint64(data_ptr(x))
