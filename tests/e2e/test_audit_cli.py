"""``attnlab audit``: audit.json from the experiment's design or from a stored run (its spec and
its noise levels plugged in), and one clear error for bad input."""

import json
import shutil

import pytest
from typer.testing import CliRunner

from attnlab.cli import app
from helpers import AUDIT_ROW

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.mark.parametrize("exp", ["jiang2024-fig1", "jiang2024-fig2"])
def test_audit_writes_audit_json(tmp_path, exp):
    r = invoke("audit", exp, "--scale", "smoke", "--sims", 3, "--out", tmp_path / "a", "--quiet")
    assert r.exit_code == 0, r.output
    a = json.loads((tmp_path / "a" / "audit.json").read_text())
    assert {"experiment", "scale", "sims", "seed", "noise", "noise_source", "claims"} <= set(a)
    assert a["experiment"] == exp and a["scale"] == "smoke" and a["sims"] == 3
    assert [c["id"] for c in a["claims"]] == ["slope", "curvature", "benign", "harmful"]
    for c in a["claims"]:
        assert AUDIT_ROW <= set(c) and c["regime"] == "protocol" and c["power"]["n"] == 3
    slope = a["claims"][0]  # the competitor and the misspecified worlds, each with its pass rate
    assert slope["h0"].startswith("N·SNR³ = C") and "Cao et al. 2022" in slope["h0_source"]
    if not slope["descriptive"]:  # fig2's slope is a measurement at its design: its worlds are not drawn
        worlds = {w["statement"]: w for w in slope["worlds"]}
        assert any("between H1 and H0" in w for w in worlds) and any("displaced" in w for w in worlds)
        assert [w["holds"] for w in slope["worlds"]].count(True) == 1
        assert all(w["pass"]["n"] == 3 for w in worlds.values())
    assert "audit: " in r.output


def test_audit_from_a_stored_run_plugs_in_its_noise(smoke, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(smoke("jiang2024-fig1").out, run)
    r = invoke("audit", "jiang2024-fig1", "--from", run, "--sims", 2, "--quiet")
    assert r.exit_code == 0, r.output
    a = json.loads((run / "audit.json").read_text())  # beside the run it audits
    assert a["noise_source"].startswith("plug-in") and a["scale"] == "smoke" and a["noise"]["steepness"] > 0
    assert {"C", "lapse_up", "lapse_down", "unconverged"} <= set(a["noise"])  # the run's operating point
    page = (run / "report.html").read_text()  # the run's report now shows the audit per claim
    assert "power / false pass" in page and page.count('class="audit"') == len(a["claims"]) >= 1


def test_audit_bad_input_is_one_clear_error(tmp_path, smoke):
    cases = [
        (["jiang2024-fig1", "--controls"], "--controls: jiang2024-fig1 declares no controls"),
        (["nope"], "experiment: unknown id 'nope'"),
        (["jiang2024-fig1", "--sims", 0], "--sims: must be 1 to 10,000"),
        (["jiang2024-fig1", "--scale", "huge"], "--scale: unknown 'huge'"),
        (["jiang2024-fig3", "--from", smoke("jiang2024-fig1").out], "holds jiang2024-fig1, not jiang2024-fig3"),
        (["jiang2024-fig1", "--from", tmp_path], "not a results directory"),
    ]
    for args, needle in cases:
        r = invoke("audit", *args, "--out", tmp_path / "out", "--quiet")
        assert r.exit_code == 2, (args, r.output)
        assert r.output.startswith("error: ") and needle in r.output and "Traceback" not in r.output, r.output
        assert not (tmp_path / "out").exists()


def test_controls_are_run_judged_and_recorded(tmp_path, monkeypatch):
    """--controls runs each declared control into OUT/controls/NAME, records what it expected and
    got, and exits 1 when one does not hold (here a negative control declared to pass is made to
    look like a positive one that fails)."""
    import dataclasses

    from attnlab.experiments import get

    exp = get("jiang2024-fig3")
    (neg,) = [c for c in exp.controls if c.kind == "negative"]
    neg = dataclasses.replace(neg, scale="smoke")
    monkeypatch.setattr(exp, "controls", (neg,))
    r = invoke("audit", "jiang2024-fig3", "--scale", "smoke", "--sims", 2, "--controls", "--out", tmp_path, "--quiet")
    assert r.exit_code == 0, r.output
    (c,) = json.loads((tmp_path / "audit.json").read_text())["controls"]
    assert c["held"] and c["kind"] == "negative" and c["got"] == c["expect"] and "held" in r.output
    assert (tmp_path / "controls" / neg.name / "verdict.json").is_file()
    wrong = dataclasses.replace(neg, name="wrong", kind="positive", expect=dict.fromkeys(neg.expect, "pass"))
    monkeypatch.setattr(exp, "controls", (wrong,))
    r = invoke("audit", "jiang2024-fig3", "--scale", "smoke", "--sims", 2, "--controls", "--out", tmp_path, "--quiet")
    assert r.exit_code == 1 and "DID NOT HOLD" in r.output


def test_audit_all_audits_every_id(tmp_path):
    """Every id of `attnlab list` has a declared design: `audit all` writes one audit.json each,
    every row with its regime, H1 and H0 and their sources."""
    from attnlab.experiments import registry

    r = invoke("audit", "all", "--scale", "smoke", "--sims", 2, "--out", tmp_path, "--quiet")
    assert r.exit_code == 0, r.output
    for exp_id in registry():
        a = json.loads((tmp_path / exp_id / "audit.json").read_text())
        assert a["experiment"] == exp_id and a["claims"], exp_id
        for c in a["claims"]:
            assert AUDIT_ROW <= set(c), (exp_id, c["id"])
            assert c["kind"] != "prediction" or (c["h1_source"] and c["h0_source"]), (exp_id, c["id"])
    r = invoke("audit", "all", "--from", tmp_path, "--quiet")
    assert r.exit_code == 2 and "--from: audits one stored run" in r.output
