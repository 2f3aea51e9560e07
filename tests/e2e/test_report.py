"""``attnlab report DIR...`` on the session's smoke runs of jiang2024-fig1 and -fig3 (two
experiments, so the index shows different claims): rebuild without training, index page, bad
input. The page itself: tests/unit/test_report_page.py."""

import json
import re
import shutil

import pytest
from typer.testing import CliRunner

from attnlab import fmt
from attnlab.cli import app
from attnlab.experiments.pipeline import rebuild

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def files_of(d):
    return {p.relative_to(d): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------- attnlab report DIR...


@pytest.fixture(scope="module")
def runs(smoke):
    """The shared smoke runs (read only: the tests copy them to change them)."""
    return {
        name: (r.out, r.verdict) for name, r in (("fig1", smoke("jiang2024-fig1")), ("fig3", smoke("jiang2024-fig3")))
    }


def copy_run(runs, name, dest):
    src, verdict = runs[name]
    shutil.copytree(src, dest)
    return dest, verdict


def test_a_fresh_report_is_self_contained(runs):
    out, verdict = runs["fig1"]
    html = (out / "report.html").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)  # no external resource
    assert "@import" not in html and "<script" not in html and "url(" not in html
    assert html.count('<img src="data:image/png;base64,') == len(list(out.glob("*.png"))) >= 1
    rows = re.findall(r'<tr class="(pass|fail|inconclusive|descriptive)" data-claim="([^"]+)"', html)
    assert [(c["outcome"], c["id"]) for c in verdict["claims"]] == rows
    assert verdict["command"] in html and verdict["command"].startswith("attnlab reproduce jiang2024-fig1")
    assert "finished_at" in verdict


def test_report_rebuilds_without_training_and_equals_the_fresh_run(runs, tmp_path):
    out, fresh = copy_run(runs, "fig1", tmp_path / "run")
    parts = {p: p.stat().st_mtime_ns for p in (out / "parts").rglob("*")}
    results = (out / "results.parquet").read_bytes()
    for p in [out / "report.html", *out.glob("*.png"), *out.glob("*.pdf")]:
        p.unlink()

    r = invoke("report", out)
    assert r.exit_code == 0, r.output
    assert "report: " in r.output and "index:" not in r.output  # one directory: no index
    v = json.loads((out / "verdict.json").read_text())
    assert v["claims"] == fresh["claims"]
    for k in (
        "experiment",
        "scale",
        "cells",
        "cells_trained_now",
        "runtime_s",
        "provenance",
        "command",
        "finished_at",
        "train_seconds_total",
        "workers",
        "compile",
    ):
        assert v[k] == fresh[k], k
    assert set(v["rebuilt"]) == {"at", "attnlab_version", "git_sha"}
    assert (out / "report.html").is_file() and list(out.glob("*.png")) and list(out.glob("*.pdf"))
    assert {p: p.stat().st_mtime_ns for p in (out / "parts").rglob("*")} == parts  # nothing trained
    assert (out / "results.parquet").read_bytes() == results
    html = (out / "report.html").read_text()
    assert "report rebuilt" in html and fresh["command"] in html
    for c in fresh["claims"]:
        assert f'data-claim="{c["id"]}"' in html
    assert rebuild(out)["claims"] == fresh["claims"]  # the library call gives the same


def test_report_of_several_dirs_writes_an_index_of_every_claim(runs, tmp_path):
    a, va = copy_run(runs, "fig1", tmp_path / "all" / "it's fig1")
    b, vb = copy_run(runs, "fig3", tmp_path / "all" / "fig3 [smoke]")
    r = invoke("report", a, b)
    assert r.exit_code == 0, r.output
    index = tmp_path / "all" / "index.html"  # default: the common parent
    assert f"index: {index.resolve()}" in r.output.replace("\n", "")
    html = index.read_text()
    rows = re.findall(r'<tr class="(pass|fail|inconclusive|descriptive)" data-claim="([^"]+)">', html)
    assert rows == [(c["outcome"], c["id"]) for c in va["claims"] + vb["claims"]]
    for c in va["claims"] + vb["claims"]:
        assert str(fmt.fmt_value(c["measured"])) in html
    assert 'href="it%27s%20fig1/report.html"' in html and 'href="fig3%20%5Bsmoke%5D/report.html"' in html
    assert "jiang2024-fig1" in html and "jiang2024-fig3" in html and "<script" not in html

    elsewhere = tmp_path / "site" / "all.html"
    r = invoke("report", a, "--index", elsewhere)
    assert r.exit_code == 0, r.output
    assert 'href="../all/it%27s%20fig1/report.html"' in elsewhere.read_text()


def write_bad(d, what):
    """Spoil a copy of a results directory in one way."""
    if what == "no verdict":
        (d / "verdict.json").unlink()
    elif what == "malformed verdict":
        (d / "verdict.json").write_text("{not json")
    elif what == "not a verdict":
        (d / "verdict.json").write_text('{"cells": 3}')
    elif what == "unknown experiment":
        v = json.loads((d / "verdict.json").read_text())
        (d / "verdict.json").write_text(json.dumps(v | {"experiment": "nope-fig9"}))
    elif what == "no spec":
        (d / "spec.json").unlink()
    elif what == "bad spec":
        spec = json.loads((d / "spec.json").read_text())
        (d / "spec.json").write_text(json.dumps(spec | {"reps": -1}))
    elif what == "no results":
        (d / "results.parquet").unlink()


@pytest.mark.parametrize(
    "what, needle",
    [
        ("no verdict", "bad: not a results directory (has no verdict.json; `attnlab reproduce` or `attnlab sweep`"),
        ("malformed verdict", "verdict.json: malformed JSON"),
        ("not a verdict", "verdict.json: not a verdict (missing experiment, scale, claims)"),
        ("unknown experiment", "verdict.json: experiment: unknown id 'nope-fig9'"),
        ("no spec", "bad: no spec.json beside verdict.json"),
        ("bad spec", "spec.json: invalid spec: reps: Input should be greater than 0"),
        ("no results", "results.parquet: not found. Its parts rebuild it without training: rerun `attnlab"),
    ],
)
def test_a_bad_dir_is_one_clear_error_and_nothing_is_written(runs, tmp_path, what, needle):
    good, _ = copy_run(runs, "fig1", tmp_path / "good")
    bad, _ = copy_run(runs, "fig1", tmp_path / "bad")
    write_bad(bad, what)
    before = files_of(tmp_path)
    r = invoke("report", good, bad)  # the good one comes first: it must not be rewritten either
    assert r.exit_code == 2, r.output
    assert r.output.startswith("error: ") and needle in r.output.replace("\n", "")
    assert "Traceback" not in r.output and isinstance(r.exception, SystemExit)
    assert files_of(tmp_path) == before and not (tmp_path / "index.html").exists()


@pytest.mark.parametrize("make", ["missing", "file", "empty dir"])
def test_report_of_a_path_that_is_not_a_results_dir(tmp_path, make):
    p = tmp_path / "x"
    if make == "file":
        p.write_text("hi")
    elif make == "empty dir":
        p.mkdir()
    r = invoke("report", p)
    assert r.exit_code == 2 and "not a results directory" in r.output
    assert sorted(tmp_path.iterdir()) == ([] if make == "missing" else [p])


def test_index_must_not_overwrite_a_results_file(runs, tmp_path):
    a, _ = copy_run(runs, "fig1", tmp_path / "a")
    before = files_of(tmp_path)
    r = invoke("report", a, "--index", a / "report.html")
    assert r.exit_code == 2 and "would overwrite the report of a directory rebuilt here" in r.output
    part = next((a / "parts").glob("part-*.parquet"))
    for stored in ("results.parquet", "store.json", "spec.json", "verdict.json", part.relative_to(a)):
        r = invoke("report", a, "--index", a / stored)
        assert r.exit_code == 2 and "is stored data of the run in" in r.output, r.output
    r = invoke("report", a, "--index", a / "parts" / "index.html")  # a new file inside the parts
    assert r.exit_code == 2 and "is stored data of the run in" in r.output, r.output
    (tmp_path / "notes.html").write_text("mine")  # someone's own file is never replaced
    before = files_of(tmp_path)
    r = invoke("report", a, "--index", tmp_path / "notes.html")
    assert r.exit_code == 2 and "a file attnlab did not write is there" in r.output, r.output
    r = invoke("report", a, "--index", tmp_path)
    assert r.exit_code == 2 and "is a directory" in r.output
    assert files_of(tmp_path) == before


def test_a_smoke_report_says_its_verdicts_mean_nothing(smoke, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(smoke("jiang2024-fig1").out, run)
    from attnlab.experiments.pipeline import rebuild

    rebuild(run)
    page = (run / "report.html").read_text()
    assert "Smoke scale is a pipeline check" in page and "say nothing about the paper" in page
