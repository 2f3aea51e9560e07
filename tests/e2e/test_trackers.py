"""--log tensorboard|wandb: one tracker run per results directory, read back with the trackers' own
readers (TensorBoard's event accumulator; the records of the W&B offline run file)."""

import glob
import json
import math
import shutil
import struct

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from attnlab import trackers
from attnlab.cli import app

runner = CliRunner()
EXP = "jiang2024-fig3"  # traces and claims


@pytest.fixture(scope="module")
def exported(smoke, tmp_path_factory):
    """The session's smoke run copied, resumed with both trackers (nothing is trained again)."""
    out = tmp_path_factory.mktemp("tracked") / "run"
    shutil.copytree(smoke(EXP).out, out)
    r = runner.invoke(
        app,
        ["reproduce", EXP, "--scale", "smoke", "--out", str(out), "--quiet", "--log", "tensorboard", "--log", "wandb"],
    )
    assert r.exit_code == 0, r.output
    rows = pq.read_table(out / "results.parquet").to_pylist()
    return out, rows, json.loads((out / "verdict.json").read_text())


def test_tensorboard_events_hold_every_cells_metrics_traces_config_and_verdict(exported):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out, rows, verdict = exported
    (path,) = glob.glob(str(out / "tb" / "events.out.tfevents.*"))
    ea = EventAccumulator(path, size_guidance={"scalars": 0, "tensors": 0})
    ea.Reload()
    final = ea.Scalars("final/test_loss")
    assert [e.step for e in final] == list(range(len(rows)))  # one step per cell, in the results' order
    assert [e.value for e in final] == pytest.approx([r["test_loss"] for r in rows], rel=1e-6)
    traces = [k for k in rows[0] if k.startswith("trace_") and k != "trace_step"]
    assert traces
    for i in (0, len(rows) - 1):
        for name in traces:
            got = ea.Scalars(f"trace/{name.removeprefix('trace_')}/cell {i}")
            assert [e.step for e in got] == rows[i]["trace_step"]
            assert [e.value for e in got] == pytest.approx(rows[i][name], rel=1e-6)
    text = lambda tag: ea.Tensors(tag)[0].tensor_proto.string_val[0].decode()  # noqa: E731
    assert json.loads(text("config").split("```json\n")[1].split("\n```")[0]) == json.loads(
        (out / "spec.json").read_text()
    )
    assert all(f"| **{c['outcome']}** |" in text("verdict") and c["id"] in text("verdict") for c in verdict["claims"])


def wandb_records(path):
    """The records of a W&B run file (its LevelDB-style log: 7-byte header, 32 KiB blocks of
    chunks with a 7-byte header each: crc, length, type full/first/middle/last)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, pos, part = open(path, "rb").read(), 7, b""
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:  # a block's tail too short for a header is padding
            pos += 32768 - pos % 32768
            continue
        _, n, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + n], pos + 7 + n
        part = chunk if kind in (1, 2) else part + chunk
        if kind in (1, 4):
            r = pb.Record()
            r.ParseFromString(part)
            yield r


def test_wandb_offline_run_holds_every_cells_metrics_config_and_verdict(exported):
    out, rows, verdict = exported
    (path,) = glob.glob(str(out / "wandb" / "offline-run-*" / "run-*.wandb"))
    records = list(wandb_records(path))
    history = {}
    for r in records:
        if r.WhichOneof("record_type") == "history":
            items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
            if "final/test_loss" in items:
                history[items["_step"]] = items["final/test_loss"]
    assert history == pytest.approx({i: r["test_loss"] for i, r in enumerate(rows)}, rel=1e-9)
    summary = {
        i.key or "/".join(i.nested_key): json.loads(i.value_json)
        for r in records
        if r.WhichOneof("record_type") == "summary"
        for i in r.summary.update
    }
    assert {c["id"]: c["outcome"] for c in verdict["claims"]} == {
        k.removeprefix("claim/"): v for k, v in summary.items() if k.startswith("claim/")
    }
    (run,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    config = {i.key: json.loads(i.value_json) for i in run.config.update}
    assert config["spec"] == json.loads((out / "spec.json").read_text()) and config["cells"] == len(rows)
    assert run.display_name == f"{EXP}-smoke"
    # the traces table (a row per cell and logged step, a column per probe), from the run's media file
    (table,) = glob.glob(str(out / "wandb" / "offline-run-*" / "files" / "media" / "table" / "traces_*.table.json"))
    table = json.loads(open(table).read())
    names = [k for k in rows[0] if k.startswith("trace_") and k != "trace_step"]
    assert table["columns"] == ["cell", "step", *(n.removeprefix("trace_") for n in names)]
    want = [
        [i, s, *(r[n][k] if math.isfinite(r[n][k]) else None for n in names)]
        for i, r in enumerate(rows)
        for k, s in enumerate(r["trace_step"])
    ]
    assert table["data"] == want


def test_an_unknown_or_missing_tracker_is_one_error_before_anything_runs(tmp_path, monkeypatch):
    r = runner.invoke(app, ["reproduce", EXP, "--scale", "smoke", "--out", str(tmp_path / "a"), "--log", "mlflow"])
    assert r.exit_code == 2 and "--log: unknown tracker 'mlflow'; available: tensorboard, wandb" in r.output
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "wandb" else object())
    with pytest.raises(Exception, match=r"--log wandb: wandb is not installed"):
        trackers.check(["wandb"])
    r = runner.invoke(app, ["reproduce", EXP, "--scale", "smoke", "--out", str(tmp_path / "b"), "--log", "wandb"])
    assert r.exit_code == 2 and "pip install" in r.output and not (tmp_path / "b").exists()
