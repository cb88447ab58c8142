"""Where a benchmark ran and how healthy the GPU was while it ran, through NVML.

Three things, each matching a TypedDict of :mod:`robocache.bench.schema`:

* :func:`capture_env` -> ``Env``: GPU name, normalized architecture, compute capability, memory, SM
  count, L2, driver and CUDA driver version, CPU, Python and library versions.
* :class:`ClockSampler` -> ``Clocks``: a daemon thread that samples SM/memory clocks, temperature,
  power, clock-event (throttle) reasons and the other compute processes while a case runs.
* :func:`assess_health` -> ``Health``: throttled / contended / noisy flags with readable reasons.

NVML is optional: a missing ``pynvml``, a machine without a driver, or a query the GPU does not
support is recorded as unknown (``None``, ``nvml: "unknown: ..."``) and never raises. Nothing happens
at import: ``pynvml`` and ``torch`` are imported, and NVML initialised, on first use.

Device indices are CUDA indices (what ``cuda:<i>`` means in this process). NVML numbers GPUs
ignoring ``CUDA_VISIBLE_DEVICES``, so the index is translated through that variable; otherwise a
run pinned to GPU 3 would report GPU 0's clocks.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import platform
import re
import socket
import statistics
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["normalize_arch", "capture_env", "ClockSampler", "assess_health",
           "THROTTLE_REASON_BITS", "THROTTLING_REASONS", "throttle_reason_names"]

# --- architecture names -----------------------------------------------------------------------

# First match wins. Ordered so that a longer model is tried before a model it contains (GH200 before
# H200, A10G before A10, L40S before L40); \b keeps "A10" from matching "A100". Labels are
# re.Match.expand templates, so RTX models keep their number.
_ARCH_TABLE: list[tuple[re.Pattern[str], str]] = [(re.compile(p, re.IGNORECASE), label) for p, label in [
    (r"\bGB200\b", "GB200"),
    (r"\bGB300\b", "GB300"),
    (r"\bGH200\b", "GH200"),
    (r"\bB300\b", "B300"),
    (r"\bB200\b", "B200"),
    (r"\bB100\b", "B100"),
    (r"\bH200\b", "H200"),
    (r"\bH100\b", "H100"),
    (r"\bH800\b", "H800"),
    (r"\bH20\b", "H20"),
    (r"\bA100\b", "A100"),
    (r"\bA800\b", "A800"),
    (r"\bA10G\b", "A10G"),
    (r"\bA10\b", "A10"),
    (r"\bA30\b", "A30"),
    (r"\bA40\b", "A40"),
    (r"\bL40S\b", "L40S"),
    (r"\bL40\b", "L40"),
    (r"\bL4\b", "L4"),
    (r"\bV100\b", "V100"),
    (r"\bT4\b", "T4"),
    (r"\bP100\b", "P100"),
    (r"\bRTX (\w+) Ada\b", r"RTX \1 Ada"),  # "NVIDIA RTX 6000 Ada Generation"
    (r"\bRTX (A\d{4})\b", r"RTX \1"),  # "NVIDIA RTX A6000"
    (r"\bRTX (\d{4}(?: Ti)?(?: SUPER)?)\b", r"RTX \1"),  # "NVIDIA GeForce RTX 4090"
]]


def normalize_arch(gpu_name: str | None, compute_capability: str | None = None) -> str | None:
    """The short architecture label used to group results: "NVIDIA H100 80GB HBM3" -> "H100".

    Unknown names come back as the name without its "NVIDIA " prefix; ``None`` stays ``None``.
    ``compute_capability`` is accepted as a hint but never used to invent a label: two different
    GPUs share a capability (H100 and H200 are both 9.0), so a guess from it would mix series.
    """
    del compute_capability  # see the docstring: deliberately not used to guess
    if gpu_name is None:
        return None
    name = " ".join(str(gpu_name).split())
    if not name:
        return None
    for pattern, label in _ARCH_TABLE:
        m = pattern.search(name)
        if m:
            return m.expand(label)
    return name.removeprefix("NVIDIA ").strip() or name


# --- NVML access ------------------------------------------------------------------------------

_nvml_lock = threading.Lock()
# (module, error) of the last initialisation: keyed on the module object so that a different
# pynvml (tests inject fakes through sys.modules) gets its own init, and a failure is not retried
# on every call (a missing driver costs a library search each time).
_nvml_state: tuple[ModuleType, str | None] | None = None


def _why(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def nvml() -> tuple[ModuleType | None, str | None]:
    """``(pynvml, None)`` once ``nvmlInit`` has succeeded, else ``(None, "<Type: message>")``.

    nvmlShutdown is never called: NVML reference-counts its init, and a sampler thread or another
    library may still be using it; the process exit releases it.
    """
    global _nvml_state
    try:
        import pynvml  # noqa: PLC0415 (lazy: no import-time side effects, optional dependency)
    except Exception as e:  # noqa: BLE001  ImportError, or a broken install: NVML is then unknown
        return None, _why(e)
    with _nvml_lock:
        if _nvml_state is None or _nvml_state[0] is not pynvml:
            try:
                pynvml.nvmlInit()
                _nvml_state = (pynvml, None)
            except Exception as e:  # noqa: BLE001  NVMLError_LibraryNotFound, DriverNotLoaded, ...
                _nvml_state = (pynvml, _why(e))
        err = _nvml_state[1]
    return (None, err) if err else (pynvml, None)


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, or ``None`` if it raises anything (NotSupported, NoPermission, a binding
    without the function, ...): one unsupported field must not lose the others."""
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001  one unsupported field must not lose the others
        return None


def _first(nv: ModuleType, names: tuple[str, ...], *args: Any) -> Any:
    """The result of the first of ``names`` that the binding has and that succeeds, else None."""
    for name in names:
        fn = getattr(nv, name, None)
        if fn is not None:
            value = _call(fn, *args)
            if value is not None:
                return value
    return None


def _text(value: Any) -> str | None:
    """NVML strings: older bindings return bytes."""
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    return str(value).strip() or None


def _handle(nv: ModuleType, cuda_index: int) -> Any:
    """The NVML handle of CUDA device ``cuda_index``, honouring ``CUDA_VISIBLE_DEVICES``.

    Raises whatever NVML raises (the caller records it as unknown).
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not visible.strip():
        return nv.nvmlDeviceGetHandleByIndex(cuda_index)
    entries = [e.strip() for e in visible.split(",")]
    if not 0 <= cuda_index < len(entries):
        raise IndexError(f"CUDA device {cuda_index} is not among CUDA_VISIBLE_DEVICES={visible!r}")
    entry = entries[cuda_index]
    if entry.isdigit():
        # CUDA's default order (FASTEST_FIRST) equals NVML's PCI order on a machine of identical
        # GPUs, which is what we run on; a mixed machine should set CUDA_DEVICE_ORDER=PCI_BUS_ID.
        return nv.nvmlDeviceGetHandleByIndex(int(entry))
    try:
        return nv.nvmlDeviceGetHandleByUUID(entry)
    except Exception:
        # CUDA accepts a unique UUID prefix ("GPU-8f3a"); NVML wants the whole UUID.
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            if (_text(_first(nv, ("nvmlDeviceGetUUID",), h)) or "").startswith(entry):
                return h
        raise


def _cuda_version(v: Any) -> str | None:
    """NVML's CUDA driver version integer (13000) as "13.0"."""
    if not isinstance(v, int) or v <= 0:
        return None
    return f"{v // 1000}.{(v % 1000) // 10}"


# --- environment ------------------------------------------------------------------------------

_GPU_FIELDS = ("gpu_name", "arch", "compute_capability", "gpu_count", "gpu_memory_gb", "sm_count",
               "l2_mb", "driver", "cuda")

# key in Env.libs -> (import name, distribution names to try first). Distributions found through
# packages_distributions() are added, which is how CuPy's wheels (cupy-cuda13x, ...) are found.
_LIBS: dict[str, tuple[str, tuple[str, ...]]] = {
    "numpy": ("numpy", ("numpy",)),
    "torch": ("torch", ("torch",)),
    "cupy": ("cupy", ("cupy",)),
    "triton": ("triton", ("triton",)),
    "robocache": ("robocache", ("robocache",)),
    "nvidia-ml-py": ("pynvml", ("nvidia-ml-py",)),
    "msgspec": ("msgspec", ("msgspec",)),
    "scipy": ("scipy", ("scipy",)),
}


def _lib_versions() -> dict[str, str]:
    """Versions of the libraries that can be imported here, read from their metadata (importing
    torch or cupy just for a version would cost seconds and may touch the GPU)."""
    try:
        dist_map = importlib.metadata.packages_distributions()
    except Exception:  # noqa: BLE001  broken package metadata: the versions are then unknown
        dist_map = {}
    out: dict[str, str] = {}
    for key, (module, dists) in _LIBS.items():
        try:
            if importlib.util.find_spec(module) is None:
                continue
        except (ImportError, ValueError):  # a broken parent, or a None entry in sys.modules
            continue
        version = None
        for dist in (*dists, *dist_map.get(module, ())):
            try:
                version = importlib.metadata.version(dist)
                break
            except importlib.metadata.PackageNotFoundError:
                continue
        if version is None and module == "robocache":
            # Run from a source checkout without installing: the package knows its version and
            # importing it compiles nothing and touches no device.
            try:
                import robocache  # noqa: PLC0415

                version = getattr(robocache, "__version__", None)
            except Exception:  # noqa: BLE001  a version is a fact to record, never a reason to fail
                version = None
        if version:
            out[key] = str(version)
    return out


def _cpu_name() -> str | None:
    """The CPU model. /proc/cpuinfo first: on Linux platform.processor() says only "x86_64"."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or None


def _nvml_gpu(nv: ModuleType, device_index: int) -> dict[str, Any]:
    """GPU fields from NVML; a field NVML cannot give is left out (the caller fills None)."""
    h = _handle(nv, device_index)
    out: dict[str, Any] = {}
    out["gpu_name"] = _text(_first(nv, ("nvmlDeviceGetName",), h))
    cc = _first(nv, ("nvmlDeviceGetCudaComputeCapability",), h)
    if isinstance(cc, tuple) and len(cc) == 2:
        out["compute_capability"] = f"{cc[0]}.{cc[1]}"
    count = _first(nv, ("nvmlDeviceGetCount",))
    if isinstance(count, int) and count >= 0:
        out["gpu_count"] = count
    mem = _first(nv, ("nvmlDeviceGetMemoryInfo",), h)
    total = getattr(mem, "total", None)
    if isinstance(total, int) and total > 0:
        # GiB, not 1e9: it is what the marketing names mean (H100 "80GB" is 79.6 GiB, 85.5e9 B).
        out["gpu_memory_gb"] = round(total / 2**30, 2)
    # NVML documents nvmlDeviceGetAttributes for MIG handles; on a whole GPU it may be
    # unsupported, and then torch supplies the SM count.
    attrs = _first(nv, ("nvmlDeviceGetAttributes",), h)
    sms = getattr(attrs, "multiprocessorCount", None)
    if isinstance(sms, int) and sms > 0:
        out["sm_count"] = sms
    out["driver"] = _text(_first(nv, ("nvmlSystemGetDriverVersion",)))
    out["cuda"] = _cuda_version(_first(nv, ("nvmlSystemGetCudaDriverVersion",
                                            "nvmlSystemGetCudaDriverVersion_v2")))
    return {k: v for k, v in out.items() if v is not None}


def _torch_gpu(device_index: int) -> dict[str, Any]:
    """GPU fields from torch.cuda.get_device_properties; {} without torch or without CUDA.

    NVML has no L2 size, so on a GPU this is where l2_mb comes from. Note that it initialises the
    CUDA runtime in this process (the harness must not fork CUDA users after capture_env).
    """
    try:
        import torch  # noqa: PLC0415 (lazy: heavy, optional)

        if not torch.cuda.is_available():
            return {}
        p = torch.cuda.get_device_properties(device_index)
    except Exception:  # noqa: BLE001  no usable torch CUDA: these facts stay unknown
        return {}
    out: dict[str, Any] = {
        "gpu_name": _text(getattr(p, "name", None)),
        "compute_capability": f"{p.major}.{p.minor}" if hasattr(p, "major") else None,
        "sm_count": getattr(p, "multi_processor_count", None) or None,
    }
    total = getattr(p, "total_memory", None)
    if total:
        out["gpu_memory_gb"] = round(total / 2**30, 2)
    l2 = getattr(p, "L2_cache_size", None)
    if l2:
        out["l2_mb"] = round(l2 / 2**20, 2)  # MiB: the H200's "60 MB" L2 is 60 MiB
    if not os.environ.get("CUDA_VISIBLE_DEVICES", "").strip():
        # Same meaning as NVML's count (all GPUs of the machine) only when nothing is hidden.
        try:
            out["gpu_count"] = torch.cuda.device_count()
        except Exception:  # noqa: BLE001  no usable torch CUDA: the count stays NVML's
            pass
    return {k: v for k, v in out.items() if v is not None}


def _host_id() -> str | None:
    """12 hex digits of sha256 of the OS machine id: tells physical runners apart (a machine's *name* is chosen
    by its owner; two hosts with one CPU string look alike) without publishing the id itself."""
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text:
            return hashlib.sha256(f"robocache-host:{text}".encode()).hexdigest()[:12]
    return None


def capture_env(device: str = "gpu", device_index: int = 0, machine: str | None = None) -> dict:
    """The schema ``Env`` of this process: NVML first, torch for what NVML lacks; never raises.

    ``machine`` names the series: the argument, else ``ROBOCACHE_MACHINE``, else on a GPU run
    :func:`gpu_machine_name` (from the GPU's name and the machine's GPU count, so a default can never
    name an H100 after an H200), else the hostname (a CPU run, or a GPU whose name is unknown).
    ``gpu_count`` counts the machine's GPUs (NVML ignores ``CUDA_VISIBLE_DEVICES``); sizes are
    binary (GiB, MiB).
    """
    if device not in ("gpu", "cpu"):
        raise ValueError(f"device must be 'gpu' or 'cpu', got {device!r}")
    hostname = socket.gethostname() or "unknown"
    env: dict[str, Any] = {
        "hostname": hostname,
        "machine": machine or os.environ.get("ROBOCACHE_MACHINE", "").strip() or hostname,
        "device": device,
        **{k: None for k in _GPU_FIELDS},
        "cpu": _cpu_name(),
        "python": platform.python_version(),
        "libs": _lib_versions(),
        "nvml": "unknown: cpu run",
        "kernel": platform.release() or None,
        "host_id": _host_id(),
        "sources": _sources(),
    }
    if device == "cpu":
        return env

    nv, err = nvml()
    gpu: dict[str, Any] = {}
    if nv is None:
        env["nvml"] = f"unknown: {err}"
    else:
        try:
            gpu = _nvml_gpu(nv, device_index)
            env["nvml"] = "ok"
        except Exception as e:  # noqa: BLE001  no handle for this index: nothing NVML says is about our GPU
            env["nvml"] = f"unknown: {_why(e)}"
    for key, value in _torch_gpu(device_index).items():
        gpu.setdefault(key, value)  # NVML wins; torch only completes
    env.update({k: v for k, v in gpu.items() if k in _GPU_FIELDS})
    env["arch"] = normalize_arch(env["gpu_name"], env["compute_capability"])
    if not (machine or os.environ.get("ROBOCACHE_MACHINE", "").strip()):
        env["machine"] = gpu_machine_name(env.get("gpu_name"), env.get("gpu_count")) or hostname
    return env


def _sources() -> str | None:
    """The sources' hash (robocache/bench/provenance.py), or None: never a failed run for it."""
    try:
        from .provenance import tree_sources

        return tree_sources()
    except Exception:  # noqa: BLE001
        return None


def gpu_machine_name(gpu_name: str | None, gpu_count: int | None) -> str | None:
    """The default machine name of a GPU run: the GPU's name as a file-name-safe lower-case slug, ``-x<N>`` when
    the machine has N > 1 GPUs ("NVIDIA H200" x4 -> ``nvidia-h200-x4``, "NVIDIA H100 80GB HBM3" ->
    ``nvidia-h100-80gb-hbm3``); ``None`` when the name is unknown. The lent machines' own names
    (``nvidia-h100-x1``) are used only when asked (``--machine``, ``ROBOCACHE_MACHINE``, scripts/gpu_check.sh)."""
    if not gpu_name or not str(gpu_name).strip():
        return None
    from .store import safe_component

    slug = safe_component(str(gpu_name).strip().lower(), max_len=60)
    return slug + (f"-x{int(gpu_count)}" if gpu_count and int(gpu_count) > 1 else "")


# --- clocks during a case ---------------------------------------------------------------------

# NVML clock-event reason bits (nvmlClocksEventReason* == nvmlClocksThrottleReason*, nvml.h) ->
# names. Hard-coded rather than read from pynvml: the values are ABI, and older bindings lack
# some names (board_limit and reliability exist only in the throttle-reason set).
THROTTLE_REASON_BITS: dict[int, str] = {
    0x001: "gpu_idle",
    0x002: "applications_clocks_setting",
    0x004: "sw_power_cap",
    0x008: "hw_slowdown",
    0x010: "sync_boost",
    0x020: "sw_thermal_slowdown",
    0x040: "hw_thermal_slowdown",
    0x080: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
    0x200: "board_limit",
    0x400: "reliability",
}

# Reasons that mean the clocks were held below what the kernel would otherwise get. gpu_idle,
# applications_clocks_setting, sync_boost and display_clock_setting describe a setting or an idle
# GPU, not a slowdown of the measured work.
THROTTLING_REASONS = frozenset({"sw_power_cap", "hw_slowdown", "hw_thermal_slowdown",
                                "hw_power_brake_slowdown", "sw_thermal_slowdown", "board_limit",
                                "reliability"})


def throttle_reason_names(mask: int) -> list[str]:
    """The names of the bits set in an NVML clock-event reasons mask (unknown bits as hex)."""
    names = []
    bit = 1
    while bit <= mask:
        if mask & bit:
            names.append(THROTTLE_REASON_BITS.get(bit, f"unknown_{bit:#x}"))
        bit <<= 1
    return sorted(names)


# Errors after which a query is not asked again in this sampler: the GPU or binding will not start
# supporting it mid-case, and retrying every 20 ms only costs time.
_PERMANENT = ("NVMLError_NotSupported", "NVMLError_FunctionNotFound", "NVMLLibraryMismatchError",
              "AttributeError")


class ClockSampler:
    """Samples the GPU through NVML on a daemon thread while a case runs.

    ``with ClockSampler(0) as cs: run(); clocks = cs.stats()``. One sample is taken on entry and
    one on exit, so a working NVML always yields at least one. Without NVML no thread is started
    and :meth:`stats` reports unknowns.
    """

    def __init__(self, device_index: int = 0, interval_s: float = 0.02, ignore_pids: Iterable[int] = ()) -> None:
        self.device_index = device_index
        self.ignore_pids = set(ignore_pids)  # a multi-GPU run's other ranks: not "other processes"
        self.interval_s = max(float(interval_s), 0.001)
        self.error: str | None = None  # why NVML is unknown, when it is
        self._nv: ModuleType | None = None
        self._h: Any = None
        self._lock = threading.Lock()
        self._samples: list[dict[str, Any]] = []
        self._max_sm: int | None = None
        self._disabled: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def __enter__(self) -> ClockSampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Open the device, take the first sample and start the sampling thread."""
        nv, err = nvml()
        if nv is None:
            self.error = err
            return
        try:
            self._h = _handle(nv, self.device_index)
        except Exception as e:  # noqa: BLE001  any NVML failure: the sampler keeps why and samples nothing
            self.error = _why(e)
            return
        self._nv = nv
        mx = self._query("max_sm", nv, ("nvmlDeviceGetMaxClockInfo",), self._h,
                         getattr(nv, "NVML_CLOCK_SM", 1))
        self._max_sm = mx if isinstance(mx, int) and mx > 0 else None
        self._sample()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="robocache-clock-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and take the last sample (so a short case still has its end state)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=max(5.0, 10 * self.interval_s))
            self._thread = None
            self._sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def _query(self, key: str, nv: ModuleType, names: tuple[str, ...], *args: Any) -> Any:
        """The first of ``names`` that answers; a permanently unsupported query is dropped."""
        if key in self._disabled:
            return None
        permanent = 0
        available = [getattr(nv, n, None) for n in names]
        for fn in available:
            if fn is None:
                permanent += 1
                continue
            try:
                return fn(*args)
            except Exception as e:  # noqa: BLE001  NVML's error classes are made at run time: told apart by name
                if type(e).__name__ in _PERMANENT:
                    permanent += 1
        if permanent == len(names):
            self._disabled.add(key)
        return None

    def _sample(self) -> None:
        nv, h = self._nv, self._h
        if nv is None:
            return
        sm = self._query("sm", nv, ("nvmlDeviceGetClockInfo",), h, getattr(nv, "NVML_CLOCK_SM", 1))
        mem = self._query("mem", nv, ("nvmlDeviceGetClockInfo",), h, getattr(nv, "NVML_CLOCK_MEM", 2))
        # The plain call works on every driver; the V form replaces it in newer bindings.
        temp = self._query("temp", nv, ("nvmlDeviceGetTemperature", "nvmlDeviceGetTemperatureV"), h,
                           getattr(nv, "NVML_TEMPERATURE_GPU", 0))
        power = self._query("power", nv, ("nvmlDeviceGetPowerUsage",), h)
        # The event-reasons name replaced the throttle-reasons one (same bits); older bindings
        # only have the latter.
        mask = self._query("reasons", nv, ("nvmlDeviceGetCurrentClocksEventReasons",
                                           "nvmlDeviceGetCurrentClocksThrottleReasons"), h)
        procs = self._query("procs", nv, ("nvmlDeviceGetComputeRunningProcesses",
                                          "nvmlDeviceGetComputeRunningProcesses_v2"), h)
        others = None
        if isinstance(procs, (list, tuple)):
            # In a container without the host PID namespace NVML reports host PIDs, so our own
            # process may not be recognised here; see the report on contended runs.
            pids = {getattr(p, "pid", None) for p in procs}
            # The sampled process holds a CUDA context while it is timed, so NVML must list it; when it
            # does not (an empty list, or host PIDs in a container), NVML cannot see processes here:
            # unknown, never "0 others".
            others = len(pids - {self._pid} - self.ignore_pids) if self._pid in pids else None
        s = {
            "sm": sm if isinstance(sm, int) and sm > 0 else None,
            "mem": mem if isinstance(mem, int) and mem > 0 else None,
            "temp": temp if isinstance(temp, (int, float)) else None,
            "power_w": power / 1000.0 if isinstance(power, (int, float)) and power >= 0 else None,
            "mask": mask if isinstance(mask, int) and mask >= 0 else None,
            "others": others,
        }
        with self._lock:
            self._samples.append(s)

    def stats(self) -> dict:
        """The schema ``Clocks`` of the samples so far (all None, no samples, without NVML)."""
        with self._lock:
            samples = list(self._samples)

        def vals(key: str) -> list[Any]:
            return [s[key] for s in samples if s[key] is not None]

        sm, mem, temp, power, others = vals("sm"), vals("mem"), vals("temp"), vals("power_w"), vals("others")
        reasons: set[str] = set()
        for mask in vals("mask"):
            reasons.update(throttle_reason_names(mask))
        return {
            "sm_mhz_min": float(min(sm)) if sm else None,
            "sm_mhz_median": float(statistics.median(sm)) if sm else None,
            "sm_mhz_max_supported": float(self._max_sm) if self._max_sm else None,
            "mem_mhz_median": float(statistics.median(mem)) if mem else None,
            "temperature_c_max": float(max(temp)) if temp else None,
            "power_w_max": float(max(power)) if power else None,
            "throttle_reasons": sorted(reasons),
            "other_processes": max(others) if others else None,
            "samples": len(samples),
        }


# --- health -----------------------------------------------------------------------------------

class NullSampler:
    """:class:`ClockSampler`'s stand-in on the CPU: nothing sampled, ``stats()`` is None."""

    def __enter__(self) -> NullSampler:
        return self

    def __exit__(self, *exc: Any) -> bool:
        return False

    def stats(self) -> None:
        return None


def clock_sampler(on_gpu: bool) -> ClockSampler | NullSampler:
    """The clock sampler of a case: GPU 0's through NVML on the GPU, none (:class:`NullSampler`) on the CPU."""
    return ClockSampler(0) if on_gpu else NullSampler()


IGNORE_LOAD_ENV = "ROBOCACHE_IGNORE_HOST_LOAD"  # "1": the host's load is not read (a shared CI machine whose load
# the caller already allows for, as scripts/rehearse_regression.py does with its floor of +100%)


def host_load() -> tuple[float, int] | None:
    """(the 1-minute load average, the CPU cores this process may run on), or None where the OS does not say (or
    ``$ROBOCACHE_IGNORE_HOST_LOAD`` is 1)."""
    if os.environ.get(IGNORE_LOAD_ENV, "").strip() == "1":
        return None
    try:
        load1 = os.getloadavg()[0]
    except (AttributeError, OSError):
        return None
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 0
    return (float(load1), cores) if cores > 0 else None


def assess_health(clocks: dict | None, noise_target_met: bool | None, *,
                  load: tuple[float, int] | None = None, host_timed: bool = False) -> dict:
    """The schema ``Health``: a throttled or contended run is flagged and never raises an alert.

    Unknown clocks flag nothing (a CPU run or a machine without NVML is not unhealthy) but say so. ``load``:
    :func:`host_load` at the end of the case's timing. A host-timed case (``host_timed``: a CPU run, where the
    timer and the work share the cores) is contended when the 1-minute load average exceeds the cores: more
    runnable tasks than cores, so the case waited for a core (issue 24: load 6 on 2 cores read "not contended").
    On a GPU the device timer does not wait on the host, and a case's own compile workers raise the load just
    before its timing, so there the load is only said (beyond the cores), not flagged.
    """
    reasons: list[str] = []
    throttled = contended = False
    if load is not None and load[0] > load[1]:
        said = f"load average {load[0]:.1f} over the last minute on {load[1]} core{'s' if load[1] != 1 else ''}"
        if host_timed:
            contended = True
            reasons.append(f"contended: {said} (more runnable tasks than cores)")
        else:
            reasons.append(f"host busy: {said} (not flagged: device timer)")
    if not clocks or not clocks.get("samples"):
        reasons.append("clocks unknown (NVML unavailable)")
    else:
        seen = [r for r in clocks.get("throttle_reasons") or [] if r in THROTTLING_REASONS]
        if seen:
            throttled = True
            reasons.append("throttled: " + ", ".join(sorted(seen)))
        others = clocks.get("other_processes")
        if others is None:
            reasons.append("other processes unknown (NVML could not list them)")
        elif others > 0:
            contended = True
            reasons.append(f"contended: {others} other process{'es' if others != 1 else ''} on the GPU")
    noisy = noise_target_met is False
    if noisy:
        reasons.append("noisy: noise target not met")
    return {"throttled": throttled, "contended": contended, "noisy": noisy, "reasons": reasons}
