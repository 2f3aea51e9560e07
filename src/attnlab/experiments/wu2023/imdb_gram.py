"""wu2023-imdb-gram: is the data's Gram matrix non-singular (λ_min > 0), the paper's data
assumption, on the paper's own data, IMDB movie reviews (Maas et al. 2011)?

The same matrices, per-cell statistics, claims and rules as ``wu2023-data-gram`` (its docstring
states them; :class:`.data_gram.DataGram` computes them), on reviews embedded as tokens by the
``text`` data model (:mod:`attnlab.data.text`): X_n ∈ R^{d_s×d} the embeddings of review n's first
d_s in-vocabulary tokens. The judged claim is nonsingular-relu: the ReLU kernel of the mean tokens
non-singular in every cell, λ_min/λ_max above ``rounding_margin``·N·ε. Regime: ``protocol``, the
paper's data; the embedding is an assumption the paper leaves open (below).

IMDB cannot be downloaded here: give the unpacked ``aclImdb`` directory with
``--set data.imdb_dir=PATH/aclImdb``; without it a run stops before anything is written, with one
line saying where to get it (https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz).

Protocol. No training (as data-gram): a cell is a subset of N training reviews drawn with its own
key (classes alternating) from a pool drawn once, paired with a placeholder wu2023 model of width
1 that takes 0 steps. Grid: N (``data.N``) × token dimension d (``data.d``) × ``reps`` subsets, at
d_s = 64 tokens per review. The input Gram's rank bound d_s·d (4096 at d = 64) exceeds every N of
the grid, so unlike MNIST it is not singular by construction; a duplicated review (the training
split repeats some) or two reviews that share their first d_s in-vocabulary tokens make both
matrices singular, and the summary counts the cells that hold one.
"""

from __future__ import annotations

from attnlab.datasets.common import HOW_TO_GET
from attnlab.experiments.wu2023.audit.data_gram import gram_design
from attnlab.experiments.wu2023.data_gram import DataGram
from attnlab.parts import register

DATA = {"name": "text", "dataset": "imdb", "d_s": 64, "d": 64, "n_test": 2, "pool": 4096}
PAPER = dict(data={"N": [16, 32, 64, 128, 256, 512, 1024, 2048], "d": [16, 64, 256]}, reps=10)
CPU = dict(data={"N": [16, 32, 64, 128, 256, 512], "d": [16, 64]}, reps=5)
SMOKE = dict(data={"N": [8, 16], "d": [8, 16], "d_s": 16, "pool": 20}, reps=2)


class ImdbGram(DataGram):
    id = "wu2023-imdb-gram"
    regime = "protocol"  # the paper's own data (the embedding is an assumption, stated)
    stand_in = ""
    input_pooled = False  # another d is another embedding: G depends on it
    title = "Wu et al. 2023: the data assumption λ_min > 0 — the data Gram matrices of IMDB review embeddings"
    description = __doc__
    audit = gram_design(lambda c: (c["data.d_s"], c["data.d"]))
    scales = {"smoke": SMOKE, "cpu": CPU, "paper": PAPER}
    assumptions = (
        "The sheet does not name the Gram matrix of the paper's data assumption: two are measured, the flattened "
        "inputs' Φ Φᵀ and the ReLU (arc-cosine κ₁) kernel of the mean tokens, the limiting NTK under τ₀ = d_m^−1.",
        "IMDB (Maas et al. 2011), the paper's data, from a user-given aclImdb directory (data.imdb_dir); each cell "
        "is an independent subset of N reviews of a pool of 4096 training reviews (classes alternating), drawn "
        "with its key.",
        "The paper does not say which token embeddings it used. Assumed: each review is tokenised (<br /> removed, "
        "lower-cased, split on non-letters), its first d_s = 64 tokens found in imdb.vocab are kept (padded with "
        "zero tokens), and each vocabulary word is a fixed random vector with i.i.d. N(0, 1/d) entries (seeded, "
        "data.embed_seed); data.embedding=FILE uses a GloVe-format text file (word v1 … vd per line) instead.",
        "λ_min > 0 is judged as 'clearly above float64 rounding': λ_min/λ_max above rounding_margin (100)·N·ε; the "
        "margin is a choice, not the paper's.",
        "The wu2023 model of width 1 paired with the data takes 0 steps: it only lets the engine draw, store and "
        "resume the subsets; nothing is trained.",
    )

    def defaults(self):
        return super().defaults() | {"data": DATA}

    def missing(self, spec) -> str:
        """The loader's line when no aclImdb directory is given (``reproduce all`` skips the id)."""
        if spec.data.get("imdb_dir"):
            return ""
        return f"IMDB not found: no directory given (data.imdb_dir is empty); {HOW_TO_GET['imdb']}"

    def data_label(self, cols) -> str:
        emb = str(cols["data.embedding"][0]) if "data.embedding" in cols else ""
        return f"IMDB reviews, {'embedding ' + emb if emb else 'random N(0, 1/d) word embeddings'}"


IMDB_GRAM = ImdbGram()
register(IMDB_GRAM)
