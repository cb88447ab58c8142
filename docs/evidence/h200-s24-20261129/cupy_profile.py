"""cProfile of public calls on CuPy arrays (dev aid for the twenty-fourth session's call-cost work)."""
import cProfile
import io
import pstats

import cupy

import robocache

v = cupy.random.rand(1, 4, 1).astype(cupy.float32)
s = cupy.arange(4, dtype=cupy.float32)[None]
t = cupy.array([[0.5, 1.5]], dtype=cupy.float32)
v2 = cupy.random.rand(1, 3, 2).astype(cupy.float32)
s2 = cupy.arange(3, dtype=cupy.float32)[None]
calls = {"resample": lambda: robocache.resample(v, s, t), "fuse": lambda: robocache.fuse([(v, s), (v2, s2)], t)}
for name, fn in calls.items():
    for _ in range(200):
        fn()
    cupy.cuda.Device().synchronize()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(20000):
        fn()
    pr.disable()
    cupy.cuda.Device().synchronize()
    out = io.StringIO()
    pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(18)
    print(f"==== {name}\n" + out.getvalue())
