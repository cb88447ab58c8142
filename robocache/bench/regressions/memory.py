"""The confirmation's memory of refuted looks (issue 27): which change points earlier nights' reruns refuted, and
how often, so that the next look at the same change point is tested at a spent level (:func:`.confirmation.spent`).

A change point is remembered by its series and the two runs around it (the last run before, the first run after;
a drift: the nights around its window's start), not by ``Change.change_id``. The change id (series and commit
range) stays the issue tracker's key (``scripts/alerts_to_issues.py``: one issue per change), but its commit range
moves whenever the estimated location moves by one night between two nights' checks of the same step, and each
move reset the spent budget (issue 27's review: 7% of re-proposals). Here a step re-proposed one night earlier or
later shares one of its two runs with the remembered one and is the same change point. One exception keeps the
night a step lands at its full level: a change whose first run after is tonight's newest night is matched only
exactly (the step one night later than a refuted one is then tonight's new night, which no earlier night saw).

A drift matches only its own window's start: its window ends tonight and slides each night, so a refuted drift's
start is tested again only where tomorrow's window starts at the same night (it never does with the nightly's
one night more and ``DRIFT_WINDOWS``' lengths, which is why such entries are pruned, :func:`Memory.prune`).

JSON (``check --json``'s ``refuted_looks``, :class:`..schema.RefutedLook`): ``change_id``, ``fingerprint``,
``looks``, and ``kind``, ``before``, ``after`` (run ids), ``rerun_us`` (a step's reruns) and, where those are a
call-cost series' interleaved call ratios rather than times, ``measure: "call_ratio"``: a step's reruns pool only
into a later look of the same measure (its looks are counted whatever the measure). An entry of an older writer
(no ``after``) is matched by its change id alone, as before.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
import math
from dataclasses import dataclass, field
from typing import Any

from .changepoints import DRIFT_WINDOWS, Change

# looks beyond this in a memory file are clamped to it (a count no night could have reached: 10 years of nights).
# Any count >= confirmation.SPENT_LOOKS is tested alike (the floor), so the clamp changes no decision.
MAX_LOOKS = 3660
# a step's reruns kept for its next look (the newest): two nights' first and second looks
MAX_POOLED = 10
# why Memory.prune drops an entry
NOT_CHECKED = "of a series not checked tonight"
OUT_OF_WINDOW = "no longer in their series' checked window"
OLD_DRIFT = "drift window(s) never tested again"


@dataclass
class Look:
    """One remembered change point: ``looks`` nights' reruns refuted it."""
    fingerprint: str
    looks: int
    change_id: str = ""  # the tracker's key the last time it was refuted (kept for readers of alerts.json)
    kind: str = "step"  # "step" or "drift"
    before: str | None = None  # run id of the last night before the change point (a drift: before its window)
    after: str | None = None  # run id of the first night after it (a drift: its window's first night)
    # a step's reruns on the nights that refuted it (log-times, newest last, at most MAX_POOLED): pooled into its next
    # look's test (confirmation.confirm)
    reruns: list[float] = field(default_factory=list)
    # what the reruns are of: "time" (log median times), or "call_ratio" (a call-cost series checked on its
    # interleaved ratio: log call ratios); reruns pool only into a look of the same measure (measure_of)
    measure: str = "time"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"change_id": self.change_id, "fingerprint": self.fingerprint, "looks": self.looks}
        if self.after is not None:
            out.update(kind=self.kind, before=self.before, after=self.after)
        if self.reruns:
            out["rerun_us"] = [round(math.exp(x), 6) for x in self.reruns]
            if self.measure != "time":
                out["measure"] = self.measure
        return out


def measure_of(c: Change) -> str:
    """What a change's reruns are of: its series' ``measure`` (changepoints.check), "time" where unset."""
    return str(c.series.get("measure") or "time")


def kind_of(c: Change) -> str:
    return "drift" if c.drift is not None else "step"


def runs_of(c: Change) -> tuple[str | None, str | None]:
    """The two runs a change point sits between: (last before, first after), run ids (None where unknown)."""
    return (c.before.run_id if c.before is not None else None), (c.after.run_id if c.after is not None else None)


def same_point(e: Look, c: Change) -> bool:
    """Is ``c`` the change point ``e`` remembers (see the module doc)?"""
    if e.fingerprint != c.fingerprint:
        return False
    if e.after is None:  # an older writer's entry: its change id alone
        return bool(e.change_id) and e.change_id == c.change_id
    b, a = runs_of(c)
    if e.kind != kind_of(c) or a is None:
        return False
    if (e.before, e.after) == (b, a):
        return True
    if e.kind == "drift":
        return e.after == a  # the same window start (its own night before may be a night excluded since)
    if e.before is not None and e.before == a:  # re-proposed one night earlier
        return True
    tonight = c.tonight.run_id if c.tonight is not None else None
    # re-proposed one night later, unless its first run after is tonight's: then it is a step landing tonight
    return b is not None and e.after == b and a != tonight


class Memory:
    """The refuted change points one nightly job carries from night to night (``check --refuted-before``)."""

    def __init__(self, entries: Iterable[Look] = ()) -> None:
        self.entries: list[Look] = list(entries)

    def __len__(self) -> int:
        return len(self.entries)

    def find(self, c: Change) -> Look | None:
        """The entry ``c`` is a later look at (the one of most looks where several match), else None."""
        hits = [e for e in self.entries if same_point(e, c)]
        return max(hits, key=lambda e: e.looks) if hits else None

    def looks(self, c: Change) -> int:
        """Tonight's look at ``c``: 1 + the looks that refuted it before. Sets ``c.pooled`` to the reruns of the
        nights that refuted it (a step's; a drift's level moves night to night, its reruns are never pooled)."""
        e = self.find(c)
        # the reruns of the same measure only: a call-cost series checked on its ratio one night and on its host
        # time the next (tonight's record lacks the ratio) is the same change point, but log ratios are no log-times
        c.pooled = list(e.reruns) if e is not None and kind_of(c) == "step" and e.measure == measure_of(c) else []
        return 1 + (e.looks if e is not None else 0)

    def refuted(self, c: Change) -> None:
        """Tonight's reruns refuted ``c`` at its look ``c.looks``: remembered at tonight's place (the entries it
        matched merged into one)."""
        hits = [e for e in self.entries if same_point(e, c)]
        self.entries = [e for e in self.entries if not any(e is h for h in hits)]
        b, a = runs_of(c)
        pooled = (list(c.pooled) + list(c.rerun_logs))[-MAX_POOLED:] if kind_of(c) == "step" else []
        self.entries.append(Look(c.fingerprint, min(max(c.looks, 1), MAX_LOOKS), c.change_id, kind_of(c), b, a,
                                 pooled, measure_of(c)))

    def prune(self, history: Mapping[str, Iterable[str]]) -> list[tuple[Look, str]]:
        """Drops the entries that can never match again and returns them with why: ``history`` is each series
        checked tonight (fingerprint) -> its runs in the check's window, oldest first. Dropped: a series not
        checked tonight; a change point whose first run after is no longer in its series' window (out of the
        history the check reads, or the run is gone); a drift whose window start is farther back than the longest
        drift window can reach from tomorrow's newest night. An older writer's entry (no runs) is kept while its
        series is checked (it ages out with its first refutation, which rewrites it)."""
        runs = {fp: {r: k for k, r in enumerate(rs)} for fp, rs in history.items()}
        keep, dropped = [], []
        for e in self.entries:
            rs = runs.get(e.fingerprint)
            if rs is None:
                dropped.append((e, NOT_CHECKED))
            elif e.after is None:
                keep.append(e)
            elif e.after not in rs:
                dropped.append((e, OUT_OF_WINDOW))
            elif e.kind == "drift" and len(rs) - rs[e.after] >= max(DRIFT_WINDOWS):
                dropped.append((e, OLD_DRIFT))
            else:
                keep.append(e)
        self.entries = keep
        return dropped

    def to_json(self) -> list[dict[str, Any]]:
        return [e.to_json() for e in sorted(self.entries, key=lambda e: (e.fingerprint, e.after or "",
                                                                         e.change_id))]

    @classmethod
    def from_json(cls, items: Iterable[Mapping[str, Any]]) -> tuple[Memory, list[str]]:
        """The memory ``check --json`` wrote (its ``refuted_looks``, already schema-checked), and a note per entry
        dropped or clamped: looks < 1 is dropped (no look refuted it), looks > MAX_LOOKS clamped to it."""
        out, notes = [], []
        for k, d in enumerate(items):
            looks = int(d["looks"])
            if looks < 1:
                notes.append(f"refuted_looks[{k}]: looks {looks} < 1, dropped")
                continue
            if looks > MAX_LOOKS:
                notes.append(f"refuted_looks[{k}]: looks {looks} > {MAX_LOOKS}, clamped to {MAX_LOOKS}")
                looks = MAX_LOOKS
            us = list(d.get("rerun_us") or [])
            good = [math.log(x) for x in us if isinstance(x, (int, float)) and math.isfinite(x) and x > 0]
            if len(good) < len(us) or len(good) > MAX_POOLED:
                notes.append(f"refuted_looks[{k}]: {len(us) - len(good)} rerun time(s) not finite and positive, "
                             f"{max(len(good) - MAX_POOLED, 0)} beyond the newest {MAX_POOLED}: dropped")
            out.append(Look(str(d["fingerprint"]), looks, str(d.get("change_id") or ""), str(d.get("kind") or "step"),
                            d.get("before"), d.get("after"), good[-MAX_POOLED:], str(d.get("measure") or "time")))
        return cls(out), notes
