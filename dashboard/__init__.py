"""The results dashboard: ``streamlit run dashboard/app.py [-- --results DIR ...]``.

``app.py`` only declares the pages; ``data.py`` is the one cached loader (records -> one DataFrame);
``tables.py`` and ``charts.py`` are pure (DataFrame in, DataFrame or plotly Figure out), so they are
tested without a browser; ``views/`` (the pages) lay them out. Nothing from a record is ever rendered as HTML.
"""
