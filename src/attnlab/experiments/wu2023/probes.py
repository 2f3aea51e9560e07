"""Probes of Wu et al. 2023 (the probe set ``wu2023``): the training dynamics of θ_t in the
kernel regime, scalar values on the log schedule (``train.log_every``, ``train.log_dense_until``).

With the cell's N real training samples x_1 … x_N (``data["mask"]``; padded slots excluded) and
θ₀ its initial parameters, recomputed exactly as the trainer drew them
(``model.init(stream(key, "init"), hp, dtype)``, so nothing has to be carried along):

    K_t            = J_t J_tᵀ ∈ R^{N×N},  J_t = ∂f(θ_t; x_i)/∂θ   (:func:`attnlab.ntk.empirical_ntk`)
    lambda_min     λ_min(K_t),  lambda_max  λ_max(K_t)   (of the real samples' block)
    lambda_min_w_O λ_min(K_t^{w_O}), the output weights' block J_{w_O} J_{w_O}ᵀ: the part the
                   theory's λ_min(K₀) ∝ d_m is about (rank ≤ d_m, so exactly 0 below d_m = N);
                   for the ViT (``vit``) its output head w_head, the same role at width D
    kernel_drift   ‖K_t − K_0‖_F / ‖K_0‖_F
    kernel_drift_op ‖K_t − K_0‖_op (absolute): the proofs' laziness criterion is ≤ λ_min(K_0)/2
    ntk_share_<b>  tr K_t^b / tr K_t, the share of parameter block b (W_Q, W_K, W_V, w_O; every
                   parameter of the ViT)
    weight_drift   ‖θ_t − θ₀‖ / ‖θ₀‖ over all blocks together;  weight_drift_<b>: per block
    logit_std      mean over samples of the std of the softmax logits S = τ₀ (XW_Qᵀ)(XW_Kᵀ)ᵀ
    attn_tv        mean over samples of the total-variation distance of an attention row from
                   uniform, ½ Σ_s |φ_ts − 1/d_s|  (0: uniform attention);  attn_entropy likewise

K is taken on the Jacobian path (N ≤ 100 here: N·P numbers, 40 MB at d_m = 1024 in float64) and
K_0 is recomputed at every log step (twice the kernel cost, no state in the trainer). The
attention statistics come from the training forward pass's ``aux`` at θ_t (never recomputed); a
model whose ``aux`` has ``logit_std``, ``attn_tv`` and ``attn_entropy`` (wu2023, vit) can use it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from attnlab import ntk
from attnlab.models.nn import masked_mean
from attnlab.parts import ProbeSet, register
from attnlab.train import stream

OUTPUT = {"wu2023": "w_O", "vit": "w_head"}  # the output weights' block, per model


def theta0(ctx, v, like):
    """θ₀ of the cell (the trainer's own draw), restricted to the blocks of ``like``."""
    p0 = ctx.model.init(stream(v["key"], "init"), ctx.hp, jax.tree.leaves(like)[0].dtype)
    return {k: p0[k] for k in like}


def total_drift(theta_t, theta_0):
    """‖θ_t − θ₀‖ / ‖θ₀‖ with every block in one vector."""
    num = sum(jnp.sum((theta_t[k] - theta_0[k]) ** 2) for k in theta_0)
    den = sum(jnp.sum(theta_0[k] ** 2) for k in theta_0)
    return jnp.sqrt(num / den)


def build(ctx):
    # K_t and K_0 share one trace of the Jacobian (the same shapes; inlined: the program is unchanged)
    kernel = jax.jit(
        lambda params, X: ntk.empirical_ntk(ctx.apply, params, X, blocks=True, method="jacobian"), inline=True
    )

    def probes(params, data, v, aux):
        X, mask = data["X"], data["mask"]
        p0 = theta0(ctx, v, params)
        Kb = kernel(params, X)
        K = sum(Kb.values())
        K0 = sum(kernel(p0, X).values())  # the same arithmetic as K_t: K_0 − K_0 = 0 at step 0
        spec = ntk.spectrum(K, mask)
        diag = lambda A: jnp.sum(jnp.where(mask, jnp.diagonal(A), 0.0))
        out = {
            "lambda_min": spec["lambda_min"],
            "lambda_max": spec["lambda_max"],
            "kernel_drift": ntk.kernel_drift(K, K0, mask),
            "kernel_drift_op": ntk.kernel_drift_op(K, K0, mask),
            "weight_drift": total_drift(params, p0),
            "lambda_min_w_O": ntk.spectrum(Kb[OUTPUT.get(ctx.model.name, "w_O")], mask)["lambda_min"],
        }
        trace = diag(K)
        out |= {f"ntk_share_{b}": diag(k) / trace for b, k in Kb.items()}
        out |= {f"weight_drift_{b}": d for b, d in ntk.weight_drift(params, p0).items()}
        for name in ("logit_std", "attn_tv", "attn_entropy"):
            out[name] = masked_mean(aux[name], mask)
        return out

    return probes, None


PROBES = register(ProbeSet("wu2023", build))
