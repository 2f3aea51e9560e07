"""The IMDB loader (:mod:`attnlab.datasets.imdb`) on a generated ``aclImdb`` directory in the real
layout: listing, labels and ratings, the tokeniser, the embedding tables, and one clear error
naming the field and saying how to get the data when the directory is missing or wrong."""

import numpy as np
import pytest

from attnlab.datasets import imdb
from attnlab.errors import AttnlabError
from fixtures.imdb import WORDS, make_imdb


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return make_imdb(tmp_path_factory.mktemp("imdb"), per_class=5, test_per_class=3, seed=2)


def test_the_listing_holds_each_split_neg_then_pos_by_id(root):
    d = imdb.load_imdb(root)
    assert {s: len(f) for s, f in d.files.items()} == {"train": 10, "test": 6}
    assert d.labels["train"].tolist() == [0] * 5 + [1] * 5 and d.labels["train"].dtype == np.int64
    for split in ("train", "test"):
        ids = [int(f.name.split("_")[0]) for f in d.files[split]]
        half = len(ids) // 2
        assert ids[:half] == sorted(ids[:half]) and ids[half:] == sorted(ids[half:])
        assert all(
            f.parent.name == ("pos" if y else "neg") for f, y in zip(d.files[split], d.labels[split], strict=True)
        )
        r = d.ratings[split]
        assert np.all(np.where(d.labels[split] == 1, r >= 7, r <= 4))
    assert d.vocab == (*WORDS[:-2], "don't")  # train/unsup and README are not read
    text = d.texts("test", [0])[0]
    assert text == d.files["test"][0].read_text() and "<br />" in text


def test_tokens_drop_br_tags_lower_case_and_split_on_non_letters():
    assert imdb.tokens("Great MOVIE!<br /><br />It's 10/10, très-bien_ok") == [
        "great",
        "movie",
        "it",
        "s",
        "très",
        "bien",
        "ok",
    ]
    assert imdb.tokens("<br />") == [] and imdb.tokens("a<br />b") == ["a", "b"]


def test_the_random_table_is_seeded_n01_over_d_and_keeps_a_words_vector_when_the_vocabulary_is_cut():
    vocab = tuple(f"w{i}" for i in range(2000))
    t = imdb.random_table(vocab, 64, seed=3)
    assert t.shape == (2000, 64) and t.dtype == np.float64
    assert np.mean(np.sum(t**2, axis=1)) == pytest.approx(1.0, abs=0.02)  # N(0, 1/d): ‖e‖² ≈ 1
    np.testing.assert_array_equal(imdb.random_table(vocab[:10], 64, seed=3), t[:10])
    np.testing.assert_array_equal(imdb.random_table(vocab, 64, seed=3), t)
    assert not np.allclose(imdb.random_table(vocab, 64, seed=4), t)


def test_a_glove_file_is_read_for_the_words_asked_and_its_dimension_checked(tmp_path):
    f = tmp_path / "glove.txt"
    f.write_text("the 0.1 0.2 -0.3\nmovie 1 2 3\n\nzebra 4 5 6\n", encoding="utf-8")
    got = imdb.read_table(f, 3, {"the", "movie", "absent"})
    assert sorted(got) == ["movie", "the"] and got["the"].tolist() == [0.1, 0.2, -0.3]
    with pytest.raises(AttnlabError, match=r"line 1 has 3 values after its word, but data.d = 4"):
        imdb.read_table(f, 4)
    with pytest.raises(AttnlabError, match="data.embedding: .* is not a file"):
        imdb.read_table(tmp_path / "nope.txt", 3)
    with pytest.raises(AttnlabError, match="no vector of a word of imdb.vocab"):
        imdb.read_table(f, 3, {"absent"})
    f.write_text("the 0.1 x 0.3\n")
    with pytest.raises(AttnlabError, match="line 1: not numbers"):
        imdb.read_table(f, 3)


def test_a_missing_or_wrong_directory_says_which_field_and_how_to_get_the_data(tmp_path, root):
    for bad in (None, "", tmp_path):
        with pytest.raises(AttnlabError) as e:
            imdb.load_imdb(bad)
        msg = str(e.value)
        assert "\n" not in msg and "IMDB not found" in msg and "data.imdb_dir" in msg
        assert "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz" in msg and "unpack" in msg
    with pytest.raises(AttnlabError, match="lacks imdb.vocab, train/neg, train/pos, test/neg, test/pos; download"):
        imdb.load_imdb(tmp_path)
    with pytest.raises(AttnlabError, match=r"lacks imdb.vocab.* \(give .*aclImdb, the directory inside it\)"):
        imdb.load_imdb(root.parent)
    (root / "test" / "pos" / "review.txt").write_text("x")
    try:
        with pytest.raises(AttnlabError, match="named <id>_<rating>.txt"):
            imdb.load_imdb(root)
    finally:
        (root / "test" / "pos" / "review.txt").unlink()
