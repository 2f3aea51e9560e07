"""Probes of Li et al. 2023 (the probe set ``li2023``), from the training forward pass's aux.

With φ_i ∈ R^{L×L} the attention of training sample i (row = query l, over the kept keys S) and
R_i, C_i, I_i its label-relevant, confusion and irrelevant kept tokens:

    attn_relevant   = mean_i mean_{l ∈ R_i} Σ_{s ∈ R_i} φ_i[l, s]   (the paper's Fig. 3 quantity)
    attn_confusion  = the same with keys s ∈ C_i;  attn_irrelevant: keys s ∈ I_i
    attn_entropy    = mean_i mean_{l ∈ S_i} −Σ_s φ_i[l, s] log φ_i[l, s]
    test_loss       on the cell's test set

Models without attention (the baseline, the linear classifier) record only the test loss.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from attnlab.data import li2023 as ldata
from attnlab.models.nn import masked_mean
from attnlab.parts import ProbeSet, register


def _mass(attn, role, keep, query_role, key_role):
    """mean over kept queries of role ``query_role`` of the attention on kept keys of ``key_role``."""
    q = keep & (role == query_role)
    k = keep & (role == key_role)
    per_query = jnp.sum(jnp.where(k[None, :], attn, 0.0), axis=1)
    return masked_mean(per_query, q)


def _entropy(attn, keep):
    h = -jnp.sum(jnp.where(attn > 0, attn * jnp.log(jnp.where(attn > 0, attn, 1.0)), 0.0), axis=1)
    return masked_mean(h, keep)


def build(ctx):
    def probes(params, data, v, aux):
        out = {}
        if "attn" in aux:
            X, n_mask = data["X"], data["mask"]
            role, keep = X["role"], aux["mask"]
            for name, key_role in (
                ("relevant", ldata.RELEVANT),
                ("confusion", ldata.CONFUSION),
                ("irrelevant", ldata.IRRELEVANT),
            ):
                per = jax.vmap(_mass, in_axes=(0, 0, 0, None, None))(aux["attn"], role, keep, ldata.RELEVANT, key_role)
                out[f"attn_{name}"] = masked_mean(per, n_mask)
            out["attn_entropy"] = masked_mean(jax.vmap(_entropy)(aux["attn"], keep), n_mask)
        f_test, _ = jax.vmap(lambda x: ctx.apply(params, x))(data["X_test"])
        out["test_loss"] = ctx.loss.fn(f_test, data["y_test"]).mean()
        return out

    return probes, None


PROBES = register(ProbeSet("li2023", build))
