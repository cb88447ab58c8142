"""Rendering of a check: an alert's title and markdown, the command that reproduces it, the alerts JSON
(``robocache-alerts/1``) and the check's markdown report; record strings always escaped (:func:`md_text`)."""
from __future__ import annotations

import hashlib
import shlex
from datetime import UTC, datetime
from typing import Any

from ..schema import ALERTS_SCHEMA
from .changepoints import MIN_HISTORY, Break, Change, CheckResult, Drift, Point
from .noise import CALL_RATIO
from .records import ALWAYS_BELOW_US, MAX_PROCESSES

PLACE_SURE = 0.7  # an alert whose location's likelihood share (_place_p) is below this says a neighbour may be it


def measured_processes(c: Change) -> int:
    """How many fresh processes the alert's newest run timed its case in (``run --processes K``; 1: one): the
    series' newest point (``Change.tonight``, the night alerted), else the first point after the change; at most
    :data:`.records.MAX_PROCESSES` (what ``run`` takes: a record is data, never an argument ``run`` refuses)."""
    newest = c.tonight if c.tonight is not None else c.after
    return min(max(int(getattr(newest, "processes", 1) or 1), 1), MAX_PROCESSES)


def processes_args(k: int) -> str:
    """The ``run`` options that time a case in ``k`` fresh processes whatever its first one measures (none for
    k = 1): ``--processes-below-us`` at :data:`.records.ALWAYS_BELOW_US`, since the record does not say its run's
    threshold, and a slower commit's first process may land over the default one (12 us) and be timed once."""
    return f" --processes {int(k)} --processes-below-us {ALWAYS_BELOW_US:g}" if k > 1 else ""


def reproduce_command(c: Change) -> str:
    """The commands that measure the alert's case at the commits before and after it, as its newest run measured
    it (its suite, its machine; in K processes where that run timed it in K: :func:`measured_processes`), and
    compare the two runs."""
    s = c.series
    before, after = (shlex.quote((c.before.commit or "?")[:12]), shlex.quote((c.after.commit or "?")[:12]))
    run = (f"robocache-bench run --suite {shlex.quote(c.after.suite)} --cases {shlex.quote(c.key)} "
           f"--machine {shlex.quote(str(s['machine']))}{processes_args(measured_processes(c))}")
    return (f"git checkout {before} && {run} && git checkout {after} && {run} && "
            f"robocache-bench compare results/<run at {before}> results/<run at {after}>")


def alert_title(c: Change) -> str:
    s = c.series
    where = f"{s['arch']} ({s['machine']})" if s.get("arch") else str(s["machine"])
    span = (f"since {(c.after.commit or '?')[:12]}" if c.before.commit != c.after.commit
            else f"at {(c.after.commit or '?')[:12]} (same commit before: an environment change?)")
    what = "call ratio " if s.get("measure") == CALL_RATIO else ""
    return f"{s['case_id']} {s['dtype']} {s['provider']} {what}{(c.ratio - 1) * 100:+.1f}% slower on {where} {span}"


def _measured(s: dict[str, Any]) -> str:
    """What a series' points are: its median time, or a call-cost series' interleaved ratio (changepoints.check)."""
    if s.get("measure") == CALL_RATIO:
        return "interleaved call ratio (public call / bare launch, timed ABAB in one process)"
    return "median time"


def alert_markdown(c: Change, dashboard_url: str | None = None) -> str:
    """The alert as markdown; its History view linked at ``dashboard_url`` (:func:`links.base_url`'s default)."""
    from .. import links

    s = c.series
    lo, hi = c.ratio_ci
    return "\n".join([
        f"### {md_text(alert_title(c))}", "",
        f"- series: machine `{code_span(s['machine'])}` ({md_text(str(s['arch'] or 'arch unknown'))}), op `{code_span(s['op'])}`, case "
        f"`{code_span(s['case_id'])}`, provider `{code_span(s['provider'])}`, dtype `{code_span(s['dtype'])}`, "
        f"timer {md_text(str(s['timer']))}, cache {md_text(str(s['cache']))}, front end {md_text(str(s['frontend']))}",
        f"- change: {_measured(s)} x{c.ratio:.3f} (95% interval x{lo:.3f} to x{hi:.3f}); "
        f"{c.n_before} runs before, {c.n_after} after; series noise {c.sigma * 100:.2f}% per run; "
        f"q = {c.q_value:.2g} (Benjamini-Hochberg over all series)",
        f"- location: this commit range's share of the likelihood among the neighbouring ones {c.place_p:.0%}"
        + (" (not sure: a neighbouring commit may be the one)" if c.place_p < PLACE_SURE else ""),
        f"- last commit before: `{code_span(c.before.commit or '?')}` (run {md_text(c.before.run_id)}, {md_text(c.before.created)})",
        f"- first commit after: `{code_span(c.after.commit or '?')}` (run {md_text(c.after.run_id)}, {md_text(c.after.created)})",
        "- confirmation: " + {True: "a rerun of the case, tested alone, reproduced it",
                              False: "**unconfirmed**", None: "not asked (`check --confirm`)"}[c.confirmed]
        + (f": {md_text(c.confirm_note)}" if c.confirm_note else ""),
        f"- change id `{c.change_id}` (series and commit range: one issue per change, updated while it holds)",
        f"- reproduce: `{code_span(reproduce_command(c))}`",
        f"- dashboard: [History of {md_text(s['case_id'])} / {md_text(s['provider'])} / {md_text(s['dtype'])} "
        f"on {md_text(str(s['machine']))}]({links.history_url(s, dashboard_url)})",
    ]) + "\n"


def drift_title(d: Drift) -> str:
    s = d.series
    where = f"{s['arch']} ({s['machine']})" if s.get("arch") else str(s["machine"])
    what = "call ratio " if s.get("measure") == CALL_RATIO else ""
    return (f"{s['case_id']} {s['dtype']} {s['provider']} {what}drifting {d.slope * 100:+.2f}%/night on {where} "
            f"({d.total * 100:+.1f}% over {d.window} nights)")


def drift_markdown(d: Drift, dashboard_url: str | None = None) -> str:
    from .. import links

    s = d.series
    return "\n".join([
        f"### {md_text(drift_title(d))}", "",
        f"- series: machine `{code_span(s['machine'])}`, case `{code_span(s['case_id'])}`, provider "
        f"`{code_span(s['provider'])}`, dtype `{code_span(s['dtype'])}`, front end {md_text(str(s['frontend']))}",
        f"- trend of the {_measured(s)}: Theil-Sen slope {d.slope * 100:+.2f}% per night (95% interval {d.slope_ci[0] * 100:+.2f}% to "
        f"{d.slope_ci[1] * 100:+.2f}%), Mann-Kendall tau {d.tau:.2f}, one-sided p = {d.p_value:.2g}, "
        f"q = {d.q_value:.2g}; a line fits these nights better than any single step",
        f"- window: {d.window} nights, run {md_text(d.first.run_id)} (`{code_span((d.first.commit or '?')[:12])}`) to "
        f"run {md_text(d.last.run_id)} (`{code_span((d.last.commit or '?')[:12])}`): a drift, no single commit is blamed",
        f"- dashboard: [History of this series]({links.history_url(s, dashboard_url)})",
    ]) + "\n"


def break_markdown(b: Break) -> str:
    s = b.series
    moved = f" (x{b.ratio:.3f})" if b.ratio else ""
    return (f"- {md_text(b.kind)} change, not a regression: {md_text(s['case_id'])} {md_text(s['dtype'])} {md_text(s['provider'])} "
            f"on {md_text(str(s['machine']))}{moved}: {md_text(b.detail)}")


def alerts_json(res: CheckResult, dashboard_url: str | None = None) -> dict[str, Any]:
    """The check as a ``robocache-alerts/1`` document (:class:`robocache.bench.schema.AlertsDoc` as builtins: every
    field written; ``schema.encode_alerts`` validates it on the way to a file)."""
    from .. import links

    def pt(p: Point) -> dict[str, Any]:
        return {"commit": p.commit, "run_id": p.run_id, "created": p.created}

    def one(c: Change) -> dict[str, Any]:
        return {"fingerprint": c.fingerprint, "change_id": c.change_id, "kind": "step", "series": c.series,
                "title": alert_title(c) if c.direction == "slower" else alert_title(c).replace("slower", "faster"),
                "direction": c.direction, "ratio": c.ratio, "ratio_ci": list(c.ratio_ci), "q_value": c.q_value,
                "p_value": c.p_value, "noise": c.sigma, "n_before": c.n_before, "n_after": c.n_after,
                "before": pt(c.before), "after": pt(c.after),
                "case_key": c.key, "reproduce": reproduce_command(c), "markdown": alert_markdown(c, dashboard_url),
                "link": links.history_url(c.series, dashboard_url),
                "confirmed": c.confirmed, "confirm_note": c.confirm_note, "reruns": c.reruns,
                "location_p": c.place_p}

    def drift(d: Drift) -> dict[str, Any]:
        return {"fingerprint": d.fingerprint, "change_id": hashlib.sha256(f"{d.fingerprint}|drift".encode())
                .hexdigest()[:12], "kind": "drift", "series": d.series, "title": drift_title(d),
                "direction": d.direction, "slope_per_night": d.slope, "slope_ci": list(d.slope_ci),
                "total": d.total, "window": d.window, "tau": d.tau, "p_value": d.p_value, "q_value": d.q_value,
                "first": pt(d.first), "last": pt(d.last), "case_key": d.key, "markdown": drift_markdown(d, dashboard_url),
                "link": links.history_url(d.series, dashboard_url),
                "confirmed": d.confirmed, "confirm_note": d.confirm_note, "reruns": d.reruns}

    def brk(b: Break) -> dict[str, Any]:
        return {"fingerprint": b.fingerprint, "kind": b.kind, "series": b.series, "detail": b.detail,
                "run_id": b.run_id, "created": b.created, "ratio": b.ratio,
                "link": links.history_url(b.series, dashboard_url)}

    return {"schema": ALERTS_SCHEMA, "generated": datetime.now(UTC).isoformat(timespec="seconds"),
            "alerts": [one(c) for c in res.alerts], "improvements": [one(c) for c in res.improvements],
            "drifts": [drift(d) for d in res.drifts], "breaks": [brk(b) for b in res.breaks],
            "checked": sorted(res.checked),
            # tested(): series_current, series_not_enough_history, series_stale, status (added within /1: readers
            # of the older keys are unaffected)
            "summary": {**tested(res), "series": res.series, "series_checked": res.series_checked,
                        "candidates": res.candidates, "significant_changes": len(res.changes),
                        "alerts": len(res.alerts), "improvements": len(res.improvements),
                        "drifts": len(res.drifts), "breaks": len(res.breaks),
                        "excluded_points": res.excluded_points, "excluded_reasons": res.excluded_reasons,
                        "floor": res.floor, "fdr_q": res.fdr_q}}


def tested(res: CheckResult) -> dict[str, Any]:
    """What the check could answer: ``series_current`` (in the newest run of their suite on their machine), ``series_checked`` (tested:
    enough healthy history), ``series_not_enough_history`` (current, too short to test: neither a regression nor
    its absence can be said), ``series_stale`` (not in the newest run: not tested tonight) and ``status``:
    ``regression`` (an alert or a drift), ``not_enough_history`` (nothing could be tested), ``partial`` (no
    regression in the series tested, others too short) or ``no_regression`` (every current series tested)."""
    current = res.series - res.series_stale
    short = max(current - res.series_checked, 0)
    if res.alerts or res.drifts:
        status = "regression"
    elif res.series_checked == 0:
        status = "not_enough_history"
    elif short:
        status = "partial"
    else:
        status = "no_regression"
    return {"series_current": current, "series_checked": res.series_checked, "series_not_enough_history": short,
            "series_stale": res.series_stale, "status": status}


def check_markdown(res: CheckResult, dashboard_url: str | None = None) -> str:
    t = tested(res)
    short, stale = t["series_not_enough_history"], t["series_stale"]
    lines = ["## robocache-bench check", "",
             f"Tested {res.series_checked} of {t['series_current']} series"
             + (f" ({short} with not enough history: fewer than {MIN_HISTORY} healthy runs)" if short else "")
             + (f"; {stale} more not in the newest run of their suite on their machine (retired, or measured another way), not tested"
                if stale else "") + "; "
             f"{res.excluded_points} points excluded ({', '.join(f'{k} {v}' for k, v in sorted(res.excluded_reasons.items())) or 'none'}); "
             f"{res.candidates} candidate change points, {len(res.changes)} significant "
             f"(Benjamini-Hochberg q <= {res.fdr_q:g}, beyond {res.floor:.0%}).", ""]
    if res.alerts:
        lines += [f"**{len(res.alerts)} performance regression(s)**", ""] + [alert_markdown(c, dashboard_url) for c in res.alerts]
    elif t["status"] == "not_enough_history":
        # nothing was tested: "no regression" would be a pass that never looked
        lines.append(f"Not enough history: none of the {t['series_current']} series has the {MIN_HISTORY} healthy "
                     "runs a test needs, so no regression can be found or ruled out yet (run the suite on more "
                     "commits of this machine).")
    elif short:
        lines.append(f"No regression found in the {res.series_checked} series tested. Not enough history for the "
                     f"other {short}: no regression can be found or ruled out there yet.")
    else:
        lines.append(f"No performance regression in the {res.series_checked} series tested.")
    if res.drifts:
        lines += ["", f"**{len(res.drifts)} drift(s)** (a trend over the newest nights, not one commit):", ""]
        lines += [drift_markdown(d, dashboard_url) for d in res.drifts]
    if res.breaks:
        lines += ["", f"{len(res.breaks)} method or environment change(s) (not regressions, no issue):", ""]
        lines += [break_markdown(b) for b in res.breaks]
    if res.improvements:
        lines += ["", f"{len(res.improvements)} improvement(s):", ""]
        lines += [f"- {md_text(alert_title(c).replace('slower', 'faster'))} (x{c.ratio:.3f})" for c in res.improvements]
    return "\n".join(lines) + "\n"


def us_text(x: float | None) -> str:
    return "" if x is None else (f"{x:.2f} us" if x < 1000 else f"{x / 1000:.2f} ms")


def md_text(text: Any) -> str:
    """Markdown-safe text: record strings never become markup (or HTML) in a report or an issue."""
    s = str(text)
    for ch in "\\`*_{}[]()<>#+!|":
        s = s.replace(ch, "\\" + ch)
    # a record string must not mention anyone in a GitHub issue: a word joiner after @ breaks the mention
    return s.replace("\n", " ").replace("@", "@\u2060")


def code_span(text: Any) -> str:
    """Text for inside a code span: backticks and newlines removed."""
    return str(text).replace("`", "'").replace("\n", " ").replace("@", "@\u2060")

