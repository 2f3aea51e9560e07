"""The experiment contract and the reproduce pipeline.

Experiment = spec(scale) → cells → results → analysis → figures + claims:

    spec     a pydantic model: the experiment's own fields (grid sizes, pass-rule thresholds,
             reps, seed blocks) and three part tables, ``data``, ``model`` and ``train``, whose
             fields belong to the composed problem (:mod:`attnlab.problem`). A part field given
             several values is a grid axis. Each scale (smoke, cpu, paper) is a set of values; a
             TOML ``--config`` and then ``--set name=v1,v2`` override any of them
    cells    flat namespaced dicts, one per run: the grid × ``seeds`` blocks × ``reps``. An
             experiment with stages (e.g. tune the learning rate on validation runs, then run
             the grid with the chosen one) trains a stage through ``run`` and builds the next
             stage's cells from its results; every stage lands in the same store
    derive   optional: rows computed from the trained cells (e.g. evaluations of the saved
             parameters under token removal), one or more per cell; the derived table is
             results.parquet
    analyse  fits and claims from the results table (a claim passes only on a measured value)
    figures  PNG + PDF files in the output directory
"""

from __future__ import annotations

import itertools
import json
import math
import time
import tomllib
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveFloat, PositiveInt, ValidationError

from attnlab import problem as P
from attnlab import rules
from attnlab.errors import AttnlabError
from attnlab.parts import did_you_mean, search
from attnlab.rules import Verdict

SCALES = ("smoke", "cpu", "paper")


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


class ExperimentSpec(BaseModel):
    """Fields every experiment has, and its three part tables."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    data: dict[str, Any] = Field(default_factory=dict, description="the data model's fields (name = which one)")
    model: dict[str, Any] = Field(default_factory=dict, description="the model's fields (name = which one)")
    train: dict[str, Any] = Field(default_factory=dict, description="the training recipe's fields")
    seed: NonNegativeInt = Field(0, description="base seed (part of every cell's id)")
    seeds: PositiveInt = Field(1, description="independent seed blocks of the whole grid")
    reps: PositiveInt = Field(1, description="runs per grid point within a block")
    memory_budget_gb: PositiveFloat = Field(2.0, description="memory per chunk of cells")
    max_cells: PositiveInt = Field(
        10**6,
        description="refuse a grid of more cells than this (counted before it is expanded); raise it for a larger one",
    )


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

    def cells(self, spec, run: Callable[[list[dict]], dict[str, np.ndarray]] | None = None) -> list[dict]:
        """The grid × seed blocks × reps (override to add variants, tags or stages). Every cell
        to be analysed is returned; ``run(cells)`` trains a stage now (skipping what is done)
        and returns its columns, so a later stage can depend on an earlier one's results."""
        return expand(spec)

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


def merge(a: dict, b: dict) -> dict:
    """``a`` updated by ``b``; the part tables (dicts) are merged one level down."""
    out = dict(a)
    for k, v in b.items():
        out[k] = {**out[k], **v} if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def rounded(x, digits: int = 4):
    """A JSON-friendly float (None for NaN/inf/None)."""
    return float(np.round(x, digits)) if x is not None and np.isfinite(x) else None


def t_summary(values, digits: int = 4) -> dict:
    """Mean, 95 % t interval and sd of independent values (repeats, cells), JSON-friendly."""
    from attnlab.rules import t_interval

    m, lo, hi, sd = t_interval(values)
    return {"mean": rounded(m, digits), "ci95": [rounded(lo, digits), rounded(hi, digits)], "sd": rounded(sd, digits)}


# ---------------------------------------------------------------- parts, axes and cells


def _part_fields(kind: str, values: dict) -> dict:
    """The fields a part table may set: its part's, or with several names (a grid over parts,
    compared cell by cell) those every named part has."""
    name = values.get(kind, {}).get("name")
    if kind != "train" and name is None:
        return {}
    if isinstance(name, list | tuple):
        each = [P.part_config(kind, n).fields() for n in name]
        return {k: v for k, v in each[0].items() if all(k in f for f in each[1:])}
    return P.part_config(kind, name).fields()


def check_parts(spec: ExperimentSpec) -> None:
    """Unknown part names or fields are errors (the values themselves are validated per cell)."""
    for kind in P.PART_KINDS:
        values = getattr(spec, kind)
        if kind != "train" and "name" not in values:
            raise AttnlabError(f"{kind}.name: missing (which {kind} model to use)")
        fields = _part_fields(kind, spec.model_dump())
        names = values.get("name")
        for k in values:
            if k != "name" and k not in fields:
                if isinstance(names, list | tuple):
                    raise AttnlabError(
                        f"{kind}.{k}: not a field of every {kind} of {kind}.name ({', '.join(names)}); "
                        f"the fields they share: {', '.join(fields) or 'none'}"
                    )
                raise AttnlabError(f"{kind}.{k}: unknown field{did_you_mean(k, fields)}; valid: {', '.join(fields)}")


def _flatten(kind: str, d: dict) -> dict:
    out = {}
    for k, v in d.items():
        if k == "lr_mult":
            out |= {f"{kind}.lr_mult.{g}": v[g] for g in sorted(v)}
        else:
            out[f"{kind}.{k}"] = v
    return out


def _validated(kind: str, name: str | None, values: dict, cache: dict) -> dict:
    """One part's values at one grid point, validated and typed (canonical for hashing)."""
    key = (kind, name, json.dumps(values, sort_keys=True, default=str))
    if key not in cache:
        try:
            typed = P.part_config(kind, name)(**{k: v for k, v in values.items() if k != "name"}).model_dump()
        except ValidationError as e:
            raise AttnlabError(format_validation_error(e, prefix=kind)) from None
        cache[key] = ({"name": name} if name else {}) | typed
    return cache[key]


def check_values(spec: ExperimentSpec) -> None:
    """Every value of every part field validated on its own (each axis value at the first value of
    the other axes): a type error is reported before anything that reads the values (a plot
    layout, the grid's expansion), in time linear in the number of values."""
    cache: dict = {}
    for kind in P.PART_KINDS:
        table = getattr(spec, kind)
        for k, v in table.items():
            if isinstance(v, list | tuple) and not v:
                raise AttnlabError(f"{kind}.{k}: an empty list; a grid axis needs at least one value")
        first = {k: (v[0] if isinstance(v, list | tuple) else v) for k, v in table.items()}
        names = table.get("name") if isinstance(table.get("name"), list | tuple) else [first.get("name")]
        for name in names:
            for k, v in table.items():
                for x in v if isinstance(v, list | tuple) and k != "name" else [first[k]]:
                    _validated(kind, name, first | {"name": name, k: x} if name else first | {k: x}, cache)


def expand(spec: ExperimentSpec, variants: list[tuple[dict, dict]] | None = None) -> list[dict]:
    """Cells: for each variant (tags, part overrides such as {"data.mu": 18.0}), every point of
    the grid (the product of the part fields given several values), validated by each part's
    spec, × ``seeds`` blocks × ``reps``."""
    cache: dict = {}
    axes, base = [], {}
    for kind in P.PART_KINDS:
        for k, v in getattr(spec, kind).items():
            if isinstance(v, list | tuple):
                if not v:
                    raise AttnlabError(f"{kind}.{k}: an empty list; a grid axis needs at least one value")
                axes.append((f"{kind}.{k}", list(v)))
            else:
                base[f"{kind}.{k}"] = v
    check_size(spec, len(variants or [0]) * math.prod(len(vals) for _, vals in axes))
    cells = []
    for tags, over in variants or [({}, {})]:
        for combo in itertools.product(*(vals for _, vals in axes)):
            point = base | dict(zip((a for a, _ in axes), combo, strict=True)) | over
            cell = {}
            for kind in P.PART_KINDS:
                raw = {k.split(".", 1)[1]: v for k, v in point.items() if k.startswith(kind + ".")}
                cell |= _flatten(kind, _validated(kind, raw.get("name"), raw, cache))
            for b in range(spec.seeds):
                for r in range(spec.reps):
                    cells.append(cell | tags | {"seed": spec.seed, "block": b, "rep": r})
    return cells


def check_size(spec: ExperimentSpec, points: int, seed_blocks: int | None = None) -> int:
    """The number of cells of ``points`` grid points × seed blocks × reps, counted before anything
    is expanded; refused above ``spec.max_cells`` with the count in the message."""
    n = points * (spec.seeds if seed_blocks is None else seed_blocks) * spec.reps
    if n > spec.max_cells:
        raise AttnlabError(
            f"the grid has {n:,} cells ({points:,} points × {n // max(points * spec.reps, 1):,} seed "
            f"blocks × {spec.reps:,} reps), more than max_cells = {spec.max_cells:,}; raise max_cells "
            f"(--set max_cells={n}) if this is meant"
        )
    return n


def _is_list(annotation) -> bool:
    return typing.get_origin(annotation) in (list, tuple)


def _may_be_list(annotation) -> bool:
    """A union with a list member (e.g. ``int | list[int]``): one value stays a scalar."""
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and any(
        _is_list(a) for a in typing.get_args(annotation)
    )


def fields_short(values: dict) -> list[str]:
    """Every part field's short name (``d_h``), as ``--set`` accepts it."""
    return [f for k in P.PART_KINDS for f in _part_fields(k, values)]


def resolve_name(Spec: type[BaseModel], name: str, values: dict) -> str:
    """A ``--set`` name -> its full name: an experiment field, or ``kind.field`` (the short
    ``field`` is accepted wherever exactly one part has it)."""
    own = [f for f in Spec.model_fields if f not in P.PART_KINDS]
    head, _, rest = name.partition(".")
    if head in P.PART_KINDS and rest:
        fields = _part_fields(head, values)
        if rest.split(".")[0] not in (*fields, "name"):
            raise AttnlabError(
                f"--set {name}: unknown field of {head}{did_you_mean(rest, fields)}; valid: {', '.join(fields)}"
            )
        return name
    if name in own:
        return name
    matches = [f"{kind}.{name}" for kind in P.PART_KINDS if head in _part_fields(kind, values)]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise AttnlabError(f"--set {name}: ambiguous; use one of {', '.join(matches)}")
    valid = own + [f"{k}.{f}" for k in P.PART_KINDS for f in _part_fields(k, values)]
    raise AttnlabError(
        f"--set {name}: unknown field{did_you_mean(name, valid + list(fields_short(values)))}; "
        f"valid: {', '.join(valid)}"
    )


def parse_sets(Spec: type[BaseModel], sets: list[str], values: dict) -> dict[str, Any]:
    """``name=v1,v2,...`` overrides, as nested values. A part field given several values becomes
    a grid axis; an experiment field takes several values only if it is a list. Values stay
    strings: validation converts them. Part names (``data.name``, ``model.name``) apply first,
    since they decide which fields exist."""
    parsed = []
    for s in sets:
        name, eq, raw = s.partition("=")
        name = name.strip()
        if not eq or not name:
            raise AttnlabError(f"--set {s!r}: expected name=value or name=v1,v2,...")
        vals = [v.strip() for v in raw.split(",") if v.strip()]
        if not vals and not (name in Spec.model_fields and _is_list(Spec.model_fields[name].annotation)):
            raise AttnlabError(f"--set {name}: no value given")
        parsed.append((name, vals))
    parsed.sort(key=lambda p: p[0] not in ("data.name", "model.name"))
    out: dict[str, Any] = {}
    for name, vals in parsed:
        full = resolve_name(Spec, name, merge(values, out))
        kind, _, field_ = full.partition(".")
        if kind in P.PART_KINDS and field_:
            value = vals if len(vals) > 1 else vals[0]
            if field_.startswith("lr_mult."):
                lr = dict(values.get(kind, {}).get("lr_mult", {})) | out.get(kind, {}).get("lr_mult", {})
                out.setdefault(kind, {})["lr_mult"] = lr | {field_.split(".", 1)[1]: value}
            else:
                out.setdefault(kind, {})[field_] = value
        elif _is_list(Spec.model_fields[full].annotation):
            out[full] = vals
        elif len(vals) == 1:
            out[full] = vals[0]
        elif _may_be_list(Spec.model_fields[full].annotation):
            out[full] = vals
        else:
            raise AttnlabError(f"--set {full}: takes one value (it is not a grid axis), got {len(vals)}")
    return out


def load_toml(Spec: type[BaseModel], path: Path, values: dict) -> dict[str, Any]:
    """Field values from a TOML file: top-level keys are experiment fields, the tables
    [data], [model] and [train] hold part fields."""
    return check_loaded(Spec, read_toml(path, f"--config {path}"), f"--config {path}")


def read_toml(source: Path | str, label: str, text: bool = False) -> dict[str, Any]:
    """A TOML file (or, with ``text``, TOML text) as a dict; ``label`` starts every error. A
    file's directory is searched for the outside modules its part names import."""
    try:
        if text:
            return tomllib.loads(str(source))
        search(Path(source).parent)
        with open(source, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise AttnlabError(f"{label}: cannot read ({e.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise AttnlabError(f"{label}: malformed TOML: {e}") from None


def check_loaded(Spec: type[BaseModel], loaded: dict[str, Any], label: str) -> dict[str, Any]:
    """Loaded field values: unknown top-level fields and part fields outside their table are
    errors (the values themselves are validated with the spec)."""
    unknown = [k for k in loaded if k not in Spec.model_fields]
    if unknown:
        hint = did_you_mean(unknown[0], list(Spec.model_fields)) if len(unknown) == 1 else ""
        raise AttnlabError(
            f"{label}: unknown field(s) {', '.join(unknown)}{hint}; valid: {', '.join(Spec.model_fields)}"
        )
    for kind in P.PART_KINDS:
        if kind in loaded and not isinstance(loaded[kind], dict):
            raise AttnlabError(f"{label}: {kind} must be a table ([{kind}])")
    return loaded


def format_validation_error(e: ValidationError, prefix: str = "") -> str:
    parts = []
    for err in e.errors():
        loc = ".".join(str(x) for x in (prefix, *err["loc"]) if x != "") or "spec"
        msg = err["msg"].removeprefix("Value error, ")
        show = "input" in err and err["loc"]
        parts.append(f"{loc}: {msg}" + (f" (got {err['input']!r})" if show else ""))
    return "invalid spec: " + "; ".join(parts)


# ---------------------------------------------------------------- pipeline


@dataclass
class Trained:
    """A trained cell rebuilt from its results row: the row (without its parameters), the cell's
    fields, its bucket's static fields and Problem, its per-cell inputs ``v`` (key, batched
    fields), its data as it was trained on (drawn again from the cell's key) and its saved final
    parameters."""

    row: dict
    cell: dict
    static: dict
    problem: Any
    v: dict
    data: dict
    params: dict


def cell_parts(cell: dict, tags: tuple[str, ...] = ()):
    """(composition, static fields, its own padded sizes, per-cell inputs v) of one cell: what
    rebuilding its Problem and drawing its data again from its key take."""
    import jax.numpy as jnp

    from attnlab.sweep import grid

    comp = P.Composition.of(cell, tuple(tags))
    static = {k: v for k, v in cell.items() if comp.classify(k) == "static"}
    pads = {f: cell[f] for f in comp.size_fields()}
    v = {k: jnp.asarray(x[0]) for k, x in grid.batch_inputs(comp, [cell]).items()}
    return comp, static, pads, v


def trained_cells(table: pa.Table, tags: tuple[str, ...] = ()):
    """Yield a :class:`Trained` per row of a results table written with ``train.save_params``
    (a ``derive`` evaluates the trained models with it). One Problem and one compiled data
    generator per bucket and padded size."""
    import io

    import jax

    built: dict = {}
    rows = table.drop_columns(["params_npz"]).to_pylist()
    for i, row in enumerate(rows):
        # a field left out of this cell (at a default kept out of its id) is null in a table whose other cells have it
        cell = {
            k: v
            for k, v in row.items()
            if (k.startswith(tuple(f"{k}." for k in P.PART_KINDS)) or k in P.KEY_ONLY or k in tags) and v is not None
        }
        comp, static, pads, v = cell_parts(cell, tags)
        sig = (tuple(sorted(static.items())), tuple(sorted(pads.items())))
        if sig not in built:
            problem = comp.problem(static, pads)
            built[sig] = (problem, jax.jit(problem.make_data), comp.shared(static))
        problem, make, shared = built[sig]
        with jax.enable_x64(static.get("train.dtype") == "float64"):
            data = make(v["key"], v, shared)
        params = dict(np.load(io.BytesIO(table.column("params_npz")[i].as_py())))
        yield Trained(row, cell, static, problem, v, data, params)


def table_columns(table: pa.Table) -> dict[str, np.ndarray]:
    return {n: table.column(n).to_numpy(zero_copy_only=False) for n in table.column_names}


def describe(cell: dict, spec: ExperimentSpec) -> str:
    """A short label of a cell: its grid coordinates, tags, block and rep."""
    axes = [f"{k}.{n}" for k in P.PART_KINDS for n, v in getattr(spec, k).items() if isinstance(v, list | tuple)]
    keys = [*axes, *(k for k in cell if "." not in k and k != "seed")]
    return ", ".join(f"{k}={cell[k]}" for k in keys if k in cell)


def reproduce(
    exp: Experiment,
    scale: str,
    out: Path,
    sets: list[str] | None = None,
    executor: str = "local",
    progress: bool = True,
    config: Path | None = None,
    force: bool = False,
) -> dict:
    """Run (or resume) the experiment into ``out``; write results.parquet, figures,
    verdict.json and report.html. Returns the verdict."""
    from attnlab import report

    check_executor(executor)
    spec = exp.spec(scale, sets, config)
    command = report.command_line(exp.id, scale, sets or [], config, out, executor)
    return run_spec(exp, spec, scale, out, sets or [], command, executor=executor, progress=progress, force=force)


def dry_run(exp: Experiment, spec, estimate: bool = False) -> dict:
    """What a run of ``spec`` would do, without writing anything: its cells (the first stage's
    where later stages depend on earlier results), their buckets (one compiled program each) with
    their sizes and the estimated memory of their largest cell, all checked as a run checks them
    (sizes, classification, memory); with ``estimate``, its wall time from a short calibration
    (:mod:`attnlab.estimate`: a few cells trained for a few steps, results thrown away)."""
    from attnlab.sweep import grid

    cells = exp.cells(spec)
    budget = spec.memory_budget_gb * 1e9
    buckets = []
    for static, members in grid.buckets(cells, exp.tags).items():
        comp = P.Composition.of(dict(static), exp.tags)
        comp.check(dict(static))
        one = grid.cell_memory(comp, dict(static), members, budget)
        sizes = {f: sorted({c[f] for c in members}) for f in comp.size_fields()}
        buckets.append(
            {
                "data": dict(static).get("data.name"),
                "model": dict(static).get("model.name"),
                "cells": len(members),
                "sizes": sizes,
                "cell_bytes": one,
                "chunks": sum(1 for _ in grid.chunks(comp, dict(static), members, budget)),
            }
        )
    staged = "stage" in exp.tags
    out = {
        "experiment": exp.id,
        "cells": len(cells),
        "buckets": buckets,
        "memory_budget_gb": spec.memory_budget_gb,
        "note": "later stages depend on earlier results: their cells are planned when those have run" if staged else "",
    }
    if estimate:
        from attnlab.estimate import estimate as measure

        out["estimate"] = measure(cells, budget, exp.tags)
    return out


def check_executor(executor: str) -> None:
    from attnlab.sweep import executors

    if executor not in executors.EXECUTORS:
        raise AttnlabError(f"--executor: unknown {executor!r}; available: {', '.join(executors.EXECUTORS)}")
    if executor == "ray":
        executors.import_ray()  # a missing optional extra is reported before anything is written


RESULTS_MARKERS = ("store.json", "parts", "verdict.json", "results.parquet")


def check_out(out: Path) -> None:
    """An output directory is new, empty, or one attnlab wrote: a foreign non-empty directory is
    refused, so results never mix with (or overwrite) someone else's files."""
    if out.exists() and not out.is_dir():
        raise AttnlabError(f"--out {out}: exists and is not a directory")
    from attnlab.sweep.store import is_temporary

    # a run starting beside this one may have written only its first temporary file so far
    if (
        out.is_dir()
        and any(not is_temporary(p) for p in out.iterdir())
        and not any((out / m).exists() for m in RESULTS_MARKERS)
    ):
        raise AttnlabError(
            f"--out {out}: a non-empty directory that is not an attnlab results directory (no store.json or "
            "parts/); choose a new or empty directory"
        )


def run_spec(
    exp: Experiment,
    spec: ExperimentSpec,
    scale: str,
    out: Path,
    sets: Sequence[str],
    command: str,
    executor: str = "local",
    progress: bool = True,
    force: bool = False,
) -> dict:
    """Train (or resume) a validated spec's cells into ``out`` and finish (analysis, figures,
    verdict, report): the pipeline behind both ``reproduce`` and user-defined grids
    (:mod:`attnlab.experiments.sweep`), so both share one store, resume and compatibility check.
    ``command`` is the command line recorded in the verdict."""
    from attnlab.provenance import provenance, versions  # heavy imports only when a run happens
    from attnlab.sweep import executors, grid
    from attnlab.sweep.store import Store, atomic_write_bytes
    from attnlab.train import default_strategy, enable_compile_cache

    enable_compile_cache()  # reruns and resumes skip compilation (off where $ATTNLAB_COMPILE_CACHE=off)
    out = Path(out)
    check_out(out)
    t0 = time.perf_counter()
    store, trained = None, 0

    def checked(cells: list[dict]) -> dict:
        """Classification errors before anything is written; returns the cells' schema."""
        if not cells:
            raise AttnlabError("spec: the grid is empty")
        schema = {}
        for static, members in grid.buckets(cells, exp.tags).items():
            comp = P.Composition.of(dict(static), exp.tags)
            comp.check(dict(static))
            grid.cell_memory(comp, dict(static), members, spec.memory_budget_gb * 1e9)
            schema |= comp.schema
        return schema

    def run(cells: list[dict]) -> dict[str, np.ndarray]:
        nonlocal store, trained
        schema = checked(cells)
        if store is None:
            try:
                out.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise AttnlabError(f"--out {out}: cannot create ({e.strerror})") from None
            store = Store(out)
            store.check_compatible({"schema": schema, **versions()}, force=force)
        trained += executors.run_cells(
            cells,
            store,
            tags=exp.tags,
            memory_budget=spec.memory_budget_gb * 1e9,
            executor=executor,
            progress=progress,
        )
        ids = [grid.cell_id(c) for c in cells]
        by_id = dict(zip(ids, cells, strict=True))
        return table_columns(store.assemble(ids, describe=lambda i: describe(by_id[i], spec), write=False))

    cells = exp.cells(spec, run)
    checked(cells)
    run(cells)
    ids = [grid.cell_id(c) for c in cells]
    trained_table = store.assemble(ids, write=False)
    table = exp.derive(trained_table, spec)
    store.write_results(table)
    atomic_write_bytes(out / "spec.json", json.dumps(spec.model_dump(), indent=2).encode())
    dtype = str(cells[0].get("train.dtype", "float32"))
    verdict = {
        "experiment": exp.id,
        "scale": scale,
        "cells": len(cells),
        "cells_trained_now": trained,
        "runtime_s": None,  # set once the figures are drawn
        "train_seconds_total": float(np.sum(trained_table.column("seconds").to_numpy())),
        "provenance": provenance(default_strategy(), dtype),
        "command": command,
        "store_warnings": list(store.notes),  # e.g. damaged parts moved aside and trained again
        "claims": [],
    }
    return finish(exp, spec, out, table_columns(table), verdict, sets, started=t0)


def finish(
    exp: Experiment,
    spec,
    out: Path,
    cols: dict[str, np.ndarray],
    verdict: dict,
    sets: Sequence[str] = (),
    started: float | None = None,
) -> dict:
    """Analysis, figures, verdict.json and report.html from a results table: the tail of
    :func:`reproduce` and the whole of :func:`rebuild`, so a rebuilt report is the one a run
    writes. ``verdict`` is the run's record (cells, runtime, provenance, command); its claims
    are replaced by the analysis's, and its runtime is measured up to now if ``started`` is
    given."""
    from attnlab import report
    from attnlab.sweep.store import atomic_write_bytes

    analysis = exp.analyse(cols, spec)
    for c in analysis.claims:
        c.regime = c.regime or exp.regime
        if c.regime not in rules.REGIMES:
            raise ValueError(f"{exp.id}: claim {c.id!r} has regime {c.regime!r}, not one of {rules.REGIMES}")
    figures = exp.figures(cols, spec, analysis, out)
    verdict = dict(verdict, claims=[c.to_json() for c in analysis.claims])
    if started is not None:
        verdict["runtime_s"] = round(time.perf_counter() - started, 3)
        verdict["finished_at"] = report.utc_now()
    atomic_write_bytes(out / "verdict.json", json.dumps(verdict, indent=2, default=_json_default).encode())
    report.write(out / "report.html", exp, spec, verdict, analysis, figures, list(sets))
    return verdict


@dataclass
class Stored:
    """A results directory as read back: its experiment, spec and verdict (results read later)."""

    out: Path
    exp: Experiment
    spec: ExperimentSpec
    verdict: dict


def load_results(out: Path) -> Stored:
    """Read and check a results directory (verdict.json, spec.json, results.parquet) without
    writing anything, so that a bad directory among several stops a rebuild before any write."""
    import pyarrow.parquet as pq

    from attnlab.experiments import get

    out = Path(out)
    if not (out / "verdict.json").is_file():
        what = "does not exist" if not out.exists() else "has no verdict.json" if out.is_dir() else "is not a directory"
        writers = "`attnlab reproduce` or `attnlab sweep` writes one"
        raise AttnlabError(f"{out}: not a results directory ({what}; {writers})")
    verdict = _read_json(out / "verdict.json")
    missing = [k for k in ("experiment", "scale", "claims") if k not in verdict] if isinstance(verdict, dict) else []
    if not isinstance(verdict, dict) or missing:
        raise AttnlabError(f"{out / 'verdict.json'}: not a verdict (missing {', '.join(missing) or 'an object'})")
    try:
        exp = get(verdict["experiment"])
    except AttnlabError as e:
        raise AttnlabError(f"{out / 'verdict.json'}: {e}") from None
    if not (out / "spec.json").is_file():
        raise AttnlabError(f"{out}: no spec.json beside verdict.json (rerunning the command that wrote it restores it)")
    try:
        spec = exp.Spec.model_validate(_read_json(out / "spec.json"))
    except ValidationError as e:
        raise AttnlabError(f"{out / 'spec.json'}: {format_validation_error(e)}") from None
    try:
        pq.read_schema(out / "results.parquet")
    except (OSError, pa.ArrowException) as e:
        raise AttnlabError(f"{out / 'results.parquet'}: cannot read ({e})") from None
    return Stored(out, exp, spec, verdict)


def _read_json(path: Path):
    try:
        return json.loads(path.read_bytes())
    except OSError as e:
        raise AttnlabError(f"{path}: cannot read ({e.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise AttnlabError(f"{path}: malformed JSON: {e}") from None


def rebuild(out: Path | Stored) -> dict:
    """Redraw the figures and rewrite verdict.json and report.html of a results directory from
    its stored results, without training: claims come from the analysis of results.parquet by
    the current code, the run's record (cells, runtime, provenance, command) is kept, and the
    rebuild itself is recorded under ``rebuilt``."""
    import pyarrow.parquet as pq

    from attnlab import report
    from attnlab.provenance import git_sha

    stored = out if isinstance(out, Stored) else load_results(out)
    cols = table_columns(pq.read_table(stored.out / "results.parquet"))
    rebuilt = {"at": report.utc_now(), "attnlab_version": report.attnlab_version(), "git_sha": git_sha()}
    verdict = dict(stored.verdict, rebuilt=rebuilt)
    return finish(stored.exp, stored.spec, stored.out, cols, verdict)


def _json_default(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"not JSON serialisable: {type(x)}")
