"""H1 / H0 of the claims the trained wu2023 experiments share (linear, stability, drift-*, lmin-*,
speed-gamma), with their sources, as perturbations of the theory's world of GD runs (:mod:`.runs`)."""

from __future__ import annotations

from attnlab.audit import ClaimAudit, Hypothesis
from attnlab.experiments.wu2023.analysis import INITS

S_LINEAR = "Wu et al. 2023, Thm. 1 (LeCun/He, d_m ≳ N²): GD converges linearly, L_t ≤ (1 − γλ_min(K₀)/N)^{2t} L_0"
S_LAZY = "Wu et al. 2023, Sec. 5.1 (b, c): the NTK regime, ‖K_t − K_0‖/‖K_0‖ = O(d_m^−1/2) (Jacot et al. 2018)"
S_STABLE = "the linearised dynamics of ½·mean (f − y)²: stable iff γ_eff·λ_max(K₀)/N < 2 (package docstring)"
S_LMIN = "Wu et al. 2023, Thm. 1 / Sec. 5.2: λ_min(K₀) ∝ d_m under LeCun/He, O(1) under NTK init"
GEOMETRIC = {"form": "geometric", "bound": 2.0, "catapult": True, "drift": -0.5}


def h_linear(world: dict) -> ClaimAudit:
    return ClaimAudit(
        "linear",
        Hypothesis("L_t ∝ ρ^t after the top mode's transient (linear convergence)", S_LINEAR, world),
        Hypothesis(
            "after the top mode, L_t ∝ 1/(1 + t/10) (a polynomial, sublinear decay)",
            "the O(1/t) rate of GD without strong convexity, which the theorem improves to linear",
            world | {"form": "polynomial"},
        ),
    )


def h_stability(world: dict) -> ClaimAudit:
    return ClaimAudit(
        "stability",
        Hypothesis("runs below γ_eff·λ_max(K₀)/N = 2 train; 2 … 6 catapult; above 6 diverge", S_STABLE, world),
        Hypothesis(
            "runs diverge from γ_eff·λ_max(K₀)/N = 1 on (a bound half as large)",
            "the bound of mean (f − y)² without the ½ (the sheet's loss convention, assumed)",
            world | {"bound": 1.0, "catapult": False},
        ),
    )


def h_drift(claim: str, world: dict) -> ClaimAudit:
    what = "‖K_T − K_0‖/‖K_0‖" if "kernel" in claim else "‖θ_T − θ₀‖/‖θ₀‖"
    return ClaimAudit(
        claim,
        Hypothesis(f"{what} ∝ d_m^−1/2 (lazy training)", S_LAZY, world),
        Hypothesis(
            f"{what} ∝ d_m^−0.1 (a width trend 5× weaker than the lazy regime's)",
            "no lazy regime (movement Θ(1) in width) but a weak trend, short of the rule's bound −0.15",
            world | {"drift": -0.1},
        ),
    )


def h_lmin(world: dict) -> list[ClaimAudit]:
    hinge, flat = "λ_min(K₀) ∝ max(d_m, N) (∝ d_m from N on)", "λ_min(K₀) flat in d_m"
    out = []
    for name in INITS:
        h1, h0 = (flat, hinge) if name == "ntk" else (hinge, flat)
        out.append(
            ClaimAudit(
                f"lmin-{name}",
                Hypothesis(f"{name}: {h1}", S_LMIN, world),
                Hypothesis(
                    f"{name}: {h0}",
                    "the other parameterisation's law (the contrast the paper draws)",
                    world | {"lmin": world["lmin"] | {name: 0.0 if name != "ntk" else 1.0}},
                ),
            )
        )
    return out


def h_speed_gamma(world: dict) -> ClaimAudit:
    return ClaimAudit(
        "speed-gamma",
        Hypothesis("λ_min(K₀) ∝ max(d_m, N) under LeCun/He, flat under NTK init", S_LMIN, world),
        Hypothesis(
            "λ_min(K₀) flat under every init: LeCun/He's kernel larger by a constant factor only",
            "no width effect: the parameterisations' constant kernel factor (the 1/√fan_in multipliers)",
            world | {"lmin": {"lecun": 0.0, "he": 0.0, "ntk": 0.0}},
        ),
    )
