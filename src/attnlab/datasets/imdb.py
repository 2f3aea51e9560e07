"""The IMDB movie-review set (Maas et al. 2011) from a user-given ``aclImdb`` directory, and the
token embeddings the ``text`` data model (:mod:`attnlab.data.text`) builds from it.

Layout (the unpacked ``aclImdb_v1.tar.gz``)::

    aclImdb/imdb.vocab                      one word per line, most frequent first
    aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt   one review per file (utf-8)

``train/unsup`` and the other files of the archive are not read. A review is only read when a
data model asks for it (:meth:`IMDB.texts`): listing the 50 000 files is cheap, reading them is not.
Labels: 1 for ``pos`` (ratings 7–10), 0 for ``neg`` (1–4); a split is ordered neg then pos, each
by review id.

Tokens (:func:`tokens`): ``<br />`` removed, lower-cased, split on every character that is not a
letter (Unicode letters; digits, apostrophes and punctuation separate words). Embeddings
(:func:`random_table`, :func:`read_table`): a fixed random N(0, 1/d) vector per vocabulary word, or
the vectors of a GloVe-format text file (``word v1 … vd`` per line).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnlab.datasets.common import HOW_TO_GET
from attnlab.errors import AttnlabError

SPLITS = ("train", "test")
CLASSES = ("neg", "pos")  # label 0, 1
_WORD = re.compile(r"[^\W\d_]+")  # a run of letters
_NAME = re.compile(r"(\d+)_(\d+)\.txt")


@dataclass(frozen=True)
class IMDB:
    """An ``aclImdb`` directory, listed: per split the review files (neg then pos, each by id),
    their labels (0 neg, 1 pos) and ratings (1–10), and the vocabulary of ``imdb.vocab``."""

    root: Path
    files: dict[str, tuple[Path, ...]]
    labels: dict[str, np.ndarray]
    ratings: dict[str, np.ndarray]
    vocab: tuple[str, ...]

    def texts(self, split: str, idx) -> list[str]:
        """The reviews ``idx`` of ``split``, read now (utf-8; a byte that is not is replaced)."""
        return [self.files[split][i].read_text(encoding="utf-8", errors="replace") for i in np.asarray(idx, int)]


def load_imdb(path: str | Path | None) -> IMDB:
    """The ``aclImdb`` directory at ``path`` (``data.imdb_dir``), listed; nothing is downloaded."""
    if not path:
        raise AttnlabError(f"IMDB not found: no directory given (data.imdb_dir is empty); {HOW_TO_GET['imdb']}")
    root = Path(path).expanduser()
    need = ["imdb.vocab", *(f"{s}/{c}" for s in SPLITS for c in CLASSES)]
    missing = [n for n in need if not (root / n).exists()]
    if missing:
        inside = f" (give {root / 'aclImdb'}, the directory inside it)" if (root / "aclImdb").is_dir() else ""
        raise AttnlabError(f"IMDB not found: {root} lacks {', '.join(missing)}{inside}; {HOW_TO_GET['imdb']}")
    files, labels, ratings = {}, {}, {}
    for split in SPLITS:
        rows = []
        for label, c in enumerate(CLASSES):
            for f in (root / split / c).iterdir():
                m = _NAME.fullmatch(f.name)
                if m is None:
                    if f.suffix == ".txt":
                        raise AttnlabError(f"{f}: an IMDB review file is named <id>_<rating>.txt")
                    continue
                rows.append((label, int(m[1]), int(m[2]), f))
        if not rows:
            raise AttnlabError(f"IMDB: {root / split} holds no review (<id>_<rating>.txt under pos/ and neg/)")
        rows.sort(key=lambda r: r[:2])
        labels[split] = np.array([r[0] for r in rows], np.int64)
        ratings[split] = np.array([r[2] for r in rows], np.int64)
        files[split] = tuple(r[3] for r in rows)
    vocab = tuple(w.strip() for w in (root / "imdb.vocab").read_text(encoding="utf-8").splitlines() if w.strip())
    if not vocab:
        raise AttnlabError(f"{root / 'imdb.vocab'}: empty (one word per line expected)")
    return IMDB(root, files, labels, ratings, vocab)


@functools.cache
def loaded(path: str) -> IMDB:
    """:func:`load_imdb`, once per process and path."""
    return load_imdb(path or None)


def tokens(text: str) -> list[str]:
    """A review's words: ``<br />`` removed, lower-cased, split on every non-letter."""
    return _WORD.findall(text.replace("<br />", " ").lower())


def random_table(vocab: tuple[str, ...], d: int, seed: int) -> np.ndarray:
    """(V, d) float64: word i of ``vocab`` gets row i of one N(0, 1/d) draw seeded by (seed, d), so
    a word's vector depends on its rank in the vocabulary, d and the seed only (cutting the
    vocabulary keeps the others')."""
    return np.random.default_rng([seed, d]).standard_normal((len(vocab), d)) / np.sqrt(d)


def read_table(path: str | Path, d: int, words: set[str] | None = None) -> dict[str, np.ndarray]:
    """The vectors of a GloVe-format text file (``word v1 … vd`` per line, utf-8), of the ``words``
    asked for (None: all): word -> (d,) float64. A line with another number of values than d is
    an error naming the file, the line and ``data.d``."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise AttnlabError(f"data.embedding: {path} is not a file (a GloVe-format text file: word v1 … vd per line)")
    out = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            parts = line.rstrip("\n").rstrip().split(" ")
            if len(parts) < 2:
                continue  # a blank line (or a word2vec-style header is caught below)
            if len(parts) - 1 != d:
                raise AttnlabError(
                    f"data.embedding: {path} line {n} has {len(parts) - 1} values after its word, but data.d = {d}"
                )
            if words is None or parts[0] in words:
                try:
                    out[parts[0]] = np.array(parts[1:], np.float64)
                except ValueError:
                    raise AttnlabError(f"data.embedding: {path} line {n}: not numbers after the word") from None
    if not out:
        raise AttnlabError(f"data.embedding: {path} holds no vector of a word of imdb.vocab")
    return out
