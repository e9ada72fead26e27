"""Masked-LM sampling: which tokens BERT must predict, and what it sees there (chapter 3).

BERT learns by filling in blanks. Some positions are *chosen* (15% by default); the model must
predict the original token there, and nowhere else (label `IGNORE_INDEX` = -100). What the
model *sees* at a chosen position is:

- 80% of the time `[MASK]`,
- 10% of the time a random token,
- 10% of the time the original token, unchanged.

Why not always `[MASK]`? Fine-tuning inputs never contain `[MASK]`, so a model that only
learned "predict at [MASK]" would have nothing to do at real tokens. The random and unchanged
cases make every position a possible target: the model must keep a good representation of
each token, because it cannot tell which of the visible tokens it will be asked about.

Two recipes, both here:

- **dynamic**, `mask_tokens`: transformers' `DataCollatorForLanguageModeling` (and RoBERTa).
  Each token is chosen *independently* with probability 0.15, on a whole (B, L) batch, and the
  mask is drawn anew every time a batch is built. The number chosen varies (it can be 0).
- **static**, `create_masked_lm_predictions`: the original google-research/bert
  `create_pretraining_data.py`. Exactly `round(0.15 * len)` positions (at most 20) of one
  sequence, drawn once when the training files are written (10 copies with different masks).

Both can mask **whole words** (`word_ids=`): all the tokens of a word are chosen together, as
Chinese BERT-wwm does with words from a segmenter (Chinese has one token per character and no
spaces, so the "##" rule of the original finds no words). Word boundaries come the way
`tokenizers` gives them (`Encoding.word_ids`): a word is a run of consecutive tokens that carry
the same word id; special tokens carry `None` (lists) or -1 (tensors) and are never chosen.

Shape legend:
    B  batch size    L  sequence length    V  vocabulary size (30,522 for bert-base-uncased)
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from bertcourse.config import IGNORE_INDEX

# --- argument checks -----------------------------------------------------------------------


def _check_probability(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")


def _check_replace_probs(mask_replace_prob: float, random_replace_prob: float) -> None:
    _check_probability("mask_replace_prob", mask_replace_prob)
    _check_probability("random_replace_prob", random_replace_prob)
    # a tiny slack so that e.g. 0.7 + 0.3 (= 1.0000000000000002 in floats) is accepted
    if mask_replace_prob + random_replace_prob > 1.0 + 1e-12:
        raise ValueError(
            f"mask_replace_prob + random_replace_prob must not exceed 1 (they are shares of the "
            f"chosen tokens; the rest is kept unchanged), got {mask_replace_prob} + "
            f"{random_replace_prob} = {mask_replace_prob + random_replace_prob}"
        )


SPLIT_TOLERANCE = 1e-9
"""How far the three shares of a `MaskSplit` may sum from 1 (float rounding of e.g. 0.7 + 0.2 + 0.1)."""


@dataclass(frozen=True)
class MaskSplit:
    """What a chosen position shows: `[MASK]` (`mask`), the original token (`same`) or a random
    id (`random`), as shares of the chosen positions. BERT's is 0.8 / 0.1 / 0.1; its Table 8
    also tried 1/0/0, 0.8/0/0.2, 0.8/0.2/0, 0/0.2/0.8 and 0/0/1 (MASK/SAME/RND).

    Three non-negative numbers summing to 1 (within `SPLIT_TOLERANCE`); anything else is refused
    with the reason. `MaskSplit.parse("0.8,0.1,0.1")` reads the command line's form.
    """

    mask: float = 0.8
    same: float = 0.1
    random: float = 0.1

    def __post_init__(self) -> None:
        shares = {"mask": self.mask, "same": self.same, "random": self.random}
        for name, value in shares.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"MaskSplit.{name} must be a number, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"MaskSplit.{name} must be a non-negative number, got {value!r}")
        total = self.mask + self.same + self.random
        if abs(total - 1.0) > SPLIT_TOLERANCE:
            raise ValueError(
                f"the MASK/SAME/RND shares must sum to 1 (they split the chosen tokens), got "
                f"{self.mask} + {self.same} + {self.random} = {total:.12g}"
            )

    @classmethod
    def parse(cls, text: str) -> MaskSplit:
        """`"0.8,0.1,0.1"` -> `MaskSplit(0.8, 0.1, 0.1)` (MASK, SAME, RND; a clear error else)."""
        parts = [p.strip() for p in str(text).split(",")]
        if len(parts) != 3:
            raise ValueError(
                f"a MASK/SAME/RND split is three comma-separated shares like 0.8,0.1,0.1, got {text!r}"
            )
        try:
            values = [float(p) for p in parts]
        except ValueError:
            raise ValueError(f"a MASK/SAME/RND split holds numbers, got {text!r}") from None
        return cls(*values)

    def __str__(self) -> str:
        return f"{self.mask:g},{self.same:g},{self.random:g}"

    @property
    def replace_probs(self) -> tuple[float, float]:
        """`(mask_replace_prob, random_replace_prob)`: transformers' names for the same split
        (the SAME share is what is left; `random` is capped at `1 - mask` so that rounding in
        the sum never exceeds 1)."""
        return self.mask, min(self.random, 1.0 - self.mask)


BERT_SPLIT = MaskSplit(0.8, 0.1, 0.1)
"""BERT's MASK/SAME/RND split (the defaults of `mask_tokens` and the original release)."""


def _check_vocab_size(vocab_size: int) -> None:
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive integer, got {vocab_size!r}")


def _check_id(name: str, token_id: int, vocab_size: int) -> None:
    if not 0 <= token_id < vocab_size:
        raise ValueError(
            f"{name} {token_id} is out of range for vocab_size {vocab_size} "
            f"(valid ids: 0..{vocab_size - 1})"
        )


def _special_set(
    special_token_ids: Collection[int], vocab_size: int, pad_token_id: int | None = None
) -> set[int]:
    specials = {int(i) for i in special_token_ids}
    if pad_token_id is not None:
        specials.add(int(pad_token_id))
    for token_id in sorted(specials):
        _check_id("special token id", token_id, vocab_size)
    return specials


def _allowed_random_ids(vocab_size: int, specials: set[int]) -> list[int]:
    """The ids a random replacement may take when special ids are excluded."""
    allowed = [i for i in range(vocab_size) if i not in specials]
    if not allowed:
        raise ValueError(
            "random_ids_exclude_special=True but every id of the vocabulary is special: "
            "there is no id left to draw"
        )
    return allowed


# --- word boundaries -----------------------------------------------------------------------

NO_WORD = -1
"""The word id of a token that belongs to no word ([CLS], [SEP], padding) in a tensor of ids."""


def _check_word_id_tensor(word_ids: Tensor, input_ids: Tensor) -> Tensor:
    """`word_ids` as a (B, L) int64 tensor on the device of `input_ids`, or a clear error."""
    if not isinstance(word_ids, Tensor) or torch.is_floating_point(word_ids):
        raise TypeError(
            "word_ids must be an integer torch.Tensor shaped like input_ids, with -1 where a "
            f"token belongs to no word (special tokens), got {type(word_ids).__name__}"
        )
    if word_ids.shape != input_ids.shape:
        raise ValueError(
            f"word_ids has shape {tuple(word_ids.shape)} but input_ids has shape "
            f"{tuple(input_ids.shape)}: give one word id per token"
        )
    if word_ids.numel() > 0 and int(word_ids.min()) < NO_WORD:
        raise ValueError(
            f"word_ids holds {int(word_ids.min())}: word ids are >= 0, or -1 for no word"
        )
    return word_ids.to(device=input_ids.device, dtype=torch.long)


def word_starts(word_ids: Tensor) -> Tensor:
    """(..., L) bool: True at the first token of each word (a run of equal ids >= 0).

    A token starts a word when it has a word id and the token before it has another one (or
    none): ids are compared with the left neighbour only, so a pair encoding whose second
    sentence numbers its words from 0 again still has distinct words.
    """
    previous = torch.full_like(word_ids, NO_WORD)
    previous[..., 1:] = word_ids[..., :-1]
    return (word_ids != NO_WORD) & (word_ids != previous)


def spread_to_words(chosen_starts: Tensor, word_ids: Tensor) -> Tensor:
    """(..., L) bool: every token of each word whose first token is chosen in `chosen_starts`."""
    starts = word_starts(word_ids)
    # number the words of each row 1, 2, ... by counting word starts; tokens inherit the
    # number of the word they are in (0 before the first word), then look up whether it is chosen
    word_number = torch.cumsum(starts.long(), dim=-1)
    in_word = word_ids != NO_WORD
    chosen_numbers = torch.where(chosen_starts & starts, word_number, 0)
    # per row, a table word number -> chosen; scatter the chosen numbers into it
    table = torch.zeros(
        (*word_ids.shape[:-1], word_ids.shape[-1] + 1), dtype=torch.bool, device=word_ids.device
    )
    table.scatter_(-1, chosen_numbers, True)
    table[..., 0] = False
    return in_word & torch.gather(table, -1, word_number)


def _words_from_pieces(
    tokens: list[int], specials: set[int], is_subword: Callable[[int], bool] | None
) -> list[list[int]]:
    """The original's candidates: one per position, or with `is_subword` one per "##" word."""
    words: list[list[int]] = []
    for position, token_id in enumerate(tokens):
        if token_id in specials:
            continue
        if is_subword is not None and words and is_subword(token_id):
            words[-1].append(position)  # a "##" piece belongs to the word before it
        else:
            words.append([position])
    return words


def _words_from_ids(
    word_ids: Sequence[int | None], specials: set[int], tokens: list[int]
) -> list[list[int]]:
    """The candidates of `create_masked_lm_predictions`: lists of positions, one per word."""
    if len(word_ids) != len(tokens):
        raise ValueError(
            f"word_ids has {len(word_ids)} entries but the sequence has {len(tokens)} tokens: "
            "give one word id per token (None for special tokens), as Encoding.word_ids does"
        )
    words: list[list[int]] = []
    previous = None
    for position, (word_id, token_id) in enumerate(zip(word_ids, tokens)):
        if word_id is None or token_id in specials:
            previous = None
            continue
        if isinstance(word_id, bool) or int(word_id) != word_id or word_id < 0:
            raise ValueError(f"word_ids[{position}] = {word_id!r}: word ids are ints >= 0 or None")
        if word_id == previous:
            words[-1].append(position)  # the same word as the token before
        else:
            words.append([position])
        previous = word_id
    return words


# --- dynamic masking (transformers) --------------------------------------------------------


class MaskedTokens(NamedTuple):
    """What `mask_tokens` returns; unpacks like a tuple: `inputs, labels = mask_tokens(...)`."""

    input_ids: Tensor
    """(B, L) what the model sees: [MASK], a random id or the original at chosen positions."""
    labels: Tensor
    """(B, L) int64: the original id at chosen positions, `IGNORE_INDEX` (-100) elsewhere."""


def special_tokens_mask(input_ids: Tensor, special_token_ids: Collection[int]) -> Tensor:
    """(B, L) bool, True where `input_ids` holds one of `special_token_ids` (never chosen)."""
    ids = torch.tensor(sorted({int(i) for i in special_token_ids}), dtype=input_ids.dtype)
    return torch.isin(input_ids, ids.to(input_ids.device))


def mask_tokens(
    input_ids: Tensor,
    *,
    vocab_size: int,
    mask_token_id: int,
    special_token_ids: Collection[int],
    mlm_probability: float = 0.15,
    mask_replace_prob: float = 0.8,
    random_replace_prob: float = 0.1,
    generator: torch.Generator | None = None,
    pad_token_id: int | None = None,
    random_ids_exclude_special: bool = False,
    word_ids: Tensor | None = None,
    split: MaskSplit | None = None,
) -> MaskedTokens:
    """Dynamic MLM masking of a batch, with the semantics of transformers' data collator.

    Three independent draws per position, in this order (the same calls, in the same order,
    as `DataCollatorForLanguageModeling.torch_mask_tokens`, so the same generator seed gives
    the same batch as transformers):

    1. chosen ~ Bernoulli(mlm_probability), except special ids (and padding): never chosen;
    2. among chosen: [MASK] ~ Bernoulli(mask_replace_prob);
    3. among chosen and not [MASK]: random ~ Bernoulli(random_replace_prob / (1 -
       mask_replace_prob)), so that `random_replace_prob` is the share of *all* chosen tokens
       (0.1 / 0.2 = 0.5 with the defaults). A random token is uniform over the vocabulary.
       The rest (1 - 0.8 - 0.1 = 10%) keeps its original id.

    Args:
        input_ids: (B, L) token ids (any shape works), integer dtype. Not modified.
        vocab_size: V; random replacements are drawn from 0..V-1.
        mask_token_id: the id of [MASK] (103 in bert-base-uncased).
        special_token_ids: ids that are never chosen, e.g. `bertcourse.config.SPECIAL_IDS`
            ([PAD], [UNK], [CLS], [SEP], [MASK]: transformers' `tokenizer.all_special_ids`).
        mlm_probability: chance that a non-special token is chosen.
        mask_replace_prob: share of chosen tokens replaced by [MASK].
        random_replace_prob: share of chosen tokens replaced by a random id.
        generator: a `torch.Generator` on the device of `input_ids` for reproducible masks;
            None uses PyTorch's global generator.
        pad_token_id: if given, padding is never chosen even if not in `special_token_ids`.
        random_ids_exclude_special: False (default) draws random ids from the whole
            vocabulary, special ids included, as transformers and the original release do;
            this keeps the result identical to transformers for the same seed. True draws
            uniformly from the non-special ids only (never a [CLS], [PAD] or [MASK] in the
            middle of a sentence); the difference is tiny for a 30,522-word vocabulary (5 in
            30,522 random replacements, i.e. ~0.002% of chosen tokens).
        word_ids: (B, L) integer tensor for whole-word masking, -1 where a token belongs to
            no word (special tokens, padding); a word is a run of consecutive tokens with the
            same id. Draw 1 is then made at the first token of each word only, and a chosen
            word is chosen whole (except its special tokens, e.g. an [UNK] character, which
            are never targets); draws 2 and 3 stay per token. Draw 1 is transformers'
            `DataCollatorForLanguageModeling(whole_word_mask=True)` with the words it finds
            from gaps between token offsets, so for the same words and seed the *labels*
            (which positions are predicted) are the same, whatever the split. The *inputs*
            are not, unless `split=MaskSplit(1, 0, 0)`: under `whole_word_mask` transformers
            (5.x) sets `mask_replace_prob = 1` and `random_replace_prob = 0` (with a
            warning), so every chosen token shows [MASK] and no random draw is made, while
            the default here keeps BERT's per-token 80/10/10. Words from a segmenter make it
            work for Chinese, where the offsets have no gaps.
        split: the MASK/SAME/RND shares as one `MaskSplit` (any split, e.g. BERT's Table 8
            rows); it replaces `mask_replace_prob` and `random_replace_prob`, which must then
            be left at their defaults. `MaskSplit(0.8, 0.1, 0.1)` gives exactly the defaults'
            batch for the same seed.

    Returns:
        `MaskedTokens(input_ids (B, L) same dtype as the input, labels (B, L) int64)`.
    """
    # --- check the arguments: every mistake here would silently corrupt training data
    _check_vocab_size(vocab_size)
    _check_probability("mlm_probability", mlm_probability)
    if split is not None:
        if not isinstance(split, MaskSplit):
            raise TypeError(f"split must be a MaskSplit, got {type(split).__name__}")
        if (mask_replace_prob, random_replace_prob) != BERT_SPLIT.replace_probs:
            raise ValueError(
                "give split= or mask_replace_prob/random_replace_prob, not both: they say "
                "the same thing"
            )
        mask_replace_prob, random_replace_prob = split.replace_probs
    _check_replace_probs(mask_replace_prob, random_replace_prob)
    _check_id("mask_token_id", int(mask_token_id), vocab_size)
    if pad_token_id is not None:
        _check_id("pad_token_id", int(pad_token_id), vocab_size)
    specials = _special_set(special_token_ids, vocab_size, pad_token_id)
    if not isinstance(input_ids, Tensor) or torch.is_floating_point(input_ids):
        got = (
            f"a tensor of dtype {input_ids.dtype}"
            if isinstance(input_ids, Tensor)
            else type(input_ids)
        )
        raise TypeError(
            f"input_ids must be an integer torch.Tensor of token ids, got {got} "
            "(use torch.tensor(ids, dtype=torch.long))"
        )
    if input_ids.numel() > 0:
        bad = (input_ids < 0) | (input_ids >= vocab_size)
        if bad.any():
            where = tuple(int(i) for i in bad.nonzero()[0])
            raise ValueError(
                f"input_ids contains id {int(input_ids[where])} at position {where}, out of "
                f"range for vocab_size {vocab_size} (valid ids: 0..{vocab_size - 1})"
            )

    shape, device = input_ids.shape, input_ids.device
    if word_ids is not None:
        word_ids = _check_word_id_tensor(word_ids, input_ids)

    # 1. choose the positions to predict: independently, never a special token; with words,
    #    draw at the first token of each word and spread the choice to the whole word
    never = special_tokens_mask(input_ids, specials)  # (B, L) bool
    if word_ids is not None:
        never |= word_ids == NO_WORD
        not_drawn = never | ~word_starts(word_ids)
    else:
        not_drawn = never
    probability = torch.full(shape, float(mlm_probability), device=device)  # (B, L)
    probability.masked_fill_(not_drawn, 0.0)
    chosen = torch.bernoulli(probability, generator=generator).bool()  # (B, L)
    if word_ids is not None:
        chosen = spread_to_words(chosen, word_ids) & ~never
    labels = input_ids.long().masked_fill(~chosen, IGNORE_INDEX)  # (B, L)

    # 2. most chosen tokens become [MASK]
    masked_input_ids = input_ids.clone()  # never write into the caller's tensor
    to_mask = torch.full(shape, float(mask_replace_prob), device=device)
    replaced = torch.bernoulli(to_mask, generator=generator).bool() & chosen  # (B, L)
    masked_input_ids[replaced] = mask_token_id

    if mask_replace_prob == 1 or random_replace_prob == 0:
        return MaskedTokens(masked_input_ids, labels)  # no random draw (as transformers)

    # 3. some of the rest become a random token; the remainder stays as it was.
    # P(random | chosen, not [MASK]) = random_replace_prob / (1 - mask_replace_prob)
    p_random = min(1.0, random_replace_prob / (1.0 - mask_replace_prob))
    to_random = torch.full(shape, p_random, device=device)
    randomized = torch.bernoulli(to_random, generator=generator).bool() & chosen & ~replaced
    if random_ids_exclude_special:
        allowed = torch.tensor(_allowed_random_ids(vocab_size, specials), device=device)
        draws = torch.randint(len(allowed), shape, generator=generator, device=device)
        random_ids = allowed[draws]  # (B, L) uniform over the non-special ids
    else:
        random_ids = torch.randint(
            vocab_size, shape, dtype=torch.long, generator=generator, device=device
        )  # (B, L) uniform over the whole vocabulary
    masked_input_ids[randomized] = random_ids[randomized].to(masked_input_ids.dtype)
    return MaskedTokens(masked_input_ids, labels)


class MaskingSummary(NamedTuple):
    """What the chosen positions of a masked batch show (see `summarize_masking`)."""

    num_tokens: int
    num_chosen: int
    num_mask: int
    """chosen positions that show [MASK]"""
    num_random: int
    """chosen positions that show another id than the original, other than [MASK]"""
    num_kept: int
    """chosen positions that show the original id (a random draw of the same id counts here)"""


def summarize_masking(
    input_ids: Tensor, masked_input_ids: Tensor, labels: Tensor, mask_token_id: int
) -> MaskingSummary:
    """Count [MASK] / random / kept among the chosen positions, as a reader would observe them.

    A random draw can hit [MASK] itself or the original token (probability 1/V each); such
    positions are counted by what they show, so the observed shares differ from 80/10/10 by
    ~0.1/V. For the book's tables and sanity checks.
    """
    chosen = labels != IGNORE_INDEX
    shows_mask = chosen & (masked_input_ids == mask_token_id)
    shows_original = chosen & (masked_input_ids == input_ids) & ~shows_mask
    shows_other = chosen & ~shows_mask & ~shows_original
    return MaskingSummary(
        num_tokens=input_ids.numel(),
        num_chosen=int(chosen.sum()),
        num_mask=int(shows_mask.sum()),
        num_random=int(shows_other.sum()),
        num_kept=int(shows_original.sum()),
    )


# --- static masking (the original release) -------------------------------------------------


class MaskedLMPredictions(NamedTuple):
    """What `create_masked_lm_predictions` returns; unpacks like the original's 3-tuple."""

    output_tokens: list[int]
    """the sequence the model sees, same length as the input"""
    positions: list[int]
    """chosen positions, sorted ascending"""
    labels: list[int]
    """the original ids at `positions`"""


def num_predictions(
    seq_len: int, masked_lm_prob: float = 0.15, max_predictions_per_seq: int = 20
) -> int:
    """How many positions the original release chooses in a sequence of `seq_len` tokens.

    `min(max_predictions_per_seq, max(1, int(round(seq_len * masked_lm_prob))))`, with
    `seq_len` counting [CLS] and [SEP]. Python's `round` rounds halves to *even*: length 10
    gives round(1.5) = 2, but length 30 gives round(4.5) = 4 (not 5). At least 1, at most 20
    (BERT's setting for length 128; 80 for length 512).
    """
    return min(max_predictions_per_seq, max(1, int(round(seq_len * masked_lm_prob))))


def create_masked_lm_predictions(
    tokens: Sequence[int],
    *,
    special_token_ids: Collection[int],
    vocab_size: int,
    mask_token_id: int,
    masked_lm_prob: float = 0.15,
    max_predictions_per_seq: int = 20,
    rng: random.Random,
    whole_word_mask: bool = False,
    is_subword: Callable[[int], bool] | None = None,
    vocab: Sequence[str] | None = None,
    mask_replace_prob: float = 0.8,
    random_replace_prob: float = 0.1,
    random_ids_exclude_special: bool = False,
    word_ids: Sequence[int | None] | None = None,
) -> MaskedLMPredictions:
    """Static MLM masking of one sequence: the rule of google-research/bert.

    1. Candidates: every position except special tokens ([CLS], [SEP]). With
       `whole_word_mask`, a "##" word piece joins the candidate before it, so a candidate is
       a whole word: "em ##bed ##ding" is chosen entirely or not at all. With `word_ids`, a
       candidate is a run of tokens with the same word id (Chinese words from a segmenter).
    2. The candidates are shuffled with `rng`.
    3. `n = num_predictions(len(tokens), masked_lm_prob, max_predictions_per_seq)`.
    4. Walk the shuffled candidates, taking each whole, until `n` positions are taken; a word
       that would overshoot `n` is skipped (so whole-word masking may take fewer than `n`,
       never more).
    5. For each taken position, in the order taken: `rng.random() < 0.8` -> [MASK]; otherwise
       `rng.random() < 0.5` -> keep the original; otherwise `rng.randint(0, vocab_size - 1)`,
       a random id from the whole vocabulary. These are the original's calls in the original's
       order, so with the same `random.Random` state the result corresponds token for token
       to the original's (its `vocab_words[randint(...)]` is our id).
    6. Positions are returned sorted, with their original ids as labels.

    Args:
        tokens: the ids of `[CLS] A [SEP] B [SEP]` (ints; torch/numpy integers are converted).
            The original works on token strings; the course works on ids (convert with
            `tokenizer.convert_tokens_to_ids` / `convert_ids_to_tokens`).
        special_token_ids: never chosen; the original excludes exactly [CLS] and [SEP]
            (`(CLS_ID, SEP_ID)` from `bertcourse.config`), add [PAD] if the sequence is padded.
        vocab_size: V, the range of random replacement ids.
        mask_token_id: the id of [MASK].
        masked_lm_prob, max_predictions_per_seq: see `num_predictions`.
        rng: a `random.Random` (required, so that data creation is reproducible).
        whole_word_mask: group "##" pieces with their word (needs `is_subword` or `vocab`).
        is_subword: `is_subword(id)` is True for a continuation piece ("##...").
        vocab: the vocabulary as a list of strings (index = id); `vocab[id].startswith("##")`
            is used when `is_subword` is not given.
        mask_replace_prob, random_replace_prob: the 80% / 10% shares; the second draw keeps
            the original with probability `(1 - mask - random) / (1 - mask)` (0.5 by default).
        random_ids_exclude_special: draw random ids from the non-special ids only (see
            `mask_tokens`); default False, as the original.
        word_ids: one word id per token, `None` for special tokens (`Encoding.word_ids()` of
            `tokenizers`, or ids from a segmenter's words): whole-word masking with these
            words instead of the "##" rule; `whole_word_mask` and `vocab` are then not needed.
            The budget and the per-token 80/10/10 draw are the original's, as for "##" words.

    Returns:
        `MaskedLMPredictions(output_tokens, positions, labels)`, lists of ints.
    """
    # --- checks
    if rng is None or not all(hasattr(rng, m) for m in ("shuffle", "random", "randint")):
        raise TypeError(f"rng must be a random.Random (e.g. random.Random(12345)), got {rng!r}")
    _check_vocab_size(vocab_size)
    _check_probability("masked_lm_prob", masked_lm_prob)
    _check_replace_probs(mask_replace_prob, random_replace_prob)
    if (
        isinstance(max_predictions_per_seq, bool)
        or not isinstance(max_predictions_per_seq, int)
        or max_predictions_per_seq < 0
    ):
        raise ValueError(
            "max_predictions_per_seq must be a non-negative integer, "
            f"got {max_predictions_per_seq!r}"
        )
    _check_id("mask_token_id", int(mask_token_id), vocab_size)
    specials = _special_set(special_token_ids, vocab_size)
    token_ids = [int(t) for t in tokens]
    for position, token_id in enumerate(token_ids):
        if not 0 <= token_id < vocab_size:
            raise ValueError(
                f"token id {token_id} at position {position} is out of range for vocab_size "
                f"{vocab_size} (valid ids: 0..{vocab_size - 1})"
            )
    if whole_word_mask and is_subword is None and word_ids is None:
        if vocab is None:
            raise ValueError(
                "whole_word_mask=True needs to know which ids are '##' word pieces: pass "
                "is_subword=<callable id -> bool> or vocab=<list of token strings>"
            )
        if len(vocab) != vocab_size:
            raise ValueError(f"vocab has {len(vocab)} entries but vocab_size is {vocab_size}")
        vocab_list = list(vocab)

        def is_subword(token_id: int) -> bool:
            return vocab_list[token_id].startswith("##")

    # P(keep | not [MASK]); rounded so that the defaults give exactly the original's 0.5
    keep_if_not_mask = (
        round((1.0 - mask_replace_prob - random_replace_prob) / (1.0 - mask_replace_prob), 12)
        if mask_replace_prob < 1
        else 0.0
    )
    allowed = _allowed_random_ids(vocab_size, specials) if random_ids_exclude_special else None

    # 1. candidates: lists of positions (one position each, or a whole word)
    if word_ids is not None:
        candidates = _words_from_ids(word_ids, specials, token_ids)
    else:
        candidates = _words_from_pieces(
            token_ids, specials, is_subword if whole_word_mask else None
        )

    # 2.-3. shuffle; how many to take
    rng.shuffle(candidates)
    n = num_predictions(len(token_ids), masked_lm_prob, max_predictions_per_seq)

    # 4.-5. take candidates until n positions are taken; decide what each one shows
    output_tokens = list(token_ids)
    taken: list[int] = []
    for word in candidates:
        if len(taken) >= n:
            break
        if len(taken) + len(word) > n:
            continue  # this word does not fit whole: try a shorter one
        for position in word:
            if rng.random() < mask_replace_prob:
                output_tokens[position] = mask_token_id  # 80%: [MASK]
            elif rng.random() < keep_if_not_mask:
                pass  # 10%: keep the original token
            elif allowed is None:
                output_tokens[position] = rng.randint(0, vocab_size - 1)  # 10%: random id
            else:
                output_tokens[position] = allowed[rng.randint(0, len(allowed) - 1)]
            taken.append(position)

    # 6. sorted positions and their original ids
    positions = sorted(taken)
    return MaskedLMPredictions(output_tokens, positions, [token_ids[p] for p in positions])


def labels_from_positions(
    positions: Sequence[int], labels: Sequence[int], length: int, ignore_index: int = IGNORE_INDEX
) -> Tensor:
    """Turn the original's (positions, labels) lists into a dense (L,) label row.

    `create_masked_lm_predictions` returns the chosen positions and their ids, as the
    original's TFRecords store them; transformers and `BertForPreTraining` want one label per
    position, `ignore_index` where nothing is predicted. Stack rows with `torch.stack`.

    Returns:
        (length,) int64: `labels[i]` at `positions[i]`, `ignore_index` elsewhere.
    """
    if len(positions) != len(labels):
        raise ValueError(
            f"positions ({len(positions)}) and labels ({len(labels)}) must have the same length"
        )
    for position in positions:
        if not 0 <= int(position) < length:
            raise ValueError(f"position {position} is outside a sequence of length {length}")
    if len(set(int(p) for p in positions)) != len(positions):
        raise ValueError(f"positions contain duplicates: {list(positions)}")
    row = torch.full((length,), ignore_index, dtype=torch.long)  # (L,)
    if len(positions) > 0:
        row[torch.as_tensor(list(positions), dtype=torch.long)] = torch.as_tensor(
            list(labels), dtype=torch.long
        )
    return row
