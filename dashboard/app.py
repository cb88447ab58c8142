"""The dashboard's entry point: declares the pages and routes to them, nothing else (Streamlit's own multipage
layout; :mod:`dashboard.nav` forgives a path's case).

``streamlit run dashboard/app.py`` puts ``dashboard/`` on ``sys.path``, not the repository root, so this one
place adds the root before any page runs (``from dashboard import ...`` in the pages, and this checkout's
``robocache`` rather than another one's); the pages run through it. Tests run a page alone with AppTest from the
repository root, which is already on the path.
"""
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import streamlit as st  # noqa: E402

from dashboard import nav  # noqa: E402

_PAGES = _ROOT / "dashboard" / "views"

st.set_page_config(layout="wide", page_title="robocache-bench")
_HOME = st.Page(_PAGES / "overview.py", title="Overview", default=True)
_ALL = [
    _HOME,
    st.Page(_PAGES / "wins.py", title="Where robocache wins", url_path="wins"),
    st.Page(_PAGES / "sweeps.py", title="Sweeps"),
    st.Page(_PAGES / "architectures.py", title="Architectures"),
    st.Page(_PAGES / "kernels.py", title="Kernels"),
    st.Page(_PAGES / "sampled.py", title="Sampled"),
    st.Page(_PAGES / "history.py", title="History"),
    st.Page(_PAGES / "regressions.py", title="Regressions"),
    st.Page(_PAGES / "multigpu.py", title="Multi-GPU"),
    st.Page(_PAGES / "pipelines.py", title="Pipelines"),
    st.Page(_PAGES / "runs.py", title="Runs"),
]
_page = st.navigation(_ALL)
nav.route(_page, _ALL, _HOME)  # /History opens History; an unknown path says so (Streamlit showed the Overview)
_page.run()
