"""A user grid's spec: the part tables (a field given several values is an axis), seed blocks
or explicit seeds, and ``[report]`` (which axes and numbers are plotted), checked against the
metrics and probes the grid's cells record."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

from attnlab import problem as P
from attnlab.errors import AttnlabError
from attnlab.experiments.config import ExperimentSpec

SCALE = "user"  # a user grid has one scale: its own spec
DEFAULT_METRICS = ("test_loss", "test_error")
EXTRA_METRICS = ("stop_step", "seconds")  # per-cell numbers every run records besides the loss's metrics
MAX_LEGEND = 12  # grid points named in a probe panel's legend


class ReportSpec(BaseModel):
    """How a user grid's results are plotted (``[report]``)."""

    model_config = ConfigDict(extra="forbid")

    x: str | None = Field(None, description="grid axis on the x axis of the metric plots (default: the first axis)")
    y: str | None = Field(None, description="a second grid axis: heatmaps over (x, y) instead of lines")
    hue: str | None = Field(None, description="lines: one per value of this grid axis (default: the next axis)")
    metrics: list[str] | None = Field(None, description="result columns to plot (default: test loss and error)")
    probes: list[str] | None = Field(None, description="probes to plot over time (default: every recorded one)")


class Spec(ExperimentSpec):
    title: str = Field("user grid", min_length=1, description="the grid's name, shown in the report")
    seeds: PositiveInt | list[int] = Field(
        1, description="independent seed blocks of the whole grid, or a list of seed values"
    )
    report: ReportSpec = Field(default_factory=ReportSpec, description="plots: x, y, hue, metrics, probes")

    @field_validator("seeds", mode="plain")
    @classmethod
    def _seeds(cls, v):
        def integer(x):
            if isinstance(x, bool) or not isinstance(x, int | str):
                raise ValueError(f"must be an integer or a list of integers, got {x!r}")
            try:
                return int(x)
            except ValueError:
                raise ValueError(f"must be an integer or a list of integers, got {x!r}") from None

        if isinstance(v, list | tuple):
            seeds = [integer(x) for x in v]
            if not seeds or min(seeds) < 0 or len(set(seeds)) < len(seeds):
                raise ValueError(f"a list of seeds must hold distinct values ≥ 0, got {seeds}")
            return seeds
        n = integer(v)
        if n < 1:
            raise ValueError(f"the number of seed blocks must be ≥ 1, got {n}")
        return n

    @field_validator("data", "model")
    @classmethod
    def _names(cls, v, info):
        names = v.get("name")
        if names is not None and not (
            isinstance(names, str) or (isinstance(names, list) and names and all(isinstance(n, str) for n in names))
        ):
            raise ValueError(f"{info.field_name}.name: a part's name, or a list of names, got {names!r}")
        return v

    @model_validator(mode="after")
    def _seed(self):
        if isinstance(self.seeds, list) and self.seed:
            raise ValueError("seed: a list of seeds gives the seed values itself; leave seed out")
        return self


def grid_axes(spec: Spec) -> list[str]:
    """The grid axes (part fields given a list of values), namespaced, in spec order."""
    return [
        f"{kind}.{k}" for kind in P.PART_KINDS for k, v in getattr(spec, kind).items() if isinstance(v, list | tuple)
    ]


@dataclass(frozen=True)
class Layout:
    """Where each axis goes on the plots; ``panels`` are the axes left over (a row each)."""

    axes: tuple[str, ...]
    x: str | None
    y: str | None
    hue: str | None
    panels: tuple[str, ...]


def layout(spec: Spec) -> Layout:
    """The plot layout of ``[report]``; an axis name may be short (``lr``) where unambiguous."""
    axes = grid_axes(spec)
    r = spec.report

    def axis(field: str, name: str | None) -> str | None:
        if name is None:
            return None
        found = [a for a in axes if name in (a, a.split(".", 1)[1])]
        if len(found) != 1:
            valid = ", ".join(axes) if axes else "none (give a part field a list of values)"
            what = "is ambiguous" if found else "is not a grid axis"
            raise AttnlabError(f"report.{field}: {name!r} {what}; grid axes: {valid}")
        return found[0]

    x, y, hue = axis("x", r.x), axis("y", r.y), axis("hue", r.hue)
    if y is not None and hue is not None:
        raise AttnlabError("report.hue: heatmaps (report.y) have no lines; give either y or hue")
    if x is None:
        x = next((a for a in axes if a != y), None)
    if y is not None and (x is None or y == x):
        raise AttnlabError(f"report.y: needs another grid axis than report.x = {x!r}")
    if hue is not None and hue == x:
        raise AttnlabError(f"report.hue: must differ from report.x = {x!r}")
    if y is None and hue is None:
        hue = next((a for a in axes if a != x), None)
    placed = (x, y, hue)
    return Layout(tuple(axes), x, y, hue, tuple(a for a in axes if a not in placed))


def metrics_of(spec: Spec, available) -> list[str]:
    """The metrics to plot and tabulate: ``report.metrics`` (each must be available) or the
    default ones that are."""
    if spec.report.metrics is None:
        return [m for m in DEFAULT_METRICS if m in available]
    unknown = [m for m in spec.report.metrics if m not in available]
    if unknown:
        raise AttnlabError(f"report.metrics: unknown {', '.join(map(repr, unknown))}; valid: {', '.join(available)}")
    return list(spec.report.metrics)


def probes_of(spec: Spec, available) -> list[str]:
    """The probes to plot over time: ``report.probes`` (each must be recorded) or all."""
    if spec.report.probes is None:
        return list(available)
    if spec.report.probes and not available:
        raise AttnlabError("report.probes: nothing is recorded over time (set train.log_every > 0)")
    unknown = [p for p in spec.report.probes if p not in available]
    if unknown:
        raise AttnlabError(f"report.probes: unknown {', '.join(map(repr, unknown))}; recorded: {', '.join(available)}")
    return list(spec.report.probes)


def metric_names(cells: list[dict]) -> list[str]:
    """The per-cell metrics every cell will have: the loss and its metrics on both splits (for
    every loss in the grid), stop step and seconds."""
    import jax.numpy as jnp

    from attnlab.train import LOSSES

    per_loss = []
    for loss in dict.fromkeys(c["train.loss"] for c in cells):
        own = LOSSES[loss].metrics(jnp.zeros(1), jnp.ones(1))
        per_loss.append([f"{s}_{m}" for m in ("loss", *own) for s in ("train", "test")])
    common = [m for m in per_loss[0] if all(m in names for names in per_loss)]
    return common + list(EXTRA_METRICS)
