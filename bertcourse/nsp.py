"""Sentence pairs for next-sentence prediction, and ALBERT's sentence-order variant (chapter 5).

BERT's second pre-training task: given `[CLS] A [SEP] B [SEP]`, predict from the pooled [CLS]
vector whether B really follows A (label `IS_NEXT` = 0) or was drawn from another document
(`NOT_NEXT` = 1). This module builds those pairs the way the original release does
(`create_pretraining_data.py`, `create_instances_from_document`):

1. A document is a list of sentences, a sentence a list of token ids. Sentences are gathered
   into a chunk until the chunk reaches a target length: `max_seq_length - 3` (room for
   [CLS] and two [SEP]), or, with probability `short_seq_prob` (0.1), a random shorter target
   `randint(2, max_seq_length - 3)`, so the model also sees short inputs.
2. A random number `a_end` of the chunk's sentences become segment A.
3. B is random when the chunk has a single sentence or with probability 0.5: then B is read
   from a random other document (redrawn up to 10 times to avoid the current one) and the
   chunk's sentences not used by A are "put back" for the next chunk. Otherwise B is the rest
   of the chunk.
4. The pair is cut to `max_seq_length - 3` tokens by `truncate_seq_pair` (one token at a time
   from the longer segment, from its front or its back at random), and encoded with
   token type 0 for `[CLS] A [SEP]` and 1 for `B [SEP]`.

Because of the single-sentence rule, slightly more than half of the pairs are random.

Sentence-order prediction (ALBERT, `task="sop"`): A and B are always two consecutive pieces of
the same chunk; the negative (label 1) is the same pair swapped, by an independent coin with
probability 1/2 for each pair. No second document needed.

No sentence task (`task="none"`, RoBERTa's finding that NSP can go): consecutive pairs cut as
SOP cuts them, never swapped, every label 0 (no coin is drawn, so with the same seed the later
draws, and so the pairs, differ from SOP's); the training loop then leaves the sentence loss out.
The inputs keep BERT's `[CLS] A [SEP] B [SEP]` layout, so fine-tuning is the same for all three.

All randomness comes from a `random.Random`, so a seed gives the same pairs every time.
Masking (chapter 3) is a separate step: see `bertcourse.mlm`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from bertcourse.config import CLS_ID, IS_NEXT, NOT_NEXT, PAD_ID, SEP_ID

__all__ = [
    "NspExample",
    "make_pair",
    "truncate_seq_pair",
    "create_instances_from_document",
    "create_instances",
    "pad_batch",
    "TASKS",
    "MAX_RANDOM_DOCUMENT_TRIES",
]

TASKS = ("nsp", "sop", "none")
"""The sentence tasks: next-sentence prediction, sentence order, or no sentence task."""
MAX_RANDOM_DOCUMENT_TRIES = 10
"""The original redraws the random document up to 10 times to avoid the current one."""
NUM_SPECIAL_TOKENS = 3  # [CLS] A [SEP] B [SEP]
MIN_SEQ_LENGTH = 5  # 3 special tokens + at least one token in A and in B (and randint(2, 2))


@dataclass(frozen=True)
class NspExample:
    """One encoded sentence pair, before masking and padding.

    Attributes:
        input_ids: `[CLS] A [SEP] B [SEP]`, length `len_a + len_b + 3` (<= max_seq_length).
        token_type_ids: 0 for `[CLS] A [SEP]`, 1 for `B [SEP]`; same length.
        next_sentence_label: NSP: `IS_NEXT` (0, B follows A) or `NOT_NEXT` (1, B is random).
            SOP: 0 (A then B, in the document's order) or 1 (the two swapped).
        len_a, len_b: number of tokens of A and B (special tokens not counted).
    """

    input_ids: list[int]
    token_type_ids: list[int]
    next_sentence_label: int
    len_a: int
    len_b: int

    @property
    def is_random_next(self) -> bool:
        """True for a negative pair: B random (NSP) or the two segments swapped (SOP)."""
        return self.next_sentence_label == NOT_NEXT

    @property
    def tokens_a(self) -> list[int]:
        return self.input_ids[1 : 1 + self.len_a]

    @property
    def tokens_b(self) -> list[int]:
        return self.input_ids[2 + self.len_a : 2 + self.len_a + self.len_b]


# --- One pair ------------------------------------------------------------------------------
def truncate_seq_pair(
    tokens_a: list[int],
    tokens_b: list[int],
    max_num_tokens: int,
    rng: random.Random | None = None,
) -> None:
    """Cut two token lists IN PLACE until `len(a) + len(b) <= max_num_tokens` (the original's).

    Each round removes one token from the longer list (B when they are equal), from its
    front or its back with probability 1/2 each ("to add more randomness and avoid biases").
    With `rng=None` it always removes from the back (deterministic, like a tokenizer's
    "longest_first" truncation).
    """
    if max_num_tokens < 2:
        raise ValueError(f"max_num_tokens must be at least 2 (one token per segment), got {max_num_tokens}")  # fmt: skip
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng is not None and rng.random() < 0.5:
            del trunc_tokens[0]
        else:
            trunc_tokens.pop()


def _encode(a: list[int], b: list[int], label: int, cls_id: int, sep_id: int) -> NspExample:
    input_ids = [cls_id, *a, sep_id, *b, sep_id]
    token_type_ids = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    return NspExample(input_ids, token_type_ids, label, len(a), len(b))


def make_pair(
    a: Sequence[int],
    b: Sequence[int],
    cls_id: int = CLS_ID,
    sep_id: int = SEP_ID,
    max_len: int | None = None,
    *,
    label: int = IS_NEXT,
    rng: random.Random | None = None,
) -> NspExample:
    """Encode one pair as `[CLS] a [SEP] b [SEP]`, truncated to `max_len` tokens in all.

    The inputs are not modified. Truncation is `truncate_seq_pair` (from the back when
    `rng` is None, front or back at random otherwise). `label` is stored as given.
    """
    if len(a) == 0 or len(b) == 0:
        raise ValueError(f"both segments need at least one token, got len(a)={len(a)}, len(b)={len(b)}")  # fmt: skip
    if label not in (IS_NEXT, NOT_NEXT):
        raise ValueError(f"label must be IS_NEXT ({IS_NEXT}) or NOT_NEXT ({NOT_NEXT}), got {label!r}")  # fmt: skip
    a, b = list(a), list(b)
    if max_len is not None:
        _check_max_seq_length(max_len, "max_len")
        truncate_seq_pair(a, b, max_len - NUM_SPECIAL_TOKENS, rng)
    return _encode(a, b, label, cls_id, sep_id)


# --- Pairs from documents ------------------------------------------------------------------
def _check_max_seq_length(value: int, name: str = "max_seq_length") -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < MIN_SEQ_LENGTH:
        raise ValueError(
            f"{name} must be an integer >= {MIN_SEQ_LENGTH} ([CLS] A [SEP] B [SEP] with at "
            f"least one token in A and B), got {value!r}. BERT uses 128, then 512."
        )


def _check_document(documents: Sequence[Sequence[Sequence[int]]], index: int) -> None:
    document = documents[index]
    if len(document) == 0:
        raise ValueError(
            f"document {index} is empty: remove empty documents first "
            "(the original drops them: [d for d in documents if d])"
        )
    for j, sentence in enumerate(document):
        if len(sentence) == 0:
            raise ValueError(
                f"sentence {j} of document {index} is empty: drop empty sentences "
                "(the original skips lines that tokenize to nothing)"
            )


def _as_rng(rng: random.Random | int) -> random.Random:
    if isinstance(rng, random.Random):
        return rng
    if isinstance(rng, int) and not isinstance(rng, bool):
        return random.Random(rng)
    raise TypeError(f"rng must be a random.Random or an int seed, got {type(rng).__name__}")


def _random_other_document(n_documents: int, document_index: int, rng: random.Random) -> int:
    """A random document index, redrawn up to 10 times to avoid `document_index` (original).

    The original gives up after 10 draws and may then use the current document (probability
    (1/n)^10). bertcourse then draws among the other documents instead, so a random B never
    comes from A's document. The random stream is unchanged whenever a draw succeeds.
    """
    for _ in range(MAX_RANDOM_DOCUMENT_TRIES):
        random_index = rng.randint(0, n_documents - 1)
        if random_index != document_index:
            return random_index
    random_index = rng.randint(0, n_documents - 2)
    return random_index + (random_index >= document_index)


def create_instances_from_document(
    documents: Sequence[Sequence[Sequence[int]]],
    document_index: int,
    *,
    rng: random.Random | int,
    max_seq_length: int = 128,
    short_seq_prob: float = 0.1,
    task: str = "nsp",
    cls_id: int = CLS_ID,
    sep_id: int = SEP_ID,
) -> list[NspExample]:
    """All sentence pairs of one document, as the original `create_instances_from_document`.

    Args:
        documents: the corpus; `documents[i][j]` is sentence j of document i (token ids).
            NSP reads random segments B from the other documents.
        document_index: the document to cut into pairs.
        rng: a `random.Random` (or an int seed). The draws are the original's, in its order.
        max_seq_length: length of `[CLS] A [SEP] B [SEP]` after truncation (>= 5).
        short_seq_prob: probability of a shorter random target length for this document.
        task: "nsp" (random B from another document), "sop" (ALBERT: B is always the next
            piece; the negative swaps A and B) or "none" (the next piece, never swapped).

    Returns:
        A list of `NspExample`, each with `len(input_ids) <= max_seq_length`.
    """
    _check_max_seq_length(max_seq_length)
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    if not 0.0 <= short_seq_prob <= 1.0:
        raise ValueError(f"short_seq_prob must be a probability in [0, 1], got {short_seq_prob!r}")  # fmt: skip
    if not 0 <= document_index < len(documents):
        raise IndexError(f"document_index {document_index} is out of range for {len(documents)} documents")  # fmt: skip
    if task == "nsp" and len(documents) < 2:
        raise ValueError(
            "NSP needs at least 2 documents: a random segment B comes from a different "
            f"document; got {len(documents)}. Use task='sop' for a single document."
        )
    rng = _as_rng(rng)
    _check_document(documents, document_index)
    document = documents[document_index]

    max_num_tokens = max_seq_length - NUM_SPECIAL_TOKENS
    target_seq_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)

    instances: list[NspExample] = []
    current_chunk: list[Sequence[int]] = []
    current_length = 0
    i = 0
    while i < len(document):
        current_chunk.append(document[i])
        current_length += len(document[i])
        if i == len(document) - 1 or current_length >= target_seq_length:
            # a_end: how many of the chunk's sentences go into A
            a_end = 1
            if len(current_chunk) >= 2:
                a_end = rng.randint(1, len(current_chunk) - 1)
            tokens_a = [t for sentence in current_chunk[:a_end] for t in sentence]

            if task == "nsp":
                tokens_b: list[int] = []
                if len(current_chunk) == 1 or rng.random() < 0.5:
                    label = NOT_NEXT
                    target_b_length = target_seq_length - len(tokens_a)
                    random_index = _random_other_document(len(documents), document_index, rng)
                    random_document = documents[random_index]
                    if len(random_document) == 0:
                        _check_document(documents, random_index)  # raises, naming it
                    random_start = rng.randint(0, len(random_document) - 1)
                    for sentence in random_document[random_start:]:
                        tokens_b.extend(sentence)
                        if len(tokens_b) >= target_b_length:
                            break
                    if not tokens_b:
                        _check_document(documents, random_index)  # empty sentences
                    # the chunk's sentences after A were not used: put them back
                    i -= len(current_chunk) - a_end
                else:
                    label = IS_NEXT
                    tokens_b = [t for sentence in current_chunk[a_end:] for t in sentence]
                truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
                instances.append(_encode(tokens_a, tokens_b, label, cls_id, sep_id))
            else:
                swap = task == "sop"
                pair = _sop_pair(current_chunk, tokens_a, a_end, max_num_tokens, rng, swap=swap)
                if pair is not None:
                    instances.append(_encode(*pair, cls_id, sep_id))
            current_chunk = []
            current_length = 0
        i += 1
    return instances


def _sop_pair(
    chunk: list[Sequence[int]],
    tokens_a: list[int],
    a_end: int,
    max_num_tokens: int,
    rng: random.Random,
    *,
    swap: bool = True,
) -> tuple[list[int], list[int], int] | None:
    """ALBERT's sentence-order pair from one chunk: (first, second, label) or None
    (``swap=False``: the pair in order, label 0, no coin drawn: ``task="none"``).

    A chunk of one sentence cannot give two sentences; ALBERT then falls back to a random B
    from another document. bertcourse splits that sentence at a random token instead (and
    skips a one-token sentence), so every SOP pair is two consecutive pieces of one text.
    The pair is truncated first and swapped after, so a negative is exactly the swapped
    positive.
    """
    if len(chunk) >= 2:
        tokens_b = [t for sentence in chunk[a_end:] for t in sentence]
    else:
        sentence = list(chunk[0])
        if len(sentence) < 2:
            return None
        cut = rng.randint(1, len(sentence) - 1)
        tokens_a, tokens_b = sentence[:cut], sentence[cut:]
    truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
    if swap and rng.random() < 0.5:
        return tokens_b, tokens_a, NOT_NEXT  # swapped: the negative
    return tokens_a, tokens_b, IS_NEXT


def create_instances(
    documents: Sequence[Sequence[Sequence[int]]],
    *,
    rng: random.Random | int,
    max_seq_length: int = 128,
    short_seq_prob: float = 0.1,
    dupe_factor: int = 1,
    task: str = "nsp",
    shuffle: bool = True,
    cls_id: int = CLS_ID,
    sep_id: int = SEP_ID,
) -> list[NspExample]:
    """Pairs from every document, `dupe_factor` times over, then shuffled (the original's
    `create_training_instances`, without the masking and without shuffling the documents).

    Every document must hold at least one sentence and every sentence one token: empty ones
    raise an error naming them (the original silently drops them). The original used
    `dupe_factor=10`: each pass cuts the documents differently.
    """
    if len(documents) == 0:
        raise ValueError("documents is empty: give at least one document (two for NSP)")
    if not isinstance(dupe_factor, int) or dupe_factor < 1:
        raise ValueError(f"dupe_factor must be a positive integer, got {dupe_factor!r}")
    rng = _as_rng(rng)
    for index in range(len(documents)):
        _check_document(documents, index)
    instances: list[NspExample] = []
    for _ in range(dupe_factor):
        for index in range(len(documents)):
            instances.extend(
                create_instances_from_document(
                    documents,
                    index,
                    rng=rng,
                    max_seq_length=max_seq_length,
                    short_seq_prob=short_seq_prob,
                    task=task,
                    cls_id=cls_id,
                    sep_id=sep_id,
                )
            )
    if shuffle:
        rng.shuffle(instances)
    return instances


# --- Batching ------------------------------------------------------------------------------
def pad_batch(
    examples: Sequence[NspExample],
    *,
    pad_id: int = PAD_ID,
    max_length: int | None = None,
) -> dict[str, torch.Tensor]:
    """Stack examples into padded tensors, ready for `BertForPreTraining(**batch)`.

    Pads on the right to the longest example (or to `max_length`) with `pad_id` and token
    type 0.

    Returns:
        A dict of long tensors: "input_ids" (B, L), "token_type_ids" (B, L),
        "attention_mask" (B, L) with 1 for real tokens and 0 for padding, and
        "next_sentence_label" (B,).
    """
    if len(examples) == 0:
        raise ValueError("pad_batch needs at least one example")
    longest = max(len(e.input_ids) for e in examples)
    length = longest if max_length is None else max_length
    if longest > length:
        raise ValueError(
            f"an example has {longest} tokens, more than max_length={max_length}: "
            "build the pairs with max_seq_length <= max_length"
        )
    batch_size = len(examples)
    input_ids = torch.full((batch_size, length), pad_id, dtype=torch.long)  # (B, L)
    token_type_ids = torch.zeros((batch_size, length), dtype=torch.long)  # (B, L)
    attention_mask = torch.zeros((batch_size, length), dtype=torch.long)  # (B, L)
    for row, example in enumerate(examples):
        n = len(example.input_ids)
        input_ids[row, :n] = torch.tensor(example.input_ids, dtype=torch.long)
        token_type_ids[row, :n] = torch.tensor(example.token_type_ids, dtype=torch.long)
        attention_mask[row, :n] = 1
    labels = torch.tensor([e.next_sentence_label for e in examples], dtype=torch.long)  # (B,)
    return {
        "input_ids": input_ids,
        "token_type_ids": token_type_ids,
        "attention_mask": attention_mask,
        "next_sentence_label": labels,
    }
