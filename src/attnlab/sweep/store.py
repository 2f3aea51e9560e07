"""Results on disk: Parquet parts written with atomic renames, one table assembled at the end.

    DIR/parts/part-<hash>.parquet   one file per finished chunk of cells (never rewritten)
    DIR/results.parquet             the cells of the current spec, one row each
    DIR/store.json                  schema version of each family and the jax/jaxlib versions

A part is written to a temporary name and renamed into place, so a crash leaves either a whole
part or none; a rerun skips every cell id already in some part. Parts are only written by the
driver process; workers hand it Arrow tables.

File paths reach DuckDB only as bound parameters, never spliced into SQL text. DuckDB still
expands glob characters (``* ? [``) inside a bound path, so those are escaped (``[*]``, ...)
before binding: an output directory named ``runs [1]`` must not read ``runs 1``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from attnlab.errors import AttnlabError

MANIFEST = "store.json"
_SHOW_MISSING = 5


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once: os.umask can only be read by setting it


@contextmanager
def atomic_file(path: Path):
    """Open a temporary file beside ``path`` for binary writing; on success it is fsynced and
    renamed onto ``path`` (atomic on one file system), on any error it is removed. The file
    gets the permissions a plain open() would give (mkstemp's are 0600)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_file(path) as f:
        f.write(data)


def atomic_write_table(path: Path, table: pa.Table) -> None:
    with atomic_file(path) as f:
        pq.write_table(table, f)


def _literal_glob(path: str) -> str:
    """``path`` as a DuckDB glob pattern that matches only itself: DuckDB globs every file
    argument of read_parquet, bound or not, and has no backslash escape, but a one-character
    class does the job (``[`` -> ``[[]``)."""
    return re.sub(r"([*?\[])", r"[\1]", path)


def _to_arrow(rel: Any) -> pa.Table:
    """A DuckDB relation as a pyarrow Table (``.arrow()`` gives a RecordBatchReader in 2.x)."""
    table = rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.arrow()
    return table.read_all() if isinstance(table, pa.RecordBatchReader) else table


class Store:
    def __init__(self, out: Path):
        self.out = Path(out)
        self.parts = self.out / "parts"
        self.manifest_path = self.out / MANIFEST

    # -- parts -------------------------------------------------------------------------------

    def _part_files(self) -> list[str]:
        """Absolute paths of the parts, sorted by file name (all share one directory). Absolute
        so that DuckDB cannot read a leading ``~`` as the home directory."""
        if not self.parts.exists():
            return []
        return sorted(os.path.abspath(p) for p in self.parts.glob("part-*.parquet"))

    @staticmethod
    def _patterns(files: Iterable[str]) -> list[str]:
        return [_literal_glob(f) for f in files]

    def done_ids(self) -> set[str]:
        files = self._part_files()
        if not files:
            return set()
        with duckdb.connect() as con:
            rows = con.execute(
                "SELECT DISTINCT id FROM read_parquet(?, union_by_name = true)", [self._patterns(files)]
            ).fetchall()
        return {r[0] for r in rows}

    def write_part(self, table: pa.Table) -> Path:
        """Write one chunk's rows (an Arrow table with an ``id`` column) as a new part; its name
        is a hash of the sorted ids, so the same chunk always lands on the same file."""
        if not isinstance(table, pa.Table):
            raise TypeError(f"Store.write_part takes a pyarrow.Table, got {type(table).__name__}")
        if "id" not in table.column_names:
            raise ValueError(f"a part needs an 'id' column; it has {table.column_names}")
        ids = sorted(str(i) for i in table.column("id").to_pylist())
        name = hashlib.sha256(",".join(ids).encode()).hexdigest()[:16]
        path = self.parts / f"part-{name}.parquet"
        atomic_write_table(path, table)
        return path

    def assemble(self, ids: list[str], describe: Callable[[str], str] | None = None, write: bool = True) -> pa.Table:
        """One row per requested id, in the order of ``ids``; written atomically to
        DIR/results.parquet (unless ``write`` is false). A cell written twice (a chunk retrained after a crash between its
        part landing and the next start) is taken from the first part by file name.

        Every requested id must be in some part: otherwise AttnlabError names up to five of the
        missing ones (through ``describe(id)`` when given) and nothing is written."""
        ids = list(ids)
        files = self._part_files()
        if files:
            with duckdb.connect() as con:
                con.register("wanted", pa.table({"id": pa.array(ids, pa.string()), "_order": list(range(len(ids)))}))
                table = _to_arrow(
                    con.sql(
                        """SELECT p.* EXCLUDE (_rn, filename) FROM (
                             SELECT *, row_number() OVER (PARTITION BY id ORDER BY filename) AS _rn
                             FROM read_parquet(?, union_by_name = true, filename = true)) p
                           JOIN wanted w USING (id) WHERE _rn = 1 ORDER BY w._order""",
                        params=[self._patterns(files)],
                    )
                )
        else:
            table = pa.table({"id": pa.array([], pa.string())})
        found = set(table.column("id").to_pylist())
        missing = list(dict.fromkeys(i for i in ids if i not in found))
        if missing:
            raise AttnlabError(self._missing_message(missing, len(set(ids)), describe))
        if write:
            self.write_results(table)
        return table

    def write_results(self, table: pa.Table) -> None:
        atomic_write_table(self.out / "results.parquet", table)

    def _missing_message(self, missing: list[str], wanted: int, describe: Callable[[str], str] | None) -> str:
        shown = []
        for i in missing[:_SHOW_MISSING]:
            label = i
            if describe is not None:
                try:
                    label = f"{describe(i)} [{i}]"
                except Exception:  # a broken describe must not hide the real error
                    label = i
            shown.append(f"  {label}")
        more = f"\n  ... and {len(missing) - _SHOW_MISSING} more" if len(missing) > _SHOW_MISSING else ""
        verb = "is" if len(missing) == 1 else "are"
        return (
            f"{len(missing)} of {wanted} requested cells {verb} missing from {self.parts}:\n"
            + "\n".join(shown)
            + more
            + "\nRerunning the same command trains them (finished cells are skipped)."
        )

    # -- manifest ----------------------------------------------------------------------------

    def read_manifest(self) -> dict | None:
        """The manifest, or None if there is none. A manifest that is not valid JSON is an
        error (it is written atomically, so that means someone edited it)."""
        try:
            text = self.manifest_path.read_text()
        except FileNotFoundError:
            return None
        try:
            manifest = json.loads(text)
        except json.JSONDecodeError as e:
            raise AttnlabError(f"{self.manifest_path} is not valid JSON ({e}); fix or delete it") from None
        if not isinstance(manifest, dict) or not isinstance(manifest.get("schema", {}), dict):
            raise AttnlabError(f"{self.manifest_path} is not an attnlab store manifest; fix or delete it")
        return manifest

    def _write_manifest(self, manifest: dict) -> None:
        atomic_write_bytes(self.manifest_path, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())

    def check_compatible(self, expected: dict, force: bool = False) -> None:
        """Check that the parts already here were written by compatible code before resuming.

        ``expected`` is ``{"schema": {family: version, ...}, "jax": "...", "jaxlib": "..."}``.
        With no parts yet, the manifest is written (schema merged with any existing one). With
        parts, any difference in a family's schema version or in jax/jaxlib (or a missing
        manifest: unknown versions) raises AttnlabError naming it, unless ``force``, which
        records the new versions and keeps the old manifest under "history". A family not yet
        in the manifest is simply added."""
        schema = {str(k): int(v) for k, v in expected.get("schema", {}).items()}
        versions = {k: str(v) for k, v in expected.items() if k not in ("schema", "history")}
        old = self.read_manifest()
        has_parts = bool(self._part_files())

        new = dict(old or {})
        new["schema"] = {**(old or {}).get("schema", {}), **schema}
        new.update(versions)

        if not has_parts:
            if new != old:
                self._write_manifest(new)
            return

        if old is None:
            differences = None
        else:
            differences = []
            for name, version in schema.items():
                had = old["schema"].get(name)
                if had is not None and had != version:
                    differences.append(("schema", f"schema version {had} of family {name!r} (this is {version})"))
            for key, version in versions.items():
                had = old.get(key)
                if had != version:
                    differences.append((key, f"{key} {had if had is not None else 'unknown'} (this is {version})"))

        if differences == []:
            if new != old:  # a new family in the same directory
                self._write_manifest(new)
            return

        if not force:
            raise AttnlabError(self._mismatch_message(differences))
        if old is not None:
            previous = {k: v for k, v in old.items() if k != "history"}
            new["history"] = [*old.get("history", []), previous]
        else:
            new["history"] = [{"schema": None, "note": "parts found without a manifest"}]
        self._write_manifest(new)

    def _mismatch_message(self, differences: list[tuple[str, str]] | None) -> str:
        advice = "Rerun with --force to resume anyway, or use a new --out."
        if differences is None:
            return (
                f"results in {self.out} have parts but no {MANIFEST}: they were written by an older attnlab "
                f"under unknown jax/jaxlib versions and result schemas; their numbers or columns may differ. {advice}"
            )
        kinds = {k for k, _ in differences}
        effects = []
        if kinds - {"schema"}:
            effects.append("their numbers may differ in the last bits")
        if "schema" in kinds:
            effects.append("their columns or their meaning may differ")
        return (
            f"results in {self.out} were written with "
            + ", ".join(d for _, d in differences)
            + f"; {' and '.join(effects)}. {advice}"
        )
