"""The ``pipelines`` suite: its grid (:func:`points`), the sweep (:func:`run`) and its records.

Order: the dataset (given, or generated into a temporary folder and removed at the end), then per batch size
the data-loading equality gate and both DataLoader pipelines at every worker count, then the EpisodeCache in
each regime (resident; streamed within a budget), then the training step of each model at each training batch
size from every loader (the loss-curve gate against the CPU workers on the same episodes, then a short
``torch.profiler`` profile of each), then inference at each batch size for each backend (eager first: the others
are checked against it). A cache is built once per batch size and regime and serves its data-loading and
training cases (its build time and memory are in each of their records). Every case
is one record in the one schema (``robocache.bench.schema``), written to
``<out>/<arch or cpu>-<machine>/<run id>-pipelines.records.json`` (rewritten after every case, atomically);
traces go to ``traces/`` beside it. A failure is the case's status (``incorrect``, ``error``, ``oom``);
the sweep goes on.
"""
from __future__ import annotations

import shutil
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import specs
from ..messages import Task
from ..schema import Record
from . import common, dataset, inference, loading, training
from .common import p_resample_on

# The suite's knobs and grid are declared in the one case list (robocache.bench.specs); the names its callers use:
Config = specs.PipelineConfig
points = specs.pipeline_points


def _case(pt: dict[str, Any], items: int, nbytes: int = 0) -> dict[str, Any]:
    return common.case(pt["kind"], pt["tag"], pt["provider"], pt["params"], items, specs.PIPELINE_UNITS[pt["kind"]],
                       pt["reason"], nbytes)


def _failed(ctx: Task, pt, e: BaseException, t0: float) -> Record:
    from ..worker import classify as _classify

    tb = traceback.format_exc(limit=6).strip().splitlines()
    return common.record(ctx, _case(pt, pt["params"]["B"]), status=_classify(e),
                         reason=f"{type(e).__name__}: {str(e)[:800]}\n" + "\n".join(tb[-6:]),
                         duration_s=time.perf_counter() - t0)


def _clock_sampler(device: str):
    from .. import env as envmod

    return envmod.clock_sampler(device == "gpu")


def _ms(xs: list[float]) -> dict[str, float]:
    return {"p50": 1e3 * common.quantile(xs, 0.5), "p90": 1e3 * common.quantile(xs, 0.9),
            "p99": 1e3 * common.quantile(xs, 0.99)}


@dataclass
class Result:
    run_id: str
    path: Path | None
    records: list[Record]
    wall_s: float
    folder: Path | None = None  # where the run's files are: the run file and a DDP launch's per-rank-count files

    @property
    def failed(self) -> list[Record]:
        from ..schema import FAILED_STATUSES

        return [r for r in self.records if r.status in FAILED_STATUSES]


def run(cfg: Config, out_dir: str | Path = "results", *, machine: str | None = None, frontend: str = "cli",
        log=None) -> Result:
    """Run the suite; returns the records and the path of the run file."""
    from .. import context

    cfg.validate()
    say = log or (lambda s: None)
    t_run = time.perf_counter()
    # the run's context: its id, git state and environment, the results folder rule (<out>/<arch or
    # cpu>-<machine>), the run file; what a DDP launch sends its ranks
    run_ctx = context.RunContext.start(suite=common.SUITE, device=cfg.device, frontend=frontend, out_dir=out_dir,
                                       machine=machine)
    run_id = run_ctx.run_id
    ctx = run_ctx.task(seed=cfg.seed)  # what every record of the run takes from the run
    folder = run_ctx.folder
    tmp = None
    records: list[Record] = []
    ddp_records: list[Record] = []
    path: Path | None = None

    def emit(rec: Record) -> None:
        nonlocal path
        records.append(rec)
        path = run_ctx.write(records)
        p50 = rec.metrics.time_us.p50 if rec.metrics is not None else None
        say(f"  {rec.case.id} {rec.case.provider}: {rec.status}"
            + (f", p50 {p50 / 1e3:.2f} ms" if p50 else "") + (f" ({rec.reason.splitlines()[0][:120]})"
                                                               if rec.status != "ok" and rec.reason else ""))

    try:
        path_ds = cfg.dataset
        if path_ds is None and ("dataload" in cfg.parts or "train" in cfg.parts or cfg.ddp_ranks):
            tmp = tempfile.mkdtemp(prefix="robocache-pipelines-")
            path_ds = str(Path(tmp) / "robot.h5")
            t0 = time.perf_counter()
            out = dataset.generate(path_ds, dataset.Spec(cfg.size_mb, cfg.seed, cfg.min_s, cfg.max_s, cfg.rgb))
            say(f"dataset: {out['episodes']} episodes, {out['payload_bytes'] / 1e6:.0f} MB in "
                f"{time.perf_counter() - t0:.1f} s")
        info = dataset.describe(path_ds) if path_ds else {"episodes": 0, "seed": cfg.seed, "rgb": False,
                                                          "payload_bytes": 0}
        if path_ds and cfg.cache_regimes:
            info["cached_bytes"] = loading.cached_payload_bytes(path_ds)
        pts = points(cfg, info)
        caches = _Caches(cfg, path_ds, say)
        try:
            if "dataload" in cfg.parts:
                _dataload(cfg, ctx, path_ds, [p for p in pts if p["kind"] == "dataload"], emit, say, caches)
            if "train" in cfg.parts:
                _train(cfg, ctx, path_ds, [p for p in pts if p["kind"] == "train"], emit, say, folder, run_id,
                       caches)
        finally:
            caches.close()
        if cfg.ddp_ranks:
            from . import ddp

            tr = [p for p in points(Config(**{**cfg.__dict__, "parts": ("train",)}), info)]
            # the launches write their own files (<run id>-pipelines-ddp-g<k>): kept apart from ``records``, which
            # ``emit`` rewrites into the run file, so a part after them (infer) never copies them there too
            for rec in ddp.run_ddp(cfg, run_ctx, path_ds, info, tr, log=say):
                ddp_records.append(rec)
                say(f"  {rec.case.id} {rec.case.provider}: {rec.status}")
        if "infer" in cfg.parts:
            _infer(cfg, ctx, [p for p in pts if p["kind"] == "infer"], emit, say)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return Result(run_id, path, records + ddp_records, time.perf_counter() - t_run, Path(folder))


def _resample_note(device: str, provider: str) -> list[str]:
    if provider == "robocache" and device != "gpu":
        return ["no GPU: robocache.fuse ran its NumPy fallback in the main process (not a GPU figure)"]
    if provider == loading.CACHE and device != "gpu":
        return ["no GPU: the EpisodeCache ran its NumPy path in the main process (not a GPU figure)"]
    return []


class _Caches:
    """The run's EpisodeCaches, one per (batch size, regime), built on first use (a failed build is kept and
    raised again for the cases that need it), closed at the end of the run."""

    def __init__(self, cfg: Config, path: str | None, say) -> None:
        self.cfg, self.path, self.say = cfg, path, say
        self.built: dict[tuple[int, str], Any] = {}

    def get(self, b: int, regime: str) -> Any:
        key = (b, regime)
        if key not in self.built:
            try:
                self.built[key] = loading.build_cache(self.path, batch=b, device=self.cfg.device, seed=self.cfg.seed,
                                                      regime=regime, budget_mb=self.cfg.cache_budget_mb,
                                                      depth=self.cfg.prefetch_depth, log=self.say)
            except Exception as e:  # noqa: BLE001 - every case of this cache gets the error
                self.built[key] = e
        got = self.built[key]
        if isinstance(got, Exception):
            raise got
        return got

    def close(self) -> None:
        for c in self.built.values():
            if not isinstance(c, Exception):
                c.close()
        self.built.clear()


def _cache_figures(cache: Any, copies0: int) -> dict[str, float | None]:
    """What the cache costs: device memory, pinned host memory, build time; streamed: its ring and copies."""
    f: dict[str, float | None] = {"cache_mb": cache.device_bytes / 1e6, "cache_build_s": cache.build_s}
    if cache.mode == "streamed":
        f.update(cache_host_mb=cache.host_bytes / 1e6, prefetch_depth=float(cache.prefetch_depth),
                 chunks=float(cache.chunks), slots=float(cache.slots),
                 chunk_copies=float(cache.chunk_copies - copies0))
    return f


def _cache_notes(cache: Any) -> list[str]:
    return [cache.summary, "no worker and no per-batch copy: wait = the host's part of next_batch (the chunk "
                           "bookkeeping and one launch), resampling = the kernel until its stream's synchronize "
                           "(streamed: with the wait for this batch's chunks; the next chunks copy on a side stream)"]


def _rgb_skip(ctx: Task, pt, t0: float) -> Record:
    return common.record(ctx, _case(pt, pt["params"]["B"]), status="skipped",
                         reason="EpisodeCache holds the numeric streams; this dataset's RGB frames are not cached "
                                "(run without --rgb for the cache's cases)", duration_s=time.perf_counter() - t0)


def _dataload_cache(cfg, ctx, path, pt, emit, caches: _Caches, gates: dict, base: dict) -> None:
    b, regime = pt["params"]["B"], pt["params"]["regime"]
    t0 = time.perf_counter()
    if cfg.rgb:
        emit(_rgb_skip(ctx, pt, t0))
        return
    cache = caches.get(b, regime)
    if (b, regime) not in gates:
        gates[(b, regime)] = loading.gate(path, batch=b, workers=min(cfg.workers), device=cfg.device, seed=cfg.seed,
                                          provider=loading.CACHE, cache=cache)
    chk = dict(gates[(b, regime)])
    why = chk.pop("why", None)
    if why:
        emit(common.record(ctx, _case(pt, b), status="incorrect", reason=why, check=chk,
                           duration_s=time.perf_counter() - t0))
        return
    n = cfg.load_warmup + cfg.load_batches
    idx = loading.sample_indices(loading.describe_episodes(path), n * b, cfg.seed) if regime == "resident" else None
    copies0 = cache.chunk_copies
    p = loading.make_pipeline(loading.CACHE, path, batch=b, workers=0, device=cfg.device, indices=idx, cache=cache)
    util = common.UtilSampler(cfg.device)
    with _clock_sampler(cfg.device) as cs:
        r = loading.time_pipeline(p, warmup=cfg.load_warmup, batches=cfg.load_batches, util=util)
    total = sum(r["per_s"])
    tps = b * len(r["per_s"]) / total if total > 0 else 0.0
    ms = _ms(r["per_s"])
    mean = lambda xs: 1e3 * sum(xs) / len(xs)  # noqa: E731
    split = {**{k: 0.0 for k in loading.SPLIT}, "resampling": mean(r["resample_s"]), "wait": mean(r["wait_s"]),
             "transfer": 0.0}
    best = max((v for (bb, _), v in base.items() if bb == b), default=None)
    pipe = {"kind": "dataload", "resample_on": p_resample_on(loading.CACHE, cfg.device),
            "figures": {"traj_per_s": tps, "ms_p50": ms["p50"], "ms_p90": ms["p90"],
                        "speedup_vs_baseline": tps / best if best else None, "gpu_util_pct": util.mean_pct,
                        **_cache_figures(cache, copies0)},
            "split_ms": split, "gpu_util_pct": util.mean_pct, "gpu_util": util.status,
            "notes": _resample_note(cfg.device, loading.CACHE) + _cache_notes(cache) + [
                "speedup: over the CPU workers' best trajectories/s at this batch size (any worker count)"]}
    t = common.timing([x * 1e6 for x in r["per_s"]], r["warmup_s"])
    emit(common.record(ctx, _case(pt, b, int(r["bytes"])), t=t, items=b, check=chk, pipeline=pipe,
                       clocks=cs.stats(), duration_s=time.perf_counter() - t0))


def _dataload(cfg, ctx, path, pts, emit, say, caches: _Caches) -> None:
    by_b: dict[int, dict[str, Any]] = {}
    base: dict[tuple[int, int], float] = {}
    cache_gates: dict[tuple[int, str], dict[str, Any]] = {}
    for pt in pts:
        b, w, prov = pt["params"]["B"], pt["params"]["workers"], pt["provider"]
        t0 = time.perf_counter()
        if prov == loading.CACHE:
            try:
                _dataload_cache(cfg, ctx, path, pt, emit, caches, cache_gates, base)
            except BaseException as e:  # noqa: BLE001 - a case's failure is its status
                if isinstance(e, KeyboardInterrupt):
                    raise
                emit(_failed(ctx, pt, e, t0))
            continue
        try:
            if b not in by_b:
                say(f"dataload B={b}: equality gate (both pipelines' first batches)")
                by_b[b] = loading.gate(path, batch=b, workers=min(cfg.workers), device=cfg.device, seed=cfg.seed,
                                       rgb=cfg.rgb)
            chk = dict(by_b[b])
            why = chk.pop("why", None)
            if why and prov == "robocache":
                emit(common.record(ctx, _case(pt, b), status="incorrect", reason=why, check=chk,
                                   duration_s=time.perf_counter() - t0))
                continue
            warm = loading.steady_warmup(w, cfg.load_warmup)
            n = warm + cfg.load_batches
            idx = loading.sample_indices(loading.describe_episodes(path), n * b, cfg.seed)
            p = loading.make_pipeline(prov, path, batch=b, workers=w, device=cfg.device, indices=idx, rgb=cfg.rgb)
            util = common.UtilSampler(cfg.device)
            with _clock_sampler(cfg.device) as cs:
                r = loading.time_pipeline(p, warmup=warm, batches=cfg.load_batches, util=util)
            del p
            total = sum(r["per_s"])
            tps = b * len(r["per_s"]) / total if total > 0 else 0.0
            if prov == "cpu_workers":
                base[(b, w)] = tps
            ms = _ms(r["per_s"])
            split = dict(zip(loading.SPLIT, (1e3 * x for x in r["split_s"])))
            mean = lambda xs: 1e3 * sum(xs) / len(xs)  # noqa: E731
            split.update(wait=mean(r["wait_s"]), transfer=mean(r["transfer_s"]))
            if prov == "robocache":
                split["resampling"] = mean(r["resample_s"])  # the main process's fuse call, not the workers'
            speed = tps / base[(b, w)] if prov == "robocache" and base.get((b, w)) else None
            pipe = {"kind": "dataload", "resample_on": p_resample_on(prov, cfg.device),
                    "figures": {"traj_per_s": tps, "ms_p50": ms["p50"], "ms_p90": ms["p90"],
                                "speedup_vs_baseline": speed, "gpu_util_pct": util.mean_pct},
                    "split_ms": split, "gpu_util_pct": util.mean_pct, "gpu_util": util.status,
                    "notes": _resample_note(cfg.device, prov) + [
                        "split: read/decode/collate (and resample for cpu_workers) are worker CPU time per batch, "
                        "summed over its items (workers run in parallel); wait, transfer (and resample for "
                        "robocache) are the main process's"]}
            t = common.timing([x * 1e6 for x in r["per_s"]], r["warmup_s"])
            emit(common.record(ctx, _case(pt, b, int(r["bytes"])), t=t, items=b, check=chk, pipeline=pipe,
                               clocks=cs.stats(), duration_s=time.perf_counter() - t0))
        except BaseException as e:  # noqa: BLE001 - a case's failure is its status
            if isinstance(e, KeyboardInterrupt):
                raise
            emit(_failed(ctx, pt, e, t0))


def _train(cfg, ctx, path, pts, emit, say, folder: Path, run_id: str, caches: _Caches | None = None) -> None:
    results: dict[tuple[str, int, str, str], dict[str, Any]] = {}  # (model, B, regime, provider) -> its training
    for pt in pts:
        t0 = time.perf_counter()
        try:
            if pt["params"].get("regime") is not None and cfg.rgb:
                emit(_rgb_skip(ctx, pt, t0))
                continue
            emit(_train_case(cfg, ctx, path, pt, say, folder, run_id, caches, results, t0))
        except BaseException as e:  # noqa: BLE001
            if isinstance(e, KeyboardInterrupt):
                raise
            emit(_failed(ctx, pt, e, t0))


def _train_case(cfg, ctx, path, pt, say, folder: Path, run_id: str, caches: _Caches | None,
                results: dict[tuple[str, int, str, str], dict[str, Any]], t0: float) -> Record:
    """One training case: its pipeline trained (and profiled), its loss curve checked against the cpu_workers
    pipeline's (``results``: the cases trained before it), its record."""
    m, prov, b, w = pt["params"]["model"], pt["provider"], pt["params"]["B"], pt["params"]["workers"]
    regime = pt["params"].get("regime")
    key = (m, b, regime or "resident")
    warm = loading.steady_warmup(w, cfg.train_warmup)
    n = warm + cfg.train_steps + cfg.profile_steps
    cache, copies0 = None, 0
    if regime is not None:
        cache = (caches or _Caches(cfg, path, say)).get(b, regime)
        copies0 = cache.chunk_copies
    if regime == "streamed":  # the cache's own order (chunk by chunk), the CPU workers' reference on it
        cache.reset()
        idx = cache.peek_episodes(n).ravel().tolist()
    else:
        idx = loading.sample_indices(loading.describe_episodes(path), n * b, cfg.seed + 1)
    p = loading.make_pipeline(prov, path, batch=b, workers=w, device=cfg.device, indices=idx, rgb=cfg.rgb,
                              cache=cache if prov == loading.CACHE else None)
    reference = prov == "cpu_workers"
    profile = cfg.profile_steps if not (reference and regime == "streamed") else 0
    trace_rel = None
    if profile > 0:
        trace_rel = f"traces/{run_id}-train-{m}-B{b}{'-' + regime if regime else ''}-{prov}.json.gz"
        (folder / "traces").mkdir(parents=True, exist_ok=True)
    util = common.UtilSampler(cfg.device)
    with _clock_sampler(cfg.device) as cs:
        r = training.train(p, m, steps=cfg.train_steps, warmup=warm, seed=cfg.seed, util=util,
                           profile_steps=profile, trace_path=str(folder / trace_rel) if trace_rel else None)
    del p
    results[(*key, prov)] = r
    base = None if reference else results.get((*key, "cpu_workers"))
    chk = training.curves_agree(base["loss"], r["loss"]) if base else None
    cached = prov == loading.CACHE  # the episode cache's own figures and notes
    pipe = _train_pipeline(cfg, prov, b, r, base, util, _cache_figures(cache, copies0) if cached else {},
                           (_cache_notes(cache) if cached else []) + [_train_check_note(reference, regime)],
                           trace_rel if trace_rel and (folder / trace_rel).exists() else None, profile)
    t = common.timing([x * 1e6 for x in r["per_s"]], r["warmup_s"])
    return _gated(ctx, pt, b, chk, reference,
                  "no cpu_workers baseline of this model to check the loss curve against (its case failed; "
                  "see its record)", "loss curve differs from the cpu_workers pipeline's: max rel diff",
                  t=t, pipeline=pipe, clocks=cs.stats(), t0=t0)


def _train_check_note(reference: bool, regime: str | None) -> str:
    """What a training case's loss curve was checked against."""
    if not reference:
        return "loss curve vs the cpu_workers pipeline's, same seed and episodes"
    # the baseline is the reference: nothing to compare it with
    return ("baseline: the reference loss curve (not checked: the others are checked against it)"
            + ("; the CPU workers read the streamed cache's episode order" if regime == "streamed" else ""))


def _train_pipeline(cfg, prov: str, b: int, r: dict[str, Any], base: dict[str, Any] | None, util,
                    more_figures: dict[str, Any], notes: list[str], trace_file: str | None,
                    profile: int) -> dict[str, Any]:
    """A training case's ``pipeline`` block: its figures (speed-up over ``base``, the cpu_workers training; None for
    the reference; then ``more_figures``), the step's split, loss curve, kernel table and notes (after the
    resampling note, ``notes``, then how the step splits and what was profiled)."""
    total = sum(r["per_s"])
    mean = lambda xs: 1e3 * sum(xs) / len(xs)  # noqa: E731
    share = sum(r["data_s"]) / total if total > 0 else None
    split = {"data_wait": mean([d - tr - rs for d, tr, rs in zip(r["data_s"], r["transfer_s"], r["resample_s"])]),
             "transfer": mean(r["transfer_s"]), "resampling": mean(r["resample_s"]),
             "compute": mean(r["compute_s"])}
    sps = len(r["per_s"]) / total if total > 0 else 0.0
    speed = None
    if base and sum(base["per_s"]) > 0:
        speed = sps / (len(base["per_s"]) / sum(base["per_s"]))
    return {"kind": "train", "resample_on": p_resample_on(prov, cfg.device),
            "figures": {"steps_per_s": sps, "traj_per_s": sps * b, "data_wait_share": share,
                        "ms_p50": 1e3 * common.quantile(r["per_s"], 0.5), "speedup_vs_baseline": speed,
                        "final_loss": r["loss"][-1] if r["loss"] else None, "gpu_util_pct": util.mean_pct,
                        **more_figures},
            "split_ms": split, "gpu_util_pct": util.mean_pct, "gpu_util": util.status,
            "loss": r["loss"], "kernels": r["kernels"], "trace_file": trace_file,
            "notes": _resample_note(cfg.device, prov) + notes
            + ["data share = (wait + transfer + resample) / step; compute = forward, backward, "
                         "optimizer (loss.item() synchronizes)",
               (f"kernel table: {profile} profiled steps after the timed ones, "
                + ("GPU kernels by self device time" if cfg.device == "gpu" else
                   "CPU operators by self CPU time (no GPU)")) if profile else "not profiled"]}


def _gate(chk: dict[str, Any] | None, is_reference: bool, missing: str, differs: str) -> tuple[str, str | None]:
    """(status, reason) of a checked case: ``error`` when a case that must be checked has no check (never an
    unchecked "ok": the reference's case failed), ``incorrect`` when the check failed (``differs``, then the
    error and the tolerance), else ``ok``."""
    if not is_reference and chk is None:
        return "error", missing
    if chk is not None and not chk["passed"]:
        return "incorrect", f"{differs} {chk['max_rel_err']} > {chk['tolerance']}"
    return "ok", None


def _gated(ctx, pt, b: int, chk: dict[str, Any] | None, is_reference: bool, missing: str, differs: str, *, t,
           pipeline: dict[str, Any], clocks, t0: float) -> Record:
    """The record of a timed, checked case (train, infer), its status from :func:`_gate`."""
    status, reason = _gate(chk, is_reference, missing, differs)
    return common.record(ctx, _case(pt, b), status=status, reason=reason, t=t, items=b, check=chk,
                         pipeline=pipeline, clocks=clocks, duration_s=time.perf_counter() - t0)


def _infer(cfg, ctx, pts, emit, say) -> None:
    ref: dict[int, Any] = {}
    eager_p50: dict[int, float] = {}
    for pt in pts:
        b, be = pt["params"]["B"], pt["provider"]
        t0 = time.perf_counter()
        try:
            if b not in ref and be != "eager":
                ref[b] = inference.measure("eager", b, cfg.device, seed=cfg.seed, time_limit_s=0.0,
                                           min_calls=1)["out"]
            with _clock_sampler(cfg.device) as cs:
                r = inference.measure(be, b, cfg.device, seed=cfg.seed, time_limit_s=cfg.infer_time_s,
                                      reference=ref.get(b))
            if be == "eager":
                ref[b] = r["out"]
            lat = r["lat_s"]
            p50 = common.quantile(lat, 0.5)
            if be == "eager":
                eager_p50[b] = p50
            chk = r["check"]  # None for eager (the reference output) or when eager's output is missing
            pipe = {"kind": "infer", "figures": {
                        "latency_ms_p50": 1e3 * p50, "latency_ms_p99": 1e3 * common.quantile(lat, 0.99),
                        "peak_mem_mb": r["peak_mb"], "calls": float(len(lat)),
                        "speedup_vs_eager": eager_p50[b] / p50 if b in eager_p50 and p50 > 0 else None},
                    "notes": (["peak memory: not measured on a CPU run"] if cfg.device != "gpu" else [])
                    + ["output checked against eager's" if be != "eager" else "eager: the reference output"]}
            t = common.timing([x * 1e6 for x in lat], r["warmup_s"])
            emit(_gated(ctx, pt, b, chk, be == "eager", "no eager output of this batch to check the output against",
                        "output differs from eager's: max rel err", t=t, pipeline=pipe, clocks=cs.stats(), t0=t0))
        except BaseException as e:  # noqa: BLE001
            if isinstance(e, KeyboardInterrupt):
                raise
            emit(_failed(ctx, pt, e, t0))
