"""Execute one book page (a MyST markdown notebook) the way the book build does, and report.

    python3 scripts/run_page.py book/ch01_attention.md [--timeout 120] [--save out.ipynb]

Reads the page with myst-nb's own reader, runs every code cell in a fresh kernel from the
repository root (nbclient), prints each cell's wall time, and exits 1 when a cell raises
(unless tagged `raises-exception`) or writes to stderr (the build runs with warnings as
errors, so stderr output fails it). A quick check for one page while writing it; the CI check
is the whole-book build in tests/test_book.py.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from myst_nb.core.read import read_myst_markdown_notebook
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", type=Path)
    parser.add_argument(
        "--timeout", type=int, default=120, help="seconds per cell (as _config.yml)"
    )
    parser.add_argument("--save", type=Path, help="write the executed notebook here")
    args = parser.parse_args()

    nb = read_myst_markdown_notebook(args.page.read_text(), path=args.page)
    client = NotebookClient(
        nb,
        timeout=args.timeout,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(ROOT)}},
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
    print(f"== {args.page}: {time.monotonic() - start:.1f} s")
    if args.save:
        nbformat.write(nb, args.save)
    for problem in problems:
        print("PROBLEM", problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
