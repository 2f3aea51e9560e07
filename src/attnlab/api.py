"""The Python API for notebooks and scripts: the CLI's commands as functions.

    attnlab.reproduce("jiang2024-fig1", scale="smoke", out="results/f1")   -> verdict (dict)
    attnlab.sweep("examples/jiang2024_lr_init.toml", "results/grid")      -> verdict (dict)
    attnlab.load("results/grid")                                           -> results table
    attnlab.query("results/grid", "SELECT ... FROM results")               -> query result

Errors are :class:`attnlab.errors.AttnlabError` with the same one-line messages as the CLI.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from attnlab.errors import AttnlabError

FORMATS = ("pandas", "arrow")


def reproduce(exp_id: str, scale: str = "cpu", out: Path | str | None = None, sets: list[str] | None = None,
              **kw: Any) -> dict:  # fmt: skip
    """Run (or resume) a paper experiment into ``out`` (default results/ID-SCALE), as
    ``attnlab reproduce``; ``kw``: executor, progress, config, force. Returns the verdict."""
    from attnlab.experiments import get
    from attnlab.experiments.base import reproduce as run
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
    if format == "pandas" and importlib.util.find_spec("pandas") is None:
        raise AttnlabError("format='pandas' needs pandas (pip install pandas); format='arrow' needs nothing more")
    return format


def load(out: Path | str, format: str = "pandas"):
    """The results table of a results directory (DIR/results.parquet, one row per cell): a
    pandas DataFrame, or with ``format="arrow"`` a pyarrow Table."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    _format(format)
    path = Path(out) / "results.parquet"
    if not path.is_file():
        parts = Path(out, "parts")
        hint = " (parts/ is there: rerun the same command to finish and assemble it)" if parts.is_dir() else ""
        raise AttnlabError(f"{out}: no results.parquet{hint}")
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as e:
        raise AttnlabError(f"{path}: cannot read ({e})") from None
    return table.to_pandas() if format == "pandas" else table


def connect(out: Path | str):
    """A read-only, in-memory DuckDB connection over a results directory with two tables:
    ``results`` (DIR/results.parquet) and ``parts`` (every DIR/parts/*.parquet, columns united by
    name), loaded into memory; then every access to files is switched off (DuckDB's
    ``enable_external_access``, locked), so no statement can read or write any file — a ``COPY … TO``
    cannot overwrite the stored results. Paths are passed as escaped literal globs, never spliced
    into SQL."""
    import duckdb

    from attnlab.sweep.store import Store, _literal_glob

    out = Path(out)
    if not out.is_dir():
        raise AttnlabError(f"{out}: not a results directory ({'does not exist' if not out.exists() else 'not a directory'})")
    results = out / "results.parquet"
    parts = Store(out)._part_files()
    if not results.is_file() and not parts:
        raise AttnlabError(f"{out}: not a results directory (no results.parquet and no parts/*.parquet)")
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


def query(out: Path | str, sql: str, format: str = "pandas"):
    """Run SQL over a results directory's ``results`` and ``parts`` views (see :func:`connect`);
    returns a pandas DataFrame or a pyarrow Table (None for a statement without a result). A SQL
    error is an AttnlabError with DuckDB's message."""
    import duckdb

    from attnlab.sweep.store import _to_arrow

    _format(format)
    con = connect(out)
    try:
        rel = con.sql(sql)
        table = None if rel is None else _to_arrow(rel)
    except duckdb.PermissionException as e:
        raise AttnlabError(f"SQL: the query is read-only — it sees the tables results and parts and no file "
                           f"({str(e).strip()})") from None  # fmt: skip
    except duckdb.Error as e:
        raise AttnlabError(f"SQL: {str(e).strip()}") from None
    finally:
        con.close()
    if table is None:
        return None
    return table.to_pandas() if format == "pandas" else table
