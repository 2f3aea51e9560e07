"""The claims ledger: every claim has a kind and a rule history, every paper a theorem map whose
answers are computed from the committed verdicts, and verdict.json carries kind, rule_version,
post_hoc and modified."""

from pathlib import Path

import pytest

from attnlab import docs, ledger
from attnlab.experiments import registry
from attnlab.parts import registered

ROOT = Path(__file__).resolve().parents[2]


def test_every_committed_claim_has_a_rule_and_every_map_entry_names_a_claim():
    """No claim escapes the ledger, and the theorem maps point only at claims that exist."""
    verdicts = ledger.committed_verdicts(ROOT / "docs")
    exps = registry()
    for exp_id, v in verdicts.items():
        for c in v["claims"]:
            assert ledger.rule_of(exps[exp_id], c["id"]) is not None, f"{exp_id}:{c['id']} has no rule in its ledger"
    papers = registered("paper")
    assert set(papers) == {i.split("-", 1)[0] for i in exps}  # every paper of an experiment declares its map
    for paper in papers.values():
        assert paper.results
        for r in paper.results:
            assert r.tests or r.untested, f"{paper.name} {r.id}: neither tested nor said why not"
            for t in r.tests:
                assert t.experiment in exps, t
                assert paper.rule_of(t.experiment, t.claim) is not None, f"{t} tests a claim with no rule"
                assert t.how == ledger.DIRECT or t.note, f"{t}: a proxy says why it stands in"


def test_a_rule_knows_its_version_and_whether_it_was_set_after_results_were_seen():
    r = ledger.rule(ledger.PREDICTION, ("2026-01-01", "a", "first", False), ("2026-01-05", "b", "after the run", True))
    assert r.version == 2 and r.post_hoc and r.set_after.why == "after the run"
    clean = ledger.rule(ledger.PREDICTION, ("2026-01-01", "a", "first", False))
    assert clean.version == 1 and not clean.post_hoc and clean.set_after is None
    with pytest.raises(ValueError, match="kind"):
        ledger.rule("hunch", ("2026-01-01", "a", "first", False))
    stamped = ledger.stamp({"id": "x", "outcome": "pass"}, r, ["data.N"])
    assert stamped | {} == {
        "id": "x",
        "outcome": "pass",
        "kind": "prediction",
        "rule_version": 2,
        "post_hoc": True,
        "rule_changed": {"version": 2, "date": "2026-01-05", "why": "after the run"},
        "modified": ["data.N"],
    }


def _verdicts(**outcomes):
    """experiment id -> a verdict whose claims have the given outcomes (``exp__claim=outcome``)."""
    out: dict = {}
    for key, outcome in outcomes.items():
        exp, claim = key.split("__")
        out.setdefault(exp, {"claims": []})["claims"].append({"id": claim, "outcome": outcome, "kind": "prediction"})
    return out


R = ledger.Result(
    "Thm 9",
    "a statement",
    (
        ledger.Test("e", "direct", ledger.DIRECT),
        ledger.Test("e", "proxy", ledger.PROXY, "stands in"),
        ledger.Test("e", "outside", ledger.PROXY, "outside the hypotheses", refutes=False),
    ),
)


@pytest.mark.parametrize(
    "outcomes, answer",
    [
        ({"e__direct": "pass", "e__proxy": "pass"}, ledger.HELD),
        ({"e__direct": "fail", "e__proxy": "pass"}, ledger.NOT_HELD),
        ({"e__direct": "inconclusive", "e__proxy": "fail"}, ledger.NOT_HELD),
        ({"e__direct": "inconclusive", "e__proxy": "pass"}, ledger.HELD),
        # a proxy that cannot refute cannot confirm either
        ({"e__direct": "inconclusive", "e__outside": "pass"}, ledger.UNDECIDED),
        ({"e__direct": "descriptive", "e__outside": "fail"}, ledger.UNDECIDED),
        ({}, ledger.UNDECIDED),
    ],
)
def test_the_answer_comes_from_deciding_tests_only(outcomes, answer):
    assert ledger.answer(R, _verdicts(**outcomes)).answer == answer


def test_checks_and_measurements_decide_nothing():
    v = {"e": {"claims": [{"id": "direct", "outcome": "pass", "kind": "check"}]}}
    a = ledger.answer(R, v)
    assert a.answer == ledger.UNDECIDED and ("check" in a.why or "decided" in a.why)
    v = {"e": {"claims": [{"id": "direct", "outcome": "fail", "kind": "measurement"}]}}
    assert ledger.answer(R, v).answer == ledger.UNDECIDED


def test_only_predictions_count():
    claims = [
        {"id": "a", "outcome": "pass", "kind": "prediction"},
        {"id": "b", "outcome": "pass", "kind": "check"},
        {"id": "c", "outcome": "descriptive", "kind": "prediction"},
        {"id": "d", "outcome": "fail", "kind": "measurement"},
        {"id": "e", "outcome": "fail"},  # a verdict written before kinds: a prediction
    ]
    assert [c["id"] for c in ledger.counted(claims)] == ["a", "e"]


def test_each_paper_page_opens_with_its_theorem_map_and_the_readme_says_the_same():
    pages = docs.build(ROOT / "docs")
    readme = (ROOT / "README.md").read_text()
    for name, paper in registered("paper").items():
        page = pages[f"{name}.md"]
        head = page.split("## The experiments")[0]
        assert "## What was found, result by result" in head
        for r in paper.results:
            assert f"| {docs._cell(r.id)} |" in head
        assert docs.summary_line(paper, ROOT / "docs") in readme, f"README: the line of {name} is not the docs' answer"
