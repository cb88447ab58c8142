"""Which sources a run measured (robocache/bench/provenance.py, ``robocache-bench provenance``): the hash a run
records of its checkout's library files, against the same hash of the commit it names, so a run labelled with the
wrong commit (``ROBOCACHE_GIT_COMMIT`` typed by hand on a machine whose copy has no usable git) is found."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from robocache.bench import cli, env as envmod, provenance, store
from tests.test_store import make_env, make_record


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A checkout's layout: robocache/ and kernels/ with sources, a cache and a file of another suffix."""
    r = tmp_path / "repo"
    (r / "robocache" / "tuned").mkdir(parents=True)
    (r / "robocache" / "__pycache__").mkdir()
    (r / "kernels").mkdir()
    (r / "robocache" / "__init__.py").write_text("x = 1\n")
    (r / "robocache" / "tuned" / "gpu.json").write_text("{}\n")
    (r / "kernels" / "op.cu").write_text("// kernel\n")
    (r / "kernels" / "common.cuh").write_text("// header\n")
    (r / "README.md").write_text("not a source\n")
    git(r, "init", "-q")
    git(r, "-c", "user.name=t", "-c", "user.email=t@t", "add", "robocache", "kernels", "README.md")
    git(r, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    (r / "robocache" / "__pycache__" / "x.cpython-312.pyc").write_bytes(b"\0compiled")  # ignored by suffix and folder
    return r


def commit(repo: Path, msg: str) -> str:
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", msg)
    return git(repo, "rev-parse", "HEAD")


def test_the_hash_follows_the_sources_and_a_commit_hashes_as_its_checkout(repo, tmp_path):
    """One test (each of these spawns git: the multiprocess tier's budget): a clean checkout hashes as its commit;
    a file of another suffix changes nothing; each kind of source edit changes the hash, the old commit keeps the
    old one and the new commit gives the new; no checkout layout or no commit gives None."""
    head = git(repo, "rev-parse", "HEAD")
    here = provenance.tree_sources(repo)
    assert here is not None and len(here) == 16
    assert provenance.commit_sources(repo, head) == here
    (repo / "README.md").write_text("other\n")  # not a source: the hash stands
    assert provenance.tree_sources(repo) == here
    seen = {here}
    for edit in ("kernel", "table", "new file", "renamed"):
        head, before = git(repo, "rev-parse", "HEAD"), provenance.tree_sources(repo)
        if edit == "kernel":
            (repo / "kernels" / "op.cu").write_text("// kernel, faster\n")
        elif edit == "table":
            (repo / "robocache" / "tuned" / "gpu.json").write_text('{"a": 1}\n')
        elif edit == "new file":
            (repo / "robocache" / "extra.py").write_text("y = 2\n")
            git(repo, "add", "robocache/extra.py")
        else:
            git(repo, "mv", "kernels/op.cu", "kernels/op2.cu")
        after = provenance.tree_sources(repo)
        assert after not in seen, edit  # the dirty tree is not its HEAD's (nor any earlier state's)
        seen.add(after)
        assert provenance.commit_sources(repo, head) == before, edit
        assert provenance.commit_sources(repo, commit(repo, edit)) == after, edit
    (repo / "kernels" / "link.cuh").symlink_to("common.cuh")  # a link: hashed as git stores it, its target's path
    git(repo, "add", "kernels/link.cuh")
    with_link = provenance.tree_sources(repo)
    assert provenance.commit_sources(repo, commit(repo, "link")) == with_link
    odd = repo / "robocache" / os.fsdecode(b"bad\xff.py")  # a name that is not UTF-8: None, never an exception
    odd.write_text("z = 3\n")
    assert provenance.tree_sources(repo) is None
    odd.unlink()
    wheel = tmp_path / "site"  # an installed wheel: the kernels inside the package, no kernels/ beside it
    (wheel / "robocache" / "_kernels").mkdir(parents=True)
    (wheel / "robocache" / "_kernels" / "op.cu").write_text("// kernel\n")
    assert provenance.tree_sources(wheel) is None
    assert provenance.commit_sources(repo, "f" * 40) is None
    assert provenance.commit_sources(tmp_path, "HEAD") is None  # no repository at all


def test_this_checkouts_env_records_its_sources():
    e = envmod.capture_env("cpu")
    assert e["sources"] == provenance.tree_sources() and len(e["sources"]) == 16


def write_run(out: Path, run_id: str, commit_: str | None, sources: str | None, machine: str = "ci-synthetic",
              git_dirty: bool | None = None):
    env = make_env(machine) | ({"sources": sources} if sources else {})
    r = make_record(run_id=run_id)
    r["git_commit"], r["git_dirty"] = commit_, git_dirty
    return store.write_records(out / f"cpu-{machine}", env, [r], name=f"{run_id}-quick", unique=False)


def test_the_command_finds_a_mislabelled_run(repo, tmp_path, capsys):
    """The right label matches; the first commit's sources under the second's label DIFFER (exit 1); runs that
    cannot be checked (a commit this repository lacks, an older record) pass unless --strict; usage errors exit 2
    (one test: git is spawned throughout)."""
    first = git(repo, "rev-parse", "HEAD")
    measured = provenance.tree_sources(repo)
    (repo / "kernels" / "op.cu").write_text("// kernel, changed\n")
    second = commit(repo, "second")
    out = tmp_path / "results"
    write_run(out, "20261128T000000Z-aaaaaa", first, measured)  # right label
    assert cli.main(["provenance", str(out), "--repo", str(repo)]) == 0
    assert "its sources are that commit's" in capsys.readouterr().out
    write_run(out, "20261128T000001Z-bbbbbb", second, measured)  # the first's code under the second's label
    assert cli.main(["provenance", str(out), "--repo", str(repo)]) == 1
    text = capsys.readouterr().out
    assert "20261128T000001Z-bbbbbb (ci-synthetic) commit " + second[:12] + ": its sources DIFFER" in text
    assert "1 match, 1 differs" in text

    other = tmp_path / "other"
    write_run(other, "20261128T000002Z-cccccc", "e" * 40, "0" * 16)  # a commit this repository lacks
    write_run(other, "20261128T000003Z-dddddd", first, None)  # an older record
    assert cli.main(["provenance", str(other), "--repo", str(repo)]) == 0
    text = capsys.readouterr().out
    assert "not a commit of this repository" in text and "no source hash" in text
    assert cli.main(["provenance", str(other), "--repo", str(repo), "--strict"]) == 1
    capsys.readouterr()
    dirty = tmp_path / "dirty"  # a run that says it measured uncommitted changes: reported, not a finding
    write_run(dirty, "20261128T000004Z-eeeeee", second, measured, git_dirty=True)
    write_run(dirty, "20261128T000005Z-ffffff", "main", measured)  # a branch name: no commit id, never resolved
    assert cli.main(["provenance", str(dirty), "--repo", str(repo)]) == 0
    text = capsys.readouterr().out
    assert "as its git_dirty says" in text and "1 dirty, 1 unknown-commit" in text
    assert cli.main(["provenance", str(dirty), "--repo", str(repo), "--strict"]) == 1

    capsys.readouterr()
    assert cli.main(["provenance", str(out), "--repo", str(tmp_path / "nowhere")]) == 2
    assert "not a git repository" in capsys.readouterr().err
    bad = tmp_path / "bad.records.json"
    bad.write_text("{not json")
    assert cli.main(["provenance", str(bad), "--repo", str(repo)]) == 2
    assert "nothing readable" in capsys.readouterr().err
    assert cli.main(["provenance", str(tmp_path / "empty"), "--repo", str(repo)]) == 2


def test_committed_records_measured_the_commits_they_name():
    """Every committed run that records its sources hashes as the commit it names (where that commit is in this
    clone; records from before Env.sources cannot be checked and are counted, not passed silently)."""
    from tests import committed

    loaded = committed.load()
    runs = {(r.run_id, r.env.machine, r.git_commit, r.env.sources, r.git_dirty): None for r in loaded.records}
    verdicts = provenance.check_runs(runs, committed.REPO)
    wrong = [v.line() for v in verdicts if v.state == "differs"]
    assert not wrong, "\n".join(wrong)
    assert len(verdicts) >= 100  # the history is read (105 runs on 2026-11-28, none of them yet with a hash)
