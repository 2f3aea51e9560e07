"""The experiment contract (the pipeline that runs it: :mod:`attnlab.experiments.pipeline`; its spec
and cells: :mod:`attnlab.experiments.config`).

Experiment = spec(scale) → cells → results → analysis → figures + claims:

    spec     a pydantic model: the experiment's own fields (grid sizes, pass-rule thresholds,
             reps, seed blocks) and three part tables, ``data``, ``model`` and ``train``, whose
             fields belong to the composed problem (:mod:`attnlab.problem`). A part field given
             several values is a grid axis. Each scale (smoke, cpu, paper) is a set of values; a
             TOML ``--config`` and then ``--set name=v1,v2`` override any of them
    cells    flat namespaced dicts, one per run: the grid × ``seeds`` blocks × ``reps``. An
             experiment with stages (e.g. tune the learning rate on validation runs, then run
             the grid with the chosen one) plans them in a generator, ``stages``: ``results =
             yield cells`` has a stage trained and builds the next stage's cells from its
             results; every stage lands in the same store
    derive   optional: rows computed from the trained cells (e.g. evaluations of the saved
             parameters under token removal), one or more per cell; the derived table is
             results.parquet
    analyse  fits and claims from the results table (a claim passes only on a measured value)
    figures  PNG + PDF files in the output directory
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pydantic import ValidationError

from attnlab import rules
from attnlab.errors import AttnlabError
from attnlab.experiments.config import (
    ExperimentSpec,
    check_parts,
    expand,
    format_validation_error,
    load_toml,
    merge,
    parse_sets,
)
from attnlab.rules import Verdict

SCALES = ("smoke", "cpu", "paper")

Stages = Generator[list[dict], dict[str, np.ndarray], list[dict]]


def staged(stages: Stages, answer: Callable[[list[dict]], dict[str, np.ndarray]]) -> list[dict]:
    """Run an experiment's :meth:`~Experiment.stages` to the end, answering each stage with
    ``answer(cells)`` (the pipeline trains it; an audit simulates it); returns every cell."""
    try:
        cells = next(stages)
        while True:
            cells = stages.send(answer(cells))
    except StopIteration as done:
        return done.value


def tagged(stages: Stages, tags: dict) -> Stages:
    """``stages`` with ``tags`` added to every cell it yields and returns (an experiment made of
    another's stages, once per setting)."""
    try:
        cells = next(stages)
        while True:
            cells = stages.send((yield [c | tags for c in cells]))
    except StopIteration as done:
        return [c | tags for c in done.value]


@dataclass
class Claim:
    """A claim written before the run, and its measured verdict: ``outcome`` is pass, fail,
    inconclusive (e.g. no boundary inside the grid) or descriptive (a measurement its design
    cannot decide: ``pass`` is None); it passes only on a measured value. ``regime`` says where
    the verdict holds (:data:`attnlab.rules.REGIMES`; empty: the experiment's own)."""

    id: str
    statement: str
    measured: Any
    expected: str
    outcome: str
    detail: str = ""
    regime: str = ""

    @classmethod
    def of(cls, id: str, statement: str, v: Verdict, detail: str = "", regime: str = "") -> Claim:
        return cls(id, statement, v.measured, v.rule, v.outcome, detail or v.detail, regime)

    @property
    def passed(self) -> bool | None:
        return None if self.outcome == rules.DESCRIPTIVE else self.outcome == rules.PASS

    def to_json(self) -> dict:
        d = asdict(self)
        d["pass"] = self.passed
        return d


@dataclass
class Analysis:
    claims: list[Claim]
    summary: dict[str, Any] = field(default_factory=dict)  # fitted numbers shown in the report
    notes: list[str] = field(default_factory=list)
    tables: list[tuple[str, list[str], list[list]]] = field(default_factory=list)  # (title, columns, rows) shown


class Experiment:
    id: str
    title: str
    description: str
    Spec: type[ExperimentSpec]
    scales: dict[str, dict[str, Any]]
    assumptions: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()  # the experiment's own key-only cell labels (e.g. regime)
    regime: str = "investigation"  # of its claims, unless a claim names its own (rules.REGIMES)
    audit = None  # the claims' audit design (attnlab.audit.Design)
    controls: tuple = ()  # real runs whose outcomes are known (attnlab.audit.Control)

    def cells(self, spec) -> list[dict]:
        """The grid × seed blocks × reps (override to add variants or tags): the cells known
        before anything is trained, which a dry run shows (a staged experiment's first ones)."""
        return expand(spec)

    def stages(self, spec) -> Stages:
        """Every cell to be analysed, planned stage by stage: ``results = yield cells`` has a
        stage trained (what is done is skipped) and receives its columns, so a later stage can
        depend on an earlier one's results; the return value is every cell, and those not
        trained yet are trained last. Default: no stage, :meth:`cells`."""
        yield from ()
        return self.cells(spec)

    def derive(self, table: pa.Table, spec) -> pa.Table:
        """The results table the analysis reads (default: one row per trained cell)."""
        return table

    def analyse(self, cols: dict[str, np.ndarray], spec) -> Analysis:
        raise NotImplementedError

    def figures(self, cols: dict[str, np.ndarray], spec, analysis: Analysis, out: Path) -> list[Path]:
        raise NotImplementedError

    # ------------------------------------------------------------ spec handling

    def spec(self, scale: str, sets: list[str] | None = None, config: Path | None = None):
        """The scale's values, then a TOML config's, then ``--set`` overrides, validated."""
        if scale not in self.scales:
            raise AttnlabError(f"--scale: unknown {scale!r}; valid: {', '.join(self.scales)}")
        values = merge(self.defaults(), self.scales[scale])
        if config is not None:
            values = merge(values, load_toml(self.Spec, config, values))
        values = merge(values, parse_sets(self.Spec, sets or [], values))
        try:
            spec = self.Spec(**values)
        except ValidationError as e:
            raise AttnlabError(format_validation_error(e)) from None
        check_parts(spec)
        return spec

    def defaults(self) -> dict[str, Any]:
        """Values common to every scale (the part names, the paper's protocol)."""
        return {}

    def assumptions_for(self, scale: str) -> tuple[str, ...]:
        """The assumptions of a run at ``scale``: one that begins "<another scale> scale:" is about
        that scale's design only and is left out."""
        others = tuple(f"{s} scale:" for s in SCALES if s != scale)
        return tuple(a for a in self.assumptions if not a.lstrip().startswith(others))

    def missing(self, spec) -> str:
        """What a run of ``spec`` lacks that only the user can give (a data set attnlab cannot
        download), as the one line a run would stop with; "" when nothing is. ``reproduce all``
        skips such an id and says so; a run of the id itself stops with that line."""
        return ""

    def owner(self, spec, scale: str):
        """Whom a results directory of a run of ``spec`` belongs to (:class:`attnlab.engine.guard.Owner`)."""
        from attnlab.engine.guard import Owner

        return Owner(self.id, scale)


def rounded(x, digits: int = 4):
    """A JSON-friendly float (None for NaN/inf/None)."""
    return float(np.round(x, digits)) if x is not None and np.isfinite(x) else None


def t_summary(values, digits: int = 4) -> dict:
    """Mean, 95 % t interval and sd of independent values (repeats, cells), JSON-friendly."""
    from attnlab.rules import t_interval

    m, lo, hi, sd = t_interval(values)
    return {"mean": rounded(m, digits), "ci95": [rounded(lo, digits), rounded(hi, digits)], "sd": rounded(sd, digits)}
