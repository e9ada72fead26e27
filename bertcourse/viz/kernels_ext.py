"""Sphinx extension: the book build's kernels talk to it over IPC (Unix sockets), not TCP.

Loaded by `_config.yml` (`sphinx.local_extensions`) as the top-level module `kernels_ext`; like
book_ext it must not import bertcourse or torch.

ipykernel 7 warns at every start of a kernel that talks over TCP without CurveZMQ keys
("Kernel is running over TCP without encryption. All communication ... is sent in plain
text"): eleven times in one build of the book, lines a reader of the build's output cannot act
on. The build's kernels run on this machine, so they need no network: over IPC their five
sockets are files in a private temporary folder (mode 0700, removed afterwards) that no other
user can open, and no port is listened on.

jupyter_client names a kernel's IPC sockets after its connection file or, when there is none
yet (nbclient's case, which jupyter-cache and myst-nb use), `kernel-ipc-<n>` in the current
folder, which differs between the build (the book's root) and the kernel (the page's folder).
So each execution gets its own folder and `KernelManager.ip` = that folder + "/kernel"
(sockets kernel-1 ... kernel-5). A Unix socket's path holds at most 107 bytes: where the
temporary folder's path is longer, or on Windows (no IPC transport), the kernel keeps TCP, and
its warning.

Two places start the build's kernels, both through jupyter-cache's `single_nb_execution`:
book_ext's page workers, which call `single_nb_execution` of this module, and myst-nb's own
execution of a page while Sphinx reads it (a page that failed in a worker, or the only page to
run), whose reference to it `setup` replaces with this module's.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SUN_PATH_MAX = 107  # bytes in a Unix socket's path: sockaddr_un.sun_path (108) less its NUL
SOCKET_NAME = "kernel"  # the sockets: <folder>/kernel-1 ... kernel-5
# myst-nb's modules that execute a page, each holding its own reference to jupyter-cache's
# single_nb_execution (execution modes "cache" and "force")
MYST_NB_EXECUTORS = ("myst_nb.core.execute.cache", "myst_nb.core.execute.direct")


def ipc_ip(folder: str) -> str | None:
    """The IPC `ip` (the sockets' path less "-<n>") in `folder`, or None where IPC cannot be
    used: not a POSIX system, or a path too long for a Unix socket."""
    if os.name != "posix":
        return None
    ip = os.path.join(folder, SOCKET_NAME)
    if len(os.fsencode(ip)) + len("-99") > SUN_PATH_MAX:
        return None
    return ip


@contextmanager
def kernel_config() -> Iterator[Any]:
    """A traitlets Config for one kernel's manager: IPC in a private temporary folder (removed
    on leaving), or empty (TCP) where IPC cannot be used."""
    from traitlets.config import Config

    with tempfile.TemporaryDirectory(prefix="kernel-") as folder:
        ip = ipc_ip(folder)
        yield Config({"KernelManager": {"transport": "ipc", "ip": ip}} if ip else {})


def single_nb_execution(nb, cwd, timeout, allow_errors, meta_override=True, **kwargs):
    """jupyter-cache's single_nb_execution, the kernel over IPC (same arguments and result)."""
    from jupyter_cache.executors import utils

    with kernel_config() as config:
        return utils.single_nb_execution(
            nb, cwd, timeout, allow_errors, meta_override, config=config, **kwargs
        )


def setup(app) -> dict:
    import importlib

    from sphinx.errors import ExtensionError

    for name in MYST_NB_EXECUTORS:
        module = importlib.import_module(name)
        if not callable(getattr(module, "single_nb_execution", None)):
            raise ExtensionError(
                f"{name} has no single_nb_execution any more: myst-nb changed how it executes "
                f"pages; update {__file__}"
            )
        module.single_nb_execution = single_nb_execution
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
