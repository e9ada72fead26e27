"""Every artifact a figure rests on is the same on every machine (issue 34).

A new learner starts with an empty cache. What the course builds at first use (tokenized
corpora, the Chinese character vocabulary) must come out byte for byte as on the machine that
measured the book's figures, and what cannot be built reproducibly (a WordPiece vocabulary:
``tokenizers``' trainer differs run to run) ships with the package instead.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bertcourse import assets, vocab
from bertcourse.languages import get_language

# What a first use builds: both languages' default corpora (and with them the Chinese
# character vocabulary). Run in a fresh process each: its own hash seed, its own Rust state.
BUILD = (
    "from bertcourse.data import load_corpus\n"
    "load_corpus('wordpiece-8192')\n"
    "load_corpus('chars', lang='zh')\n"
)


def _build_in_empty_cache(cache: Path) -> dict[str, bytes]:
    cache.mkdir()
    env = {**os.environ, "BERTCOURSE_CACHE": str(cache), "TOKENIZERS_PARALLELISM": "false"}
    env.pop("PYTHONHASHSEED", None)  # each process draws its own
    subprocess.run([sys.executable, "-c", BUILD], env=env, check=True, timeout=600)
    return {p.name: p.read_bytes() for p in sorted(cache.iterdir())}


@pytest.mark.slow
def test_two_builds_from_empty_caches_are_byte_identical(tmp_path):
    first = _build_in_empty_cache(tmp_path / "first")
    second = _build_in_empty_cache(tmp_path / "second")
    # the English corpus, the Chinese corpus and the character vocabulary; no trained vocabulary
    # (the shipped one is read from the package, never trained into the cache)
    kinds = sorted(name.rsplit("-", 1)[0] for name in first)
    assert kinds == ["corpus-chars", "corpus-wordpiece-8192", "vocab-zh-chars"], kinds
    assert first.keys() == second.keys()
    differ = [name for name in first if first[name] != second[name]]
    assert not differ, f"built differently from two empty caches: {differ}"


@pytest.mark.parametrize("code, size", vocab.SHIPPED_WORDPIECE)
def test_a_shipped_vocabulary_is_the_one_its_manifest_names(code, size):
    language = get_language(code)
    path = vocab.shipped_wordpiece_path(language, size)
    entry = json.loads(vocab.SHIPPED_MANIFEST.read_text(encoding="utf-8"))[path.name]
    # trained on the corpus that ships now (a new extraction must retrain it: bertcourse.vocab)
    assert entry["corpus_sha256"] == language.corpus_digest()
    assert entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    tok = vocab.load_tokenizer(f"wordpiece-{size}", lang=code)
    assert tok.get_vocab_size() == entry["size"] == size


def test_a_shipped_vocabulary_is_read_not_trained(tmp_path, monkeypatch):
    """Loading it from an empty cache writes nothing there and never calls the trainer."""

    def refuse(*args, **kwargs):
        raise AssertionError("the shipped vocabulary was trained again")

    monkeypatch.setattr(vocab, "train_wordpiece", refuse)
    from tokenizers import Tokenizer

    tok = vocab.load_tokenizer("wordpiece-8192", cache_dir=tmp_path)
    shipped = Tokenizer.from_file(str(assets.package_data("wordpiece-en-8192.json")))
    assert tok.get_vocab() == shipped.get_vocab() and len(tok.get_vocab()) == 8192
    assert list(tmp_path.iterdir()) == []


def test_a_shipped_vocabulary_refuses_another_corpus():
    """After the corpus changes, the shipped pieces no longer describe it: a clear error."""
    changed = dataclasses.replace(get_language("en"), corpus_digest=lambda: "0" * 64)
    with pytest.raises(RuntimeError, match="python -m bertcourse.vocab"):
        vocab.fast_tokenizer("wordpiece-8192", lang=changed)


def test_the_cache_key_is_the_bytes_of_text_files(tmp_path):
    """Your own text files key the corpus cache by content: the same text in another folder
    (another clone) is found again; a changed byte builds anew."""
    from bertcourse.textdata import _text_files_digest

    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "one.txt").write_text("First sentence here. Then a second one.\n")
    a, b = _text_files_digest([tmp_path / "a"]), _text_files_digest([tmp_path / "b"])
    assert a == b
    (tmp_path / "b" / "one.txt").write_text("First sentence here. Then a second one!\n")
    assert _text_files_digest([tmp_path / "b"]) != a
