"""Several processes: torchrun's environment, the process group, and the few collectives the
training loop needs.

``torchrun --nproc_per_node=N`` starts N processes and sets ``RANK``, ``WORLD_SIZE`` and
``LOCAL_RANK`` in each; :func:`setup_distributed` reads them and starts the process group
(nccl with one GPU per process, gloo on CPU). One process needs no group: :class:`Dist`'s
collectives are then no-ops, so the same loop runs with or without torchrun.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class Dist:
    """This process's place in the run: its rank, the number of processes, its device."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.enabled:
            torch.distributed.barrier()

    def all_reduce_sum(self, t: Tensor) -> Tensor:
        if self.enabled:
            torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.SUM)
        return t

    def any(self, flag: bool) -> bool:
        """True on every process when ``flag`` is true on one (a decision taken together)."""
        return self.all_reduce_sum(torch.tensor([float(flag)])).item() > 0

    def mean_int(self, value: int) -> int:
        """The processes' mean of ``value``, rounded down: one number that all of them use."""
        return int(self.all_reduce_sum(torch.tensor([float(value)])).item() / self.world_size)


def setup_distributed(device: str = "auto") -> Dist:
    """Read torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK) and start the process group:
    nccl with one GPU per process when CUDA is used, gloo on CPU. One process: no group."""
    use_cuda = torch.cuda.is_available() if device == "auto" else device.startswith("cuda")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    if use_cuda:
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
    else:
        dev = torch.device("cpu")
    if world > 1 and not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend="nccl" if use_cuda else "gloo")
    return Dist(rank, world, local, dev)


def teardown_distributed() -> None:
    """End the process group, if one was started."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
