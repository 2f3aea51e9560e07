"""Probes: scalar summaries of a model's state, recorded during training.

Generic pieces act on attention weights and token roles; model-specific probe sets compose them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from attnlab.data import jiang2024 as jdata
from attnlab.models import jiang2024 as jmodel


def role_mass(a_bar, roles, role):
    """Total attention weight that ``a_bar`` (M,) puts on the tokens of ``role``."""
    return jnp.sum(jnp.where(roles == role, a_bar, 0.0))


def jiang2024(params, data, v, hp: jmodel.Hparams):
    """Probes of Jiang et al. 2024, Fig. 3 (sample 0 is a y = +1 training sample):

    attention  query-averaged attention ā of training sample 0 on its signal token, strong-noise
               token and (total) weak-noise tokens; ``*_mean``: the same averaged over all
               training samples
    V-scalars  μ₊ᵀ W_V w_O and ξ₂ᵀ W_V w_O (ξ₂ = sample 0's strong-noise token)
    QK logits  μ₊ᵀ W_Q W_Kᵀ μ₊, μ₊ᵀ W_Q W_Kᵀ ξ₂, ξ_iᵀ W_Q W_Kᵀ μ₊, ξ_iᵀ W_Q W_Kᵀ ξ₂ (ξ_i = sample 0's
               first weak-noise token)
    test loss  on the cell's test set
    """
    roles = jdata.token_roles(hp.M)
    X, mask = data["X"], data["mask"]
    a_bar = jax.vmap(lambda x: jmodel.apply(params, x, hp)[1]["a_bar"])(X)  # (n, M)
    n = jnp.sum(mask)

    def mean_over_train(a):
        return jnp.sum(jnp.where(mask, a, 0.0)) / n

    out = {}
    for name, role in (("signal", jdata.SIGNAL), ("strong", jdata.STRONG_NOISE), ("weak", jdata.WEAK_NOISE)):
        per_sample = jax.vmap(role_mass, in_axes=(0, None, None))(a_bar, roles, role)
        out[f"attn_{name}"] = per_sample[0]
        out[f"attn_{name}_mean"] = mean_over_train(per_sample)

    mu_p, xi_2, xi_i = X[0, 0], X[0, 1], X[0, 2]
    Wvw = params["W_V"] @ params["w_O"]
    out["V_signal"] = mu_p @ Wvw
    out["V_strong"] = xi_2 @ Wvw

    def qk(a, b):  # aᵀ W_Q W_Kᵀ b without forming the d×d product
        return (a @ params["W_Q"]) @ (b @ params["W_K"])

    out["qk_signal_signal"] = qk(mu_p, mu_p)
    out["qk_signal_strong"] = qk(mu_p, xi_2)
    out["qk_weak_signal"] = qk(xi_i, mu_p)
    out["qk_weak_strong"] = qk(xi_i, xi_2)
    f_test = jax.vmap(lambda x: jmodel.apply(params, x, hp)[0])(data["X_test"])
    out["test_loss"] = jmodel.logistic_loss(f_test, data["y_test"]).mean()
    return out
