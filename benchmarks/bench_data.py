"""The data pipeline's costs: corpus extraction, tokenization, cache, batches.

    python benchmarks/bench_data.py

Prints the corpus size (documents, sentences, tokens with each tokenizer), the time to
extract the standard-library corpus, to tokenize it with bertcourse's fast tokenizer
(`tokenizers`, Rust) and with transformers' BertTokenizer (same ids), to load the cached
corpus, and the rate at which the DataLoader makes NSP + MLM batches (it must not slow
training down: compare with the step times of bench_model.py).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

from bertcourse import data  # noqa: E402


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batches", type=int, default=50)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)

    docs, t_extract = timed(data.stdlib_corpus)
    sentences = [s for d in docs for s in d.sentences]
    chars = sum(len(s) for s in sentences)
    print(
        f"corpus: {len(docs)} documents, {len(sentences):,} sentences, {chars:,} characters; "
        f"extracted in {t_extract:.1f} s"
    )

    fast = data.load_tokenizer("bert")  # the tokenizers (Rust) backend
    enc, t_fast = timed(fast.encode_batch, sentences, add_special_tokens=False)
    n_tokens = sum(len(e.ids) for e in enc)
    print(
        f"bert-base-uncased WordPiece: {n_tokens:,} tokens; bertcourse (tokenizers): "
        f"{t_fast:.2f} s ({n_tokens / t_fast:,.0f} tokens/s)"
    )
    slow = data.load_tokenizer("bert", backend="transformers")
    out, t_slow = timed(lambda: [slow(s, add_special_tokens=False)["input_ids"] for s in sentences])
    same = all(a.ids == b for a, b in zip(enc, out))
    print(
        f"transformers BertTokenizer, one call per sentence: {t_slow:.2f} s "
        f"({t_slow / t_fast:.1f}x slower); identical ids: {same}"
    )

    with tempfile.TemporaryDirectory() as tmp:
        (_, _), t_build = timed(data.load_corpus, "bert", cache_dir=tmp)
        (corpus, _), t_load = timed(data.load_corpus, "bert", cache_dir=tmp)
    print(
        f"load_corpus: first call (extract + tokenize + save) {t_build:.1f} s, cached {t_load:.2f} s"
    )
    train, held = corpus.split()
    print(
        f"split: train {train.num_tokens:,} tokens ({len(train)} docs), held-out "
        f"{held.num_tokens:,} tokens ({len(held)} docs)"
    )
    for kind in ("wordpiece-8192",):
        (c, _), t = timed(data.load_corpus, kind)
        print(f"{kind}: {c.num_tokens:,} tokens, vocabulary {c.vocab.size:,} ({t:.1f} s)")

    loader, t_pairs = timed(data.pretraining_dataloader, train, batch_size=32, max_seq_length=128)
    it = iter(loader)
    _, t_batches = timed(lambda: [next(it) for _ in range(min(args.batches, len(loader)))])
    n = min(args.batches, len(loader))
    print(
        f"DataLoader: NSP pairs of one epoch cut in {t_pairs:.2f} s ({len(loader)} batches of "
        f"32 x 128); masking + padding {1e3 * t_batches / n:.1f} ms per batch"
    )


if __name__ == "__main__":
    main()
