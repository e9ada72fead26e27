"""How much arithmetic a BERT step needs, and how much the machine can do: model FLOPs
utilisation (MFU), as nanoGPT's ``estimate_mfu`` but against a peak measured on this machine.

The count (matrix multiplies only, as nanoGPT and the PaLM paper's appendix B; LayerNorm,
GELU, softmax, dropout and the embedding lookups are a few percent and are left out). With
``n`` layers, hidden size ``H``, feed-forward size ``I``, vocabulary ``V``, sequence length
``T`` (as computed, padding included) and ``M`` labelled (masked) positions per sequence::

    forward FLOPs per token   = 2 * N_layer             N_layer = n * (4*H*H + 2*H*I)
                              + 4 * n * T * H           attention scores QK^T and context PV
    forward FLOPs per sequence += 2 * M * (H*H + H*V)   MLM head at the labelled positions only
                              + 2 * (H*H + 2*H)         pooler and NSP classifier on [CLS]
    training step             = 3 * forward             (backward = 2 * forward)

so a training token costs ``6 * N_layer + 12 * n * T * H`` plus the heads: nanoGPT's
``6N + 12 * L * H * T`` with N the parameters that take part in matrix multiplies. BERT's
MLM head is counted only where BERT needs it (the ~15% labelled positions): a model that
projects every position to the vocabulary does more work, which MFU does not credit.

:func:`matmul_peak` measures the machine's fp32 matrix-multiply rate (best of a few square
``torch.mm``), the practical ceiling for a model made of matrix multiplies; MFU is
``model FLOPs per second / peak``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from bertcourse.config import BertConfig


@dataclass(frozen=True)
class StepFlops:
    """FLOPs of one BERT pretraining step on a (B, T) batch, split by where they are spent."""

    encoder: float  # the n layers' weight matrix multiplies (Q, K, V, output, two FFN)
    attention: float  # QK^T and PV, quadratic in T
    mlm_head: float  # transform dense + vocabulary projection at the labelled positions
    nsp_head: float  # pooler dense + NSP classifier
    training: bool  # True: forward + backward (3x forward); False: forward only

    @property
    def total(self) -> float:
        return self.encoder + self.attention + self.mlm_head + self.nsp_head


def bert_flops(
    config: BertConfig,
    batch_size: int,
    seq_len: int,
    n_labelled: float,
    *,
    training: bool = True,
) -> StepFlops:
    """Model FLOPs of one step (formula in the module docstring).

    Args:
        config: the model's sizes.
        batch_size, seq_len: the batch shape as computed, B and T (padding included).
        n_labelled: labelled (MLM) positions in the whole batch, N (about 15% of the tokens).
        training: forward + backward (``3 * forward``) or forward only.
    """
    h, i, n, v = (config.hidden_size, config.intermediate_size, config.num_hidden_layers,
                  config.vocab_size)  # fmt: skip
    tokens = batch_size * seq_len
    mult = 3.0 if training else 1.0
    return StepFlops(
        encoder=mult * 2 * n * (4 * h * h + 2 * h * i) * tokens,
        attention=mult * 4 * n * seq_len * h * tokens,
        mlm_head=mult * 2 * (h * h + h * v) * n_labelled,
        nsp_head=mult * 2 * (h * h + 2 * h) * batch_size,
        training=training,
    )


@dataclass(frozen=True)
class MatmulPeak:
    """The best fp32 matrix-multiply rate measured, and where it was reached."""

    flops_per_s: float
    size: int  # the square size n of the fastest n x n @ n x n product
    threads: int
    rates: dict[int, float]  # best FLOP/s for each size tried


def matmul_peak(
    sizes: tuple[int, ...] = (512, 1024, 2048),
    repeats: int = 5,
    *,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    min_seconds: float = 0.05,
) -> MatmulPeak:
    """The machine's practical peak: best-of-``repeats`` rate of square ``torch.mm``.

    A product of two n x n matrices is ``2 n^3`` FLOPs. Each timing repeats the product until
    it lasts ``min_seconds`` (so small sizes are not lost in timer noise); the best timing of
    each size is kept, and the best size gives the peak. Uses the current
    ``torch.get_num_threads()``: measure with the threads the model will use.
    """
    device = torch.device(device)
    rates: dict[int, float] = {}
    g = torch.Generator(device="cpu").manual_seed(0)
    for n in sizes:
        a = torch.randn(n, n, generator=g, dtype=torch.float32).to(device, dtype)
        b = torch.randn(n, n, generator=g, dtype=torch.float32).to(device, dtype)
        out = torch.empty(n, n, dtype=dtype, device=device)
        torch.mm(a, b, out=out)  # warm-up: thread pool, caches, kernel choice
        sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        sync()
        t0 = time.perf_counter()
        torch.mm(a, b, out=out)
        sync()
        once = max(time.perf_counter() - t0, 1e-9)
        inner = max(1, int(min_seconds / once))
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(inner):
                torch.mm(a, b, out=out)
            sync()
            best = min(best, (time.perf_counter() - t0) / inner)
        rates[n] = 2 * n**3 / best
    size = max(rates, key=rates.__getitem__)
    return MatmulPeak(rates[size], size, torch.get_num_threads(), rates)


def mfu(flops_per_step: float, seconds_per_step: float, peak_flops_per_s: float) -> float:
    """Model FLOPs utilisation: the share of the peak that the model's own FLOPs reach."""
    if seconds_per_step <= 0 or peak_flops_per_s <= 0:
        raise ValueError(
            f"need positive times and peak, got {seconds_per_step=} and {peak_flops_per_s=}"
        )
    return flops_per_step / seconds_per_step / peak_flops_per_s
