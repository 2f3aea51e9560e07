"""A model of one's own: the jiang2024 transformer with its softmax linearised.

    φ_l = softmax(τ S_l)  ≈  1/M + τ (S_l − S̄_l) / M,      S = (X W_Q)(X W_K)ᵀ,  S̄_l = (1/M) Σ_s S_{l,s}

the first-order expansion of the softmax at S = 0 (each row still sums to 1), and otherwise the
jiang2024 model: f(X) = ā · (X W_V w_O) with ā = (1/M) Σ_l φ_l. Same fields, init and trained
parameters, so on common draws (train.draws = "common") it starts from exactly the softmax model's
parameters and sees exactly its data: the comparison is paired.

It lives outside attnlab and needs no edit to it: a sweep names it as ``linear_attention:PART``
(this file's directory is searched, being the spec's), ``attnlab fields model.linear_attention:PART``
lists its fields, ``attnlab check-part linear_attention:PART`` checks its fast path. Its cells' ids
carry a digest of this file, so an edit gives new cells. See linear_vs_softmax.toml.
"""

import dataclasses

from attnlab.models import jiang2024 as J
from attnlab.parts import tokens


def attention(params, X, tau):
    """φ = 1/M + τ (S − S̄)/M ∈ R^{M×M} (row = query): the linearised softmax."""
    S = (X @ params["W_Q"]) @ (X @ params["W_K"]).T
    M = X.shape[0]
    return 1.0 / M + tau * (S - S.mean(axis=1, keepdims=True)) / M


def apply(params, x, hp):
    """f(X) = ā · (X W_V w_O), ā the query-average of the linearised attention."""
    X, _ = tokens(x)
    a_bar = attention(params, X, hp.tau).mean(axis=0)
    return a_bar @ (X @ params["W_V"] @ params["w_O"]), {"a_bar": a_bar}


def apply_fast(params, x, hp):
    """The same f with the value path collapsed (u = W_V w_O: M·d instead of M·d·d_v) and ā in
    closed form: ā = 1/M + τ (q̄ᵀ K − mean(q̄ᵀ K)) / M with q̄ the mean query."""
    X, _ = tokens(x)
    q_bar = (X @ params["W_Q"]).mean(axis=0)
    s = (X @ params["W_K"]) @ q_bar
    M = X.shape[0]
    a_bar = 1.0 / M + hp.tau * (s - s.mean()) / M
    return a_bar @ (X @ (params["W_V"] @ params["w_O"])), {"a_bar": a_bar}


PART = dataclasses.replace(
    J.PART, name="linear-attention", version=1, apply=apply, fast_apply=apply_fast, dual=None, fast_of=apply
)
