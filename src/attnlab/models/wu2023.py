"""Encoder-only shallow transformer of Wu, Liu, Chrysos & Cevher 2023 (NeurIPS, arXiv 2311.01575).

For one sample X ∈ R^{d_s×d} (rows x_t are tokens):

    S    = τ₀ · (X W_Qᵀ)(X W_Kᵀ)ᵀ                 ∈ R^{d_s×d_s}   (softmax logits, row = query)
    φ    = softmax over keys of each row of S      (φ_t: the attention of query x_t)
    A    = φ · X W_Vᵀ                               ∈ R^{d_s×d_m}
    h    = (1/d_s) Σ_t ReLU(A_t)                    ∈ R^{d_m}       (ReLU, then mean pooling)
    f(X) = τ₁ · w_Oᵀ h                                               (scalar)

W_Q, W_K, W_V ∈ R^{d_m×d}, w_O ∈ R^{d_m}; all four are trained. τ₀ = d_m^{−α}: the paper's two
scalings are α = 1/2 and α = 1 (any α > 0 is allowed).

Initialisations (entries i.i.d. Gaussian; the variances are the standard conventions, assumed in
papers/wu2023.md)::

    init    W_Q, W_K, W_V        w_O            τ₁           (W_F, option)
    lecun   N(0, 1/d)            N(0, 1/d_m)    1            N(0, 1/d_m)
    he      N(0, 2/d)            N(0, 2/d_m)    1            N(0, 2/d_m)
    ntk     N(0, 1)·(1/√d)       N(0, 1)        d_m^{−1/2}   N(0, 1)·(1/√d_m)

Under ``ntk`` the factors 1/√d (and 1/√d_m for W_F) are multipliers in the forward pass, not in
the draw (the NTK parameterisation): the trained parameters are the N(0, 1) weights, so
gradients see the multipliers. At initialisation lecun and ntk give the same function in
distribution; they differ in their gradients (the NTK scale grows ∝ d_m under lecun/he and is
O(1) under ntk, see :mod:`attnlab.ntk`).

Options (all off in the paper's main setting):

* ``tied``: W_Q = W_K. The model then has no ``W_K`` parameter; ``W_Q`` serves as both.
* ``ffn``: an extra trained weight W_F ∈ R^{d_m×d_m} before the ReLU: h = (1/d_s) Σ_t ReLU(W_F A_t).
* ``heads`` = H > 1: multi-head attention. The d_m rows of W_Q, W_K, W_V are split into H
  consecutive blocks of d_h = d_m/H rows; head k attends with its own logits
  S^k = τ₀ (X W_Q^{kᵀ})(X W_K^{kᵀ})ᵀ and values X W_V^{kᵀ} ∈ R^{d_s×d_h}, and A is the
  concatenation of the H heads' outputs (so A ∈ R^{d_s×d_m} as with one head; there is no
  output projection besides the optional W_F). *Choice:* with H heads τ₀ = d_h^{−α} uses the
  head width (as 1/√d_head in standard transformers), so each head's logits have the scale of a
  single-head model of width d_h; H = 1 is the paper's model.

Token mask (``tokens(x)`` with a mask S ⊆ [d_s]): the softmax runs over the kept keys, the mean
pooling over the kept queries, and dropped tokens are zeroed first (inert, zero gradient).
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from attnlab.models.nn import kept, masked_mean, softmax_keys
from attnlab.parts import Model, PartConfig, batched, from_data, pick, register

INITS = ("lecun", "he", "ntk")
VARIANCE_GAIN = {"lecun": 1.0, "he": 2.0, "ntk": 1.0}  # draw variance × fan_in (ntk: N(0, 1), see `scales`)


# ---------------------------------------------------------------- hyperparameters


class Hparams(PartConfig):
    """Fields of the wu2023 model (``model.*``); d_s and d come from the data model."""

    d_s: int | None = from_data("tokens", "tokens per sample")
    d: int | None = from_data("d", "token dimension")
    d_m: PositiveInt = Field(64, description="width d_m (W_Q, W_K, W_V ∈ R^{d_m×d}, w_O ∈ R^{d_m})")
    alpha: PositiveFloat = batched(0.5, description="τ₀ = d_m^(−alpha): the paper's 0.5 and 1 (per head: d_h)")
    init: Literal[INITS] = batched(
        "lecun", description="lecun N(0,1/fan_in), he N(0,2/fan_in), ntk N(0,1) with 1/√fan_in in the forward pass"
    )
    tied: bool = Field(False, description="W_Q = W_K (one parameter)")
    ffn: bool = Field(False, description="extra trained W_F ∈ R^{d_m×d_m} before the ReLU")
    heads: PositiveInt = Field(1, description="attention heads H (width d_m/H each)")

    @model_validator(mode="after")
    def _heads(self):
        if self.d_m % self.heads:
            raise ValueError(f"model.heads: must divide model.d_m = {self.d_m}, got {self.heads}")
        return self

    @property
    def d_h(self) -> int:
        """Width of one head."""
        return self.d_m // self.heads

    @property
    def tau0(self) -> float:
        """τ₀ = d_h^{−α} (= d_m^{−α} with one head)."""
        return self.d_h ** (-self.alpha)


def scales(hp: Hparams, dtype=None) -> dict:
    """The forward-pass multipliers of each init scheme: ``in`` on W_Q, W_K, W_V, ``F`` on W_F,
    and τ₁ on the output (1, 1, 1 except under ntk: 1/√d, 1/√d_m, d_m^{−1/2}). ``init`` is a
    batched choice (one program for all three): inside a program these are ``dtype`` scalars."""
    ntk = {"in": hp.d**-0.5, "F": hp.d_m**-0.5, "tau1": hp.d_m**-0.5}
    return {k: pick(hp.init, INITS, {i: m if i == "ntk" else 1.0 for i in INITS}, dtype) for k, m in ntk.items()}


# ---------------------------------------------------------------- init


def _gaussian(key, shape, fan_in, init, dtype):
    """N(0, gain/fan_in) entries (lecun: gain 1, he: 2); N(0, 1) under ntk."""
    std = {i: 1.0 if i == "ntk" else (VARIANCE_GAIN[i] / fan_in) ** 0.5 for i in INITS}
    return pick(init, INITS, std, dtype) * jax.random.normal(key, shape, dtype)


def init(key, hp: Hparams, dtype=jnp.float32):
    """{"W_Q", "W_K", "W_V", "w_O"} (no "W_K" when tied; "W_F" with ffn), drawn per ``hp.init``.
    The keys of W_Q, W_K, W_V, w_O do not depend on the options, so tied/ffn variants of a seed
    share the draws they have in common."""
    kq, kk, kv, ko, kf = jax.random.split(key, 5)
    g = lambda k, shape, fan_in: _gaussian(k, shape, fan_in, hp.init, dtype)
    params = {"W_Q": g(kq, (hp.d_m, hp.d), hp.d)}
    if not hp.tied:
        params["W_K"] = g(kk, (hp.d_m, hp.d), hp.d)
    params |= {"W_V": g(kv, (hp.d_m, hp.d), hp.d), "w_O": g(ko, (hp.d_m,), hp.d_m)}
    if hp.ffn:
        params["W_F"] = g(kf, (hp.d_m, hp.d_m), hp.d_m)
    return params


def trainable(hp: Hparams) -> tuple[str, ...]:
    """Every parameter is trained."""
    return ("W_Q",) + (() if hp.tied else ("W_K",)) + ("W_V", "w_O") + (("W_F",) if hp.ffn else ())


def groups(hp: Hparams) -> dict[str, tuple[str, ...]]:
    out = {"QK": ("W_Q",) if hp.tied else ("W_Q", "W_K"), "V": ("W_V",), "O": ("w_O",)}
    return out | ({"F": ("W_F",)} if hp.ffn else {})


# ---------------------------------------------------------------- forward pass


def heads_of(Z, hp: Hparams):
    """(d_s, d_m) -> (H, d_s, d_h): the H consecutive column blocks of Z."""
    return Z.reshape(Z.shape[0], hp.heads, hp.d_h).transpose(1, 0, 2)


def attention(params, X, hp: Hparams, keep):
    """(φ, S) ∈ R^{H×d_s×d_s}: S^k = τ₀ (X W_Q^{kᵀ})(X W_K^{kᵀ})ᵀ (with the ntk multipliers),
    φ^k its row softmax over the kept keys."""
    m = scales(hp, X.dtype)["in"]
    Q = heads_of(m * X @ params["W_Q"].T, hp)
    K = Q if hp.tied else heads_of(m * X @ params["W_K"].T, hp)
    S = hp.tau0 * Q @ K.transpose(0, 2, 1)
    return softmax_keys(S, keep), S


def apply(params, x, hp: Hparams):
    """f(X) = τ₁ w_Oᵀ (1/d_s) Σ_t ReLU(A_t) for one sample. aux: ``attn`` φ (H, d_s, d_s),
    ``logit_std`` (std of the logits S over the kept query–key pairs of every head), ``attn_tv``
    (mean over heads and kept queries of the total-variation distance ½ Σ_s |φ_ts − 1/|S|| of a
    row from uniform attention), ``attn_entropy`` (mean row entropy, log |S| when uniform)."""
    X, keep = kept(x)
    sc = scales(hp, X.dtype)
    n_kept = jnp.maximum(keep.sum(), 1)
    phi, S = attention(params, X, hp, keep)
    V = heads_of(sc["in"] * X @ params["W_V"].T, hp)  # (H, d_s, d_h)
    A = (phi @ V).transpose(1, 0, 2).reshape(X.shape[0], hp.d_m)  # heads concatenated: (d_s, d_m)
    if hp.ffn:
        A = sc["F"] * A @ params["W_F"].T
    h = masked_mean(jax.nn.relu(A), keep)  # mean over kept tokens
    f = sc["tau1"] * params["w_O"] @ h
    return f, attention_stats(phi, S, keep, n_kept)


def attention_stats(phi, S, keep, n_kept):
    """aux of :func:`apply` from φ and the logits S (heads, d_s, d_s) of one sample."""
    pair = keep[:, None] & keep[None, :]
    n_pairs = phi.shape[0] * n_kept**2
    mean = jnp.sum(jnp.where(pair, S, 0)) / n_pairs
    std = jnp.sqrt(jnp.sum(jnp.where(pair, (S - mean) ** 2, 0)) / n_pairs)
    rows = phi.shape[0] * n_kept
    tv = 0.5 * jnp.sum(jnp.where(pair, jnp.abs(phi - 1.0 / n_kept), 0)) / rows
    ent = -jnp.sum(jnp.where(pair & (phi > 0), phi * jnp.log(jnp.where(phi > 0, phi, 1)), 0)) / rows
    return {"attn": phi, "logit_std": std, "attn_tv": tv, "attn_entropy": ent}


# ---------------------------------------------------------------- part


def sizes(hp: Hparams) -> tuple[int, int]:
    """(parameter count, activations per sample)."""
    n = (2 if hp.tied else 3) * hp.d_m * hp.d + hp.d_m + (hp.d_m**2 if hp.ffn else 0)
    act = hp.d_s * ((4 + 2 * hp.ffn) * hp.d_m + 2 * hp.heads * hp.d_s)
    return n, act


PART = register(
    Model(
        name="wu2023",
        version=1,
        config=Hparams,
        init=init,
        apply=apply,
        trainable=trainable,
        groups=groups,
        sizes=sizes,
    )
)
