"""asv benchmark modules (bench_*.py) and the pytest-benchmark suite, thin front ends over robocache.bench.

asv runs discovery and benchmarks with PYTHONPATH removed. When robocache is importable (installed, or an
editable install), that copy is measured, as asv intends (one install per commit). When it is not, the
checkout these benchmarks live in is put first on sys.path, so `asv run --python=same` from a source
checkout measures that checkout.
"""
import importlib.util
import sys
from pathlib import Path

try:
    _found = importlib.util.find_spec("robocache.bench") is not None
except ImportError:  # a namespace-only "robocache" (e.g. an editable install's data files) has no bench
    _found = False
if not _found:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.modules.pop("robocache", None)
