"""Probes of Jiang et al. 2024, Fig. 3 (the probe set ``jiang2024``).

Sample 0 is a y = +1 training sample. With ā_i the query-averaged attention of training sample
i (from the training forward pass's ``aux``, never recomputed):

attention  ā_0 on its signal token, strong-noise token and (total) weak-noise tokens;
           ``*_mean``: the same averaged over the N training samples; ``attn_weak_max_mean``:
           the mean over samples of the largest weight on any single weak-noise token (the best
           competitor of a dominant token)
V-scalars  μ₊ᵀ W_V w_O and ξ̃ᵀ W_V w_O (ξ̃ = sample 0's strong-noise token)
QK logits  aᵀ W_Q W_Kᵀ b for query a and key b among μ₊, ξ̃ and ξ_i (sample 0's first weak-noise
           token): μ₊→μ₊, μ₊→ξ̃, ξ̃→ξ̃, ξ̃→μ₊, ξ_i→μ₊, ξ_i→ξ̃
test loss  on the cell's test set

Array-valued (on the array schedule, ``train.array_log_every``): ``attn_matrix``, the attention
φ ∈ R^{M×M} (row = query) averaged over the training samples.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from attnlab.data import jiang2024 as jdata
from attnlab.models.nn import masked_mean
from attnlab.parts import ProbeSet, register
from attnlab.probes import role_mass


def build(ctx):
    roles = jdata.token_roles(ctx.hp.M)

    def probes(params, data, v, aux):
        X, mask = data["X"], data["mask"]
        a_bar = aux["a_bar"]  # (n, M), at θ_t
        out = {}
        for name, role in (("signal", jdata.SIGNAL), ("strong", jdata.STRONG_NOISE), ("weak", jdata.WEAK_NOISE)):
            per_sample = jax.vmap(role_mass, in_axes=(0, None, None))(a_bar, roles, role)
            out[f"attn_{name}"] = per_sample[0]
            out[f"attn_{name}_mean"] = masked_mean(per_sample, mask)
        weak_max = jnp.max(jnp.where(roles == jdata.WEAK_NOISE, a_bar, -jnp.inf), axis=1)
        out["attn_weak_max_mean"] = masked_mean(weak_max, mask)

        mu_p, xi_s, xi_i = X[0, 0], X[0, 1], X[0, 2]
        Wvw = params["W_V"] @ params["w_O"]
        out["V_signal"] = mu_p @ Wvw
        out["V_strong"] = xi_s @ Wvw

        def qk(a, b):  # aᵀ W_Q W_Kᵀ b without forming the d×d product
            return (a @ params["W_Q"]) @ (b @ params["W_K"])

        for name, (a, b) in {
            "signal_signal": (mu_p, mu_p),
            "signal_strong": (mu_p, xi_s),
            "strong_strong": (xi_s, xi_s),
            "strong_signal": (xi_s, mu_p),
            "weak_signal": (xi_i, mu_p),
            "weak_strong": (xi_i, xi_s),
        }.items():
            out[f"qk_{name}"] = qk(a, b)
        f_test, _ = jax.vmap(lambda x: ctx.apply(params, x))(data["X_test"])
        out["test_loss"] = ctx.loss.fn(f_test, data["y_test"]).mean()
        return out

    def arrays(params, data, v, aux):
        return {"attn_matrix": masked_mean(aux["phi"], data["mask"])}

    return probes, arrays


PROBES = register(ProbeSet("jiang2024", build))
