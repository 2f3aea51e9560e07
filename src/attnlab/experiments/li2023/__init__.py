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

Token counts are exact integers per sample: n_* relevant and n_# = ⌊n_*/6⌋ confusion tokens
(``data.n_star``; α_* = n_*/L is stored as realised), with the net count n_* − n_# strictly
increasing across every α_* grid.

Regimes. ``li2023-fig1-protocol`` runs the sheet's protocol as stated, ``li2023-fig1-theorem`` a
regime whose spec satisfies Theorem 1's hypotheses (:mod:`.regimes`), and every other diagram
this default regime, labelled "investigation": it is outside the theorem's assumptions (noise
‖z‖ ≈ 2 > κ, random init, m = 64 ≪ M²·log N, logistic loss, a tuned lr).

The mean-token floor. A linear rule on the mean token has per-sample margin
z = (n_* − n_#)/(τ√(2L)) here (:func:`attnlab.data.li2023.mean_token_margin`): where z ≥ 4 it
succeeds without attention, where z ≲ 3 it cannot. Every diagram trains the linear learner on
the same draws, reports z and its N_c per column, and fits its laws on the columns free of the
floor only; ``li2023-settle`` separates the two regimes by design.
"""

from __future__ import annotations

ASSUMPTIONS = (
    "Regime (not the paper's, which has no boundary under the sheet's assumed generator): M = 20 one-hot patterns "
    "in d = 100, per-coordinate Gaussian noise std τ = 0.2, random Gaussian init (N(0, 1/fan_in)) with "
    "m = 64, m_a = m_b = 32, logistic loss, SGD with batch 32, stop at zero training hinge loss (all margins ≥ 1) "
    "or 1000 steps. Each is a --set knob.",
    "Token counts are exact per sample: n_* label-relevant and n_# = ⌊n_*/6⌋ confusion tokens (the sheet's α_# = "
    "α_*/6, rounded so that n_#/n_* ≤ 1/(2e)), the rest label-irrelevant, positions shuffled (counts = binomial is "
    "the alternative).",
    "The laws of N_c are fitted on the columns free of the mean-token floor (analytic margin z ≥ 4, set before the "
    "run); the linear learner on the mean token runs on every grid cell on the same draws.",
    "Success of a run = zero classification error on its own 1000 fresh test samples.",
    "Every cell's training set, test set, init and batch order come from separate streams of a key derived from the "
    "hash of its config: repeats, blocks and grid cells are independent draws.",
)

# The default regime of every li2023 experiment (see the module docstring).
DEFAULTS = {
    "data": {"name": "li2023", "M": 20, "d": 100, "L": 50, "noise": "coord", "tau": 0.2, "n_test": 1000},
    "model": {"name": "li2023-vit", "init": "gaussian", "m": 64, "m_a": 32, "m_b": 32},
    "train": {
        "loss": "logistic",
        "optimizer": "gd",
        "lr": 0.2,
        "batch_size": 32,
        "max_steps": 1000,
        "loss_threshold": 1e-9,
        "stop_on": "hinge",
        "stop_every": 10,
    },
}
