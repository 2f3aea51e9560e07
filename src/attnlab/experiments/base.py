"""The experiment contract and the reproduce pipeline.

Experiment = spec(scale) → cells → results → analysis → figures + claims:

    spec     a pydantic model; each scale (smoke, cpu, paper) is a set of field values, and
             ``--set name=v1,v2`` overrides any field or grid axis
    cells    flat dicts, one per run, handed to the sweep (ids, buckets, resume)
    analyse  fits and claims from the results table (a claim passes only on a measured value)
    figures  PNG + PDF files in the output directory
"""

from __future__ import annotations

import json
import time
import tomllib
import typing
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ValidationError

from attnlab.errors import AttnlabError
from attnlab.sweep import grid
from attnlab.sweep.executors import EXECUTORS, run_cells
from attnlab.sweep.store import Store, atomic_write_bytes
from attnlab.train import default_strategy

SCALES = ("smoke", "cpu", "paper")


@dataclass
class Claim:
    id: str
    statement: str
    measured: Any
    expected: str
    passed: bool
    detail: str = ""

    def to_json(self) -> dict:
        d = asdict(self)
        d["pass"] = bool(d.pop("passed"))
        return d


@dataclass
class Analysis:
    claims: list[Claim]
    summary: dict[str, Any] = field(default_factory=dict)  # fitted numbers shown in the report
    notes: list[str] = field(default_factory=list)


class Experiment:
    id: str
    title: str
    description: str
    Spec: type[BaseModel]
    scales: dict[str, dict[str, Any]]
    family: grid.Family
    assumptions: tuple[str, ...] = ()

    def cells(self, spec) -> list[dict]:
        raise NotImplementedError

    def analyse(self, cols: dict[str, np.ndarray], spec) -> Analysis:
        raise NotImplementedError

    def figures(self, cols: dict[str, np.ndarray], spec, analysis: Analysis, out: Path) -> list[Path]:
        raise NotImplementedError

    # ------------------------------------------------------------ spec handling

    def spec(self, scale: str, sets: list[str] | None = None, config: Path | None = None):
        """The scale's values, then a TOML config's, then ``--set`` overrides, validated."""
        if scale not in self.scales:
            raise AttnlabError(f"--scale: unknown {scale!r}; valid: {', '.join(self.scales)}")
        values = dict(self.scales[scale])
        if config is not None:
            values.update(load_toml(self.Spec, config))
        values.update(parse_sets(self.Spec, sets or []))
        try:
            return self.Spec(**values)
        except ValidationError as e:
            raise AttnlabError(format_validation_error(e)) from None


def rounded(x, digits: int = 4):
    """A JSON-friendly float (None for NaN/inf/None)."""
    return float(np.round(x, digits)) if x is not None and np.isfinite(x) else None


def _is_list(annotation) -> bool:
    return typing.get_origin(annotation) in (list, tuple)


def parse_sets(Spec: type[BaseModel], sets: list[str]) -> dict[str, Any]:
    """``name=v1,v2,...`` → {name: [v1, v2, ...]} for a grid axis (a list field), or
    {name: v} for a scalar field. Values stay strings: the spec's validation converts them."""
    fields = Spec.model_fields
    out: dict[str, Any] = {}
    for s in sets:
        name, eq, raw = s.partition("=")
        name = name.strip()
        if not eq or not name:
            raise AttnlabError(f"--set {s!r}: expected name=value or name=v1,v2,...")
        if name not in fields:
            raise AttnlabError(f"--set {name}: unknown field; valid: {', '.join(fields)}")
        values = [v.strip() for v in raw.split(",") if v.strip()]
        if not values:
            raise AttnlabError(f"--set {name}: no value given")
        if _is_list(fields[name].annotation):
            out[name] = values
        elif len(values) == 1:
            out[name] = values[0]
        else:
            raise AttnlabError(f"--set {name}: takes one value (it is not a grid axis), got {len(values)}")
    return out


def load_toml(Spec: type[BaseModel], path: Path) -> dict[str, Any]:
    """Field values from a TOML file (top-level keys = spec fields)."""
    try:
        with open(path, "rb") as f:
            values = tomllib.load(f)
    except OSError as e:
        raise AttnlabError(f"--config {path}: cannot read ({e.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise AttnlabError(f"--config {path}: malformed TOML: {e}") from None
    unknown = [k for k in values if k not in Spec.model_fields]
    if unknown:
        raise AttnlabError(
            f"--config {path}: unknown field(s) {', '.join(unknown)}; valid: {', '.join(Spec.model_fields)}"
        )
    return values


def format_validation_error(e: ValidationError) -> str:
    parts = []
    for err in e.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "spec"
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" + (f" (got {err['input']!r})" if "input" in err and loc != "spec" else ""))
    return "invalid spec: " + "; ".join(parts)


# ---------------------------------------------------------------- pipeline


def table_columns(table: pa.Table) -> dict[str, np.ndarray]:
    return {n: table.column(n).to_numpy(zero_copy_only=False) for n in table.column_names}


def reproduce(
    exp: Experiment,
    scale: str,
    out: Path,
    sets: list[str] | None = None,
    executor: str = "local",
    progress: bool = True,
    config: Path | None = None,
) -> dict:
    """Run (or resume) the experiment into ``out``; write results.parquet, figures,
    verdict.json and report.html. Returns the verdict."""
    from attnlab import report  # heavy imports only when a run happens

    if executor not in EXECUTORS:
        raise AttnlabError(f"--executor: unknown {executor!r}; available: {', '.join(EXECUTORS)}")
    spec = exp.spec(scale, sets, config)
    cells = exp.cells(spec)
    if not cells:
        raise AttnlabError("spec: the grid is empty")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise AttnlabError(f"--out {out}: exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise AttnlabError(f"--out {out}: cannot create ({e.strerror})") from None
    t0 = time.perf_counter()
    store = Store(out)
    trained = run_cells(
        exp.family, cells, store, memory_budget=spec.memory_budget_gb * 1e9, executor=executor, progress=progress
    )
    table = store.assemble([grid.cell_id(c) for c in cells])
    cols = table_columns(table)
    analysis = exp.analyse(cols, spec)
    figures = exp.figures(cols, spec, analysis, out)
    runtime = time.perf_counter() - t0
    verdict = {
        "experiment": exp.id,
        "scale": scale,
        "cells": len(cells),
        "cells_trained_now": trained,
        "runtime_s": round(runtime, 3),
        "train_seconds_total": float(np.sum(cols["seconds"])),
        "backend": jax.default_backend(),
        "strategy": default_strategy(),
        "claims": [c.to_json() for c in analysis.claims],
    }
    atomic_write_bytes(out / "spec.json", json.dumps(spec.model_dump(), indent=2).encode())
    atomic_write_bytes(out / "verdict.json", json.dumps(verdict, indent=2, default=_json_default).encode())
    report.write(out / "report.html", exp, spec, verdict, analysis, figures, sets or [])
    return verdict


def _json_default(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"not JSON serialisable: {type(x)}")
