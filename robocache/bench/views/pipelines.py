"""The end-to-end pipelines' tables (suites ``pipelines`` and ``profile``: docs/pipelines.md): data loading
(the two DataLoader pipelines, and the EpisodeCache in each regime), training step, policy inference, the kernel
breakdown of a training step, Nsight Compute."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from .. import ops
from ..columns import Row
from ..schema import Record
from .multigpu import ddp, is_ddp
from .records import Item, flags, is_pipeline, machine, pipeline_kind
from .tables import code, esc, fmt_us, fmt_x, table

_PIPE_LABEL = {"cpu_workers": "CPU workers (NumPy)", "robocache": "robocache.fuse", "episode_cache": "EpisodeCache"}
CACHE = "episode_cache"


_RESAMPLE_ON = {"cpu_workers": "CPU workers", "gpu": "GPU", "numpy_fallback": "NumPy fallback (no GPU)"}


def _fig(r: Record | None, key: str) -> float | None:
    """The pipeline figure ``key`` of ``r`` (None where it has none)."""
    return r.pipeline.figures.get(key) if r is not None and r.pipeline is not None else None


def _f(x: float | None, fmt: str = "{:.3g}") -> str:
    return "-" if x is None else fmt.format(x)


def _tps(x: float | None) -> str:
    """A rate (trajectories or steps per second) to about four significant digits: whole above 1,000 (733,018,
    not 733,017.8), 344.6 steps/s (not 344.55)."""
    return "-" if x is None else f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def _pct_share(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _util(r: Record | None) -> str:
    if r is not None and r.pipeline is not None and r.pipeline.gpu_util_pct is not None:
        return f"{r.pipeline.gpu_util_pct:.0f}%"
    return "n/a" if r is not None else "-"


def _resample_on(r: Record | None) -> str:
    """Where the record's resampling ran, as the tables say it (``-`` unknown)."""
    return _RESAMPLE_ON.get(r.pipeline.resample_on if r is not None and r.pipeline is not None else None, "-")


def _max_rel_err(r: Record) -> str:
    """The correctness check's largest relative error, ``-`` without one."""
    err = r.check.max_rel_err if r.check is not None else None
    return "-" if err is None else f"{err:.1e}"


def _status(r: Record, width: int) -> str:
    """The status, and for a failure the first line of its reason (``width`` characters)."""
    return r.status + (f": {(r.reason or '').splitlines()[0][:width]}" if r.status != "ok" else "")


def _dataset_key(r: Record) -> tuple:
    p = r.case.params
    return (machine(r), p.get("B"), p.get("dataset_episodes"), p.get("dataset_seed"), p.get("rgb"))


def _regime(r: Record | None) -> str:
    """``resident`` or ``streamed (depth d)`` for a cache case; '' otherwise."""
    p = r.case.params if r is not None else {}
    if p.get("regime") == "streamed":
        return f"streamed, depth {p.get('prefetch_depth')}"
    return p.get("regime") or ""


def pipeline_label(r: Record) -> str:
    """The loader of a record as the tables name it: the pipeline, and for the cache's cases the regime (the CPU
    workers of a streamed case read the streamed cache's episode order)."""
    prov = r.case.provider
    label = _PIPE_LABEL.get(prov, prov)
    reg = _regime(r)
    if prov == CACHE and reg:
        return f"{label} ({reg})"
    if reg.startswith("streamed"):
        return f"{label}, the streamed cache's order"
    return label


def pipeline_dataload_rows(records: Iterable[Record]) -> list[dict[str, Any]]:
    """Per (machine, dataset tag, B, workers): both DataLoader pipelines' figures and the speedup (one run's
    records), with the resident EpisodeCache's trajectories/s at that batch size beside them."""
    records = list(records)
    pairs: dict[tuple, dict[str, Record]] = defaultdict(dict)
    cache: dict[tuple, Record] = {}
    for r in records:
        if pipeline_kind(r) != "dataload":
            continue
        if r.case.provider == CACHE:
            if r.case.params.get("regime") == "resident":
                cache[_dataset_key(r)] = r
        else:
            pairs[(machine(r), r.case.id)][r.case.provider] = r
    rows = []
    for (mach, cid), by in pairs.items():
        base, ours = by.get("cpu_workers"), by.get("robocache")
        any_r = base or ours
        if any_r is None:
            continue
        p = any_r.case.params
        tb, to = _fig(base, "traj_per_s"), _fig(ours, "traj_per_s")
        c = cache.get(_dataset_key(any_r))
        tc = _fig(c, "traj_per_s")
        rows.append({"machine": mach[0], "arch": mach[1], "case": cid, "B": p.get("B"), "workers": p.get("workers"),
                     "base_tps": tb, "ours_tps": to, "speedup": to / tb if tb and to else None,
                     "cache_tps": tc, "cache_speedup": tc / tb if tb and tc else None,
                     "base_p50": _fig(base, "ms_p50"), "base_p90": _fig(base, "ms_p90"),
                     "ours_p50": _fig(ours, "ms_p50"), "ours_p90": _fig(ours, "ms_p90"),
                     "base_util": _util(base), "ours_util": _util(ours),
                     "resample_on": _resample_on(ours),
                     "status": "/".join(x.status for x in (base, ours) if x), "flagged": any(flags(x) != "-" for x in (base, ours) if x)})
    return sorted(rows, key=lambda x: (x["machine"], x["B"] or 0, x["workers"] or 0, x["case"]))


def pipeline_dataload(records: Iterable[Record]) -> str:
    rows = pipeline_dataload_rows(records)
    if not rows:
        return "_No data-loading case in these records._"
    body = [[f"{r['arch']} ({r['machine']})", r["B"], r["workers"], _tps(r["base_tps"]),
             _tps(r["ours_tps"]), fmt_x(r["speedup"]) + (" (flagged)" if r["flagged"] else ""),
             _tps(r["cache_tps"]), fmt_x(r["cache_speedup"]),
             f"{_f(r['base_p50'], '{:.2f}')} / {_f(r['base_p90'], '{:.2f}')}",
             f"{_f(r['ours_p50'], '{:.2f}')} / {_f(r['ours_p90'], '{:.2f}')}", r["base_util"], r["ours_util"],
             r["resample_on"], r["status"]] for r in rows]
    return ("Trajectories per second through a DataLoader (same workers, batches, episodes; batches checked equal "
            "before timing); speedup = robocache / CPU workers; the resident EpisodeCache (no worker: the same "
            "figure on every worker row of a batch size) and its speedup over the CPU workers of the row; ms per "
            "batch p50 / p90 from the end of one batch to the next one ready on the device; GPU utilisation by NVML "
            "(n/a: unavailable).\n\n"
            + table(["machine", "batch", "workers", "CPU workers traj/s", "robocache traj/s", "speedup",
                     "EpisodeCache traj/s", "EpisodeCache speedup", "CPU workers ms p50 / p90",
                     "robocache ms p50 / p90", "GPU util (CPU workers)", "GPU util (robocache)",
                     "robocache resample on", "status"], body))


CACHE_HEADER = ["machine", "batch", "regime", "traj/s", "ms p50 / p90", "speedup vs CPU workers", "cache MB",
                "pinned host MB", "build s", "chunks / slots", "GPU util", "resample on", "status"]


def pipeline_cache_rows(records: Iterable[Record]) -> list[list[Any]]:
    """The EpisodeCache's data-loading rows (:data:`CACHE_HEADER`): per machine, batch size and regime."""
    recs = sorted((r for r in records if pipeline_kind(r) == "dataload" and r.case.provider == CACHE),
                  key=lambda r: (machine(r), r.case.params.get("B", 0), r.case.id))
    out = []
    for r in recs:
        chunks, slots = _fig(r, "chunks"), _fig(r, "slots")
        out.append([f"{machine(r)[1]} ({machine(r)[0]})", r.case.params.get("B"), _regime(r) or "-",
                    _tps(_fig(r, "traj_per_s")),
                    f"{_f(_fig(r, 'ms_p50'), '{:.3f}')} / {_f(_fig(r, 'ms_p90'), '{:.3f}')}",
                    fmt_x(_fig(r, "speedup_vs_baseline")), _f(_fig(r, "cache_mb"), "{:,.1f}"),
                    _f(_fig(r, "cache_host_mb"), "{:,.1f}"), _f(_fig(r, "cache_build_s"), "{:.2f}"),
                    f"{chunks:.0f} / {slots:.0f}" if chunks is not None and slots is not None else "-",
                    _util(r), _resample_on(r), _status(r, 80)])
    return out


def pipeline_cache(records: Iterable[Record]) -> str:
    body = pipeline_cache_rows(records)
    if not body:
        return "_No EpisodeCache case in these records._"
    return ("robocache.EpisodeCache: the episodes packed once on the device (resident) or streamed from pinned host "
            "memory within a budget half the dataset (a ring of slots, chunks copied ahead on a side stream); one "
            "launch per batch, no worker, no per-batch copy; batches checked equal to the CPU workers' before timing. "
            "Speedup over the CPU workers' best trajectories/s at the batch size; cache MB = device memory (buffers "
            "and tables), build s = reading the file, packing and copying it.\n\n" + table(CACHE_HEADER, body))


TRAINING_HEADER = ["machine", "model", "pipeline", "ranks", "batch", "workers", "steps/s", "data share",
                   "ms wait / transfer / resample / compute", "GPU util", "speedup", "cache MB / build s", "loss gate",
                   "status"]


INFERENCE_HEADER = ["machine", "batch", "backend", "p50 ms", "p99 ms", "speedup vs eager", "peak MB", "max rel err",
                    "flags", "status"]


def pipeline_training_rows(records: Iterable[Record]) -> list[list[Any]]:
    """The training table's rows (:data:`TRAINING_HEADER`)."""
    order = {"cpu_workers": 0, "robocache": 1, CACHE: 2}
    recs = sorted((r for r in records if pipeline_kind(r) == "train" and not is_ddp(r)),
                  key=lambda r: (machine(r), r.case.id, order.get(r.case.provider, 9), r.case.provider))
    body = []
    for r in recs:
        sp = r.pipeline.split_ms if r.pipeline is not None else {}
        p = r.case.params
        body.append([f"{machine(r)[1]} ({machine(r)[0]})", p.get("model"),
                     pipeline_label(r), p.get("ranks", 1), p.get("B"),
                     p.get("workers") if r.case.provider != CACHE else "-",
                     _tps(_fig(r, "steps_per_s")), _pct_share(_fig(r, "data_wait_share")),
                     " / ".join(_f(sp.get(k), "{:.2f}") for k in ("data_wait", "transfer", "resampling", "compute")),
                     _util(r), fmt_x(_fig(r, "speedup_vs_baseline")),
                     "-" if _fig(r, "cache_mb") is None else
                     f"{_fig(r, 'cache_mb'):,.1f} / {_f(_fig(r, 'cache_build_s'), '{:.2f}')}",
                     _max_rel_err(r), r.status])
    return body


def pipeline_training(records: Iterable[Record]) -> str:
    body = pipeline_training_rows(records)
    if not body:
        return "_No training case in these records._"
    return ("Fixed optimizer steps from each pipeline; data share = time waiting for the batch, copying it and "
            "(robocache, EpisodeCache) resampling it, over the step; split per step in ms; speedup = steps/s over the "
            "CPU workers' on the same episodes; cache MB / build s = the EpisodeCache's device memory and build time "
            "(streamed: within a budget half the dataset); loss gate = largest relative difference of the loss "
            "curve against the CPU workers' on the same seed and episodes.\n\n"
            + table(TRAINING_HEADER, body))


def pipeline_inference_rows(records: Iterable[Record]) -> list[list[Any]]:
    """The inference table's rows (:data:`INFERENCE_HEADER`)."""
    from ..specs import INFER_BACKENDS

    order = {b: i for i, b in enumerate(INFER_BACKENDS)}
    recs = sorted((r for r in records if pipeline_kind(r) == "infer"),
                  key=lambda r: (machine(r), r.case.params.get("B", 0), order.get(r.case.provider, 9)))
    return [[f"{machine(r)[1]} ({machine(r)[0]})", r.case.params.get("B"), r.case.provider,
             _f(_fig(r, "latency_ms_p50"), "{:.3f}"), _f(_fig(r, "latency_ms_p99"), "{:.3f}"),
             fmt_x(_fig(r, "speedup_vs_eager")), _f(_fig(r, "peak_mem_mb"), "{:.1f}"),
             _max_rel_err(r), flags(r), r.status] for r in recs]


def pipeline_inference(records: Iterable[Record]) -> str:
    body = pipeline_inference_rows(records)
    if not body:
        return "_No inference case in these records._"
    return ("Latency of one call of the transformer policy, device synchronized, p50 / p99; speedup = eager p50 / "
            "this p50; peak memory over the timed calls (GPU only); max rel err against eager's output.\n\n"
            + table(INFERENCE_HEADER, body))


def _kernels(r: Record) -> list:
    """The profile's kernel table of the record (empty without one)."""
    return r.pipeline.kernels if r.pipeline is not None else []


def pipeline_kernels(records: Iterable[Record], top: int = 8) -> str:
    recs = [r for r in records if pipeline_kind(r) and _kernels(r)]
    if not recs:
        return "_No profile in these records._"
    parts = []
    for r in sorted(recs, key=lambda r: (machine(r), r.case.id, r.case.provider)):
        pipe = r.pipeline
        rows = [[k.name[:90], f"{100 * k.share:.1f}%", k.calls, fmt_us(k.avg_us), fmt_us(k.total_us)]
                for k in pipe.kernels[:top]]
        trace = f"; trace `{code(pipe.trace_file)}`" if pipe.trace_file else ""
        gpu = r.env is not None and r.env.device == "gpu"
        parts.append(f"**{esc(r.case.id)}** ({esc(pipeline_label(r))}"
                     f", {esc(machine(r)[1])}){trace}\n\n"
                     + table(["kernel" if gpu else "operator (CPU run)",
                              "share", "calls", "avg us", "total us"], rows))
    return ("torch.profiler over a few training steps after the timed ones: share of the profiled GPU time per "
            "kernel (a CPU run: self CPU time per operator).\n\n" + "\n\n".join(parts))


PROFILE_HEADER = ["machine", "case", "dtype", "provider", "longest kernel", "its share of the call", "DRAM % of peak",
                  "SM % of peak", "achieved occupancy %", "L2 hit rate %", "L2 % of peak",
                  "warps waiting on a load %", "warps held by a full load/store queue %", "registers", "ncu us (call)",
                  "harness p50 us", "ncu / harness", "status"]


def _agreement_cell(r: Record) -> str:
    """ncu's time of the profiled call over the harness's device time of the same case and run (pipelines.ncu), and
    whether they agree within its factor; a record without the harness's time (before the check existed, or its
    measurement failed) is said unchecked, never assumed right."""
    from ..gate import NCU_AGREE as AGREE

    ratio = _fig(r, "ncu_vs_harness")
    if ratio is None:
        return "not checked"
    ok = 1.0 / AGREE <= ratio <= AGREE
    return (f"{ratio:,.0f}x" if ratio >= 100 else f"{ratio:.3g}x") + ("" if ok else f": DISAGREE (beyond {AGREE:g}x)")


def pipeline_profile_rows(records: Iterable[Record]) -> list[list[Any]]:
    """The Nsight Compute table's rows (:data:`PROFILE_HEADER`)."""
    recs = sorted((r for r in records if pipeline_kind(r) == "profile"),
                  key=lambda r: (machine(r), ops.order(r.case.op), r.case.id))
    out = []
    for r in recs:
        ks = _kernels(r)
        top = max(ks, key=lambda k: k.share) if ks else None
        out.append([f"{machine(r)[1]} ({machine(r)[0]})", r.case.id, r.case.dtype, r.case.provider,
                    top.name[:60] if top else "-", _f(top.share if top else None, "{:.0%}"),
                    _f(_fig(r, "dram_pct_of_peak"), "{:.1f}"), _f(_fig(r, "sm_pct_of_peak"), "{:.1f}"),
                    _f(_fig(r, "achieved_occupancy_pct"), "{:.1f}"), _f(_fig(r, "l2_hit_rate_pct"), "{:.1f}"),
                    _f(_fig(r, "l2_pct_of_peak"), "{:.1f}"), _f(_fig(r, "stall_memory_pct"), "{:.1f}"),
                    _f(_fig(r, "stall_lsu_queue_pct"), "{:.1f}"), _f(_fig(r, "registers"), "{:.0f}"),
                    fmt_us(_fig(r, "ncu_call_us")), fmt_us(_fig(r, "harness_us")),
                    _agreement_cell(r) if r.status == "ok" else "-", _status(r, 60)])
    return out


def _newest_runs(items: list[Item], key: Any) -> list[Item]:
    """``items`` of the newest run (creation time, then run id) per ``key(item)``."""
    newest: dict[Any, tuple[str, str]] = {}
    for r in items:
        k, stamp = key(r), (r.created, r.run_id)
        if k not in newest or stamp > newest[k]:
            newest[k] = stamp
    return [r for r in items if newest[key(r)][1] == r.run_id]


def latest_pipeline_runs(records: Iterable[Record]) -> list[Record]:
    """The pipeline records of the newest run per machine and kind (a run may hold only some of the kinds)."""
    return _newest_runs([r for r in records if is_pipeline(r)], lambda r: (machine(r)[0], str(pipeline_kind(r))))


def latest_pipeline_rows(rows: Iterable[Row]) -> list[Row]:
    """:func:`latest_pipeline_runs` over the frame's rows (``report --kernels`` picks the runs to read in full)."""
    return _newest_runs([r for r in rows if r.pipeline], lambda r: (r.where[0], str(r.pipeline)))


def pipeline_sections(records: Iterable[Record], level: str = "##") -> list[tuple[str, str, Any]]:
    """The seed's end-to-end tables as report sections ``(heading level, title, body)``: one computation for the
    markdown (:func:`pipelines`) and the JSON of ``report`` (each section its title and tables)."""
    records = list(records)
    prof = pipeline_profile_rows(records)
    out = [(level, "Data loading by batch size", lambda: pipeline_dataload(records)),
           (level, "EpisodeCache: data loading from the device", lambda: pipeline_cache(records)),
           (level, "Training step: where the time goes", lambda: pipeline_training(records)),
           *([(level, "DDP training over GPUs", lambda: ddp(records))] if any(is_ddp(r) for r in records) else []),
           (level, "Policy inference by backend", lambda: pipeline_inference(records)),
           (level, "Kernel breakdown of a training step", lambda: pipeline_kernels(records))]
    if prof:
        out.append((level, "Nsight Compute: robocache's kernels",
                    lambda: "One profiled call per case under ncu (its longest kernel's metrics); ncu's time of the "
                            "whole call against the harness's device time of the same case in the same run, "
                            "flagged beyond a factor of 3 either way.\n\n" + table(PROFILE_HEADER, prof)))
    return out


def pipelines(records: Iterable[Record]) -> str:
    """The seed's end-to-end tables from pipeline records (any number of runs and machines), as markdown."""
    return "\n\n".join(part for level, name, body in pipeline_sections(records) for part in (f"{level} {name}", body()))
