"""The data behind History and Regressions: ``robocache-bench check``'s result, commit order and line segments.

The regression analysis is never redone here: :func:`check_doc` calls :func:`robocache.bench.regressions.check` on
the harness's one frame of the folders the dashboard loads (:func:`dashboard.data.load_frame`, read as it is: the
check reads its columns, so through the columnar cache like every page and like ``robocache-bench check`` itself:
each point's within-run noise and runner env are columns of it) with the CLI's defaults (front end ``cli`` unless another is chosen), one machine at a
time as the nightly job runs ``check --machine M``, and merges :func:`robocache.bench.regressions.alerts_json`'s
documents. That is ``check`` WITHOUT ``--confirm``: the nightly job's alerts are those its rerun confirmed, so
the pages name a written ``alerts.json`` as the source of what the nightly raised. Or the pages read a written ``alerts.json``
(``--alerts FILE`` after ``--`` on the ``streamlit run`` line, or ``$ROBOCACHE_ALERTS_JSON``), validated;
a bad file is reported and the check is computed instead.

A series is :func:`robocache.bench.schema.series_key` (its fingerprint, :func:`dashboard.tables.series_ids`);
commit order is the order in which the records' commits were first measured (records carry the commit hash, not
its date or parents: the order the nightly runs measured them, the order ``check`` reads a history in); a series'
line is cut where its runner changed (:func:`robocache.bench.regressions.env_changes`, the check's own test).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from robocache.bench import frame, links, regressions, schema, store
from robocache.bench.regressions.noise import CALL_RATIO
from robocache.bench.regressions.records import call_ratio_band_of_json

from . import data, tables

ALERTS_ENV = "ROBOCACHE_ALERTS_JSON"  # a written alerts.json to show instead of computing the check
SCHEMA = schema.ALERTS_SCHEMA
EVERY_FRONTEND = "all"  # check --frontend all


# --- where the alerts come from -----------------------------------------------------------------------------

def alerts_file(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> str | None:
    """``--alerts FILE`` from the ``streamlit run ... --`` arguments, else ``$ROBOCACHE_ALERTS_JSON``, else None."""
    argv = sys.argv[1:] if argv is None else argv
    environ = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(allow_abbrev=False, add_help=False)
    parser.add_argument("--alerts", default=None)

    def _fail(message: str) -> None:
        raise ValueError(message)

    parser.error = _fail  # type: ignore[method-assign]
    try:
        got = parser.parse_known_args(list(argv))[0].alerts
    except ValueError:
        got = None
    return got or (environ.get(ALERTS_ENV, "").strip() or None)


def validate_doc(doc: Any, where: str) -> schema.AlertsDoc:
    """A ``robocache-alerts/1`` document in memory (a dict) as its type (:class:`robocache.bench.schema.AlertsDoc`:
    unknown fields, NaN and a newer version refused); ValueError naming the first problem."""
    try:
        return schema.alerts_doc(doc)
    except schema.SchemaError as e:
        raise ValueError(f"{where}: {e}") from None


def no_alerts() -> schema.AlertsDoc:
    """A document with nothing in it (a chart without findings)."""
    return schema.AlertsDoc(schema=SCHEMA, alerts=[])


def read_alerts(path: str) -> schema.AlertsDoc | str:
    """A written alerts.json as its type (:func:`robocache.bench.schema.load_alerts`), or the one-line reason it is
    not one (``where: what``), for the page to say while the rest of it renders."""
    doc = schema.load_alerts(path)
    if isinstance(doc, schema.AlertsError):
        return f"{store.display_path(path)}: {doc}"
    return doc


CHECK_CACHE_KEEP = 64  # check documents kept on disk (one per results folders, machine and front end)


def check_identity() -> str:
    """What a check document depends on besides the records: the frame's derivation (``frame.cache_identity``:
    robocache/bench/frame.py), this module, the check's code and its noise priors (their bytes). A change to any of them computes the check again."""
    h = hashlib.sha256(frame.cache_identity().encode())
    mod = Path(regressions.__file__)
    code = sorted(mod.parent.glob("*.py")) if mod.name == "__init__.py" else [mod]
    for f in [Path(__file__), *code, *sorted(Path(regressions.__file__).parent.glob("*.json"))]:
        try:
            h.update(f.name.encode() + b"\0" + f.read_bytes())
        except OSError:  # a frozen or zipped install: the name still keys it
            h.update(str(f).encode())
    return h.hexdigest()[:16]


def check_cache_file(dirs: Sequence[str], frontend: str | None, machine: str | None) -> Path | None:
    """Where the check document of these results folders (as they are on disk now: ``frame.files_fingerprint``),
    front end and machine is kept (``<frame cache folder>/checks``); None when the cache is off."""
    folder = frame.cache_dir()
    if folder is None:
        return None
    key = json.dumps([check_identity(), [os.fsencode(str(d)).hex() for d in dirs], frame.files_fingerprint(dirs),
                      frontend, machine])
    return folder / "checks" / f"check-{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


def _read_check(path: Path) -> schema.AlertsDoc | None:
    """A kept check document, validated; None when there is none. A bad one is reported and computed again."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        warnings.warn(f"robocache dashboard: check cache {store.display_path(path)} not read, computed again: {e}",
                      stacklevel=2)
        return None
    try:
        return schema.parse_alerts_bytes(raw)
    except schema.AlertsError as e:
        warnings.warn(f"robocache dashboard: check cache not used, computed again: {store.display_path(path)}: {e}",
                      stacklevel=2)
        return None


def _write_check(path: Path, doc: dict[str, Any]) -> None:
    """Keep ``doc`` (atomically); a failure (a read-only checkout, a non-finite number) only costs speed."""
    try:
        schema.alerts_doc(doc)  # kept only as the type reads it back (a SchemaError is a ValueError)
        text = json.dumps(doc, allow_nan=False, sort_keys=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        store.atomic_write(path, text.encode())
        frame.prune(path.parent, keep=path, pattern="check-*.json", most=CHECK_CACHE_KEEP)
    except (OSError, ValueError, TypeError) as e:
        warnings.warn(f"robocache dashboard: could not keep the check in {store.display_path(path)}: {e}",
                      stacklevel=2)


@st.cache_data(show_spinner="Running the regression check over the history ...", max_entries=64)
def check_cached(dirs: tuple[bytes, ...], fingerprint: str, frontend: str | None,
                 machine: str | None, disk: bool = True) -> schema.AlertsDoc:
    """``check --machine M --frontend F`` over the dashboard's frame (the one loader and its columnar cache; the
    frame is cached in the process by the same key), its rows narrowed to the machine and front end first.
    Kept on disk beside the frame cache (``disk``), keyed by the files as they are and the code that computes it,
    so a new process (a restarted dashboard) does not compute it again until a results file or that code changes."""
    del fingerprint  # part of the in-process cache key only (the disk key takes the files' own fingerprint)
    folders = [os.fsdecode(d) for d in dirs]
    path = check_cache_file(folders, frontend, machine) if disk else None
    kept = _read_check(path) if path is not None else None
    if kept is not None:
        return kept
    df, _ = data.load_frame(folders)
    if machine is not None:
        df = df[df["machine"].astype(str) == machine]
    if frontend:
        df = df[df["frontend"].astype(str) == frontend]
    res = regressions.check(df, machine=machine, frontend=frontend)  # the frame as it is
    # links relative to the dashboard itself (base ""): the page is already on it
    doc = regressions.alerts_json(res, dashboard_url="")
    if path is not None:
        _write_check(path, doc)
    return schema.alerts_doc(doc)  # what the pages read: the type, as a written file is


SUMMED = tuple(f for f in schema.AlertsSummary.__struct_fields__ if f not in ("status", "excluded_reasons",
                                                                             "floor", "fdr_q"))


def merge_docs(docs: Sequence[schema.AlertsDoc]) -> schema.AlertsDoc:
    """One document from the per-machine ones (each machine's nightly writes its own): the lists joined, the
    summary's counts added (a count no document gives stays absent), its settings the last one's."""
    out = schema.AlertsDoc(schema=SCHEMA, alerts=[], checked=[], summary=schema.AlertsSummary())
    summ = out.summary
    assert summ is not None and out.checked is not None
    for d in docs:
        out.alerts += d.alerts
        out.improvements += d.improvements
        out.drifts += d.drifts
        out.breaks += d.breaks
        out.checked += d.checked or []
        s = d.summary or schema.AlertsSummary()
        for k in SUMMED:
            if getattr(s, k) is not None:
                setattr(summ, k, (getattr(summ, k) or 0) + getattr(s, k))
        for k in ("floor", "fdr_q"):
            if getattr(s, k) is not None:
                setattr(summ, k, getattr(s, k))
        out.generated = max(d.generated or "", out.generated or "")
    out.alerts.sort(key=lambda a: -float(a.ratio or 0))
    return out


def check_docs(frontend: str | None, machines: Sequence[str], dirs: Sequence[str] | None = None
               ) -> dict[str, schema.AlertsDoc]:
    """Each machine's own check document (``check DIRS --machine M --frontend F``, what its nightly writes), by
    machine: the per-machine verdicts of the Overview and Regressions pages."""
    dirs = tuple(str(d) for d in (data.results_dirs() if dirs is None else dirs))
    key = (tuple(os.fsencode(d) for d in dirs), frame.files_fingerprint(dirs))
    return {str(m): check_cached(*key, frontend, str(m)) for m in machines}


def check_doc(frontend: str | None, machines: Sequence[str], dirs: Sequence[str] | None = None
              ) -> tuple[schema.AlertsDoc, str]:
    """``(alerts document, where it came from)``: a given alerts.json (validated), else ``regressions.check`` over the
    loaded folders per machine in ``machines``, with ``frontend`` (None: every front end): what each machine's
    nightly ``robocache-bench check DIRS --machine M --frontend F --json alerts.json`` writes (scripts/nightly.sh
    checks one machine at a time; Benjamini-Hochberg runs over that machine's series), the documents of several
    machines joined. A bad alerts file is shown as an error and the check is computed instead."""
    dirs = tuple(str(d) for d in (data.results_dirs() if dirs is None else dirs))
    given_doc = given_alerts()
    if given_doc is not None:
        return given_doc
    doc = merge_docs(list(check_docs(frontend, machines, dirs).values()))
    return doc, computed_source(frontend, machines, dirs)


def given_alerts() -> tuple[schema.AlertsDoc, str] | None:
    """``(document, where it came from)`` of a written alerts.json (``--alerts`` / ``$ROBOCACHE_ALERTS_JSON``),
    as its type; None when none is given, or when it is bad (then an ``st.error`` says why in one line and the
    page goes on with the check computed over the records)."""
    path = alerts_file()
    if not path:
        return None
    doc = read_alerts(path)
    if isinstance(doc, str):
        st.error(f"Alerts file not used: {data.md_escape(doc)}. Computing the check over the records instead.")
        return None
    return doc, (f"read from {data.md_escape(store.display_path(path))} (written "
                 f"{data.md_escape(doc.generated if doc.generated is not None else 'at an unknown time')})")


def computed_source(frontend: str | None, machines: Sequence[str], dirs: Sequence[str]) -> str:
    """Where a computed document came from, as the pages say it (the ``check`` command it equals)."""
    where = " ".join(frame.shown_source(d) for d in dirs)  # results/, not this checkout's absolute path
    cmd = (f"robocache-bench check {where} --machine {machines[0] if len(machines) == 1 else 'M'} "
           f"--frontend {frontend or 'all'}")
    return (f"computed now by regressions.check over the loaded records, as {data.md_escape(cmd)} would"
            + (f" (for each of the {len(machines)} machines M)" if len(machines) != 1 else ""))


# --- the verdict: three-valued, never a pass for a question the data could not answer ----------------------

VERDICTS = ("alert", "pass", "partial", "untested", "unknown")


def verdict(summary: schema.AlertsSummary | None, alerts: int) -> tuple[str, str]:
    """``(state, sentence)`` of a check document's summary and its number of open alerts. ``state``:

    - ``alert``: open alerts;
    - ``pass``: no alert, and every series measured in the newest run of its suite on the machine was tested (the only green);
    - ``partial``: no alert among the series tested, but some current series could not be tested yet (fewer
      than ``MIN_HISTORY`` healthy runs): "tested N of M", never a pass;
    - ``untested``: nothing could be tested (not enough history): no regression found or ruled out;
    - ``unknown``: a document without the counts (an alerts file of another writer).

    Series not measured in the newest run of their suite on their machine (``series_stale``) are not tonight's question; a document
    without that count (written before it existed) counts every series as current."""
    s = summary or schema.AlertsSummary()
    checked, total = s.series_checked, s.series
    if checked is None or total is None:
        if alerts:
            return "alert", f"{alerts} open alert(s); this document does not say how many series were tested."
        return "unknown", ("This alerts document does not say how many series were tested: no alert in it, but no "
                           "pass either.")
    stale = s.series_stale or 0
    current = max(total - stale, checked)
    older = (f" {stale} older series, not measured in the newest run of their suite on their machine, are not part of it."
             if stale else "")
    if alerts:
        return "alert", (f"{alerts} open alert(s) among the {checked} series tested (of {current} measured in "
                         f"the newest run).{older}")
    if checked == 0:
        return "untested", (f"Not enough history: none of the {current} series measured in the newest run has the "
                            f"{regressions.MIN_HISTORY} healthy runs a test needs, so no regression can be found or "
                            f"ruled out yet.{older}")
    if checked < current:
        return "partial", (f"Tested {checked} of {current} series measured in the newest run: no open regression "
                           f"among them. The other {current - checked} have fewer than {regressions.MIN_HISTORY} "
                           f"healthy runs and cannot be tested yet: no verdict on them.{older}")
    return "pass", f"No open performance regression: all {checked} series measured in the newest run were tested.{older}"


SHORT_VERDICT = {"pass": "no open regression", "partial": "no alert among those tested; the rest not testable yet",
                 "untested": "not enough history", "unknown": "cannot tell"}


def machine_status(docs: Mapping[str, schema.AlertsDoc]) -> pd.DataFrame:
    """One row per machine's check document: ``machine``, ``tested`` ("N of M", M the series measured in its
    newest run), ``alerts``, ``drifts``, ``state``, ``verdict`` (a few words) and ``detail`` (the sentence of
    :func:`verdict`)."""
    rows = []
    for m, doc in docs.items():
        s = doc.summary or schema.AlertsSummary()
        n_alerts = len(doc.alerts)
        state, text = verdict(s, n_alerts)
        checked, total, stale = s.series_checked, s.series, s.series_stale or 0
        tested = f"{checked} of {max(total - stale, checked)}" if checked is not None and total is not None else "?"
        rows.append({"machine": m, "tested": tested, "alerts": n_alerts, "drifts": len(doc.drifts),
                     "state": state, "verdict": SHORT_VERDICT.get(state, f"{n_alerts} open alert(s)"),
                     "detail": text})
    return pd.DataFrame(rows, columns=["machine", "tested", "alerts", "drifts", "state", "verdict", "detail"])


# --- the document as tables ---------------------------------------------------------------------------------

EVENT_COLUMNS = ["kind", "fingerprint", "machine", "arch", "op", "case_id", "provider", "dtype", "timer", "cache",
                 "frontend", "method_version", "ratio", "ratio_lo", "ratio_hi", "q_value", "before_commit",
                 "after_commit", "before_run", "after_run", "created", "confirmed", "title", "detail", "link",
                 "rests_on", "measure"]
# what a finding's ratio is of (its series' "measure", regressions.changepoints.check): the median time, or a call-cost
# series' interleaved call ratio (public call / bare launch), whose change is not the host time's drawn on History
MEASURE_WORDS = {"call_ratio": "interleaved call ratio"}


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def rests_on(a: schema.StepAlert | schema.DriftAlert) -> str:
    """What an alert, improvement or drift of an alerts document rests on, in words: the runs on each side of the
    change (a drift: its window of nights), the series' noise the test used, the p-value, how sure the commit is,
    the reruns that confirmed it. Numbers only from the document (formatted, never its text)."""
    step = a if isinstance(a, schema.StepAlert) else None
    parts = []
    nb, na = (step.n_before, step.n_after) if step else (None, None)
    win = None if step else a.window  # type: ignore[union-attr]
    if nb is not None and na is not None:
        parts.append(f"{nb} runs before, {na} after")
    if win is not None:
        parts.append(f"a window of {win} nights")
    noise, p, loc = _num(step.noise if step else None), _num(a.p_value), _num(step.location_p if step else None)
    if noise is not None:
        parts.append(f"noise {noise * 100:.2g}% a run")
    if p is not None:
        parts.append(f"p {p:.2g}")
    if loc is not None:
        parts.append(f"this commit range {loc * 100:.0f}% likely")
    if a.reruns:
        parts.append(f"{a.reruns} reruns" + {True: " confirmed it", False: ": could not rerun"}.get(a.confirmed, ""))
    return "; ".join(parts)


def _pair(xs: list[float]) -> tuple[float | None, float | None]:
    """An interval's two ends (None, None unless it has exactly two)."""
    return (xs[0], xs[1]) if len(xs) == 2 else (None, None)


def events(doc: schema.AlertsDoc) -> pd.DataFrame:
    """One row per alert, improvement, drift and break of an alerts document (kind: ``alert``, ``improvement``,
    ``drift``, ``method`` or ``environment``), with its series, size, commit range and History link (built from
    the series by :func:`robocache.bench.links.history_url`, relative to this dashboard)."""
    rows = []
    nowhere = schema.AlertPoint()

    def series_cols(a: schema.StepAlert | schema.DriftAlert | schema.BreakNote) -> dict[str, Any]:
        s = a.series
        return {"fingerprint": a.fingerprint, **{k: s.get(k) for k in ("machine", "arch", "op", "case_id",
                                                                         "provider", "dtype", "timer", "cache",
                                                                         "frontend")},
                "method_version": s.get("method_version", 1), "measure": str(s.get("measure") or "time"),
                # rebuilt from the series, never the file's own "link" (a URL read from a file is never made a
                # link: it could say javascript:), relative to this dashboard
                "link": links.history_url(s, "")}

    for kind, part in (("alert", doc.alerts), ("improvement", doc.improvements)):
        for a in part:
            lo, hi = _pair(a.ratio_ci)
            b, f = a.before or nowhere, a.after or nowhere
            rows.append({"kind": kind, **series_cols(a), "ratio": _num(a.ratio), "ratio_lo": _num(lo),
                         "ratio_hi": _num(hi), "q_value": _num(a.q_value),
                         "before_commit": b.commit, "after_commit": f.commit,
                         "before_run": b.run_id, "after_run": f.run_id, "created": f.created,
                         "confirmed": a.confirmed, "title": a.title, "detail": a.confirm_note,
                         "rests_on": rests_on(a)})
    for d in doc.drifts:
        b, f = d.first or nowhere, d.last or nowhere
        tot = _num(d.total)
        lo, hi = _pair(d.slope_ci)
        slope = _num(d.slope_per_night)
        rows.append({"kind": "drift", **series_cols(d), "ratio": None if tot is None else 1 + tot,
                     "ratio_lo": None, "ratio_hi": None, "q_value": _num(d.q_value),
                     "before_commit": b.commit, "after_commit": f.commit, "before_run": b.run_id,
                     "after_run": f.run_id, "created": f.created, "confirmed": None,
                     "title": d.title,
                     "detail": (f"{slope * 100:+.2f}% per night" if slope is not None else "")
                     + (f" (95% interval {lo * 100:+.2f}% to {hi * 100:+.2f}%)"
                        if lo is not None and hi is not None else ""),
                     "rests_on": rests_on(d)})
    for br in doc.breaks:
        rows.append({"kind": br.kind, **series_cols(br), "ratio": _num(br.ratio),
                     "ratio_lo": None, "ratio_hi": None, "q_value": None, "before_commit": None,
                     "after_commit": None, "before_run": None, "after_run": br.run_id,
                     "created": br.created, "confirmed": None, "title": None, "detail": br.detail,
                     "rests_on": ""})
    return pd.DataFrame(rows, columns=EVENT_COLUMNS)


def given(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def commit_range(before: Any, after: Any) -> str:
    """``before -> after`` as short hashes (either may be missing)."""
    return " -> ".join(str(c)[:8] for c in (before, after) if given(c))


def readable_events(ev: pd.DataFrame) -> pd.DataFrame:
    """:func:`events` with text columns for a table: ``change`` (+10.1%; a call-ratio finding's says so), ``interval`` (x1.085 to x1.117),
    ``since`` (the commit range), ``where`` (machine and architecture) and ``confirmed`` in words."""
    return ev.assign(
        change=[(f"{(r - 1) * 100:+.1f}%" if given(r) else "") + (f" ({MEASURE_WORDS[m]})" if m in MEASURE_WORDS else "")
                for r, m in zip(ev["ratio"], ev["measure"])],
        interval=[f"x{lo:.3f} to x{hi:.3f}" if given(lo) and given(hi) else ""
                  for lo, hi in zip(ev["ratio_lo"], ev["ratio_hi"])],
        since=[commit_range(b, a) for b, a in zip(ev["before_commit"], ev["after_commit"])],
        where=[f"{m} ({a})" if given(a) else str(m) for m, a in zip(ev["machine"], ev["arch"])],
        confirmed=[{True: "yes", False: "could not rerun"}.get(c, "not asked") for c in ev["confirmed"]])


# --- History: commit order, series, segments ------------------------------------------------------------------

NO_COMMIT = "(no commit)"


def commit_keys(df: pd.DataFrame) -> pd.Series:
    """Each row's commit (``git_commit``; a run without one stands alone as ``(no commit) RUN``)."""
    c = df["git_commit"].astype(object)
    return c.where(c.notna() & (c.astype(str) != ""), NO_COMMIT + " " + df["run_id"].astype(str))


def commit_order(df: pd.DataFrame) -> pd.DataFrame:
    """The commits of ``df`` in the order they were first measured: columns ``commit``, ``x`` (0, 1, ...),
    ``first`` (the first run's time) and ``label`` (the short hash)."""
    d = df.assign(_c=commit_keys(df))
    first = d.groupby("_c", sort=False)["created"].min().reset_index()
    first.columns = ["commit", "first"]
    first = first.sort_values(["first", "commit"], kind="stable", na_position="last").reset_index(drop=True)
    first["x"] = range(len(first))
    first["label"] = [c[:8] if not c.startswith(NO_COMMIT) else "no commit" for c in first["commit"].astype(str)]
    return first


def _env_fp(env_json: Any, cache: dict[str, dict[str, str]]) -> dict[str, str]:
    key = str(env_json)
    got = cache.get(key)
    if got is None:
        try:
            env = json.loads(key)
        except ValueError:
            env = {}
        env = env if isinstance(env, dict) else {}
        got = regressions.env_print(env)
        libs = env.get("libs") if isinstance(env.get("libs"), dict) else {}
        got = {**got, **{f"lib:{k}": str(v) for k, v in libs.items()}}  # read by peer_impl only
        cache[key] = got
    return got


def peer_impl(provider: str, fp: Mapping[str, str]) -> dict[str, str]:
    """What a peer's implementation is, as its records say: the version of each library it runs on (the provider
    table's ``requires``: torch for torch eager and torch.compile, cupy for CuPy), from the record's
    ``env.libs``. Empty for robocache and its kernel versions (their code is what History follows) and for a
    provider the table does not know."""
    from robocache import providers

    if providers.role(provider) != "peer":
        return {}
    try:
        mods = providers.get(provider).requires
    except ValueError:
        return {}
    return {m: fp[f"lib:{m}"] for m in mods if f"lib:{m}" in fp}


RATIO_METRIC = CALL_RATIO  # History's metric of a call-cost series' interleaved ratio: named as its measure
RATIO_COLUMNS = ("call_ratio", "call_ratio_p20", "call_ratio_p80")
# the provider roles of a call-cost case whose records never carry the ratio (records.call_ratio; the provider
# table's roles: the bare launch, the floor the ratio divides by; robocache on CuPy views carries its own since
# issue 27, its older records are "older than the interleaved timing")
UNTIMED_ROLES = ("floor",)


def metric_measure(metric: str) -> str:
    """The check's measure a History metric shows: ``call_ratio`` for the interleaved ratio, else ``time`` (the
    median time and what follows from it: items/s, GB/s, % of the ceiling). A finding is drawn on the line only
    under a metric of its own measure."""
    return RATIO_METRIC if metric == RATIO_METRIC else "time"


def ratio_columns(d: pd.DataFrame) -> dict[str, list[float]]:
    """Each row's interleaved call ratio, p50 with the rounds' p20 and p80 (NaN where it has none), from the
    frame's ``timer`` and ``interleaved`` columns through :func:`robocache.bench.regressions.records.
    call_ratio_band_of_json`: the rule and the cached parse the check judges a call-cost series by."""
    n = len(d)
    timers = d["timer"].astype(object).tolist() if "timer" in d.columns else [None] * n
    texts = d["interleaved"].astype(object).tolist() if "interleaved" in d.columns else [None] * n
    bands = [call_ratio_band_of_json(t, x) for t, x in zip(timers, texts)]
    nan = math.nan
    return {"call_ratio": [b[1] if b else nan for b in bands], "call_ratio_p20": [b[0] if b else nan for b in bands],
            "call_ratio_p80": [b[2] if b else nan for b in bands]}


def ratio_left_out(rows: pd.DataFrame) -> str | None:
    """What the interleaved call ratio leaves out of History's figure, as a markdown sentence (record text
    escaped): how many of ``rows`` (:func:`history_rows`) carry no ratio, by provider, and why; None when every
    row carries one."""
    if rows.empty:
        return None
    miss = rows[rows["call_ratio"].isna()]
    if miss.empty:
        return None
    texts = miss["interleaved"].astype(object) if "interleaved" in miss.columns else pd.Series(None, index=miss.index)
    has_section = texts.map(lambda t: isinstance(t, str) and t != "")
    parts, why = [], []
    for what, sel in (("carry no interleaved timing", ~has_section), ("carry one without a usable ratio", has_section)):
        g = miss[sel.to_numpy()]
        if g.empty:
            continue
        by = g.groupby(g["provider"].astype(str), sort=True).size()
        parts.append(f"{len(g)} {what} ({', '.join(f'{data.md_escape(p)} {n}' for p, n in by.items())})")
        if sel is has_section:
            why.append("an interleaved section whose p50 lies outside its own p20..p80, or whose figures are not "
                       "positive, is no ratio (the check reads it the same way)")
            continue
        from robocache import providers

        never = [p for p in by.index if providers.role(p) in UNTIMED_ROLES]
        if never:
            why.append(" and ".join(data.md_escape(p) for p in never) + " rows are never timed interleaved (their "
                       "call is not the one the ratio is of)")
        if len(never) < len(by):
            why.append("records older than the interleaved timing (issue 25), or whose interleaved timing failed, "
                       "carry none")
    return (f"{len(miss)} of {len(rows)} records are not drawn under the interleaved call ratio: "
            + "; ".join(parts) + ". Why: " + "; ".join(why)
            + ". Their host time per call is drawn under the median time.")


def default_metric(ev: pd.DataFrame, highlight: str | None) -> str:
    """History's metric when the URL names none: the interleaved call ratio when the linked series (``highlight``)
    has a finding on it, or, with no series linked, when a finding in view is one; else the median time."""
    if ev.empty:
        return "p50"
    e = ev[ev["fingerprint"] == highlight] if highlight is not None else ev
    e = e[e["kind"].isin(("alert", "improvement", "drift"))]
    return RATIO_METRIC if (e["measure"] == RATIO_METRIC).any() else "p50"


def history_rows(d: pd.DataFrame, order: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``d`` (one machine, case, timer, cache, front end) with ``series`` (the fingerprint),
    ``x`` (commit position), ``commit``, ``segment`` (0, 1, ... within a series: a new one where the runner
    changed, or a peer's implementation: the version of the library it runs on, :func:`peer_impl`),
    ``env_change`` (what changed there), ``health`` (the flags as text) and a call-cost record's interleaved
    ratio (:data:`RATIO_COLUMNS`, :func:`ratio_columns`; NaN elsewhere), in run order."""
    if d.empty:
        return d.assign(series=[], x=[], commit=[], segment=[], health=[], env_change=[],
                        **{c: pd.Series([], dtype="float64") for c in RATIO_COLUMNS})
    d = d.sort_values(["created", "run_id"], kind="stable")
    d = d.assign(series=tables.series_ids(d), commit=commit_keys(d), **ratio_columns(d))
    d = d.assign(x=d["commit"].map(dict(zip(order["commit"], order["x"]))).astype(float))
    flags = []
    for t, c, n in zip(d["throttled"], d["contended"], d["noisy"]):
        on = [name for name, v in (("throttled", t), ("contended", c), ("noisy", n)) if bool(v)]
        flags.append(", ".join(on) if on else "healthy")
    envs: dict[str, dict[str, str]] = {}
    seg, change = [], []
    last: dict[str, tuple[dict[str, str], dict[str, str], int]] = {}
    for fp, env, prov in zip(d["series"], d["env"], d["provider"].astype(str)):
        e = _env_fp(env, envs)
        runner = {k: v for k, v in e.items() if not k.startswith("lib:")}
        impl = peer_impl(prov, e)
        prev = last.get(fp)
        moved = regressions.env_changes(prev[0], runner) if prev else []
        if prev:  # the peer itself changed (another torch, another CuPy): another implementation, another line
            moved += [f"{m}: {prev[1][m]} -> {v}" for m, v in impl.items() if m in prev[1] and prev[1][m] != v]
        k = (prev[2] + 1 if moved else prev[2]) if prev else 0
        seg.append(k)
        change.append("; ".join(moved))
        last[fp] = (runner, impl, k)
    return d.assign(health=flags, segment=seg, env_change=change)


def method_breaks(rows: pd.DataFrame) -> pd.DataFrame:
    """Where a provider and dtype started being measured another way (another method version or input rotation:
    a new series beside an older one): ``provider``, ``dtype``, ``x``, ``run_id``, ``detail``. Read off the
    series themselves (the check reports such a break only while the new series is too short to test)."""
    out = []
    if rows.empty:
        return pd.DataFrame(out, columns=["provider", "dtype", "x", "run_id", "detail"])
    firsts = rows.groupby("series", sort=False).agg(provider=("provider", "first"), dtype=("dtype", "first"),
                                                  method_version=("method_version", "first"),
                                                  input_sets=("input_sets", "first"), created=("created", "min"),
                                                  x=("x", "min"), run_id=("run_id", "first"))
    for (prov, dtype), g in firsts.groupby(["provider", "dtype"], observed=True, sort=False):
        g = g.sort_values("created")
        for (_, a), (_, b) in zip(g.iloc[:-1].iterrows(), g.iloc[1:].iterrows()):
            out.append({"provider": prov, "dtype": dtype, "x": b["x"], "run_id": b["run_id"],
                        "detail": f"measured another way from here: method v{_whole(a['method_version'])} -> "
                                  f"v{_whole(b['method_version'])}, input sets {_whole(a['input_sets'])} -> "
                                  f"{_whole(b['input_sets'])}"})
    return pd.DataFrame(out, columns=["provider", "dtype", "x", "run_id", "detail"])


def _whole(v: Any) -> Any:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "?"
    return int(v) if isinstance(v, float) and v.is_integer() else v
