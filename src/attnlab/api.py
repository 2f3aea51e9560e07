"""The Python API for notebooks and scripts: the CLI's commands as functions.

    attnlab.reproduce("jiang2024-fig1", scale="smoke", out="results/f1")   -> verdict (dict)
    attnlab.sweep("examples/jiang2024_lr_init.toml", "results/grid")      -> verdict (dict)
    attnlab.load("results/grid")                                           -> results table
    attnlab.query("results/grid", "SELECT ... FROM results")               -> query result

Errors are :class:`attnlab.errors.AttnlabError` with the same one-line messages as the CLI.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

from attnlab.errors import AttnlabError

FORMATS = ("pandas", "arrow", "polars")
TRACES = ("wide", "long")
# columns that describe a cell or the run, not a measurement (the rest are metrics)
KEYS = (
    "id",
    "seed",
    "block",
    "rep",
    "status",
    "stop_step",
    "seconds",
    "attnlab_version",
    "git_sha",
    "jax_version",
    "jaxlib_version",
    "backend",
    "strategy",
    "dtype",
)


def reproduce(
    exp_id: str, scale: str = "cpu", out: Path | str | None = None, sets: list[str] | None = None, **kw: Any
) -> dict:
    """Run (or resume) a paper experiment into ``out`` (default results/ID-SCALE), as
    ``attnlab reproduce``; ``kw``: executor, progress, config, force. Returns the verdict."""
    from attnlab.experiments import get
    from attnlab.experiments.pipeline import reproduce as run

    target = Path(out) if out is not None else Path("results") / f"{exp_id}-{scale}"
    return run(get(exp_id), scale, target, sets=list(sets or []), **kw)


def sweep(spec: Path | str | dict, out: Path | str, sets: list[str] | None = None, **kw: Any) -> dict:
    """Run (or resume) a user grid into ``out``, as ``attnlab sweep``. ``spec``: a TOML file, TOML
    text, or a dict of the same tables; ``kw``: executor, progress, force. Returns the verdict."""
    from attnlab.experiments.sweep import sweep as run

    return run(spec, out, sets=list(sets or []), **kw)


def _format(format: str) -> str:
    if format not in FORMATS:
        raise AttnlabError(f"format: unknown {format!r}; valid: {', '.join(FORMATS)}")
    for lib in ("pandas", "polars"):
        if format == lib and importlib.util.find_spec(lib) is None:
            raise AttnlabError(f"format={lib!r} needs {lib} (pip install {lib}); format='arrow' needs nothing more")
    return format


def _as(table, format: str):
    if format == "pandas":
        return table.to_pandas()
    if format == "polars":
        import polars

        return polars.from_arrow(table)
    return table


def load(out: Path | str, format: str = "pandas", traces: str = "wide"):
    """The results table of a results directory (DIR/results.parquet): a pandas DataFrame, a
    pyarrow Table (``format="arrow"``) or a polars DataFrame (``"polars"``). ``traces="wide"``:
    one row per cell, each trace a list column (``trace_step`` the logged steps); ``"long"``: one
    row per cell × logged step, with ``step`` and every trace aligned with it as a number (the
    cell's other columns repeated; list columns on another schedule, such as array probes, stay
    lists)."""
    from attnlab.experiments.pipeline import results_table

    _format(format)
    if traces not in TRACES:
        raise AttnlabError(f"traces: unknown {traces!r}; valid: {', '.join(TRACES)}")
    path = Path(out) / "results.parquet"
    if not path.is_file():
        parts = Path(out, "parts")
        hint = " (parts/ is there: rerun the same command to finish and assemble it)" if parts.is_dir() else ""
        raise AttnlabError(f"{out}: no results.parquet{hint}")
    table = results_table(out, _verdict_of(out))
    return _as(_long(table) if traces == "long" else table, format)


def _verdict_of(out: Path | str) -> dict | None:
    """A results directory's verdict (for the command that rebuilds it), or None."""
    import json

    try:
        verdict = json.loads(Path(out, "verdict.json").read_text())
    except (OSError, ValueError):
        return None
    return verdict if isinstance(verdict, dict) else None


def _long(table):
    """One row per cell × entry of ``trace_step``: the traces of the same length flattened."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if "trace_step" not in table.column_names:
        raise AttnlabError("traces='long': this run records no traces (no trace_step column)")
    steps = table.column("trace_step").combine_chunks()
    n = pc.list_value_length(steps)
    aligned = [
        c
        for c in table.column_names
        if c.startswith("trace_")
        and c != "trace_step"
        and pc.all(pc.equal(pc.list_value_length(table.column(c).combine_chunks()), n)).as_py()
    ]
    parent = pc.list_parent_indices(steps)
    cols = {c: table.column(c).take(parent) for c in table.column_names if c != "trace_step" and c not in aligned}
    cols["step"] = pc.list_flatten(steps)
    cols |= {c: pc.list_flatten(table.column(c).combine_chunks()) for c in aligned}
    return pa.table(cols)


def to_xarray(out: Path | str):
    """The results as an ``xarray.Dataset``: dimensions the grid's axes (every cell field that
    varies: part fields, the experiment's tags), ``block``, ``rep`` and, for traces, ``step``;
    the metrics (final scalars) and the traces (``trace_*``, over ``step``) are variables. A design
    that is not a full grid (stages, derived rows, variants) gets one ``cell`` dimension instead,
    with the fields as coordinates. NaN marks only a missing value: a grid point with no cell
    (never, for a full grid) or a step a cell did not log."""
    import pyarrow as pa

    try:
        import xarray as xr
    except ImportError:
        raise AttnlabError("to_xarray needs xarray (pip install xarray, or the project's tidy extra)") from None
    wide = load(out, "arrow")
    df = wide.to_pandas()
    listed = {c for c in wide.column_names if isinstance(wide.schema.field(c).type, pa.ListType)}
    # the cell's fields: its parts' and the experiment's own labels (strings: tags such as a stage)
    fields = [
        c
        for c in df.columns
        if c not in KEYS
        and c not in listed
        and (c.split(".", 1)[0] in ("data", "model", "train") or pa.types.is_string(wide.schema.field(c).type))
    ]
    scalar = [c for c in df.columns if c not in fields and c not in KEYS and c not in listed]
    dims = [c for c in fields if df[c].astype(str).nunique() > 1]
    for f in reversed(dims[:]):  # a field fixed by the others (a regime label of its ‖μ‖) is a coordinate
        others = [d for d in dims if d != f] + ["block", "rep"]
        if df.groupby(others, dropna=False)[f].nunique(dropna=False).max() == 1 and len(dims) > 1:
            dims.remove(f)
    dims += ["block", "rep"]
    labels = [c for c in fields if c not in dims and df[c].astype(str).nunique() > 1]
    full = len(df.groupby(dims).size()) == len(df) == math.prod(df[d].astype(str).nunique() for d in dims)
    traces = [c for c in wide.column_names if c.startswith("trace_") and c != "trace_step"]
    if not full:
        df = df.reset_index(drop=True).rename_axis("cell")
        ds = xr.Dataset(
            {c: ("cell", df[c].to_numpy()) for c in scalar + ["status"]},
            coords={c: ("cell", df[c].to_numpy()) for c in dims + labels + ["id"]},
        )
        if traces:
            long = _long(wide).to_pandas().merge(df[["id"]].reset_index(), on="id")
            tr = long.set_index(["cell", "step"])[[c for c in traces if c in long]].to_xarray()
            ds = ds.merge(tr)
        return ds.assign_attrs(layout="cell", dims=dims)
    ds = df.set_index(dims)[scalar + ["status", "id"]].to_xarray()
    for c in labels:  # fixed by the dimensions: a coordinate along the dimensions it depends on
        ds = ds.assign_coords({c: df.set_index(dims)[c].to_xarray()})
    if traces:
        long = _long(wide).to_pandas()
        ds = ds.merge(long.set_index(dims + ["step"])[[c for c in traces if c in long]].to_xarray())
    return ds.assign_attrs(layout="grid", dims=dims)


def connect(out: Path | str):
    """A read-only, in-memory DuckDB connection over a results directory with two tables:
    ``results`` (DIR/results.parquet) and ``parts`` (every DIR/parts/*.parquet, columns united by
    name), loaded into memory; then every access to files is switched off (DuckDB's
    ``enable_external_access``, locked), so no statement can read or write any file — a ``COPY … TO``
    cannot overwrite the stored results. Paths are passed as escaped literal globs, never spliced
    into SQL."""
    import duckdb

    from attnlab.engine.store import Store, _literal_glob

    out = Path(out)
    if not out.is_dir():
        raise AttnlabError(
            f"{out}: not a results directory ({'does not exist' if not out.exists() else 'not a directory'})"
        )
    results = out / "results.parquet"
    parts = Store(out)._part_files()
    if not results.is_file() and not parts:
        raise AttnlabError(f"{out}: not a results directory (no results.parquet and no parts/*.parquet)")
    from attnlab.engine.store import read_table
    from attnlab.experiments.pipeline import results_table

    if results.is_file():  # DuckDB checks no page checksums: a damaged file is found first, named, and not read
        results_table(out, _verdict_of(out))
    for p in parts:
        read_table(Path(p), ". Rerunning the run's command moves a damaged part aside and trains its cells again")
    con = duckdb.connect()
    try:
        if results.is_file():
            con.read_parquet(_literal_glob(str(results.resolve()))).create("results")
        if parts:
            con.read_parquet([_literal_glob(p) for p in parts], union_by_name=True).create("parts")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except duckdb.Error as e:
        con.close()
        raise AttnlabError(f"{out}: cannot read its Parquet files ({e})") from None
    return con


def _quote_hint(sql: str, error: str) -> str:
    """A Binder Error on ``train.lr`` (read by SQL as column lr of a table train): the quoted form."""
    import re

    names = sorted(set(re.findall(r'(?<!["\w.])((?:data|model|train)\.\w+)', sql)))
    if names and "Binder Error" in error:
        return " — namespaced columns need double quotes: " + ", ".join(f'"{n}"' for n in names)
    return ""


def query(out: Path | str, sql: str, format: str = "pandas"):
    """Run SQL over a results directory's ``results`` and ``parts`` views (see :func:`connect`);
    returns a pandas DataFrame or a pyarrow Table (None for a statement without a result). A SQL
    error is an AttnlabError with DuckDB's message."""
    import duckdb

    from attnlab.engine.store import _to_arrow

    _format(format)
    con = connect(out)
    try:
        rel = con.sql(sql)
        table = None if rel is None else _to_arrow(rel)
    except duckdb.PermissionException as e:
        raise AttnlabError(
            f"SQL: the query is read-only — it sees the tables results and parts and no file ({str(e).strip()})"
        ) from None
    except duckdb.Error as e:
        raise AttnlabError(f"SQL: {str(e).strip()}{_quote_hint(sql, str(e))}") from None
    finally:
        con.close()
    if table is None:
        return None
    return _as(table, format)
