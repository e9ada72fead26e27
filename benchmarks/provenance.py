"""How a committed result file was made: the one definition the result-writing scripts share.

`benchmarks/finetune_results.py`, `fillmask_heads.py` and `ch07_pretraining.py` write JSON files
that the book renders and the tests re-check; each records the command, the date, the commit and
whether the code it measures had uncommitted changes, and the versions and machine.
"""

from __future__ import annotations

import os
import platform
import subprocess
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def provenance(script: str, argv: list[str], watched: list[str], **extra: object) -> dict:
    """The record of one run of `script` (a path from the repository root) with `argv`.

    `watched`: the files whose uncommitted changes would make the commit a wrong description of
    the code that ran (listed under `uncommitted_changes_to`). `extra` is added as it is.
    """
    import transformers

    return {
        "command": f"python {script} " + " ".join(argv),
        "date": time.strftime("%Y-%m-%d"),
        "bertcourse_commit": _git("rev-parse", "HEAD"),
        "uncommitted_changes_to": _git("status", "--porcelain", "--", *watched).splitlines(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "machine": {"cpu_count": os.cpu_count(), "processor": platform.machine()},
        **extra,
    }
