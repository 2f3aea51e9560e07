"""The documentation pages: generated from the code and the committed result files alone, and
the committed pages are what that gives."""

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from attnlab import docs
from attnlab.cli import app
from attnlab.experiments import get

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def test_the_committed_pages_are_what_the_committed_results_give():
    assert docs.stale(ROOT / "docs") == [], "run `attnlab docs` and commit the pages"


def fake_run(root: Path, exp_id: str, outcome: str = "pass") -> Path:
    d = root / exp_id
    d.mkdir(parents=True)
    claim = {
        "id": "slope",
        "statement": "the boundary | slope",
        "measured": {"slope": -2.01, "ci95": [-2.14, -1.9]},
        "expected": "inside [−2.5, −1.5]",
        "outcome": outcome,
        "regime": "protocol",
    }
    verdict = {"experiment": exp_id, "scale": "cpu", "cells": 800, "runtime_s": 27.0, "command": "c", "claims": [claim]}
    (d / "verdict.json").write_text(json.dumps(verdict))
    (d / "b.png").write_bytes(docs.PNG + b"b")
    (d / "a.png").write_bytes(docs.PNG + b"a")
    return d


def test_collect_copies_verdicts_and_the_main_figure_and_build_renders_them(tmp_path):
    fake_run(tmp_path / "run", "jiang2024-fig1")
    assert docs.collect(tmp_path / "run", tmp_path / "docs") == (["jiang2024-fig1"], [])
    got = sorted(p.name for p in (tmp_path / "docs" / "results" / "jiang2024-fig1").iterdir())
    assert got == ["a.png", "verdict.json"]
    page = docs.build(tmp_path / "docs")["jiang2024.md"]
    assert "| `slope`: the boundary \\| slope | prediction · protocol | slope: -2.01; ci95: [-2.14, -1.9] |" in page
    assert "**pass** |" in page and "cpu scale: 1 pass" in page and "rule versions were recorded" in page
    assert "![jiang2024-fig1](results/jiang2024-fig1/a.png)" in page
    for a in get("jiang2024-fig1").assumptions:  # each assumption: written in its experiment, shown here
        assert " ".join(a.split()) in page
    assert "## jiang2024-fig3" in page and "No run committed under `docs/results/jiang2024-fig3/` yet." in page
    fields = docs.build(tmp_path / "docs")["fields.md"]
    assert "## model.jiang2024" in fields and "| `model.d_h` |" in fields and "## train (the training recipe)" in fields


def test_docs_check_fails_on_a_stale_page_and_docs_rewrites_it(tmp_path, monkeypatch):
    target = tmp_path / "docs"
    shutil.copytree(ROOT / "docs" / "results", target / "results")
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["docs", "--check"])
    assert r.exit_code == 1 and "out of date" in r.output and "fields.md" in r.output
    r = runner.invoke(app, ["docs"])
    assert r.exit_code == 0 and docs.stale(target) == []
    run = fake_run(tmp_path / "run", "li2023-fig1", outcome="fail")
    r = runner.invoke(app, ["docs", "--collect", str(run.parent)])
    assert r.exit_code == 0, r.output
    assert "cpu scale: 1 fail" in (target / "li2023.md").read_text()
    r = runner.invoke(app, ["docs", "--collect", str(tmp_path / "nothing")])
    assert r.exit_code == 2 and "no experiment directory with a verdict.json" in r.output


def test_every_committed_spec_is_the_codes_spec_of_its_scale():
    """A committed run made before its experiment's design changed is named on its page; none is
    committed so (a stale entry once showed three claims as passes that the code reports as
    descriptive)."""
    committed = sorted((ROOT / "docs" / "results").glob("*/spec.json"))
    assert committed  # wu2023-width's at least: the check is not vacuous
    for path in committed:
        exp_id = path.parent.name
        scale = json.loads((path.parent / "verdict.json").read_text())["scale"]
        changed = docs.design_changes(ROOT / "docs", exp_id, scale)
        assert changed == [], f"{exp_id} ran another design ({changed}): rerun it and `attnlab docs --collect` it"


def test_a_run_whose_spec_is_not_the_scales_is_named_on_its_page(tmp_path):
    run = fake_run(tmp_path / "run", "jiang2024-fig3")
    spec = get("jiang2024-fig3").spec("cpu").model_dump()
    (run / "spec.json").write_text(json.dumps(spec))
    docs.collect(run.parent, tmp_path / "docs")
    assert (tmp_path / "docs" / "results" / "jiang2024-fig3" / "spec.json").is_file()
    assert docs.design_changes(tmp_path / "docs", "jiang2024-fig3", "cpu") == []
    assert "Not the current design" not in docs.build(tmp_path / "docs")["jiang2024.md"]

    spec["reps"] += 1
    spec["data"] = spec["data"] | {"d": 7}
    spec["train"] = {k: v for k, v in spec["train"].items() if k != "lr"}  # a field added since: not counted
    (run / "spec.json").write_text(json.dumps(spec))
    docs.collect(run.parent, tmp_path / "docs")
    assert docs.design_changes(tmp_path / "docs", "jiang2024-fig3", "cpu") == ["data.d", "reps"]
    page = docs.build(tmp_path / "docs")["jiang2024.md"]
    assert (
        "**Not the current design:** this run's spec differs from the cpu-scale spec of the code in `data.d`, `reps`"
        in page
    )

    (run / "spec.json").unlink()  # a run without one: nothing to check, and no stale spec left behind
    docs.collect(run.parent, tmp_path / "docs")
    assert docs.design_changes(tmp_path / "docs", "jiang2024-fig3", "cpu") is None
