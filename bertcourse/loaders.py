"""Batches for pretraining: NSP pairs (:mod:`bertcourse.nsp`) with fresh MLM masks
(:mod:`bertcourse.mlm`) through a ``DataLoader``, packed or padded, and fixed evaluation
batches. Everything random is seeded by ``(seed, epoch, example)``: the data of a run does not
depend on the number of processes, workers or restarts.

Shapes: B batch, L sequence length (padded per batch), P NSP pairs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from bertcourse.nsp import NspExample

if TYPE_CHECKING:  # pragma: no cover
    from bertcourse.textdata import TokenizedCorpus
    from bertcourse.vocab import Vocab


def mix_seed(*parts: int) -> int:
    """A 63-bit seed from integers (stable across runs and machines, unlike hash())."""
    h = hashlib.blake2b(repr(tuple(int(p) for p in parts)).encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") & ((1 << 63) - 1)


@dataclass(frozen=True)
class WordNspExample(NspExample):
    """An :class:`NspExample` that knows its words: ``word_ids`` has one id per token, -1 for
    ``[CLS]``/``[SEP]`` (:func:`bertcourse.mlm.mask_tokens`'s ``word_ids``)."""

    word_ids: tuple[int, ...] = ()


def _with_word_starts(documents, word_starts):
    """Each token id ``t`` as ``2 t + s`` (``s`` = 1 where a word starts), so that the pair
    builder, which only moves tokens around, carries the word boundaries with them."""
    return [
        [[2 * t + b for t, b in zip(sent, starts)] for sent, starts in zip(doc, doc_starts)]
        for doc, doc_starts in zip(documents, word_starts)
    ]


def _split_word_starts(ex: NspExample) -> WordNspExample:
    """The inverse of :func:`_with_word_starts` on a pair (special tokens: word id -1)."""
    ids, word_ids, word = [], [], -1
    specials = (0, ex.len_a + 1, len(ex.input_ids) - 1)  # [CLS] A [SEP] B [SEP]
    for position, code in enumerate(ex.input_ids):
        ids.append(code >> 1)
        if position in specials:
            word_ids.append(-1)
            continue
        previous_special = position - 1 in specials
        word += bool(code & 1) or previous_special  # a cut segment starts with a word
        word_ids.append(word)
    return WordNspExample(ids, ex.token_type_ids, ex.next_sentence_label, ex.len_a, ex.len_b,
                          tuple(word_ids))  # fmt: skip


class NspPairs(torch.utils.data.Dataset):
    """One epoch of ``[CLS] A [SEP] B [SEP]`` pairs cut from a corpus by :mod:`bertcourse.nsp`.

    The pairs of epoch ``e`` come from ``create_instances(documents, rng=Random(seed(e)))``:
    every epoch cuts the documents differently (the original's ``dupe_factor``, one per
    epoch) and draws new random B segments. Items are ``(index, NspExample)``; the index lets
    the collator seed each example's MLM mask. ``whole_word_mask``: the examples are
    :class:`WordNspExample` with the corpus's word boundaries (``corpus.word_starts``).
    """

    def __init__(
        self,
        corpus: TokenizedCorpus,
        *,
        epoch: int = 0,
        seed: int = 0,
        max_seq_length: int = 128,
        short_seq_prob: float = 0.1,
        dupe_factor: int = 1,
        task: str = "nsp",
        whole_word_mask: bool = False,
    ) -> None:
        import random

        from bertcourse.nsp import create_instances

        docs = [d for d in corpus.documents if d]
        cls_id, sep_id = corpus.vocab.cls_id, corpus.vocab.sep_id
        if whole_word_mask:
            if corpus.word_starts is None:
                raise ValueError("whole-word masking needs the corpus's word_starts")
            starts = [s for d, s in zip(corpus.documents, corpus.word_starts) if d]
            docs, cls_id, sep_id = _with_word_starts(docs, starts), 2 * cls_id + 1, 2 * sep_id + 1
        if len(docs) < 2:
            raise ValueError(
                f"NSP needs at least 2 non-empty documents, the corpus has {len(docs)}: "
                "add text (or check the held-out split)"
            )
        self.epoch, self.seed = epoch, seed
        self.examples = create_instances(
            docs,
            rng=random.Random(mix_seed(seed, epoch, 1)),
            max_seq_length=max_seq_length,
            short_seq_prob=short_seq_prob,
            dupe_factor=dupe_factor,
            task=task,
            shuffle=False,  # the sampler shuffles (and shards across DDP ranks)
            cls_id=cls_id,
            sep_id=sep_id,
        )
        if whole_word_mask:
            self.examples = [_split_word_starts(ex) for ex in self.examples]

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: int):
        return index, self.examples[index]


class MlmCollator:
    """Pads a list of ``(index, NspExample)`` and masks it with :func:`bertcourse.mlm.mask_tokens`.

    Each example's mask is drawn with its own generator seeded by ``(seed, epoch, index)``:
    masks are new every epoch (dynamic masking), yet a given example gets the same mask
    whichever batch, DataLoader worker or DDP rank it lands in - so a 2-process run and a
    1-process run with the same global batch see identical data, and resuming is exact.

    Returns a dict of long tensors for ``BertForPreTraining(**batch)``: ``input_ids``,
    ``token_type_ids``, ``attention_mask`` (B, L); ``labels`` (B, L) with -100 where not
    predicted; ``next_sentence_label`` (B,). L = the longest example of the batch.
    """

    def __init__(
        self,
        vocab: Vocab,
        *,
        seed: int = 0,
        epoch: int = 0,
        mlm_probability: float = 0.15,
        whole_word_mask: bool = False,
        mask_split=None,
    ) -> None:
        self.vocab, self.seed, self.epoch = vocab, seed, epoch
        self.mlm_probability = mlm_probability
        self.whole_word_mask = whole_word_mask
        self.mask_split = mask_split  # a bertcourse.mlm.MaskSplit; None: BERT's 80/10/10

    def mask(self, index: int, ex):
        """``(example with masked input_ids, labels (n,))``: the mask of example ``index``."""
        from dataclasses import replace

        from bertcourse.mlm import mask_tokens

        g = torch.Generator().manual_seed(mix_seed(self.seed, self.epoch, index, 2))
        word_ids = None
        if self.whole_word_mask:  # the words of a WordNspExample, chosen whole
            word_ids = torch.tensor([ex.word_ids], dtype=torch.long)
        ids, labels = mask_tokens(
            torch.tensor([ex.input_ids], dtype=torch.long),  # (1, n)
            vocab_size=self.vocab.size,
            mask_token_id=self.vocab.mask_id,
            special_token_ids=self.vocab.special_ids,
            mlm_probability=self.mlm_probability,
            generator=g,
            word_ids=word_ids,
            split=self.mask_split,
        )
        return replace(ex, input_ids=ids[0].tolist()), labels[0]

    def __call__(self, items) -> dict[str, torch.Tensor]:
        from bertcourse.config import IGNORE_INDEX
        from bertcourse.nsp import pad_batch

        masked, label_rows = zip(*(self.mask(index, ex) for index, ex in items))
        batch = pad_batch(masked, pad_id=self.vocab.pad_id)
        labels = torch.full_like(batch["input_ids"], IGNORE_INDEX)  # (B, L)
        for row, lab in enumerate(label_rows):
            labels[row, : len(lab)] = lab
        batch["labels"] = labels
        return batch


class PackedNspPairs(torch.utils.data.Dataset):
    """The pairs of :class:`NspPairs` packed into rows of at most ``max_seq_length`` tokens
    (:func:`bertcourse.packing.pack_lengths`, first-fit decreasing). Items are rows: lists of
    ``(index, NspExample)``, with the index of the unpacked dataset (so each pair keeps its
    MLM mask)."""

    def __init__(self, pairs: NspPairs, max_seq_length: int) -> None:
        from bertcourse.packing import pack_lengths

        self.pairs = pairs
        self.rows = pack_lengths([len(e.input_ids) for e in pairs.examples], max_seq_length)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int):
        return [self.pairs[i] for i in self.rows[index]]


class PackedMlmCollator(MlmCollator):
    """Masks every pair of a list of packed rows as :class:`MlmCollator` does (same masks),
    then lays them out with :func:`bertcourse.packing.pack_batch`: ``input_ids``,
    ``token_type_ids``, ``position_ids``, ``labels`` (B, L), ``attention_mask`` (B, L, L),
    ``cls_positions`` (P, 2), ``next_sentence_label`` (P,). L = the longest row."""

    def __call__(self, rows) -> dict[str, torch.Tensor]:
        from bertcourse.config import IGNORE_INDEX
        from bertcourse.packing import pack_batch

        examples, labels, layout = [], [], []
        for row in rows:
            layout.append(list(range(len(examples), len(examples) + len(row))))
            for index, ex in row:
                masked, lab = self.mask(index, ex)
                examples.append(masked)
                labels.append(lab)
        length = max(sum(len(examples[i].input_ids) for i in r) for r in layout)
        batch = pack_batch(examples, layout, pad_id=self.vocab.pad_id, length=length)
        out = torch.full_like(batch["input_ids"], IGNORE_INDEX)  # (B, L)
        for r, row in enumerate(layout):
            start = 0
            for i in row:
                out[r, start : start + len(labels[i])] = labels[i]
                start += len(labels[i])
        batch["labels"] = out
        return batch


def pretraining_dataloader(
    corpus: TokenizedCorpus,
    *,
    batch_size: int,
    epoch: int = 0,
    seed: int = 0,
    rank: int = 0,
    world_size: int = 1,
    skip_batches: int = 0,
    max_seq_length: int = 128,
    short_seq_prob: float = 0.1,
    mlm_probability: float = 0.15,
    task: str = "nsp",
    num_workers: int = 0,
    packing: bool = False,
    whole_word_mask: bool = False,
    mask_split=None,
    static_masking: int | None = None,
) -> torch.utils.data.DataLoader:
    """The training batches of one epoch for one process (``batch_size`` is per process).

    A ``DistributedSampler`` (also with one process) shuffles with ``(seed, epoch)`` and gives
    rank ``r`` the examples ``r, r + world_size, ...`` of the permutation, so batch ``k`` of
    all ranks together is exactly batch ``k`` of a single process with
    ``batch_size * world_size``. Incomplete last batches are dropped. ``skip_batches`` starts
    inside the epoch (for an exact resume) without building the skipped batches.

    ``packing=True``: the pairs are packed into rows (:class:`PackedNspPairs`) and
    ``batch_size`` counts rows; batches are for :func:`bertcourse.packing.packed_forward`.
    ``whole_word_mask=True`` chooses whole words (``corpus.word_starts``) to mask.
    ``mask_split``: a :class:`bertcourse.mlm.MaskSplit` (None: 80/10/10). ``task``: "nsp",
    "sop" or "none" (:mod:`bertcourse.nsp`). ``static_masking=N``: the original release's
    fixed data, cut and masked once in N copies (its ``dupe_factor``): epoch ``e`` reads copy
    ``e mod N``, the same pairs with the same masks (only their order is shuffled anew);
    None: dynamic, new pairs and masks every epoch.
    """
    from torch.utils.data import DataLoader, DistributedSampler

    data_epoch = epoch if static_masking is None else epoch % static_masking
    dataset = NspPairs(
        corpus,
        epoch=data_epoch,
        seed=seed,
        max_seq_length=max_seq_length,
        short_seq_prob=short_seq_prob,
        task=task,
        whole_word_mask=whole_word_mask,
    )
    masking = dict(seed=seed, epoch=data_epoch, mlm_probability=mlm_probability,
                   whole_word_mask=whole_word_mask, mask_split=mask_split)  # fmt: skip
    collate = MlmCollator(corpus.vocab, **masking)
    if packing:
        dataset = PackedNspPairs(dataset, max_seq_length)
        collate = PackedMlmCollator(corpus.vocab, **masking)
    sampler = DistributedSampler(
        dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed, drop_last=True
    )
    sampler.set_epoch(epoch)
    n_full = len(sampler) // batch_size * batch_size
    indices = list(sampler)[skip_batches * batch_size : n_full]
    return DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=indices,  # a list is a valid sampler: these indices, in this order
        collate_fn=collate,
        drop_last=True,
        num_workers=num_workers,
        persistent_workers=False,
    )


def eval_batches(
    corpus: TokenizedCorpus,
    *,
    batch_size: int = 64,
    seed: int = 0,
    max_seq_length: int = 128,
    dupe_factor: int = 2,
    max_examples: int | None = None,
    mlm_probability: float = 0.15,
    whole_word_mask: bool = False,
) -> list[dict[str, torch.Tensor]]:
    """Fixed evaluation batches from (held-out) documents: same pairs and masks every time.

    ``whole_word_mask=True`` asks the same pairs with whole words masked (``corpus.word_starts``)
    instead of single tokens: the questions a whole-word-masking run trained on."""
    dataset = NspPairs(corpus, epoch=-1, seed=seed, max_seq_length=max_seq_length,
                       dupe_factor=dupe_factor, whole_word_mask=whole_word_mask)  # fmt: skip
    n = len(dataset) if max_examples is None else min(max_examples, len(dataset))
    collate = MlmCollator(corpus.vocab, seed=seed, epoch=-1, mlm_probability=mlm_probability,
                          whole_word_mask=whole_word_mask)  # fmt: skip
    return [
        collate([dataset[i] for i in range(start, min(start + batch_size, n))])
        for start in range(0, n, batch_size)
    ]
