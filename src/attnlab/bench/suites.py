"""The bench suites: each a declaration of its experiment, scale, baseline model, FLOP count and outcome; the cell subset."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnlab.bench.flops import flops_jiang2024, flops_jiang2024_dual, flops_li2023, flops_wu2023
from attnlab.bench.torch_models import _jiang2024_class, _li2023_class, _wu2023_class
from attnlab.errors import AttnlabError
from attnlab.experiments.base import rounded
from attnlab.problem import KEY_ONLY, Composition, Recipe, split

# ---------------------------------------------------------------- suites


@dataclass(frozen=True)
class Outcome:
    """The per-cell result both sides report, and the experiment's success rule on it:
    success = value < level (``op`` "<") or value ≤ level ("<=")."""

    name: str  # report keys attnlab_<name>, baseline_<name>
    label: str
    op: str
    attnlab: Callable[[dict[str, np.ndarray]], np.ndarray]  # from the results table's columns
    baseline: Callable[[dict], float]  # from one serial run (:func:`serial_cell`)
    log: bool = False  # compare log10 values (a ratio spanning decades)
    floor: float | None = None  # values below it are not resolved: raised to it before comparing


def _loss_ratio(cols: dict[str, np.ndarray]) -> np.ndarray:
    initial = np.array([float(t[0]) for t in cols["trace_train_loss"]])
    return cols["train_loss"].astype(float) / initial


def _ratio(r: dict) -> float:
    return r["train_loss"] / r["initial_train_loss"] if r["initial_train_loss"] else float("nan")


@dataclass(frozen=True)
class Suite:
    """A benchmark suite: an experiment's grid, the baseline's PyTorch model and the outcome compared.

    ``module(torch, hp)`` builds the model with its init law from the attnlab Hparams of a cell;
    ``layout`` maps each attnlab parameter to the module's tensor (stored transposed or not), for
    the same-parameters check; ``flops(hp)`` is the per-sample count; ``requires`` the cell
    values the serial loop implements beyond the common ones (plain GD, float32)."""

    name: str
    experiment: str
    scale: str
    model: str
    module: Callable[[Any, Any], Any]
    layout: dict[str, tuple[str, bool]]
    flops: Callable[[Any], dict[str, int]]
    outcome: Outcome
    level: Callable[[Any], float]
    implementation: str
    requires: dict[str, tuple] = field(default_factory=dict)
    test_every_step: bool = False
    threads: str = "calibrate"  # the baseline's intra-op threads: "all" cores, or "calibrate" (see Baseline)
    row: Callable[[dict], dict] = lambda c: {}
    notes: tuple[str, ...] = ()
    sets: tuple[str, ...] = ()  # --set overrides of the experiment's spec at the suite's scale: its own grid
    fields: dict = field(default_factory=dict)  # values every cell of the suite takes
    flops_dual: Callable[[Any, int], dict[str, int]] | None = None  # (hp, training tokens) -> the dual form's count

    def per_sample(self, cell: dict, n_pad: int | None = None) -> dict[str, dict[str, int]]:
        """The model's per-sample FLOP counts for ``cell``: "run", the form attnlab trains it in at
        ``n_pad`` training rows (the dual one where the engine uses it), at the cell's N;
        "run_padded", the same at n_pad; "least", the cheaper exact form at N (the floor's);
        "plain", the plain form's (the serial baseline's)."""
        hp = model_hparams(cell)
        plain = self.flops(hp)
        if self.flops_dual is None:
            return {"run": plain, "run_padded": plain, "least": plain, "plain": plain}
        comp = Composition.of(cell)
        static = {k: v for k, v in cell.items() if comp.classify(k) == "static"}
        N = int(cell["data.N"])
        n_pad = N if n_pad is None else int(n_pad)
        ds = split(static, "data")
        tokens = comp.data.input_shape(ds)["tokens"]
        used = comp.dual_form(Recipe(**split(static, "train")), hp, {comp.data.n_train: n_pad}, ds) is not None
        dual, dual_pad = self.flops_dual(hp, N * tokens), self.flops_dual(hp, n_pad * tokens)
        cost = lambda f: f["forward"] + f["backward"]  # noqa: E731
        return {
            "run": dual if used else plain,
            "run_padded": dual_pad if used else plain,
            "least": dual if cost(dual) < cost(plain) else plain,
            "plain": plain,
        }

    def check(self, cell: dict, baseline: bool = True) -> None:
        """The cell is this suite's model (the FLOP count) and, with ``baseline``, a recipe the
        serial loop implements; else one clear error."""
        if cell.get("model.name") != self.model:
            raise AttnlabError(
                f"bench: the FLOP count and the baseline know model {self.model!r}, got {cell.get('model.name')!r}"
            )
        if not baseline:
            return
        want = {
            "train.optimizer": ("gd",),
            "train.dtype": ("float32",),
            "train.loss": tuple(LOSS_NAMES),
            "train.stop_on": tuple(STOP_NAMES),
        } | self.requires
        bad = {k: cell.get(k) for k, ok in want.items() if k in cell and cell[k] not in ok}
        bad |= {k: v for k, v in cell.items() if k.startswith("train.lr_mult.")}
        if bad:
            valid = ", ".join(f"{k} in {list(v)}" for k, v in want.items())
            raise AttnlabError(
                f"bench: the {self.name} serial baseline implements {valid} (no lr_mult); cell has {bad}"
            )


LOSS_NAMES = ("logistic", "hinge", "squared")
STOP_NAMES = ("loss", "hinge", "error")

SUITES: dict[str, Suite] = {
    "jiang2024": Suite(
        name="jiang2024",
        experiment="jiang2024-fig1",
        scale="paper",
        model="jiang2024",
        module=lambda torch, hp: _jiang2024_class(torch)(hp.d, hp.d_h, hp.d_v, hp.init_scale, hp.tau, hp.train_w_O),
        layout={
            "W_Q": ("W_Q.weight", True),
            "W_K": ("W_K.weight", True),
            "W_V": ("W_V.weight", True),
            "w_O": ("w_O.weight", False),
        },
        flops=flops_jiang2024,
        flops_dual=flops_jiang2024_dual,
        outcome=Outcome(
            "test_loss", "test loss", "<", lambda cols: cols["test_loss"].astype(float), lambda r: r["test_loss"]
        ),
        level=lambda spec: float(spec.level),
        implementation="PyTorch, one model at a time: nn.Linear (default init / init_scale), torch.optim.SGD, "
        "full batch, test loss at every step; data = attnlab's (same key), init draws differ",
        requires={
            "train.loss": ("logistic",),
            "train.batch_size": (0,),
            "train.stop_on": ("loss",),
            "train.stop_every": (1,),
        },
        test_every_step=True,
        row=lambda c: {
            "mu": c.get("data.mu"),
            "snr": rounded(c["data.mu"] / (c["data.sigma_p"] * c["data.d"] ** 0.5), 4),
        },
    ),
    "li2023": Suite(
        name="li2023",
        experiment="li2023-fig1",
        scale="cpu",
        model="li2023-vit",
        module=lambda torch, hp: _li2023_class(torch)(
            hp.d, hp.m, hp.m_a, hp.m_b, hp.init, hp.sigma, hp.delta, hp.a_scale
        ),
        layout={
            "W_Q": ("W_Q.weight", False),
            "W_K": ("W_K.weight", False),
            "W_V": ("W_V.weight", False),
            "W_O": ("W_O.weight", False),
            "a": ("a", False),
        },
        flops=flops_li2023,
        outcome=Outcome(
            "test_error", "test error", "<=", lambda cols: cols["test_error"].astype(float), lambda r: r["test_error"]
        ),
        level=lambda spec: 0.0,
        implementation="PyTorch, one model at a time: nn.Linear layers drawn N(0, 1/fan_in) (attnlab's law), fixed "
        "±1/√m readout, torch.optim.SGD on mini-batches in attnlab's order, hinge loss of the "
        "training set judged every stop_every steps, test error once at the stop; data = attnlab's "
        "(same key), init draws differ",
        requires={"data.sparsify": ("none",)},
        row=lambda c: {"alpha_star": c.get("data.alpha_star")},
        notes=("li2023-fig1's lr-tuning stage is not run: every cell trains at its train.lr",),
    ),
    "wu2023": Suite(
        name="wu2023",
        experiment="wu2023-width",
        scale="cpu",
        model="wu2023",
        module=lambda torch, hp: _wu2023_class(torch)(hp.d, hp.d_m, hp.alpha, hp.init),
        layout={
            "W_Q": ("W_Q.weight", False),
            "W_K": ("W_K.weight", False),
            "W_V": ("W_V.weight", False),
            "w_O": ("w_O.weight", False),
        },
        flops=flops_wu2023,
        # ½(f − y)² in float32 with f, y ~ 1 stalls at ~10⁻¹⁴…10⁻¹² of the initial loss (f resolved to ~10⁻⁷):
        # below 10⁻¹⁰ two runs differ by rounding, not by training
        outcome=Outcome("loss_ratio", "final/initial train loss", "<=", _loss_ratio, _ratio, log=True, floor=1e-10),
        level=lambda spec: float(spec.target),
        implementation="PyTorch, one model at a time: nn.Linear layers drawn N(0, 1/fan_in) (LeCun, attnlab's law), "
        "torch.optim.SGD, full batch, the training loss logged every epoch; data = attnlab's (same "
        "key), init draws differ",
        requires={"model.heads": (1,), "model.tied": (False,), "model.ffn": (False,), "train.batch_size": (0,)},
        row=lambda c: {"d_m": c.get("model.d_m"), "alpha": c.get("model.alpha")},
        # the loss-target grid the suite has always timed (no kernel probes: the baseline records none)
        sets=("data.N=4,8,16,32,64", "data.d=16", "model.d_m=1,2,3,4,6,8,12,16,32,64", "train.max_steps=800", "reps=6"),
        fields={"train.probes": ""},
    ),
}


def get_suite(name: str) -> Suite:
    if name not in SUITES:
        raise AttnlabError(f"--suite: unknown {name!r}; valid: {', '.join(SUITES)}")
    return SUITES[name]


def model_hparams(cell: dict):
    """The attnlab Hparams of a cell's model (widths resolved as the engine resolves them)."""
    return Composition.of(cell).hparams(cell)


# ---------------------------------------------------------------- cells


def grid_axes(cells: list[dict]) -> list[str]:
    """The fields that vary across ``cells``, except the key-only ones (seed, block, rep)."""
    out = []
    for f in sorted(cells[0]):
        if f in KEY_ONLY:
            continue
        if len({json.dumps(c.get(f), sort_keys=True) for c in cells}) > 1:
            out.append(f)
    return out


def select_cells(cells: list[dict], k: int, seed: int = 0) -> list[dict]:
    """A seeded subset of ``k`` cells spread over the grid: the cells are ordered by their grid
    coordinates (varying fields in name order; then block and rep), cut into k strata of
    consecutive cells of near-equal size, and one cell is drawn from each stratum. Every stratum is
    a contiguous block of the grid, so every value of the first axis gets ≈ k / its size cells,
    each spread along the others."""
    if k <= 0:
        return []
    axes = grid_axes(cells) + [f for f in KEY_ONLY if f in cells[0]]
    order = sorted(range(len(cells)), key=lambda i: tuple(cells[i].get(f) for f in axes))
    rng = np.random.default_rng(seed)
    strata = np.array_split(np.asarray(order), min(k, len(cells)))
    return [cells[int(rng.choice(s))] for s in strata]


def suite_cells(suite: str, scale: str | None = None) -> tuple[Any, Any, list[dict]]:
    """(experiment, spec, every cell of the grid) of a suite at ``scale`` (None: the suite's own)."""
    from attnlab.experiments import get

    s = get_suite(suite)
    exp = get(s.experiment)
    scale = scale or s.scale
    spec = exp.spec(scale, list(s.sets) if scale == s.scale else [])
    return exp, spec, [c | s.fields for c in exp.cells(spec)]
