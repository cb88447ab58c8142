"""Pipelines: the end-to-end benchmarks (suite ``pipelines``) per GPU: data loading by batch size (CPU workers
vs robocache.fuse vs the EpisodeCache, with the speedups), the EpisodeCache in each regime (resident, streamed)
with its memory and build time, the training step's time split from all three loaders, policy inference by
backend, and the kernel breakdown of a training step. The tables are the CLI report's own
(``robocache.bench.views``), built from the pipeline records under the dashboard's results folders (the one store
loader)."""
import msgspec
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboard import charts, data, tables
from robocache import providers
from robocache.bench import frame, store
from robocache.bench.schema import KernelRow, Record
from robocache.bench.views import pipelines as report_pipelines
from robocache.bench.views.records import env_of, is_pipeline

DATALOAD_COLUMNS = {"arch": "GPU", "machine": "machine", "B": "batch", "workers": "workers",
                    "base_tps": "CPU workers traj/s", "ours_tps": "robocache traj/s", "speedup": "speedup",
                    "cache_tps": "EpisodeCache traj/s", "cache_speedup": "EpisodeCache speedup",
                    "base_p50": "CPU workers ms p50", "base_p90": "CPU workers ms p90", "ours_p50": "robocache ms p50",
                    "ours_p90": "robocache ms p90", "base_util": "GPU util (CPU workers)",
                    "ours_util": "GPU util (robocache)", "resample_on": "robocache resampled on", "status": "status",
                    "case": "case"}


@st.cache_data(show_spinner="Loading pipeline records ...", max_entries=4)
def _records(dirs: tuple[str, ...], fingerprint: tuple) -> list[Record]:
    del fingerprint  # part of the cache key only
    return [r for r in store.load(*dirs).records if is_pipeline(r)]


def _gpu(r: Record) -> str:
    env = env_of(r)
    return str(env.arch or ("CPU" if env.device == "cpu" else env.gpu_name) or "?")


def dataload_chart(rows: list[dict], cache: list[list], title: str) -> go.Figure:
    """Trajectories/s by batch size and workers for the two DataLoader pipelines, and by batch size and regime
    for the EpisodeCache (no workers: its own bars)."""
    fig = go.Figure()
    for prov, key in (("cpu_workers", "base_tps"), ("robocache", "ours_tps")):
        xs = [f"B{r['B']} W{r['workers']}" for r in rows]
        fig.add_bar(name=charts.plain("CPU workers (NumPy)" if prov == "cpu_workers" else "robocache.fuse"),
                    x=[charts.plain(x) for x in xs], y=[r[key] for r in rows], marker_color=providers.color(prov))
    if cache:
        fig.add_bar(name="EpisodeCache", x=[charts.plain(f"B{r[1]} {r[2]}") for r in cache],
                    y=[_number(r[3]) for r in cache], marker_color=providers.color("episode_cache"))
    fig.update_layout(title=charts.plain(title), barmode="group", yaxis_title="trajectories per second",
                      xaxis_title="batch size and workers (EpisodeCache: and regime)", height=380)
    return fig


def _number(text: str) -> float | None:
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        return None


KERNEL_COLUMNS = {"name": "kernel", "calls": "calls", "total_us": "total (us)", "avg_us": "per call (us)",
                  "share": "share of the step (%)"}


def kernel_table(kernels: list[KernelRow]) -> tuple:
    """A profile's kernel rows as a readable table: times and shares to about four significant digits (they were
    printed as recorded, 324.4864), the share as a percentage."""
    k = pd.DataFrame([msgspec.structs.asdict(x) for x in kernels])
    if "share" in k.columns:
        k["share"] = 100 * k["share"]
    return tables.readable(k[[c for c in KERNEL_COLUMNS if c in k.columns]].rename(columns=KERNEL_COLUMNS))


def _frame(rows: list[list], header: list[str]) -> pd.DataFrame:
    return pd.DataFrame([[str(c) for c in row] for row in rows], columns=header)


def body(df: pd.DataFrame) -> None:
    dirs = data.results_dirs()
    recs = _records(tuple(dirs), frame.files_fingerprint(tuple(dirs)))
    if not recs:
        st.info("No pipeline results yet. `robocache-bench run --suite pipelines` (or `python -m "
                "robocache.bench.pipelines run`) records data loading, training steps and policy inference here.")
        return
    recs = report_pipelines.latest_pipeline_runs(recs)
    gpus = sorted({_gpu(r) for r in recs})
    # the first screen: the newest GPU with pipelines records (the other pages' rule, over these records' machines)
    machines = {str(env_of(r).machine) for r in recs}
    gpu = data.bound(st.selectbox, "GPU", gpus, "gpu",
                     default=data.preferred(df[df["machine"].astype(str).isin(machines)], "arch"))
    mine = [r for r in recs if _gpu(r) == gpu]
    if any(r.pipeline is not None and r.pipeline.resample_on == "numpy_fallback" for r in mine):
        st.warning("These records come from a machine without a GPU: robocache ran its NumPy fallback; they are "
                   "not GPU figures.")
    st.caption("Newest pipelines run per machine. Data loading: trajectories per second through the same "
               "DataLoader (workers, pinned memory, prefetch), batches checked equal before timing.")
    st.subheader(data.md_escape(f"Data loading by batch size on {gpu}"))
    rows = report_pipelines.pipeline_dataload_rows(mine)
    cache = report_pipelines.pipeline_cache_rows(mine)
    if rows or cache:
        st.plotly_chart(dataload_chart(rows, cache, f"Data loading on {gpu}"), width="stretch")
    if rows:
        df = pd.DataFrame(rows)
        data.show_table(tables.readable(df[list(DATALOAD_COLUMNS)].rename(columns=DATALOAD_COLUMNS)),
                        hide_index=True, width="stretch")
    else:
        st.info("No data-loading case for this GPU.")
    st.subheader("EpisodeCache: data loading from the device")
    st.caption("robocache.EpisodeCache: the episodes on the device (resident) or streamed from pinned host memory "
               "within a budget half the dataset; one launch per batch, no worker, no per-batch copy. Cache MB is "
               "device memory, build s the time to read, pack and copy the dataset.")
    if cache:
        st.dataframe(_frame(cache, report_pipelines.CACHE_HEADER), hide_index=True, width="stretch",
                     placeholder=tables.MISSING)
    else:
        st.info("No EpisodeCache case for this GPU.")
    for title, fn, header in (
            ("Training step: where the time goes", report_pipelines.pipeline_training_rows, report_pipelines.TRAINING_HEADER),
            ("Policy inference by backend", report_pipelines.pipeline_inference_rows, report_pipelines.INFERENCE_HEADER)):
        st.subheader(title)
        rows_ = fn(mine)
        if rows_:
            st.dataframe(_frame(rows_, header), hide_index=True, width="stretch", placeholder=tables.MISSING)
        else:
            st.info("None for this GPU.")
    st.subheader("Kernel breakdown of a training step")
    prof = [r for r in mine if r.pipeline is not None and r.pipeline.kernels]
    if not prof:
        st.info("No profile for this GPU.")
    for r in prof:
        st.text(f"{r.case.id} ({r.case.provider})"
                + (f": trace {r.pipeline.trace_file}" if r.pipeline.trace_file else ""))
        data.show_table(kernel_table(r.pipeline.kernels), hide_index=True, width="stretch")


data.frame_page("Pipelines", body)
