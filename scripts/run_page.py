"""Execute one book page (a MyST markdown notebook) the way the book build does, and report.

    python3 scripts/run_page.py book/ch01_attention.md [--timeout S] [--save out.ipynb]

Reads the page with myst-nb's own reader, runs every code cell in a fresh kernel from the
page's folder on one thread (as the build does: cwd book/, OMP_NUM_THREADS=1; the cell limit
is _config.yml's), prints each cell's wall time and the page's total against the 60 s budget
of an idle 2-core machine, and exits 1 when a cell raises
(unless tagged `raises-exception`) or writes to stderr (the build runs with warnings as
errors, so stderr output fails it). A quick check for one page while writing it; the CI check
is the whole-book build in tests/test_book.py.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
import yaml
from myst_nb.core.read import read_myst_markdown_notebook
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
PAGE_BUDGET_S = 60  # every page, on an idle 2-core machine (issue 21)


def config_timeout() -> int:
    """The build's per-cell limit: `execute.timeout` of _config.yml."""
    return int(yaml.safe_load((ROOT / "_config.yml").read_text())["execute"]["timeout"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", type=Path)
    parser.add_argument(
        "--timeout", type=int, default=None, help="seconds per cell (default: _config.yml's)"
    )
    parser.add_argument("--save", type=Path, help="write the executed notebook here")
    args = parser.parse_args()

    nb = read_myst_markdown_notebook(args.page.read_text(), path=args.page)
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    client = NotebookClient(
        nb,
        timeout=args.timeout or config_timeout(),
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(args.page.resolve().parent)}},
    )
    problems: list[str] = []
    start = time.monotonic()
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            t0 = time.monotonic()
            client.execute_cell(cell, index)
            seconds = time.monotonic() - t0
            first = cell.source.strip().splitlines()[0][:70] if cell.source.strip() else ""
            print(f"cell {index:3d} {seconds:7.2f} s  {first}")
            expected_error = "raises-exception" in cell.metadata.get("tags", [])
            for out in cell.get("outputs", []):
                if out.output_type == "error" and not expected_error:
                    problems.append(f"cell {index}: {out.ename}: {out.evalue}")
                if out.output_type == "stream" and out.name == "stderr":
                    problems.append(f"cell {index}: stderr: {out.text[:500]}")
    total = time.monotonic() - start
    over = (
        f" (over the {PAGE_BUDGET_S} s budget of an idle machine)" if total > PAGE_BUDGET_S else ""
    )
    print(f"== {args.page}: {total:.1f} s{over}")
    if args.save:
        nbformat.write(nb, args.save)
    for problem in problems:
        print("PROBLEM", problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
