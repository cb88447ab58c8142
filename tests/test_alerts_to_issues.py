"""scripts/alerts_to_issues.py against a fake GitHub REST API on 127.0.0.1 (no network).

The fake keeps issues, comments and labels in memory, pages issue lists by ``per_page`` with a Link header
like GitHub's, checks the token on every call and records every call, so each test can say exactly what
was sent. The alerts documents are SYNTHETIC, shaped like ``robocache-bench check --json`` output.
"""
from __future__ import annotations

import importlib.util
import json
import re
import socket
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("alerts_to_issues", ROOT / "scripts" / "alerts_to_issues.py")
ati = importlib.util.module_from_spec(_spec)
sys.modules["alerts_to_issues"] = ati  # dataclasses look their module up
_spec.loader.exec_module(ati)

REPO = "octo/robocache"
TOKEN = "test-token-not-a-secret"
LABEL = "performance-regression"


class FakeGitHub:
    """Issues, comments and labels of one repository; ``page_size`` forces pagination."""

    def __init__(self, page_size: int = 100) -> None:
        self.issues: list[dict] = []
        self.comments: dict[int, list[str]] = {}
        self.labels: set[str] = set()
        self.calls: list[tuple[str, str]] = []
        self.page_size = page_size
        self.fail: dict[tuple[str, str], int] = {}  # (method, path regex) -> HTTP status to answer with
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def add_issue(self, title: str, body: str, labels=(LABEL,), state: str = "open", pr: bool = False) -> int:
        n = len(self.issues) + 1
        issue = {"number": n, "title": title, "body": body, "state": state,
                 "labels": [{"name": x} for x in labels]}
        if pr:
            issue["pull_request"] = {"url": "x"}
        self.issues.append(issue)
        return n

    def _handler(self):
        fake = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def _send(self, code: int, obj, headers: dict | None = None) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _route(self, method: str) -> None:
                parts = urllib.parse.urlsplit(self.path)
                fake.calls.append((method, self.path))
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._send(401, {"message": "Bad credentials"})
                for (m, rx), code in fake.fail.items():
                    if m == method and re.search(rx, parts.path):
                        return self._send(code, {"message": "injected failure"})
                base = f"/repos/{REPO}"
                if not parts.path.startswith(base):
                    return self._send(404, {"message": "Not Found"})
                rest = parts.path[len(base):]
                body = None
                if method in ("POST", "PATCH"):
                    body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                m = re.fullmatch(r"/issues/(\d+)", rest)
                if method == "PATCH" and m and 1 <= int(m.group(1)) <= len(fake.issues):
                    fake.issues[int(m.group(1)) - 1]["state"] = body["state"]
                    return self._send(200, fake.issues[int(m.group(1)) - 1])
                if method == "GET" and rest == "/issues":
                    q = urllib.parse.parse_qs(parts.query)
                    want = set(q.get("labels", [""])[0].split(",")) - {""}
                    state = q.get("state", ["open"])[0]
                    per = min(int(q.get("per_page", ["30"])[0]), fake.page_size)
                    page = int(q.get("page", ["1"])[0])
                    sel = [i for i in fake.issues if (state == "all" or i["state"] == state)
                           and want <= {x["name"] for x in i["labels"]}]
                    chunk = sel[(page - 1) * per: page * per]
                    headers = {}
                    if page * per < len(sel):
                        q2 = {k: v[0] for k, v in q.items()} | {"page": str(page + 1)}
                        nxt = f"{fake.url}{parts.path}?{urllib.parse.urlencode(q2)}"
                        headers["Link"] = f'<{nxt}>; rel="next", <{fake.url}{parts.path}>; rel="first"'
                    return self._send(200, chunk, headers)
                if method == "GET" and rest.startswith("/labels/"):
                    name = urllib.parse.unquote(rest[len("/labels/"):])
                    if name in fake.labels:
                        return self._send(200, {"name": name})
                    return self._send(404, {"message": "Not Found"})
                if method == "POST" and rest == "/labels":
                    fake.labels.add(body["name"])
                    return self._send(201, {"name": body["name"]})
                if method == "POST" and rest == "/issues":
                    n = fake.add_issue(body["title"], body["body"], tuple(body.get("labels", ())))
                    return self._send(201, fake.issues[n - 1])
                m = re.fullmatch(r"/issues/(\d+)/comments", rest)
                if method == "POST" and m:
                    fake.comments.setdefault(int(m.group(1)), []).append(body["body"])
                    return self._send(201, {"id": 1, "body": body["body"]})
                return self._send(404, {"message": "Not Found"})

            def do_GET(self):
                self._route("GET")

            def do_POST(self):
                self._route("POST")

            def do_PATCH(self):
                self._route("PATCH")

        return H

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake():
    with FakeGitHub() as f:
        yield f


@pytest.fixture
def env(monkeypatch, fake):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", fake.url)
    monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
    for k in ("GITHUB_SERVER_URL", "GITHUB_RUN_ID"):
        monkeypatch.delenv(k, raising=False)
    return fake


def alert(fp: str, direction: str = "slower", commit: str = "abcdef1234567890",
          created: str = "2030-01-02T03:20:00+00:00", ratio: float = 1.12,
          case: str = "resample-B256-S100-T50-D32") -> dict:
    """One SYNTHETIC alert shaped like robocache-bench check --json output."""
    title = f"{case} float32 robocache {(ratio - 1) * 100:+.1f}% {direction} on sm_90 (gpu-h100) since {commit[:12]}"
    return {"fingerprint": fp,
            "series": {"machine": "gpu-h100", "arch": "sm_90", "op": "resample", "case_id": case,
                       "provider": "robocache", "dtype": "float32", "timer": "cuda_event", "cache": "warm"},
            "title": title, "direction": direction, "ratio": ratio, "ratio_ci": [ratio - 0.03, ratio + 0.03],
            "q_value": 0.001,
            "before": {"commit": "0123456789ab" + "0" * 28, "run_id": "r1", "created": "2030-01-01T03:20:00+00:00"},
            "after": {"commit": commit, "run_id": "r2", "created": created},
            "reproduce": "robocache-bench run ...", "markdown": f"### {title}\n\n- SYNTHETIC alert body\n",
            "confirmed": True}


def write(tmp_path: Path, alerts: list[dict], name: str = "alerts.json", **extra) -> str:
    doc = {"schema": "robocache-alerts/1", "generated": "2030-01-02T04:00:00+00:00", "alerts": alerts,
           "summary": {}} | extra
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return str(p)


def posts(fake: FakeGitHub, what: str) -> list[str]:
    return [p for m, p in fake.calls if m == "POST" and p.endswith(what)]


# ---------------------------------------------------------------------------------------------------------

def test_creates_issue_with_marker_label_and_title(env, tmp_path, capsys):
    fake = env
    rc = ati.main([write(tmp_path, [alert("a1b2c3d4e5f6")])])
    assert rc == 0, capsys.readouterr().err
    assert len(fake.issues) == 1
    issue = fake.issues[0]
    assert "<!-- robocache-series: a1b2c3d4e5f6 -->" in issue["body"]
    assert "SYNTHETIC alert body" in issue["body"]
    assert issue["title"].startswith("resample-B256-S100-T50-D32 float32 robocache +12.0% slower")
    assert [x["name"] for x in issue["labels"]] == [LABEL]
    assert LABEL in fake.labels  # the label is created when the repository lacks it
    assert fake.comments == {}


def test_comments_when_open_issue_exists(env, tmp_path):
    fake = env
    fake.labels.add(LABEL)
    n = fake.add_issue("old", "text\n<!-- robocache-series: a1b2c3d4e5f6 -->\nmore")
    rc = ati.main([write(tmp_path, [alert("a1b2c3d4e5f6", commit="feedfacecafe0000", created="2030-02-03T03:17:00Z")])])
    assert rc == 0
    assert len(fake.issues) == 1
    assert len(fake.comments[n]) == 1
    c = fake.comments[n][0]
    assert c.startswith("Still slower on 2030-02-03 at `feedfacecafe`")
    assert "SYNTHETIC alert body" in c
    assert not posts(fake, "/labels")  # the label existed


def test_closed_issue_or_unlabelled_or_pr_does_not_count(env, tmp_path):
    fake = env
    marker = "<!-- robocache-series: a1b2c3d4e5f6 -->"
    fake.add_issue("closed", marker, state="closed")
    fake.add_issue("other label", marker, labels=("bug",))
    fake.add_issue("a pull request", marker, pr=True)
    assert ati.main([write(tmp_path, [alert("a1b2c3d4e5f6")])]) == 0
    assert len(fake.issues) == 4 and fake.comments == {}
    assert fake.issues[-1]["state"] == "open" and marker in fake.issues[-1]["body"]


def test_pagination_finds_issue_on_a_later_page(env, tmp_path):
    fake = env
    fake.page_size = 2  # GitHub pages at per_page; the fake at 2 so five issues take three pages
    for i in range(4):
        fake.add_issue(f"other {i}", f"<!-- robocache-series: {i:012x} -->")
    n = fake.add_issue("target", "<!-- robocache-series: 00000000beef -->")
    assert ati.main([write(tmp_path, [alert("00000000beef")])]) == 0
    gets = [p for m, p in fake.calls if m == "GET" and "/issues" in p]
    assert len(gets) == 3 and "page=3" in gets[-1]
    assert fake.comments == {n: fake.comments[n]} and len(fake.comments[n]) == 1
    assert len(fake.issues) == 5


def test_one_issue_per_change_across_two_nights(env, tmp_path):
    fake = env
    # night 1: two series slower since one commit range: ONE issue listing both
    night1 = write(tmp_path, [alert("aaaaaaaaaaaa"), alert("bbbbbbbbbbbb", case="fuse-B256")], "n1.json")
    assert ati.main([night1]) == 0
    assert len(fake.issues) == 1
    body = fake.issues[0]["body"]
    assert "<!-- robocache-series: aaaaaaaaaaaa -->" in body and "<!-- robocache-series: bbbbbbbbbbbb -->" in body
    assert f"<!-- robocache-change: {ati.change_key(alert('aaaaaaaaaaaa'))} -->" in body
    assert fake.issues[0]["title"].startswith("2 series slower on gpu-h100 since abcdef123456")
    # night 2: the same change still holds: one comment on that issue, no new issue
    night2 = write(tmp_path, [alert("aaaaaaaaaaaa", created="2030-01-03T03:20:00Z"),
                              alert("bbbbbbbbbbbb", case="fuse-B256", created="2030-01-03T03:20:00Z")], "n2.json")
    assert ati.main([night2]) == 0
    assert len(fake.issues) == 1 and len(fake.comments[1]) == 1
    assert fake.comments[1][0].startswith("Still slower on 2030-01-03 at `abcdef123456`: 2 series")
    # night 3: the change point placed one commit later for one series: still that issue (listed series)
    night3 = write(tmp_path, [alert("aaaaaaaaaaaa", commit="3333333333330000")], "n3.json")
    assert ati.main([night3, night3]) == 0
    assert len(fake.issues) == 1 and len(fake.comments[1]) == 2
    # night 4: the two series' change points placed on different commits: one comment on their issue
    night4 = write(tmp_path, [alert("aaaaaaaaaaaa", commit="4444444444440000"),
                              alert("bbbbbbbbbbbb", case="fuse-B256", commit="5555555555550000")], "n4.json")
    assert ati.main([night4]) == 0
    assert len(fake.issues) == 1 and len(fake.comments[1]) == 3 and "2 series" in fake.comments[1][-1]


def test_one_commit_moving_fifty_series_opens_one_issue(env, tmp_path):
    fake = env
    many = [alert(f"{i:012x}", case=f"case-{i}", ratio=1.1 + i / 1000) for i in range(50)]
    assert ati.main([write(tmp_path, many)]) == 0
    assert len(fake.issues) == 1 and fake.issues[0]["title"].startswith("50 series slower")
    assert len(ati.MARKER_RE.findall(fake.issues[0]["body"])) == 50


def test_recovered_issue_is_closed_with_a_comment(env, tmp_path):
    fake = env
    assert ati.main([write(tmp_path, [alert("aaaaaaaaaaaa"), alert("bbbbbbbbbbbb", case="fuse-B256")],
                           "n1.json", checked=["aaaaaaaaaaaa", "bbbbbbbbbbbb"])]) == 0
    # one series back, the other still slower: stays open, updated
    assert ati.main([write(tmp_path, [alert("bbbbbbbbbbbb", case="fuse-B256")], "n2.json",
                           checked=["aaaaaaaaaaaa", "bbbbbbbbbbbb"])]) == 0
    assert fake.issues[0]["state"] == "open" and len(fake.comments[1]) == 1
    # a night on which one of them was not checked (another machine's file, stale): stays open
    assert ati.main([write(tmp_path, [], "n3.json", checked=["aaaaaaaaaaaa"])]) == 0
    assert fake.issues[0]["state"] == "open" and len(fake.comments[1]) == 1
    # a file without the checked list (older check): closes nothing
    assert ati.main([write(tmp_path, [], "n4.json")]) == 0
    assert fake.issues[0]["state"] == "open"
    # both checked, neither slower: closed with a comment
    assert ati.main([write(tmp_path, [], "n5.json", checked=["aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc"])]) == 0
    assert fake.issues[0]["state"] == "closed" and fake.comments[1][-1].startswith("Recovered on 2030-01-02")
    assert [m for m, p in fake.calls if m == "PATCH"] == ["PATCH"]
    # a later regression of the series opens a new issue
    assert ati.main([write(tmp_path, [alert("aaaaaaaaaaaa", commit="4444444444440000")], "n6.json")]) == 0
    assert len(fake.issues) == 2 and fake.issues[1]["state"] == "open"


def test_drift_opens_its_own_issue_and_breaks_open_none(env, tmp_path):
    fake = env
    drift = {"fingerprint": "dddddddddddd", "change_id": "eeeeeeeeeeee", "kind": "drift",
             "series": {"machine": "gpu-h100"}, "title": "resample float32 robocache drifting +0.50%/night",
             "markdown": "### drift\n\n- SYNTHETIC\n", "direction": "slower", "slope_per_night": 0.005,
             "last": {"commit": "abc", "run_id": "r", "created": "2030-01-02T03:00:00Z"}}
    brk = {"fingerprint": "ffffffffffff", "kind": "environment", "series": {}, "detail": "driver: a -> b"}
    assert ati.main([write(tmp_path, [], drifts=[drift], breaks=[brk])]) == 0
    assert len(fake.issues) == 1 and "<!-- robocache-change: eeeeeeeeeeee -->" in fake.issues[0]["body"]
    assert "no single commit is blamed" in fake.issues[0]["body"]


def test_faster_alerts_are_ignored(env, tmp_path, capsys):
    fake = env
    rc = ati.main([write(tmp_path, [alert("dddddddddddd", direction="faster", ratio=0.8)])])
    assert rc == 0
    assert fake.issues == [] and not posts(fake, "/issues") and not posts(fake, "/comments")
    assert "1 faster or unconfirmed-check alert(s) ignored" in capsys.readouterr().out
    assert fake.calls == []  # nothing slower: not even the listing


@pytest.mark.parametrize("doc, msg", [
    ("{not json", "not JSON"),
    ("[]", "expected a JSON object"),
    (json.dumps({"schema": "robocache-alerts/2", "alerts": []}), "schema is 'robocache-alerts/2'"),
    (json.dumps({"schema": "robocache-alerts/1", "alerts": {}}), "'alerts' must be a list"),
    (json.dumps({"schema": "robocache-alerts/1", "alerts": [{"fingerprint": "a1b2c3d4e5f6"}]}), "missing key(s)"),
    (json.dumps({"schema": "robocache-alerts/1", "alerts": [alert("a1b2c3d4e5f6 -->")]}), "12 lowercase hex"),
    (json.dumps({"schema": "robocache-alerts/1", "alerts": [alert("a1b2c3d4e5f6", direction="sideways")]}),
     "direction must be"),
    (json.dumps({"schema": "robocache-alerts/1", "alerts": [alert("a1b2c3d4e5f6") | {"markdown": ""}]}),
     "markdown must be"),
])
def test_bad_alerts_file_is_rejected_before_any_call(env, tmp_path, capsys, doc, msg):
    fake = env
    good = write(tmp_path, [alert("a1b2c3d4e5f6")], "good.json")
    bad = tmp_path / "bad.json"
    bad.write_text(doc)
    assert ati.main([good, str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad alerts file" in err and msg in err and "bad.json" in err
    assert fake.calls == []


def test_missing_file(env, tmp_path, capsys):
    assert ati.main([str(tmp_path / "nope.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_dry_run_makes_no_calls_and_needs_no_token(env, tmp_path, capsys, monkeypatch):
    fake = env
    monkeypatch.delenv("GITHUB_TOKEN")
    rc = ati.main([write(tmp_path, [alert("a1b2c3d4e5f6"), alert("dddddddddddd", direction="faster")]),
                   "--dry-run"])
    out = capsys.readouterr().out
    assert rc == 0
    assert fake.calls == []
    assert f"would comment on the open issue of change {ati.change_key(alert('a1b2c3d4e5f6'))}" in out
    assert "1 issue(s) would open or update; 1 faster or unconfirmed-check alert(s) ignored" in out


def test_no_token_is_a_clear_error(env, tmp_path, capsys, monkeypatch):
    fake = env
    monkeypatch.delenv("GITHUB_TOKEN")
    assert ati.main([write(tmp_path, [alert("a1b2c3d4e5f6")])]) == 2
    assert "GITHUB_TOKEN is not set" in capsys.readouterr().err
    assert fake.calls == []


def test_bad_repo_is_a_clear_error(env, tmp_path, capsys):
    assert ati.main([write(tmp_path, [alert("a1b2c3d4e5f6")]), "--repo", "not-a-repo"]) == 2
    assert "owner/name" in capsys.readouterr().err


@pytest.mark.parametrize("method, path, call", [
    ("GET", r"/issues$", "GET /repos/octo/robocache/issues?"),
    ("POST", r"/issues$", "POST /repos/octo/robocache/issues"),
    ("POST", r"/comments$", "POST /repos/octo/robocache/issues/1/comments"),
])
def test_http_error_names_the_call(env, tmp_path, capsys, method, path, call):
    fake = env
    fake.labels.add(LABEL)
    if "comments" in path:
        fake.add_issue("open", "<!-- robocache-series: a1b2c3d4e5f6 -->")
    fake.fail[(method, path)] = 403
    assert ati.main([write(tmp_path, [alert("a1b2c3d4e5f6")])]) == 1
    err = capsys.readouterr().err
    assert "GitHub API call failed" in err and call in err and "HTTP 403" in err and "injected failure" in err


def test_bad_token_is_reported(env, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "wrong")
    assert ati.main([write(tmp_path, [alert("a1b2c3d4e5f6")])]) == 1
    err = capsys.readouterr().err
    assert "HTTP 401" in err and "Bad credentials" in err and "GITHUB_TOKEN" in err


def test_unreachable_api_is_reported(env, tmp_path, capsys, monkeypatch):
    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("GITHUB_API_URL", f"http://127.0.0.1:{port}")
    assert ati.main([write(tmp_path, [alert("a1b2c3d4e5f6")])]) == 1
    err = capsys.readouterr().err
    assert "GitHub API call failed: GET /repos/octo/robocache/issues" in err


def test_token_never_sent_to_another_host():
    gh = ati.GitHub("http://127.0.0.1:1", REPO, TOKEN)
    with pytest.raises(ati.GitHubError, match="refusing to send the token"):
        gh.request("GET", "http://example.invalid/repos/x/y/issues?page=2")


def test_run_link_and_title_are_one_line(env, tmp_path, monkeypatch):
    fake = env
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_RUN_ID", "12345")
    a = alert("a1b2c3d4e5f6")
    a["title"] = "line one\nline two " + "x" * 400
    assert ati.main([write(tmp_path, [a])]) == 0
    issue = fake.issues[0]
    assert "\n" not in issue["title"] and len(issue["title"]) <= 256
    assert f"https://github.com/{REPO}/actions/runs/12345" in issue["body"]


def test_next_link_parsing():
    link = '<https://api.github.com/x?page=2>; rel="next", <https://api.github.com/x?page=5>; rel="last"'
    assert ati._next_link(link) == "https://api.github.com/x?page=2"
    assert ati._next_link('<https://api.github.com/x?page=1>; rel="prev"') is None
    assert ati._next_link("") is None


def test_alerts_of_an_unconfirmed_check_open_no_issue(capsys):
    a = alert("aaaaaaaaaaaa")
    a["confirmed"] = None  # robocache-bench check without --confirm
    b = alert("bbbbbbbbbbbb")
    b["confirmed"] = False  # asked, but the case could not be measured again: raised, marked
    plan = ati.sync([a, b], None, "performance-regression")
    assert plan.created == [ati.change_key(b)] and plan.skipped == 1
    plan = ati.sync([a], None, "performance-regression", include_unconfirmed=True)
    assert plan.created == [ati.change_key(a)]
