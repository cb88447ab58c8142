"""Regression verdicts between two runs, and change points over the whole history.

The package, by stage: :mod:`.records` (what one record says: time, noise, health, case, runner),
:mod:`.noise` (the priors and a series' own noise), :mod:`.verdicts` (``compare``), :mod:`.changepoints`
(``check``), :mod:`.confirmation` (``confirm``) and :mod:`.alerts` (titles, markdown, the alerts JSON). The
names below are re-exported here; a test that replaces one patches the module that reads it.

Two questions, one noise model:

``compare(base, new)``
    Per case: ``same``, ``inconclusive``, ``faster``, ``slower``, ``incomparable`` or ``failed``. A change is
    ``slower`` or ``faster`` only when it exceeds both a floor (default 3%) and ``Z`` times that case's measured
    noise; beyond the floor but within the noise it is ``inconclusive`` (the data cannot tell), within the floor
    ``same``. The noise of a
    ratio of two medians is the within-run uncertainty of each (the harness's 95% interval of the median,
    ``method.noise``) plus, twice, the *between-run* noise: on the H200 two runs of one commit differed by
    up to 18x their within-run intervals (a fresh process, other input addresses, clocks), so within-run
    intervals alone would cry wolf. The between-run noise is the series' own history when given
    (``history=``: every healthy run of the same series, :func:`schema.series_key`, except the two compared)
    pooled with the provider's prior (:func:`prior_noise`, fitted per provider and time bucket from the
    committed records, ``noise_priors.json``), widened and weighing less as the history grows
    (:func:`shrink`). A call-cost case (timer ``host_loop``) whose two records carry ``dispatch.interleaved`` is
    compared on that ratio (public call / bare launch, timed ABAB in one process: :func:`records.call_ratio`), its
    noise the ratio's (its history's, the ``<provider>|host-ratio`` prior): the host's state cancels in it, not in
    the absolute host time; without it on either side, on the host time as before, said in the verdict's reason.

``check(records)``
    Over the history (every series, :func:`schema.series_key`: machine, case, provider, dtype, timer, cache,
    grid version, front end, input rotation, method version), in run order, with unhealthy points dropped
    (failed or incorrect status, throttled, contended): change points from ``ruptures`` (PELT, exact optimal
    segmentation under a penalty; the penalty is scaled by the series' own noise, so a quiet series segments
    at small steps and a noisy one only at large ones), plus the newest one and two runs as candidate
    segments (a regression must be found the night it lands, before PELT's minimum segment could see it);
    PELT's last change point stays a candidate whatever its age. Each candidate gets a p-value (difference
    of segment means of log-times over the series' robust noise, Student t), all candidates of all series
    together go through Benjamini-Hochberg (``scipy.stats.false_discovery_control``): false discoveries are
    controlled across the grid, not per series. An alert is a significant change that still holds at the
    newest run, beyond the floor, in the slower direction; it names the series, the ratio with its 95%
    interval, the last commit before and the first after, and the command that reproduces it. A change
    across a change of runner (:func:`env_fingerprint`) or of measuring method is a *break*, never an
    alert; a trend over the newest nights is a *drift* (Theil-Sen, Mann-Kendall), never blamed on one commit.
    A call-cost series whose newest point carries its interleaved ratio is checked on its ratios (the points that
    carry one; the ratio's prior; the confirmation's reruns judged on their ratios), as ``compare`` judges it.

    With a confirmation rerun to follow (``check(screen=SCREEN_P)``, ``check --confirm``), a per-series
    screen replaces Benjamini-Hochberg as the gate to the rerun: the rerun is the check on those cases.

``confirm(first, rerun)``
    The alerted cases, and the drifting ones, measured again (CONFIRM_RUNS fresh runs; CONFIRM_MORE more when
    those are consistent with the change but not conclusive, :func:`rerun_more`), tested *alone* against the
    level before the change (:func:`rerun_test`: the series' noise, the tails of the provider's runs and of the
    series' own nights, the nights before): the nights that raised the alert are not counted twice. The loop
    (:func:`confirm_alerts`) is the one ``check --confirm``, ``check --reruns DIR`` (reruns measured elsewhere)
    and the out-of-sample replay (:mod:`.replay`) call.

Why ruptures + SciPy rather than Apache Otava (E-Divisive + t-test, the method this mirrors) or MongoDB's
signal-processing-algorithms: apache-otava 0.8.0 pins numpy 2.2 (we pin 2.4) and pulls database, BigQuery
and Slack clients; signal-processing-algorithms ships only a source distribution that compiles C.
ruptures is maintained, numpy/scipy-only, with wheels for our Pythons.
"""
from __future__ import annotations

from .alerts import (PLACE_SURE, alert_markdown, alert_title, alerts_json, break_markdown, check_markdown,
                     drift_markdown, drift_title, md_text, reproduce_command)
from .changepoints import (DRIFT_MIN, DRIFT_Q, DRIFT_WINDOWS, FDR_Q, MAX_HISTORY, MIN_HISTORY, PELT_BETA, PLACE_RADIUS,
                           RECENT, SCREEN_MIN_BEFORE, SCREEN_P, Break, Change, CheckResult, Drift, Point, check)
from .confirmation import (CONFIRM_MORE, CONFIRM_P, CONFIRM_P_HELD, CONFIRM_RUNS, CONFIRM_RUNS_MAX, HELD_NIGHTS, HELD_P,
                           RERUN_SPARE, confirm, confirm_alerts, drift_change, rerun_more, rerun_test, to_confirm)
from .noise import (LEVEL_Q, NOISE_MIN, PRIOR_ABS_US, PRIOR_DOF, PRIOR_MIN_N, PRIOR_REL, PRIOR_WIDEN, PRIORS_FILE,
                    fit_priors, prior_noise, prior_pool, priors, series_sigma, shrink)
from .records import ENV_FIELDS, FLOOR, case_key, case_label, env_changes, env_fingerprint, env_print
from .verdicts import VERDICTS, Z, Verdict, compare, compare_markdown, history_noise

__all__ = [
    # records
    "ENV_FIELDS", "FLOOR", "case_key", "case_label", "env_changes", "env_fingerprint", "env_print",
    # noise
    "LEVEL_Q", "NOISE_MIN", "PRIOR_ABS_US", "PRIOR_DOF", "PRIOR_MIN_N", "PRIOR_REL", "PRIOR_WIDEN", "PRIORS_FILE",
    "fit_priors", "prior_noise", "prior_pool", "priors", "series_sigma", "shrink",
    # compare
    "VERDICTS", "Z", "Verdict", "compare", "compare_markdown", "history_noise",
    # check
    "DRIFT_MIN", "DRIFT_Q", "DRIFT_WINDOWS", "FDR_Q", "MAX_HISTORY", "MIN_HISTORY", "PELT_BETA", "PLACE_RADIUS",
    "RECENT", "SCREEN_MIN_BEFORE", "SCREEN_P", "Break", "Change", "CheckResult", "Drift", "Point", "check",
    # confirm
    "CONFIRM_MORE", "CONFIRM_P", "CONFIRM_P_HELD", "CONFIRM_RUNS", "CONFIRM_RUNS_MAX", "HELD_NIGHTS", "HELD_P",
    "RERUN_SPARE", "confirm", "confirm_alerts", "drift_change", "rerun_more", "rerun_test", "to_confirm",
    # alerts
    "PLACE_SURE", "alert_markdown", "alert_title", "alerts_json", "break_markdown", "check_markdown", "drift_markdown",
    "drift_title", "md_text", "reproduce_command",
]
