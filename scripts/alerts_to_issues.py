#!/usr/bin/env python3
"""Open, update and close GitHub issues from `robocache-bench check --json` files: one issue per change.

    python3 scripts/alerts_to_issues.py night/*/alerts.json [--repo OWNER/NAME] [--label L] [--dry-run]

Issues are keyed by the change, not the night: a regression is a series and a commit range (the last commit
before, the first after), and the slower alerts of one machine with the same commit range are ONE issue that
lists every series the commit moved (one commit slowing fifty series opens one issue, not fifty). A drift
(a trend over nights, no commit blamed) is one issue per drifting series. Each issue's body carries
``<!-- robocache-change: KEY -->`` and one ``<!-- robocache-series: FINGERPRINT -->`` per series.

- an OPEN issue carrying the label with the change's key, or listing one of its series (the regression still
  holds; its placement may have moved by a commit), gets a comment: "Still slower on <date> at <commit>" and
  the night's alerts (updated while it holds);
- otherwise a new issue is created (title: the alert's, or "N series slower on MACHINE since COMMIT");
- an OPEN issue none of whose series is slower tonight, every one of them checked tonight (the files'
  ``checked`` list: current series with enough history), is closed with a comment "Recovered on <date>".
  A series of a machine that did not report tonight keeps its issue open.

With ``--bisect FILE...`` (the night's ``robocache-bench bisect`` documents, ``robocache-bisect/1``), each
finished bisection is added to its change's issue (matched by the issue key it carries): in the body of an issue
opened tonight, else in tonight's comment, with its culprit, evidence and the History link where the culprit is
marked.

Method or environment changes (``breaks``) and improvements never open issues. Alerts of a check without
``--confirm`` (``"confirmed": null``) open none either unless --include-unconfirmed; an alert that could not be
measured again (``false``) does, marked.

Standard library only (urllib): it runs on a bare GitHub-hosted runner with the job's ``GITHUB_TOKEN``
(``issues: write`` and nothing else). Environment: ``GITHUB_TOKEN`` (required unless --dry-run),
``GITHUB_REPOSITORY`` (owner/name, unless --repo), ``GITHUB_API_URL`` (default https://api.github.com),
and, for a link back to the workflow run, ``GITHUB_SERVER_URL`` and ``GITHUB_RUN_ID``.
Exit codes: 0 done, 1 a GitHub API call failed (the message names the call), 2 bad arguments or a bad
alerts file (nothing is sent to GitHub when any file is bad).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

# The alerts format is robocache.bench.schema.AlertsDoc; this job's python3 has nothing installed (a sparse checkout
# of this one file, beside the issues: write token), so the script checks what it reads from it with the standard
# library, on the same fields (tests/test_alerts_schema.py, tests/test_alerts_readers.py: every field read here).
SCHEMA = "robocache-alerts/1"
BISECT_SCHEMA = "robocache-bisect/1"
BISECT_MARKER = "<!-- robocache-bisect: {} -->"
BISECT_FINAL = ("found", "not_reproducible", "spread", "undecided", "budget", "untestable", "failed")
DEFAULT_LABEL = "performance-regression"
MARKER = "<!-- robocache-series: {} -->"
MARKER_RE = re.compile(r"<!-- robocache-series: ([0-9a-f]{12}) -->")
CHANGE_MARKER = "<!-- robocache-change: {} -->"
CHANGE_RE = re.compile(r"<!-- robocache-change: ([0-9a-f]{12}) -->")
FINGERPRINT_RE = re.compile(r"^[0-9a-f]{12}$")
REQUIRED = ("fingerprint", "series", "title", "direction", "ratio", "before", "after", "markdown")  # of an alert
DRIFT_REQUIRED = ("fingerprint", "change_id", "series", "title", "markdown", "direction", "last")
TITLE_MAX = 250  # GitHub's limit is 256 characters
BODY_MAX = 60000  # GitHub's limit is 65,536 characters for bodies and comments
TIMEOUT_S = 30


class AlertsFileError(ValueError):
    """The alerts file is not a robocache-alerts/1 document."""


class GitHubError(RuntimeError):
    """A GitHub API call failed; the message names the call."""


# ---------------------------------------------------------------------------------------------------------
# the alerts file

def load_doc(path: str) -> dict[str, Any]:
    """One ``robocache-bench check --json`` file, validated: ``alerts``, ``drifts`` (optional: [] when absent),
    ``checked`` (optional: None when absent, then no issue is closed on its account), ``generated``."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise AlertsFileError(f"{path}: cannot read: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise AlertsFileError(f"{path}: not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise AlertsFileError(f"{path}: expected a JSON object, got {type(doc).__name__}")
    if doc.get("schema") != SCHEMA:
        raise AlertsFileError(f"{path}: schema is {doc.get('schema')!r}, expected {SCHEMA!r} "
                              "(is this the output of `robocache-bench check --json`?)")
    alerts = doc.get("alerts")
    if not isinstance(alerts, list):
        raise AlertsFileError(f"{path}: 'alerts' must be a list, got {type(alerts).__name__}")
    for i, a in enumerate(alerts):
        where = f"{path}: alerts[{i}]"
        if not isinstance(a, dict):
            raise AlertsFileError(f"{where}: expected an object, got {type(a).__name__}")
        missing = [k for k in REQUIRED if k not in a]
        if missing:
            raise AlertsFileError(f"{where}: missing key(s) {', '.join(missing)}")
        _hex(where, "fingerprint", a["fingerprint"])
        if a["direction"] not in ("slower", "faster"):
            raise AlertsFileError(f"{where}: direction must be 'slower' or 'faster', got {a['direction']!r}")
        for k in ("title", "markdown"):
            if not isinstance(a[k], str) or not a[k].strip():
                raise AlertsFileError(f"{where}: {k} must be a non-empty string")
        if not isinstance(a["series"], dict):
            raise AlertsFileError(f"{where}: series must be an object")
        for k in ("before", "after"):
            if not isinstance(a[k], dict):
                raise AlertsFileError(f"{where}: {k} must be an object with commit, run_id, created")
        if isinstance(a["ratio"], bool) or not isinstance(a["ratio"], (int, float)):
            raise AlertsFileError(f"{where}: ratio must be a number")
    drifts = doc.get("drifts", [])
    if not isinstance(drifts, list):
        raise AlertsFileError(f"{path}: 'drifts' must be a list, got {type(drifts).__name__}")
    for i, d in enumerate(drifts):
        where = f"{path}: drifts[{i}]"
        if not isinstance(d, dict):
            raise AlertsFileError(f"{where}: expected an object, got {type(d).__name__}")
        missing = [k for k in DRIFT_REQUIRED if k not in d]
        if missing:
            raise AlertsFileError(f"{where}: missing key(s) {', '.join(missing)}")
        _hex(where, "fingerprint", d["fingerprint"])
        _hex(where, "change_id", d["change_id"])
        for k in ("title", "markdown"):
            if not isinstance(d[k], str) or not d[k].strip():
                raise AlertsFileError(f"{where}: {k} must be a non-empty string")
        if not isinstance(d["series"], dict) or not isinstance(d["last"], dict):
            raise AlertsFileError(f"{where}: series and last must be objects")
    checked = doc.get("checked")
    if checked is not None:
        if not isinstance(checked, list):
            raise AlertsFileError(f"{path}: 'checked' must be a list of fingerprints")
        for i, fp in enumerate(checked):
            _hex(f"{path}: checked[{i}]", "fingerprint", fp)
    return {"alerts": alerts, "drifts": drifts, "checked": checked, "generated": str(doc.get("generated") or "")}


def load_bisection(path: str) -> dict[str, Any] | None:
    """One ``robocache-bench bisect`` document, checked for what an issue shows (AlertsFileError otherwise); None
    when it belongs to no alert group (a bisection of a range given by hand) or is still running."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise AlertsFileError(f"{path}: cannot read: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise AlertsFileError(f"{path}: not JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("schema") != BISECT_SCHEMA:
        raise AlertsFileError(f"{path}: not a {BISECT_SCHEMA} document (the output of `robocache-bench bisect`)")
    _hex(path, "id", doc.get("id"))
    if doc.get("status") not in ("running", *BISECT_FINAL):
        raise AlertsFileError(f"{path}: status {doc.get('status')!r} is not a bisection status")
    if not isinstance(doc.get("markdown"), str) or not doc["markdown"].strip():
        raise AlertsFileError(f"{path}: markdown must be a non-empty string")
    alert = doc.get("alert")
    if alert is None or doc["status"] == "running":
        return None
    if not isinstance(alert, dict):
        raise AlertsFileError(f"{path}: alert must be an object with the issue key")
    _hex(f"{path}: alert", "key", alert.get("key"))
    return doc


def _hex(where: str, what: str, value: Any) -> None:
    # fingerprints go into HTML comments and are matched back: 12 hex digits, nothing else
    if not isinstance(value, str) or not FINGERPRINT_RE.match(value):
        raise AlertsFileError(f"{where}: {what} must be 12 lowercase hex digits, got {value!r}")


# ---------------------------------------------------------------------------------------------------------
# GitHub REST API, stdlib only

class GitHub:
    """The few REST calls we need. Sends the token only to ``api_url``'s origin (pagination included)."""

    def __init__(self, api_url: str, repo: str, token: str) -> None:
        self.api_url = api_url.rstrip("/")
        self.repo = repo
        self.token = token
        self.calls = 0
        parts = urllib.parse.urlsplit(self.api_url)
        self._origin = (parts.scheme, parts.netloc)

    def request(self, method: str, url: str, body: Any = None) -> tuple[Any, dict[str, str]]:
        """(decoded JSON, headers) of one call; ``url`` is a path under the API or a full URL on its origin."""
        if not url.startswith(("http://", "https://")):
            url = self.api_url + url
        parts = urllib.parse.urlsplit(url)
        if (parts.scheme, parts.netloc) != self._origin:
            raise GitHubError(f"{method} {url}: refusing to send the token to another host than {self.api_url}")
        call = f"{method} {parts.path}" + (f"?{parts.query}" if parts.query else "")
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method, headers={
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {self.token}",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "robocache-alerts-to-issues",
            **({"Content-Type": "application/json"} if data is not None else {}),
        })
        self.calls += 1
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:  # noqa: S310 - https API URL
                raw = resp.read()
                headers = {k.lower(): v for k, v in resp.headers.items()}
        except urllib.error.HTTPError as e:
            detail = ""
            try:
                err = json.loads(e.read() or b"{}")
                detail = err.get("message", "") if isinstance(err, dict) else ""
            except (ValueError, OSError):
                pass
            hint = {401: " (is GITHUB_TOKEN valid?)",
                    403: " (does the token have issues: write? rate limited?)",
                    404: " (wrong repository, or the token cannot see it)",
                    410: " (are issues enabled for this repository?)"}.get(e.code, "")
            raise GitHubError(f"{call}: HTTP {e.code} {e.reason}{': ' + detail if detail else ''}{hint}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            raise GitHubError(f"{call}: {getattr(e, 'reason', e)}") from None
        try:
            return (json.loads(raw) if raw else None), headers
        except ValueError:
            raise GitHubError(f"{call}: the response is not JSON") from None

    def _repo_path(self, rest: str) -> str:
        owner, name = self.repo.split("/", 1)
        return f"/repos/{urllib.parse.quote(owner)}/{urllib.parse.quote(name)}{rest}"

    def open_issues(self, label: str) -> list[dict[str, Any]]:
        """Every open issue with ``label`` (pull requests left out), following the Link header's next pages."""
        query = urllib.parse.urlencode({"state": "open", "labels": label, "per_page": 100})
        url: str | None = self._repo_path(f"/issues?{query}")
        out: list[dict[str, Any]] = []
        while url:
            page, headers = self.request("GET", url)
            if not isinstance(page, list):
                raise GitHubError(f"GET {url}: expected a list of issues")
            out.extend(i for i in page if isinstance(i, dict) and "pull_request" not in i)
            url = _next_link(headers.get("link", ""))
        return out

    def ensure_label(self, label: str) -> None:
        try:
            self.request("GET", self._repo_path(f"/labels/{urllib.parse.quote(label, safe='')}"))
        except GitHubError as e:
            if "HTTP 404" not in str(e):
                raise
            self.request("POST", self._repo_path("/labels"), {
                "name": label, "color": "d93f0b",
                "description": "Opened by the nightly GPU benchmarks (robocache-bench check)"})

    def create_issue(self, title: str, body: str, labels: list[str]) -> dict[str, Any]:
        issue, _ = self.request("POST", self._repo_path("/issues"), {"title": title, "body": body, "labels": labels})
        return issue

    def comment(self, number: int, body: str) -> dict[str, Any]:
        c, _ = self.request("POST", self._repo_path(f"/issues/{int(number)}/comments"), {"body": body})
        return c

    def close(self, number: int) -> dict[str, Any]:
        issue, _ = self.request("PATCH", self._repo_path(f"/issues/{int(number)}"),
                                {"state": "closed", "state_reason": "completed"})
        return issue


def _next_link(link: str) -> str | None:
    """The rel="next" URL of a Link header, if any."""
    for part in link.split(","):
        m = re.match(r'\s*<([^>]+)>\s*;(.*)', part)
        if m and re.search(r'rel="?next"?', m.group(2)):
            return m.group(1)
    return None


# ---------------------------------------------------------------------------------------------------------
# alerts -> issues

@dataclass
class Plan:
    """What was (or, with --dry-run, would be) done: change keys created and commented, issues closed."""

    created: list[str] = field(default_factory=list)
    commented: list[str] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)
    skipped: int = 0  # faster alerts, and alerts of a check without --confirm


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 40] + "\n\n(... truncated)\n"


def _title(alert: dict[str, Any]) -> str:
    title = " ".join(alert["title"].split())  # one line
    return title if len(title) <= TITLE_MAX else title[: TITLE_MAX - 3] + "..."


def _commit(c: Any) -> str:
    return re.sub(r"[^0-9A-Za-z._-]", "", str(c or ""))[:12] or "unknown commit"


def _date(text: Any) -> str:
    """The YYYY-MM-DD a record's or a file's timestamp starts with, else "" (the text itself never reaches an
    issue: it is record data, and an issue is markdown)."""
    s = str(text or "")
    return s[:10] if re.match(r"\d{4}-\d\d-\d\d(?!\d)", s) else ""


def _when(alert: dict[str, Any]) -> tuple[str, str]:
    after = alert.get("after") or alert.get("last") or {}
    return _date(after.get("created")) or "an unknown date", _commit(after.get("commit"))


def _run_link() -> str:
    server, repo, run = (os.environ.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if server and repo and run and run.isdigit():
        return f"\n\n_Nightly workflow run: {server}/{repo}/actions/runs/{run}_\n"
    return ""


def change_key(item: dict[str, Any]) -> str:
    """The issue key of an alert: its machine and commit range (a drift: its own change id)."""
    if item.get("kind") == "drift":
        return item["change_id"]
    s = item["series"]
    text = f"{s.get('machine')}|{(item['before'] or {}).get('commit')}|{(item['after'] or {}).get('commit')}"
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def group_title(items: list[dict[str, Any]]) -> str:
    if len(items) == 1:
        return _title(items[0])
    a = items[0]
    machine = " ".join(str(a["series"].get("machine") or "?").split())[:60]
    worst = max(float(x.get("ratio") or 1.0) for x in items)
    return _title({"title": f"{len(items)} series slower on {machine} since {_commit(a['after'].get('commit'))} "
                            f"(up to {(worst - 1) * 100:+.1f}%)"})


def issue_body(alert: dict[str, Any] | list[dict[str, Any]]) -> str:
    items = alert if isinstance(alert, list) else [alert]
    key = change_key(items[0])
    what = ("a drift (a trend over nights; no single commit is blamed)" if items[0].get("kind") == "drift" else
            f"{len(items)} series that one commit range moved")
    head = (f"{CHANGE_MARKER.format(key)}\n" + "".join(MARKER.format(a["fingerprint"]) + "\n" for a in items)
            + f"Opened by the nightly GPU benchmarks (`robocache-bench check`): {what}. Each later night on which "
              "it still holds adds a comment; the issue is closed with a comment when every series listed is "
              "checked and no longer slower.\n\n")
    return _clip(head + "\n".join(a["markdown"] for a in items) + _run_link(), BODY_MAX)


def bisection_text(docs: list[dict[str, Any]]) -> str:
    """The bisections of a change, for its issue (their own markdown: record strings already escaped)."""
    return "".join(f"\n{BISECT_MARKER.format(d['id'])}\n{d['markdown']}" for d in docs)


def comment_body(alert: dict[str, Any] | list[dict[str, Any]]) -> str:
    items = alert if isinstance(alert, list) else [alert]
    date, commit = _when(items[0])
    if items[0].get("kind") == "drift":
        head = f"Still drifting on {date} at `{commit}` ({float(items[0].get('slope_per_night') or 0) * 100:+.2f}%/night).\n\n"
    elif len(items) == 1:
        head = f"Still slower on {date} at `{commit}` (x{float(items[0]['ratio']):.3f}).\n\n"
    else:
        head = f"Still slower on {date} at `{commit}`: {len(items)} series.\n\n"
    return _clip(head + "\n".join(a["markdown"] for a in items) + _run_link(), BODY_MAX)


def sync(alerts: list[dict[str, Any]], gh: GitHub | None, label: str, out: Any = None,
         include_unconfirmed: bool = False, drifts: list[dict[str, Any]] = (),
         checked: set[str] | None = None, date: str = "",
         bisections: dict[str, list[dict[str, Any]]] | None = None) -> Plan:
    """Create, comment or close, one issue per change. ``gh=None`` is a dry run: prints, calls nothing.
    ``checked``: the series tested tonight (None: close nothing). ``bisections``: finished bisection documents by
    the issue key of their change: added to the issue's body (opened tonight) or to tonight's comment."""
    bisections = bisections or {}
    out = out or sys.stdout
    plan = Plan()
    # only alerts from a check that asked for confirmation (`check --confirm`): "confirmed" true (a rerun
    # reproduced it) or false (it could not be measured again: raised, marked); a check without --confirm
    # writes null, and a one-night outlier must not open an issue
    slower = [a for a in alerts if a["direction"] == "slower"
              and (include_unconfirmed or a.get("confirmed") is not None)]
    plan.skipped = len(alerts) - len(slower)
    items = slower + [{**d, "kind": "drift"} for d in drifts if d.get("direction", "slower") == "slower"]
    groups: dict[str, list[dict[str, Any]]] = {}
    for a in items:
        grp = groups.setdefault(change_key(a), [])
        if a["fingerprint"] not in {x["fingerprint"] for x in grp}:  # the same file twice: once
            grp.append(a)
    by_key: dict[str, int] = {}
    by_fp: dict[str, int] = {}
    listed: dict[int, set[str]] = {}
    if not groups and not checked:  # nothing to open, and nothing known to have recovered: no call at all
        print("no slower alerts or drifts: nothing to open", file=out)
        return plan
    if gh is not None:
        for issue in gh.open_issues(label):
            body = issue.get("body") or ""
            n = int(issue["number"])
            for k in CHANGE_RE.findall(body):
                by_key.setdefault(k, n)  # the oldest listed first wins on duplicates
            fps = set(MARKER_RE.findall(body))
            for fp in fps:
                by_fp.setdefault(fp, n)
            if fps:
                listed[n] = fps
        if groups:
            gh.ensure_label(label)
    if not groups:
        print("no slower alerts or drifts: nothing to open", file=out)
    touched: set[int] = set()
    updates: dict[int, list[dict[str, Any]]] = {}  # open issue -> tonight's alerts of its changes (one comment)
    found: dict[int, list[dict[str, Any]]] = {}  # open issue -> tonight's bisections of its changes
    for key, grp in groups.items():
        if gh is None:
            print(f"dry run: would comment on the open issue of change {key}, else create {group_title(grp)!r} "
                  f"({len(grp)} series)" + (f" with {len(bisections[key])} bisection(s)" if bisections.get(key)
                                            else ""), file=out)
            plan.created.append(key)
            continue
        n = by_key.get(key) or next((by_fp[a["fingerprint"]] for a in grp if a["fingerprint"] in by_fp), None)
        if n is not None:
            updates.setdefault(n, []).extend(a for a in grp if a not in updates.get(n, []))
            found.setdefault(n, []).extend(bisections.get(key, []))
            plan.commented.append(key)
        else:
            body = issue_body(grp)
            if bisections.get(key):  # the body is clipped first: the bisection is never the part cut off
                body = _clip(body, BODY_MAX - 8000) + _clip(bisection_text(bisections[key]), 8000)
            issue = gh.create_issue(group_title(grp), body, [label])
            n = int(issue["number"])
            by_key[key] = n  # a second file with this change in the batch comments on it
            plan.created.append(key)
            print(f"change {key}: opened #{n} {group_title(grp)}", file=out)
        touched.add(n)
        for a in grp:
            by_fp.setdefault(a["fingerprint"], n)
    for n, items_n in updates.items():
        body, extra = comment_body(items_n), bisection_text(found.get(n, []))
        if extra:  # the alerts are clipped first: the bisection is never the part cut off
            body = _clip(body, BODY_MAX - 8000) + _clip(extra, 8000)
        gh.comment(n, body)
        print(f"#{n}: commented ({len(items_n)} series still slower)", file=out)
    # recovery: every series of an open issue checked tonight, none of them slower (alerted or drifting,
    # confirmed or not: a series still flagged keeps its issue open)
    if gh is not None and checked is not None:
        still = {a["fingerprint"] for a in alerts if a["direction"] == "slower"} | {d["fingerprint"] for d in drifts}
        for n, fps in sorted(listed.items()):
            if n in touched or fps & still or not fps <= checked:
                continue
            gh.comment(n, f"Recovered on {date or 'the latest night'}: every series of this issue was checked "
                          f"and none is slower any more ({len(fps)} series). Closing; a later regression opens a "
                          "new issue." + _run_link())
            gh.close(n)
            plan.closed.append(n)
            print(f"#{n}: recovered, closed", file=out)
    return plan


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, prog="alerts_to_issues.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("alerts_json", nargs="+", metavar="ALERTS_JSON",
                   help="robocache-bench check --json output (one per machine; all are validated first)")
    p.add_argument("--repo", default=os.environ.get("GITHUB_REPOSITORY"),
                   help="owner/name (default: $GITHUB_REPOSITORY)")
    p.add_argument("--label", default=DEFAULT_LABEL, help=f"issue label (default: {DEFAULT_LABEL})")
    p.add_argument("--dry-run", action="store_true", help="print what would be done; no token, no API calls")
    p.add_argument("--bisect", nargs="*", default=[], metavar="BISECT_JSON",
                   help="robocache-bench bisect documents (*.bisect.json) of the night: each finished one is added to "
                        "its change's issue")
    p.add_argument("--include-unconfirmed", action="store_true",
                   help="also alerts of a check run without --confirm (\"confirmed\": null); by default they "
                        "open no issue")
    args = p.parse_args(argv)

    alerts: list[dict[str, Any]] = []
    drifts: list[dict[str, Any]] = []
    checked: set[str] | None = set()
    date = ""
    try:
        for path in args.alerts_json:
            doc = load_doc(path)
            alerts.extend(doc["alerts"])
            drifts.extend(doc["drifts"])
            if doc["checked"] is None or checked is None:
                checked = None  # a file without the list: close nothing this time
            else:
                checked |= set(doc["checked"])
            date = max(date, _date(doc["generated"]))
        bisections: dict[str, list[dict[str, Any]]] = {}
        for path in args.bisect:
            b = load_bisection(path)
            if b is not None:
                bisections.setdefault(b["alert"]["key"], []).append(b)
    except AlertsFileError as e:
        print(f"alerts_to_issues: bad alerts file: {e}", file=sys.stderr)
        return 2
    if not args.label.strip() or len(args.label) > 50:
        print("alerts_to_issues: --label must be 1 to 50 characters", file=sys.stderr)
        return 2

    gh = None
    if not args.dry_run:
        token = os.environ.get("GITHUB_TOKEN", "")
        if not token:
            print("alerts_to_issues: GITHUB_TOKEN is not set (the workflow passes the job's token with "
                  "issues: write; use --dry-run to only print what would be done)", file=sys.stderr)
            return 2
        if not args.repo or not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", args.repo):
            print(f"alerts_to_issues: --repo (or GITHUB_REPOSITORY) must be owner/name, got {args.repo!r}",
                  file=sys.stderr)
            return 2
        gh = GitHub(os.environ.get("GITHUB_API_URL") or "https://api.github.com", args.repo, token)
    try:
        plan = sync(alerts, gh, args.label, include_unconfirmed=args.include_unconfirmed, drifts=drifts,
                    checked=checked, date=date, bisections=bisections)
    except GitHubError as e:
        print(f"alerts_to_issues: GitHub API call failed: {e}", file=sys.stderr)
        return 1
    verb = "would open or update" if gh is None else "opened"
    print(f"{len(plan.created)} issue(s) {verb}" + ("" if gh is None else f", {len(plan.commented)} commented, "
                                                   f"{len(plan.closed)} closed on recovery")
          + f"; {plan.skipped} faster or unconfirmed-check alert(s) ignored")
    return 0


if __name__ == "__main__":
    sys.exit(main())
