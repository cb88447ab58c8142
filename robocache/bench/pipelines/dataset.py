"""A seeded synthetic robot dataset in HDF5 (h5py): variable-length episodes, streams at their own rates.

Layout (``FORMAT`` version 1)::

    /                      attrs: format, version, seed, episodes, streams (JSON: name -> rate, dim)
    /episodes/ep_000000/   attrs: duration_s
        vision/t  float64 [S]       vision/x  float32 [S, 256]   (30 Hz: a vision encoder's features)
        proprio/t float64 [S]       proprio/x float32 [S, 14]    (100 Hz: joint positions and velocities)
        force/t   float64 [S]       force/x   float32 [S, 6]     (333 Hz: a wrist force-torque sensor)
        action/t  float64 [S]       action/x  float32 [S, 7]     (20 Hz: the commanded action)
        rgb/t     float64 [S]       rgb/frames vlen uint8 [S]    (optional: 30 Hz, H x W x 3, zlib per frame)

Timestamps are seconds from the episode's start, one clock per stream: frame ``k`` at ``k / rate`` plus up
to 30% of a period of uniform jitter, sorted (real sensor clocks drift and jitter; none is a multiple of
another). Values are smooth random signals (a few sinusoids per feature plus noise), never zeros. Every
episode is drawn from its own generator seeded by ``(seed, episode index)``, so a dataset of N episodes
is the first N episodes of any larger one with the same seed, and the generator's memory is one episode.

Size: ``--size-mb`` episodes are added until the file's raw payload reaches it (from a few MB for CI to tens
of GB on a GPU machine; about 45 kB per second of episode without RGB, about 20 kB per frame more with it).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...episodes import HDF5_FORMAT as FORMAT  # the library reads this format (EpisodeCache.from_hdf5)
from ...episodes import HDF5_VERSION as VERSION
RGB_SHAPE = (48, 64, 3)


@dataclass(frozen=True)
class Stream:
    name: str
    rate_hz: float
    dim: int


# The streams of the seed's heterogeneous robot (30-333 Hz), in the order the loaders fuse them.
STREAMS = (Stream("vision", 30.0, 256), Stream("proprio", 100.0, 14), Stream("force", 333.0, 6),
           Stream("action", 20.0, 7))
RGB = Stream("rgb", 30.0, int(np.prod(RGB_SHAPE)))


@dataclass
class Spec:
    """What to generate. ``size_mb`` bounds the raw payload; ``episodes`` (when given) fixes the count."""

    size_mb: float = 8.0
    seed: int = 0
    min_s: float = 3.0  # episode duration, uniform in [min_s, max_s]
    max_s: float = 10.0
    rgb: bool = False
    episodes: int | None = None
    streams: tuple[Stream, ...] = field(default=STREAMS)


def jittered_clock(rng: np.random.Generator, rate: float, duration: float) -> np.ndarray:
    """Frame times of one stream over ``[0, duration)``: ``k / rate`` plus up to 30% of a period, sorted."""
    n = max(2, int(duration * rate))
    t = np.arange(n) / rate + rng.uniform(-0.3, 0.3, n) / rate
    t[0] = max(t[0], 0.0)
    return np.sort(t)


def smooth_signal(rng: np.random.Generator, t: np.ndarray, dim: int) -> np.ndarray:
    """``[len(t), dim]`` float32: three sinusoids per feature (0.1-3 Hz) plus 1% noise; never all zeros."""
    f = rng.uniform(0.1, 3.0, (3, dim))
    ph = rng.uniform(0, 2 * np.pi, (3, dim))
    amp = rng.uniform(0.2, 1.0, (3, dim))
    x = np.zeros((t.shape[0], dim))
    for k in range(3):
        x += amp[k] * np.sin(2 * np.pi * f[k] * t[:, None] + ph[k])
    x += 0.01 * rng.standard_normal(x.shape) + rng.uniform(-0.5, 0.5, dim)
    return x.astype(np.float32)


def rgb_frames(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    """``n`` small frames (smooth gradients that drift, so they compress like camera images), zlib each."""
    h, w, _ = RGB_SHAPE
    yy, xx = np.mgrid[0:h, 0:w]
    base = rng.uniform(0, 255, 3)
    out = []
    for k in range(n):
        img = np.stack([(base[c] + 40 * np.sin((xx + 2 * k) / 9.0 + c) + 30 * np.cos(yy / 7.0 - c)) % 256
                        for c in range(3)], axis=-1).astype(np.uint8)
        out.append(np.frombuffer(zlib.compress(img.tobytes(), 1), dtype=np.uint8))
    return out


def decode_frame(buf: np.ndarray) -> np.ndarray:
    """One stored RGB frame back to ``uint8[H, W, 3]``."""
    return np.frombuffer(zlib.decompress(buf.tobytes()), dtype=np.uint8).reshape(RGB_SHAPE)


def episode(seed: int, index: int, spec: Spec) -> dict:
    """Episode ``index``: its duration and, per stream, ``(times float64[S], values float32[S, D])``."""
    rng = np.random.default_rng([seed, index])
    dur = float(rng.uniform(spec.min_s, spec.max_s))
    streams = {}
    for st in spec.streams:
        t = jittered_clock(rng, st.rate_hz, dur)
        streams[st.name] = (t, smooth_signal(rng, t, st.dim))
    ep = {"duration_s": dur, "streams": streams}
    if spec.rgb:
        t = jittered_clock(rng, RGB.rate_hz, dur)
        ep["rgb"] = (t, rgb_frames(rng, t.shape[0]))
    return ep


def _payload(ep: dict) -> int:
    n = sum(t.nbytes + x.nbytes for t, x in ep["streams"].values())
    if "rgb" in ep:
        n += ep["rgb"][0].nbytes + sum(f.nbytes for f in ep["rgb"][1])
    return n


def generate(path: str | os.PathLike[str], spec: Spec, *, log=None) -> dict:
    """Write the dataset to ``path`` (atomically: a temporary file renamed at the end); returns a summary."""
    import h5py

    if spec.size_mb <= 0 and not spec.episodes:
        raise ValueError("size_mb must be > 0 (or give a number of episodes)")
    if not 0 < spec.min_s <= spec.max_s:
        raise ValueError(f"episode durations need 0 < min_s <= max_s, got {spec.min_s} and {spec.max_s}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    total, n = 0, 0
    limit = spec.size_mb * 1e6
    with h5py.File(tmp, "w") as f:
        g = f.create_group("episodes")
        vlen = h5py.vlen_dtype(np.uint8)
        while (n < spec.episodes) if spec.episodes else (total < limit):
            ep = episode(spec.seed, n, spec)
            e = g.create_group(f"ep_{n:06d}")
            e.attrs["duration_s"] = ep["duration_s"]
            for name, (t, x) in ep["streams"].items():
                s = e.create_group(name)
                s.create_dataset("t", data=t)
                s.create_dataset("x", data=x)
            if "rgb" in ep:
                s = e.create_group("rgb")
                s.create_dataset("t", data=ep["rgb"][0])
                d = s.create_dataset("frames", (len(ep["rgb"][1]),), dtype=vlen)
                for i, fr in enumerate(ep["rgb"][1]):
                    d[i] = fr
            total += _payload(ep)
            n += 1
            if log and n % 1000 == 0:
                log(f"{n} episodes, {total / 1e6:.0f} MB")
        f.attrs.update({"format": FORMAT, "version": VERSION, "seed": spec.seed, "episodes": n,
                        "rgb": bool(spec.rgb), "payload_bytes": total,
                        "streams": json.dumps({s.name: {"rate_hz": s.rate_hz, "dim": s.dim} for s in spec.streams})})
    os.replace(tmp, path)
    return {"path": str(path), "episodes": n, "payload_bytes": total, "file_bytes": path.stat().st_size,
            "seed": spec.seed, "rgb": spec.rgb}


def describe(path: str | os.PathLike[str]) -> dict:
    """The dataset's attributes, validated: ``ValueError`` naming the file when it is not one of ours."""
    import h5py

    try:
        with h5py.File(path, "r") as f:
            attrs = dict(f.attrs)
    except OSError as e:
        raise ValueError(f"{path}: not a readable HDF5 file ({e})") from None
    if attrs.get("format") != FORMAT or int(attrs.get("version", -1)) != VERSION:
        raise ValueError(f"{path}: not a {FORMAT} v{VERSION} dataset (generate one with "
                         "`python -m robocache.bench.pipelines.dataset`)")
    return {"episodes": int(attrs["episodes"]), "seed": int(attrs["seed"]), "rgb": bool(attrs["rgb"]),
            "payload_bytes": int(attrs["payload_bytes"]), "streams": json.loads(attrs["streams"])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m robocache.bench.pipelines.dataset",
                                description="Write a seeded synthetic robot dataset (HDF5) for the pipelines suite.")
    p.add_argument("out", help="the .h5 file to write")
    p.add_argument("--size-mb", type=float, default=8.0, help="raw payload to reach, in MB (default 8)")
    p.add_argument("--episodes", type=int, default=None, help="exactly this many episodes instead of --size-mb")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--min-s", type=float, default=3.0, help="shortest episode, seconds (3)")
    p.add_argument("--max-s", type=float, default=10.0, help="longest episode, seconds (10)")
    p.add_argument("--rgb", action="store_true", help="add small zlib-compressed RGB frames at 30 Hz")
    a = p.parse_args(argv)
    if a.episodes is not None and a.episodes < 1:
        print("dataset: --episodes must be >= 1", file=sys.stderr)
        return 2
    try:
        out = generate(a.out, Spec(a.size_mb, a.seed, a.min_s, a.max_s, a.rgb, a.episodes),
                       log=lambda s: print(s, file=sys.stderr))
    except ValueError as e:
        print(f"dataset: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out['path']}: {out['episodes']} episodes, {out['payload_bytes'] / 1e6:.1f} MB payload, "
          f"{out['file_bytes'] / 1e6:.1f} MB file, seed {out['seed']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
