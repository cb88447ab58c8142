"""The run context: one run's identity and where its records go, shared by every way of running cases.

``robocache-bench run`` (:mod:`robocache.bench.runner`), the multi-GPU launcher and its ranks
(:mod:`robocache.bench.multigpu.launch`, :mod:`robocache.bench.multigpu.rank`) and the asv / pytest-benchmark front
ends (:mod:`robocache.bench.frontend`) all start a :class:`RunContext` and ask it for what they used to
work out each on their own:

* the run id (:func:`new_run_id`), the suite, the front end, the device, the git commit (:func:`git_state`);
* the environment (the schema's ``Env``, captured once) and so the machine name that keys the series;
* the results folder rule: ``<out_dir>/<arch or "cpu">-<machine>/`` (:attr:`RunContext.folder`);
* the run file (``<name>.records.json`` in that folder) and writing or appending to it through the store
  (validated, atomic);
* every :class:`~robocache.bench.messages.Task` of the run (:meth:`RunContext.task`, the one constructor).

The context is itself a message: a multi-GPU launch sends it to every rank in its :class:`LaunchTask`.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import msgspec

from . import store
from .messages import Baseline, Message, Task, TimingOptions
from .schema import Env


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


def git_state(repo: Path | None = None) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout robocache runs from; ROBOCACHE_GIT_COMMIT overrides."""
    env_commit = os.environ.get("ROBOCACHE_GIT_COMMIT")
    if env_commit:
        return env_commit, None
    repo = repo or Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                                timeout=10)
        if commit.returncode != 0:
            return None, None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                               capture_output=True, text=True, timeout=10)
        return commit.stdout.strip(), bool(dirty.stdout.strip()) if dirty.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None, None


def capture_env_in_child(device: str, machine: str | None) -> dict[str, Any]:
    """The schema ``Env``, captured in a child process: the caller must not hold a CUDA context on GPU 0 (a
    multi-GPU launch's ranks would count it as another process on their GPU)."""
    code = ("import json, sys\nfrom robocache.bench.env import capture_env\n"
            "print(json.dumps(capture_env(sys.argv[1], machine=sys.argv[2] or None)))")
    out = subprocess.run([sys.executable, "-c", code, device, machine or ""], capture_output=True, text=True,
                         timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"capturing the environment failed: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


class RunContext(Message):
    """One run: who measures (run id, suite, front end, commit), where (the environment) and into which file."""

    run_id: str
    suite: str
    frontend: str
    device: Literal["gpu", "cpu"]
    env: Env
    out_dir: str  # the results root; the run's files go to its machine folder (folder)
    name: str  # the run file's name, without the .records.json suffix
    git_commit: str | None = None
    git_dirty: bool | None = None
    synthetic: bool = False

    @classmethod
    def start(cls, *, suite: str, device: str, frontend: str = "cli", out_dir: str | os.PathLike[str] = "results",
              machine: str | None = None, run_id: str | None = None, env: Any = None,
              git: tuple[str | None, bool | None] | None = None, name: str | None = None,
              synthetic: bool = False) -> RunContext:
        """A new run's context. ``env``: the environment already captured (a dict or ``Env``), else it is
        captured here; ``git``: (commit, dirty), else :func:`git_state`; ``name``: the run file, else
        ``<run id>-<suite>``."""
        if device not in ("gpu", "cpu"):
            raise ValueError(f"device must be 'gpu' or 'cpu', got {device!r}")
        if env is None:
            from . import env as envmod

            env = envmod.capture_env(device, machine=machine)
        run_id = run_id or new_run_id()
        commit, dirty = git if git is not None else git_state()
        return cls(run_id=run_id, suite=suite, frontend=frontend, device=device,
                   env=env if isinstance(env, Env) else msgspec.convert(env, Env), out_dir=os.fspath(out_dir),
                   name=name or f"{run_id}-{suite}", git_commit=commit, git_dirty=dirty, synthetic=synthetic)

    @property
    def machine(self) -> str:
        """The machine name keying the series (ROBOCACHE_MACHINE or ``--machine``, else the hostname)."""
        return self.env.machine

    @property
    def folder(self) -> Path:
        """``<out_dir>/<arch>-<machine>`` on a GPU (``gpu-<machine>`` when the arch is unknown), ``cpu-<machine>``."""
        slug = (self.env.arch or "gpu").lower() if self.env.device == "gpu" else "cpu"
        return Path(self.out_dir) / store.safe_component(f"{slug}-{self.machine}")

    def path(self, name: str | None = None) -> Path:
        """The run file (or the run's file ``name``: a multi-GPU run writes one per world size)."""
        return self.folder / f"{store.safe_component(name or self.name)}{store.RECORDS_SUFFIX}"

    def task(self, case_key: str | None = None, *, timing: TimingOptions | dict[str, Any] | None = None,
             **options: Any) -> Task:
        """The one constructor of a :class:`Task` of this run: the run's fields, ``case_key`` and ``options``
        (``kind``, ``cache``, ``seed``, ``check_only``, ``graph_check``, ``ceiling_gb_per_s``). ``timing``: timer
        options (a dict is checked: an unknown name fails here). A misspelt option raises ``TypeError``."""
        return Task(run_id=self.run_id, suite=self.suite, frontend=self.frontend, device=self.device,
                    git_commit=self.git_commit, git_dirty=self.git_dirty, synthetic=self.synthetic,
                    case_key=case_key, timing=TimingOptions.of(timing), **options)

    def records(self, name: str | None = None) -> list[Any]:
        """The records already in the run file (none when it does not exist yet); a bad file raises."""
        path = self.path(name)
        if not path.exists():
            return []
        loaded = store.load(path)
        if loaded.bad:
            raise store.SchemaError(f"{path}: {loaded.bad[0][1]} (not appending to a run file that does not load)")
        return list(loaded.records)

    def write(self, records: list[Any], name: str | None = None) -> Path:
        """Rewrite the run file with ``records`` (validated, atomic: a checkpoint of the run)."""
        return store.write_records(self.folder, self.env, records, name=name or self.name, unique=False)

    def append(self, records: list[Any], name: str | None = None) -> Path:
        """Add ``records`` to the run file (one writer at a time: read, add, rewrite)."""
        return self.write([*self.records(name), *records], name)


class LaunchTask(Message):
    """What every rank of one torchrun launch runs: the cases of one world size, in order."""

    task: Task  # the options every case shares (its case_key is None)
    run: RunContext  # where the records go: the writer rank appends to run.path(records_name)
    records_name: str  # the world size's run file
    cases: list[str]
    world_size: int
    workdir: str  # the launcher's folder of watched files (absent on other nodes)
    collective_timeout_s: float
    node_rank: int = 0
    baselines: dict[str, Baseline] = {}
