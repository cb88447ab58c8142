"""The source text robocache compiles for one op family (robocache._cuda.source), made host C++ for the emulator's
g++ build: the 16-bit conversions, PTX cvt instructions there (stripped by shim.h's asm shim), done on the host
(_Float16 for half, round to nearest even for bfloat16, NaN kept)."""
from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from robocache import _cuda  # noqa: E402  after the checkout's path entry above


def host_source(op: str) -> str:
    src = _cuda.source(op)
    for old, new in (
        ('''__device__ __forceinline__ float rc_to_float(rc_half v) {
    float f;''', '''__device__ __forceinline__ float rc_to_float(rc_half v) {
    _Float16 hf; std::memcpy(&hf, &v.bits, 2); return (float)hf;
    float f;'''),
        ('''template <> __device__ __forceinline__ rc_half rc_from_float<rc_half>(float f) {
    rc_half h;''', '''template <> __device__ __forceinline__ rc_half rc_from_float<rc_half>(float f) {
    rc_half h; { _Float16 hf = (_Float16)f; std::memcpy(&h.bits, &hf, 2); return h; }'''),
        ('''    rc_bf16 h;
    asm(''', '''    rc_bf16 h;
    { unsigned u = __float_as_uint(f);
      if ((u & 0x7fffffffu) > 0x7f800000u) { h.bits = (unsigned short)((u >> 16) | 0x40); return h; }
      u += 0x7fffu + ((u >> 16) & 1u); h.bits = (unsigned short)(u >> 16); return h; }
    asm(''')):
        if old not in src:
            raise ValueError(f"kernels/{op}.cu (with its headers): the 16-bit conversion to patch is gone: {old!r}")
        src = src.replace(old, new)
    return src


def record_launches(L: Any, sms: list[int]) -> list[tuple[str, int, int]]:
    """Point robocache._launch (``L``) at the emulator: kernels are named stubs, the SM count is ``sms[0]`` (a list,
    so a script can change it between runs), and every FastLaunch keeps its kernel's name. Returns the list a
    script's ``fast_launch`` appends ``(name, grid, block)`` to."""
    L.kernel = lambda op, name, dev, options=(): types.SimpleNamespace(ptr=0, name=name)
    L.sm_count = lambda dev: sms[0]
    real = L.FastLaunch

    class Rec(real):
        __slots__ = ("name",)

        def __init__(self, fn, args):
            super().__init__(fn, args)
            self.name = fn.name

    L.FastLaunch = Rec
    return []
