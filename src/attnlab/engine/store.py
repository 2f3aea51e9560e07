"""Results on disk: Parquet parts written with atomic renames, one table assembled at the end.

    DIR/parts/part-<hash>.parquet   one file per finished chunk of cells (never rewritten)
    DIR/parts/damaged/              parts that could not be read, moved aside (never deleted)
    DIR/results.parquet             the cells of the current spec, one row each
    DIR/store.json                  schema version of each family, the jax/jaxlib versions, and the run
                                    the directory belongs to (:mod:`attnlab.engine.guard`)

A part is written to a temporary name and renamed into place, so a crash leaves either a whole
part or none; a rerun skips every cell id already in some part. Parts are only written by the
driver process; workers hand it Arrow tables.

What can still go wrong on disk, and what happens:
  * a write fails (disk full, quota, read-only): :class:`StoreWriteError`, one message naming
    the directory and the OS error; nothing partial is left and the parts already there stay
  * the process is killed mid-write: its temporary file is left behind; the next run removes
    temporary files whose writer (same host, pid) is gone
  * a part is damaged afterwards (truncated, overwritten, zero bytes, a flipped bit): the next
    scan finds it (a full read with page checksums verified), moves it to parts/damaged/ with a
    timestamp and records a :class:`DamagedPart`; its cells count as not done, so they are
    trained again

File paths reach DuckDB only as bound parameters, never spliced into SQL text. DuckDB still
expands glob characters (``* ? [``) inside a bound path, so those are escaped (``[*]``, ...)
before binding: an output directory named ``runs [1]`` must not read ``runs 1``.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import socket
import tempfile
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass
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
_HOST = re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname()) or "host"
# .<target name>.<host>-<pid>.<random>.tmp: who wrote it, so a later run can tell a dead writer's leftovers
_TMP = re.compile(r"^\..+\.(?P<host>[A-Za-z0-9_]+)-(?P<pid>\d+)\.[^.]+\.tmp$")


class StoreWriteError(AttnlabError, OSError):
    """A results file could not be written (disk full, quota, permissions): a user-facing error
    that is still an OSError, with the original errno, strerror and the directory as filename."""

    def __str__(self) -> str:  # the message, not OSError's "[Errno n] strerror: filename"
        return str(self.args[0]) if self.args else ""


def _reason(e: OSError) -> str:
    code = errno.errorcode.get(e.errno, "") if e.errno else ""
    return f"{e.strerror or e}" + (f" ({code})" if code else "")


def is_temporary(path: Path) -> bool:
    """A temporary file of :func:`atomic_file` (any writer's)."""
    return bool(_TMP.match(Path(path).name))


@contextmanager
def atomic_file(path: Path):
    """Open a temporary file beside ``path`` for binary writing; on success it is fsynced and
    renamed onto ``path`` (atomic on one file system), on any error it is removed. The file
    gets the permissions a plain open() would give (mkstemp's are 0600)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{_HOST}-{os.getpid()}.", suffix=".tmp")
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
    """Parquet with page checksums, so a damaged page is an error on a verified read rather than
    silently wrong numbers."""
    with atomic_file(path) as f:
        pq.write_table(table, f, write_page_checksum=True)


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Remove the temporary files in ``folder`` left by writers on this host that are no longer
    running (a kill -9 mid-write); a live writer's file, or one from another host, is kept."""
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        m = _TMP.match(name)
        if not m or m["host"] != _HOST or _alive(int(m["pid"])):
            continue
        try:
            (Path(folder) / name).unlink()
            removed.append(Path(folder) / name)
        except OSError:
            pass
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


@dataclass(frozen=True)
class DamagedPart:
    """A part that could not be read, and where it was moved. ``cells`` is its row count when its
    footer could still be read (None when not even that)."""

    path: Path
    moved_to: Path
    reason: str
    cells: int | None


def _damage(e: BaseException) -> bool:
    """Whether a read error means the file's contents are bad (rather than the disk or the
    permissions): Arrow's invalid-data errors, and its I/O errors that carry no errno
    (undecodable thrift, a failed page checksum)."""
    if isinstance(e, pa.ArrowInvalid | ValueError | EOFError):
        return True
    return isinstance(e, OSError) and not e.errno


def _read_ids(path: str) -> list[str]:
    """The ids of a part, after reading all of it with page checksums verified (a bit flip in a
    metric would otherwise pass silently: DuckDB does not check them): the footer, every page,
    and an 'id' column with one non-null value per row."""
    meta = pq.read_metadata(path)
    if "id" not in meta.schema.names:
        raise ValueError(f"no 'id' column (columns: {', '.join(meta.schema.names[:8])})")
    ids = pq.read_table(path, page_checksum_verification=True).column("id")
    if len(ids) != meta.num_rows or ids.null_count:
        raise ValueError(f"{meta.num_rows} rows in the footer, {len(ids) - ids.null_count} ids")
    return [str(i) for i in ids.to_pylist()]


def read_table(path: Path, repair: str = "") -> pa.Table:
    """A whole Parquet file, its page checksums verified; a missing, damaged or unreadable file is
    one :class:`AttnlabError` naming it, with ``repair`` (how to mend it) appended."""
    try:
        return pq.read_table(path, page_checksum_verification=True)
    except FileNotFoundError:
        raise AttnlabError(f"{path}: not found{repair}") from None
    except Exception as e:  # bad bytes raise ArrowInvalid, OSError without errno, ValueError, ... by where they lie
        why = _reason(e) if isinstance(e, OSError) and e.errno else str(e).strip().splitlines()[0] if str(e) else ""
        raise AttnlabError(f"{path}: damaged or unreadable Parquet file ({why or type(e).__name__}){repair}") from None


def _literal_glob(path: str) -> str:
    """``path`` as a DuckDB glob pattern that matches only itself: DuckDB globs every file
    argument of read_parquet, bound or not, and has no backslash escape, but a one-character
    class does the job (``[`` -> ``[[]``)."""
    return re.sub(r"([*?\[])", r"[\1]", path)


def _to_arrow(rel: Any) -> pa.Table:
    """A DuckDB relation as a pyarrow Table (``.arrow()`` gives a RecordBatchReader in 2.x)."""
    table = rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.arrow()
    return table.read_all() if isinstance(table, pa.RecordBatchReader) else table


def part_name(ids: Iterable[str]) -> str:
    """The file name of the part holding exactly these cell ids (a hash of the sorted ids)."""
    key = ",".join(sorted(str(i) for i in ids))
    return f"part-{hashlib.sha256(key.encode()).hexdigest()[:16]}.parquet"


class Store:
    def __init__(self, out: Path):
        self.out = Path(out)
        self.parts = self.out / "parts"
        self.damaged_dir = self.parts / "damaged"
        self.manifest_path = self.out / MANIFEST
        self.damaged: list[DamagedPart] = []  # found by this Store, in order
        self.notes: list[str] = []  # warnings for the user (e.g. damaged parts and their cells)
        self._checked: dict[str, tuple[tuple, frozenset[str]]] = {}  # part -> (stat, ids) already read

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

    def scan(self) -> dict[str, frozenset[str]]:
        """The readable parts and their ids. Each part is read in full once per Store (again only
        if its size or mtime changes; a resume reads the store once more to assemble it anyway);
        one that cannot be read is moved aside (:meth:`quarantine`), so its cells count as not
        done. Leftover temporary files of dead writers are removed."""
        remove_stale_temporaries(self.parts)
        remove_stale_temporaries(self.out)
        out = {}
        for f in self._part_files():
            try:
                st = os.stat(f)
            except FileNotFoundError:
                continue
            sig = (st.st_size, st.st_mtime_ns, st.st_ino)
            seen = self._checked.get(f)
            if seen is not None and seen[0] == sig:
                out[f] = seen[1]
                continue
            try:
                ids = _read_ids(f)
            except Exception as e:
                if not _damage(e):
                    raise AttnlabError(f"cannot read {f}: {_reason(e) if isinstance(e, OSError) else e}") from e
                self.quarantine(f, e)
                continue
            self._checked[f] = (sig, frozenset(ids))
            out[f] = self._checked[f][1]
        return out

    def quarantine(self, path: str | Path, error: BaseException) -> DamagedPart:
        """Move a damaged part to DIR/parts/damaged/<name>.<UTC time> (never delete: it may
        still be worth recovering by hand) and record it."""
        path = Path(path)
        cells = None
        try:
            cells = pq.read_metadata(path).num_rows
        except Exception:
            pass
        self.damaged_dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        dest = self.damaged_dir / f"{path.name}.{stamp}"
        n = 1
        while dest.exists():
            n += 1
            dest = self.damaged_dir / f"{path.name}.{stamp}.{n}"
        os.replace(path, dest)
        self._checked.pop(str(path), None)
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        found = DamagedPart(path, dest, reason, cells)
        self.damaged.append(found)
        return found

    def done_ids(self) -> set[str]:
        """Ids of the cells in readable parts (see :meth:`scan`)."""
        return set().union(*self.scan().values())

    def write_part(self, table: pa.Table) -> Path:
        """Write one chunk's rows (an Arrow table with an ``id`` column) as a new part; its name
        is a hash of the sorted ids, so the same chunk always lands on the same file. A failed
        write raises :class:`StoreWriteError` and leaves nothing behind."""
        if not isinstance(table, pa.Table):
            raise TypeError(f"Store.write_part takes a pyarrow.Table, got {type(table).__name__}")
        if "id" not in table.column_names:
            raise ValueError(f"a part needs an 'id' column; it has {table.column_names}")
        path = self.parts / part_name(table.column("id").to_pylist())
        self._write(path, table, f"a part of {table.num_rows} cells")
        return path

    def _write(self, path: Path, table: pa.Table, what: str) -> None:
        try:
            atomic_write_table(path, table)
        except StoreWriteError:
            raise
        except OSError as e:
            err = StoreWriteError(
                f"cannot write {what} into {path.parent}: {_reason(e)}. Nothing partial was left there and the "
                f"results already written are intact; fix the cause (e.g. free space) and rerun the same command: "
                f"it resumes where this run stopped."
            )
            err.errno, err.strerror, err.filename = e.errno, e.strerror, str(path.parent)
            raise err from e

    def assemble(self, ids: list[str], describe: Callable[[str], str] | None = None, write: bool = True) -> pa.Table:
        """One row per requested id, in the order of ``ids``; written atomically to
        DIR/results.parquet (unless ``write`` is false). A cell written twice (a chunk retrained after a crash between its
        part landing and the next start) is taken from the first part by file name.

        Every requested id must be in some part: otherwise AttnlabError names up to five of the
        missing ones (through ``describe(id)`` when given) and nothing is written."""
        ids = list(ids)
        damaged_before = len(self.damaged)
        table = self._query(ids)
        found = set(table.column("id").to_pylist())
        missing = list(dict.fromkeys(i for i in ids if i not in found))
        if missing:
            raise AttnlabError(
                self._missing_message(missing, len(set(ids)), describe) + self._damage_note(damaged_before)
            )
        if write:
            self.write_results(table)
        return table

    def _query(self, ids: list[str]) -> pa.Table:
        files = sorted(self.scan())
        if not files:
            return pa.table({"id": pa.array([], pa.string())})
        with duckdb.connect() as con:
            con.register("wanted", pa.table({"id": pa.array(ids, pa.string()), "_order": list(range(len(ids)))}))
            return _to_arrow(
                con.sql(
                    """SELECT p.* EXCLUDE (_rn, filename) FROM (
                         SELECT *, row_number() OVER (PARTITION BY id ORDER BY filename) AS _rn
                         FROM read_parquet(?, union_by_name = true, filename = true)) p
                       JOIN wanted w USING (id) WHERE _rn = 1 ORDER BY w._order""",
                    params=[self._patterns(files)],
                )
            )

    def _damage_note(self, since: int) -> str:
        new = self.damaged[since:]
        if not new:
            return ""
        return "\n" + "\n".join(f"(damaged part {d.path.name} was moved to {d.moved_to}: {d.reason})" for d in new)

    def write_results(self, table: pa.Table) -> None:
        self._write(self.out / "results.parquet", table, "results.parquet")

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

    def claim(self, owner: dict) -> None:
        """Record the run this directory belongs to (``{"experiment", "scale"[, "title"]}``) in the
        manifest; a directory recorded as another run's is an error (:mod:`attnlab.engine.guard`
        refuses it before a run starts; this is the last line of defence)."""
        manifest = self.read_manifest() or {}
        had = manifest.get("run")
        if had == owner:
            return
        if had is not None:
            raise AttnlabError(f"{self.out}: holds the results of {had}, not of {owner}; give another --out")
        self._write_manifest(manifest | {"run": owner})

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
