"""Results on disk: Parquet parts written with atomic renames, one table assembled at the end.

    DIR/parts/part-<hash>.parquet   one file per finished chunk of cells (never rewritten)
    DIR/results.parquet             the cells of the current spec, one row each

A part is written to a temporary name and renamed into place, so a crash leaves either a whole
part or none; a rerun skips every cell id already in some part.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq


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


class Store:
    def __init__(self, out: Path):
        self.out = Path(out)
        self.parts = self.out / "parts"

    def _part_files(self) -> list[str]:
        return sorted(str(p) for p in self.parts.glob("part-*.parquet")) if self.parts.exists() else []

    def done_ids(self) -> set[str]:
        files = self._part_files()
        if not files:
            return set()
        rows = duckdb.sql(f"SELECT DISTINCT id FROM read_parquet({files!r}, union_by_name=true)").fetchall()
        return {r[0] for r in rows}

    def write_part(self, rows: list[dict]) -> Path:
        ids = sorted(r["id"] for r in rows)
        name = hashlib.sha256(",".join(ids).encode()).hexdigest()[:16]
        path = self.parts / f"part-{name}.parquet"
        atomic_write_table(path, pa.Table.from_pylist(rows))
        return path

    def assemble(self, ids: list[str]) -> pa.Table:
        """One row per requested id, in the order of ``ids``; written atomically to
        DIR/results.parquet. A cell written twice (a chunk retrained after a crash between its
        part landing and the next start) is taken from the first part by file name."""
        files = self._part_files()
        con = duckdb.connect()
        con.register("wanted", pa.table({"id": ids, "_order": list(range(len(ids)))}))
        table = con.sql(
            f"""SELECT p.* EXCLUDE (_rn, filename) FROM (
                  SELECT *, row_number() OVER (PARTITION BY id ORDER BY filename) AS _rn
                  FROM read_parquet({files!r}, union_by_name=true, filename=true)) p
                JOIN wanted w USING (id) WHERE _rn = 1 ORDER BY w._order"""
        ).arrow()
        if isinstance(table, pa.RecordBatchReader):
            table = table.read_all()
        atomic_write_table(self.out / "results.parquet", table)
        return table
