"""Token sparsification through the token mask: each strategy removes exactly the tokens it
should, and a removed token no longer influences the ViT."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab.data import li2023 as ldata
from attnlab.data import sparsify
from attnlab.models import li2023 as lm

KW = dict(alpha_star=0.4, alpha_hash=0.1, tau=0.5, M=6, d=8, L=20, noise="gaussian")


@pytest.fixture(scope="module")
def sample():
    X, _ = ldata.dataset(jax.random.PRNGKey(0), 1, **KW)
    return jax.tree.map(lambda a: a[0], X)


def removed(x, new):
    return np.flatnonzero(np.asarray(x["mask"]) & ~np.asarray(new["mask"]))


@pytest.mark.parametrize("k", [0, 3, 8])
def test_irrelevant_first_removes_only_irrelevant_tokens(sample, k):
    new = sparsify.remove(sample, k, sparsify.priority(sample, "irrelevant", jax.random.PRNGKey(1)))
    gone = removed(sample, new)
    assert len(gone) == k and np.all(np.asarray(sample["role"])[gone] == ldata.IRRELEVANT)


def test_noisiest_removes_the_largest_noise_norms(sample):
    new = sparsify.remove(sample, 5, sparsify.priority(sample, "noisiest", jax.random.PRNGKey(1)))
    noise = np.asarray(sample["noise"])
    assert sorted(removed(sample, new)) == sorted(np.argsort(-noise)[:5])


def test_random_is_reproducible_per_key_and_differs_across_keys(sample):
    a = removed(sample, sparsify.remove(sample, 6, sparsify.priority(sample, "random", jax.random.PRNGKey(1))))
    b = removed(sample, sparsify.remove(sample, 6, sparsify.priority(sample, "random", jax.random.PRNGKey(1))))
    c = removed(sample, sparsify.remove(sample, 6, sparsify.priority(sample, "random", jax.random.PRNGKey(2))))
    assert list(a) == list(b) and len(a) == 6 and list(a) != list(c)


def test_attention_keeps_the_most_attended_tokens(sample):
    hp = lm.Hparams(L=20, d=8, m=8, init="gaussian")
    params = lm.init(jax.random.PRNGKey(3), hp)
    _, aux = lm.apply(params, sample, hp)
    new = sparsify.remove(sample, 7, sparsify.priority(sample, "attention", jax.random.PRNGKey(1), aux["attn"]))
    rec = np.asarray(sparsify.received(aux["attn"], sample["mask"]))
    assert sorted(removed(sample, new)) == sorted(np.argsort(rec)[:7])
    with pytest.raises(ValueError, match="attention weights"):
        sparsify.priority(sample, "attention", jax.random.PRNGKey(1))


def test_removal_composes_and_never_exceeds_the_kept_tokens(sample):
    once = sparsify.remove(sample, 4, sparsify.priority(sample, "random", jax.random.PRNGKey(1)))
    twice = sparsify.remove(once, 4, sparsify.priority(once, "random", jax.random.PRNGKey(2)))
    assert int(twice["mask"].sum()) == 12 and not np.any(np.asarray(twice["mask"]) & ~np.asarray(once["mask"]))
    everything = sparsify.remove(sample, 99, sparsify.priority(sample, "random", jax.random.PRNGKey(1)))
    assert int(everything["mask"].sum()) == 0


def test_a_removed_token_no_longer_influences_the_vit(sample):
    hp = lm.Hparams(L=20, d=8, m=8, init="gaussian")
    params = lm.init(jax.random.PRNGKey(3), hp)
    new = sparsify.remove(sample, 5, sparsify.priority(sample, "noisiest", jax.random.PRNGKey(1)))
    gone = removed(sample, new)
    f = lm.apply(params, new, hp)[0]
    changed = {**new, "tokens": new["tokens"].at[gone].set(50.0)}
    assert float(lm.apply(params, changed, hp)[0]) == pytest.approx(float(f), rel=1e-6)
    k = jnp.int32(5)  # k may be traced (one compiled evaluation for every k)
    traced = jax.jit(sparsify.remove)(sample, k, sparsify.priority(sample, "noisiest", jax.random.PRNGKey(1)))
    assert np.array_equal(traced["mask"], new["mask"])


def test_unknown_strategy(sample):
    with pytest.raises(ValueError, match="strategy"):
        sparsify.priority(sample, "smallest", jax.random.PRNGKey(0))
