"""Environment capture, clock sampling and health flags, on a CPU-only machine.

Real NVML cannot initialise here (no driver), which is itself a case under test; the GPU paths run
against a fake ``pynvml`` module injected through ``sys.modules``.
"""
from __future__ import annotations

import os
import sys
import time
import types

import pytest
import msgspec

from robocache.bench import env as envmod
from robocache.bench.env import ClockSampler, assess_health, capture_env, normalize_arch
from robocache.bench.schema import Clocks, Env, Health

class _Adapter:
    """Validate a plain dict against a schema struct (as the store does on write)."""

    def __init__(self, typ):
        self.typ = typ

    def validate_python(self, obj):
        return msgspec.convert(obj, self.typ)


ENV = _Adapter(Env)
CLOCKS = _Adapter(Clocks)
HEALTH = _Adapter(Health)


@pytest.fixture(autouse=True)
def _fresh_nvml_state(monkeypatch):
    """Each test sees its own NVML init (the module caches the last one per pynvml module)."""
    monkeypatch.setattr(envmod, "_nvml_state", None)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("ROBOCACHE_MACHINE", raising=False)


@pytest.fixture
def no_torch(monkeypatch):
    """torch absent, whatever is installed: the torch fallback must not fill anything."""
    monkeypatch.setitem(sys.modules, "torch", None)


# --- normalize_arch ---------------------------------------------------------------------------

@pytest.mark.parametrize("name, arch", [
    ("NVIDIA A100-SXM4-80GB", "A100"),
    ("NVIDIA A100 80GB PCIe", "A100"),
    ("NVIDIA A100-PCIE-40GB", "A100"),
    ("NVIDIA H100 80GB HBM3", "H100"),
    ("NVIDIA H100 PCIe", "H100"),
    ("NVIDIA H100 NVL", "H100"),
    ("NVIDIA H200", "H200"),
    ("NVIDIA H200 NVL", "H200"),
    ("NVIDIA GH200 480GB", "GH200"),
    ("NVIDIA B200", "B200"),
    ("NVIDIA L40S", "L40S"),
    ("NVIDIA L4", "L4"),
    ("NVIDIA A10G", "A10G"),
    ("Tesla V100-SXM2-16GB", "V100"),
    ("NVIDIA GeForce RTX 4090", "RTX 4090"),
    ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada"),
    ("NVIDIA Foo 9", "Foo 9"),
])
def test_normalize_arch(name, arch):
    assert normalize_arch(name, None) == arch


def test_normalize_arch_unknowns():
    assert normalize_arch(None, None) is None
    assert normalize_arch(None, "9.0") is None
    # The capability is never used to invent a label: H100 and H200 share 9.0.
    assert normalize_arch("NVIDIA Foo 9", "9.0") == "Foo 9"
    assert normalize_arch("NVIDIA GH200 480GB", "9.0") != "H200"


# --- capture_env without NVML -----------------------------------------------------------------

def test_capture_env_gpu_without_driver_is_valid_and_unknown(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # as on CI: no usable NVML (also on a GPU machine)
    e = capture_env("gpu")
    ENV.validate_python(e)
    assert e["device"] == "gpu"
    assert e["nvml"].startswith("unknown:")
    assert e["python"] and isinstance(e["libs"], dict)
    assert "msgspec" in e["libs"] and "numpy" in e["libs"]


def test_capture_env_without_pynvml(monkeypatch, no_torch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    e = capture_env("gpu")
    ENV.validate_python(e)
    assert e["nvml"].startswith("unknown: ") and "Error" in e["nvml"]
    assert all(e[k] is None for k in envmod._GPU_FIELDS)
    assert "nvidia-ml-py" not in e["libs"] and "torch" not in e["libs"]


def test_capture_env_cpu(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    e = capture_env("cpu")
    ENV.validate_python(e)
    assert e["device"] == "cpu" and e["nvml"] == "unknown: cpu run"
    assert all(e[k] is None for k in envmod._GPU_FIELDS)
    assert e["machine"] == e["hostname"]


def test_machine_name(monkeypatch):
    monkeypatch.setenv("ROBOCACHE_MACHINE", "h200-x8-a")
    assert capture_env("cpu")["machine"] == "h200-x8-a"
    assert capture_env("cpu", machine="explicit")["machine"] == "explicit"


def test_bad_device_is_refused():
    with pytest.raises(ValueError):
        capture_env("tpu")


# --- a fake NVML ------------------------------------------------------------------------------

class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):  # noqa: N801 (pynvml's spelling)
    pass


class NVMLError_DriverNotLoaded(NVMLError):  # noqa: N801
    pass


def make_fake(*, reasons: int = 0x4 | 0x1, procs: tuple[int, ...] = (111, 222),
              broken: dict[str, type[BaseException]] | None = None,
              init_error: BaseException | None = None, old_binding: bool = False) -> types.ModuleType:
    """An H200 as pynvml reports it; ``broken`` maps function names to the error they raise."""
    nv = types.ModuleType("pynvml")
    nv.NVML_CLOCK_SM, nv.NVML_CLOCK_MEM, nv.NVML_TEMPERATURE_GPU = 1, 2, 0
    nv.NVMLError, nv.NVMLError_NotSupported = NVMLError, NVMLError_NotSupported
    nv.calls = {}
    handle = object()

    def fn(name, result):
        def f(*args):
            nv.calls[name] = nv.calls.get(name, 0) + 1
            if broken and name in broken:
                raise broken[name]("fake failure")
            return result(*args) if callable(result) else result
        setattr(nv, name, f)

    def init():
        if init_error is not None:
            raise init_error
    nv.nvmlInit = init
    fn("nvmlDeviceGetCount", 8)
    fn("nvmlDeviceGetHandleByIndex", lambda i: handle if i == 0 else ("other", i))
    fn("nvmlDeviceGetHandleByUUID", lambda u: ("uuid", u))
    fn("nvmlDeviceGetName", "NVIDIA H200")
    fn("nvmlDeviceGetCudaComputeCapability", lambda h: (9, 0))
    fn("nvmlDeviceGetMemoryInfo", lambda h: types.SimpleNamespace(total=143771 * 2**20, free=0, used=0))
    fn("nvmlDeviceGetAttributes", lambda h: types.SimpleNamespace(multiprocessorCount=132))
    fn("nvmlSystemGetDriverVersion", "580.95.05")
    fn("nvmlSystemGetCudaDriverVersion", 13000)
    clocks = iter(range(1000))
    fn("nvmlDeviceGetClockInfo", lambda h, t: (1980 - 10 * (next(clocks) % 3)) if t == 1 else 3201)
    fn("nvmlDeviceGetMaxClockInfo", lambda h, t: 1980)
    fn("nvmlDeviceGetTemperature", lambda h, s: 61)
    fn("nvmlDeviceGetPowerUsage", lambda h: 412_345)
    fn("nvmlDeviceGetCurrentClocksThrottleReasons", lambda h: reasons)
    if not old_binding:
        fn("nvmlDeviceGetCurrentClocksEventReasons", lambda h: reasons)
    pid_list = [types.SimpleNamespace(pid=p, usedGpuMemory=1) for p in (*procs, os.getpid())]
    fn("nvmlDeviceGetComputeRunningProcesses", lambda h: pid_list)
    return nv


def _wait_for_samples(cs: ClockSampler, n: int, timeout_s: float = 120.0) -> None:
    """Until the sampler holds ``n`` samples (its thread took some); a generous bound, not a speed test."""
    deadline = time.monotonic() + timeout_s
    while cs.stats()["samples"] < n:
        assert time.monotonic() < deadline, f"the sampler thread took no sample in {timeout_s:g} s"
        time.sleep(0.005)


def test_capture_env_with_fake_h200(monkeypatch, no_torch):
    monkeypatch.setitem(sys.modules, "pynvml", make_fake())
    e = capture_env("gpu")
    ENV.validate_python(e)
    assert e["nvml"] == "ok"
    assert e["gpu_name"] == "NVIDIA H200" and e["arch"] == "H200"
    assert e["compute_capability"] == "9.0" and e["gpu_count"] == 8 and e["sm_count"] == 132
    assert e["gpu_memory_gb"] == pytest.approx(140.4, abs=0.01)
    assert e["driver"] == "580.95.05" and e["cuda"] == "13.0"
    assert e["l2_mb"] is None  # NVML has no L2 size and torch is absent: unknown, not guessed


def test_clock_sampler_with_fake_h200(monkeypatch):
    fake = make_fake()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with ClockSampler(0, interval_s=0.005) as cs:
        # the thread's first sample (the fake's third SM clock, 1960) is waited for, not slept for: a loaded machine
        # can keep the thread off a core for longer than any fixed pause (issue 16)
        _wait_for_samples(cs, 3)
    c = cs.stats()
    CLOCKS.validate_python(c)
    assert c["samples"] >= 4  # the start sample, at least two of the thread's, the stop sample
    assert c["sm_mhz_min"] == 1960 and c["sm_mhz_max_supported"] == 1980
    assert 1960 <= c["sm_mhz_median"] <= 1980
    assert c["mem_mhz_median"] == 3201 and c["temperature_c_max"] == 61
    assert c["power_w_max"] == pytest.approx(412.345)
    assert c["throttle_reasons"] == ["gpu_idle", "sw_power_cap"]
    assert c["other_processes"] == 2  # our own pid is not "other"
    assert fake.calls.get("nvmlDeviceGetCurrentClocksThrottleReasons", 0) == 0  # the new name first

    h = assess_health(c, noise_target_met=True)
    HEALTH.validate_python(h)
    assert h["throttled"] and h["contended"] and not h["noisy"]
    assert "throttled: sw_power_cap" in h["reasons"]
    assert "contended: 2 other processes on the GPU" in h["reasons"]


def test_clock_sampler_old_binding_uses_throttle_reasons(monkeypatch):
    fake = make_fake(reasons=0x40, procs=(), old_binding=True)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with ClockSampler(0, interval_s=0.01) as cs:
        pass
    c = cs.stats()
    assert c["samples"] >= 1 and c["throttle_reasons"] == ["hw_thermal_slowdown"]
    assert c["other_processes"] == 0
    h = assess_health(c, None)
    assert h["throttled"] and not h["contended"] and not h["noisy"]


def test_cuda_visible_devices_picks_the_right_nvml_device(monkeypatch, no_torch):
    fake = make_fake()
    seen = []
    fake.nvmlDeviceGetName = lambda h: seen.append(h) or "NVIDIA H200"
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    capture_env("gpu", device_index=1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-abc")
    capture_env("gpu", device_index=0)
    assert seen == [("other", 5), ("uuid", "GPU-abc")]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    e = capture_env("gpu", device_index=1)  # not visible: unknown, not another GPU's data
    assert e["nvml"].startswith("unknown: IndexError") and e["gpu_name"] is None


BROKEN = {
    "nvmlDeviceGetName": NVMLError_NotSupported,
    "nvmlDeviceGetMemoryInfo": RuntimeError,
    "nvmlDeviceGetAttributes": NVMLError_NotSupported,
    "nvmlSystemGetCudaDriverVersion": RuntimeError,
    "nvmlDeviceGetClockInfo": NVMLError_NotSupported,
    "nvmlDeviceGetMaxClockInfo": RuntimeError,
    "nvmlDeviceGetPowerUsage": NVMLError_NotSupported,
    "nvmlDeviceGetCurrentClocksEventReasons": RuntimeError,
    "nvmlDeviceGetCurrentClocksThrottleReasons": NVMLError_NotSupported,
    "nvmlDeviceGetComputeRunningProcesses": RuntimeError,
}


def test_partly_unsupported_nvml_never_crashes(monkeypatch, no_torch):
    fake = make_fake(broken=BROKEN)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    e = capture_env("gpu")
    ENV.validate_python(e)
    assert e["nvml"] == "ok"  # NVML works; single fields are unknown
    assert e["gpu_name"] is None and e["arch"] is None and e["gpu_memory_gb"] is None
    assert e["sm_count"] is None and e["cuda"] is None
    assert e["compute_capability"] == "9.0" and e["driver"] == "580.95.05"

    with ClockSampler(0, interval_s=0.005) as cs:
        time.sleep(0.03)
    c = cs.stats()
    CLOCKS.validate_python(c)
    assert c["samples"] >= 2
    assert c["sm_mhz_min"] is c["sm_mhz_median"] is c["mem_mhz_median"] is None
    assert c["sm_mhz_max_supported"] is None and c["power_w_max"] is None
    assert c["throttle_reasons"] == [] and c["other_processes"] is None
    assert c["temperature_c_max"] == 61
    # NotSupported is permanent: asked once per query (SM and memory clock), not every interval.
    assert fake.calls["nvmlDeviceGetClockInfo"] == 2 and fake.calls["nvmlDeviceGetPowerUsage"] == 1
    h = assess_health(c, True)
    assert not h["throttled"] and not h["contended"]
    assert any("other processes unknown" in r for r in h["reasons"])


def test_nvml_init_failure_is_unknown(monkeypatch, no_torch):
    monkeypatch.setitem(sys.modules, "pynvml", make_fake(init_error=NVMLError_DriverNotLoaded("Driver Not Loaded")))
    e = capture_env("gpu")
    ENV.validate_python(e)
    assert e["nvml"] == "unknown: NVMLError_DriverNotLoaded: Driver Not Loaded"
    with ClockSampler(0) as cs:
        pass
    assert cs.stats()["samples"] == 0 and cs.error.startswith("NVMLError_DriverNotLoaded")


# --- ClockSampler and health without NVML -----------------------------------------------------

def test_clock_sampler_without_nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    before = {t.name for t in __import__("threading").enumerate()}
    with ClockSampler(0, interval_s=0.001) as cs:
        assert cs._thread is None  # no thread without NVML
        time.sleep(0.01)
    c = cs.stats()
    CLOCKS.validate_python(c)
    assert c == {"sm_mhz_min": None, "sm_mhz_median": None, "sm_mhz_max_supported": None,
                 "mem_mhz_median": None, "temperature_c_max": None, "power_w_max": None,
                 "throttle_reasons": [], "other_processes": None, "samples": 0}
    assert "robocache-clock-sampler" not in before
    h = assess_health(c, None)
    HEALTH.validate_python(h)
    assert h == {"throttled": False, "contended": False, "noisy": False,
                 "reasons": ["clocks unknown (NVML unavailable)"]}
    assert assess_health(None, None)["reasons"] == ["clocks unknown (NVML unavailable)"]


def _clocks(reasons: list[str], others: int | None = 0) -> dict:
    return {"sm_mhz_min": 1980.0, "sm_mhz_median": 1980.0, "sm_mhz_max_supported": 1980.0,
            "mem_mhz_median": 3201.0, "temperature_c_max": 50.0, "power_w_max": 300.0,
            "throttle_reasons": reasons, "other_processes": others, "samples": 3}


@pytest.mark.parametrize("reason", ["gpu_idle", "applications_clocks_setting", "sync_boost",
                                    "display_clock_setting"])
def test_settings_are_not_throttling(reason):
    h = assess_health(_clocks([reason]), True)
    assert h == {"throttled": False, "contended": False, "noisy": False, "reasons": []}


@pytest.mark.parametrize("reason", ["sw_power_cap", "hw_slowdown", "hw_thermal_slowdown",
                                    "hw_power_brake_slowdown", "sw_thermal_slowdown"])
def test_throttling_reasons(reason):
    h = assess_health(_clocks(["gpu_idle", reason]), True)
    assert h["throttled"] and h["reasons"] == [f"throttled: {reason}"]


def test_noise_and_contention_flags():
    h = assess_health(_clocks([], others=1), False)
    HEALTH.validate_python(h)
    assert h["noisy"] and h["contended"] and not h["throttled"]
    assert h["reasons"] == ["contended: 1 other process on the GPU", "noisy: noise target not met"]
    assert not assess_health(_clocks([]), None)["noisy"]  # unknown noise is not a flag


def test_reason_bits_match_pynvml():
    """Our hard-coded bit table is the binding's (when the real nvidia-ml-py is installed)."""
    nv = pytest.importorskip("pynvml")
    for const, name in [("SwPowerCap", "sw_power_cap"), ("HwSlowdown", "hw_slowdown"),
                        ("HwThermalSlowdown", "hw_thermal_slowdown"), ("GpuIdle", "gpu_idle"),
                        ("HwPowerBrakeSlowdown", "hw_power_brake_slowdown"), ("SyncBoost", "sync_boost"),
                        ("SwThermalSlowdown", "sw_thermal_slowdown"),
                        ("ApplicationsClocksSetting", "applications_clocks_setting"),
                        ("DisplayClockSetting", "display_clock_setting")]:
        bit = getattr(nv, f"nvmlClocksEventReason{const}", None) or getattr(nv, f"nvmlClocksThrottleReason{const}")
        assert envmod.THROTTLE_REASON_BITS[bit] == name
    assert envmod.throttle_reason_names(0x4 | 0x1 | 0x8000) == ["gpu_idle", "sw_power_cap", "unknown_0x8000"]


def test_no_import_time_side_effects():
    """Importing the module imports neither pynvml nor torch (checked in a fresh interpreter)."""
    import subprocess

    code = ("import sys, robocache.bench.env; "
            "print('pynvml' in sys.modules, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(__file__)))
    assert out.stdout.split() == ["False", "False"]


def fake_torch(cuda: bool = True) -> types.ModuleType:
    props = types.SimpleNamespace(name="NVIDIA H200", major=9, minor=0, multi_processor_count=132,
                                  total_memory=143771 * 2**20, L2_cache_size=60 * 2**20)
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_available=lambda: cuda, device_count=lambda: 8,
                                       get_device_properties=lambda i: props)
    return torch


def test_torch_completes_what_nvml_lacks(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", fake_torch())
    fake = make_fake(broken={"nvmlDeviceGetAttributes": NVMLError_NotSupported,
                             "nvmlDeviceGetName": RuntimeError})
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    e = capture_env("gpu")
    ENV.validate_python(e)
    assert e["nvml"] == "ok" and e["l2_mb"] == 60 and e["sm_count"] == 132
    assert e["gpu_name"] == "NVIDIA H200" and e["arch"] == "H200"


def test_torch_alone_without_nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", fake_torch())
    monkeypatch.setitem(sys.modules, "pynvml", None)
    e = capture_env("gpu")
    ENV.validate_python(e)
    assert e["nvml"].startswith("unknown:")
    assert e["arch"] == "H200" and e["compute_capability"] == "9.0" and e["gpu_count"] == 8
    assert e["driver"] is None and e["cuda"] is None  # only NVML knows these
    monkeypatch.setitem(sys.modules, "torch", fake_torch(cuda=False))
    e = capture_env("gpu")
    assert all(e[k] is None for k in envmod._GPU_FIELDS)
