#!/usr/bin/env python3
"""Open (or update) one GitHub issue per regressed series from `robocache-bench check --json` files.

    python3 scripts/alerts_to_issues.py night/*/alerts.json [--repo OWNER/NAME] [--label L] [--dry-run]

For every alert with ``direction == "slower"`` (improvements never open issues):

- an OPEN issue carrying the label whose body holds ``<!-- robocache-series: FINGERPRINT -->`` gets a comment
  ("Still slower on <date> at <commit>" and the night's alert markdown);
- otherwise a new issue is created: the alert's title, a body of the marker and the alert markdown, the label.

So a series that stays slow for ten nights has one issue with ten entries, not ten issues; once the issue is
closed, the next regression of that series opens a fresh one. The fingerprint is 12 hex digits, stable per
series (machine, case, provider, dtype, timer, cache, grid version, front end), written by robocache-bench.

Standard library only (urllib): it runs on a bare GitHub-hosted runner with the job's ``GITHUB_TOKEN``
(``issues: write`` and nothing else). Environment: ``GITHUB_TOKEN`` (required unless --dry-run),
``GITHUB_REPOSITORY`` (owner/name, unless --repo), ``GITHUB_API_URL`` (default https://api.github.com),
and, for a link back to the workflow run, ``GITHUB_SERVER_URL`` and ``GITHUB_RUN_ID``.
Exit codes: 0 done, 1 a GitHub API call failed (the message names the call), 2 bad arguments or a bad
alerts file (nothing is sent to GitHub when any file is bad).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

SCHEMA = "robocache-alerts/1"
DEFAULT_LABEL = "performance-regression"
MARKER = "<!-- robocache-series: {} -->"
MARKER_RE = re.compile(r"<!-- robocache-series: ([0-9a-f]{12}) -->")
FINGERPRINT_RE = re.compile(r"^[0-9a-f]{12}$")
REQUIRED = ("fingerprint", "series", "title", "direction", "ratio", "before", "after", "markdown")
TITLE_MAX = 250  # GitHub's limit is 256 characters
BODY_MAX = 60000  # GitHub's limit is 65,536 characters for bodies and comments
TIMEOUT_S = 30


class AlertsFileError(ValueError):
    """The alerts file is not a robocache-alerts/1 document."""


class GitHubError(RuntimeError):
    """A GitHub API call failed; the message names the call."""


# ---------------------------------------------------------------------------------------------------------
# the alerts file

def load_alerts(path: str) -> list[dict[str, Any]]:
    """The alerts of one ``robocache-bench check --json`` file, validated; raises AlertsFileError."""
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
        fp = a["fingerprint"]
        # the fingerprint goes into an HTML comment and is matched back: 12 hex digits, nothing else
        if not isinstance(fp, str) or not FINGERPRINT_RE.match(fp):
            raise AlertsFileError(f"{where}: fingerprint must be 12 lowercase hex digits, got {fp!r}")
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
    return alerts


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
    """What was (or, with --dry-run, would be) done."""

    created: list[str] = field(default_factory=list)
    commented: list[str] = field(default_factory=list)
    skipped: int = 0  # faster alerts


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 40] + "\n\n(... truncated)\n"


def _title(alert: dict[str, Any]) -> str:
    title = " ".join(alert["title"].split())  # one line
    return title if len(title) <= TITLE_MAX else title[: TITLE_MAX - 3] + "..."


def _when(alert: dict[str, Any]) -> tuple[str, str]:
    after = alert["after"]
    created = str(after.get("created") or "")
    date = created[:10] if re.match(r"\d{4}-\d\d-\d\d", created) else (created or "an unknown date")
    commit = str(after.get("commit") or "unknown commit")
    return date, re.sub(r"[^0-9A-Za-z._-]", "", commit)[:12] or "unknown commit"


def _run_link() -> str:
    server, repo, run = (os.environ.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if server and repo and run and run.isdigit():
        return f"\n\n_Nightly workflow run: {server}/{repo}/actions/runs/{run}_\n"
    return ""


def issue_body(alert: dict[str, Any]) -> str:
    head = (f"{MARKER.format(alert['fingerprint'])}\n"
            "Opened by the nightly GPU benchmarks (`robocache-bench check`). Each later night on which this "
            "series is still slower adds a comment; close the issue when it is fixed or accepted.\n\n")
    return _clip(head + alert["markdown"] + _run_link(), BODY_MAX)


def comment_body(alert: dict[str, Any]) -> str:
    date, commit = _when(alert)
    return _clip(f"Still slower on {date} at `{commit}` (x{float(alert['ratio']):.3f}).\n\n"
                 + alert["markdown"] + _run_link(), BODY_MAX)


def sync(alerts: list[dict[str, Any]], gh: GitHub | None, label: str, out: Any = None,
         include_unconfirmed: bool = False) -> Plan:
    """Create or comment, one issue per fingerprint. ``gh=None`` is a dry run: prints, calls nothing."""
    out = out or sys.stdout
    plan = Plan()
    # only alerts from a check that asked for confirmation (`check --confirm`): "confirmed" true (a rerun
    # reproduced it) or false (it could not be measured again: raised, marked); a check without --confirm
    # writes null, and a one-night outlier must not open an issue
    slower = [a for a in alerts if a["direction"] == "slower"
              and (include_unconfirmed or a.get("confirmed") is not None)]
    plan.skipped = len(alerts) - len(slower)
    if not slower:
        print("no slower alerts: nothing to open", file=out)
        return plan
    by_fp: dict[str, int] = {}
    if gh is not None:
        for issue in gh.open_issues(label):
            for fp in MARKER_RE.findall(issue.get("body") or ""):
                by_fp.setdefault(fp, int(issue["number"]))  # the oldest listed first wins on duplicates
        gh.ensure_label(label)
    for a in slower:
        fp = a["fingerprint"]
        if gh is None:
            print(f"dry run: would comment on the open issue of series {fp}, else create {_title(a)!r}", file=out)
            plan.created.append(fp)
            continue
        if fp in by_fp:
            gh.comment(by_fp[fp], comment_body(a))
            plan.commented.append(fp)
            print(f"series {fp}: commented on #{by_fp[fp]}", file=out)
        else:
            issue = gh.create_issue(_title(a), issue_body(a), [label])
            by_fp[fp] = int(issue["number"])  # a second alert of the series in this batch comments on it
            plan.created.append(fp)
            print(f"series {fp}: opened #{issue['number']} {_title(a)}", file=out)
    return plan


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="alerts_to_issues.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("alerts_json", nargs="+", metavar="ALERTS_JSON",
                   help="robocache-bench check --json output (one per machine; all are validated first)")
    p.add_argument("--repo", default=os.environ.get("GITHUB_REPOSITORY"),
                   help="owner/name (default: $GITHUB_REPOSITORY)")
    p.add_argument("--label", default=DEFAULT_LABEL, help=f"issue label (default: {DEFAULT_LABEL})")
    p.add_argument("--dry-run", action="store_true", help="print what would be done; no token, no API calls")
    p.add_argument("--include-unconfirmed", action="store_true",
                   help="also alerts of a check run without --confirm (\"confirmed\": null); by default they "
                        "open no issue")
    args = p.parse_args(argv)

    alerts: list[dict[str, Any]] = []
    try:
        for path in args.alerts_json:
            alerts.extend(load_alerts(path))
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
        plan = sync(alerts, gh, args.label, include_unconfirmed=args.include_unconfirmed)
    except GitHubError as e:
        print(f"alerts_to_issues: GitHub API call failed: {e}", file=sys.stderr)
        return 1
    verb = "would open or update" if gh is None else "opened"
    print(f"{len(plan.created)} issue(s) {verb}" + ("" if gh is None else f", {len(plan.commented)} commented")
          + f"; {plan.skipped} faster alert(s) ignored")
    return 0


if __name__ == "__main__":
    sys.exit(main())
