"""Data loading, as the seed frames it and fair to the baseline.

Both pipelines are one ``torch.utils.data.DataLoader`` over :class:`EpisodeDataset` with N worker processes,
pinned memory (on a GPU), prefetching and persistent workers, the same batch size and the same sequence of
episodes (a seeded index list as the sampler):

- ``cpu_workers`` (the baseline): each worker reads an episode and resamples every stream onto the 50 Hz
  timeline on the CPU (NumPy, ``numpy.interp`` semantics: :func:`robocache.reference.resample`, one bracket
  search per stream, all features at once), then the collate pads the fused ``[T, 283]`` rows to the batch's
  longest episode; the main process copies the batch to the device.
- ``robocache``: the workers only read and pad (each stream padded to the batch's longest by repeating its
  last sample, which ``numpy.interp`` semantics make invisible); the main process copies the padded streams
  to the device and resamples the whole batch with one ``robocache.fuse`` call. On a machine without a GPU
  this is robocache's NumPy fallback (the record says ``resample_on: numpy_fallback``; no GPU figure).

A third loader has no DataLoader and no worker: ``episode_cache``, a :class:`robocache.EpisodeCache` built once
from the file (the four streams on the device, or streamed from pinned host memory within a memory budget),
whose every batch is one kernel launch reading the episodes where they sit. It takes the same index list
(resident: an explicit order) or gives its own (streamed: chunk by chunk), and its batches are the CPU workers'
(the same gate).

An item is one episode (a trajectory): its streams resampled onto ``k / 50`` s for ``k < 50 * duration``,
fused in the order vision (256), proprio (14), force (6), action (7): 283 features. Output rows past an
episode's end are zero (``mask`` False). The gate: both pipelines' first batches are compared (the fused
rows against each other within float32's tolerance, the masks and RGB frames exactly) before any timing.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from itertools import islice
from typing import Any

import numpy as np

from ... import reference
from . import dataset as ds

RATE_HZ = 50.0
FUSED = tuple(s.name for s in ds.STREAMS)
FUSED_DIM = sum(s.dim for s in ds.STREAMS)
OBS_DIM = FUSED_DIM - ds.STREAMS[-1].dim  # the model's input: everything but the action
PROVIDERS = ("cpu_workers", "robocache")  # the DataLoader pipelines (their records sweep the worker count)
CACHE = "episode_cache"  # robocache.EpisodeCache: no worker, no per-batch copy
ALL_LOADERS = (*PROVIDERS, CACHE)
REGIMES = ("resident", "streamed")  # the cache's: the whole dataset on the device, or streamed within a budget
SPLIT = ("read", "decode", "resampling", "collate")  # worker-side, per batch (summed over its items)
PREFETCH = 2  # DataLoader prefetch_factor: batches each worker makes ahead


def steady_warmup(workers: int, warmup: int, prefetch: int = PREFETCH) -> int:
    """Untimed batches before the timed ones: at least the ``workers * prefetch`` batches the workers make
    before the first is asked for, plus one, so that the timed batches (or steps) are the loader's steady state
    and not the prefetched buffer draining (which would show a near-zero wait, then one long stall)."""
    return max(warmup, workers * prefetch + 1)


def target_times(duration: float, rate: float = RATE_HZ) -> np.ndarray:
    return np.arange(max(1, int(duration * rate))) / rate


class EpisodeDataset:
    """Episodes of a :mod:`dataset` file; ``resample=True``: each item resampled in the worker (baseline)."""

    def __init__(self, path: str, *, resample: bool, rgb: bool = False, rate_hz: float = RATE_HZ) -> None:
        info = ds.describe(path)
        if rgb and not info["rgb"]:
            raise ValueError(f"{path} has no RGB frames (generate it with --rgb)")
        self.path, self.resample, self.rgb, self.rate = str(path), resample, rgb, rate_hz
        self.n = info["episodes"]
        self._f = None
        self._pid = None

    def __len__(self) -> int:
        return self.n

    def _file(self):
        import h5py

        if self._f is None or self._pid != os.getpid():  # one handle per worker process, opened after fork
            self._f = h5py.File(self.path, "r")
            self._pid = os.getpid()
        return self._f

    def __getitem__(self, i: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        g = self._file()["episodes"][f"ep_{int(i):06d}"]
        dur = float(g.attrs["duration_s"])
        streams = {name: (g[name]["t"][()], g[name]["x"][()]) for name in FUSED}
        raw = g["rgb"]["frames"][()] if self.rgb else None
        t1 = time.perf_counter()
        frames = np.stack([ds.decode_frame(b) for b in raw]) if raw is not None else None
        t2 = time.perf_counter()
        tgt = target_times(dur, self.rate)
        item = {"index": int(i), "T": tgt.shape[0], "rgb": frames}
        if self.resample:
            t2 = time.perf_counter()
            item["fused"] = np.concatenate(
                [reference.resample(x[None], t[None], tgt[None], out_dtype=np.float32)[0] for t, x in streams.values()],
                axis=1)
            t3 = time.perf_counter()
        else:  # read and pad only: the resampling happens on the whole batch, after the copy
            item["streams"] = streams
            item["tgt"] = tgt
            t3 = t2
        item["timing"] = (t1 - t0, t2 - t1, t3 - t2)
        item["bytes"] = sum(t.nbytes + x.nbytes for t, x in streams.values()) + (
            sum(b.nbytes for b in raw) if raw is not None else 0)
        return item


def _pad_edge(a: np.ndarray, n: int) -> np.ndarray:
    """``a`` along axis 0 to length ``n``, repeating its last row (invisible to numpy.interp's clamping)."""
    if a.shape[0] == n:
        return a
    return np.concatenate([a, np.repeat(a[-1:], n - a.shape[0], axis=0)], axis=0)


def _common(items: list[dict[str, Any]]) -> dict[str, Any]:
    import torch

    tmax = max(it["T"] for it in items)
    mask = np.zeros((len(items), tmax), dtype=bool)
    for b, it in enumerate(items):
        mask[b, :it["T"]] = True
    out = {"index": torch.tensor([it["index"] for it in items]), "mask": torch.from_numpy(mask)}
    if items[0]["rgb"] is not None:
        fmax = max(it["rgb"].shape[0] for it in items)
        rgb = np.zeros((len(items), fmax, *ds.RGB_SHAPE), dtype=np.uint8)
        for b, it in enumerate(items):
            rgb[b, :it["rgb"].shape[0]] = it["rgb"]
        out["rgb"] = torch.from_numpy(rgb)
    return out


def collate_resampled(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Baseline: the fused rows zero-padded to the batch's longest episode."""
    import torch

    t0 = time.perf_counter()
    out = _common(items)
    tmax = out["mask"].shape[1]
    fused = np.zeros((len(items), tmax, FUSED_DIM), dtype=np.float32)
    for b, it in enumerate(items):
        fused[b, :it["T"]] = it["fused"]
    out["fused"] = torch.from_numpy(fused)
    return _timed(out, items, t0)


def collate_raw(items: list[dict[str, Any]]) -> dict[str, Any]:
    """robocache: each stream (times float64, values float32) and the targets edge-padded to the batch's longest."""
    import torch

    t0 = time.perf_counter()
    out = _common(items)
    tmax = out["mask"].shape[1]
    out["tgt"] = torch.from_numpy(np.stack([_pad_edge(it["tgt"], tmax) for it in items]))
    for name in FUSED:
        smax = max(it["streams"][name][0].shape[0] for it in items)
        out[f"{name}_t"] = torch.from_numpy(np.stack([_pad_edge(it["streams"][name][0], smax) for it in items]))
        out[f"{name}_x"] = torch.from_numpy(np.stack([_pad_edge(it["streams"][name][1], smax) for it in items]))
    return _timed(out, items, t0)


def _timed(out: dict[str, Any], items: list[dict[str, Any]], t0: float) -> dict[str, Any]:
    import torch

    split = np.sum([it["timing"] for it in items], axis=0)
    out["timing_s"] = torch.tensor([*split, time.perf_counter() - t0], dtype=torch.float64)
    out["bytes"] = sum(it["bytes"] for it in items)
    return out


@dataclass
class Pipeline:
    """One pipeline: its loader and the main-process step that makes a batch ready on the device."""

    provider: str
    loader: Any
    device: str
    cache: Any = None  # the EpisodeCache (provider episode_cache)
    batch_bytes: float = 0.0  # episode_cache: the mean payload of a batch's episodes (its workers' "bytes")

    @property
    def resample_on(self) -> str:
        if self.provider == "cpu_workers":
            return "cpu_workers"
        return "gpu" if self.device == "gpu" else "numpy_fallback"

    def finish(self, batch: Any) -> tuple[dict[str, Any], float, float]:
        """(ready batch on the device: ``x`` [B, T, 283] float32 zero past each end, ``mask``, ``rgb``;
        transfer seconds; resample seconds). Each part ends with a device synchronize."""
        import torch

        from .common import sync, torch_device

        if self.provider == CACHE:  # launched by next_batch already: here the kernel's remaining time
            t0 = time.perf_counter()
            if self.device == "gpu":
                # the batch's stream only (its kernel waited for its chunks' copies): a streamed cache's copies
                # of the next chunks run on its side stream while the step computes, as in a training loop
                torch.cuda.current_stream().synchronize()
            return {"x": batch.x, "mask": batch.mask, "rgb": None}, 0.0, time.perf_counter() - t0
        dev = torch_device(self.device)
        nb = self.device == "gpu"
        t0 = time.perf_counter()
        moved = {k: (v.to(dev, non_blocking=nb) if isinstance(v, torch.Tensor) else v) for k, v in batch.items()
                 if k not in ("timing_s", "index", "bytes")}
        sync(self.device)
        t1 = time.perf_counter()
        if self.provider == "cpu_workers":  # resampled in the workers already
            return {"x": moved["fused"], "mask": moved["mask"], "rgb": moved.get("rgb")}, t1 - t0, 0.0
        else:
            import robocache

            x = robocache.fuse([(moved[f"{n}_x"], moved[f"{n}_t"]) for n in FUSED], moved["tgt"])
            x = x * moved["mask"].unsqueeze(-1).to(x.dtype)
            sync(self.device)
        t2 = time.perf_counter()
        return {"x": x, "mask": moved["mask"], "rgb": moved.get("rgb")}, t1 - t0, t2 - t1


class CacheLoader:
    """An EpisodeCache as the pipelines' loader: batches without end (across epochs), as a DataLoader over a
    sampler list of the right length gives them."""

    def __init__(self, cache: Any) -> None:
        self.cache = cache

    def __iter__(self):
        while True:
            yield self.cache.next_batch()


def build_cache(path: str, *, batch: int, device: str, seed: int, regime: str = "resident",
                budget_mb: float | None = None, depth: int = 1, subset: list[int] | None = None,
                order: list[int] | None = None, log=None) -> Any:
    """The pipelines' EpisodeCache of a dataset file: the four fused streams, 50 Hz targets, whole episodes,
    PyTorch tensors. ``regime`` streamed: within ``budget_mb`` (default: half the cache, a dataset 2x the
    budget), ``depth`` chunks prefetched beyond the next batch's."""
    import robocache

    if regime not in REGIMES:
        raise ValueError(f"unknown cache regime {regime!r}; expected one of {', '.join(REGIMES)}")
    budget = None
    if regime == "streamed":
        budget = int(budget_mb * 1e6) if budget_mb else int(streamed_budget_mb(path) * 1e6)
    cache = robocache.EpisodeCache.from_hdf5(path, batch_size=batch, streams=FUSED, rate_hz=RATE_HZ, seed=seed,
                                             device="cuda" if device == "gpu" else "cpu", kind="torch",
                                             memory_budget=budget, prefetch_depth=depth, subset=subset, order=order,
                                             log=log or (lambda s: None))
    if cache.mode != regime:
        cache.close()
        raise ValueError(f"the {regime} regime asked for, but the cache is {cache.mode} ({budget} bytes budget)")
    return cache


def streamed_budget_mb(path: str) -> float:
    """The streamed regime's default budget: half the cached streams' payload (a dataset 2x the memory budget)."""
    return cached_payload_bytes(path) / 2e6


def cached_payload_bytes(path: str) -> int:
    """The payload of the streams the cache holds (times and values of the fused streams, no RGB), from the
    file's shapes (nothing read)."""
    import h5py

    total = 0
    with h5py.File(path, "r") as f:
        for g in f["episodes"].values():
            for name in FUSED:
                total += g[name]["t"].nbytes + g[name]["x"].nbytes
    return int(total)


def make_pipeline(provider: str, path: str, *, batch: int, workers: int, device: str, indices: list[int] | None,
                  rgb: bool = False, prefetch: int = PREFETCH, cache: Any = None) -> Pipeline:
    """The loader of ``provider`` over ``indices`` (the sampler: the same list for every pipeline). For
    ``episode_cache``: ``cache`` (resident: reset to ``indices`` as its explicit order; streamed: reset to its own
    order, which ``indices`` must be taken from) or, without one, a resident cache of the episodes in
    ``indices`` (DDP: each rank's shard)."""
    import torch

    if provider not in ALL_LOADERS:
        raise ValueError(f"unknown data-loading provider {provider!r}; expected one of {', '.join(ALL_LOADERS)}")
    if batch < 1 or workers < 0:
        raise ValueError(f"need batch >= 1 and workers >= 0, got {batch} and {workers}")
    if provider == CACHE:
        if rgb:
            raise ValueError("EpisodeCache holds the numeric streams; RGB frames are not cached")
        if cache is None:
            if indices is None:
                raise ValueError("episode_cache needs a cache or an index list")
            cache = build_cache(path, batch=batch, device=device, seed=0, subset=sorted(set(indices)),
                                order=list(indices))
        elif cache.mode == "resident" and indices is not None:
            cache.reset(order=indices)
        else:
            cache.reset()
        sizes = dict(zip(cache.episodes.tolist(), cache.episode_nbytes.tolist()))
        seen = indices if indices is not None else cache.peek_episodes(max(1, len(cache))).ravel().tolist()
        per_ep = float(np.mean([sizes[int(i)] for i in seen])) if len(seen) else 0.0
        return Pipeline(provider, CacheLoader(cache), device, cache=cache, batch_bytes=per_ep * batch)
    base = provider == "cpu_workers"
    data = EpisodeDataset(path, resample=base, rgb=rgb)
    kw: dict[str, Any] = {"batch_size": batch, "sampler": indices, "num_workers": workers,
                          "collate_fn": collate_resampled if base else collate_raw,
                          "pin_memory": device == "gpu", "drop_last": True}
    if workers > 0:
        kw.update(prefetch_factor=prefetch, persistent_workers=True)
    return Pipeline(provider, torch.utils.data.DataLoader(data, **kw), device)


def sample_indices(n_episodes: int, count: int, seed: int) -> list[int]:
    """The seeded episode order both pipelines read (with replacement, so any count fits any dataset)."""
    return np.random.default_rng([seed, 18]).integers(0, n_episodes, count).tolist()


def gate(path: str, *, batch: int, workers: int, device: str, seed: int, rgb: bool = False,
         batches: int = 2, provider: str = "robocache", cache: Any = None) -> dict[str, Any]:
    """``provider``'s first ``batches`` batches against the CPU workers' on the same episodes: schema ``Check``
    plus ``why`` when they differ. ``episode_cache``: ``cache`` (a streamed one gives the episode order)."""
    from .. import gate as gate_mod
    from ..worker import to_host

    if provider == CACHE and cache is not None and cache.mode == "streamed":
        cache.reset()
        idx = cache.peek_episodes(batches).ravel().tolist()
    else:
        idx = sample_indices(describe_episodes(path), batch * batches, seed)
    got: dict[str, list] = {}
    for prov in ("cpu_workers", provider):
        p = make_pipeline(prov, path, batch=batch, workers=min(workers, batches), device=device, indices=idx, rgb=rgb,
                          cache=cache)
        got[prov] = [p.finish(b)[0] for b in (islice(p.loader, batches) if prov == CACHE else p.loader)]
    name = "EpisodeCache" if provider == CACHE else "robocache"
    worst = None
    for a, b in zip(got["cpu_workers"], got[provider]):
        if not np.array_equal(to_host(a["mask"]), to_host(b["mask"])):
            return {"passed": False, "max_abs_err": None, "max_rel_err": None, "tolerance": 0.0, "bad_fraction": 1.0,
                    "why": "the masks differ (not the same episodes in the same order)"}
        if (a["rgb"] is None) != (b["rgb"] is None) or (
                a["rgb"] is not None and not np.array_equal(to_host(a["rgb"]), to_host(b["rgb"]))):
            return {"passed": False, "max_abs_err": None, "max_rel_err": None, "tolerance": 0.0, "bad_fraction": 1.0,
                    "why": "the RGB frames differ"}
        chk = gate_mod.check(to_host(b["x"]), to_host(a["x"]), "float32")
        if worst is None or not chk["passed"] or (chk["max_rel_err"] or 0) > (worst["max_rel_err"] or 0):
            worst = chk
        if not chk["passed"]:
            break
    if worst is None:
        return {"passed": False, "max_abs_err": None, "max_rel_err": None, "tolerance": 0.0, "bad_fraction": 1.0,
                "why": "no batch came out of the loaders"}
    if not worst["passed"]:
        worst["why"] = (f"{name}'s batch differs from the CPU workers' batch: max rel err {worst['max_rel_err']}, "
                        f"{100 * worst['bad_fraction']:.3g}% of elements beyond {worst['tolerance']}")
    return worst


def describe_episodes(path: str) -> int:
    return ds.describe(path)["episodes"]


def time_pipeline(p: Pipeline, *, warmup: int, batches: int, util=None) -> dict[str, Any]:
    """Iterate ``warmup + batches`` batches; per timed batch: wall time (next batch ready on the device, from
    the end of the previous one), the main process's wait, transfer and resample, the workers' split.
    ``episode_cache``: wait = the host's part of ``next_batch`` (chunk bookkeeping, the launch), resample = the
    kernel's remaining time (to the synchronize)."""
    it = iter(p.loader)
    per, wait, transfer, resample, split, nbytes = [], [], [], [], [], []
    t_warm = time.perf_counter()
    for _ in range(warmup):
        p.finish(next(it))
    warm_s = time.perf_counter() - t_warm
    ctx = util if util is not None else _Null()
    with ctx:
        for _ in range(batches):
            a = time.perf_counter()
            b = next(it)
            w = time.perf_counter()
            _, tr, rs = p.finish(b)
            e = time.perf_counter()
            per.append(e - a)
            wait.append(w - a)
            transfer.append(tr)
            resample.append(rs)
            if p.provider == CACHE:  # no worker: nothing read, decoded or collated per batch
                split.append(np.zeros(len(SPLIT)))
                nbytes.append(p.batch_bytes)
            else:
                split.append(b["timing_s"].numpy())
                nbytes.append(b["bytes"])
    del it
    return {"per_s": per, "wait_s": wait, "transfer_s": transfer, "resample_s": resample,
            "split_s": np.mean(split, axis=0) if split else np.zeros(len(SPLIT)), "bytes": float(np.mean(nbytes)),
            "warmup_s": warm_s}


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False
