"""The kernels this project starts talk over IPC (Unix sockets), not TCP (issue 34).

ipykernel 7 prints "Kernel is running over TCP without encryption" at each start of a kernel
over TCP: once per `nbgrader validate`, eleven times per book build. nbgrader_config.py gives
nbgrader's kernels (validate, the Validate button, autograde) the IPC transport, and
bertcourse/viz/kernels_ext.py the book build's (tests/test_book.py checks the builds' logs).
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
TCP_WARNING = "Kernel is running over TCP"
_spec = importlib.util.spec_from_file_location(
    "kernels_ext", ROOT / "bertcourse/viz/kernels_ext.py"
)
kernels_ext = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kernels_ext)

# a graded test cell that passes only in a kernel whose connection file says IPC
TRANSPORT_CELL = """import json, ipykernel.connect
info = json.load(open(ipykernel.connect.get_connection_file()))
assert info["transport"] == "ipc", info"""


def test_nbgrader_validate_runs_its_kernel_over_ipc(tmp_path: Path) -> None:
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    cell = nbformat.v4.new_code_cell(TRANSPORT_CELL)
    cell.metadata["nbgrader"] = {
        "grade": True, "grade_id": "transport", "locked": True, "points": 1,
        "schema_version": 3, "solution": False, "task": False,
    }  # fmt: skip
    nb = nbformat.v4.new_notebook(cells=[cell])
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, tmp_path / "transport.ipynb")
    proc = subprocess.run(
        [sys.executable, "-m", "nbgrader", "validate", "transport.ipynb"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    assert "Success! Your notebook passes all the tests." in output, output
    assert TCP_WARNING not in output, output


def test_a_kernel_gets_ipc_in_a_private_folder_or_tcp_where_ipc_cannot_work(tmp_path) -> None:
    with kernels_ext.kernel_config() as config:
        ip = Path(config.KernelManager.ip)
        assert config.KernelManager.transport == "ipc"
        assert ip.parent.is_dir() and ip.parent.stat().st_mode & 0o077 == 0  # only its owner's
    assert not ip.parent.exists()  # removed afterwards
    # the longest socket path, <folder>/kernel-99, must fit a Unix socket's 107 bytes
    fits = "/" + "d" * (kernels_ext.SUN_PATH_MAX - len("/kernel-99") - 1)
    assert kernels_ext.ipc_ip(fits) == fits + "/kernel"
    assert kernels_ext.ipc_ip(fits + "d") is None
