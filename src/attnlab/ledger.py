"""The claims ledger: what each claim is, which version of its rule judged it, and which result of
its paper it tests.

Each paper package declares one :class:`Paper` (registered like a part): its title, its results
(every theorem, proposition and corollary, and each figure's stated finding, by number, with a
one-line statement) and, for each result, the claims that test it and how (:class:`Test`):

    direct     the statement's own quantity, inside its hypotheses
    proxy      a stated surrogate: why it stands in, and what it cannot show (a smaller measured
               threshold cannot refute a sufficient condition: such a proxy does not ``refute``)
    untested   the result names why, and the scale or command that would test it

Every claim an experiment states has a :class:`Rule` in its paper's ledger: its kind and the dated
history of its rule.

    prediction   what the paper predicts; the only kind counted in "k/n pass"
    check        follows from the construction (an implementation check, shown apart)
    measurement  descriptive: a number reported with its interval, no verdict on the paper

A rule changed after results of its experiment were seen is *post hoc*: its version is bumped and
its verdict says so (``post_hoc: true``). That is honest; hiding it is not.

The answer to each result — held, did not hold, not decidable here — is computed from the
committed verdicts of the claims that test it (:func:`answer`), never written by hand.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

PREDICTION, CHECK, MEASUREMENT = "prediction", "check", "measurement"
KINDS = (PREDICTION, CHECK, MEASUREMENT)
DIRECT, PROXY = "direct", "proxy"
HELD, NOT_HELD, UNDECIDED = "held", "did not hold", "not decidable here"


@dataclass(frozen=True)
class Change:
    """One version of a rule: when, what it became, why, and whether results of the experiment had
    been seen when it was set (``seen``: the change is post hoc)."""

    version: int
    date: str
    what: str
    why: str
    seen: bool
    commit: str = ""

    def to_json(self) -> dict:
        return {
            "version": self.version,
            "date": self.date,
            "what": self.what,
            "why": self.why,
            "seen": self.seen,
            "commit": self.commit,
        }


@dataclass(frozen=True)
class Rule:
    """A claim's kind and its rule's history (oldest first); the last change is the rule in force."""

    kind: str
    history: tuple[Change, ...]

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"a claim's kind is one of {KINDS}, not {self.kind!r}")
        if not self.history:
            raise ValueError("a rule has at least its first version in its history")
        versions = [c.version for c in self.history]
        if versions != list(range(1, len(versions) + 1)):
            raise ValueError(f"rule versions must run 1, 2, …; got {versions}")

    @property
    def version(self) -> int:
        return self.history[-1].version

    @property
    def post_hoc(self) -> bool:
        """Was any version of the rule in force set after results of its experiment were seen?"""
        return any(c.seen for c in self.history)

    @property
    def set_after(self) -> Change | None:
        """The latest change made after results were seen (None: the rule was written before)."""
        return next((c for c in reversed(self.history) if c.seen), None)


def rule(kind: str, *changes: tuple) -> Rule:
    """``rule(PREDICTION, (date, what, why, seen[, commit]), …)``: versions numbered in order."""
    return Rule(kind, tuple(Change(i, *c) for i, c in enumerate(changes, 1)))


def amend(old: Rule, *changes: tuple, kind: str | None = None) -> Rule:
    """``old`` with further versions appended (each ``(date, what, why, seen[, commit])``), and its
    kind changed where ``kind`` is given (a kind is a classification, not a rule: no version)."""
    start = old.version + 1
    return Rule(kind or old.kind, old.history + tuple(Change(start + i, *c) for i, c in enumerate(changes)))


@dataclass(frozen=True)
class Test:
    """A claim testing a result: ``how`` is direct or proxy; ``note`` says, for a proxy, why it
    stands in and what it cannot show; ``refutes``: whether a fail of the claim counts against the
    result (not for a proxy of a sufficient condition, or outside the result's hypotheses)."""

    experiment: str
    claim: str
    how: str
    note: str = ""
    refutes: bool = True

    def __post_init__(self):
        if self.how not in (DIRECT, PROXY):
            raise ValueError(f"a test is direct or proxy, not {self.how!r}")


@dataclass(frozen=True)
class Result:
    """One result of the paper (``id``: "Thm 4.1", "Fig. 1", …) and the claims that test it;
    ``untested``: why a part of it is not tested here, and what would test it; ``quote``: where the
    tests measure different things, a function (committed verdicts, committed summaries: experiment
    id -> its verdict.json / summary.json) -> the answer as one paragraph a reader can quote, its
    numbers read from those files ("" where they are missing)."""

    id: str
    statement: str
    tests: tuple[Test, ...] = ()
    untested: str = ""
    quote: Callable[[dict[str, dict], dict[str, dict]], str] | None = None


@dataclass(frozen=True)
class Paper:
    """A paper: its short name (the experiments' id prefix), its title, the theorem map and every
    claim's rule (experiment id -> claim id -> :class:`Rule`)."""

    name: str
    title: str
    results: tuple[Result, ...]
    rules: dict[str, dict[str, Rule]] = field(default_factory=dict)

    def rule_of(self, exp_id: str, claim_id: str) -> Rule | None:
        return self.rules.get(exp_id, {}).get(claim_id)


def paper_of(exp_id: str) -> Paper | None:
    """The registered paper whose name is the experiment id's prefix (None for a user grid or an
    outside experiment without one)."""
    from attnlab.parts import registered

    return registered("paper").get(exp_id.split("-", 1)[0])


def rule_of(exp, claim_id: str) -> Rule | None:
    """A claim's rule: the experiment's own ``rules`` (an outside experiment may declare them),
    else its paper's ledger."""
    own = getattr(exp, "rules", None) or {}
    if claim_id in own:
        return own[claim_id]
    paper = paper_of(exp.id)
    return paper.rule_of(exp.id, claim_id) if paper else None


def stamp(claim: dict, rule: Rule | None, modified: list[str]) -> dict:
    """A claim's verdict entry with its ledger fields: kind, rule_version, post_hoc (None where no
    history is declared), rule_set (the date and reason of the latest post-hoc change) and the
    spec fields by which its run differs from the declared design (``modified``)."""
    late = rule.set_after if rule else None
    return claim | {
        "kind": rule.kind if rule else PREDICTION,
        "rule_version": rule.version if rule else 1,
        "post_hoc": rule.post_hoc if rule else None,
        "rule_changed": {"version": late.version, "date": late.date, "why": late.why} if late else None,
        "modified": list(modified),
    }


def counted(claims: list[dict]) -> list[dict]:
    """The claims a "k/n pass" counts: predictions with a verdict (not descriptive)."""
    return [c for c in claims if c.get("kind", PREDICTION) == PREDICTION and c["outcome"] != "descriptive"]


# ---------------------------------------------------------------- answers from committed verdicts


@dataclass(frozen=True)
class Answer:
    """A result's answer and the tests behind it: (test, outcome of its claim in the committed run
    or "no run", the claim's kind)."""

    result: Result
    answer: str
    why: str
    found: tuple[tuple[Test, str, str], ...]


def answer(result: Result, verdicts: dict[str, dict], paper: Paper | None = None) -> Answer:
    """held / did not hold / not decidable here, from the committed verdicts (experiment id ->
    verdict) of the claims that test ``result``. Only predictions decide (a verdict written before
    kinds existed takes its claim's kind from ``paper``'s ledger), and only tests that can refute:
    direct ones, and proxies marked ``refutes``. A proxy that cannot refute (a sufficient
    condition's, or one outside the result's hypotheses) cannot confirm either; its outcome is
    listed as consistent with the result or not.

      did not hold        a deciding test failed
      held                a deciding test passed and none failed ("directly" or "by proxy")
      not decidable here  no deciding test decided (inconclusive, descriptive, no run, untested)"""
    found = []
    for t in result.tests:
        claim = next((c for c in (verdicts.get(t.experiment) or {}).get("claims", []) if c["id"] == t.claim), None)
        rule = paper.rule_of(t.experiment, t.claim) if paper else None
        kind = (claim or {}).get("kind") or (rule.kind if rule else PREDICTION)
        found.append((t, claim["outcome"] if claim else "no run", kind))
    predictions = [(t, o) for t, o, k in found if k == PREDICTION]
    deciding = [(t, o) for t, o in predictions if t.how == DIRECT or t.refutes]
    failed = [t for t, o in deciding if o == "fail"]
    passed = [t for t, o in deciding if o == "pass"]
    names = lambda ts: ", ".join(f"{t.experiment}:{t.claim}" for t in ts)
    if failed:
        why = f"failed: {names(failed)}" + (f"; passed: {names(passed)}" if passed else "")
        return Answer(result, NOT_HELD, why, tuple(found))
    if passed:
        direct = [t for t in passed if t.how == DIRECT]
        how = "directly" if direct else "by proxy"
        return Answer(result, HELD, f"{how}: {names(direct or passed)}", tuple(found))
    if not result.tests:
        return Answer(result, UNDECIDED, result.untested or "no claim tests it", tuple(found))
    side = [(t, o) for t, o in predictions if (t, o) not in deciding and o in ("pass", "fail")]
    bits = []
    if deciding:
        bits.append("no deciding test decided (" + ", ".join(sorted({o for _, o in deciding})) + ")")
    else:
        bits.append("no test here can decide it")
    consistent = [t for t, o in side if o == "pass"]
    against = [t for t, o in side if o == "fail"]
    if consistent:
        bits.append(f"consistent with it outside its hypotheses: {names(consistent)}")
    if against:
        bits.append(f"against it, where it cannot refute: {names(against)}")
    return Answer(result, UNDECIDED, "; ".join(bits), tuple(found))


def committed_verdicts(docs: Path, results_dir: str = "results", name: str = "verdict.json") -> dict[str, dict]:
    """Experiment id -> its committed verdict under ``docs``/results/ID/verdict.json (or another
    committed file of the entry: ``name="summary.json"``)."""
    out = {}
    for path in sorted(Path(docs, results_dir).glob(f"*/{name}")):
        try:
            out[path.parent.name] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    return out
