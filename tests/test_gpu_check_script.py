"""scripts/gpu_check.sh without a GPU: nvidia-smi and python are stubs that log their arguments, so the tests see
the commands the script would run (machine name, suites, pre-pass; the multigpu and ddp parts' GPU and rank
counts up to 8 and 16 GPUs) and nothing is measured. Then the multigpu and ddp parts for real, rehearsed with
Gloo processes (``MULTIGPU_DEVICE=cpu GPUS=2``), as the next GPU session runs them."""
from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _stub(path: Path, body: str) -> None:
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _bench(tmp_path: Path, gpu_name: str | None, count: int = 1, parts: str = "bench", **env: str) -> list[list[str]]:
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    log = tmp_path / "calls.log"
    log.write_text("")
    if gpu_name is not None:
        lines = "\\n".join(f"GPU {i}: {gpu_name} (UUID: x)" for i in range(count))
        _stub(bin_ / "nvidia-smi", f'case "$*" in *noheader*) echo "{gpu_name}";; *-L*) printf "{lines}\\n";; '
                                   '*) echo stub;; esac\n')
    envlog = tmp_path / "env.log"  # each -m call's GPU and autotuning cache, as the sampled part sets them
    envlog.write_text("")
    _stub(bin_ / "fakepy", f'[ "${{1:-}}" = -m ] && echo "$*" >> {log} && '
                           f'echo "${{CUDA_VISIBLE_DEVICES:--}} ${{ROBOCACHE_CACHE_DIR:--}} $2 $3" >> {envlog}\n'
                           '[ "${1:-}" = - ] && cat > /dev/null\nexit 0\n')
    path = str(bin_) + os.pathsep + "/usr/bin:/bin"
    full = {"PATH": path, "PYTHON": str(bin_ / "fakepy"), "HOME": str(tmp_path), **env}
    run = subprocess.run(["bash", "scripts/gpu_check.sh", str(tmp_path / "out"), parts], cwd=ROOT, env=full,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    return [line.split() for line in log.read_text().splitlines()]


def _arg(call: list[str], flag: str) -> str:
    return call[call.index(flag) + 1]


@pytest.mark.parametrize(("gpu", "count", "machine", "cores", "jobs"), [
    ("NVIDIA H100 80GB HBM3", 1, "nvidia-h100-x1", 16, "8"), ("NVIDIA H200", 1, "nvidia-h200", 1, "1"),
    ("NVIDIA H200", 4, "nvidia-h200-x4", 3, "1")])
def test_machine_name_from_the_gpu(tmp_path: Path, gpu: str, count: int, machine: str, cores: int, jobs: str) -> None:
    """The machine's name from the GPUs present; without PRECOMPILE_JOBS the torch.compile pre-pass takes half the
    cores nproc reports, at least one (a stand-in nproc first on PATH; OMP_NUM_THREADS, which nproc obeys, ignored)."""
    (tmp_path / "bin").mkdir()
    _stub(tmp_path / "bin" / "nproc", f'[ -n "${{OMP_NUM_THREADS:-}}" ] && echo 1 || echo {cores}\n')
    calls = _bench(tmp_path, gpu, count, OMP_NUM_THREADS="1")
    runs = [c for c in calls if c[2:3] == ["run"]]
    assert [_arg(c, "--suite") for c in runs] == ["quick"]
    assert _arg(runs[0], "--machine") == machine and _arg(runs[0], "--precompile-jobs") == jobs


def test_explicit_machine_wins_and_suites_loop(tmp_path: Path) -> None:
    """ROBOCACHE_MACHINE names the runs and SUITE loops over suites, each with its report. Then a sampled run cut and resumed: SAMPLE_SEED reaches `run --sample-seed`; BENCH_TIMEOUT wraps the run in
    `timeout --signal=INT` (the runner keeps what it measured); RESUME copies the cut file where the call's --out
    finds it and passes it on; a RESUME that is no file, or with two suites, stops the call with exit 2 before
    anything runs. Every folder of OUTDIR ends packed in OUTDIR/folders.tgz."""
    calls = _bench(tmp_path, "NVIDIA H100 80GB HBM3", ROBOCACHE_MACHINE="lab-box", SUITE="quick nightly",
                   PRECOMPILE_JOBS="2")
    runs = [c for c in calls if c[2:3] == ["run"]]
    assert [_arg(c, "--suite") for c in runs] == ["quick", "nightly"]
    assert {_arg(c, "--machine") for c in runs} == {"lab-box"} and {_arg(c, "--precompile-jobs") for c in runs} == {"2"}
    reports = [c for c in calls if c[2:3] == ["report"]]
    assert [_arg(c, "--out").rsplit("/", 1)[1] for c in reports] == ["report-quick.md", "report-nightly.md",
                                                                     "kernels.md"]
    assert "--kernels" in reports[-1]

    env = {"ROBOCACHE_MACHINE": "nvidia-h200", "SUITE": "sampled", "OPS": "voxelize", "SAMPLE_SEED": "97"}
    (run,) = [c for c in _bench(tmp_path, "NVIDIA H200", **env) if c[2:3] == ["run"]]
    assert _arg(run, "--sample-seed") == "97" and _arg(run, "--ops") == "voxelize" and "--resume" not in run
    cut = tmp_path / "prev" / "h200-nvidia-h200" / "20261128T000000Z-abcdef-sampled.records.json"
    cut.parent.mkdir(parents=True)
    cut.write_text("{}")
    log = tmp_path / "timeout.log"
    _stub(tmp_path / "bin" / "timeout", f'echo "$*" >> {log}\nshift 3\nexec "$@"\n')
    (run,) = [c for c in _bench(tmp_path, "NVIDIA H200", RESUME=str(cut), BENCH_TIMEOUT="415", **env)
              if c[2:3] == ["run"]]
    copy = tmp_path / "out" / "results" / "h200-nvidia-h200" / cut.name
    assert _arg(run, "--resume") == str(copy) and copy.read_text() == "{}" and _arg(run, "--out").endswith("results")
    assert log.read_text().split()[:3] == ["--signal=INT", "--kill-after=30", "415"]
    # the device tool returns files two folders down at most: the run file comes back packed
    with tarfile.open(tmp_path / "out" / "folders.tgz") as tar:
        assert f"results/h200-nvidia-h200/{cut.name}" in tar.getnames()
    assert not list((tmp_path / "out").glob(".folders*"))
    for bad in ({"RESUME": str(tmp_path / "missing.json")}, {"RESUME": str(cut), "SUITE": "sampled quick"}):
        full = {"PATH": str(tmp_path / "bin") + os.pathsep + "/usr/bin:/bin", "PYTHON": str(tmp_path / "bin" / "fakepy"),
                "HOME": str(tmp_path), **env, **bad}
        r = subprocess.run(["bash", "scripts/gpu_check.sh", str(tmp_path / "out2"), "bench"], cwd=ROOT, env=full,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "RESUME" in r.stderr, r.stdout + r.stderr


def test_unknown_gpu_is_not_named_after_a_lent_machine(tmp_path: Path) -> None:
    calls = _bench(tmp_path, "NVIDIA A100-SXM4-80GB")
    run = next(c for c in calls if c[2:3] == ["run"])
    assert not _arg(run, "--machine").startswith("nvidia-h")


def test_multigpu_and_ddp_parts_on_any_gpu_count(tmp_path: Path) -> None:
    """One call runs both parts: the multigpu suite on every GPU, then DDP training at every rank count 1, 2, 4, 8
    (16) up to the GPU count, both under their timeouts, records side by side in OUT/records, the machine named
    after the GPUs. 8 and 16 GPUs: the commands are written, nothing runs them here."""
    for count, ranks in ((1, "1"), (2, "1,2"), (4, "1,2,4"), (8, "1,2,4,8"), (16, "1,2,4,8,16")):
        calls = _bench(tmp_path, "NVIDIA H100 80GB HBM3", count, parts="multigpu,ddp")
        mg = [c for c in calls if c[1:5] == ["robocache.bench.cli", "run", "--suite", "multigpu"]]
        ddp = [c for c in calls if c[1:3] == ["robocache.bench.pipelines", "run"]]
        assert len(mg) == len(ddp) == 1, calls
        assert _arg(mg[0], "--gpus") == str(count) and _arg(mg[0], "--device") == "gpu"
        assert _arg(ddp[0], "--ddp-ranks") == ranks and _arg(ddp[0], "--device") == "gpu"
        assert _arg(mg[0], "--machine") == _arg(ddp[0], "--machine") == f"nvidia-h100-x{count}"
        assert _arg(mg[0], "--out") == _arg(ddp[0], "--out") == str(tmp_path / "out" / "records")
        assert [_arg(c, "--out").rsplit("/", 1)[1] for c in calls if c[2:3] == ["report"]] == [
            "multigpu-report.md", "report-ddp.md"]
    # the sampled part: its ops spread over the GPUs, one run per op, a GPU's ops in turn, each GPU its own cache
    for count, at_once in ((1, 1), (2, 2), (4, 3)):
        calls = _bench(tmp_path, "NVIDIA H200", count, parts="sampled", SAMPLE_SEED="77", BENCH_TIMEOUT="400")
        runs = [c for c in calls if c[2:3] == ["run"]]
        assert sorted(_arg(c, "--ops") for c in runs) == ["fuse", "resample", "voxelize"]
        assert {(_arg(c, "--suite"), _arg(c, "--sample-seed"), _arg(c, "--providers")) for c in runs} == {
            ("sampled", "77", "robocache,torch_compile")}
        assert {_arg(c, "--machine") for c in runs} == {"nvidia-h200" if count == 1 else f"nvidia-h200-x{count}"}
        placed = [line.split() for line in (tmp_path / "env.log").read_text().splitlines() if line.split()[3] == "run"]
        assert sorted({p[0] for p in placed}) == [str(g) for g in range(at_once)]
        caches = dict((p[0], p[1]) for p in placed)  # one autotuning cache per GPU, none in OUTDIR (8 files back)
        assert len(set(caches.values())) == at_once and {(p[0], p[1]) for p in placed} == set(caches.items())
        assert not any(c.startswith(str(tmp_path / "out")) for c in caches.values())
        assert [_arg(c, "--out").rsplit("/", 1)[1] for c in calls if c[2:3] == ["report"]] == ["report-sampled.md"]
        assert "--sampled" in next(c for c in calls if c[2:3] == ["report"])
    # a narrowed CUDA_VISIBLE_DEVICES: GPU i of the part is the i-th visible one; OPS narrows the ops, an entry
    # OP:SEED draws its own seed (the same op twice, two seeds), the others SAMPLE_SEED's
    calls = _bench(tmp_path, "NVIDIA H200", 4, parts="sampled", CUDA_VISIBLE_DEVICES="2,3", GPUS="2",
                   OPS="resample:6427,resample:9173,voxelize", SAMPLE_SEED="5")
    placed = [line.split() for line in (tmp_path / "env.log").read_text().splitlines() if line.split()[3] == "run"]
    assert sorted({p[0] for p in placed}) == ["2", "3"]
    runs = [c for c in calls if c[2:3] == ["run"]]
    assert sorted((_arg(c, "--ops"), _arg(c, "--sample-seed")) for c in runs) == [
        ("resample", "6427"), ("resample", "9173"), ("voxelize", "5")]
    # a bad entry stops the call before any part runs (exit 2, nothing measured)
    for bad in ("resample:abc", "resample,,fuse", ","):
        with pytest.raises(AssertionError, match="OPS"):
            _bench(tmp_path, "NVIDIA H200", 2, parts="tests,sampled", OPS=bad)
        assert (tmp_path / "calls.log").read_text() == ""
    # nvidia-smi lists every GPU, CUDA_VISIBLE_DEVICES the ones to use: two, so two runs at once, never two on one
    # GPU (also when GPUS asks for more)
    for more in ({}, {"GPUS": "4"}):
        _bench(tmp_path, "NVIDIA H200", 4, parts="sampled", CUDA_VISIBLE_DEVICES="2,3", **more)
        placed = [line.split() for line in (tmp_path / "env.log").read_text().splitlines() if line.split()[3] == "run"]
        assert len(placed) == 3 and {p[0] for p in placed} == {"2", "3"}
        assert len({p[1] for p in placed}) == 2, placed  # GPU i's runs in turn, on GPU i's cache
    # the rehearsal's knobs: fewer GPUs, chosen rank counts, extra options (last, so they win), Gloo
    calls = _bench(tmp_path, "NVIDIA H200", 4, parts="ddp", GPUS="2", DDP_RANKS="2", DDP_ARGS="--train-steps 3",
                   MULTIGPU_DEVICE="cpu", ROBOCACHE_MACHINE="lab-box")
    (ddp,) = [c for c in calls if c[1:3] == ["robocache.bench.pipelines", "run"]]
    assert _arg(ddp, "--ddp-ranks") == "2" and _arg(ddp, "--device") == "cpu" and _arg(ddp, "--machine") == "lab-box"
    assert ddp[-2:] == ["--train-steps", "3"] and "--parts" in ddp
    # a lent machine's name that is not this machine (an H100 call given H200s, fewer GPUs): refused, nothing run
    for gpu, count, name in (("NVIDIA H200", 4, "nvidia-h100-x4"), ("NVIDIA H100 80GB HBM3", 2, "nvidia-h100-x4")):
        with pytest.raises(AssertionError, match="ROBOCACHE_MACHINE=nvidia-h100-x4, but this machine has"):
            _bench(tmp_path, gpu, count, parts="multigpu,ddp", ROBOCACHE_MACHINE=name)
        assert (tmp_path / "calls.log").read_text() == ""
    calls = _bench(tmp_path, "NVIDIA H100 80GB HBM3", 4, parts="ddp", ROBOCACHE_MACHINE="nvidia-h100-x4")
    assert _arg(next(c for c in calls if c[1:3] == ["robocache.bench.pipelines", "run"]), "--machine") == \
        "nvidia-h100-x4"
    # no GPU and no GPUS: the ddp part says so and fails the call, running nothing
    bin_ = tmp_path / "bin"
    (bin_ / "nvidia-smi").unlink()
    log = tmp_path / "calls.log"
    log.write_text("")
    run = subprocess.run(["bash", "scripts/gpu_check.sh", str(tmp_path / "out"), "ddp"], cwd=ROOT,
                         env={"PATH": str(bin_) + os.pathsep + "/usr/bin:/bin", "PYTHON": str(bin_ / "fakepy"),
                              "HOME": str(tmp_path)}, capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "no GPU here" in run.stderr and "DDP SUMMARY: ranks none" in run.stdout
    assert "pipelines" not in log.read_text()
    side = tmp_path / "side"
    side.mkdir()
    _sampled_part_side_by_side_failing_and_cut(side)


def _sampled_part_side_by_side_failing_and_cut(tmp_path: Path) -> None:
    """(Part of the multigpu/ddp test: the CPU tests outside the fast tier are counted, tests/test_durations.py.)
    The sampled part's runs overlap in time (one per GPU at once), each under BENCH_TIMEOUT; a failed op fails
    the call (exit 1) and the others still run; a SIGTERM (the device tool's limit) still leaves folders.tgz with
    the run files written so far; the asv part adds its step to the exit instead of replacing the packing."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    calls, tlog = tmp_path / "calls.log", tmp_path / "timeout.log"
    _stub(bin_ / "nvidia-smi", 'case "$*" in *noheader*) echo "NVIDIA H200";; '
                               '*-L*) printf "GPU 0: NVIDIA H200 (UUID: x)\\nGPU 1: NVIDIA H200 (UUID: y)\\n";; esac\n')
    _stub(bin_ / "timeout", f'echo "$*" >> {tlog}\nshift 3\nexec "$@"\n')
    # a run: its file at once, then "start", a nap, "end"; the op named in FAIL fails
    _stub(bin_ / "fakepy", '[ "${1:-}" = - ] && { cat > /dev/null; exit 0; }\n[ "${1:-}" = -m ] || exit 0\n'
                           '[ "$3" = run ] || exit 0\n'
                           'for a in "$@"; do [ "${p:-}" = --ops ] && op=$a; [ "${p:-}" = --out ] && out=$a; p=$a; done\n'
                           f'mkdir -p "$out/h200-x"; echo {{}} > "$out/h200-x/$op.records.json"\n'
                           f'echo "start $op" >> {calls}; sleep "${{NAP:-1}}"; echo "end $op" >> {calls}\n'
                           '[ "$op" = "${FAIL:-}" ] && exit 3\nexit 0\n')
    env = {"PATH": str(bin_) + os.pathsep + "/usr/bin:/bin", "PYTHON": str(bin_ / "fakepy"), "HOME": str(tmp_path),
           "BENCH_TIMEOUT": "400", "OPS": "resample,fuse"}
    out = tmp_path / "out"
    r = subprocess.run(["bash", "scripts/gpu_check.sh", str(out), "sampled"], cwd=ROOT, env={**env, "FAIL": "fuse"},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "SAMPLED SUMMARY" in r.stdout and r.stdout.rstrip().endswith("exit 1"), r.stdout
    events = calls.read_text().split("\n")
    assert [e.split()[0] for e in events if e][:2] == ["start", "start"]  # side by side, not in turn
    assert [line.split()[:3] for line in tlog.read_text().splitlines()] == [["--signal=INT", "--kill-after=30", "400"]] * 2
    with tarfile.open(out / "folders.tgz") as tar:
        assert {"results/h200-x/resample.records.json", "results/h200-x/fuse.records.json"} <= set(tar.getnames())
    # cut by SIGTERM while the runs nap: the files so far come back packed
    shutil.rmtree(out)
    p = subprocess.Popen(["bash", "scripts/gpu_check.sh", str(out), "sampled"], cwd=ROOT, env={**env, "NAP": "5"},
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if len(list(out.glob("results/h200-x/*.json"))) == 2:
            break
        time.sleep(0.1)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == 143
    with tarfile.open(out / "folders.tgz") as tar:
        assert {"results/h200-x/resample.records.json", "results/h200-x/fuse.records.json"} <= set(tar.getnames())
    time.sleep(5)  # the orphaned naps end
    # asv's exit step (its results copied into OUTDIR/asv) runs, and the folders are still packed after it
    shutil.rmtree(out)
    (out / "records" / "h200-x").mkdir(parents=True)
    (out / "records" / "h200-x" / "r.records.json").write_text("{}")
    subprocess.run(["bash", "scripts/gpu_check.sh", str(out), "asv"], cwd=ROOT, env=env, capture_output=True,
                   text=True, timeout=60)
    assert not (out / ".asv-start").exists()
    with tarfile.open(out / "folders.tgz") as tar:
        assert "records/h200-x/r.records.json" in tar.getnames() and "asv" in tar.getnames()


def test_multigpu_and_ddp_rehearsed_with_gloo(tmp_path: Path) -> None:
    """The next GPU session's one call (``gpu_check.sh OUT multigpu,ddp``) for real on the CPU, at the smallest
    size that runs the script's wiring: one launch per part (a one-rank multigpu case; DDP training at one rank
    from every loader, tiny sizes), records of both under OUT/records/cpu-<machine>/, the reports and summary
    lines, no process left behind. Two Gloo ranks, their efficiency and failures are tests/test_distributed.py's
    and tests/test_pipelines_ddp.py's; the rank counts the script derives from the GPUs are the stub tests'."""
    pytest.importorskip("h5py")
    pytest.importorskip("torch")
    import sys
    import uuid

    from robocache.bench import store
    from robocache.bench.multigpu import launch

    if not launch.available("cpu")[0]:
        pytest.skip("torch.distributed with Gloo is missing")
    mark = uuid.uuid4().hex
    case = "fuse/robot-B8-T100-weak-g1-nogather/float32/numpy"
    env = {**os.environ, "PYTHON": sys.executable, "HOME": str(tmp_path), "ROBOCACHE_MACHINE": "ci-rehearsal",
           "MULTIGPU_DEVICE": "cpu", "GPUS": "2", "MULTIGPU_TIMEOUT": "0", "DDP_TIMEOUT": "0", "DDP_MB": "1",
           "DDP_RANKS": "1", "MULTIGPU_ARGS": f"--cases {case} --time-limit 0.1 --noise-target 0.05",
           "DDP_ARGS": "--batch-sizes 2 --train-batches 2 --workers 0 --train-steps 3 --models mlp",
           "ROBOCACHE_TEST_MARK": mark}
    out = tmp_path / "out"
    run = subprocess.run(["bash", "scripts/gpu_check.sh", str(out), "multigpu,ddp"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=1200)  # a bound on a hang on a loaded machine
    print(run.stdout[-3000:], run.stderr[-2000:])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "MULTIGPU SUMMARY: 2 GPUs, machine ci-rehearsal" in run.stdout and "exit 0" in run.stdout
    assert "DDP SUMMARY: ranks 1, machine ci-rehearsal" in run.stdout
    assert not launch.processes_with_env("ROBOCACHE_TEST_MARK", mark)
    loaded = store.load(out / "records")
    assert not loaded.bad and {r.status for r in loaded.records} == {"ok"}
    names = sorted(Path(r.source).name.split("-", 2)[2] for r in loaded.records)
    assert names == ["multigpu-g1.records.json"] + ["pipelines-ddp-g1.records.json"] * 3
    assert {Path(r.source).parent.name for r in loaded.records} == {"cpu-ci-rehearsal"}
    ddp = [r for r in loaded.records if r.suite == "pipelines"]
    assert {(r.case.provider, r.distributed.world_size) for r in ddp} == {
        (p, 1) for p in ("cpu_workers", "robocache", "episode_cache")}
    for r in ddp:
        assert r.distributed.backend == "gloo" and r.pipeline.figures["steps_per_s"] > 0
        assert 0 <= r.pipeline.figures["data_wait_share"] <= 1
    report = (out / "report-ddp.md").read_text()
    # the DDP table: machine, model, batch per GPU, loader, ranks
    assert "## DDP training over GPUs" in report and "| CPU (ci-rehearsal) | mlp | 2 | robocache.fuse | 1 | " in report
    assert "| ranks |" in (out / "multigpu-report.md").read_text()
    assert run.stdout.count("SUMMARY:") == 2
