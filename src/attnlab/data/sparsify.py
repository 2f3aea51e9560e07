"""Token sparsification (Li et al. 2023, Fig. 4): remove k tokens of a sample by shrinking its
token mask S, so every model's softmax and pooling run over the kept tokens only.

Each strategy gives every kept token a removal priority; the k kept tokens of highest priority
are removed (ties broken by a uniform draw, so the removed set is reproducible per key):

    irrelevant   label-irrelevant tokens first (then at random once none is left)   (oracle)
    noisiest     the largest noise norm ‖z_l‖ first                                   (oracle)
    random       uniformly at random                                                  (baseline)
    attention    the tokens that receive the least attention, Σ_{l∈S} φ[l, s], first: keeps the
                 top (|S| − k) tokens by received attention (practical: needs no metadata)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from attnlab.data import li2023 as ldata

STRATEGIES = ("irrelevant", "noisiest", "random", "attention")


def received(attn, keep):
    """Attention each token receives from the kept queries: Σ_{l∈S} φ[l, s]."""
    return jnp.sum(jnp.where(keep[:, None], attn, 0.0), axis=0)


def priority(x, strategy: str, key, attn=None):
    """Removal priority of each token of one sample (higher = removed first)."""
    u = jax.random.uniform(key, x["mask"].shape)
    if strategy == "irrelevant":
        return 2.0 * (x["role"] == ldata.IRRELEVANT) + u
    if strategy == "noisiest":
        return x["noise"] + 1e-6 * u
    if strategy == "random":
        return u
    if strategy == "attention":
        if attn is None:
            raise ValueError("strategy 'attention' needs the sample's attention weights")
        return -received(attn, x["mask"]) + 1e-6 * u
    raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")


def remove(x, k, prio):
    """x with the k kept tokens of highest priority removed from its mask (k may be traced;
    at most all kept tokens are removed)."""
    keep = x["mask"]
    order = jnp.argsort(-jnp.where(keep, prio, -jnp.inf))  # kept tokens first, highest priority first
    rank = jnp.empty_like(order).at[order].set(jnp.arange(order.shape[0]))
    return {**x, "mask": keep & (rank >= k)}
