"""Multi-GPU: results of cases run over more than one GPU (none recorded yet)."""
import json
import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import streamlit as st  # noqa: E402

from dashboard import data  # noqa: E402

# A case is multi-GPU when its params say how many GPUs it spans.
_GPU_KEYS = ("world_size", "gpus", "n_gpus")


def _gpus(params: str) -> int:
    p = json.loads(params)
    for k in _GPU_KEYS:
        v = p.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return 1


def body() -> None:
    got = data.loaded()
    if got is None:
        return
    df, _ = got
    n = df["params"].map(_gpus)
    multi = df[n > 1].assign(gpus=n[n > 1])
    if multi.empty:
        st.info("No multi-GPU results yet. Cases spanning several GPUs (2, 4 or 8 H200s) will show here once "
                "the benchmark suite records them.")
        return
    st.dataframe(multi[["machine", "arch", "op", "case_id", "provider", "dtype", "gpus", "timer", "cache", "status",
                        "p50", "gb_per_s", "run_id"]], hide_index=True, width="stretch")


data.run_page("Multi-GPU", body)
