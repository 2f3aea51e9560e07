"""Where attnlab may write: a results directory belongs to one run, and every generated output lands
beside stored data, never on it.

A *results directory* (a run's) holds stored data: ``parts/`` (every trained chunk), and the files
``results.parquet``, ``store.json``, ``spec.json`` and ``verdict.json``. It belongs to one run,
recorded in its ``store.json`` under ``run`` (:class:`Owner`: the experiment id and scale, or a user
grid's spec file); a directory written before that record existed is known by its
``verdict.json``. The rules, each checked before any work:

  * a run goes into a new or empty directory, or into a results directory of its own: another
    experiment's (or scale's, or grid's) directory is refused, naming both;
  * nothing is written inside any run's ``parts/`` (a run, an index, a report, an audit);
  * a generated file (an index page, a docs page, audit.json, a tracker's directory) never replaces
    a run's stored file, a directory, or a file attnlab did not write; its parent must be creatable.

Every write itself is atomic (:func:`attnlab.engine.store.atomic_file`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from attnlab.errors import AttnlabError

PARTS = "parts"
MANIFEST = "store.json"
STORED = ("results.parquet", MANIFEST, "spec.json", "verdict.json")  # a run's stored files


@dataclass(frozen=True)
class Owner:
    """The run a results directory belongs to: an experiment at a scale, or a user grid (``sweep``)
    known by its spec file's name (an edited spec resumes into its own directory), or by its title
    when it has no file."""

    experiment: str
    scale: str
    grid: str | None = None

    def as_json(self) -> dict:
        return {"experiment": self.experiment, "scale": self.scale} | ({"grid": self.grid} if self.grid else {})

    @classmethod
    def of_json(cls, d: dict) -> Owner:
        return cls(str(d.get("experiment")), str(d.get("scale")), d.get("grid"))

    def __str__(self) -> str:
        if self.experiment == "sweep":
            return f"the user grid {self.grid!r}"
        return f"{self.experiment} at {self.scale} scale"


def is_results_dir(path: Path) -> bool:
    """A directory with a run's stored file, or with parts (a directory merely named parts is not one)."""
    path = Path(path)
    if not path.is_dir():
        return False
    return any((path / f).is_file() for f in STORED) or any((path / PARTS).glob("part-*.parquet"))


def _ancestors(path: Path) -> list[Path]:
    """``path`` (absolute, symbolic links resolved as far as it exists) and every directory above it."""
    p = Path(path).expanduser().resolve()
    return [p, *p.parents]


def inside_parts(path: Path) -> Path | None:
    """The results directory whose ``parts/`` holds ``path`` (or is ``path``), else None."""
    for p in _ancestors(path):
        if p.name == PARTS and is_results_dir(p.parent):
            return p.parent
    return None


def stored_file_of(path: Path) -> Path | None:
    """The results directory of which ``path`` is stored data (a stored file, or anything in its
    ``parts/``), else None."""
    p = Path(path).expanduser().resolve()
    if p.name in STORED and is_results_dir(p.parent):
        return p.parent
    return inside_parts(p)


def recorded_owner(d: Path) -> Owner | None:
    """Whom the results directory ``d`` belongs to: its store.json's record, else (a directory
    written before the record existed) its verdict.json's experiment and scale, else None."""
    d = Path(d)
    for name, read in ((MANIFEST, lambda j: j.get("run")), ("verdict.json", lambda j: j)):
        try:
            found = read(json.loads((d / name).read_text()))
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(found, dict) and isinstance(found.get("experiment"), str) and "scale" in found:
            owner = Owner.of_json(found)
            if owner.experiment == "sweep" and owner.grid is None:
                return None  # a grid written before the record: which grid is not known, so any may resume it
            return owner
    return None


def check_run_dir(out: Path, owner: Owner, option: str = "--out") -> None:
    """``out`` may take ``owner``'s results: new, empty, or a results directory of the same run;
    never another run's, never inside a run's parts/, never someone else's non-empty directory."""
    from attnlab.engine.store import is_temporary

    out = Path(out)
    run = inside_parts(out)
    if run is not None:
        raise AttnlabError(
            f"{option} {out}: inside the stored parts of the run in {run}; nothing is written there "
            f"(give a directory outside {run / PARTS})"
        )
    _parent_creatable(out, option)
    if out.exists() and not out.is_dir():
        raise AttnlabError(f"{option} {out}: exists and is not a directory")
    if not out.is_dir():
        return
    if is_results_dir(out) and not any((out / f).exists() for f in (MANIFEST, PARTS, "results.parquet")):
        raise AttnlabError(
            f"{option} {out}: holds a verdict without results (a committed docs entry?); a run goes into a "
            "directory of its own"
        )
    theirs = recorded_owner(out)
    if theirs is not None and theirs != owner:
        raise AttnlabError(
            f"{option} {out}: holds the results of {theirs}; this run is {owner}. Nothing was written: give "
            f"another {option} (each run keeps its own results directory)"
        )
    # a run starting beside this one may have written only its first temporary file so far
    if theirs is None and not is_results_dir(out) and any(not is_temporary(p) for p in out.iterdir()):
        raise AttnlabError(
            f"{option} {out}: a non-empty directory that is not an attnlab results directory (no store.json or "
            "parts/); choose a new or empty directory"
        )


def _parent_creatable(path: Path, option: str) -> None:
    """Every existing directory above ``path`` is a directory (not a file in the way)."""
    for p in reversed(Path(path).expanduser().absolute().parents):
        if p.exists() and not p.is_dir():
            raise AttnlabError(f"{option} {path}: cannot create it: {p} is a file, not a directory")


def check_output_file(path: Path, option: str, marker: str | None = None) -> None:
    """``path`` may take a generated file: not a run's stored data, not a directory, its parent
    creatable; an existing file only if attnlab wrote it (it holds ``marker``, when given)."""
    path = Path(path)
    run = stored_file_of(path)
    if run is not None:
        raise AttnlabError(f"{option} {path}: is stored data of the run in {run}; write the output elsewhere")
    if path.is_dir():
        raise AttnlabError(f"{option} {path}: is a directory; give a file name")
    _parent_creatable(path, option)
    if marker is not None and path.exists():
        try:
            with open(path, "rb") as f:
                head = f.read(1 << 16)
        except OSError as e:
            raise AttnlabError(f"{option} {path}: cannot read the file there ({e.strerror})") from None
        if marker.encode() not in head:
            raise AttnlabError(
                f"{option} {path}: a file attnlab did not write is there; it is left as it is (give another name)"
            )


def check_output_dir(path: Path, option: str) -> None:
    """``path`` may take generated files (a tracker's, a docs directory): a directory or nothing yet,
    outside every run's parts/, its parent creatable."""
    path = Path(path)
    run = inside_parts(path)
    if run is not None:
        raise AttnlabError(f"{option} {path}: inside the stored parts of the run in {run}; nothing is written there")
    _parent_creatable(path, option)
    if path.exists() and not path.is_dir():
        raise AttnlabError(f"{option} {path}: is a file, not a directory (move it, or write elsewhere)")
