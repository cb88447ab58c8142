"""Runs: one run's environment, clocks and health flags, its failed cases with reasons, and the
results files the loader skipped."""
import json

import streamlit as st

from dashboard import data, tables


def body() -> None:
    dirs = data.results_dirs()
    df, bad = data.load_frame(dirs)
    if bad:
        st.subheader(f"Skipped files ({len(bad)})")
        for path, reason in bad:
            st.warning(f"{data.md_escape(path)}: {data.md_escape(reason)}")
    if df.empty:
        st.info("No records found in " + ", ".join(data.md_escape(d) for d in dirs) + ".")
        return
    order = df.groupby("run_id", observed=True)["created"].min().sort_values(ascending=False)
    run = data.bound(st.selectbox, "run (newest first)", order.index.astype(str).tolist(), "run")
    d = df[df["run_id"] == run]
    r0 = d.iloc[0]
    if bool(d["synthetic"].any()):
        st.warning("This run's records are SYNTHETIC (generated fixtures), not measurements.")
    st.subheader("Run")
    meta = {"run_id": run, "created": str(d["created"].min()), "git_commit": r0["git_commit"],
            "git_dirty": r0["git_dirty"], "suite": str(r0["suite"]), "frontend": str(r0["frontend"]),
            "machine": str(r0["machine"]), "arch": str(r0["arch"]), "records": int(len(d)),
            "files": sorted(d["source"].astype(str).unique().tolist())}
    st.json(meta)
    st.subheader("Environment")
    for env in d["env"].unique().tolist():
        st.json(json.loads(env), expanded=False)

    counts = tables.health_counts(d)
    cols = st.columns(len(counts))
    for col, (k, v) in zip(cols, counts.items()):
        col.metric(k, v)

    st.subheader("Clocks and health per case")
    st.dataframe(d[["case_id", "provider", "dtype", "status", "sm_mhz_min", "sm_mhz_median", "sm_mhz_max_supported",
                    "temperature_c_max", "power_w_max", "other_processes", "throttle_reasons", "throttled",
                    "contended", "noisy", "health_reasons"]],
                 hide_index=True, width="stretch", placeholder=tables.MISSING)

    failed = d[~d["status"].astype(str).isin(["ok", "skipped"])]
    st.subheader(f"Failed cases ({len(failed)})")
    if failed.empty:
        st.success("No case failed in this run.")
    else:
        st.dataframe(failed[["case_id", "provider", "dtype", "status", "reason"]],
                     hide_index=True, width="stretch", placeholder=tables.MISSING)


data.run_page("Runs", body)
