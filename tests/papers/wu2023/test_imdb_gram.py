"""wu2023-imdb-gram: the data-gram check on IMDB, the paper's data. The ``text`` data model on a
generated aclImdb directory (its samples are the stated embedding of each review's first d_s
in-vocabulary tokens), a smoke run end to end, and a run without the directory, which stops
before anything is written with one line saying how to get the data."""

import json

import jax
import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from attnlab.cli import app
from attnlab.data import text
from attnlab.datasets import imdb
from attnlab.errors import AttnlabError
from attnlab.experiments import get
from attnlab.experiments.pipeline import reproduce
from fixtures.imdb import make_imdb

EXP = get("wu2023-imdb-gram")
URL = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return make_imdb(tmp_path_factory.mktemp("imdb"), per_class=12, test_per_class=4, seed=5)


def static(root, **kw) -> dict:
    fields = text.Spec(imdb_dir=str(root), **({"N": 2} | kw)).model_dump()
    return {k: fields[k] for k in text.Spec.with_role("static")}


def expected(root, s: dict, review: int, split: str = "train") -> np.ndarray:
    """X of one review by hand: its first d_s words of the vocabulary, each its random vector."""
    data = imdb.load_imdb(root)
    vocab = data.vocab[: s["vocab"] or None]
    table = imdb.random_table(vocab, s["d"], s["embed_seed"]).astype(np.float32)
    words = [w for w in imdb.tokens(data.texts(split, [review])[0]) if w in vocab][: s["d_s"]]
    X = np.zeros((s["d_s"], s["d"]), np.float32)
    X[: len(words)] = table[[vocab.index(w) for w in words]]
    return X


def test_the_pool_holds_each_reviews_first_in_vocabulary_tokens_as_its_word_vectors(root):
    s = static(root, d=8, d_s=12, pool=10, n_test=4)
    pool = text.shared(s)
    data = imdb.load_imdb(root)
    idx = text._draw(10, 2 * data.labels["train"] - 1, np.random.default_rng([0, 0]), True)
    assert pool["ids"].shape == (10, 12) and pool["y"].tolist() == (2 * data.labels["train"][idx] - 1).tolist()
    assert sorted(pool["y"].tolist()) == [-1] * 5 + [1] * 5  # class-balanced
    assert not pool["table"][0].any()  # the padding token
    for r, i in enumerate(idx):
        np.testing.assert_array_equal(pool["table"][pool["ids"][r]], expected(root, s, i))
    # a short prefix: the review's in-vocabulary words, then zero tokens (the last two words of WORDS are not
    # in imdb.vocab, and neither are the digits)
    long = static(root, d=8, d_s=60, pool=10, n_test=4)
    X = text.shared(long)["table"][text.shared(long)["ids"][0]]
    np.testing.assert_array_equal(X, expected(root, long, idx[0]))
    assert not X[-1].any() and X[0].any()


def test_a_cells_samples_are_a_prefix_of_its_order_of_the_pool(root):
    s = static(root, d=4, d_s=6, pool=20, n_test=2)
    pool = text.shared(s)
    key = jax.random.PRNGKey(3)
    small = text.make(key, {"N": 8}, s, {"N": 8}, pool, np.float32)
    padded = text.make(key, {"N": 8}, s, {"N": 12}, pool, np.float32)
    np.testing.assert_array_equal(padded["X"][:8], small["X"])
    assert small["X"].shape == (8, 6, 4) and padded["mask"].tolist() == [True] * 8 + [False] * 4
    assert small["y"].tolist()[:4] in ([1, -1, 1, -1], [-1, 1, -1, 1])  # classes alternate
    rows = {pool["table"][ids].tobytes() for ids in pool["ids"]}
    assert all(np.asarray(x).tobytes() in rows for x in small["X"])  # every sample a review of the pool
    np.testing.assert_array_equal(small["X_test"], padded["X_test"])
    with pytest.raises(AttnlabError, match="data.N: 24 exceeds the pool of 20"):
        text.make(key, {"N": 24}, s, {"N": 24}, pool, np.float32)


def test_a_glove_file_replaces_the_random_table(root, tmp_path):
    vocab = imdb.load_imdb(root).vocab
    rng = np.random.default_rng(0)
    vec = {w: rng.standard_normal(3).round(4) for w in vocab[:6]}  # vectors for six words only
    f = tmp_path / "glove.txt"
    f.write_text("".join(f"{w} {' '.join(map(str, v))}\n" for w, v in vec.items()))
    s = static(root, d=3, d_s=5, pool=6, n_test=2, embedding=str(f))
    pool = text.shared(s)
    table = {tuple(r) for r in pool["table"][1:].tolist()}
    assert table == {tuple(np.float32(v).tolist()) for v in vec.values()} & table and len(table) <= 6
    with pytest.raises(AttnlabError, match="data.d = 4"):
        text.shared(static(root, d=4, d_s=5, pool=6, n_test=2, embedding=str(f)))


def test_bad_sizes_name_their_field(root):
    with pytest.raises(AttnlabError, match="data.N: 24 exceeds the pool of 20"):
        EXP.cells(EXP.spec("smoke", ["data.N=24"]))  # the values are validated per cell
    with pytest.raises(AttnlabError, match="data.pool: 30 exceeds the 24 train reviews"):
        text.shared(static(root, pool=30, N=8))
    with pytest.raises(AttnlabError, match="data.n_test: 9 exceeds the 8 test reviews"):
        text.shared(static(root, pool=10, N=8, n_test=9))


def test_smoke_run_on_the_fixture_end_to_end(root, tmp_path):
    out = tmp_path / "run"
    sets = [f"data.imdb_dir={root}"]
    v = reproduce(EXP, "smoke", out, sets, progress=False)
    claims = {c["id"]: c for c in v["claims"]}
    assert set(claims) == {f"{c}-{k}" for c in ("nonsingular", "floor", "trend") for k in ("input", "relu")}
    judged = claims["nonsingular-relu"]
    assert judged["kind"] == "prediction" and judged["rule_version"] == 1 and not judged["post_hoc"]
    assert judged["regime"] == "protocol" and judged["outcome"] == "pass"  # distinct random reviews: non-singular
    assert all(
        c["kind"] == "measurement" and c["outcome"] == "descriptive"
        for i, c in claims.items()
        if i != "nonsingular-relu"
    )
    t = pq.read_table(out / "results.parquet").to_pydict()
    assert len(t["id"]) == v["cells"] == 2 * 2 * 2 and sorted(set(t["d"])) == [8, 16] and set(t["d_s"]) == {16}
    assert set(t["data.name"]) == {"text"} and all(r == n for r, n in zip(t["relu_rank"], t["data.N"], strict=True))
    assert list(out.glob("data_gram.png")) and json.loads((out / "verdict.json").read_text())["scale"] == "smoke"
    again = reproduce(EXP, "smoke", out, sets, progress=False)  # resumes: nothing drawn again
    assert again["cells_trained_now"] == 0


def test_without_the_directory_a_run_stops_before_writing_with_one_line_saying_how_to_get_it(tmp_path):
    runner = CliRunner()
    out = tmp_path / "res"
    r = runner.invoke(app, ["reproduce", "wu2023-imdb-gram", "--scale", "smoke", "--out", str(out)])
    assert r.exit_code == 2 and r.output.startswith("error: IMDB not found") and "Traceback" not in r.output
    flat = " ".join(r.output.split())
    assert "data.imdb_dir" in flat and URL in flat and "unpack" in flat and not out.exists()
    r = runner.invoke(app, ["reproduce", "wu2023-imdb-gram", "--out", str(out), "--set", f"data.imdb_dir={tmp_path}"])
    assert r.exit_code == 2 and "lacks imdb.vocab" in " ".join(r.output.split()) and not out.exists()
    assert EXP.missing(EXP.spec("cpu")).startswith("IMDB not found") and not EXP.missing(
        EXP.spec("cpu", ["data.imdb_dir=x"])
    )
    r = runner.invoke(app, ["list"])
    assert r.exit_code == 0 and "wu2023-imdb-gram" in r.output
    r = runner.invoke(app, ["fields", "wu2023-imdb-gram"])
    assert r.exit_code == 0 and "wu2023-imdb-gram (cpu, protocol)" in r.output
    r = runner.invoke(app, ["fields", "data.text"])
    assert r.exit_code == 0 and "data.text: 12 fields" in r.output
