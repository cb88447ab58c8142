"""Pure table builders over the dashboard frame (DataFrame in, DataFrame out; no Streamlit).

Speedups follow the CLI report's rule: ratios of medians measured side by side in one run on one
machine, with the same timer, cache mode and dtype; never across runs or machines.
"""
from __future__ import annotations

import pandas as pd

KEYS = ["machine", "arch", "op", "timer", "cache", "case_id", "dtype"]
OURS = "robocache"


def side_by_side(df: pd.DataFrame) -> pd.DataFrame:
    """Per case (and machine, timer, cache, dtype): the latest run's p50 of every provider, one column each.

    Only ``ok`` records count. The run chosen for a case is its newest one that measured robocache,
    or the newest one at all when no run did. Columns: the keys, ``run_id``, ``created``, one p50
    column per provider, ``best`` (the fastest provider) and ``best_p50``.
    """
    ok = df[(df["status"] == "ok") & df["p50"].notna()]
    if ok.empty:
        return pd.DataFrame(columns=[*KEYS, "run_id", "created", "best", "best_p50"])
    idx = [*KEYS, "run_id"]
    wide = ok.pivot_table(index=idx, columns="provider", values="p50", aggfunc="median", observed=True)
    wide.columns = [str(c) for c in wide.columns]
    when = ok.groupby(idx, observed=True)["created"].max()
    wide = wide.join(when).reset_index()
    has_ours = wide[OURS].notna() if OURS in wide.columns else pd.Series(False, index=wide.index)
    wide = wide.assign(_ours=has_ours).sort_values(["_ours", "created"], kind="stable")
    wide = wide.drop_duplicates(KEYS, keep="last").drop(columns="_ours")
    prov = [c for c in wide.columns if c not in (*idx, "created")]
    wide = wide.dropna(subset=prov, how="all")
    wide["best"] = wide[prov].idxmin(axis=1)
    wide["best_p50"] = wide[prov].min(axis=1)
    for c in KEYS + ["run_id"]:
        wide[c] = wide[c].astype(str)
    return wide.sort_values(KEYS, kind="stable").reset_index(drop=True)


def providers_in(wide: pd.DataFrame) -> list[str]:
    """The provider columns of a :func:`side_by_side` table."""
    fixed = {*KEYS, "run_id", "created", "best", "best_p50"}
    return [c for c in wide.columns if c not in fixed]


def speedups(wide: pd.DataFrame) -> pd.DataFrame:
    """Long table: robocache's speedup over each peer (peer p50 / robocache p50) per case.

    Columns: the keys, ``peer`` and ``speedup`` (> 1: robocache is faster). Cases without a robocache
    or peer figure are left out.
    """
    provs = providers_in(wide)
    if OURS not in provs or wide.empty:
        return pd.DataFrame(columns=[*KEYS, "run_id", "peer", "speedup"])
    peers = [p for p in provs if p != OURS]
    long = wide.melt(id_vars=[*KEYS, "run_id", OURS], value_vars=peers, var_name="peer", value_name="peer_p50")
    long = long.dropna(subset=[OURS, "peer_p50"])
    long["speedup"] = long["peer_p50"] / long[OURS]
    return long[[*KEYS, "run_id", "peer", "speedup"]].reset_index(drop=True)


def health_counts(df: pd.DataFrame) -> dict[str, int]:
    """Counts of records flagged throttled / contended / noisy, failed (not ok, not skipped) and skipped."""
    st = df["status"].astype(str)
    return {
        "records": int(len(df)),
        "failed": int((~st.isin(["ok", "skipped"])).sum()),
        "skipped": int((st == "skipped").sum()),
        "throttled": int(df["throttled"].sum()),
        "contended": int(df["contended"].sum()),
        "noisy": int(df["noisy"].sum()),
    }
