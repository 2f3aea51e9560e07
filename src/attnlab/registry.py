"""Where parts and experiments are found: they register themselves.

    PART = attnlab.register(Model(name="mine", ...))       # a data model, model or probe set
    EXPERIMENT = attnlab.register(MyExperiment())          # an experiment, under its id

An object is registered when its module is imported. attnlab's own modules are imported on the
first look-up — every module of ``attnlab.data`` and ``attnlab.models``, and of each paper's
package under ``attnlab.experiments`` — so there is no central list to keep. From elsewhere:

- ``package.module:ATTRIBUTE`` wherever a part name goes (TOML, ``--set``, the API): the module
  is imported from ``sys.path``, the directory of the spec's TOML file (:func:`search`) and the
  current directory;
- installed packages: entry points in the groups ``attnlab.parts`` and ``attnlab.experiments``,
  each naming an object to register or a module that registers its own when imported.

A part from outside attnlab is *outside*: its cells' ids include a digest of its module's source
(:func:`source_digest`), so an edited file gives new cells instead of resuming stale ones, and its
declared fast paths are checked on first use (:mod:`attnlab.fastcheck`). :func:`bundle` and
:func:`install` carry outside modules' files to Ray workers.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import pkgutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from attnlab.errors import AttnlabError

KINDS = ("data", "model", "probes", "experiment")
_REGISTRY: dict[str, dict[str, Any]] = {k: {} for k in KINDS}
_ORIGIN: dict[tuple[str, str], str] = {}  # (kind, name) -> module of an outside object
OWN_PACKAGES = ("attnlab.data", "attnlab.models")  # every module imported on the first look-up
OWN_EXPERIMENTS = "attnlab.experiments"  # each paper's subpackage: all its modules


def kind_of(obj) -> str | None:
    from attnlab.experiments.base import Experiment
    from attnlab.problem import DataModel, Model, ProbeSet

    types = {"data": DataModel, "model": Model, "probes": ProbeSet, "experiment": Experiment}
    return next((k for k, t in types.items() if isinstance(obj, t)), None)


def register(obj, name: str | None = None):
    """Register a part (under ``obj.name``) or an experiment (under ``obj.id``); returns ``obj``.
    A name already taken by another object is an error."""
    kind = kind_of(obj)
    if kind is None:
        raise AttnlabError(f"register: {type(obj).__name__} is not a data model, model, probe set or experiment")
    name = name or (obj.id if kind == "experiment" else obj.name)
    table = _REGISTRY[kind]
    if name in table and table[name] is not obj:
        raise AttnlabError(f"register: the {kind} name {name!r} is taken (by {_origin_of(kind, name)})")
    table[name] = obj
    caller = sys._getframe(1).f_globals.get("__name__", "")
    if caller != "attnlab" and not caller.startswith("attnlab."):
        _ORIGIN[(kind, name)] = caller
    return obj


def _origin_of(kind: str, name: str) -> str:
    return _ORIGIN.get((kind, name), "attnlab")


@functools.cache
def _discover() -> None:
    """Import attnlab's own modules (they register themselves), then installed packages' entry points."""
    from importlib.metadata import entry_points

    for pkg in OWN_PACKAGES:
        for m in pkgutil.iter_modules(importlib.import_module(pkg).__path__):
            importlib.import_module(f"{pkg}.{m.name}")
    experiments = importlib.import_module(OWN_EXPERIMENTS)
    for paper in pkgutil.iter_modules(experiments.__path__):
        if paper.ispkg:
            sub = importlib.import_module(f"{OWN_EXPERIMENTS}.{paper.name}")
            for m in pkgutil.iter_modules(sub.__path__):
                importlib.import_module(f"{sub.__name__}.{m.name}")
    for group in ("attnlab.parts", "attnlab.experiments"):
        for ep in entry_points(group=group):
            load_entry_point(ep)


def load_entry_point(ep) -> None:
    """Register what an installed package's entry point names: a part or an experiment, or a
    module that registers its own when imported. A broken one is one error naming it."""
    try:
        obj = ep.load()
    except Exception as e:  # noqa: BLE001 — a broken package must name itself, not crash every command
        raise AttnlabError(f"entry point {ep.group} {ep.name!r} ({ep.value}) does not load: {type(e).__name__}: {e}") from None
    if isinstance(obj, type(sys)):
        return
    kind = kind_of(obj)
    if kind is None:
        raise AttnlabError(f"entry point {ep.group} {ep.name!r} ({ep.value}) is a {type(obj).__name__}, not a part or "
                           f"an experiment")  # fmt: skip
    name = obj.id if kind == "experiment" else obj.name
    if _REGISTRY[kind].get(name) is not obj:
        register(obj)
        _ORIGIN[(kind, name)] = ep.module


def registered(kind: str) -> dict[str, Any]:
    """Every registered object of ``kind`` by name (experiments: in :func:`experiment_order`)."""
    _discover()
    table = _REGISTRY[kind]
    if kind == "experiment":
        return {k: table[k] for k in sorted(table, key=experiment_order)}
    return dict(table)


def experiment_order(exp_id: str) -> tuple:
    """attnlab's own first, by paper; within a paper its figures first, then the rest by id."""
    paper = exp_id.split("-")[0]
    return (_origin_of("experiment", exp_id) != "attnlab", paper, not exp_id.startswith(f"{paper}-fig"), exp_id)


def did_you_mean(name: str, valid) -> str:
    """" (did you mean X?)" for the closest valid names, or ""."""
    import difflib

    close = difflib.get_close_matches(name, list(valid), n=2, cutoff=0.75)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def part(kind: str, name: str):
    """The part ``name`` of ``kind`` ("data", "model", "probes"): a registered one, or
    ``package.module:ATTRIBUTE`` of a module of one's own."""
    table = registered(kind)
    if name in table:
        return table[name]
    if isinstance(name, str) and ":" in name:
        return _plugin(kind, name)
    raise AttnlabError(f"{kind}.name: unknown {kind} {name!r}{did_you_mean(str(name), table)}; valid: "
                       f"{', '.join(table)}, or package.module:ATTRIBUTE of a part in your own module")


_SEARCH: list[str] = []  # directories searched after sys.path: the specs' own, then the current one


def search(directory: str | os.PathLike) -> None:
    """Also import outside modules from ``directory`` (a spec's TOML file's), after sys.path."""
    d = str(Path(directory).resolve())
    if d not in _SEARCH:
        _SEARCH.append(d)


def _import(module: str):
    sys.path.extend(d for d in (*_SEARCH, os.getcwd()) if d not in sys.path)  # kept: the module may import more
    return importlib.import_module(module)


@functools.cache
def _plugin(kind: str, name: str):
    module, _, attr = name.partition(":")
    try:
        obj = getattr(_import(module), attr)
    except (ImportError, AttributeError) as e:
        raise AttnlabError(f"{kind}.name: cannot load the plugin {name!r} ({type(e).__name__}: {e})") from None
    if kind_of(obj) != kind:
        raise AttnlabError(f"{kind}.name: {name!r} is a {type(obj).__name__}, not a {kind} part")
    _ORIGIN[(kind, name)] = module
    return obj


def outside(kind: str, name: str) -> str | None:
    """The module an outside part comes from (None for attnlab's own)."""
    part(kind, name)
    return _ORIGIN.get((kind, name))


def _module_file(module: str) -> Path | None:
    spec = importlib.util.find_spec(module) if module not in sys.modules else sys.modules[module].__spec__
    origin = getattr(spec, "origin", None)
    return Path(origin) if origin and origin.endswith(".py") else None


def source_digest(kind: str, name: str) -> str | None:
    """16 hex digits of sha256 over the source file of an outside part's module (None for
    attnlab's own parts, whose ``version`` says when their numbers change)."""
    module = outside(kind, name)
    if module is None:
        return None
    path = _module_file(module)
    if path is None:
        raise AttnlabError(f"{kind}.name: the module {module!r} of {name!r} has no Python source file to identify "
                           f"its cells by")
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


# ---------------------------------------------------------------- shipping outside modules


def bundle(parts: list[tuple[str, str]]) -> tuple[tuple[str, bytes], ...]:
    """The files that make the outside parts' modules importable elsewhere: for a module of its
    own, its file; for one in a package, the package's .py files (relative paths, contents)."""
    files: dict[str, bytes] = {}
    for kind, name in parts:
        module = outside(kind, name)
        if module is None:
            continue
        top = module.partition(".")[0]
        path = _module_file(top)
        if path is None:
            raise AttnlabError(f"{kind}.name: cannot ship the module {module!r} of {name!r} to Ray workers (no "
                               f"source file)")
        if path.name == "__init__.py":
            root = path.parent.parent
            for f in sorted(path.parent.rglob("*.py")):
                files[str(f.relative_to(root))] = f.read_bytes()
        else:
            files[path.name] = path.read_bytes()
    return tuple(sorted(files.items()))


def install(files: tuple[tuple[str, bytes], ...]) -> None:
    """Make shipped modules importable in this process: written once under a directory named by
    their digest, put first on sys.path; a module already imported from another version of the
    files is dropped so that it is imported again."""
    if not files:
        return
    digest = hashlib.sha256(repr(files).encode()).hexdigest()[:16]
    root = Path(tempfile.gettempdir()) / f"attnlab-modules-{digest}"
    if not root.is_dir():
        tmp = Path(tempfile.mkdtemp(prefix=f"{root.name}-"))
        for rel, data in files:
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_bytes(data)
        try:
            tmp.rename(root)
        except OSError:  # another process installed it first
            pass
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
        tops = {rel.partition("/")[0].removesuffix(".py") for rel, _ in files}
        for m in [m for m in sys.modules if m.partition(".")[0] in tops]:
            del sys.modules[m]
        _plugin.cache_clear()
        importlib.invalidate_caches()
