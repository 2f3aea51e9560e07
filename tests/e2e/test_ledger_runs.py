"""The ledger fields of real runs: kind, rule version, post hoc and the modified label, in
verdict.json, the terminal and the report."""

import json


def test_a_smoke_run_records_kinds_versions_and_a_modified_design(smoke, tmp_path):
    """verdict.json carries kind, rule_version, post_hoc and modified; a run with another knob is
    labelled modified, naming the field, in the verdict and in the terminal."""
    from typer.testing import CliRunner

    from attnlab.cli import app

    v = smoke("jiang2024-fig1").verdict
    assert v["modified"] == []
    for c in v["claims"]:
        assert {"kind", "rule_version", "post_hoc", "modified"} <= set(c) and c["modified"] == []
        assert c["kind"] == "prediction" and c["rule_version"] >= 1 and isinstance(c["post_hoc"], bool)
    out = tmp_path / "mod"
    r = CliRunner().invoke(
        app, ["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", str(out), "--set", "sigma_p=0.1", "--quiet"]
    )
    assert r.exit_code == 0, r.output
    mod = json.loads((out / "verdict.json").read_text())
    assert mod["modified"] == ["data.sigma_p"] and all(c["modified"] == ["data.sigma_p"] for c in mod["claims"])
    assert "modified: this run changed the declared design in data.sigma_p" in r.output.replace("\n", " ")
    page = (out / "report.html").read_text()
    assumptions = page.split('id="assumptions"')[1].split('id="spec"')[0]
    assert "Modified design" in page and "data.sigma_p" in assumptions
    assert "cpu scale: d = 64" not in assumptions  # the assumptions of the scale run, not the cpu design's
