"""Each paper's model in plain PyTorch (torch is passed in: it is imported lazily), initialised by the same law as attnlab's model."""

from __future__ import annotations

import functools


@functools.cache
def _jiang2024_class(torch):
    nn = torch.nn

    class Transformer(nn.Module):
        """f(X) = w_Oᵀ(Σ_s ā_s W_Vᵀ x_s), ā = mean over queries of softmax((X W_Q)(X W_K)ᵀ):
        the layout of the released scripts (nn.Linear without bias, default init, W_Q, W_K,
        W_V divided by init_scale, w_O fixed)."""

        def __init__(self, d, d_h, d_v, init_scale, tau=1.0, train_w_O=False):
            super().__init__()
            self.W_Q = nn.Linear(d, d_h, bias=False)
            self.W_K = nn.Linear(d, d_h, bias=False)
            self.W_V = nn.Linear(d, d_v, bias=False)
            self.w_O = nn.Linear(d_v, 1, bias=False)
            self.tau = tau
            with torch.no_grad():
                for lin in (self.W_Q, self.W_K, self.W_V):
                    lin.weight.div_(init_scale)
            self.w_O.weight.requires_grad_(train_w_O)

        def forward(self, X):  # X: (n, M, d) -> f: (n,)
            Q, K, V = self.W_Q(X), self.W_K(X), self.W_V(X)  # (n, M, d_h), (n, M, d_h), (n, M, d_v)
            phi = torch.softmax(self.tau * Q @ K.transpose(1, 2), dim=-1)  # (n, M, M), row = query
            a_bar = phi.mean(dim=1)  # (n, M)
            return self.w_O((a_bar.unsqueeze(1) @ V).squeeze(1)).squeeze(-1)

    return Transformer


@functools.cache
def _li2023_class(torch):
    nn = torch.nn

    class ShallowViT(nn.Module):
        """F(X) = (1/L) Σ_l aᵀ ReLU(W_O Σ_s W_V x_s · softmax_s(x_sᵀ W_Kᵀ W_Q x_l)) (Li et al. 2023):
        nn.Linear layers without bias, W_Q, W_K, W_V, W_O trained, the readout a fixed with random
        signs. Init ``gaussian``: every weight N(0, 1/fan_in); ``near_identity``: W_Q, W_K =
        I + δG/√d, W_V = I + σG/√d, W_O ~ N(0, 1/m)."""

        def __init__(self, d, m, m_a, m_b, init="gaussian", sigma=0.1, delta=0.1, a_scale="sqrt"):
            super().__init__()
            self.W_Q = nn.Linear(d, m_b, bias=False)
            self.W_K = nn.Linear(d, m_b, bias=False)
            self.W_V = nn.Linear(d, m_a, bias=False)
            self.W_O = nn.Linear(m_a, m, bias=False)
            signs = torch.randint(0, 2, (m,)).float() * 2 - 1
            self.register_buffer("a", signs / (m**0.5 if a_scale == "sqrt" else m))
            with torch.no_grad():
                if init == "gaussian":
                    for lin in (self.W_Q, self.W_K, self.W_V, self.W_O):
                        nn.init.normal_(lin.weight, std=lin.in_features**-0.5)
                else:  # near_identity: m_a = m_b = d
                    for lin, err in ((self.W_Q, delta), (self.W_K, delta), (self.W_V, sigma)):
                        lin.weight.copy_(torch.eye(d) + err * torch.randn(d, d) / d**0.5)
                    nn.init.normal_(self.W_O.weight, std=m**-0.5)

        def forward(self, X):  # X: (n, L, d) -> F: (n,)
            q, k, v = self.W_Q(X), self.W_K(X), self.W_V(X)  # (n, L, m_b), (n, L, m_b), (n, L, m_a)
            A = torch.softmax(q @ k.transpose(1, 2), dim=-1)  # (n, L, L), row = query l
            return (torch.relu(self.W_O(A @ v)) @ self.a).mean(dim=1)

    return ShallowViT


@functools.cache
def _wu2023_class(torch):
    nn = torch.nn

    class Encoder(nn.Module):
        """f(X) = τ₁ w_Oᵀ (1/d_s) Σ_t ReLU(φ X W_Vᵀ)_t, φ = row softmax of τ₀ (X W_Qᵀ)(X W_Kᵀ)ᵀ, τ₀ = d_m^−α
        (Wu et al. 2023): nn.Linear layers without bias, all trained. Init ``lecun``/``he``:
        N(0, gain/fan_in); ``ntk``: N(0, 1) with 1/√d on the inputs and τ₁ = d_m^−1/2."""

        def __init__(self, d, d_m, alpha=0.5, init="lecun"):
            super().__init__()
            self.W_Q = nn.Linear(d, d_m, bias=False)
            self.W_K = nn.Linear(d, d_m, bias=False)
            self.W_V = nn.Linear(d, d_m, bias=False)
            self.w_O = nn.Linear(d_m, 1, bias=False)
            gain = 2.0 if init == "he" else 1.0
            with torch.no_grad():
                for lin in (self.W_Q, self.W_K, self.W_V, self.w_O):
                    nn.init.normal_(lin.weight, std=1.0 if init == "ntk" else (gain / lin.in_features) ** 0.5)
            self.tau0 = d_m**-alpha
            self.scale_in, self.tau1 = (d**-0.5, d_m**-0.5) if init == "ntk" else (1.0, 1.0)

        def forward(self, X):  # X: (n, d_s, d) -> f: (n,)
            Q, K, V = (self.scale_in * lin(X) for lin in (self.W_Q, self.W_K, self.W_V))  # (n, d_s, d_m) each
            phi = torch.softmax(self.tau0 * Q @ K.transpose(1, 2), dim=-1)  # (n, d_s, d_s), row = query
            h = torch.relu(phi @ V).mean(dim=1)  # (n, d_m)
            return self.tau1 * self.w_O(h).squeeze(-1)

    return Encoder


def _paper_model(torch):
    """The jiang2024 module class (kept for scripts that build it directly)."""
    return _jiang2024_class(torch)
