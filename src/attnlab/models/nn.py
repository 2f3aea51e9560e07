"""Helpers the models (and the trainer and probes) share: a sample's kept tokens, the mean over a
masked set, and the softmax over the kept keys."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from attnlab.parts import tokens


def kept(x):
    """(X (L, d) with dropped tokens zeroed, keep (L,) bool) of a per-sample input (a token
    array, or a pytree with a token mask). Zeroing makes dropped tokens inert (even NaN padding)
    and gives them zero gradient."""
    X, mask = tokens(x)
    keep = jnp.ones(X.shape[0], bool) if mask is None else jnp.asarray(mask, bool)
    return jnp.where(keep[:, None], X, 0), keep


def masked_mean(v, keep=None):
    """(1/|S|) Σ_{i∈S} v_i over the leading axis, S = {i: keep_i} (every i without ``keep``);
    0 when S is empty."""
    if keep is None:
        return v.mean(axis=0)
    m = keep.reshape(-1, *[1] * (v.ndim - 1))
    return jnp.sum(jnp.where(m, v, 0), axis=0) / jnp.maximum(keep.sum(), 1)


def softmax_keys(S, keep):
    """Row softmax of S (..., L, L) over the kept keys (row = query); rows of dropped queries and
    rows with no kept key are 0."""
    logits = jnp.where(keep, S, -jnp.inf)
    top = jnp.max(logits, axis=-1, keepdims=True)
    top = jax.lax.stop_gradient(jnp.where(jnp.isfinite(top), top, 0))  # all-masked row: no −∞ − −∞
    e = jnp.where(keep, jnp.exp(logits - top), 0)
    z = e.sum(-1, keepdims=True)
    return jnp.where(keep[:, None], e / jnp.where(z > 0, z, 1), 0)
