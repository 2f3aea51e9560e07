"""Shallow ViT of Li, Wang, Liu & Chen 2023 (ICLR, arXiv 2302.06015), its attention-free "CNN"
baseline and a linear classifier on the mean token.

For one sample X = (x_1..x_L), x_l ∈ R^d, and S ⊆ [L] the kept tokens (token sparsification;
S = [L] without a token mask):

    ViT      F(X) = (1/|S|) Σ_{l∈S} aᵀ ReLU( W_O Σ_{s∈S} W_V x_s · softmax_{s∈S}( x_sᵀ W_Kᵀ W_Q x_l ) )
    CNN      F(X) = (1/|S|) Σ_{l∈S} aᵀ ReLU( W_O W_V x_l )
    linear   F(X) = wᵀ ( (1/|S|) Σ_{l∈S} x_l ) + b

W_Q, W_K ∈ R^{m_b×d}, W_V ∈ R^{m_a×d}, W_O ∈ R^{m×m_a}; a ∈ R^m is fixed with entries ±1/√m
(random signs; assumed, option ±1/m). No temperature, biases, LayerNorm, residual, positional
encoding or CLS token. Trained: W_Q, W_K, W_V, W_O (ViT), W_V, W_O (CNN), w, b (linear).

Initialisation (assumed, see papers/li2023.md): the theory starts from a "good" model whose
W_Q, W_K, W_V map the patterns close to orthonormal sets, with initial errors δ (queries/keys)
and σ (values):

    near_identity   W_Q = I + δ·G_Q/√d,  W_K = I + δ·G_K/√d,  W_V = I + σ·G_V/√d   (m_a = m_b = d)
                    W_O ~ N(0, 1/m)
    gaussian        every weight N(0, 1/fan_in): fan_in = d for W_Q, W_K, W_V and m_a for W_O

G_* are independent standard Gaussian matrices. With one seed the ViT and the CNN draw the same
W_V, W_O and a, so an architecture comparison differs only by the attention.

σ and δ are static fields (``init(key, hp, dtype)`` reads them from the Hparams): an (σ, N) grid
compiles one program per σ value.
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveInt, model_validator

from attnlab.models.nn import kept, masked_mean, softmax_keys
from attnlab.parts import Model, PartConfig, from_data, register

# ---------------------------------------------------------------- hyperparameters


class CNNHparams(PartConfig):
    """Fields of the li2023 CNN baseline (``model.*``): the ViT without W_Q, W_K; L and d come
    from the data model. m_a = 0 means d (resolved when bound to the data's d)."""

    L: int | None = from_data("tokens", "tokens per sample")
    d: int | None = from_data("d", "token dimension")
    m: PositiveInt = Field(64, description="hidden width m (a ∈ R^m)")
    m_a: NonNegativeInt = Field(0, description="value width m_a (0: d)")
    init: Literal["near_identity", "gaussian"] = Field(
        "near_identity", description="near_identity: W_V = I + σG/√d, W_O ~ N(0, 1/m); gaussian: N(0, 1/fan_in)"
    )
    sigma: NonNegativeFloat = Field(0.1, description="σ: initial error of W_V (near_identity)")
    a_scale: Literal["sqrt", "linear"] = Field("sqrt", description="fixed readout a: ±1/√m (sqrt) or ±1/m (linear)")

    @model_validator(mode="after")
    def _widths(self):
        """Under near_identity the widths are d: 0 (or d itself, once d is known)."""
        for name in ("m_a", "m_b"):
            width = getattr(self, name, None)
            if self.init == "near_identity" and width and width != self.d:
                need = f"{name} = d = {self.d} (or 0)" if self.d else f"{name} = 0 (d, the data's)"
                raise ValueError(
                    f"model.{name}: init = 'near_identity' needs {need}, got {width}; use init = "
                    f"'gaussian' for another width"
                )
            if width == 0 and self.d is not None:
                self._resolve(**{name: self.d})
        return self


class Hparams(CNNHparams):
    """Fields of the li2023 ViT (``model.*``); L and d come from the data model."""

    m_b: NonNegativeInt = Field(0, description="query/key width m_b (0: d)")
    delta: NonNegativeFloat = Field(0.1, description="δ: initial error of W_Q, W_K (near_identity)")


class LinearHparams(PartConfig):
    """Fields of the linear classifier on the mean token (``model.*``)."""

    L: int | None = from_data("tokens", "tokens per sample")
    d: int | None = from_data("d", "token dimension")
    init: Literal["zeros", "gaussian"] = Field("zeros", description="w = 0, or w ~ N(0, 1/d); b = 0")


# ---------------------------------------------------------------- init schemes


def near_identity(key, n, err, dtype):
    """I + err·G/√n, G ∈ R^{n×n} standard Gaussian: each entry of the error has std err/√n."""
    return jnp.eye(n, dtype=dtype) + err * jax.random.normal(key, (n, n), dtype) / n**0.5


def gaussian(key, shape, fan_in, dtype):
    """N(0, 1/fan_in) entries."""
    return jax.random.normal(key, shape, dtype) / fan_in**0.5


def sign_readout(key, m, a_scale, dtype):
    """a ∈ R^m with random signs and |a_i| = 1/√m ("sqrt") or 1/m ("linear")."""
    scale = 1.0 / (m**0.5 if a_scale == "sqrt" else m)
    return scale * jax.random.rademacher(key, (m,), dtype)


def _init_perceptron(keys, hp, dtype):
    """W_V, W_O, a (shared by the ViT and the CNN); keys = (k_V, k_O, k_a)."""
    kv, ko, ka = keys
    if hp.init == "near_identity":
        W_V = near_identity(kv, hp.d, hp.sigma, dtype)
        W_O = gaussian(ko, (hp.m, hp.m_a), hp.m, dtype)  # N(0, 1/m)
    else:
        W_V = gaussian(kv, (hp.m_a, hp.d), hp.d, dtype)
        W_O = gaussian(ko, (hp.m, hp.m_a), hp.m_a, dtype)
    return {"W_V": W_V, "W_O": W_O, "a": sign_readout(ka, hp.m, hp.a_scale, dtype)}


def init(key, hp: Hparams, dtype=jnp.float32):
    """W_Q, W_K, W_V, W_O and the fixed readout a of the ViT."""
    kq, kk, kv, ko, ka = jax.random.split(key, 5)
    if hp.init == "near_identity":
        W_Q, W_K = near_identity(kq, hp.d, hp.delta, dtype), near_identity(kk, hp.d, hp.delta, dtype)
    else:
        W_Q, W_K = gaussian(kq, (hp.m_b, hp.d), hp.d, dtype), gaussian(kk, (hp.m_b, hp.d), hp.d, dtype)
    return {"W_Q": W_Q, "W_K": W_K, **_init_perceptron((kv, ko, ka), hp, dtype)}


def init_cnn(key, hp: CNNHparams, dtype=jnp.float32):
    """W_V, W_O, a: the same draws as the ViT's for the same key."""
    _, _, kv, ko, ka = jax.random.split(key, 5)
    return _init_perceptron((kv, ko, ka), hp, dtype)


def init_linear(key, hp: LinearHparams, dtype=jnp.float32):
    w = gaussian(key, (hp.d,), hp.d, dtype) if hp.init == "gaussian" else jnp.zeros((hp.d,), dtype)
    return {"w": w, "b": jnp.zeros((), dtype)}


# ---------------------------------------------------------------- forward pass


def attention(params, X, keep):
    """A_{l,s} = softmax_{s∈S}( x_sᵀ W_Kᵀ W_Q x_l ) ∈ R^{L×L} (row = query l).

    Dropped keys get −∞ logits; rows of dropped queries and rows with no kept key are 0."""
    q, k = X @ params["W_Q"].T, X @ params["W_K"].T  # (L, m_b): W_Q x_l, W_K x_s
    return softmax_keys(q @ k.T, keep)


def readout(params, H):
    """aᵀ ReLU(W_O h_l) per row h_l of H ∈ R^{L×m_a}."""
    return jax.nn.relu(H @ params["W_O"].T) @ params["a"]


def apply(params, x, hp: Hparams):
    """F(X) of the ViT for one sample; aux: the attention A (L, L) and the token mask (L,)."""
    X, keep = kept(x)
    A = attention(params, X, keep)
    H = A @ (X @ params["W_V"].T)  # (L, m_a): h_l = Σ_s A_{l,s} W_V x_s
    return masked_mean(readout(params, H), keep), {"attn": A, "mask": keep}


def apply_cnn(params, x, hp: CNNHparams):
    """F(X) = (1/|S|) Σ_{l∈S} aᵀ ReLU(W_O W_V x_l); aux: the token mask."""
    X, keep = kept(x)
    return masked_mean(readout(params, X @ params["W_V"].T), keep), {"mask": keep}


def apply_linear(params, x, hp: LinearHparams):
    """F(X) = wᵀ x̄_S + b with x̄_S the mean kept token; aux: the token mask."""
    X, keep = kept(x)
    return masked_mean(X, keep) @ params["w"] + params["b"], {"mask": keep}


# ---------------------------------------------------------------- parts


def _vit_sizes(hp: Hparams):
    params = 2 * hp.m_b * hp.d + hp.m_a * hp.d + hp.m * hp.m_a + hp.m
    return params, hp.L * (2 * hp.m_b + 2 * hp.m_a + 2 * hp.m + 2 * hp.L)


PART_VIT = register(
    Model(
        name="li2023-vit",
        version=1,
        config=Hparams,
        init=init,
        apply=apply,
        trainable=lambda hp: ("W_Q", "W_K", "W_V", "W_O"),
        groups=lambda hp: {"QK": ("W_Q", "W_K"), "V": ("W_V",), "O": ("W_O",)},
        sizes=_vit_sizes,
    )
)

PART_CNN = register(
    Model(
        name="li2023-cnn",
        version=1,
        config=CNNHparams,
        init=init_cnn,
        apply=apply_cnn,
        trainable=lambda hp: ("W_V", "W_O"),
        groups=lambda hp: {"V": ("W_V",), "O": ("W_O",)},
        sizes=lambda hp: (hp.m_a * hp.d + hp.m * hp.m_a + hp.m, hp.L * (hp.m_a + 2 * hp.m)),
    )
)

PART_LINEAR = register(
    Model(
        name="li2023-linear",
        version=1,
        config=LinearHparams,
        init=init_linear,
        apply=apply_linear,
        trainable=lambda hp: ("w", "b"),
        groups=lambda hp: {"w": ("w", "b")},
        sizes=lambda hp: (hp.d + 1, hp.d + 1),
    )
)
