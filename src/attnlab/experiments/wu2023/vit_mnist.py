"""wu2023-vit-mnist: training-loss curves of a Vision Transformer on MNIST (Wu et al. 2023, Sec.
5.2) for several widths, τ₀ = D^(−1/2) against D^(−1) and LeCun / He against NTK init.

The model is the ViT of :mod:`attnlab.models.vit` (patch embedding with learned positions, a pre-LN
block of single-head softmax attention and a GELU MLP, residuals, a final LayerNorm on the mean
token, a linear head), not the shallow encoder of the theorem (that one on MNIST patches is
``wu2023-encoder-mnist``). One head, so τ₀ = d_h^(−α) = D^(−α): α = ½ and 1 are the paper's two
scalings at width D. ``init`` = lecun, he (N(0, c/fan_in) weights) or ntk (N(0, 1) weights with
1/√fan_in in the forward pass: lecun's function at init, with the NTK parametrisation's gradients).

Data, loss, step and probes are ``wu2023-encoder-mnist``'s (:mod:`.encoder_mnist`): MNIST 3 vs 8,
labels ±1, 7×7 patches (16 tokens of d = 49), standardised pixels, N = 100, ½·mean (f − y)²,
full-batch GD for 400 epochs at the width-normalised step γ_eff = γ·16/D, the ``wu2023`` probes
(K_t and its spectrum, the kernel and weight drifts, logit std and attention TV over every block
and head; the output weights' block is the head w_head). So are the claims and their rules, with
D for d_m; the lmin claims fit λ_min of the head's block K₀^{w_head} = H Hᵀ (H the final-LN
features: ∝ D under lecun and he, flat under ntk) from D ≥ 10N, and are descriptive below.
The ViT is outside the theorem's model (LayerNorm, residuals, an MLP, a trained embedding): every
claim is in the investigation regime, a check of whether the encoder's behaviour carries over.

*Assumed* (the sheet names no ViT configuration): depth 1, one head, MLP ratio 2, mean pooling,
learned positions, qkv biases. cpu scale: D = 16 … 64 in float32, probes every 20 epochs (a cell's
parameters grow ∝ D²); paper scale D = 16 … 1024 in float64. The lmin claims need widths ≥ 10N =
1000, whose Jacobian (≈ 10⁷ parameters × N samples) does not fit here, so they are descriptive at
cpu scale (no 0-step kernel cells, unlike the encoder's).

Step. γ_eff = γ·16/D with γ = 0.01, set after a pilot of K₀ spectra (one draw per point, no
training, N = 100, ``/tmp/vit-pilot``): λ_max(K₀)/N = 93, 199, 553 (LeCun, τ₀ = D^−1/2), 65, 317,
820 (D^−1), He 107 … 974, NTK init 25 … 54 (flat) at D = 16, 64, 256 — 40–120× the encoder's
(the LayerNorm'd features give the head a kernel of order D, the embedding and MLP add theirs), so
the encoder's γ = 0.5 would put every LeCun/He run at a ratio of 20–80. At γ = 0.01 the ratio is
0.9 … 1.6 at D = 16 and 0.2 … 0.6 at 256 (LeCun/He), 0.02 … 0.5 under NTK init. Stability is
recorded per run as γ_eff·λ_max(K₀)/N, and a run above 2 is flagged.
λ_min(K₀) at D = 16, 64, 256 (LeCun, τ₀ = D^−1/2): 0.29, 1.3, 11; of the head block 0 below D = N
and 0.43 at 256.

Measured at cpu scale (D = 16, 32, 64; 54 cells, 3.7 min; ``results/wu2023-vit-mnist-cpu``): linear
fails — 16 of 33 unflagged LeCun/He runs favour geometric decay by log LR ≥ log 32, 13 the power
law, sign test p = 0.64 (its audit: power 1.00, false pass 0.00; a run with D = 128 too, 18.5 min
on shared cores: 17 of 45 linear, 23 power law); stability passes (51/51, 3 He runs flagged at
ratios up to 4.4); drift-weight passes (slopes −0.95, −0.93); uniform passes (attention TV gap 0.32
[0.23, 0.41] at D = 64). Reported: L_T/L_0 0.045 … 0.16 (D^−1/2) and 0.18 … 0.27 (D^−1); logit std
flat under D^−1/2 (−0.01) and ∝ D^−0.52 under D^−1.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, PositiveFloat

from attnlab.experiments import wu2023 as common
from attnlab.experiments.config import merge
from attnlab.experiments.wu2023 import encoder_mnist as enc
from attnlab.experiments.wu2023.analysis import INITS, TRAIN
from attnlab.experiments.wu2023.audit.mnist import VIT_MNIST_LEVELS, VIT_MNIST_SOURCE, mnist_design
from attnlab.experiments.wu2023.mnist_claims import ALPHAS
from attnlab.parts import register

VIT = {"name": "vit", "depth": 1, "heads": 1, "mlp_ratio": 2.0, "pool": "mean", "pos": "learned", "qkv_bias": True}
GRID = {"alpha": list(ALPHAS), "init": list(INITS)}
# smoke: one width (one compiled program, the suite's slowest smoke run at two); the width fits it
# leaves empty run end to end in wu2023-encoder-mnist's smoke, whose analysis this one shares
SMOKE = dict(
    data={"N": 8, "n_test": 8},
    model={"D": [8], "alpha": list(ALPHAS), "init": "lecun"},
    train={"max_steps": 20, "log_every": 5, "log_dense_until": 5},
    reps=2,
    gamma=0.002,
)
# cpu: float32 and D ≤ 64 (the parameters grow ∝ D²: with D = 128 the run took 18.5 min, half of it at 128); no
# 0-step kernel cells: the Jacobian at D ≥ 10N = 1000 (≈ 10⁷ parameters × N) does not fit in memory here
CPU = dict(model={"D": [16, 32, 64]} | GRID, train={"dtype": "float32", "log_every": 20}, reps=3)
PAPER = dict(data={"N": 200}, model={"D": [16, 64, 256, 1024]} | GRID, reps=5)


class Spec(enc.Spec):
    gamma: PositiveFloat = Field(0.01, description="step γ (γ_eff = γ·16/D under step_norm = width)")


class VitMnist(enc.EncoderMnist):
    id = "wu2023-vit-mnist"
    width = "D"
    title = "Wu et al. 2023, Sec. 5.2: training loss of a ViT on MNIST across widths, scalings and inits"
    description = __doc__
    Spec = Spec
    audit = mnist_design(VIT_MNIST_LEVELS, VIT_MNIST_SOURCE)
    scales = {"smoke": SMOKE, "cpu": CPU, "paper": PAPER}
    assumptions = (
        "A ViT (models.vit): patch embedding, learned positions, one pre-LN block of one-head softmax attention "
        "(τ₀ = D^(−α)) and a GELU MLP of width 2D, residuals, final LayerNorm on the mean token, linear head; depth, "
        "heads and MLP ratio are assumed (the sheet names none).",
        *enc.EncoderMnist.assumptions[:2],
        "Step γ_eff = γ·16/D with γ = 0.01, one raw step for every init at a width; γ set after a pilot of K₀ spectra "
        "(no training) so that LeCun/He stay below γ_eff·λ_max(K₀)/N ≈ 1.6 (the ViT's kernel is 40–120× the "
        "encoder's).",
        *enc.EncoderMnist.assumptions[3:],
    )

    def derive(self, table, spec):
        """The encoder's derived columns; τ₀'s α at timm's ½ is left out of a ViT cell (its id stays
        that of earlier cells), so its null is filled with ½."""
        table = super().derive(table, spec)
        if "model.alpha" not in table.column_names:  # every cell at ½
            return table.append_column("model.alpha", pa.array([0.5] * table.num_rows))
        i = table.column_names.index("model.alpha")
        return table.set_column(i, "model.alpha", pc.fill_null(table.column(i), 0.5))

    def defaults(self):
        return merge(common.DEFAULTS, {"train": TRAIN | {"save_params": True}}) | {"data": enc.DATA, "model": VIT}


EXPERIMENT = register(VitMnist())
