"""Checkpoints of a pretraining run: save, load, and resume exactly.

A checkpoint is a folder (``output_dir/checkpoint/``): ``model.safetensors`` (tied weights
stored once), ``config.json`` (the model's and the run's settings), ``tokenizer.json`` and
``trainer_state.pt`` (optimizer, scheduler, step, epoch and position in it, history).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch

from bertcourse.config import BertConfig
from bertcourse.model import BertForPreTraining
from bertcourse.pretraining.config import CHECKPOINT_DIR, PretrainConfig, checkpoint_path


def save_checkpoint(
    out_dir: Path,
    model: BertForPreTraining,
    tokenizer: Any,
    cfg: PretrainConfig,
    state: dict,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
) -> Path:
    """Write ``out_dir/checkpoint/``: model.safetensors (tied weights stored once),
    config.json, tokenizer.json and trainer_state.pt. Written to a temporary folder first, then
    renamed, so a crash never leaves half a checkpoint."""
    import shutil

    from safetensors.torch import save_model

    final = out_dir / CHECKPOINT_DIR
    tmp = out_dir / (CHECKPOINT_DIR + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_model(model, str(tmp / "model.safetensors"))
    meta = {"model": model.config.to_dict(), "pretrain": dataclasses.asdict(cfg)}
    (tmp / "config.json").write_text(json.dumps(meta, indent=2))
    tokenizer.save(str(tmp / "tokenizer.json"))
    torch.save(
        {**state, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()},
        tmp / "trainer_state.pt",
    )
    old = out_dir / (CHECKPOINT_DIR + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def load_checkpoint(
    path: str | Path, device: str | torch.device = "cpu"
) -> tuple[BertForPreTraining, Any]:
    """``(model in eval mode, tokenizers.Tokenizer)`` from an output or checkpoint folder."""
    from safetensors.torch import load_model
    from tokenizers import Tokenizer

    ckpt = checkpoint_path(path)
    meta = json.loads((ckpt / "config.json").read_text())
    model = BertForPreTraining(BertConfig.from_dict(meta["model"]))
    load_model(model, str(ckpt / "model.safetensors"), device=str(device))
    model.tie_weights()
    return model.to(device).eval(), Tokenizer.from_file(str(ckpt / "tokenizer.json"))


def check_resume(cfg: PretrainConfig, saved: PretrainConfig) -> None:
    """Refuse to resume with settings that change the model, the data or its order."""
    fixed = ("model", "layers", "hidden", "heads", "intermediate", "tokenizer", "text_files",
             "documents", "lang", "max_seq_length", "batch_size", "seed", "heldout_percent",
             "eval_seq_length", "mlm_probability", "mask_split", "sentence_task",
             "static_masking", "whole_word_mask", "word_source")  # fmt: skip
    diff = [f for f in fixed if getattr(cfg, f) != getattr(saved, f)]
    if diff:
        raise ValueError(
            "cannot resume: these settings differ from the checkpoint's: "
            + ", ".join(
                f"{f}={getattr(cfg, f)!r} (checkpoint: {getattr(saved, f)!r})" for f in diff
            )
            + ". Start from PretrainConfig.load(dir) (the command line does this for you)."
        )


def resume(
    path: str | Path,
    cfg: PretrainConfig,
    model: BertForPreTraining,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    device: torch.device,
) -> dict[str, Any]:
    """Load model, optimizer and scheduler from a checkpoint of the same settings (checked
    with :func:`check_resume`); returns the saved position (step, epoch, history...)."""
    from safetensors.torch import load_model

    ckpt = checkpoint_path(path)
    check_resume(cfg, PretrainConfig.load(ckpt))
    load_model(model, str(ckpt / "model.safetensors"), device=str(device))
    model.tie_weights()
    saved = torch.load(ckpt / "trainer_state.pt", map_location=device, weights_only=False)
    optimizer.load_state_dict(saved.pop("optimizer"))
    scheduler.load_state_dict(saved.pop("scheduler"))
    if cfg.steps is not None and saved["step"] > cfg.steps:
        raise ValueError(f"the checkpoint is at step {saved['step']}, beyond steps={cfg.steps}")
    return saved
