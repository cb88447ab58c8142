"""The dashboard's entry point: declares the pages, nothing else (Streamlit's own multipage layout)."""
from pathlib import Path

import streamlit as st

_PAGES = Path(__file__).resolve().parent / "pages"

st.set_page_config(layout="wide", page_title="robocache-bench")
st.navigation([
    st.Page(_PAGES / "overview.py", title="Overview", default=True),
    st.Page(_PAGES / "sweeps.py", title="Sweeps"),
    st.Page(_PAGES / "architectures.py", title="Architectures"),
    st.Page(_PAGES / "kernels.py", title="Kernels"),
    st.Page(_PAGES / "history.py", title="History"),
    st.Page(_PAGES / "multigpu.py", title="Multi-GPU"),
    st.Page(_PAGES / "pipelines.py", title="Pipelines"),
    st.Page(_PAGES / "runs.py", title="Runs"),
]).run()
