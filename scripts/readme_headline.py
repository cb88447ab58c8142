#!/usr/bin/env python3
"""README's headline table: robocache against torch.compile at its faster mode, per op and GPU, from records.

The figures are the report's own (``robocache-bench report RESULTS --kernels``, section "Against torch.compile at
its best": :func:`robocache.bench.views.kernels.vs_compile_summary`, one measurement per machine and op); this
script only lays them out as one small table, ops down, GPUs across. ``tests/test_readme.py`` checks that the
table in README.md is this script's output over the committed ``results/``.

    python scripts/readme_headline.py                  # print the table (over results/)
    python scripts/readme_headline.py --write README.md  # replace the table between the README's markers
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the checkout's robocache, also when run as a plain script

from robocache.bench import store  # noqa: E402  after the path entry above
from robocache.bench.views.kernels import vs_compile_cases, vs_compile_summary  # noqa: E402

BEGIN = "<!-- headline table: python scripts/readme_headline.py --write README.md -->"
END = "<!-- end of headline table -->"


def table(results: str | Path = REPO / "results") -> str:
    """The markdown table over the records under ``results`` (single-GPU runs that measured both robocache and
    torch.compile); raises ValueError when there are none."""
    loaded = store.load(results)
    rows = vs_compile_summary(vs_compile_cases(loaded.records))
    if not rows:
        raise ValueError(f"no run under {results} measured both robocache and torch.compile")
    gpus = sorted({(r["arch"], r["machine"]) for r in rows})
    ops = list(dict.fromkeys(r["op"] for r in rows))  # grid order, as the summary sorts them
    cell = {(r["op"], r["arch"], r["machine"]): r for r in rows}
    head = "| op | " + " | ".join(f"{arch} (`{machine}`)" for arch, machine in gpus) + " |"
    lines = [head, "|---|" + "---|" * len(gpus)]
    for op in ops:
        out = []
        for arch, machine in gpus:
            r = cell.get((op, arch, machine))
            out.append("not measured" if r is None else
                       f"**{r['median']:.2f}x** ({r['at_least_1x']} of {r['cases']} "
                       f"{'case' if r['cases'] == 1 else 'cases'} >= 1x, worst {r['worst']:.2f}x)")
        lines.append(f"| `{op}` | " + " | ".join(out) + " |")
    return "\n".join(lines) + "\n\n" + on_file(loaded.records)


def on_file(records: list) -> str:
    """One line: every machine with records under the folder and the suites they hold (what is not listed has
    no record: no claim of "not measured yet" has to be kept by hand)."""
    suites: dict[tuple[str, str], set[str]] = {}
    for r in records:
        env = r.env
        suites.setdefault((env.arch or "CPU", env.machine), set()).add(r.suite)
    parts = [f"{arch} `{machine}` ({', '.join(sorted(s))})" for (arch, machine), s in sorted(suites.items())]
    return "Records on file: " + "; ".join(parts) + "."


def replace_block(text: str, new: str) -> str:
    """``text`` with the lines between the BEGIN and END markers replaced by ``new``."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise ValueError(f"the README needs the markers {BEGIN!r} and {END!r}, once each, in that order")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{new}\n{END}{tail}"


def block(text: str) -> str:
    """The table between the markers in ``text`` (what :func:`table` wrote there)."""
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--results", default=str(REPO / "results"), help="records folder (default: results/)")
    ap.add_argument("--write", metavar="README", help="replace the table between the markers in this file")
    args = ap.parse_args(argv)
    try:
        new = table(args.results)
        if args.write:
            path = Path(args.write)
            text = replace_block(path.read_text(encoding="utf-8"), new)
            store.atomic_write(path, text)
            print(f"wrote the headline table into {path}")
        else:
            print(new)
    except (OSError, ValueError) as e:
        print(f"readme_headline: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
