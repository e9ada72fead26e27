"""The settings of a pretraining run: :class:`PretrainConfig`, saved in every checkpoint."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertcourse.config import BertConfig
from bertcourse.languages import get_language
from bertcourse.mlm import BERT_SPLIT, MaskSplit
from bertcourse.nsp import TASKS
from bertcourse.vocab import Vocab

MODEL_SIZES = ("tiny", "mini", "small", "base", "custom")
HELDOUT_SEED = 0  # the held-out pairs and masks: the same for every run (see eval_seq_length)
CHECKPOINT_DIR = "checkpoint"
WORD_SOURCES = ("gold", "jieba")
"""Where whole-word masking takes its words: the corpus's own (Chinese: the gold segmentation of
People's Daily; English: runs without a space), or jieba's segmentation of the text (Chinese)."""


@dataclass
class PretrainConfig:
    """Everything a run needs. The command-line options have the same names (with dashes)."""

    # model
    model: str = "tiny"  # tiny (2x128), mini (4x256), small (4x512), base (12x768), custom
    layers: int | None = None  # override the preset's num_hidden_layers
    hidden: int | None = None  # hidden_size
    heads: int | None = None  # num_attention_heads (custom default: hidden // 64, at least 1)
    intermediate: int | None = None  # intermediate_size (custom default: 4 * hidden)
    # Hidden and attention dropout. 0, not BERT's 0.1: a ten-minute run sees each token a few
    # dozen times and is far from overfitting, and without dropout it learns more per step
    # (benchmarks/RESULTS.md: 0.192 vs 0.150 at [MASK] for seed 0). Use 0.1 for long runs.
    dropout: float = 0.0
    attn_implementation: str = "sdpa"
    # data
    lang: str = "en"  # the language (bertcourse.languages): its corpus and vocabularies
    # "wordpiece-8192" (trained on the corpus; faster and better for tiny/mini models, see
    # benchmarks/RESULTS.md) or "bert" (the bert-base-uncased vocabulary, 30,522 pieces)
    tokenizer: str = "wordpiece-8192"
    text_files: list[str] | None = None  # your own .txt files/folders instead of the corpus
    documents: str = "file"  # for text_files: "file" or "block" (see bertcourse.data)
    # 64, not BERT's 128: in the same 10 minutes a tiny model learns more from twice the steps
    # on shorter pairs (with BERT's dropout and mask rate, seed 0: 0.150 at [MASK] against
    # 0.075 at 128; benchmarks/RESULTS.md)
    max_seq_length: int = 64
    packing: bool = False  # several pairs per row, no padding (bertcourse.packing)
    # Share of tokens chosen for prediction in training. 0.25, not BERT's 0.15: more
    # predictions per step for the same encoder work (0.40 was worse; benchmarks/RESULTS.md).
    # The 80/10/10 split of the chosen tokens is BERT's. The held-out set always uses 0.15.
    mlm_probability: float = 0.25
    # Choose whole words, not single tokens (Cui et al. 2019 for Chinese): a word is drawn with
    # mlm_probability and all its tokens are chosen; the 80/10/10 draw stays per token. Words:
    # the corpus's (Chinese: the gold segmentation; English: runs without a space)
    whole_word_mask: bool = False
    word_source: str = "gold"  # the words of whole_word_mask: one of WORD_SOURCES
    # What a chosen token shows: [MASK] / itself / a random id (BERT's Table 8 tried six splits)
    mask_split: MaskSplit = BERT_SPLIT
    sentence_task: str = "nsp"  # "nsp" (BERT), "sop" (ALBERT) or "none" (no sentence loss)
    # None: dynamic masking (new pairs and masks every epoch, RoBERTa); N: the original
    # release's static data, cut and masked once in N copies (its dupe_factor), read in turn
    static_masking: int | None = None
    heldout_percent: float = 5.0
    # The held-out set is one set of questions for every run: pairs cut to eval_seq_length
    # tokens (or the run's max_seq_length if shorter), drawn with HELDOUT_SEED and BERT's 15%
    # whatever the run's seed, length and mlm_probability, so runs compare question by question
    eval_seq_length: int = 64
    eval_examples: int | None = None  # cap on held-out pairs (None: all, ~600)
    # optimisation
    steps: int | None = 1000  # optimizer steps of the schedule; None: fit it to max_minutes
    batch_size: int = 32  # global batch (split across DDP processes)
    lr: float = 2e-3  # peak learning rate: beat 1e-3 and 3e-3 in the default recipe (RESULTS.md)
    warmup_steps: int | None = None  # default: 10% of steps
    schedule: str = "linear"  # "linear" (transformers) or "polynomial" (original BERT)
    weight_decay: float = 0.01
    adam_eps: float = 1e-6
    bias_correction: bool = True
    grad_clip: float = 1.0
    seed: int = 0
    # running
    output_dir: str = "runs/pretrain"
    resume: str | None = None  # an output dir or a checkpoint dir
    eval_every: int = 200
    checkpoint_every: int = 500
    log_every: int = 10
    stop_after: int | None = None  # stop after this many steps *in this run* (schedule unchanged)
    max_minutes: float | None = None  # stop (checkpoint, evaluate, report) after this long
    threads: int | None = None  # torch.set_num_threads
    peak_gflops: float | None = None  # the machine's matmul peak for MFU (None: measure it)
    measure_peak: bool = True  # measure the matmul peak at the start (~1 s) to report MFU
    device: str = "auto"  # "auto" (cuda if available), "cpu", "cuda"
    bf16: bool = False  # bf16 autocast: GPUs; on a CPU it pays only with AMX and larger models
    num_workers: int = 0  # DataLoader workers
    progress: bool = True  # tqdm bar (rank 0)
    plots: bool = True
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        get_language(self.lang)  # a clear error for an unknown language, before any work
        self._check_masking()

    def _check_masking(self) -> None:
        """The pretraining choices (chapter 10's ablations): clear errors before any work."""
        if isinstance(self.mask_split, str):  # the command line's "0.8,0.1,0.1"
            self.mask_split = MaskSplit.parse(self.mask_split)
        elif isinstance(self.mask_split, dict):  # a saved config.json
            self.mask_split = MaskSplit(**self.mask_split)
        elif isinstance(self.mask_split, (list, tuple)):
            self.mask_split = MaskSplit(*self.mask_split)
        if not isinstance(self.mask_split, MaskSplit):
            raise TypeError(f"mask_split must be a MaskSplit, got {self.mask_split!r}")
        p = self.mlm_probability
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 < p < 1.0:
            raise ValueError(f"the masking rate (--mask-rate) must be in (0, 1), got {p!r}")
        if self.sentence_task not in TASKS:
            raise ValueError(f"sentence_task must be one of {TASKS}, got {self.sentence_task!r}")
        if self.word_source not in WORD_SOURCES:
            raise ValueError(f"word_source must be one of {WORD_SOURCES}, got {self.word_source!r}")  # fmt: skip
        if self.word_source == "jieba" and self.lang != "zh":
            raise ValueError("jieba segments Chinese: --whole-word-masking jieba needs --lang zh")
        n = self.static_masking
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ValueError(f"--static-masking is a number of copies >= 1, got {n!r}")

    def replace(self, **changes: Any) -> PretrainConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def for_language(cls, lang: str = "en", **changes: Any) -> PretrainConfig:
        """The default recipe of a language (its ``Language.recipe`` over these defaults; for
        ``"zh"`` the character vocabulary), then ``changes``: what ``--lang`` does."""
        return cls(lang=lang).replace(**{**get_language(lang).recipe, **changes})

    def model_config(self, vocab: Vocab) -> BertConfig:
        """The BertConfig of this run for a vocabulary (size and [PAD] id)."""
        if self.model not in MODEL_SIZES:
            raise ValueError(f"model must be one of {MODEL_SIZES}, got {self.model!r}")
        presets = {
            "tiny": (2, 128, 2, 512),
            "mini": (4, 256, 4, 1024),
            "small": (4, 512, 8, 2048),
            "base": (12, 768, 12, 3072),
        }
        if self.model == "custom":
            if self.layers is None or self.hidden is None:
                raise ValueError("--model custom needs --layers and --hidden (and optionally --heads, --intermediate)")  # fmt: skip
            layers, hidden = self.layers, self.hidden
            heads = self.heads or max(1, hidden // 64)
            inter = self.intermediate or 4 * hidden
        else:
            layers, hidden, heads, inter = presets[self.model]
            layers, hidden = self.layers or layers, self.hidden or hidden
            heads, inter = self.heads or heads, self.intermediate or inter
        if self.max_seq_length > 512:
            raise ValueError(f"max_seq_length {self.max_seq_length} exceeds BERT's 512 positions")
        return BertConfig(
            vocab_size=vocab.size,
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=inter,
            hidden_dropout_prob=self.dropout,
            attention_probs_dropout_prob=self.dropout,
            pad_token_id=vocab.pad_id,
            attn_implementation=self.attn_implementation,
        )

    @property
    def heldout_seq_length(self) -> int:
        """The held-out pairs' length: eval_seq_length, or max_seq_length if that is shorter
        (a model has no position embeddings trained beyond its own length)."""
        return min(self.eval_seq_length, self.max_seq_length)

    @property
    def warmup(self) -> int:
        if self.warmup_steps is not None:
            return self.warmup_steps
        if self.steps is None:
            raise ValueError("the warm-up is 10% of steps, which are not fitted yet")
        return round(0.1 * self.steps)

    @classmethod
    def load(cls, path: str | Path) -> PretrainConfig:
        """The config a run was started with, from its output or checkpoint folder."""
        d = json.loads((checkpoint_path(path) / "config.json").read_text())["pretrain"]
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def checkpoint_path(path: str | Path) -> Path:
    """Accept an output folder (uses its ``checkpoint/``) or a checkpoint folder."""
    path = Path(path)
    if (path / "model.safetensors").is_file():
        return path
    if (path / CHECKPOINT_DIR / "model.safetensors").is_file():
        return path / CHECKPOINT_DIR
    raise FileNotFoundError(
        f"no checkpoint in {path}: expected {path}/model.safetensors or "
        f"{path}/{CHECKPOINT_DIR}/model.safetensors (written by python -m bertcourse.pretrain)"
    )
