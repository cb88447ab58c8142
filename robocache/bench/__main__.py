"""``python -m robocache.bench ...``: ``robocache-bench`` where the package is on the path but not installed
(a GPU machine given the tree and its wheels, as ``scripts/gpu_check.sh`` runs it)."""
from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
