"""A finished results directory exported to the experiment trackers researchers already watch.

One tracker run per experiment directory (never one per cell), holding:

    config   the run's spec (every field, grid axes as lists) and its command
    cells    one step per cell, in the results' order: its final metrics (``final/<metric>``);
             a table of every cell (id, fields, metrics) says which cell each step is
    traces   each cell's probes over training: TensorBoard scalars ``trace/<probe>/cell <i>`` (x =
             the logged step); a W&B table with a row per cell and logged step, a column per probe
    verdict  every claim: statement, measured value, rule and outcome

``tensorboard``  event files under ``DIR/tb/`` (``tensorboard --logdir DIR/tb``)
``wandb``        a Weights & Biases run under ``DIR/wandb/``, offline unless ``WANDB_MODE`` says
                 otherwise: a run directory to upload later with ``wandb sync DIR/wandb/offline-run-*``

Both are optional extras (``pip install -e ".[track]"``); a missing one is one error before the
run trains anything.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from attnlab.errors import AttnlabError

TRACKERS = ("tensorboard", "wandb")
INSTALL = 'pip install -c constraints.txt -e ".[track]"'
TB_DIR = "tb"


WANDB_MODES = ("offline", "online", "shared", "disabled", "dryrun", "run")  # what wandb.init accepts
WANDB_DIR = "wandb"


def check(trackers: Sequence[str], out: Path | None = None) -> None:
    """Everything a tracker export needs, checked before anything runs: known names, installed
    packages, a valid ``WANDB_MODE``, and (given the results directory ``out``) a place to write:
    ``out``/tb and ``out``/wandb must be directories or not exist yet."""
    import importlib.util

    from attnlab.engine.guard import check_output_dir

    for name in trackers:
        if name not in TRACKERS:
            raise AttnlabError(f"--log: unknown tracker {name!r}; available: {', '.join(TRACKERS)}")
        if importlib.util.find_spec(name) is None:
            raise AttnlabError(f"--log {name}: {name} is not installed; install the optional extra: {INSTALL}")
        if name == "wandb":
            mode = os.environ.get("WANDB_MODE", "offline")
            if mode not in WANDB_MODES:
                raise AttnlabError(
                    f"--log wandb: WANDB_MODE={mode!r} is not a W&B mode; valid: {', '.join(WANDB_MODES)} "
                    "(unset it for an offline run)"
                )
        if out is not None:
            check_output_dir(Path(out) / (TB_DIR if name == "tensorboard" else WANDB_DIR), f"--log {name}:")


_WARMING: dict[str, threading.Thread] = {}


def warm(trackers: Sequence[str]) -> None:
    """Import each tracker (and start the W&B service) in a background thread while a run trains,
    so its export at the end does not wait for them: ~1 s of W&B's start and ~0.5 s of
    TensorBoard's imports move off the run's wall time."""

    def start(name: str) -> None:
        try:
            if name == "wandb":
                import wandb

                os.environ.setdefault("WANDB_SILENT", "true")
                wandb.setup()
            else:
                import tensorboard.compat.proto.event_pb2  # noqa: F401
                import tensorboard.summary.writer.event_file_writer  # noqa: F401
        except Exception:  # noqa: BLE001 - the export itself reports what is wrong
            pass

    for name in trackers:
        if name not in _WARMING:
            _WARMING[name] = threading.Thread(target=start, args=(name,), daemon=True, name=f"attnlab-warm-{name}")
            _WARMING[name].start()


def export(out: Path, trackers: Sequence[str]) -> dict[str, Path]:
    """Export the results directory ``out`` (verdict.json, spec.json, results.parquet) to each
    tracker; returns where each wrote."""
    check(trackers, Path(out))
    for name in trackers:  # a warm-up still running is waited for (its failure shows in the export)
        if name in _WARMING:
            _WARMING[name].join()
    run = _Run.read(Path(out))
    return {name: {"tensorboard": _tensorboard, "wandb": _wandb}[name](run) for name in trackers}


class _Run:
    """What a tracker run holds, read from a results directory."""

    def __init__(self, out: Path, verdict: dict, spec: dict, rows: list[dict]):
        self.out, self.verdict, self.spec, self.rows = out, verdict, spec, rows
        first = rows[0] if rows else {}
        self.metrics = [k for k, v in first.items() if _is_metric(k, v)]
        self.traces = [k for k in first if k.startswith("trace_") and k != "trace_step"]

    @classmethod
    def read(cls, out: Path) -> _Run:
        from attnlab.experiments.pipeline import results_table

        try:
            verdict = json.loads((out / "verdict.json").read_text())
            spec = json.loads((out / "spec.json").read_text())
        except (OSError, ValueError) as e:
            raise AttnlabError(f"--log: {out} is not a finished results directory ({e})") from None
        table = results_table(out, verdict)
        drop = [c for c in table.column_names if c.startswith("array_") or c == "params_npz"]
        return cls(out, verdict, spec, table.drop_columns(drop).to_pylist())

    @property
    def name(self) -> str:
        return f"{self.verdict['experiment']}-{self.verdict['scale']}"

    def trace(self, row: dict, name: str) -> list[tuple[int, float]]:
        """(logged step, value) of one cell's probe; non-finite values are left out."""
        steps, values = row.get("trace_step") or [], row.get(name) or []
        return [(int(s), float(v)) for s, v in zip(steps, values, strict=False) if _finite(v)]

    def trace_table(self) -> tuple[list[str], list[list]]:
        """(columns, rows): cell, step, then each probe; one row per cell and logged step."""

        def value(row: dict, name: str, k: int) -> float | None:
            values = row.get(name) or []  # a cell of another stage may not record this probe
            return float(values[k]) if k < len(values) and _finite(values[k]) else None

        rows = [
            [i, int(step), *(value(row, n, k) for n in self.traces)]
            for i, row in enumerate(self.rows)
            for k, step in enumerate(row.get("trace_step") or [])
        ]
        return ["cell", "step", *(n.removeprefix("trace_") for n in self.traces)], rows

    def cell_table(self) -> tuple[list[str], list[list]]:
        columns = ["cell", *(k for k in self.rows[0] if not k.startswith("trace_"))] if self.rows else ["cell"]
        return columns, [[i, *(_plain(r[k]) for k in columns[1:])] for i, r in enumerate(self.rows)]

    def verdict_markdown(self) -> str:
        from attnlab.fmt import fmt_text

        lines = ["| claim | measured | rule | outcome |", "|---|---|---|---|"]
        for c in self.verdict["claims"]:
            cell = lambda x: str(x).replace("|", "\\|")  # noqa: E731
            lines.append(
                f"| {cell(c['id'])}: {cell(c['statement'])} | {cell(fmt_text(c['measured']))} "
                f"| {cell(c['expected'])} | **{c['outcome']}** |"
            )
        return "\n".join(lines)


def _is_metric(key: str, value) -> bool:
    config = key.startswith(("data.", "model.", "train.")) or key in ("seed", "block", "rep", "id")
    return not config and isinstance(value, int | float) and not isinstance(value, bool)


def _finite(v) -> bool:
    return isinstance(v, int | float) and math.isfinite(v)


def _plain(v):
    if isinstance(v, list | dict):
        return json.dumps(v)
    return v


# ---------------------------------------------------------------- TensorBoard


def _tensorboard(run: _Run) -> Path:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.compat.proto.tensor_pb2 import TensorProto
    from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
    from tensorboard.plugins.text.metadata import create_summary_metadata
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    where = run.out / TB_DIR
    writer = EventFileWriter(str(where), filename_suffix=f".{run.name}")
    now = time.time()

    def put(step: int, *values) -> None:
        writer.add_event(Event(wall_time=now, step=step, summary=Summary(value=list(values))))

    def scalar(tag: str, value: float) -> Summary.Value:
        return Summary.Value(tag=tag, simple_value=float(value))

    def text(tag: str, markdown: str) -> None:
        shape = TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)])
        tensor = TensorProto(dtype=7, tensor_shape=shape, string_val=[markdown.encode()])  # 7: DT_STRING
        put(
            0, Summary.Value(tag=tag, metadata=create_summary_metadata(display_name=tag, description=""), tensor=tensor)
        )

    text("config", f"`{run.verdict.get('command', '')}`\n\n```json\n{json.dumps(run.spec, indent=2)}\n```")
    text("verdict", run.verdict_markdown())
    columns, rows = run.cell_table()
    text(
        "cells",
        "\n".join(
            ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
            + ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
        ),
    )
    at: dict[int, list] = {}  # logged step -> every cell's trace values there: one event per step
    for i, row in enumerate(run.rows):
        put(i, *(scalar(f"final/{m}", row[m]) for m in run.metrics if _finite(row[m])))
        for name in run.traces:
            for step, v in run.trace(row, name):
                at.setdefault(step, []).append(scalar(f"trace/{name.removeprefix('trace_')}/cell {i}", v))
    for step in sorted(at):
        put(step, *at[step])
    writer.close()
    return where


# ---------------------------------------------------------------- Weights & Biases


def _wandb(run: _Run) -> Path:
    import wandb

    os.environ.setdefault("WANDB_SILENT", "true")
    mode = os.environ.get("WANDB_MODE", "offline")
    config = {"spec": run.spec, "command": run.verdict.get("command", ""), "cells": len(run.rows)}
    tracker = wandb.init(
        project=os.environ.get("WANDB_PROJECT", "attnlab"), name=run.name, dir=str(run.out), mode=mode, config=config
    )
    try:
        for i, row in enumerate(run.rows):
            tracker.log({f"final/{m}": row[m] for m in run.metrics if _finite(row[m])}, step=i)
        columns, rows = run.cell_table()
        tracker.log({"cells": wandb.Table(columns=columns, data=rows)})
        if run.traces:  # one row per cell and logged step, a column per probe (None where not finite)
            names, traces = run.trace_table()
            tracker.log({"traces": wandb.Table(columns=names, data=traces, allow_mixed_types=True)})
        claims = [
            [c["id"], c["statement"], json.dumps(c["measured"]), c["expected"], c["outcome"]]
            for c in run.verdict["claims"]
        ]
        tracker.log(
            {"verdict": wandb.Table(columns=["claim", "statement", "measured", "rule", "outcome"], data=claims)}
        )
        for c in run.verdict["claims"]:
            tracker.summary[f"claim/{c['id']}"] = c["outcome"]
        for o in ("pass", "fail", "inconclusive", "descriptive"):
            tracker.summary[f"claims_{o}"] = int(np.sum([c["outcome"] == o for c in run.verdict["claims"]]))
    finally:
        tracker.finish()
    return Path(tracker.dir).parent
