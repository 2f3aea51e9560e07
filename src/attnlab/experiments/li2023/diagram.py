"""The base of the li2023 phase diagrams: :class:`DiagramSpec`, the fields every diagram shares,
and :class:`Diagram`, the experiment over (x, N) whose staged cells tune the lr on validation
runs, then run the grid, the η stage and the linear learner on the mean token on the same draws,
and whose analysis reports N_c per column beside the error floors, with the claims its
subclasses set."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import Field, PositiveFloat, PositiveInt

from attnlab import rules
from attnlab.data import li2023 as ldata
from attnlab.errors import AttnlabError
from attnlab.experiments.base import Analysis, Claim, Experiment, rounded
from attnlab.experiments.config import ExperimentSpec, expand
from attnlab.experiments.li2023 import diagram_plot
from attnlab.experiments.li2023.floor import column_fields, margins, oracle_floor
from attnlab.experiments.li2023.phase import columns, iterations


class DiagramSpec(ExperimentSpec):
    """Fields of every li2023 phase diagram."""

    n_boot: int = Field(300, ge=20, description="bootstrap resamples for intervals")
    tune_lr: list[PositiveFloat] = Field(
        default_factory=list, description="learning rates tried on validation runs before the grid ([]: use train.lr)"
    )
    tune_x: float | None = Field(None, description="the column the lr is tuned at (None: the grid's middle value)")
    tune_N: PositiveInt | None = Field(None, description="the N the lr is tuned at (None: the grid's middle value)")
    tune_reps: PositiveInt = Field(4, description="validation runs per learning rate")
    p_margin: tuple[float, float] = Field(
        (1.5, 2.5), description="equivalence margin of the exponent p of N_c ∝ α_*^−p"
    )
    law_level: float = Field(
        0.05, gt=0, lt=1, description="level of the likelihood-ratio tests that decide the law (p = 2 against p = 4)"
    )
    r2_min: float = Field(0.9, gt=0, le=1, description="R² the paper's straight line must reach")
    iter_margin: tuple[float, float] = Field((0.5, 1.5), description="margin of r in T ∝ α_*^−r")
    shift_level: float = Field(
        0.99,
        gt=0,
        lt=1,
        description="level of the shift claim's bootstrap interval",
    )
    oracle_n: PositiveInt = Field(4000, description="fresh samples per column for the oracle floor")
    floor: bool = Field(
        True, description="train the linear learner on the mean token (li2023-linear) on every grid cell, same draws"
    )
    floor_lr: list[PositiveFloat] = Field(
        default_factory=lambda: [1.0, 4.0, 16.0, 64.0], description="learning rates tried for the linear learner"
    )
    free_z: float = Field(
        4.0,
        description="a column is free of the mean-token floor where its analytic margin z ≥ this: the laws are "
        "fitted on those columns only (a linear rule on the mean token succeeds there too)",
    )
    min_free_columns: PositiveInt = Field(
        4, description="fewer columns free of the floor: the law claims are descriptive (the design cannot decide)"
    )
    eta_mults: list[PositiveFloat] = Field(
        default_factory=list,
        description="η stage: the chosen lr times each of these, at the tuning column and N "
        "([]: none); decides T ∝ η^−1",
    )
    eta_reps: PositiveInt = Field(8, description="runs per η of the η stage")
    one_pass: bool = Field(
        False, description="one-pass SGD on fresh samples: every run takes ⌈N/b⌉ steps, each sample seen once (N = b·T)"
    )
    max_confusion_ratio: float = Field(
        1 / (2 * np.e), gt=0, description="largest n_#/n_* a column may have (the theory's c < 1/(2e))"
    )


TUNE_SEED = 7919  # tuning runs use seed + this: their data are independent draws from every grid cell's


def check_counts(grid: list[dict], max_ratio: float) -> None:
    """The α_* columns of a grid as realised counts: the net count n_* − n_# strictly increasing
    with α_* (two columns of equal net count are the same difficulty: the label is the majority
    vote) and n_#/n_* ≤ ``max_ratio``; an error names the field otherwise."""
    cols = {}
    for c in grid:
        L = c["data.L"]
        cols[c["data.alpha_star"]] = (ldata.n_tokens(c["data.alpha_star"], L), ldata.n_tokens(c["data.alpha_hash"], L))
    counts = [cols[a] for a in sorted(cols)]
    for (s0, h0), (s1, h1) in zip(counts, counts[1:], strict=False):
        if s1 - h1 <= s0 - h0:
            raise AttnlabError(
                f"data.n_star: the columns (n_*, n_#) = ({s0}, {h0}) and ({s1}, {h1}) have net counts "
                f"{s0 - h0} and {s1 - h1}; the net count n_* − n_# must increase strictly across the "
                f"α_* columns (drop one, or set data.n_hash)"
            )
    for s_, h in counts:
        if h > max_ratio * s_:
            raise AttnlabError(
                f"data.n_hash: n_#/n_* = {h}/{s_} exceeds {max_ratio:.3g} (the theory's 1/(2e); "
                f"max_confusion_ratio relaxes it)"
            )


def _tune_N(spec) -> int:
    """The N of the tuning and η stages: ``tune_N``, else the grid's middle N."""
    N = spec.data["N"]
    return spec.tune_N if spec.tune_N is not None else sorted(N, key=float)[len(N) // 2] if isinstance(N, list) else N


class Diagram(Experiment):
    """Success rate over (x, N), the critical N_c per column and its law; subclasses set the
    column axis (a data or model field) and, for α_*, the paper's power k of N_c = a + b·α_*^(−k)."""

    axis: str  # "data.alpha_star", "data.tau", "model.sigma", "model.delta"
    power: float | None = None  # k of the paper's straight line (α_* axis only)
    favoured: float | None = None  # the paper's exponent (2 ViT, 4 baseline)
    tags = ("stage",)

    @property
    def axis_name(self) -> str:
        return self.axis.split(".", 1)[1]

    # ------------------------------------------------------------ cells, with the lr tuning stage

    def _at(self, spec, fields: dict, **update):
        """``spec`` with the column axis fixed at a column (its validated data fields for an α_*
        axis: the realised counts, however the grid gave them) and ``update`` applied."""
        kind, name = self.axis.split(".", 1)
        if name == "alpha_star":
            keep = {k: v for k, v in spec.data.items() if k not in ("n_star", "n_hash", "alpha_star", "alpha_hash")}
            table = keep | {"alpha_star": fields["alpha_star"], "alpha_hash": fields["alpha_hash"]}
        else:
            table = getattr(spec, kind) | {name: fields[name] if kind == "data" else fields["x"]}
        return spec.model_copy(update={kind: table} | update)

    def tune_column(self, grid: list[dict], spec) -> tuple[dict, float]:
        """The column the lr is tuned at, chosen before any run from the analytic margin z: the
        hardest column free of the floor (the smallest z ≥ ``free_z``), else the column of largest
        z; among columns of equal z (a model-field axis) the middle one. ``tune_x`` overrides.
        Returns the column's data fields (with its axis value as ``x``) and its z."""
        cols = {k: np.array([c[k] for c in grid]) for k in grid[0]}
        rows = np.ones(len(grid), bool)
        fields = column_fields(cols, self.axis, rows)
        xs = np.unique(cols[self.axis].astype(float))
        for f, x in zip(fields, xs, strict=True):
            f["x"] = float(x)
        z = margins(fields)
        if spec.tune_x is not None:
            i = int(np.argmin(np.abs(xs - spec.tune_x)))
        else:
            free = np.flatnonzero(z >= spec.free_z)
            pool = free[z[free] == z[free].min()] if len(free) else np.flatnonzero(z == z.max())
            i = int(pool[len(pool) // 2])
        return fields[i], float(z[i])

    def _tune_cells(self, spec, fields: dict, lrs, stage: str = "tune") -> list[dict]:
        n = _tune_N(spec)
        update = dict(seed=spec.seed + TUNE_SEED, seeds=1, reps=spec.tune_reps)
        if self.axis.startswith("model.") and stage != "tune":  # the linear learner has no model-field axis
            tune = spec.model_copy(update=update)
        else:
            tune = self._at(spec, fields, **update)
        tune = tune.model_copy(update={"data": tune.data | {"N": n}, "train": tune.train | {"lr": list(lrs)}})
        return self._expand(tune, stage)

    def _floor_spec(self, spec):
        """The linear learner on the mean token, same data fields and recipe, common draws."""
        return spec.model_copy(update={"model": {"name": "li2023-linear"}})

    @staticmethod
    def _expand(spec, stage: str) -> list[dict]:
        """The cells of ``spec`` tagged ``stage``; under ``one_pass`` each takes ⌈N/b⌉ steps."""
        cells = expand(spec, [({"stage": stage}, {})])
        if spec.one_pass:  # each sample seen once: ⌈N/b⌉ steps of batch b
            for c in cells:
                c["train.max_steps"] = -(-c["data.N"] // (c["train.batch_size"] or c["data.N"]))
        return cells

    def cells(self, spec) -> list[dict]:
        """The grid (its lr is the tuning stage's choice once that has run)."""
        spec = self._common(spec)
        grid = self._expand(spec, "grid")  # validated before any tuning run is written
        if self.axis == "data.alpha_star":
            check_counts(grid, spec.max_confusion_ratio)
        return grid

    @staticmethod
    def _common(spec):
        return spec.model_copy(update={"train": spec.train | {"draws": "common"}})  # learners on the same draws

    def stages(self, spec):
        grid = self.cells(spec)
        spec = self._common(spec)
        fields, _ = self.tune_column(grid, spec)
        out, lr = [], float(spec.train["lr"])
        if spec.tune_lr:
            tune = self._tune_cells(spec, fields, spec.tune_lr)
            lr = choose_lr((yield tune), self.axis)["chosen"]
            out += tune
        out += [c | {"train.lr": lr} for c in grid]
        if spec.eta_mults:
            eta = self._at(spec, fields, reps=spec.eta_reps)
            eta = eta.model_copy(
                update={
                    "data": eta.data | {"N": _tune_N(spec)},
                    "train": eta.train | {"lr": [lr * m for m in spec.eta_mults]},
                }
            )
            out += self._expand(eta, "eta")
        if spec.floor:
            floor = self._floor_spec(spec)
            tune = self._tune_cells(floor, fields, spec.floor_lr, stage="floor-tune")
            flr = choose_lr((yield tune), self.axis)["chosen"]
            out += tune + [c | {"train.lr": flr} for c in self._expand(floor, "floor")]
        return out

    def analyse(self, cols, spec) -> Analysis:
        stage = cols["stage"]
        g = stage == "grid"
        x, N = cols[self.axis][g].astype(float), cols["data.N"][g]
        success = cols["test_error"][g] == 0
        summary: dict = {
            "runs": int(g.sum()),
            "success rate": rounded(success.mean(), 4),
            "learning rate": float(cols["train.lr"][g][0]),
        }
        if "model.name" in cols:
            summary["parameters"] = self.n_params(cols, g)
        sub = lambda m: {k: v[m] for k, v in cols.items()}
        if (stage == "tune").any():
            summary["lr tuning (validation runs)"] = choose_lr(sub(stage == "tune"), self.axis)
        xs, fields = np.unique(x), column_fields(cols, self.axis, g)
        z = margins(fields)
        free = z >= spec.free_z
        fit = g.copy()
        fit[g] = np.isin(x, xs[free])
        cs = columns(x, N, success, spec.n_boot, spec.seed)
        summary["columns"] = [
            c.as_dict() | {"z": rounded(zi, 3), "free of the floor": bool(f)}
            for c, zi, f in zip(cs, z, free, strict=True)
        ]
        summary["mean test error per column"] = {
            rounded(v, 6): rounded(cols["test_error"][g][x == v].mean(), 5) for v in xs
        }
        floor = oracle_floor(fields, spec.oracle_n)
        summary["oracle error per column"] = {rounded(v, 6): rounded(e, 5) for v, e in zip(xs, floor, strict=True)}
        summary["mean-token floor"] = self._floor_summary(cols, xs, fields, z, spec)
        summary["columns free of the floor"] = {
            "criterion (set before the run)": f"z ≥ {spec.free_z:g}",
            "values": [rounded(v, 6) for v in xs[free]],
        }
        claims = self._claims(cols, g, fit, [c for c, f in zip(cs, free, strict=True) if f], spec, summary)
        if (stage == "eta").any():
            claims.append(self._eta_claim(sub(stage == "eta"), spec, summary))
        return Analysis(claims=claims, summary=summary)

    @staticmethod
    def n_params(cols, rows) -> int:
        """The parameter count of the model of the first of ``rows`` (trained and the fixed readout)."""
        from attnlab.problem import Composition

        i = int(np.flatnonzero(rows)[0])
        absent = lambda x: x is None or (isinstance(x, float) and np.isnan(x))  # another part's field
        cell = {
            k: (v[i].item() if hasattr(v[i], "item") else v[i])
            for k, v in cols.items()
            if k.split(".")[0] in ("data", "model", "train")
        }
        cell = {k: x for k, x in cell.items() if not absent(x)}
        comp = Composition.of(cell, ())
        return comp.n_params({k: v for k, v in cell.items() if comp.classify(k) == "static"})

    def _floor_summary(self, cols, xs, fields, z, spec) -> dict:
        """Per column: the realised counts, the analytic margin z of the best mean-token rule, its
        chance of zero test errors Φ(z)^n_test, and the linear learner's N_c on the same draws."""
        out = {
            "per column": [
                {
                    "x": rounded(v, 6),
                    "n_star": ldata.n_tokens(f["alpha_star"], f["L"]),
                    "n_hash": ldata.n_tokens(f["alpha_hash"], f["L"]),
                    "z": rounded(zi, 3),
                    "P(zero test errors), best mean-token rule": rounded(ldata.floor_success(zi, f["n_test"]), 4),
                }
                for v, f, zi in zip(xs, fields, z, strict=True)
            ]
        }
        fl = cols["stage"] == "floor"
        if fl.any():
            xf = cols[self.axis][fl].astype(float) if self.axis.startswith("data.") else np.zeros(int(fl.sum()))
            lin = columns(xf, cols["data.N"][fl], cols["test_error"][fl] == 0, spec.n_boot, spec.seed)
            out["linear learner"] = {
                "learning rate": float(cols["train.lr"][fl][0]),
                "columns": [c.as_dict() for c in lin],
            }
            if (cols["stage"] == "floor-tune").any():
                out["linear learner"]["lr tuning"] = choose_lr(
                    {k: v[cols["stage"] == "floor-tune"] for k, v in cols.items()}, self.axis
                )
        return out

    def _eta_claim(self, cols, spec, summary) -> Claim:
        """T ∝ η^−e at the tuning column and N, the capped runs censored: e inside ``iter_margin``."""
        eta = cols["train.lr"].astype(float)
        ok = cols["status"] != "diverged"
        est = iterations(
            np.ones(int(ok.sum())), cols["data.N"][ok], cols["stop_step"][ok], cols["status"][ok] == "cap", eta=eta[ok]
        )
        summary["iterations: e of T ∝ η^−e"] = est.as_dict() | {"runs": int(ok.sum()), "lr": sorted(set(eta.tolist()))}
        return Claim.of(
            "iterations-eta",
            "iterations to zero training hinge loss fall like η⁻¹ (T ∝ η^−e, e = 1)",
            rules.equivalence(est.value, est.lo, est.hi, spec.iter_margin, "e"),
            f"{int(ok.sum())} runs at the tuning column, capped runs censored at the cap",
        )

    @staticmethod
    def law_gate(v: rules.Verdict, cs: list, spec, N_grid=None) -> tuple[rules.Verdict, str]:
        """A law claim is descriptive with fewer than ``min_free_columns`` columns free of the floor,
        or (given the grid's N values) where most of those columns' N_c lie within two grid steps of
        its smallest N: there the law is read off the grid's edge, where a column's crossing is
        barely resolved and a censored one carries no slope."""
        if len(cs) < spec.min_free_columns:
            return (
                rules.Verdict(rules.DESCRIPTIVE, v.measured, v.rule),
                f"descriptive: {len(cs)} column(s) free of the mean-token floor (z ≥ {spec.free_z:g}), fewer "
                f"than {spec.min_free_columns}; where the floor binds the fit would carry its shape",
            )
        if N_grid is not None and len(N_grid) >= 3:
            edge = sorted(N_grid)[2]
            low = [c for c in cs if c.status == "below grid" or (c.status == "crossed" and c.value <= edge)]
            if 2 * len(low) > len(cs):
                return (
                    v.reported(""),
                    f"descriptive: {len(low)} of the {len(cs)} free columns have N_c ≤ {edge:g}, within two grid "
                    f"steps of the smallest N ({min(N_grid):g}): the law would be read off the grid's edge",
                )
        return v, ""

    def _claims(self, cols, g, fit, cs, spec, summary) -> list[Claim]:
        raise NotImplementedError

    # ------------------------------------------------------------ figures

    def coordinate(self, x):
        """The diagram's horizontal coordinate of a column value (α_*^(−k) for α_*)."""
        return x**-self.power if self.power else x

    def xlabel(self) -> str:
        if self.axis_name == "alpha_star":
            return f"α_*^−{self.power:g}"
        return {"tau": "token noise τ", "sigma": "initial value error σ", "delta": "initial query/key error δ"}.get(
            self.axis_name, self.axis_name
        )

    def figures(self, cols, spec, analysis: Analysis, out: Path) -> list[Path]:
        return diagram_plot.draw(self, cols, spec, analysis, out)


def choose_lr(cols, axis: str) -> dict:
    """The lr with the lowest mean validation error (ties: lowest validation loss); the table."""
    lr = cols["train.lr"].astype(float)
    table = []
    for v in np.unique(lr):
        s = lr == v
        table.append(
            {
                "lr": float(v),
                "val_error": rounded(cols["test_error"][s].mean(), 5),
                "val_loss": rounded(np.nanmean(cols["test_loss"][s]), 5),
                "diverged": int(np.sum(cols["status"][s] == "diverged")),
                "runs": int(s.sum()),
            }
        )
    ok = [r for r in table if r["val_error"] is not None and r["diverged"] == 0] or table
    best = min(ok, key=lambda r: (r["val_error"], r["val_loss"] if r["val_loss"] is not None else np.inf))
    where = {axis: float(cols[axis][0])} if axis in cols and cols[axis][0] is not None else {}
    return {"chosen": best["lr"], "table": table, "where": where | {"N": int(cols["data.N"][0])}}
