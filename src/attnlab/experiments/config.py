"""An experiment's spec and its cells: the fields every experiment has (:class:`ExperimentSpec`),
the part tables checked against the parts' configs, values validated, grids expanded into cells,
and the field values read from ``--set`` and TOML."""

from __future__ import annotations

import itertools
import json
import math
import tomllib
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveFloat, PositiveInt, ValidationError

from attnlab import problem as P
from attnlab.errors import AttnlabError
from attnlab.parts import did_you_mean, search


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


def merge(a: dict, b: dict) -> dict:
    """``a`` updated by ``b``; the part tables (dicts) are merged one level down."""
    out = dict(a)
    for k, v in b.items():
        out[k] = {**out[k], **v} if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


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
        if len(set(map(str, names))) < len(names):
            raise AttnlabError(f"{kind}.name: the grid axis {list(names)} repeats a name; give each once")
        for name in names:
            for k, v in table.items():
                seen: dict[str, Any] = {}
                for x in v if isinstance(v, list | tuple) and k != "name" else [first[k]]:
                    typed = _validated(kind, name, first | {"name": name, k: x} if name else first | {k: x}, cache)
                    key = json.dumps(typed, sort_keys=True, default=str)
                    if key in seen:  # one rule for every axis, as for seeds: each value once
                        raise AttnlabError(
                            f"{kind}.{k}: the grid axis {list(v)} gives "
                            + (f"the value {x!r} twice" if seen[key] == x else f"{seen[key]!r} and {x!r} the same cell")
                            + "; give each value once"
                        )
                    seen[key] = x


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
