"""The jail a student's kernel runs in: what it may see and use, and nothing else.

    host      what this machine lets the grader enforce (`detect`, `Capabilities`), the
              unprivileged grading user, the size-limited scratch tmpfs
    rootfs    the allow-list the kernel's root file system is built from (`layout`), and the
              kernel's clean environment
    kernel    one kernel's jail on the host side (`KernelJail`: scratch folder, spec, cgroups,
              memory watchdog, `Limits`), and `clean_after`: what a dead worker's kernels left
    zygote    a process that has imported torch and ipykernel and forks jailed kernels
    launcher  run as a script, standard library only: builds the jail from the spec
              (namespaces, pivot_root, rlimits, user switch) and starts the kernel in it

The instructors' guide (book/instructors.md) states what the jail guarantees and what not.
"""

from bertcourse.grade.jail.host import (
    GRADER_USER,
    Capabilities,
    detect,
    ensure_grader_user,
    release,
)
from bertcourse.grade.jail.kernel import CGROUPS_FILE, KernelJail, Limits, clean_after
from bertcourse.grade.jail.rootfs import DEVICES, Layout, layout
from bertcourse.grade.jail.zygote import LAUNCHER, Zygote

__all__ = [
    "CGROUPS_FILE",
    "DEVICES",
    "GRADER_USER",
    "LAUNCHER",
    "Capabilities",
    "KernelJail",
    "Layout",
    "Limits",
    "Zygote",
    "clean_after",
    "detect",
    "ensure_grader_user",
    "layout",
    "release",
]
