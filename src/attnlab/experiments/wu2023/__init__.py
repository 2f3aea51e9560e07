"""Wu et al. 2023 (arXiv 2311.01575): global convergence of the encoder-only shallow transformer
(:mod:`attnlab.models.wu2023`) on the sheet's synthetic data (:mod:`attnlab.data.wu2023`), and
its NTK (:mod:`attnlab.ntk`).

The step-size normalisation (why). Full-batch GD on ½·mean (f − y)² is stable while
γ·λ_max(K₀)/N < 2 (the linearised dynamics f_{t+1} − y = (I − γK/N)(f_t − y)). Under the LeCun
and He inits the NTK grows ∝ d_m: with the sheet's data (‖x‖² ≈ d, N = 100) measured
λ_max(K₀)/N = 0.76, 2.6, 10.5, 43 at d_m = 16, 64, 256, 1024 (τ₀ = d_m^−1/2; half that under
d_m^−1), so the published γ = 1 diverges from d_m = 256 on. Unit-norm tokens shrink the kernel
16-fold (γ = 1 is then stable up to d_m ≈ 1500) but also remove the difference between the two
scalings (the logits are O(‖x‖²/d)), the sheet's pitfall. The default therefore keeps ‖x‖² ≈ d
and normalises the *step* by the width, γ_eff = γ·d_ref/d_m with d_ref = 16 (the smallest
width, where γ = 1 is the published step): γ_eff·λ_max(K₀)/N stays ≈ 0.7 at every width. Both
pitfalls stay reachable: ``--set step_norm=none`` (the literal γ = 1 at every width) and
``--set token_norm=unit``. Every run records γ_eff·λ_max(K₀)/N and is flagged unstable when it
exceeds 2 or the loss diverges.
"""

from __future__ import annotations

ASSUMPTIONS = (
    "Data (the sheet's assumption): N = 100 samples of d_s = 8 tokens in d = 16 with i.i.d. N(0, 1) entries "
    "(‖x‖² ≈ d), targets y ~ N(0, 1) independent of X; train.loss = squared is ½·mean (f − y)².",
    "Step normalised by the width: γ_eff = γ·16/d_m (step_norm = width), so that γ_eff·λ_max(K₀)/N is about the "
    "same at every width; step_norm = none is the literal γ at every width (diverges from d_m = 256 under LeCun).",
    "Every cell's data, init and probes come from separate streams of a key derived from the hash of its config.",
)

D_REF = 16  # the width at which the normalised step equals γ

DEFAULTS = {
    "data": {"name": "wu2023", "d_s": 8, "d": 16, "N": 100, "n_test": 100, "token_norm": "d", "target": "gaussian"},
    "model": {"name": "wu2023", "alpha": 0.5, "init": "lecun"},
    "train": {
        "loss": "squared",
        "optimizer": "gd",
        "lr": 1.0,
        "batch_size": 0,
        "max_steps": 400,
        "loss_threshold": 0.0,
    },
}


def step(gamma: float, d_m: int, step_norm: str) -> float:
    """γ_eff: γ·D_REF/d_m under step_norm = "width", γ under "none"."""
    if step_norm == "width":
        return gamma * D_REF / d_m
    if step_norm == "none":
        return gamma
    raise ValueError(f"step_norm: unknown {step_norm!r}; valid: width, none")


def stepped_cells(spec) -> list[dict]:
    """The spec's cells, each with the step γ_eff of its width (d_m, or the ViT's D)."""
    from attnlab.experiments.config import expand
    from attnlab.experiments.wu2023.analysis import width_key

    return [c | {"train.lr": step(spec.gamma, c[width_key(c)], spec.step_norm)} for c in expand(spec)]
