"""Multi-GPU: scaling efficiency and aggregate throughput against the GPU count, per architecture (side by side,
on one y scale, with a table of both, when several architectures have multi-GPU records: H100 and H200), and the
gather's bandwidth next to the collective's own; from records carrying ``distributed`` (suite multigpu). Then DDP
training (the pipelines suite's training step over several GPUs): steps/s per GPU and the share of the step spent
waiting for data against the GPU count, per loader (CPU workers, robocache.fuse, the EpisodeCache)."""
import math

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboard import charts, data, tables
from robocache import providers
from robocache.bench import frame, store
from robocache.bench.schema import Record
from robocache.bench.views import multigpu as report_multigpu

TABLE = ["machine", "arch", "op", "case_id", "provider", "dtype", "world_size", "nodes", "scaling", "gather", "status",
         "step_us", "per_rank_us", "aggregate_items_per_s", "efficiency", "gather_gb_per_s", "collective_gb_per_s",
         "collective_busbw_gb_per_s", "backend", "run_id", "reason"]

DDP_COLUMNS = {"arch": "GPU", "machine": "machine", "model": "model", "B": "batch per GPU", "workers": "workers",
               "loader": "loader", "ranks": "GPUs", "steps_per_s": "steps/s per GPU", "traj_per_s": "trajectories/s (all GPUs)",
               "data_wait_share": "data-wait share", "efficiency": "efficiency", "status": "status", "run_id": "run",
               "reason": "reason"}


def y_range(values: pd.Series, metric: str) -> list[float] | None:
    """One y range for every architecture's chart (side by side they must share a scale): efficiency from 0 to
    past 1 and the largest value; the log-scaled metrics in plotly's log10 units around their extremes."""
    v = pd.to_numeric(values, errors="coerce").dropna()
    v = v[v > 0] if charts.MULTI_METRICS[metric][1] else v
    if v.empty:
        return None
    if charts.MULTI_METRICS[metric][1]:
        return [math.log10(v.min()) - 0.1, math.log10(v.max()) + 0.1]
    return [0.0, max(1.05, float(v.max()) * 1.05)]


def arch_table(ok: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The metric per op/shape-scaling-gather, provider and GPU count, one column per architecture: its largest
    machine (the most GPUs; the x4 machine over the x2 one), newest record per case."""
    d = ok.dropna(subset=["world_size", metric]).copy()
    if d.empty:
        return pd.DataFrame()
    for c in ("arch", "machine", "provider", "case_id"):
        d[c] = d[c].astype(str)
    d["family"] = charts.multigpu_family(d["case_id"])
    parts = []
    for arch, a in d.groupby("arch", sort=True):
        big = a.groupby("machine")["world_size"].max().sort_index()
        m = big.idxmax()
        parts.append(a[a["machine"] == m].assign(column=f"{arch} ({m})"))
    t = pd.concat(parts).pivot_table(index=["family", "provider", "world_size"], columns="column", values=metric,
                                     aggfunc="first").reset_index()
    t.columns.name = None
    return t.rename(columns={"family": "op/shape-scaling-gather", "world_size": "GPUs"})


def _arch_charts(a: pd.DataFrame, op: str, arch: str, metric: str, rng: list[float] | None) -> None:
    fig = charts.scaling_lines(a, metric, title=f"{op} on {arch}: {charts.MULTI_METRICS[metric][0]} vs GPUs")
    if rng is not None:
        fig.update_yaxes(range=rng)
    st.plotly_chart(fig, width="stretch")
    g = a.dropna(subset=["gather_gb_per_s"])
    if not g.empty:
        st.plotly_chart(charts.gather_bars(g, title=f"{op} on {arch}: the gather next to the collective's own"),
                        width="stretch")


def ops_section(multi: pd.DataFrame) -> None:
    c = st.columns(3)
    op = data.bound(c[0].selectbox, "op", data.options(multi, "op"), "op")
    metric = data.bound(c[1].selectbox, "metric", list(charts.MULTI_METRICS), "metric",
                        format_func=lambda m: charts.MULTI_METRICS[m][0])
    d = multi[multi["op"] == op]
    scalings = data.options(d, "scaling")
    scaling = data.bound(c[2].selectbox, "scaling", ["weak and strong", *scalings], "scaling")
    if scaling != "weak and strong":
        d = d[d["scaling"] == scaling]
    # newest record per case and machine, whatever its timer: a failed record has none, and must hide an older
    # ok one rather than stand beside it
    latest = data.latest(d, keys=[c for c in data.LATEST_KEYS if c not in ("timer", "cache")])
    ok = latest[latest["status"] == "ok"]
    st.caption("Each rank times its own shard; the group's step is its slowest rank's median; efficiency is "
               "against the one-GPU case of the same run (weak: t1/tk, strong: t1/(k tk)). Gather bars: cases over "
               "several GPUs (a one-GPU gather is a local copy); steps marked host-bound in the table's reason were "
               "paced by Python's launches, not the GPU.")
    archs = data.options(ok, "arch")
    if len(archs) > 1:  # H100 and H200 (or any two or more): side by side, one y scale, then a table of both
        st.subheader(data.md_escape(f"{op}: {' vs '.join(str(a) for a in archs)}"))
        st.caption("Side by side on one y scale; the table below puts each architecture's largest machine "
                   "next to the other's, case by case.")
        rng = y_range(ok[metric], metric)
        for col, arch in zip(st.columns(len(archs)), archs):
            with col:
                _arch_charts(ok[ok["arch"] == arch], op, str(arch), metric, rng)
        t = arch_table(ok, metric)
        if not t.empty:
            st.markdown(data.md_escape(f"{charts.MULTI_METRICS[metric][0]} by architecture"))
            data.show_table(tables.readable(t), hide_index=True, width="stretch")
    else:
        for arch in archs:
            st.subheader(data.md_escape(f"{arch}: {op}"))
            _arch_charts(ok[ok["arch"] == arch], op, str(arch), metric, None)
    if ok.empty:
        st.info("No successful multi-GPU result for this selection; the table lists what was recorded.")
    failed = latest[latest["status"] != "ok"]
    if not failed.empty:
        st.warning(f"{len(failed)} multi-GPU case(s) failed (the table says why); failed cases carry no aggregate.")
    data.show_table(tables.readable(latest[TABLE].sort_values(["machine", "case_id", "provider", "world_size"])),
                    hide_index=True, width="stretch")


@st.cache_data(show_spinner="Loading DDP training records ...", max_entries=4)
def _ddp_records(dirs: tuple[str, ...], fingerprint: tuple) -> list[Record]:
    del fingerprint  # part of the cache key only
    return [r for r in store.load(*dirs).records if report_multigpu.is_ddp(r)]


def ddp_chart(rows: pd.DataFrame, value: str, title: str, y_title: str, rng: list[float] | None) -> go.Figure:
    """One line per (model, batch, loader) of ``value`` against the GPU count."""
    fig = go.Figure()
    for (model, b, loader), g in rows.dropna(subset=[value]).groupby(["model", "B", "loader"], sort=True):
        g = g.sort_values("ranks")
        name = f"{model} B{b}: {report_multigpu.DDP_LOADERS.get(str(loader), str(loader))}"
        fig.add_scatter(x=g["ranks"], y=g[value], mode="lines+markers", name=charts.plain(name),
                        line_color=providers.color(str(loader)),
                        line_dash="solid" if str(model) == "mlp" else "dash",
                        hovertemplate="%{x} GPUs<br>%{y:.4g}<extra>%{fullData.name}</extra>")
    ks = sorted({int(k) for k in rows["ranks"].dropna()})
    fig.update_layout(title=charts.plain(title), xaxis_title="GPUs (ranks)", yaxis_title=y_title, height=420,
                      legend_orientation="h", legend_y=-0.2, legend_yanchor="top",
                      xaxis=dict(type="log", tickvals=ks, ticktext=[str(k) for k in ks]))
    if rng is not None:
        fig.update_yaxes(range=rng)
    return fig


def ddp_section() -> None:
    st.header("DDP training from GPU preprocessing")
    dirs = data.results_dirs()
    rows = pd.DataFrame(report_multigpu.ddp_rows(_ddp_records(tuple(dirs), frame.files_fingerprint(tuple(dirs)))))
    if rows.empty:
        st.info("No DDP training records yet. `bash scripts/gpu_check.sh OUT ddp` (or `python -m "
                "robocache.bench.pipelines run --ddp-ranks 1,2,4`) trains both models over 1, 2 and 4 GPUs from "
                "each loader and records them here.")
        return
    st.caption("The pipelines suite's training step under DistributedDataParallel, each rank on its own GPU with "
               "its own shard (weak scaling: the batch per GPU is fixed), newest run per machine. Steps/s per GPU: "
               "every GPU steps at the group's rate (its slowest rank's median step); data-wait share: the step's "
               "time spent waiting for, copying and resampling the batch (the largest over the ranks). Efficiency "
               "against the one-GPU launch of the same run.")
    archs = sorted(rows["arch"].astype(str).unique())
    ok = rows[rows["status"] == "ok"]
    spd = [0.0, float(ok["steps_per_s"].max()) * 1.1] if not ok.empty else None
    for col, arch in zip(st.columns(len(archs)), archs):
        a = ok[ok["arch"].astype(str) == arch]
        with col:
            st.subheader(data.md_escape(f"{arch}: DDP training"))
            if a.empty:
                st.info("No successful DDP case on this GPU; the table says why.")
                continue
            st.plotly_chart(ddp_chart(a, "steps_per_s", f"{arch}: steps/s per GPU vs GPUs", "steps/s per GPU", spd),
                            width="stretch")
            st.plotly_chart(ddp_chart(a, "data_wait_share", f"{arch}: data-wait share of the step vs GPUs",
                                      "share of the step waiting for data", [0.0, 1.0]), width="stretch")
    failed = rows[rows["status"] != "ok"]
    if not failed.empty:
        st.warning(f"{len(failed)} DDP case(s) failed (the table says why).")
    data.show_table(tables.readable(rows[list(DDP_COLUMNS)].rename(columns=DDP_COLUMNS)), hide_index=True,
                    width="stretch")


def body(df: pd.DataFrame) -> None:
    # A multi-GPU record of an op is one of the multigpu suite: its params name the world size (failed ones have
    # no "distributed" section, so the suite is the test). The pipelines suite's DDP records are the section
    # below, not an op.
    multi = df[((df["suite"] == "multigpu") | df["world_size"].notna()) & (df["suite"] != "pipelines")]
    if multi.empty:
        st.info("No multi-GPU results yet. Cases spanning several GPUs show here once `robocache-bench run --suite "
                "multigpu` has recorded them on a machine with two or more GPUs.")
    else:
        ops_section(multi)
    ddp_section()


data.frame_page("Multi-GPU", body)
