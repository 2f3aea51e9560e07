"""The HTML report: value formatting and the page itself (self-contained, escaped, zero claims,
extra tables). ``attnlab report DIR...`` on real runs: tests/e2e/test_report.py."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnlab import fmt, report
from attnlab.experiments import get
from attnlab.experiments.base import Analysis, Claim
from attnlab.rules import Verdict

# ---------------------------------------------------------------- formatting


@pytest.mark.parametrize(
    "x, text",
    [
        (0.15811388300839305, "0.158"),
        (0.987420882906321, "0.987"),
        (93.505643245093, "93.5"),
        (-93.505643245093, "-93.5"),
        (3.276692203862466e-32, "3.28e-32"),
        (-4.36e-32, "-4.36e-32"),
        (1.0, "1"),
        (0.5, "0.5"),
        (1000.0, "1000"),
        (1234.56, "1235"),
        (999999.0, "999999"),
        (1.5e6, "1.5e6"),
        (2.0e-3, "0.002"),
        (0.0001234, "1.23e-4"),
        (0.0, "0"),
        (-0.0, "0"),
        (-0.0004, "-4e-4"),
        (9.996, "10"),
        (2, "2"),
        (123456789, "123456789"),
        (np.int64(7), "7"),
        (np.float32(0.25), "0.25"),
        (True, "yes"),
        (None, "—"),
        (float("nan"), "NaN"),
        (float("inf"), "∞"),
        (-math.inf, "-∞"),
    ],
)
def test_fmt_number(x, text):
    assert fmt.fmt_number(x) == text


@given(st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: 0 < abs(x) < 1e300))
def test_fmt_number_keeps_three_significant_digits(x):
    assert math.isclose(float(fmt.fmt_number(x)), x, rel_tol=5e-3)


def test_fmt_interval_and_lists():
    assert fmt.fmt_interval(-93.505643245093, 93.50564324510283) == "[-93.5, 93.5]"
    assert fmt.fmt_interval(None, 0.5) == "[—, 0.5]"
    assert fmt.fmt_text([0.01257911709367899, 0.987420882906321]) == "[0.0126, 0.987]"
    assert fmt.fmt_text(np.array([1.0, 2.5])) == "[1, 2.5]"
    assert fmt.fmt_text([]) == "[]"


def test_fmt_text_of_nested_dicts():
    measured = {"p": None, "ci95": [-93.5056, 93.5056], "lr_p_value": {"p=1": 0.975, "p=2": 1.0}}
    assert fmt.fmt_text(measured) == "p: —; ci95: [-93.5, 93.5]; lr_p_value: {p=1: 0.975; p=2: 1}"
    assert fmt.fmt_text({0.5: 0.123456, 2: "x"}) == "0.5: 0.123; 2: x"
    assert fmt.fmt_text({}) == "{}" and fmt.fmt_text("plain") == "plain"


def test_fmt_value_renders_dicts_as_key_value_lists_and_escapes():
    html = str(fmt.fmt_value({"ok": 2, "ci": [0.158, 1.0], "sub": {"a<b": "<i>x</i>"}}))
    assert html.startswith('<ul class="kv">') and html.count('<ul class="kv">') == 2
    assert '<span class="k">ok:</span> <span class="num">2</span>' in html
    assert '<span class="k">ci:</span> <span class="num">[0.158, 1]</span>' in html
    assert "a&lt;b:" in html and "&lt;i&gt;x&lt;/i&gt;" in html and "<i>" not in html
    assert "not measured" in str(fmt.fmt_value(None))
    assert str(fmt.fmt_value([{"k": 1}, {"k": 2}])).startswith('<ol class="seq">')
    assert str(fmt.fmt_value("<script>")) == "&lt;script&gt;"


def test_fmt_duration():
    assert fmt.fmt_duration(4.1834) == "4.18 s"
    assert fmt.fmt_duration(725) == "12 min 5 s"
    assert fmt.fmt_duration(3 * 3600 + 12 * 60 + 3) == "3 h 12 min"
    assert fmt.fmt_duration(None) == "—"


def test_command_line_is_shell_quoted():
    cmd = report.command_line("jiang2024-fig1", "cpu", ["N=2,4", "mu=5"], config="my grid.toml", out="runs/it's")
    assert cmd == (
        "attnlab reproduce jiang2024-fig1 --scale cpu --config 'my grid.toml' --set N=2,4 --set mu=5 "
        "--out 'runs/it'\"'\"'s'"
    )


# ---------------------------------------------------------------- the page


def test_zero_claims_and_extra_tables(tmp_path):
    """A run without claims (a user sweep) still gets a readable page, with its results table."""
    exp, spec = get("jiang2024-fig1"), get("jiang2024-fig1").spec("smoke")
    verdict = {
        "experiment": exp.id,
        "scale": "smoke",
        "cells": 2,
        "runtime_s": 1.5,
        "provenance": {},
        "claims": [],
        "store_warnings": ["damaged part <p1> moved aside"],
    }
    rows = [[2, 0.123456, "converged"], [4, None, "<b>cap</b>"]]
    path = report.write(
        tmp_path / "report.html",
        exp,
        spec,
        verdict,
        Analysis(claims=[]),
        [],
        [],
        tables=[("Results", ["data.N", "test_loss", "status"], rows)],
    )
    html = path.read_text()
    assert "states no claims" in html and 'id="claims-table"' not in html
    assert '<h2 id="table-1">Results</h2>' in html and "<th>test_loss</th>" in html
    assert ">0.123<" in html and "&lt;b&gt;cap&lt;/b&gt;" in html and "<b>cap</b>" not in html
    assert "No figures." in html and "attnlab reproduce jiang2024-fig1 --scale smoke" in html
    assert "damaged part &lt;p1&gt; moved aside" in html

    # an analysis's own tables are shown without passing them
    path = report.write(
        tmp_path / "r2.html", exp, spec, verdict, Analysis(claims=[], tables=[("T", ["a"], [])]), [], []
    )
    assert '<h2 id="table-1">T</h2>' in path.read_text() and "no rows" in path.read_text()


def test_claims_are_escaped_and_badged(tmp_path):
    exp, spec = get("jiang2024-fig1"), get("jiang2024-fig1").spec("smoke")
    claims = [
        Claim.of("c1", "x < <script>alert(1)</script>", Verdict("pass", {"slope": -2.01234}, "rule <2")),
        Claim("c2", "s", None, "r", "inconclusive", "too few cells"),
    ]
    verdict = {
        "experiment": exp.id,
        "scale": "smoke",
        "cells": 1,
        "runtime_s": 0.1,
        "claims": [c.to_json() for c in claims],
    }
    html = report.write(tmp_path / "r.html", exp, spec, verdict, Analysis(claims=claims), [], ["N=2"]).read_text()
    assert "<script>" not in html and "&lt;script&gt;" in html and "rule &lt;2" in html
    assert '<span class="badge pass">pass</span>' in html
    assert '<span class="badge inconclusive">inconclusive</span>' in html
    assert "1/2 predictions pass" in html and '<span class="num">-2.01</span>' in html
    assert "--set N=2" in html  # no recorded command: rebuilt from the id, scale and sets


def test_only_predictions_with_a_verdict_are_counted(tmp_path):
    """A descriptive measurement has no verdict: ``pass`` is None in verdict.json. The page and the
    index count only predictions with a verdict; a check (it follows from the construction) and a
    measurement are listed apart. Every claim shows its kind, regime, rule version and whether its
    rule was set after results were seen (post hoc), and a modified run says so."""
    from attnlab import ledger

    exp, spec = get("jiang2024-fig1"), get("jiang2024-fig1").spec("smoke")
    claims = [
        Claim.of("c1", "s1", Verdict("pass", {"x": 1.0}, "r1"), regime="protocol"),
        Claim.of("c2", "s2", Verdict("fail", {"x": 2.0}, "r2"), regime="theorem"),
        Claim.of("c3", "s3", Verdict("descriptive", {"x": 3.0}, "measured only"), regime="investigation"),
        Claim.of("c4", "s4", Verdict("pass", {"x": 4.0}, "r4"), regime="protocol"),
    ]
    js = [c.to_json() for c in claims]
    assert [c["pass"] for c in js] == [True, False, None, True]
    assert [c["regime"] for c in js] == ["protocol", "theorem", "investigation", "protocol"]
    late = ledger.rule(ledger.PREDICTION, ("2026-01-01", "a", "first", False), ("2026-01-02", "b", "seen it", True))
    check = ledger.rule(ledger.CHECK, ("2026-01-01", "a", "first", False))
    js = [
        ledger.stamp(js[0], late, ["data.sigma_p"]),
        ledger.stamp(js[1], None, ["data.sigma_p"]),
        ledger.stamp(js[2], None, ["data.sigma_p"]),
        ledger.stamp(js[3], check, ["data.sigma_p"]),
    ]
    assert [c["kind"] for c in js] == ["prediction", "prediction", "prediction", "check"]
    assert js[0]["rule_version"] == 2 and js[0]["post_hoc"] is True and js[0]["rule_changed"]["why"] == "seen it"
    assert js[1]["post_hoc"] is None  # no history declared: not known, not claimed honest
    verdict = {"experiment": exp.id, "scale": "cpu", "cells": 1, "runtime_s": 0.1, "modified": ["data.sigma_p"]}
    verdict["claims"] = js
    html = report.write(tmp_path / "r.html", exp, spec, verdict, Analysis(claims=claims), [], []).read_text()
    assert "1/2 predictions pass" in html and "2 not counted" in html and "Modified design" in html
    assert '<span class="badge descriptive">descriptive</span>' in html and "<b>post hoc</b>" in html
    assert "check &middot; protocol" in html and "rule v2" in html and "Legend." in html
    index = report.write_index(tmp_path / "index.html", [(tmp_path / "r.html", verdict)]).read_text()
    assert "1/2 predictions pass" in index and "prediction &middot; theorem" in index


def test_every_claim_of_a_run_gets_a_regime(tmp_path):
    """A claim without its own regime takes the experiment's; an unknown regime is an error."""
    from attnlab.experiments.pipeline import finish

    exp = get("jiang2024-fig1")

    class Exp(type(exp)):
        def analyse(self, cols, spec):
            return Analysis(
                claims=[
                    Claim.of("a", "s", Verdict("pass", {}, "r")),
                    Claim.of("b", "s", Verdict("pass", {}, "r"), regime="theorem"),
                ]
            )

        def figures(self, cols, spec, analysis, out):
            return []

    verdict = {"experiment": exp.id, "scale": "smoke", "cells": 0, "runtime_s": 0.0, "claims": []}
    v = finish(Exp(), exp.spec("smoke"), tmp_path, {}, verdict)
    assert [c["regime"] for c in v["claims"]] == [exp.regime, "theorem"] and exp.regime == "protocol"

    class Bad(Exp):
        def analyse(self, cols, spec):
            return Analysis(claims=[Claim.of("a", "s", Verdict("pass", {}, "r"), regime="folklore")])

    with pytest.raises(ValueError, match="regime 'folklore'"):
        finish(Bad(), exp.spec("smoke"), tmp_path / "bad", {}, verdict)
