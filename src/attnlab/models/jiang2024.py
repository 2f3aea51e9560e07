"""Two-layer softmax transformer of Jiang et al. 2024 (arXiv 2409.19345).

For X ∈ R^{M×d} (rows x_l are tokens):

    S        = τ · (X W_Q)(X W_K)ᵀ                        ∈ R^{M×M}   (τ = 1 in the paper)
    φ        = softmax over keys of each row of S          (row l: query x_l)
    ā        = (1/M) Σ_l φ_l                               ∈ R^M       (query-averaged attention)
    f(X)     = w_Oᵀ ( ā · X W_V ) = Σ_s ā_s x_sᵀ W_V w_O                 (scalar)

W_Q, W_K ∈ R^{d×d_h}, W_V ∈ R^{d×d_v}, w_O ∈ R^{d_v}. Single head; no 1/√d_h temperature, bias,
residual or LayerNorm. W_Q, W_K, W_V are trained; w_O is fixed (option: trained).

Fast paths (``train.fast``, on by default; each exact, tested against the plain path):

    value path   f needs W_V only through u = W_V w_O ∈ R^d, so X u costs M·d instead of M·d·d_v
    dual form    W_Q, W_K, W_V enter only as the projections X W_Q, X W_K, X W_V: under full-batch
                 GD the trainer runs in the Gram form (``attnlab.train.Dual``)

Initialisation as in the released scripts: PyTorch's default Linear init
U(−1/√fan_in, 1/√fan_in) for all four (fan_in = d for W_Q, W_K, W_V and d_v for w_O), then
W_Q, W_K, W_V divided by ``init_scale`` (16 for the heatmap, 32 for the dynamics), drawn by
:mod:`attnlab.philox` (version 3; threefry before).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from pydantic import Field, PositiveFloat, PositiveInt

from attnlab import philox
from attnlab.models.nn import masked_mean
from attnlab.parts import Model, PartConfig, from_data, register, tokens
from attnlab.train import Dual


class Hparams(PartConfig):
    """Fields of the jiang2024 model (``model.*``); M and d come from the data model."""

    M: int | None = from_data("tokens", "tokens per sample")
    d: int | None = from_data("d", "token dimension")
    d_h: PositiveInt = Field(512, description="query/key width")
    d_v: PositiveInt = Field(512, description="value width")
    init_scale: PositiveFloat = Field(16.0, description="W_Q, W_K, W_V = Linear init / init_scale")
    tau: PositiveFloat = Field(1.0, description="softmax temperature multiplier (paper: 1)")
    train_w_O: bool = Field(False, description="train the head w_O too (paper: fixed)")


def _linear_init(key, fan_in, shape, dtype):
    bound = 1.0 / fan_in**0.5
    return philox.uniform(key, shape, dtype, -bound, bound)


def init(key, hp: Hparams, dtype=jnp.float32):
    kq, kk, kv, ko = jax.random.split(key, 4)
    return {
        "W_Q": _linear_init(kq, hp.d, (hp.d, hp.d_h), dtype) / hp.init_scale,
        "W_K": _linear_init(kk, hp.d, (hp.d, hp.d_h), dtype) / hp.init_scale,
        "W_V": _linear_init(kv, hp.d, (hp.d, hp.d_v), dtype) / hp.init_scale,
        "w_O": _linear_init(ko, hp.d_v, (hp.d_v,), dtype),
    }


def trainable(hp: Hparams) -> tuple[str, ...]:
    return ("W_Q", "W_K", "W_V", "w_O") if hp.train_w_O else ("W_Q", "W_K", "W_V")


def attention(params, X, tau=1.0, keep=None):
    """φ = softmax_keys(τ (X W_Q)(X W_K)ᵀ) ∈ R^{M×M} (row = query); also returns the logits S.
    With a token mask ``keep`` the softmax runs over the kept keys only."""
    S = tau * (X @ params["W_Q"]) @ (X @ params["W_K"]).T
    if keep is not None:
        S = jnp.where(keep[None, :], S, -jnp.inf)
    return jax.nn.softmax(S, axis=-1), S


def apply(params, x, hp: Hparams):
    """f(X) = Σ_s ā_s x_sᵀ W_V w_O for one sample X ∈ R^{M×d} (a token array, or a pytree
    with tokens and a token mask S: then ā averages the kept queries and attends to the kept
    keys only); aux holds ā and φ."""
    X, keep = tokens(x)
    phi, _ = attention(params, X, hp.tau, keep)
    if keep is None:
        a_bar = phi.mean(axis=0)  # (M,) average over queries
    else:
        a_bar = masked_mean(phi, keep)
    f = a_bar @ (X @ params["W_V"] @ params["w_O"])
    return f, {"a_bar": a_bar, "phi": phi}


def _attend(Q, K, keep, tau):
    """(φ, ā) from the query and key projections Q = X W_Q, K = X W_K of one sample."""
    S = tau * Q @ K.T
    if keep is not None:
        S = jnp.where(keep[None, :], S, -jnp.inf)
    phi = jax.nn.softmax(S, axis=-1)
    if keep is None:
        return phi, phi.mean(axis=0)
    return phi, masked_mean(phi, keep)


def apply_fast(params, x, hp: Hparams):
    """:func:`apply` with the value path collapsed: f = ā · (X u), u = W_V w_O."""
    X, keep = tokens(x)
    phi, a_bar = _attend(X @ params["W_Q"], X @ params["W_K"], keep, hp.tau)
    f = a_bar @ (X @ (params["W_V"] @ params["w_O"]))
    return f, {"a_bar": a_bar, "phi": phi}


def apply_dual(params, P, x, hp: Hparams):
    """:func:`apply` from the projections P = {W_Q: X W_Q, W_K: X W_K, W_V: X W_V} of one sample."""
    _, keep = tokens(x)
    phi, a_bar = _attend(P["W_Q"], P["W_K"], keep, hp.tau)
    f = a_bar @ (P["W_V"] @ params["w_O"])
    return f, {"a_bar": a_bar, "phi": phi}


def logistic_loss(f, y):
    """ℓ(y f) = log(1 + exp(−y f)), computed stably."""
    return jax.nn.softplus(-y * f)


PART = register(
    Model(
        name="jiang2024",
        version=3,
        config=Hparams,
        init=init,
        apply=apply,
        trainable=trainable,
        groups=lambda hp: {"QK": ("W_Q", "W_K"), "V": ("W_V",), "O": ("w_O",)},
        sizes=lambda hp: (hp.d * (2 * hp.d_h + hp.d_v) + hp.d_v, hp.M * (2 * hp.d_h + hp.d_v + 2 * hp.M)),
        fast_apply=apply_fast,
        dual=lambda hp: Dual(("W_Q", "W_K", "W_V"), lambda x: tokens(x)[0], lambda p, P, x: apply_dual(p, P, x, hp)),
    )
)
