"""EpisodeCache: a dataset's episodes packed once into device memory, training batches resampled from there.

Build once, then every batch is one kernel launch (``kernels/episodes.cu``) on the caller's current stream:
no worker process, no per-batch host-to-device copy, no padding on the host.

- **Packing.** Each stream (its own rate, timestamps, feature width D and dtype: float32, float16 or
  bfloat16; times stored as float64) becomes one ragged, contiguous buffer: the episodes' samples back to back,
  with a per-episode table of offsets and counts. Sources: our HDF5 format (:meth:`EpisodeCache.from_hdf5`) or
  in-memory arrays (NumPy, PyTorch, CuPy), read through host memory once.
- **Sampling.** Batches walk a seeded episode order (a fresh shuffle per epoch, or an explicit ``order``); a
  row is an episode's window of ``L`` targets on the ``1 / rate_hz`` grid, starting at target ``s``: the whole
  episode (``window=None``: ``s = 0``, ``L`` = its ``max(1, int(duration * rate_hz))`` targets, rows padded to
  the batch's longest with zeros and ``mask`` False), a fixed length (``window=64``) or a length drawn in a
  range (``window=(32, 64)``), the start and length drawn *on the device* from (seed, epoch, position) by a
  counter-based hash (splitmix64). The sampler's state is (seed, epoch, batch): :meth:`state_dict` /
  :meth:`load_state_dict` resume it exactly.
- **Resampling.** Target ``t`` of a window sits at ``origin + (s + t) / rate_hz`` seconds; every stream is
  resampled there with :func:`robocache.resample`'s semantics (numpy.interp, clamped at the ends; docs/semantics.md)
  and the streams are concatenated by feature in stream order: ``x[B, T, sum D]`` in ``out_dtype``.
- **Memory.** ``mode`` is ``"resident"`` (everything on the device) or ``"streamed"``: with a declared
  ``memory_budget`` smaller than the cache (or, without one, a cache larger than 80% of the free device memory:
  then half of it), the data stay in pinned host memory and the episodes are grouped into chunks; the device
  holds a ring of slots (the chunks one batch spans plus ``prefetch_depth`` more), and chunks are copied into
  it on a side stream while the steps run. The sampler then shuffles chunk by chunk (chunks in a fresh order,
  episodes in a fresh order within each), so a batch only reads resident chunks. The mode is an attribute and
  a log line (``log``, default ``logging.getLogger("robocache.episodes").info``).
- **DDP.** Each rank caches its own shard: episodes ``rank, rank + world_size, ...`` (from
  ``torch.distributed`` when initialized, or the ``rank``/``world_size`` arguments), or an explicit ``subset``;
  every rank gets the same number of batches per epoch.
- **Errors first.** Unsorted or non-finite timestamps, an episode shorter than a window, an unsupported dtype,
  fewer episodes than a batch, or a budget too small for one batch raise ``TypeError``/``ValueError`` naming
  the episode and stream, before anything is allocated.
- **No GPU.** ``device="cpu"`` (the default without CuPy and a GPU) runs the same tables through the NumPy
  reference (:func:`robocache.reference.resample`), streamed mode included, so the whole logic is tested in CI.

The budget covers the cache (its buffers and tables), not the batches it returns. See docs/pipelines.md.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _arrays as A
from . import _launch as L
from . import reference

STREAM_DTYPES = ("float32", "float16", "bfloat16")
_CODE = {"float32": 0, "float16": 1, "bfloat16": 2}
_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}
MAX_STREAMS = 16  # RC_EP_MAX in kernels/episodes.cu
_HEAD, _FIELDS = 16, 8  # RC_EP_HEAD, RC_EP_FIELDS
TIME_BYTES = 8  # times are stored as float64
RESIDENT_FRACTION = 0.8  # without a budget: resident when the cache takes at most this share of free memory
STREAM_FRACTION = 0.5  # ... else streamed within this share of it
ORDER_BATCHES = 256  # one upload of the shuffled order covers at least this many batches
STATE_FORMAT = "robocache.EpisodeCache/1"
# Our HDF5 dataset (robocache/bench/pipelines/dataset.py writes it): /episodes/ep_NNNNNN/<stream>/{t, x}
HDF5_FORMAT = "robocache-bench/robot-synthetic"
HDF5_VERSION = 1
_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15

logger = logging.getLogger("robocache.episodes")


# --- the sampler's arithmetic (the kernel's rc_sm64 and rc_ep_window, bit for bit) ---------------------

def _sm64(x: int) -> int:
    z = (x + _GOLDEN) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def window_of(seed: int, epoch: int, position: int, lo: int, hi: int, n_tgt: int) -> tuple[int, int]:
    """(start, length) of the row at ``position`` of ``epoch``: the whole episode when ``lo == 0``, else a
    length in ``[lo, hi]`` and a start keeping the window inside the episode's ``n_tgt`` targets."""
    if lo <= 0:
        return 0, n_tgt
    h = _sm64(_sm64(_sm64(seed & _M64) ^ epoch) ^ position)
    length = lo if lo == hi else lo + ((_sm64(h) * (hi - lo + 1)) >> 64)
    return (h * (n_tgt - length + 1)) >> 64, length


def n_targets(duration: float, rate_hz: float) -> int:
    """Targets of an episode on the ``1 / rate_hz`` grid (the pipelines' ``max(1, int(duration * rate))``)."""
    return max(1, int(duration * rate_hz))


@dataclass(frozen=True)
class EpisodeBatch:
    """One batch: ``x[B, T, sum D]`` (zero past each window's end), ``mask[B, T]`` (bool), ``windows[B, 3]``
    (int64: the episode's index in the dataset, the window's first target, its length), all of the cache's
    kind on its device; ``epoch`` and ``batch`` (its index in the epoch) say where the sampler was."""

    x: Any
    mask: Any
    windows: Any
    epoch: int
    batch: int


# --- sources: what the cache reads once ---------------------------------------------------------------

def _host(name: str, x: Any) -> tuple[np.ndarray, str]:
    """A source array on the host, with its dtype name (bfloat16 as its raw uint16 bits)."""
    if isinstance(x, np.ndarray):
        if x.dtype.name == "bfloat16":  # ml_dtypes
            return x.view(np.uint16), "bfloat16"
        return x, x.dtype.name
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        t = x.detach().cpu()
        if t.dtype == torch.bfloat16:
            return t.contiguous().view(torch.int16).numpy().view(np.uint16), "bfloat16"
        return t.numpy(), str(t.dtype).removeprefix("torch.")
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(x, cupy.ndarray):
        return x.get(), x.dtype.name
    raise TypeError(f"{name} must be a NumPy array, a PyTorch tensor or a CuPy array, got {type(x).__name__}")


def _meta(name: str, x: Any) -> tuple[tuple[int, ...], str]:
    """(shape, dtype name) of a source array without reading it."""
    if isinstance(x, np.ndarray):
        return tuple(x.shape), x.dtype.name
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return tuple(x.shape), str(x.dtype).removeprefix("torch.")
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(x, cupy.ndarray):
        return tuple(x.shape), x.dtype.name
    raise TypeError(f"{name} must be a NumPy array, a PyTorch tensor or a CuPy array, got {type(x).__name__}")


class _Arrays:
    """In-memory episodes: a sequence of mappings stream name -> (times[S], values[S, D])."""

    def __init__(self, episodes: Any, streams: Sequence[str] | None, durations: Any, origins: Any) -> None:
        if isinstance(episodes, (str, bytes, Mapping)) or not isinstance(episodes, Sequence):
            raise TypeError("episodes must be a sequence of mappings {stream: (times[S], values[S, D])} "
                            f"(or use EpisodeCache.from_hdf5), got {type(episodes).__name__}")
        if len(episodes) == 0:
            raise ValueError("episodes is empty")
        for i, ep in enumerate(episodes):
            if not isinstance(ep, Mapping):
                raise TypeError(f"episode {i} must be a mapping {{stream: (times, values)}}, got {type(ep).__name__}")
        self.eps = episodes
        self.names = tuple(streams) if streams is not None else tuple(episodes[0].keys())
        self.n = len(episodes)
        self._dur = self._per_episode("durations", durations)
        self._org = self._per_episode("origins", origins)

    def _per_episode(self, what: str, v: Any) -> np.ndarray | None:
        if v is None:
            return None
        a = np.asarray(v, dtype=np.float64)
        if a.shape != (self.n,) or not np.isfinite(a).all():
            raise ValueError(f"{what} must hold one finite number per episode ({self.n}), got shape {a.shape}")
        return a

    def _pair(self, i: int, name: str) -> tuple[Any, Any]:
        ep = self.eps[i]
        if name not in ep:
            raise ValueError(f"episode {i} has no stream {name!r} (it has {', '.join(map(str, ep.keys()))})")
        pair = ep[name]
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"episode {i} stream {name!r} must be a (times, values) pair")
        return pair

    def episode(self, i: int) -> tuple[list[tuple[np.ndarray, str, tuple[int, ...], str]], float | None,
                                         float | None]:
        """Per stream (times on the host, their dtype, the values' shape and dtype), the duration and origin
        when given (else None: the streams' span)."""
        meta = []
        for name in self.names:
            t, v = self._pair(i, name)
            meta.append((*_host(f"episode {i} stream {name!r} times", t),
                         *_meta(f"episode {i} stream {name!r} values", v)))
        return (meta, float(self._dur[i]) if self._dur is not None else None,
                float(self._org[i]) if self._org is not None else None)

    def values(self, i: int) -> list[np.ndarray]:
        return [_host(f"episode {i} stream {name!r} values", self._pair(i, name)[1])[0] for name in self.names]

    def close(self) -> None:
        pass


class _Hdf5:
    """Our HDF5 dataset (``robocache.bench.pipelines.dataset``): origin 0, duration from ``duration_s``."""

    def __init__(self, path: str, streams: Sequence[str] | None) -> None:
        import json

        try:
            import h5py
        except ImportError as e:
            raise ImportError("EpisodeCache.from_hdf5 needs h5py (pip install h5py)") from e
        try:
            self.f = h5py.File(path, "r")
        except OSError as e:
            raise ValueError(f"{path}: not a readable HDF5 file ({e})") from None
        attrs = dict(self.f.attrs)
        if attrs.get("format") != HDF5_FORMAT or int(attrs.get("version", -1)) != HDF5_VERSION:
            self.f.close()
            raise ValueError(f"{path}: not a {HDF5_FORMAT} v{HDF5_VERSION} dataset")
        have = tuple(json.loads(attrs["streams"]))
        self.names = tuple(streams) if streams is not None else have
        bad = [s for s in self.names if s not in have]
        if bad:
            self.f.close()
            raise ValueError(f"{path} has no stream {bad[0]!r}; it has {', '.join(have)}")
        self.n = int(attrs["episodes"])
        self.g = self.f["episodes"]

    def episode(self, i: int) -> tuple[list[tuple[np.ndarray, str, tuple[int, ...], str]], float | None,
                                         float | None]:
        g = self.g[f"ep_{i:06d}"]  # few lookups (whole paths): h5py's lookups are most of the build's time
        meta = []
        for name in self.names:
            t, x = g[f"{name}/t"][()], g[f"{name}/x"]
            meta.append((t, t.dtype.name, tuple(x.shape), x.dtype.name))
        return meta, float(g.attrs["duration_s"]), 0.0

    def values(self, i: int) -> list[np.ndarray]:
        return [self.g[f"ep_{i:06d}/{name}/x"][()] for name in self.names]

    def close(self) -> None:
        self.f.close()


# --- validation and the memory plan (nothing allocated yet) ----------------------------------------------

@dataclass
class _Layout:
    """What was read and checked: per stream its dtype and D; per episode (shard order) its counts."""

    names: tuple[str, ...]
    dtypes: list[str]
    dims: list[int]
    gid: np.ndarray  # int64 [E]: the episode's index in the dataset
    counts: np.ndarray  # int64 [E, K]: samples per episode and stream
    n_tgt: np.ndarray  # int64 [E]
    origin: np.ndarray  # float64 [E]
    times: list[list[np.ndarray]]  # [E][K] float64 (read once for the checks, kept for the packing)

    @property
    def sample_bytes(self) -> np.ndarray:  # [K]: one sample of each stream (values + its float64 time)
        return np.array([d * _ITEMSIZE[t] + TIME_BYTES for d, t in zip(self.dims, self.dtypes)], dtype=np.int64)


def _checked_stream(where: str, t: Any, tdt: str, shape: Sequence[int], vdt: str) -> np.ndarray:
    """One stream of one episode checked (times 1-D, finite, non-decreasing, within int32; values ``[S, D]`` of a
    stored dtype): its times as float64."""
    if tdt not in A.TIME_DTYPES:
        raise TypeError(f"{where}: times have dtype {tdt}; times must be float32 or float64 "
                        "(convert integer timestamps with .astype(float64))")
    if t.ndim != 1 or t.shape[0] < 1:
        raise ValueError(f"{where}: times must be 1-D with at least one sample, got shape {t.shape}")
    t = np.asarray(t, dtype=np.float64)
    if not np.isfinite(t).all():
        raise ValueError(f"{where}: times must be finite (NaN or inf at sample "
                         f"{int(np.argmin(np.isfinite(t)))})")
    if t.shape[0] > 1 and not bool(np.all(t[1:] >= t[:-1])):
        j = int(np.argmax(t[1:] < t[:-1]))
        raise ValueError(f"{where}: times must be non-decreasing (sample {j + 1} at {t[j + 1]!r} comes "
                         f"after {t[j]!r})")
    if t.shape[0] > A.INT32_MAX:
        raise ValueError(f"{where}: {t.shape[0]} samples, more than robocache's limit of {A.INT32_MAX}")
    if vdt not in STREAM_DTYPES:
        raise TypeError(f"{where}: values have dtype {vdt}; EpisodeCache stores "
                        f"{', '.join(STREAM_DTYPES)} (cast the stream first)")
    if len(shape) != 2 or shape[0] != t.shape[0] or shape[1] < 1:
        raise ValueError(f"{where}: values must have shape [S, D] with S = {t.shape[0]} (its times) and "
                         f"D >= 1, got {tuple(shape)}")
    return t


def _read_layout(src: Any, ids: np.ndarray, rate: float) -> _Layout:
    names = src.names
    if not names:
        raise ValueError("no stream to cache")
    if len(names) > MAX_STREAMS:
        raise ValueError(f"{len(names)} streams; EpisodeCache fuses at most {MAX_STREAMS}")
    if len(set(names)) != len(names):
        raise ValueError(f"streams named twice: {list(names)}")
    k_n = len(names)
    dtypes: list[str | None] = [None] * k_n
    dims: list[int | None] = [None] * k_n
    counts = np.zeros((len(ids), k_n), dtype=np.int64)
    n_tgt = np.zeros(len(ids), dtype=np.int64)
    origin = np.zeros(len(ids), dtype=np.float64)
    times: list[list[np.ndarray]] = []
    for e, g in enumerate(ids.tolist()):
        row = []
        first, last = math.inf, -math.inf
        meta, dur, org = src.episode(g)
        for k, name in enumerate(names):
            where = f"episode {g} stream {name!r}"
            t, tdt, shape, vdt = meta[k]
            t = _checked_stream(where, t, tdt, shape, vdt)
            if dtypes[k] is None:
                dtypes[k], dims[k] = vdt, int(shape[1])
            elif (dtypes[k], dims[k]) != (vdt, int(shape[1])):
                raise ValueError(f"{where}: values are {vdt} with D = {shape[1]}, but the stream's earlier episodes "
                                 f"are {dtypes[k]} with D = {dims[k]} (one dtype and D per stream)")
            counts[e, k] = t.shape[0]
            first, last = min(first, float(t[0])), max(last, float(t[-1]))
            row.append(t)
        org = first if org is None else org
        dur = last - org if dur is None else dur
        if not (math.isfinite(dur) and dur >= 0 and math.isfinite(org)):
            raise ValueError(f"episode {g}: duration {dur} and origin {org} must be finite, duration >= 0")
        n_tgt[e] = n_targets(dur, rate)
        if n_tgt[e] > A.INT32_MAX:
            raise ValueError(f"episode {g}: {n_tgt[e]} targets at {rate:g} Hz, more than robocache's limit of "
                             f"{A.INT32_MAX}")
        origin[e] = org
        times.append(row)
    if sum(dims) > A.MAX_FEATURES:  # type: ignore[arg-type]
        raise ValueError(f"the fused feature width {sum(dims)} exceeds robocache's limit of "  # type: ignore[arg-type]
                         f"{A.MAX_FEATURES}")
    return _Layout(tuple(names), dtypes, dims, ids.astype(np.int64), counts,  # type: ignore[arg-type]
                   n_tgt, origin, times)


@dataclass
class _Plan:
    """Where the cache lives: chunks of episodes (contiguous in shard order) and a ring of slots."""

    mode: str  # resident | streamed
    bounds: np.ndarray  # int64 [chunks + 1]: first episode of each chunk
    slots: int
    cap: np.ndarray  # int64 [K]: samples per slot of each stream
    device_bytes: int  # buffers + tables
    table_bytes: int

    @property
    def chunks(self) -> int:
        return len(self.bounds) - 1


def _tables_bytes(n_eps: int, k_n: int, chunks: int, order_len: int) -> int:
    return n_eps * (2 + 2 * k_n) * 8 + n_eps * 8 + n_eps * 4 + chunks * 4 + order_len * 4


def _split(ep_bytes: np.ndarray, n_c: int) -> np.ndarray:
    """Contiguous groups of near-equal bytes: boundaries [n + 1] (fewer groups where they would be empty)."""
    cum = np.concatenate([[0], np.cumsum(ep_bytes)])
    cuts = np.searchsorted(cum, cum[-1] * np.arange(1, n_c) / n_c, side="left")
    return np.unique(np.concatenate([[0], cuts, [len(ep_bytes)]])).astype(np.int64)


def _streamed(lay: _Layout, budget: int, batch: int, depth: int, order_len: int) -> tuple[_Plan | None, int]:
    """The streamed plan with the fewest chunks that fits ``budget`` (or None), and the smallest device size
    any plan needs (for the error). A batch of B consecutive positions of the chunk-major order touches at most
    ceil((B - 1) / m) + 1 chunks (m: the smallest chunk's episodes); the ring holds those plus ``depth``."""
    eps = len(lay.gid)
    sb = lay.sample_bytes
    ep_bytes = (lay.counts * sb).sum(axis=1)
    best: _Plan | None = None
    smallest = None
    n_c = 2
    while n_c <= eps:
        bounds = _split(ep_bytes, n_c)
        nc = len(bounds) - 1
        per_chunk = np.add.reduceat(lay.counts, bounds[:-1], axis=0)  # [chunks, K]
        cap = per_chunk.max(axis=0)
        m = int(np.diff(bounds).min())
        span = min(nc, -(-(batch - 1) // m) + 1)
        slots = span + depth
        if slots < nc:  # else it is the resident layout with extra steps
            tb = _tables_bytes(eps, len(lay.names), nc, order_len)
            dev = int(slots * (cap * sb).sum()) + tb
            smallest = dev if smallest is None else min(smallest, dev)
            if dev <= budget:
                best = _Plan("streamed", bounds, slots, cap.astype(np.int64), dev, tb)
                break
        n_c += max(1, n_c // 16)
    return best, smallest if smallest is not None else -1


# --- the ring of slots (streamed mode): which chunk sits where, and when ---------------------------------

class _Ring:
    """Chunk residency over the batch sequence. Before batch G: its chunks are resident (copied now if they
    were not prefetched) and the main stream waits for their copies. After launching G: chunks G does not
    share with G + 1 are released (their slots free once G's kernel is done: an event on the main stream),
    then the chunks of G + 1 and up to ``depth`` further new chunks of the coming batches are copied ahead, on
    the side stream. A released chunk whose slot was not reused is reclaimed without a copy."""

    def __init__(self, slots: int, depth: int, chunks_of: Callable[[int], tuple[int, ...]], ops: Any,
                 horizon: int) -> None:
        self.slots, self.depth, self.chunks_of, self.ops, self.horizon = slots, depth, chunks_of, ops, horizon
        self.holder = [-1] * slots  # the chunk a slot holds (resident or loading), -1 when free
        self.where: dict[int, int] = {}  # resident chunk -> slot
        self.released: OrderedDict[int, int] = OrderedDict()  # released chunk -> its (intact) slot, oldest first
        self.copies = 0  # chunk copies issued (a figure: the streamed mode's traffic)

    def _free_slot(self) -> int:
        free = [s for s in range(self.slots) if self.holder[s] < 0]
        if not free:
            raise RuntimeError("EpisodeCache: no free slot in the ring (an internal error; please report it)")
        untouched = [s for s in free if s not in self.released.values()]
        if untouched:
            return untouched[0]
        return next(s for c, s in self.released.items() if self.holder[s] < 0)  # the oldest release

    def _claim(self, c: int) -> None:
        if c in self.where:
            return
        old = self.released.pop(c, None)
        if old is not None and self.holder[old] < 0:  # still intact: no copy
            self.holder[old] = c
            self.where[c] = old
            return
        s = self._free_slot()
        evicted = next((d for d, sl in self.released.items() if sl == s), -1)
        if evicted >= 0:
            del self.released[evicted]
        self.ops.load(c, s, evicted)
        self.copies += 1
        self.holder[s] = c
        self.where[c] = s

    def _free(self) -> int:
        return sum(1 for h in self.holder if h < 0)

    def _release(self, chunks: list[int]) -> None:
        if chunks:
            self.ops.release_point([self.where[c] for c in chunks])
        for c in chunks:
            s = self.where.pop(c)
            self.holder[s] = -1
            self.released[c] = s

    def before(self, g: int) -> None:
        need = self.chunks_of(g)
        if sum(1 for c in need if c not in self.where) > self._free():
            # only after a jump (load_state_dict): chunks of another position still hold slots
            self._release([c for c in self.where if c not in need])
        for c in need:
            self._claim(c)
        for c in need:
            self.ops.wait(self.where[c])

    def after(self, g: int) -> None:
        now, nxt = self.chunks_of(g), self.chunks_of(g + 1)
        self._release([c for c in now if c not in nxt])
        if sum(1 for c in nxt if c not in self.where) <= self._free():
            for c in nxt:
                self._claim(c)
        ahead = [c for c in self.where if c not in nxt]
        h = g + 2
        while len(ahead) < self.depth and h < g + 2 + self.horizon and self._free() > 0:
            for c in self.chunks_of(h):
                if c not in self.where and len(ahead) < self.depth and self._free() > 0:
                    self._claim(c)
                    ahead.append(c)
            h += 1


class _CpuOps:
    """The ring's copies on the CPU path: synchronous, into the NumPy ring buffers."""

    def __init__(self, cache: EpisodeCache) -> None:
        self.c = cache

    def load(self, chunk: int, slot: int, evicted: int) -> None:
        c = self.c
        for k in range(len(c.names)):
            a, n = c._chunk_samples(chunk, k)
            dst = slice(slot * int(c._plan.cap[k]), slot * int(c._plan.cap[k]) + n)
            c._ring_v[k][dst] = c._host_v[k][a:a + n]
            c._ring_t[k][dst] = c._host_t[k][a:a + n]
        if evicted >= 0:
            c._slot_of[evicted] = -1
        c._slot_of[chunk] = slot

    def wait(self, slot: int) -> None:
        pass

    def release_point(self, slots: list[int]) -> None:
        pass


class _GpuOps:
    """The ring's copies on the GPU: pinned host -> device on the cache's side stream, ordered by events
    (a slot is overwritten only after the batches that read it are done; a batch waits for its chunks)."""

    def __init__(self, cache: EpisodeCache) -> None:
        import cupy

        self.c = cache
        self.rt = cupy.cuda.runtime
        with cupy.cuda.Device(cache._dev):
            self.side = self.rt.streamCreateWithFlags(self.rt.streamNonBlocking)
            flags = self.rt.eventDisableTiming
            self.loaded = [self.rt.eventCreateWithFlags(flags) for _ in range(cache._plan.slots)]
            self.freed = [self.rt.eventCreateWithFlags(flags) for _ in range(cache._plan.slots)]
        self.pending_free = [False] * cache._plan.slots

    def load(self, chunk: int, slot: int, evicted: int) -> None:
        with self.c._on_device():
            self._load(chunk, slot, evicted)

    def _load(self, chunk: int, slot: int, evicted: int) -> None:
        c, rt = self.c, self.rt
        if self.pending_free[slot]:  # the batches that read the slot's previous chunk come first
            rt.streamWaitEvent(self.side, self.freed[slot], 0)
            self.pending_free[slot] = False
        for k in range(len(c.names)):
            a, n = c._chunk_samples(chunk, k)
            cap, rb = int(c._plan.cap[k]), c._row_bytes[k]
            rt.memcpyAsync(L.ptr(c._ring_v[k]) + slot * cap * rb, c._host_v[k].ctypes.data + a * rb, n * rb,
                           rt.memcpyHostToDevice, self.side)
            rt.memcpyAsync(L.ptr(c._ring_t[k]) + slot * cap * TIME_BYTES,
                           c._host_t[k].ctypes.data + a * TIME_BYTES, n * TIME_BYTES, rt.memcpyHostToDevice,
                           self.side)
        c._place(self.side, evicted, chunk, slot)
        rt.eventRecord(self.loaded[slot], self.side)

    def wait(self, slot: int) -> None:
        with self.c._on_device():
            self.rt.streamWaitEvent(self.c._stream(), self.loaded[slot], 0)

    def release_point(self, slots: list[int]) -> None:
        with self.c._on_device():
            main = self.c._stream()
            for s in slots:
                self.rt.eventRecord(self.freed[s], main)
                self.pending_free[s] = True

    def close(self) -> None:
        rt = self.rt
        try:
            rt.streamSynchronize(self.side)
            rt.streamSynchronize(self.c._stream())  # batches still reading the ring
            for ev in self.loaded + self.freed:
                rt.eventDestroy(ev)
            rt.streamDestroy(self.side)
        except Exception:  # noqa: BLE001 - at interpreter exit the context may be gone
            pass


# --- the cache ---------------------------------------------------------------------------------------------

def _gpu_present() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no CuPy, no driver, no device
        return False


def _window_bounds(window: Any) -> tuple[int, int]:
    if window is None:
        return 0, 0
    if isinstance(window, bool):
        raise TypeError("window must be None, a length or a (shortest, longest) pair, got a bool")
    if isinstance(window, (int, np.integer)):
        lo = hi = int(window)
    elif isinstance(window, (tuple, list)) and len(window) == 2 and all(
            isinstance(w, (int, np.integer)) and not isinstance(w, bool) for w in window):
        lo, hi = int(window[0]), int(window[1])
    else:
        raise TypeError(f"window must be None (whole episodes), a length or a (shortest, longest) pair, got {window!r}")
    if not 1 <= lo <= hi or hi > A.INT32_MAX:
        raise ValueError(f"window lengths need 1 <= shortest <= longest, got {window!r}")
    return lo, hi


def _check_options(batch_size: Any, rate_hz: Any, window: Any, seed: Any, prefetch_depth: Any,
                   memory_budget: Any) -> tuple[float, int, int]:
    """EpisodeCache's scalar options checked (the first bad one raised): ``(rate, window lo, window hi)``."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    rate = float(rate_hz)
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"rate_hz must be a finite number > 0, got {rate_hz!r}")
    lo, hi = _window_bounds(window)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed <= _M64:
        raise ValueError(f"seed must be an integer in [0, 2**64), got {seed!r}")
    if isinstance(prefetch_depth, bool) or not isinstance(prefetch_depth, (int, np.integer)) or prefetch_depth < 0:
        raise ValueError(f"prefetch_depth must be an integer >= 0, got {prefetch_depth!r}")
    if memory_budget is not None and (isinstance(memory_budget, bool) or not memory_budget > 0):
        raise ValueError(f"memory_budget must be a number of bytes > 0, got {memory_budget!r}")
    return rate, lo, hi


class EpisodeCache:
    """A dataset's episodes in device memory (or the NumPy path), sampled and resampled one batch per launch.

    ``EpisodeCache(episodes, batch_size=32)`` with ``episodes`` a sequence of ``{stream: (times[S], values[S, D])}``
    (NumPy, PyTorch or CuPy arrays), or :meth:`from_hdf5`. Then ``for batch in cache: ...`` runs one epoch
    (:class:`EpisodeBatch`), :meth:`next_batch` goes on across epochs. Keywords (all checked before anything is
    allocated):

    - ``streams``: the streams to cache, in output order (default: the first episode's, or the file's);
    - ``rate_hz`` (50): the target grid; ``window``: ``None`` (whole episodes), a length, or a range;
    - ``seed``, ``shuffle`` (a fresh seeded order per epoch) or ``order`` (dataset indices, repeated each epoch;
      resident mode only); ``durations``/``origins`` per episode (arrays; default: the streams' span);
    - ``device``: ``"cuda"``, ``"cuda:N"`` or ``"cpu"`` (default: the GPU when CuPy sees one); ``kind``: the
      arrays returned (``"torch"`` or ``"cupy"`` on the GPU, ``"numpy"`` or ``"torch"`` on the CPU);
      ``out_dtype``: float32 (default where any stream is float32), float16 or bfloat16;
    - ``memory_budget`` (bytes) and ``prefetch_depth`` (chunks copied ahead beyond the next batch's, streamed);
    - ``rank``/``world_size`` (default: torch.distributed's when initialized) or ``subset`` (dataset indices);
    - ``log``: a callable for the one summary line (default: this module's logger at INFO).

    Attributes: ``mode`` (``"resident"`` or ``"streamed"``), ``device_bytes``, ``host_bytes`` (pinned, streamed),
    ``build_s``, ``chunks``, ``slots``, ``batches_per_epoch`` (also ``len(cache)``), ``summary``.
    """

    def __init__(self, episodes: Sequence[Mapping[str, tuple[Any, Any]]], *, batch_size: int,
                 streams: Sequence[str] | None = None, durations: Any = None, origins: Any = None,
                 **kw: Any) -> None:
        t0 = time.perf_counter()
        self._setup(_Arrays(episodes, streams, durations, origins), batch_size=batch_size, t0=t0, **kw)

    @classmethod
    def from_hdf5(cls, path: str, *, batch_size: int, streams: Sequence[str] | None = None,
                  **kw: Any) -> EpisodeCache:
        """The episodes of one of our HDF5 datasets (``python -m robocache.bench.pipelines dataset``): every
        numeric stream (``rgb`` frames are not cached), origin 0, duration from each episode's ``duration_s``."""
        t0 = time.perf_counter()
        self = cls.__new__(cls)
        src = _Hdf5(str(path), streams)
        try:
            self._setup(src, batch_size=batch_size, t0=t0, **kw)
        finally:
            src.close()
        return self

    # -- build --

    def _setup(self, src: Any, *, batch_size: int, t0: float, rate_hz: float = 50.0, window: Any = None,
               seed: int = 0, shuffle: bool = True, order: Sequence[int] | None = None, device: str | None = None,
               kind: str | None = None, memory_budget: int | None = None, prefetch_depth: int = 1,
               out_dtype: str | None = None, rank: int | None = None, world_size: int | None = None,
               subset: Sequence[int] | None = None, log: Callable[[str], None] | None = None) -> None:
        self._closed = True  # until built: close() does nothing
        rate, lo, hi = _check_options(batch_size, rate_hz, window, seed, prefetch_depth, memory_budget)
        on_gpu, dev = self._where(device)
        kind = kind or (("torch" if "torch" in sys.modules or _importable("torch") else "cupy") if on_gpu else "numpy")
        allowed = ("torch", "cupy") if on_gpu else ("numpy", "torch")
        if kind not in allowed:
            raise ValueError(f"kind {kind!r} on {'the GPU' if on_gpu else 'the CPU'}: expected one of {allowed}")
        self._batch_size, self._rate, self._lo, self._hi = int(batch_size), rate, lo, hi
        self._seed, self._shuffle, self._depth = int(seed), bool(shuffle), int(prefetch_depth)
        self._on_gpu, self._dev, self._kind = on_gpu, dev, kind

        ids, eq = self._shard(src.n, rank, world_size, subset)
        self._set_order(src.n, ids, eq, order)
        lay = _read_layout(src, ids, rate)
        self._check_layout(lay, out_dtype)
        ep_per_upload = len(order) if order is not None else max(1, -(-ORDER_BATCHES // self._bpe)) * self._used
        plan = self._plan(lay, memory_budget, ep_per_upload)
        if plan.mode == "streamed" and order is not None:
            raise ValueError("an explicit order needs the resident mode (a streamed cache draws chunk by chunk from "
                             "what is resident); give shuffle/seed instead, or a larger memory_budget")
        self._set_layout(lay, plan)
        self._closed = False
        try:
            self._allocate_and_fill(src)
        except BaseException:
            self.close()
            raise
        self._lay.times = []  # packed now: the per-episode copies are not needed any more
        self.build_s = time.perf_counter() - t0
        (log or logger.info)(self.summary)

    def _set_order(self, n: int, ids: np.ndarray, eq: int, order: Sequence[int] | None) -> None:
        """The explicit ``order`` (global episode indices) as this cache's local indices, or None (drawn per
        epoch); the episodes an epoch uses (whole batches) and the batches per epoch."""
        local = np.full(n, -1, dtype=np.int64)
        local[ids] = np.arange(len(ids))
        if order is not None:
            o = np.asarray(order)
            if o.ndim != 1 or (o.size and o.dtype.kind not in "iu"):
                raise TypeError("order must be a 1-D sequence of episode indices (integers)")
            o = o.astype(np.int64)
            if o.size and (o.min() < 0 or o.max() >= n):
                raise ValueError(f"order names episode {int(o[(o < 0) | (o >= n)][0])}; the dataset has "
                                 f"{n} episodes (0..{n - 1})")
            missing = o[local[o] < 0] if o.size else o
            if missing.size:
                raise ValueError(f"order names episode {int(missing[0])}, which this cache does not hold (it holds "
                                 f"{len(ids)} of the {n} episodes: its shard or subset)")
            self._order = local[o].astype(np.int32)
            used = (len(o) // self._batch_size) * self._batch_size
        else:
            self._order = None
            used = (eq // self._batch_size) * self._batch_size
        if used < self._batch_size:
            have = len(order) if order is not None else eq
            raise ValueError(f"{have} episodes {'in order' if order is not None else 'per rank'}: fewer than one "
                             f"batch of {self._batch_size}")
        self._used, self._bpe = used, used // self._batch_size

    def _check_layout(self, lay: _Layout, out_dtype: str | None) -> None:
        """Every episode long enough for the windows asked for; the output dtype (``self._out``), and that this
        kind of array can hold it."""
        if self._lo > 0:
            short = np.flatnonzero(lay.n_tgt < self._hi)
            if short.size:
                e = int(short[0])
                raise ValueError(f"episode {int(lay.gid[e])} has {int(lay.n_tgt[e])} targets at {self._rate:g} Hz, "
                                 f"shorter than a window of {self._hi} (drop it, or ask for shorter windows)")
        self._out = self._out_dtype(out_dtype, lay.dtypes)
        if self._kind == "cupy" and self._out == "bfloat16":
            raise TypeError("CuPy has no bfloat16 arrays: use kind='torch' or another out_dtype")
        if self._kind == "numpy" and self._out == "bfloat16" and not _importable("ml_dtypes"):
            raise TypeError("NumPy bfloat16 output needs ml_dtypes (pip install ml_dtypes), or kind='torch'")

    def _set_layout(self, lay: _Layout, plan: Any) -> None:
        """The packed layout's bookkeeping: names, row bytes, column offsets, per-episode chunk and offsets."""
        self._lay, self._plan = lay, plan
        self.names = lay.names
        self._row_bytes = [d * _ITEMSIZE[t] for d, t in zip(lay.dims, lay.dtypes)]
        self._cols = np.concatenate([[0], np.cumsum(lay.dims)]).astype(np.int64)
        self._epoch, self._batch = 0, 0
        self._orders: OrderedDict[int, np.ndarray] = OrderedDict()  # epoch -> local order (host)
        self._chunk_cache: OrderedDict[int, tuple[int, ...]] = OrderedDict()
        # chunk layout: each episode's first sample within its chunk, per stream
        bounds = plan.bounds
        self._chunk_of = np.repeat(np.arange(plan.chunks, dtype=np.int32), np.diff(bounds))
        hoff = np.zeros_like(lay.counts)
        hoff[1:] = np.cumsum(lay.counts, axis=0)[:-1]
        self._hoff = hoff  # first sample in the packed host layout
        self._in_off = hoff - hoff[bounds[:-1]][self._chunk_of]

    @staticmethod
    def _where(device: str | None) -> tuple[bool, int]:
        if device is None:
            device = "cuda" if _gpu_present() else "cpu"
        if device == "cpu":
            return False, -1
        if not isinstance(device, str) or not (device == "cuda" or device.startswith("cuda:")):
            raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
        if not _gpu_present():
            raise ValueError(f"device {device!r}: no CUDA GPU is usable (CuPy and a device are needed); use 'cpu'")
        if device == "cuda":
            torch = sys.modules.get("torch")
            if torch is not None and torch.cuda.is_available():
                return True, int(torch.cuda.current_device())
            import cupy

            return True, int(cupy.cuda.runtime.getDevice())
        try:
            return True, int(device.split(":", 1)[1])
        except ValueError:
            raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}") from None

    @staticmethod
    def _shard(n: int, rank: int | None, world: int | None, subset: Sequence[int] | None) -> tuple[np.ndarray, int]:
        """(the dataset indices this cache holds, the episodes per epoch every rank can serve)."""
        if subset is not None:
            s = np.unique(np.asarray(subset, dtype=np.int64))
            if s.size == 0 or s.min() < 0 or s.max() >= n:
                raise ValueError(f"subset must name episodes in 0..{n - 1}")
            return s, int(s.size)
        if rank is None and world is None:
            torch = sys.modules.get("torch")
            dist = getattr(torch, "distributed", None) if torch is not None else None
            if dist is not None and dist.is_available() and dist.is_initialized():
                rank, world = dist.get_rank(), dist.get_world_size()
            else:
                rank, world = 0, 1
        if rank is None or world is None or world < 1 or not 0 <= rank < world:
            raise ValueError(f"need 0 <= rank < world_size, got rank {rank} and world_size {world}")
        if n < world:
            raise ValueError(f"{n} episodes cannot be shared among {world} ranks")
        return np.arange(rank, n, world, dtype=np.int64), n // world

    @staticmethod
    def _out_dtype(out: str | None, dtypes: list[str]) -> str:
        if out is None:
            return dtypes[0] if len(set(dtypes)) == 1 else "float32"
        if out not in STREAM_DTYPES:
            raise TypeError(f"out_dtype must be one of {', '.join(STREAM_DTYPES)}, got {out!r}")
        return out

    def _plan(self, lay: _Layout, budget: int | None, order_len: int) -> _Plan:
        eps, k_n = len(lay.gid), len(lay.names)
        total = lay.counts.sum(axis=0)
        tb = _tables_bytes(eps, k_n, 1, order_len)
        resident = _Plan("resident", np.array([0, eps], dtype=np.int64), 1, total.astype(np.int64),
                         int((total * lay.sample_bytes).sum()) + tb, tb)
        free = None
        if self._on_gpu:
            import cupy

            with cupy.cuda.Device(self._dev):
                free = int(cupy.cuda.runtime.memGetInfo()[0])
        if budget is None:
            if free is None or resident.device_bytes <= RESIDENT_FRACTION * free:
                return resident
            budget = int(STREAM_FRACTION * free)
        elif free is not None and budget > free:
            raise ValueError(f"memory_budget {_mb(budget)} exceeds the device's free memory {_mb(free)}")
        if resident.device_bytes <= budget:
            return resident
        plan, smallest = _streamed(lay, int(budget), self._batch_size, self._depth, order_len)
        if plan is None:
            need = f"at least {_mb(smallest)}" if smallest > 0 else "more episodes than one batch per chunk"
            raise ValueError(f"memory_budget {_mb(budget)} is too small for one batch: streaming batches of "
                             f"{self._batch_size} episodes with prefetch_depth {self._depth} needs {need} "
                             f"(the whole cache: {_mb(resident.device_bytes)}); raise the budget or lower "
                             "batch_size or prefetch_depth")
        return plan

    def _allocate_and_fill(self, src: Any) -> None:
        lay, plan = self._lay, self._plan
        k_n, eps = len(lay.names), len(lay.gid)
        ep = np.zeros((eps, 2 + 2 * k_n), dtype=np.int64)
        ep[:, 0], ep[:, 1] = lay.gid, lay.n_tgt
        ep[:, 2::2], ep[:, 3::2] = self._in_off, lay.counts
        self._ep_host = ep
        self._slot_of = np.full(plan.chunks, -1, dtype=np.int32)
        raw = [np.uint16 if t == "bfloat16" else np.dtype(t) for t in lay.dtypes]
        streamed = plan.mode == "streamed"
        self.host_bytes = 0
        self._host_v: list[np.ndarray] = []
        self._host_t: list[np.ndarray] = []
        total = lay.counts.sum(axis=0)
        if not self._on_gpu or streamed:  # a packed host copy: the CPU path's buffers, or the pinned source
            for k in range(k_n):
                n, d = int(total[k]), lay.dims[k]
                v, t = self._host_empty((n, d), raw[k]), self._host_empty((n,), np.float64)
                self._host_v.append(v)
                self._host_t.append(t)
            for e in range(eps):
                for k, v in enumerate(src.values(int(lay.gid[e]))):
                    a, n = int(self._hoff[e, k]), int(lay.counts[e, k])
                    self._host_v[k][a:a + n] = _raw(v, lay.dtypes[k])
                    self._host_t[k][a:a + n] = lay.times[e][k]
            if streamed:
                self.host_bytes = int(sum(x.nbytes for x in self._host_v + self._host_t))
        if not self._on_gpu:
            if streamed:
                self._ring_v = [np.zeros((plan.slots * int(plan.cap[k]), lay.dims[k]), raw[k]) for k in range(k_n)]
                self._ring_t = [np.zeros(plan.slots * int(plan.cap[k]), np.float64) for k in range(k_n)]
            else:
                self._ring_v, self._ring_t = self._host_v, self._host_t
                self._slot_of[0] = 0
            self.device_bytes = plan.device_bytes
            self._ops = _CpuOps(self)
        else:
            self._gpu_setup(src, raw)
        self._ring = _Ring(plan.slots, self._depth, self._chunks_of, self._ops, horizon=2 * self._bpe + 2) \
            if streamed else None

    def _host_empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """Host memory for the packed copy: pinned on a GPU (the side stream's copies are asynchronous)."""
        if not self._on_gpu:
            return np.empty(shape, dtype=dtype)
        import cupyx

        return cupyx.empty_pinned(shape, dtype=dtype)

    # -- the GPU side --

    def _gpu_setup(self, src: Any, raw: list[Any]) -> None:
        import cupy

        lay, plan = self._lay, self._plan
        k_n = len(lay.names)
        rt = cupy.cuda.runtime
        with cupy.cuda.Device(self._dev):
            self._ring_v = [self._dev_bytes(plan.slots * int(plan.cap[k]) * self._row_bytes[k]) for k in range(k_n)]
            self._ring_t = [self._dev_bytes(plan.slots * int(plan.cap[k]) * TIME_BYTES) for k in range(k_n)]
            if plan.mode == "resident":  # straight from the source, episode by episode (no host copy of it all)
                for e in range(len(lay.gid)):
                    for k, vals in enumerate(src.values(int(lay.gid[e]))):
                        a = int(self._hoff[e, k])
                        v = np.ascontiguousarray(_raw(vals, lay.dtypes[k]))
                        t = np.ascontiguousarray(lay.times[e][k])
                        rt.memcpy(L.ptr(self._ring_v[k]) + a * self._row_bytes[k], v.ctypes.data, v.nbytes,
                                  rt.memcpyHostToDevice)
                        rt.memcpy(L.ptr(self._ring_t[k]) + a * TIME_BYTES, t.ctypes.data, t.nbytes,
                                  rt.memcpyHostToDevice)
                self._slot_of[0] = 0
            self._d_ep = self._dev_array(self._ep_host)
            self._d_origin = self._dev_array(lay.origin)
            self._d_chunk_of = self._dev_array(self._chunk_of)
            self._d_slot_of = self._dev_array(self._slot_of)
            rt.deviceSynchronize()
        self._d_orders: OrderedDict[int, tuple[Any, int]] = OrderedDict()  # first epoch -> (device order, epochs)
        if self._order is not None:
            self._d_orders[0] = (self._dev_array(self._order), 1 << 62)
        self._fn = L.kernel("episodes", f"episodes_batch_{self._out}", self._dev)
        self._fn_place = L.kernel("episodes", "episodes_place", self._dev)
        self._fl_place = L.FastLaunch(self._fn_place, [("ptr", L.ptr(self._d_slot_of)), ("i32", 0), ("i32", 0),
                                                       ("i32", 0)])
        # the stream table: narrowest streams first (their search-bound rows overlap the wide ones)
        self._slot_order = sorted(range(k_n), key=lambda k: (lay.dims[k], k))
        tab = np.zeros(_HEAD + _FIELDS * MAX_STREAMS, dtype=np.int64)
        tab[1:6] = (L.ptr(self._d_ep), L.ptr(self._d_origin), L.ptr(self._d_chunk_of), L.ptr(self._d_slot_of), k_n)
        tab[6], tab[7] = self._lo, self._hi
        tab[8] = _signed(self._seed)
        tab[9] = np.array(self._rate, dtype=np.float64).view(np.int64)
        self._n_vec = []
        for slot, k in enumerate(self._slot_order):
            f = _HEAD + _FIELDS * slot
            n = self._vector(lay.dims[k], int(self._cols[k]), int(self._cols[-1]), _ITEMSIZE[lay.dtypes[k]])
            self._n_vec.append(n)
            tab[f:f + 5] = (L.ptr(self._ring_v[k]), L.ptr(self._ring_t[k]), int(plan.cap[k]), lay.dims[k],
                            int(self._cols[k]))
            tab[f + 7] = k
        self._table = tab
        # (table, out, mask, win, order_off, pos0, epoch, T, Dtot, n_targets, div_mult, div_shift)
        self._fl = L.FastLaunch(self._fn, [("struct", tab.tobytes()), ("ptr", None), ("ptr", None), ("ptr", None),
                                           ("i64", 0), ("i64", 0), ("u64", 0), ("i32", 1), ("i32", int(self._cols[-1])),
                                           ("i64", 0), ("u64", 0), ("u32", 0)])
        self._geo: dict[int, tuple[int, dict[int, int], int, int]] = {}
        self._sms = L.sm_count(self._dev)
        self.device_bytes = int(sum(self._nbytes(x) for x in self._ring_v + self._ring_t)) + plan.table_bytes
        self._ops = _GpuOps(self) if plan.mode == "streamed" else None

    def _vector(self, d: int, col: int, dtot: int, es_in: int) -> int:
        """Elements per vector access: the widest (16 bytes at most, in and out) that D, the column and the output
        row length allow (every buffer starts 256-byte aligned)."""
        es = max(es_in, _ITEMSIZE[self._out])
        for n in (8, 4, 2):
            if n * es <= 16 and d % n == 0 and col % n == 0 and dtot % n == 0:
                return n
        return 1

    def _dev_bytes(self, n: int) -> Any:
        if self._kind == "torch":
            import torch

            return torch.empty(max(n, 1), dtype=torch.uint8, device=f"cuda:{self._dev}")
        import cupy

        return cupy.empty(max(n, 1), dtype=np.uint8)

    def _dev_array(self, a: np.ndarray) -> Any:
        a = np.ascontiguousarray(a)
        if self._kind == "torch":
            import torch

            return torch.from_numpy(a).to(f"cuda:{self._dev}")
        import cupy

        with cupy.cuda.Device(self._dev):
            return cupy.asarray(a)

    @staticmethod
    def _nbytes(x: Any) -> int:
        return int(x.numel() * x.element_size()) if hasattr(x, "numel") else int(x.nbytes)

    def _stream(self) -> int:
        return L.raw_stream(self._kind, self._dev)

    def _on_device(self) -> Any:
        """The cache's device as CUDA's current one (a no-op when it already is)."""
        cupy = L.cupy_module()
        if cupy.cuda.runtime.getDevice() == self._dev:
            return contextlib.nullcontext()
        return cupy.cuda.Device(self._dev)

    def _place(self, stream: int, evicted: int, chunk: int, slot: int) -> None:
        m = 0xFFFFFFFF
        self._fl_place(1, stream, 0, {1: evicted & m, 2: chunk & m, 3: slot & m}, None, 32)

    def _dev_order(self, epoch: int) -> tuple[Any, int]:
        """The device copy of the epoch's order and the epoch's offset in it: one upload covers several epochs
        (at least ORDER_BATCHES batches), an explicit order is uploaded once."""
        if self._order is not None:
            return self._d_orders[0][0], 0
        for first, (buf, n) in self._d_orders.items():
            if first <= epoch < first + n:
                return buf, (epoch - first) * self._used
        n = max(1, -(-ORDER_BATCHES // self._bpe))
        host = np.concatenate([self._epoch_order(e) for e in range(epoch, epoch + n)])
        self._d_orders[epoch] = (self._dev_array(host), n)
        while len(self._d_orders) > 2:  # the previous one may still be read by launched batches
            self._d_orders.popitem(last=False)
        return self._d_orders[epoch][0], 0

    def _geometry(self, t_len: int) -> tuple[int, dict[int, int], int, int]:
        """(grid, the table's per-call fields, div_mult, div_shift) for a batch of ``t_len`` targets per row."""
        g = self._geo.get(t_len)
        if g is not None:
            return g
        n_t = self._batch_size * t_len
        lay = self._lay
        work = [lay.dims[k] for k in self._slot_order]
        upd: dict[int, int] = {}
        block0 = 0
        for slot, k in enumerate(self._slot_order):
            n = self._n_vec[slot]
            es = _ITEMSIZE[lay.dtypes[k]]
            lg, tpg, blocks = L.row_geometry(lay.dims[k], es, n * es, n_t, self._sms,
                                             streams_share=work[slot] / sum(work))
            f = _HEAD + _FIELDS * slot
            upd[f + 5] = _CODE[lay.dtypes[k]] | n << 4 | lg << 8 | tpg << 16
            upd[f + 6] = block0
            block0 += blocks
        A.check_grid(block0, "EpisodeCache batch")
        mult, shift = L.fast_divmod(t_len)
        g = (block0, upd, int(mult), int(shift))
        if len(self._geo) > 4096:
            self._geo.clear()
        self._geo[t_len] = g
        return g

    # -- sampling --

    def _epoch_order(self, epoch: int) -> np.ndarray:
        """The local episode order of ``epoch`` (its used positions): chunk by chunk in a fresh seeded order,
        episodes in a fresh order within each chunk (one chunk when resident); or the explicit order."""
        if self._order is not None:
            return self._order[:self._used]
        hit = self._orders.get(epoch)
        if hit is not None:
            return hit
        eps = len(self._lay.gid)
        if self._shuffle:
            rng = np.random.default_rng([self._seed, epoch])
            chunk_rank = np.empty(self._plan.chunks, dtype=np.int64)
            chunk_rank[rng.permutation(self._plan.chunks)] = np.arange(self._plan.chunks)
            o = np.lexsort((rng.random(eps), chunk_rank[self._chunk_of]))
        else:
            o = np.arange(eps)
        o = o[:self._used].astype(np.int32)
        self._orders[epoch] = o
        while len(self._orders) > 8:
            self._orders.popitem(last=False)
        return o

    def _rows(self, epoch: int, batch: int) -> np.ndarray:
        b = self._batch_size
        return self._epoch_order(epoch)[batch * b:(batch + 1) * b]

    def _chunks_of(self, g: int) -> tuple[int, ...]:
        """The chunks batch ``g`` (counted over epochs) reads, in order of first use."""
        hit = self._chunk_cache.get(g)
        if hit is None:
            cs = self._chunk_of[self._rows(*divmod(g, self._bpe))]
            _, first = np.unique(cs, return_index=True)
            hit = tuple(int(c) for c in cs[np.sort(first)])
            self._chunk_cache[g] = hit
            while len(self._chunk_cache) > 4 * self._bpe + 64:
                self._chunk_cache.popitem(last=False)
        return hit

    def _t_len(self, rows: np.ndarray) -> int:
        if self._lo == 0:
            return int(self._lay.n_tgt[rows].max())
        return self._hi

    # -- public --

    @property
    def mode(self) -> str:
        """``"resident"`` (the whole shard on the device) or ``"streamed"`` (chunks copied in as needed)."""
        return self._plan.mode

    @property
    def chunks(self) -> int:
        return self._plan.chunks

    @property
    def slots(self) -> int:
        return self._plan.slots

    @property
    def prefetch_depth(self) -> int:
        return self._depth

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def batches_per_epoch(self) -> int:
        return self._bpe

    @property
    def episodes(self) -> np.ndarray:
        """The dataset indices this cache holds (its shard), in the order they are packed."""
        return self._lay.gid.copy()

    @property
    def episode_nbytes(self) -> np.ndarray:
        """Bytes each held episode takes (its values as stored and float64 times), aligned with ``episodes``."""
        return (self._lay.counts * self._lay.sample_bytes).sum(axis=1)

    @property
    def device(self) -> str:
        return f"cuda:{self._dev}" if self._on_gpu else "cpu"

    @property
    def chunk_copies(self) -> int:
        """Chunks copied into the ring so far (streamed mode; 0 when resident)."""
        return self._ring.copies if self._ring is not None else 0

    @property
    def summary(self) -> str:
        """One line: the mode, what is cached, where, and what it costs."""
        lay, plan = self._lay, self._plan
        where = f"GPU {self._dev}" if self._on_gpu else "the CPU (NumPy path, no GPU)"
        line = (f"EpisodeCache: {plan.mode} on {where}: {len(lay.gid)} episodes, {len(lay.names)} streams "
                f"({', '.join(lay.names)}), {_mb(self.device_bytes)}")
        if plan.mode == "streamed":
            line += (f" of device memory in a ring of {plan.slots} slots over {plan.chunks} chunks (prefetch depth "
                     f"{self._depth}), {_mb(self.host_bytes)} in {'pinned ' if self._on_gpu else ''}host memory")
        return line + f"; built in {self.build_s:.2f} s"

    def __len__(self) -> int:
        return self._bpe

    def __repr__(self) -> str:
        return f"<{self.summary}>" if not self._closed else "<EpisodeCache (closed)>"

    def __iter__(self) -> Iterator[EpisodeBatch]:
        """The rest of the current epoch (a new one when the last ended)."""
        if self._batch >= self._bpe:
            self._epoch, self._batch = self._epoch + 1, 0
        epoch = self._epoch
        while self._epoch == epoch and self._batch < self._bpe:
            yield self.next_batch()

    def next_batch(self) -> EpisodeBatch:
        """The next batch, across epochs."""
        if self._closed:
            raise RuntimeError("EpisodeCache is closed")
        if self._batch >= self._bpe:
            self._epoch, self._batch = self._epoch + 1, 0
        epoch, i = self._epoch, self._batch
        out = self._produce(epoch, i)
        self._batch = i + 1
        return out

    def peek_episodes(self, batches: int) -> np.ndarray:
        """The dataset indices of the next ``batches`` batches' rows ``[batches, B]``, without advancing (e.g. to
        feed another loader the same episodes)."""
        e, i = self._epoch, self._batch
        out = []
        for _ in range(int(batches)):
            if i >= self._bpe:
                e, i = e + 1, 0
            out.append(self._lay.gid[self._rows(e, i)])
            i += 1
        return np.array(out, dtype=np.int64).reshape(int(batches), self._batch_size)

    def reset(self, order: Sequence[int] | None = None) -> None:
        """Back to epoch 0, batch 0; with ``order`` (dataset indices, resident mode) a new explicit order."""
        if order is not None:
            if self.mode != "resident":
                raise ValueError("an explicit order needs the resident mode")
            o = np.asarray(order, dtype=np.int64)
            local = np.full(int(self._lay.gid.max()) + 1, -1, dtype=np.int64)
            local[self._lay.gid] = np.arange(len(self._lay.gid))
            if o.ndim != 1 or o.size < self._batch_size or o.min() < 0 or o.max() >= local.size \
                    or (local[o] < 0).any():
                raise ValueError(f"order must name at least {self._batch_size} episodes, all held by this cache")
            self._order = local[o].astype(np.int32)
            self._used = (len(o) // self._batch_size) * self._batch_size
            self._bpe = self._used // self._batch_size
            if self._on_gpu:
                self._d_orders = OrderedDict({0: (self._dev_array(self._order), 1 << 62)})
        self._epoch, self._batch = 0, 0
        self._orders.clear()
        self._chunk_cache.clear()

    def state_dict(self) -> dict[str, Any]:
        """The sampler's state (JSON-serialisable): seed, epoch, batch, and what a resumed cache must match."""
        return {"format": STATE_FORMAT, "seed": self._seed, "epoch": self._epoch, "batch": self._batch,
                **self._signature()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume: the next batch is the one after those the saved cache had produced. Refused (``ValueError``)
        when the cache differs in what decides the order (episodes, batch size, window, chunks, ...)."""
        if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
            raise ValueError(f"not an EpisodeCache state (expected format {STATE_FORMAT!r})")
        mine = self._signature()
        diff = [k for k in mine if state.get(k) != mine[k]]
        if diff:
            raise ValueError("this cache cannot resume that state: it differs in " + ", ".join(
                f"{k} ({state.get(k)!r} saved, {mine[k]!r} here)" for k in diff))
        seed, epoch, batch = state.get("seed"), state.get("epoch"), state.get("batch")
        if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in (seed, epoch, batch)) \
                or batch > self._bpe or seed > _M64:
            raise ValueError(f"bad seed/epoch/batch in the state: {seed!r}, {epoch!r}, {batch!r}")
        if seed != self._seed:
            self._seed = seed
            self._orders.clear()
            self._chunk_cache.clear()
            if self._on_gpu and self._order is None:
                self._d_orders.clear()
        self._epoch, self._batch = epoch, batch

    def _signature(self) -> dict[str, Any]:
        digest = hashlib.sha1(self._order.tobytes()).hexdigest()[:16] if self._order is not None else None
        return {"episodes": len(self._lay.gid),
                "episodes_digest": hashlib.sha1(self._lay.gid.tobytes()).hexdigest()[:16],
                "batch_size": self._batch_size, "window": [self._lo, self._hi], "rate_hz": self._rate,
                "shuffle": self._shuffle, "chunks": self._plan.chunks, "order_digest": digest}

    def close(self) -> None:
        """Free the device and pinned memory now (also when the cache is garbage-collected)."""
        if getattr(self, "_closed", True):
            return
        self._closed = True
        ops = getattr(self, "_ops", None)
        if hasattr(ops, "close"):
            ops.close()
        for name in ("_ring_v", "_ring_t", "_host_v", "_host_t", "_d_ep", "_d_origin", "_d_chunk_of", "_d_slot_of",
                     "_d_orders", "_fl", "_fl_place"):
            if hasattr(self, name):
                setattr(self, name, None)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass

    def __enter__(self) -> EpisodeCache:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- one batch --

    def _produce(self, epoch: int, i: int) -> EpisodeBatch:
        g = epoch * self._bpe + i
        if self._ring is not None:
            self._ring.before(g)
        rows = self._rows(epoch, i)
        t_len = self._t_len(rows)
        if self._on_gpu:
            x, mask, win = self._launch(epoch, i, t_len)
        else:
            x, mask, win = self._numpy_batch(epoch, i, rows, t_len)
        if self._ring is not None:
            self._ring.after(g)
        return EpisodeBatch(x, mask, win, epoch, i)

    def _launch(self, epoch: int, i: int, t_len: int) -> tuple[Any, Any, Any]:
        b, dtot = self._batch_size, int(self._cols[-1])
        if self._kind == "torch":
            import torch

            dev = f"cuda:{self._dev}"
            x = torch.empty((b, t_len, dtot), dtype=getattr(torch, self._out), device=dev)
            mask = torch.empty((b, t_len), dtype=torch.bool, device=dev)
            win = torch.empty((b, 3), dtype=torch.int64, device=dev)
        else:
            import cupy

            with cupy.cuda.Device(self._dev):
                x = cupy.empty((b, t_len, dtot), dtype=self._out)
                mask = cupy.empty((b, t_len), dtype=np.bool_)
                win = cupy.empty((b, 3), dtype=np.int64)
        buf, off = self._dev_order(epoch)
        grid, upd, mult, shift = self._geometry(t_len)
        struct = {0: L.ptr(buf), 8: _signed(self._seed), **upd}
        L.fast_launch(self._fl, grid, self._kind, self._dev,
                      {1: L.ptr(x), 2: L.ptr(mask), 3: L.ptr(win), 4: off + i * b, 5: i * b, 6: epoch, 7: t_len,
                       9: b * t_len, 10: mult, 11: shift}, struct_ptrs=struct)
        return x, mask, win

    def _numpy_batch(self, epoch: int, i: int, rows: np.ndarray, t_len: int) -> tuple[Any, Any, Any]:
        """The kernel's work on the CPU, reading the same tables (chunk, slot, offsets) the kernel reads."""
        lay, plan, b = self._lay, self._plan, self._batch_size
        dtot = int(self._cols[-1])
        out = np.zeros((b, t_len, dtot), dtype=np.float64)
        mask = np.zeros((b, t_len), dtype=bool)
        win = np.zeros((b, 3), dtype=np.int64)
        for r, e in enumerate(rows.tolist()):
            s, length = window_of(self._seed, epoch, i * b + r, self._lo, self._hi, int(lay.n_tgt[e]))
            mask[r, :length] = True
            win[r] = (lay.gid[e], s, length)
            chunk = int(self._chunk_of[e])
            slot = int(self._slot_of[chunk])
            if self._ring is not None and (slot < 0 or self._ring.holder[slot] != chunk):
                raise RuntimeError(f"EpisodeCache: chunk {chunk} is not resident for batch {i} of epoch {epoch} "
                                   "(an internal error; please report it)")
            tgt = lay.origin[e] + (s + np.arange(length)) / self._rate
            for k in range(len(lay.names)):
                off = slot * int(plan.cap[k]) + int(self._in_off[e, k])
                n = int(lay.counts[e, k])
                v = _as_float(self._ring_v[k][off:off + n], lay.dtypes[k])
                t = self._ring_t[k][off:off + n]
                out[r, :length, self._cols[k]:self._cols[k + 1]] = reference.resample(
                    v[None], t[None], tgt[None], out_dtype=None)[0]
        x = self._from_host(out)
        if self._kind == "torch":
            import torch

            return x, torch.from_numpy(mask), torch.from_numpy(win)
        return x, mask, win

    def _from_host(self, out: np.ndarray) -> Any:
        if self._kind == "torch":
            import torch

            return torch.from_numpy(out).to(getattr(torch, self._out))
        if self._out == "bfloat16":
            import ml_dtypes

            return out.astype(ml_dtypes.bfloat16)
        return out.astype(self._out)

    def _chunk_samples(self, chunk: int, k: int) -> tuple[int, int]:
        """(first sample in the packed host copy, samples) of one chunk's stream ``k``."""
        a, z = int(self._plan.bounds[chunk]), int(self._plan.bounds[chunk + 1])
        first = int(self._hoff[a, k])
        last = int(self._hoff[z - 1, k] + self._lay.counts[z - 1, k])
        return first, last - first


def _mb(n: float) -> str:
    return f"{n / 1e6:.3g} MB"


def _signed(x: int) -> int:
    """A uint64 as the int64 with the same bits (the kernel table's slots are int64)."""
    return x - (1 << 64) if x >= 1 << 63 else x


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _raw(v: np.ndarray, dtype: str) -> np.ndarray:
    """A stream's values as stored (bfloat16 as its uint16 bits, already so from _host)."""
    if dtype == "bfloat16":
        return v.view(np.uint16) if v.dtype != np.uint16 else v
    return v


def _as_float(v: np.ndarray, dtype: str) -> np.ndarray:
    """Stored values as float32 (bfloat16 bits shifted into place: exact)."""
    if dtype == "bfloat16":
        return (v.astype(np.uint32) << 16).view(np.float32)
    return v.astype(np.float32, copy=False)
