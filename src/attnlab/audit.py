"""The claims audit: the size and power of every pass rule under its own experiment's design.

A claim's rule is judged on simulated data before it is trusted. Each audited claim declares

    H1  the effect at the size the paper or theorem predicts (e.g. N·SNR² = C, slope −2), with
        its source;
    H0  the nearest competing hypothesis the paper argues against, or no effect (e.g. N·SNR = C,
        slope −1), with its source;

and its experiment declares a simulator that draws the claim's *measured inputs* (the results
columns the experiment's own ``analyse`` reads) under either hypothesis at the experiment's real
design: the cells of ``exp.cells(spec)`` (grid points, repeats, seed blocks), so the rule sees the
shapes it sees in a run. Noise levels may come from a stored run (``plug_in``); effect sizes never
do (power at the measured effect would be circular). Nothing is trained.

For K simulated data sets per hypothesis the experiment's ``analyse`` is run and the claim's
outcome read; per claim:

    power       P(pass | H1)           false_fail   P(fail | H1)
    false_pass  P(pass | H0)           inconclusive_h1, inconclusive_h0

each with its 95 % Clopper–Pearson interval. A rule is **flagged** when the upper bound of its
false pass exceeds 0.05, the lower bound of its power is below 0.8, or the upper bound of its
false fail exceeds 0.05 (so K must be large enough to show a sound rule sound: with no event in
K runs the upper bound is below 0.05 from K = 72 on; the default is 200).

Simulation checks the statistics, not the experiment. **Controls** check the experiment: real
runs with a knob that makes the effect certainly present (positive) or certainly absent
(negative); a claim must pass in a positive control and *fail* (not merely be inconclusive) in a
negative one (``attnlab audit ID --controls``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnlab.errors import AttnlabError
from attnlab.rules import clopper_pearson

MAX_FALSE_PASS, MIN_POWER, MAX_FALSE_FAIL = 0.05, 0.8, 0.05
MAX_SIMS = 10_000  # a rate's 95 % interval is ±0.01 at most there: more simulations change no flag


@dataclass(frozen=True)
class Hypothesis:
    """One hypothesis of a claim: what it says, where it comes from, and the parameters of the
    experiment's simulator (``world``) that make it true."""

    statement: str
    source: str
    world: dict[str, Any]


@dataclass(frozen=True)
class ClaimAudit:
    """A claim's worlds: H1 (the paper's prediction) and H0 (the strongest competitor the paper or
    the literature names), and further worlds drawn by generative models other than the family the
    rule fits: ``misspecified`` ones in which the claim is false (a law between H1 and H0, another
    functional form: the rule must not pass there) and ``also_true`` ones in which it holds (the
    rule must pass there too)."""

    claim: str
    h1: Hypothesis
    h0: Hypothesis
    misspecified: tuple[Hypothesis, ...] = ()
    also_true: tuple[Hypothesis, ...] = ()


@dataclass(frozen=True)
class Design:
    """An experiment's audit design. ``simulate(world, noise, spec, cells, rng) -> cols``: the
    columns its ``analyse`` reads, for the cells of the real design; ``noise``: the noise levels
    (``defaults``, or ``plug_in(cols, spec)`` of a stored run, which returns the same keys)."""

    simulate: Callable[..., dict[str, np.ndarray]]
    claims: tuple[ClaimAudit, ...]
    noise: dict[str, float]
    noise_source: str
    plug_in: Callable[[dict[str, np.ndarray], Any], dict[str, float]] | None = None
    # the cells of a staged design (``staged(exp.stages(spec), answer)`` with ``answer`` giving an earlier
    # stage from simulation); default ``exp.cells(spec)``
    cells: Callable[[Any], list[dict]] | None = None


@dataclass(frozen=True)
class Control:
    """A real run of the experiment with ``sets`` (``--set`` overrides) at ``scale`` in which each
    claim of ``expect`` must have the given outcome (``pass`` in a positive control, ``fail`` in
    a negative one); ``why``: why the knob makes the effect certainly present or absent."""

    name: str
    kind: str  # positive | negative
    scale: str
    sets: tuple[str, ...]
    expect: dict[str, str]
    why: str

    def __post_init__(self):
        want = {"positive": "pass", "negative": "fail"}[self.kind]
        if any(v != want for v in self.expect.values()):
            raise ValueError(f"control {self.name}: a {self.kind} control expects '{want}' of its claims")


def run_control(exp, control: Control, out: Path, progress: bool = False) -> dict[str, Any]:
    """Run (or resume) one control into ``out`` and judge it: every expected outcome met?"""
    from attnlab.experiments.pipeline import reproduce

    verdict = reproduce(exp, control.scale, out, sets=list(control.sets), progress=progress)
    got = {c["id"]: c["outcome"] for c in verdict["claims"]}
    return {
        "name": control.name,
        "kind": control.kind,
        "scale": control.scale,
        "sets": list(control.sets),
        "why": control.why,
        "expect": control.expect,
        "got": {k: got.get(k, "absent") for k in control.expect},
        "held": all(got.get(k) == v for k, v in control.expect.items()),
        "out": str(out),
        "runtime_s": verdict["runtime_s"],
    }


def rate(outcomes: list[str], which: str) -> dict[str, float]:
    k, n = sum(o == which for o in outcomes), len(outcomes)
    lo, hi = clopper_pearson(k, n)  # the exact two-sided 95 % interval
    return {"rate": k / n if n else float("nan"), "ci95": [lo, hi], "k": k, "n": n}


def judge(h1: list[str], h0: list[str], others: tuple = ()) -> dict[str, Any]:
    """The audit row of one rule from its outcomes under H1 and under H0, and under each further
    world in ``others`` — (hypothesis, outcomes, whether the claim holds there): a world where it is
    false must not pass it (pass rate ≤ 0.05), one where it holds must pass it (≥ 0.8)."""
    row = {
        "power": rate(h1, "pass"),
        "false_pass": rate(h0, "pass"),
        "false_fail": rate(h1, "fail"),
        "inconclusive_h1": rate(h1, "inconclusive"),
        "inconclusive_h0": rate(h0, "inconclusive"),
    }
    why = []
    if row["false_pass"]["ci95"][1] > MAX_FALSE_PASS:
        why.append(f"false pass up to {row['false_pass']['ci95'][1]:.3f} > {MAX_FALSE_PASS}")
    if row["power"]["ci95"][0] < MIN_POWER:
        why.append(f"power down to {row['power']['ci95'][0]:.3f} < {MIN_POWER}")
    if row["false_fail"]["ci95"][1] > MAX_FALSE_FAIL:
        why.append(f"false fail up to {row['false_fail']['ci95'][1]:.3f} > {MAX_FALSE_FAIL}")
    worlds = []
    for h, outcomes, holds in others:
        passed = rate(outcomes, "pass")
        worlds.append(
            {
                "statement": h.statement,
                "source": h.source,
                "holds": holds,
                "pass": passed,
                "fail": rate(outcomes, "fail"),
            }
        )
        if holds and passed["ci95"][0] < MIN_POWER:
            why.append(f"power down to {passed['ci95'][0]:.3f} where it holds ({h.statement})")
        if not holds and passed["ci95"][1] > MAX_FALSE_PASS:
            why.append(f"passes up to {passed['ci95'][1]:.3f} where it is false ({h.statement})")
    return row | {"worlds": worlds, "flagged": bool(why), "reason": "; ".join(why)}


def outcomes_of(
    analyse: Callable[[dict], Any],
    simulate: Callable[[np.random.Generator], dict],
    sims: int,
    seed: tuple[int, ...],
    why: dict[str, str] | None = None,
) -> list[dict[str, str]]:
    """claim id -> outcome, for each of ``sims`` simulated data sets (seeded by ``seed`` + index);
    ``why`` collects the detail of each claim reported as descriptive (why it is a measurement)."""
    out = []
    for k in range(sims):
        cols = simulate(np.random.default_rng([*seed, k]))
        claims = analyse(cols).claims
        out.append({c.id: c.outcome for c in claims})
        if why is not None:
            why.update({c.id: c.detail for c in claims if c.outcome == "descriptive"})
    return out


def _world_seed(key: str) -> int:
    """A world's own stream: the same simulations whichever claims ask for it, in any order."""
    import hashlib

    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "little")


def audit(
    exp,
    spec,
    scale: str,
    sims: int = 200,
    seed: int = 0,
    stored: dict[str, np.ndarray] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Audit every declared claim of ``exp`` at ``spec``'s design; the content of audit.json.
    ``stored``: a stored run's columns, whose noise levels the design's ``plug_in`` reads."""
    design: Design | None = getattr(exp, "audit", None)
    if design is None:
        raise AttnlabError(f"{exp.id}: no audit design declared yet (its claims have no simulator of their inputs)")
    if not 1 <= sims <= MAX_SIMS:
        raise AttnlabError(f"--sims: must be 1 to {MAX_SIMS:,}, got {sims:,}")
    noise, noise_source = dict(design.noise), design.noise_source
    if stored is not None and design.plug_in is not None:
        noise, noise_source = design.plug_in(stored, spec), "plug-in from the stored run (--from)"
    cells = design.cells(spec) if design.cells else exp.cells(spec)
    t0 = time.perf_counter()
    worlds: dict[str, list[dict[str, str]]] = {}  # simulations are shared by the claims of one world

    why: dict[str, str] = {}

    def simulated(world: dict, n: int, stream: int) -> list[dict[str, str]]:
        sim = lambda rng: design.simulate(world, noise, spec, cells, rng)
        return outcomes_of(lambda cols: exp.analyse(cols, spec), sim, n, (seed, stream), why)

    def outcomes(h: Hypothesis) -> list[dict[str, str]]:
        key = json.dumps(h.world, sort_keys=True)
        if key not in worlds:
            if progress:
                progress(f"{exp.id}: {sims} simulations of {h.statement}")
            worlds[key] = simulated(h.world, sims, _world_seed(key))
        return worlds[key]

    from attnlab import ledger

    rows, stated = [], {}
    for ca in design.claims:
        key = json.dumps(ca.h1.world, sort_keys=True)
        probe = worlds[key][:1] if key in worlds else simulated(ca.h1.world, 1, 2**31 - 1)  # does this scale state it?
        stated |= probe[0]
        if ca.claim not in probe[0]:
            continue  # a claim this scale does not state (e.g. C away from the paper's d)
        rule = ledger.rule_of(exp, ca.claim)
        if rule is not None and rule.kind != ledger.PREDICTION:  # a check or a measurement: no prediction to audit
            rows.append(_not_audited(exp, ca.claim, rule.kind, f"a {rule.kind}, not a prediction of the paper"))
            continue
        of = lambda h, claim=ca.claim: [o.get(claim, "absent") for o in outcomes(h)]
        h1 = of(ca.h1)
        # a measurement at this design (in most of H1's draws): no verdict to audit
        descriptive = sum(o == "descriptive" for o in h1) >= len(h1) / 2
        h0 = [] if descriptive else of(ca.h0)
        others = (
            ()
            if descriptive
            else (
                *((h, of(h), False) for h in ca.misspecified),
                *((h, of(h), True) for h in ca.also_true),
            )
        )
        row = {
            "id": ca.claim,
            "regime": exp.regime,
            "h1": ca.h1.statement,
            "h1_source": ca.h1.source,
            "h0": ca.h0.statement,
            "h0_source": ca.h0.source,
            **judge(h1, h0, others),
            "descriptive": descriptive,
        }
        if descriptive:
            row.update(flagged=False, reason=why.get(ca.claim) or "reported as a measurement at this design")
        elif not ca.misspecified:  # only its own family simulated: a pass there says nothing of a misspecified world
            gap = "no misspecified world declared (only H1 and H0 simulated)"
            row.update(flagged=True, reason="; ".join(r for r in (row["reason"], gap) if r))
        rows.append(row | {"kind": ledger.PREDICTION})
    audited = {r["id"] for r in rows}
    for claim in stated:  # a prediction the design has no worlds for is a gap, shown as one
        rule = ledger.rule_of(exp, claim)
        if claim not in audited and (rule is None or rule.kind == ledger.PREDICTION):
            rows.append(_not_audited(exp, claim, ledger.PREDICTION, "no worlds declared for this prediction yet", True))
    return {
        "experiment": exp.id,
        "scale": scale,
        "sims": sims,
        "seed": seed,
        "noise": noise,
        "noise_source": noise_source,
        "seconds": round(time.perf_counter() - t0, 1),
        "claims": rows,
    }


def _not_audited(exp, claim: str, kind: str, why: str, flagged: bool = False) -> dict:
    """An audit row without simulations: a check or measurement (nothing of the paper's to audit),
    or a prediction the design declares no worlds for (a gap: flagged)."""
    empty = {"rate": float("nan"), "ci95": [0.0, 1.0], "k": 0, "n": 0}
    return {
        "id": claim,
        "regime": exp.regime,
        "kind": kind,
        "h1": "—",
        "h1_source": "",
        "h0": "—",
        "h0_source": "",
        "power": empty,
        "false_pass": empty,
        "false_fail": empty,
        "inconclusive_h1": empty,
        "inconclusive_h0": empty,
        "worlds": [],
        "descriptive": not flagged,
        "flagged": flagged,
        "reason": why,
    }


def write(path: Path, result: dict) -> Path:
    from attnlab.engine.store import atomic_write_bytes

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, json.dumps(result, indent=2).encode())
    return path


def markdown(result: dict) -> str:
    """One experiment's audit as a Markdown table (the docs' audit page is built from these)."""
    pct = lambda r: f"{r['rate']:.2f} [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}]" if r["n"] else "—"
    lines = [
        f"### {result['experiment']} ({result['scale']})",
        "",
        f"`attnlab audit {result['experiment']} --scale {result['scale']} --sims {result['sims']}` · "
        f"noise: {result['noise_source']} · {result['seconds']:.0f} s",
        "",
        "| claim | regime | H1 | H0 (competitor) | power | false pass | false fail | other worlds: pass rate | flag |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in result["claims"]:
        if c["descriptive"] and not c["flagged"]:
            rates = ["—"] * 3
            flag = f"descriptive: {c['reason'].split(';')[0]}"
        elif not c["power"]["n"]:
            rates = ["—"] * 3
            flag = f"**flagged**: {c['reason']}"
        else:
            rates = [pct(c[k]) for k in ("power", "false_pass", "false_fail")]
            flag = f"**flagged**: {c['reason']}" if c["flagged"] else "ok"
        lines.append(
            f"| {c['id']} | {c['regime']} | {c['h1']} | {c['h0']} | {' | '.join(rates)} | {worlds_text(c)} | {flag} |"
        )
    for c in result.get("controls", ()):
        got = ", ".join(f"{k} {v}" for k, v in c["got"].items())
        lines.append(
            f"\n{c['kind'].capitalize()} control `{c['name']}` ({' '.join(c['sets']) or 'as stated'}, "
            f"{c['scale']}): {got} — {'held' if c['held'] else 'did not hold'}. {c['why']}."
        )
    return "\n".join(lines) + "\n"


def worlds_text(row: dict) -> str:
    """The further worlds of an audit row, each with its pass rate and whether the claim holds there."""
    return (
        "; ".join(
            f"{'holds' if w['holds'] else 'false'}: {w['statement']} — {w['pass']['rate']:.2f}"
            for w in row.get("worlds", [])
        )
        or "—"
    )


PAGE_HEAD = """# The claims audit

Every prediction's pass rule judged on simulated data at its experiment's own design (nothing is
trained): power P(pass | H1, the paper's prediction), false pass P(pass | H0, the strongest competitor
the paper or the literature names) and false fail P(fail | H1), each with its 95 % Clopper–Pearson
interval; then the pass rate in further worlds, drawn by generative models other than the family the
rule fits: *false* ones (a law between H1 and H0, another functional form), where the rule must not
pass, and ones where the claim *holds* under another family (label noise, a hard threshold), where it
must. A rule is **flagged** when its false pass (or its pass rate in a false world) may exceed 0.05,
its power (or its pass rate where the claim holds) may fall below 0.8, or its false fail may exceed
0.05; a prediction with no worlds declared is flagged as a gap. A *descriptive* claim is a
measurement at that design (its reason says from which size it is judged); checks and measurements
are not audited. Audits `--from` a stored run place every world at that run's operating point
(its boundary, lapse rates, censoring and noise). Built with
`python -m attnlab.audit results/*/audit.json > docs/audit.md` from the runs of
`attnlab audit ID --scale cpu` (or `--from` a cpu run, which plugs in its noise levels);
`python -m attnlab.audit --update docs/audit.md results/ID/audit.json …` replaces those ids'
sections and keeps the others.
"""


def page(results: list[dict]) -> str:
    """The docs page of several audits, in `attnlab list` order."""
    from attnlab.experiments import registry

    order = {k: i for i, k in enumerate(registry())}
    results = sorted(results, key=lambda r: (order.get(r["experiment"], len(order)), r["scale"]))
    return PAGE_HEAD + "\n" + "\n".join(markdown(r) for r in results)


def update(text: str, results: list[dict]) -> str:
    """The docs page ``text`` with the sections of ``results`` replaced or added (a section is
    "### ID (SCALE)" up to the next); the other sections are kept; all in `attnlab list` order."""
    from attnlab.experiments import registry

    parts = text.split("\n### ")
    sections = {p.split("\n", 1)[0]: "### " + p.rstrip("\n") + "\n" for p in parts[1:]}
    sections |= {f"{r['experiment']} ({r['scale']})": markdown(r) for r in results}
    order = {k: i for i, k in enumerate(registry())}
    key = lambda h: (order.get(h.split(" ")[0], len(order)), h)
    return PAGE_HEAD + "\n" + "\n".join(sections[h] for h in sorted(sections, key=key))


if __name__ == "__main__":
    import sys

    args = sys.argv[1:]
    if args[:1] == ["--update"]:  # python -m attnlab.audit --update docs/audit.md results/ID/audit.json …
        doc = Path(args[1])
        out = update(doc.read_text(), [json.loads(Path(p).read_text()) for p in args[2:]])
        tmp = doc.with_suffix(".md.tmp")
        tmp.write_text(out)
        tmp.replace(doc)
    else:
        print(page([json.loads(Path(p).read_text()) for p in args]), end="")
