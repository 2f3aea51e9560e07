"""The ``text`` data model: movie reviews (IMDB, Maas et al. 2011; :mod:`attnlab.datasets.imdb`) as
token embeddings, through the engine's shared-array data path.

A sample is X ∈ R^{d_s×d}: the embeddings of the review's first d_s in-vocabulary tokens. Which
embeddings the paper used (Wu et al. 2023 check their data assumption on IMDB) is not said, so
this is an *assumption* with parameters (defaults in brackets):

    tokens      ``<br />`` removed, lower-cased, split on every non-letter (:func:`.imdb.tokens`);
                a token is in the vocabulary when it is one of the first ``vocab`` words of
                ``imdb.vocab`` [0: all 89 527] (and, with an embedding file, has a vector there);
                the others are skipped
    d_s         the first d_s in-vocabulary tokens [64]; a shorter review is padded with zero
                tokens (so its mean token is shrunk by its share of real tokens)
    embedding   "" [default]: a fixed random vector per vocabulary word, i.i.d. N(0, 1/d) entries
                (‖e‖² ≈ 1), drawn once with ``embed_seed`` (:func:`.imdb.random_table`); or the path
                of a GloVe-format text file (``word v1 … vd`` per line), whose dimension must be d
    d           the token dimension [64]

Its pool is built once per bucket (and process: :func:`shared` is cached on the static fields):
labels +1 (``pos``) / −1 (``neg``); at most ``pool`` reviews of the training split (drawn once with
``pool_seed``, class-balanced when ``balanced``; 0: all 25 000), and ``n_test`` of the test split
(drawn the same way, the same for every cell); only those reviews are read. The pool holds token
ids (P, d_s) into a table of the words they use (row 0: the zero padding token), so a cell's X is
one gather. A cell's N training samples are the first N of an order of the pool drawn from the
cell's ``data`` stream (:func:`attnlab.data.images.order`: interleaved by class when ``balanced``),
so a padded cell trains on exactly the samples of the unpadded one.
"""

from __future__ import annotations

import functools
from typing import Literal

import jax.numpy as jnp
import numpy as np
from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from attnlab.data.image_ops import balanced_order
from attnlab.data.images import order
from attnlab.datasets import imdb
from attnlab.errors import AttnlabError
from attnlab.parts import DataModel, PartConfig, register, size
from attnlab.train import stream


class Spec(PartConfig):
    """Fields of the text data model (``data.*``)."""

    dataset: Literal["imdb"] = Field("imdb", description="which data set (IMDB movie reviews)")
    imdb_dir: str = Field("", description="aclImdb directory (needed: aclImdb_v1.tar.gz unpacked)")
    embedding: str = Field(
        "",
        description="GloVe-format text file (word v1 … vd per line) as the embedding table; empty: a fixed "
        "random N(0, 1/d) vector per vocabulary word (drawn with embed_seed)",
    )
    embed_seed: NonNegativeInt = Field(0, description="seed of the random embedding table")
    d: PositiveInt = Field(64, description="token dimension d (an embedding file's must equal it)")
    d_s: PositiveInt = Field(
        64, description="tokens per review: its first d_s in-vocabulary tokens, padded with zero tokens"
    )
    vocab: NonNegativeInt = Field(0, description="the first (most frequent) words of imdb.vocab kept (0: all)")
    balanced: bool = Field(True, description="the pool and a cell's order alternate the two classes")
    pool: NonNegativeInt = Field(0, description="training reviews in the pool, drawn once with pool_seed (0: all)")
    pool_seed: NonNegativeInt = Field(0, description="seed of the pool and the test reviews (same for every cell)")
    N: PositiveInt = size(100, description="training samples of a cell, drawn from the pool")
    n_test: PositiveInt = Field(100, description="test samples, from the test split (same for every cell)")

    @model_validator(mode="after")
    def _fits(self):
        if self.pool and self.N > self.pool:
            raise ValueError(f"data.N: {self.N} exceeds the pool of {self.pool} reviews (data.pool)")
        return self


def input_shape(s: dict) -> dict:
    return {"tokens": s["d_s"], "d": s["d"]}


def _draw(n: int, y: np.ndarray, rng: np.random.Generator, balanced: bool) -> np.ndarray:
    """Sorted indices of n of the ±1 labels y: class-balanced when ``balanced``, else uniform."""
    perm = balanced_order(rng, y) if balanced else rng.permutation(len(y))
    return np.sort(perm[:n])


@functools.lru_cache(maxsize=4)
def _tokenised(root: str, split: str, idx: tuple[int, ...]) -> tuple[tuple[str, ...], ...]:
    """The words of reviews ``idx`` of ``split`` (read from disk once per process)."""
    return tuple(tuple(imdb.tokens(t)) for t in imdb.loaded(root).texts(split, idx))


def _vectors(s: dict, vocab: tuple[str, ...]) -> dict[str, np.ndarray] | np.ndarray:
    """The embedding: (V, d) rows of the random table, or word -> vector of the file's words."""
    if not s["embedding"]:
        return imdb.random_table(vocab, s["d"], s["embed_seed"])
    return imdb.read_table(s["embedding"], s["d"], set(vocab))


@functools.lru_cache(maxsize=4)  # a bucket's chunks come one after another; a few pools stay
def _pool(key: tuple) -> dict[str, np.ndarray]:
    s = dict(key)
    data = imdb.loaded(s["imdb_dir"])
    where = f"IMDB at {s['imdb_dir']}"
    picked = {}
    for split, n, stream_ix in (("train", s["pool"], 0), ("test", s["n_test"], 1)):
        y = 2 * data.labels[split] - 1
        if n > len(y):
            field = "data.pool" if split == "train" else "data.n_test"
            raise AttnlabError(f"{field}: {n} exceeds the {len(y)} {split} reviews of {where}")
        idx = _draw(n or len(y), y, np.random.default_rng([s["pool_seed"], stream_ix]), s["balanced"])
        picked[split] = (idx, y[idx])
    vocab = data.vocab[: s["vocab"] or None]
    vectors = _vectors(s, vocab)
    if isinstance(vectors, dict):  # a file: the vocabulary words it has vectors for
        rows = {w: vectors[w] for w in vocab if w in vectors}
    else:
        rows = dict(zip(vocab, vectors, strict=True))
    index: dict[str, int] = {}  # word -> row of the pool's table (0: the zero padding token)
    out = {}
    for split, (idx, y) in picked.items():
        ids = np.zeros((len(idx), s["d_s"]), np.int32)
        for r, words in enumerate(_tokenised(s["imdb_dir"], split, tuple(int(i) for i in idx))):
            kept = [index.setdefault(w, len(index) + 1) for w in words if w in rows][: s["d_s"]]
            ids[r, : len(kept)] = kept
        name = "" if split == "train" else "_test"
        out |= {f"ids{name}": ids, f"y{name}": y.astype(np.float32)}
    table = np.zeros((len(index) + 1, s["d"]), np.float32)
    for w, i in index.items():
        table[i] = rows[w]
    out["table"] = table
    for a in out.values():
        a.setflags(write=False)
    return out


def shared(s: dict) -> dict[str, np.ndarray]:
    """The bucket's arrays, built once per process for its static fields: the training pool's token
    ids (P, d_s) int32 and labels y (P,) ±1, the test reviews' ids_test and y_test, and the table
    (U + 1, d) float32 of the U words they use (row 0 the zero padding token)."""
    return _pool(tuple((k, s[k]) for k in Spec.with_role("static")))


def make(key, v, s, pads, pool, dtype):
    """The cell's N training samples (padded to ``pads['N']``), each (d_s, d), and the shared test
    reviews."""
    n_pool, n_pad = pool["ids"].shape[0], pads["N"]
    if n_pad > n_pool:
        raise AttnlabError(f"data.N: {n_pad} exceeds the pool of {n_pool} training reviews of IMDB")
    table, y = jnp.asarray(pool["table"], dtype), jnp.asarray(pool["y"], dtype)
    idx = order(stream(key, "data"), y, s["balanced"])[:n_pad]
    X = jnp.take(table, jnp.take(jnp.asarray(pool["ids"]), idx, axis=0), axis=0)
    X_test = jnp.take(table, jnp.asarray(pool["ids_test"]), axis=0)
    return {
        "X": X,
        "y": jnp.take(y, idx),
        "mask": jnp.arange(n_pad) < v["N"],
        "X_test": X_test,
        "y_test": jnp.asarray(pool["y_test"], dtype),
    }


def _footprint(s, pads):
    n = pads["N"] + s["n_test"]
    return n, 4 * n * s["d_s"] * s["d"]


PART = register(
    DataModel(
        name="text",
        version=1,
        config=Spec,
        input_shape=input_shape,
        make=make,
        footprint=_footprint,
        shared=shared,
    )
)
