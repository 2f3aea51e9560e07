"""Li et al. 2023 (arXiv 2302.06015): the shallow ViT's sample complexity, sparse attention and
token sparsification. The data model is :mod:`attnlab.data.li2023`, the models (ViT,
attention-free baseline, linear classifier on the mean token) :mod:`attnlab.models.li2023`;
this package holds the paper's probes, token sparsification and its six experiments.

The default regime (why). With the sheet's assumed defaults (M = d = 20, ball noise τ = 0.2,
near-identity init) every cell of the paper's grid succeeds even at N = 10: there is no
boundary to measure. The experiments therefore run, by default, in a regime found with
attnlab's own sweeps where the oracle error is zero at every α_* of the grid and success still
depends on N: patterns one-hot in d = 100 (M = 20), per-coordinate Gaussian noise of std
τ = 0.2 (‖z‖ ≈ 2, twice a pattern's norm), random Gaussian init with m_a = m_b = 32, logistic
loss, mini-batch SGD (b = 32), stopped at zero training hinge loss (every margin ≥ 1) or 1000
steps. The calibration grid that shows it::

    attnlab reproduce li2023-fig1 --scale cpu --set alpha_star=0.08,0.1,0.12,0.16,0.2,0.24 \\
        --set N=10,20,40,80,160,320 --set reps=2

and the sheet's own default regime (no boundary)::

    attnlab reproduce li2023-fig1 --scale cpu --set d=20 --set noise=ball --set init=near_identity \\
        --set m_a=0 --set m_b=0 --set loss=hinge --set tune_lr=

Token counts are fixed at [α_*·L] per sample (the sheet's generator), and the α_* of a cpu grid
are multiples of 1/L, so every column has its own count.
"""

from __future__ import annotations

ASSUMPTIONS = (
    "Regime (not the paper's, which has no boundary under the sheet's assumed generator): M = 20 one-hot patterns "
    "in d = 100, per-coordinate Gaussian noise std τ = 0.2, random Gaussian init (N(0, 1/fan_in)) with "
    "m = 64, m_a = m_b = 32, logistic loss, SGD with batch 32, stop at zero training hinge loss (all margins ≥ 1) "
    "or 1000 steps. Each is a --set knob.",
    "Token counts are fixed per sample: [α_*·L] label-relevant and [α_#·L] confusion tokens, α_# = α_*/6, the rest "
    "label-irrelevant, positions shuffled (counts = binomial is the alternative).",
    "Success of a run = zero classification error on its own 1000 fresh test samples.",
    "Every cell's training set, test set, init and batch order come from separate streams of a key derived from the "
    "hash of its config: repeats, blocks and grid cells are independent draws.",
)

# The default regime of every li2023 experiment (see the module docstring).
DEFAULTS = {
    "data": {"name": "li2023", "M": 20, "d": 100, "L": 50, "noise": "coord", "tau": 0.2, "n_test": 1000},
    "model": {"name": "li2023-vit", "init": "gaussian", "m": 64, "m_a": 32, "m_b": 32},
    "train": {"loss": "logistic", "optimizer": "gd", "lr": 0.2, "batch_size": 32, "max_steps": 1000,
              "loss_threshold": 1e-9, "stop_on": "hinge", "stop_every": 10},
}  # fmt: skip
