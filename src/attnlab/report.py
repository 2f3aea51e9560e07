"""One static HTML report per result directory, and an index over several.

A report is one self-contained file (figures embedded as PNG, inline CSS, no scripts, no
external resources), so it opens anywhere and can be mailed or attached as it is. Measured
values are formatted for reading (significant digits, intervals as [lo, hi], dicts as key: value
lists); verdict.json keeps the full-precision numbers.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import shlex
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2

from attnlab.engine.store import atomic_write_bytes
from attnlab.fmt import fmt_duration, fmt_number, fmt_value

OUTCOMES = ("pass", "fail", "inconclusive", "descriptive")  # descriptive: a measurement, not counted in "k/n pass"


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def command_line(
    exp_id: str, scale: str, sets: Sequence[str] = (), config: Any = None, out: Any = None, executor: str = "local"
) -> str:
    """The ``attnlab reproduce`` command that writes these results, shell-quoted."""
    args = ["attnlab", "reproduce", exp_id, "--scale", scale]
    if config is not None:
        args += ["--config", str(config)]
    for s in sets:
        args += ["--set", s]
    if executor != "local":
        args += ["--executor", executor]
    if out is not None:
        args += ["--out", str(out)]
    return shlex.join(args)


# ---------------------------------------------------------------- page parts

CSS = """
:root { --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --head: #f6f8fa; --accent: #0969da; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--fg); max-width: 1180px; margin: 0 auto; padding: 1.5rem 1.25rem 3rem; }
h1 { font-size: 1.6rem; margin: 0 0 .2rem; line-height: 1.25; }
h2 { font-size: 1.2rem; margin: 2.2rem 0 .6rem; padding-bottom: .3rem; border-bottom: 1px solid var(--line); }
a { color: var(--accent); text-decoration: none; } a:hover { text-decoration: underline; }
code, pre, .num, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace;
       font-size: 13px; }
pre { background: var(--head); border: 1px solid var(--line); border-radius: 6px; padding: .75rem 1rem;
      white-space: pre-wrap; overflow-wrap: anywhere; margin: .5rem 0; }
.sub { color: var(--muted); margin: 0 0 1rem; }
.muted { color: var(--muted); }
nav { font-size: 14px; margin: .5rem 0 1rem; } nav a { margin-right: 1rem; }
.wrap { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0; font-size: 14px; }
th, td { border: 1px solid var(--line); padding: 6px 10px; vertical-align: top; text-align: left; }
th { background: var(--head); font-weight: 600; }
table.kvtable th { width: 16rem; font-weight: 500; }
table.spec td:nth-child(2) { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace;
       font-size: 13px; }
td.rule { color: var(--muted); font-size: 13px; max-width: 22rem; }
td.claim-id { font-weight: 600; white-space: nowrap; }
.detail { color: var(--muted); font-size: 13px; margin-top: .25rem; }
ul.kv, ol.seq { margin: 0; padding: 0; list-style: none; }
ul.kv ul.kv, ol.seq ul.kv { padding-left: 1rem; border-left: 2px solid var(--line); }
ol.seq > li + li { margin-top: .3rem; padding-top: .3rem; border-top: 1px dashed var(--line); }
ul.kv .k { color: var(--muted); }
.num { white-space: nowrap; }
.badge { display: inline-block; padding: 1px 9px; border-radius: 999px; font-size: 12px; font-weight: 700;
         letter-spacing: .03em; text-transform: uppercase; white-space: nowrap; border: 1px solid transparent; }
.badge.pass { background: #dafbe1; color: #116329; border-color: #aceebb; }
.badge.fail { background: #ffebe9; color: #a40e26; border-color: #ffcecb; }
.badge.inconclusive { background: #fff8c5; color: #7d4e00; border-color: #f5e0a0; }
.badge.descriptive { background: #ddf4ff; color: #0a3069; border-color: #b6e3ff; }
.badge.scale { background: var(--head); color: var(--muted); border-color: var(--line); }
tr.fail td.claim-id { box-shadow: inset 3px 0 0 #cf222e; }
tr.pass td.claim-id { box-shadow: inset 3px 0 0 #1a7f37; }
tr.inconclusive td.claim-id { box-shadow: inset 3px 0 0 #bf8700; }
tr.descriptive td.claim-id { box-shadow: inset 3px 0 0 #0969da; }
.tally .badge { margin-right: .4rem; }
figure { margin: 1rem 0 1.5rem; } figure img { max-width: 100%; height: auto; border: 1px solid var(--line);
         border-radius: 4px; background: #fff; }
figcaption { color: var(--muted); font-size: 13px; }
.empty { color: var(--muted); font-style: italic; }
.axis { font-size: 11px; color: var(--accent); border: 1px solid var(--accent); border-radius: 4px; padding: 0 4px;
        margin-left: .4rem; font-family: system-ui, sans-serif; }
footer { margin-top: 3rem; color: var(--muted); font-size: 13px; border-top: 1px solid var(--line);
         padding-top: .6rem; }
@media print { body { max-width: none; padding: 0; } nav { display: none; } h2 { break-after: avoid; }
               figure, tr { break-inside: avoid; } }
"""

_env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
_env.filters.update(value=fmt_value, number=fmt_number, duration=fmt_duration)

_BADGE = '{% macro badge(o) %}<span class="badge {{ o }}">{{ o }}</span>{% endmacro %}'
_TALLY = """{% macro tally(claims) %}{% if claims %}<span class="tally">
{% for o in outcomes %}{% set n = claims|selectattr("outcome", "equalto", o)|list|length %}
{% if n %}<span class="badge {{ o }}">{{ n }} {{ o }}</span>{% endif %}{% endfor %}</span>
{% else %}<span class="muted">no claims</span>{% endif %}{% endmacro %}"""
GENERATOR = '<meta name="generator" content="attnlab">'  # an existing page with it may be written over
_HEAD = (
    """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
"""
    + GENERATOR
    + """
<link rel="icon" href="data:,">
"""
)  # a page's title and style follow

TEMPLATE = _env.from_string(
    _BADGE
    + _TALLY
    + _HEAD
    + """<title>{{ exp.id }} ({{ verdict.scale }}): {{ n_pass }}/{{ n_counted }} predictions pass</title>
<style>{{ css }}</style></head><body>
<header>
<h1>{{ exp.title }}</h1>
<p class="sub"><span class="mono">{{ exp.id }}</span> <span class="badge scale">{{ verdict.scale }}</span>
&nbsp;{{ tally(claims) }}{% if n_counted %} &middot; <b>{{ n_pass }}/{{ n_counted }} predictions pass</b>{% endif %}
{% if n_counted < claims|length %} &middot; {{ claims|length - n_counted }} not counted (checks, measurements and descriptive claims){% endif %}</p>
{% if verdict.get("modified") %}<p class="sub smoke"><b>Modified design</b>: this run's spec differs from the experiment's declared {{ verdict.scale }}-scale design in <span class="mono">{{ verdict.modified|join(", ") }}</span>; its claims are labelled <i>modified</i> and do not stand for the declared regime.</p>{% endif %}
{% if verdict.scale == "smoke" %}<p class="sub smoke"><b>Smoke scale is a pipeline check</b>: tiny grids and few steps that exercise every stage in seconds; its verdicts say nothing about the paper's claims (run the cpu or paper scale for those).</p>{% endif %}
<nav>{% for anchor, label in sections %}<a href="#{{ anchor }}">{{ label }}</a>{% endfor %}</nav>
</header>

<h2 id="claims">Claims</h2>
{% if claims %}
<div class="wrap"><table id="claims-table" class="claims">
<thead><tr><th>claim</th><th>statement</th><th>measured</th><th>pass rule</th><th>kind · regime</th>
{% if audit %}<th title="attnlab audit: P(pass | H1) / P(pass | H0) of the rule under this design, on simulated data">audit<br>power / false pass</th>{% endif %}<th>verdict</th></tr>
</thead>
<tbody>
{% for c in claims %}
<tr class="{{ c.outcome }}" data-claim="{{ c.id }}"><td class="claim-id">{{ c.id }}</td>
<td>{{ c.statement }}{% if c.detail %}<div class="detail">{{ c.detail }}</div>{% endif %}</td>
<td>{{ c.measured|value }}</td><td class="rule">{{ c.expected }}{% if c.rule_version %}<div class="detail">rule v{{ c.rule_version }}{% if c.post_hoc %} &middot; <b>post hoc</b>{% if c.rule_changed %}: set {{ c.rule_changed.date }} after results were seen ({{ c.rule_changed.why }}){% endif %}{% endif %}</div>{% endif %}</td>
<td>{{ c.kind }} &middot; {{ c.regime }}{% if c.modified %} <span class="badge fail" title="{{ c.modified|join(', ') }}">modified</span>{% endif %}</td>
{% if audit %}{% set a = audit.rows.get(c.id) %}<td class="audit">{% if not a %}—{% elif not a.power.n %}{% if a.flagged %}<span class="badge fail" title="{{ a.reason }}">flagged</span> {% endif %}{{ a.reason }}{% elif a.descriptive %}descriptive{% else %}{{ "%.2f"|format(a.power.rate) }} / {{ "%.2f"|format(a.false_pass.rate) }}
{% if a.flagged %}<span class="badge fail" title="{{ a.reason }}">flagged</span>{% else %}<span class="badge pass">ok</span>{% endif %}{% endif %}</td>{% endif %}
<td>{{ badge(c.outcome) }}</td></tr>
{% endfor %}
</tbody></table></div>
<p class="sub legend"><b>Legend.</b> Outcomes: {{ badge("pass") }} the measured value meets the rule; {{ badge("fail") }} the data speak against the claim; {{ badge("inconclusive") }} too thin to decide; {{ badge("descriptive") }} a measurement its design cannot decide (not counted). Kinds: <i>prediction</i> (the paper's; the only kind counted), <i>check</i> (follows from the construction), <i>measurement</i> (descriptive). Regimes: <i>protocol</i> (the paper's stated protocol), <i>theorem</i> (the theorem's hypotheses hold), <i>investigation</i> (outside them, chosen to make a phenomenon measurable); <i>modified</i>: the run changed the declared design. <i>Post hoc</i>: the rule was set after results of this experiment were seen.</p>
{% if audit %}<p class="sub">Audit: {{ audit.sims }} simulations per hypothesis at the {{ audit.scale }} design (noise: {{ audit.noise_source }}); a rule is flagged when its false pass may exceed 0.05, its power fall below 0.8 or its false fail exceed 0.05 (95 % Clopper–Pearson bounds). <span class="mono">audit.json</span> holds H1, H0 and every rate.
{% for c in audit.controls %}<br>{{ c.kind }} control <b>{{ c.name }}</b> (<span class="mono">{{ c.sets|join(" ") or "as stated" }}</span>, {{ c.scale }}): {% for k, v in c.got.items() %}{{ k }} {{ v }} (expected {{ c.expect[k] }}){% if not loop.last %}, {% endif %}{% endfor %} — {% if c.held %}held{% else %}<b>did not hold</b>{% endif %}{% endfor %}</p>{% endif %}
{% else %}
<p class="empty">This run states no claims: its results are reported as measured, without a verdict.</p>
{% endif %}

{% for t in tables %}
<h2 id="table-{{ loop.index }}">{{ t.title }}</h2>
<div class="wrap"><table class="results">
<thead><tr>{% for c in t.columns %}<th>{{ c }}</th>{% endfor %}</tr></thead>
<tbody>{% for row in t.rows %}<tr>{% for x in row %}<td>{{ x|value }}</td>{% endfor %}</tr>
{% else %}<tr><td class="empty" colspan="{{ t.columns|length or 1 }}">no rows</td></tr>{% endfor %}</tbody>
</table></div>
{% endfor %}

<h2 id="run">Run</h2>
<pre class="command">{{ command }}</pre>
<div class="wrap"><table class="kvtable">
<tr><th>experiment</th><td><span class="mono">{{ exp.id }}</span></td></tr>
<tr><th>scale</th><td>{{ verdict.scale }}</td></tr>
<tr><th>cells</th><td>{{ verdict.cells }}{% if verdict.cells_trained_now is defined %}
 <span class="muted">({% if verdict.cells_trained_now >= verdict.cells %}all trained by the run that wrote this verdict{% elif verdict.cells_trained_now == 0 %}all resumed from earlier runs{% else %}{{ verdict.cells_trained_now }} trained by the run that wrote this verdict, the rest resumed{% endif %})</span>
{% endif %}</td></tr>
<tr><th>wall time of that run</th><td>{{ verdict.runtime_s|duration }}</td></tr>
{% if verdict.train_seconds_total is defined %}
<tr><th>training time, summed over cells</th><td>{{ verdict.train_seconds_total|duration }}{% if (verdict.get("workers") or 1) > 1 %}
 <span class="muted">(each cell's share of its chunk's wall time; {{ verdict.workers }} chunks trained at once)</span>{% endif %}</td></tr>
{% endif %}
{% if verdict.finished_at is defined %}<tr><th>finished</th><td>{{ verdict.finished_at }}</td></tr>{% endif %}
{% for k, v in provenance %}<tr><th>{{ k }}</th><td class="mono">{{ v }}</td></tr>{% endfor %}
{% if verdict.get("store_warnings") %}
<tr><th>store warnings</th>
<td><ul class="kv">{% for w in verdict.store_warnings %}<li>{{ w }}</li>{% endfor %}</ul></td></tr>
{% endif %}
{% if verdict.rebuilt is defined %}
<tr><th>report rebuilt</th><td>{{ verdict.rebuilt.at }} from the stored results, without training
 <span class="muted">(analysis by attnlab {{ verdict.rebuilt.attnlab_version }},
 git {{ verdict.rebuilt.git_sha }})</span>
</td></tr>
{% endif %}
</table></div>

<h2 id="figures">Figures</h2>
{% for f in images %}
<figure><img src="{{ f.uri }}" alt="{{ f.name }}">
<figcaption>{{ f.name }}{% if f.pdf %} &middot; <a href="{{ f.pdf }}">PDF</a> (beside this file){% endif %}
</figcaption></figure>
{% else %}<p class="empty">No figures.</p>
{% endfor %}

{% if summary %}
<h2 id="numbers">Fitted numbers</h2>
<div class="wrap"><table class="kvtable">
{% for k, v in summary.items() %}<tr><th>{{ k }}</th><td>{{ v|value }}</td></tr>{% endfor %}
</table></div>
{% endif %}

{% if notes %}<h2 id="notes">Notes</h2><ul>{% for n in notes %}<li>{{ n }}</li>{% endfor %}</ul>{% endif %}

<h2 id="assumptions">Assumptions</h2>
{% if assumptions %}<ul>{% for a in assumptions %}<li>{{ a }}</li>{% endfor %}</ul>
{% else %}<p class="empty">None stated.</p>{% endif %}

<h2 id="spec">Spec</h2>
<p class="muted">Every field this run used (spec.json beside this file); <span class="axis">axis</span> marks a grid
axis.</p>
<div class="wrap"><table class="spec">
<thead><tr><th>field</th><th>value</th><th>meaning</th></tr></thead>
<tbody>{% for name, value, axis, doc in spec_rows %}
<tr><td class="mono">{{ name }}</td><td>{{ value|value }}{% if axis %}<span class="axis">axis</span>{% endif %}</td>
<td class="muted">{{ doc }}</td></tr>
{% endfor %}</tbody></table></div>

{% if description %}<h2 id="about">About this experiment</h2><pre class="doc">{{ description }}</pre>{% endif %}

<footer>Written by attnlab {{ generator }} on {{ written }}. Full-precision values: verdict.json and
results.parquet beside this file.</footer>
</body></html>
""",
)

INDEX = _env.from_string(
    _BADGE
    + _TALLY
    + _HEAD
    + """<title>attnlab results: {{ n_pass }}/{{ n_counted }} predictions pass</title>
<style>{{ css }}</style></head><body>
<h1>attnlab results</h1>
<p class="sub">{{ entries|length }} result directories &middot; {{ n_claims }} claims &middot;
{{ tally(all_claims) }}{% if n_counted %} &middot; <b>{{ n_pass }}/{{ n_counted }} predictions pass</b>{% endif %}</p>

<h2 id="runs">Runs</h2>
<div class="wrap"><table id="runs-table">
<thead><tr><th>report</th><th>experiment</th><th>scale</th><th>cells</th><th>wall time</th><th>claims</th></tr></thead>
<tbody>{% for e in entries %}
<tr><td><a href="{{ e.href }}">{{ e.label }}</a></td><td class="mono">{{ e.verdict.experiment }}</td>
<td>{{ e.verdict.scale }}</td><td>{{ e.verdict.cells }}</td><td>{{ e.verdict.runtime_s|duration }}</td>
<td>{{ tally(e.claims) }}</td></tr>
{% endfor %}</tbody></table></div>

<h2 id="claims">Every claim</h2>
<div class="wrap"><table id="claims-table" class="claims">
<thead><tr><th>experiment</th><th>scale</th><th>claim</th><th>measured</th><th>kind · regime</th><th>verdict</th></tr></thead>
<tbody>{% for e in entries %}{% for c in e.claims %}
<tr class="{{ c.outcome }}" data-claim="{{ c.id }}">
<td><a href="{{ e.href }}#claims" class="mono">{{ e.verdict.experiment }}</a>
<div class="detail">{{ e.label }}</div></td>
<td>{{ e.verdict.scale }}</td><td class="claim-id" title="{{ c.statement }}">{{ c.id }}</td>
<td>{{ c.measured|value }}</td><td>{{ c.kind }} &middot; {{ c.regime }}{% if c.modified %} <span class="badge fail">modified</span>{% endif %}{% if c.post_hoc %} <span class="muted">post hoc</span>{% endif %}</td><td>{{ badge(c.outcome) }}</td></tr>
{% endfor %}{% if not e.claims %}
<tr><td><a href="{{ e.href }}" class="mono">{{ e.verdict.experiment }}</a><div class="detail">{{ e.label }}</div></td>
<td>{{ e.verdict.scale }}</td>
<td class="empty" colspan="4">no claims</td></tr>
{% endif %}{% endfor %}</tbody></table></div>
<footer>Written by attnlab {{ generator }} on {{ written }}.</footer>
</body></html>
""",
)

_PROVENANCE_LABELS = {
    "attnlab_version": "attnlab version",
    "git_sha": "git commit",
    "jax_version": "jax",
    "jaxlib_version": "jaxlib",
    "backend": "backend",
    "strategy": "strategy",
    "dtype": "dtype",
}


def _outcome(c: dict) -> str:
    o = c.get("outcome")
    return o if o in OUTCOMES else ("pass" if c.get("pass") else "fail")


def _claims(verdict: dict) -> list[dict]:
    """The claims as shown (verdicts written before regimes existed show an empty one)."""
    return [
        dict(
            c,
            outcome=_outcome(c),
            detail=c.get("detail", ""),
            regime=c.get("regime", ""),
            kind=c.get("kind", "prediction"),
            modified=c.get("modified") or [],
            rule_version=c.get("rule_version"),
            post_hoc=c.get("post_hoc"),
            rule_changed=c.get("rule_changed"),
        )
        for c in verdict.get("claims", [])
    ]


def _audit(path: Path, verdict: dict) -> dict | None:
    """The audit written beside this run (``attnlab audit ID --from DIR``), if it is of this
    experiment: its rows by claim id, and its controls."""
    import json

    try:
        a = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(a, dict) or a.get("experiment") != verdict.get("experiment"):
        return None
    return a | {"rows": {r["id"]: r for r in a.get("claims", [])}, "controls": a.get("controls", [])}


def counted_claims(claims: Sequence[dict]) -> list[dict]:
    """The claims a "k/n pass" counts: predictions with a verdict (checks, measurements and
    descriptive claims are listed apart; a verdict written before kinds existed counts each claim as
    a prediction)."""
    from attnlab.ledger import counted as of

    return of(list(claims))


def counted(claims: Sequence[dict]) -> int:
    return len(counted_claims(claims))


def assumptions_of(exp, verdict: dict) -> list[str]:
    """The assumptions of the scale run, and the fields a modified run changed."""
    found = list(exp.assumptions_for(verdict["scale"]) if hasattr(exp, "assumptions_for") else exp.assumptions)
    if verdict.get("modified"):
        found.append(
            f"This run modified the declared {verdict['scale']}-scale design: {', '.join(verdict['modified'])} "
            "(the values are in the Spec below); the assumptions above are the declared design's."
        )
    return found


def spec_rows(spec) -> list[tuple[str, Any, bool, str]]:
    """(field, value, is a grid axis, description) of every spec field; part tables are
    flattened to ``kind.field`` with their part's own descriptions."""
    from attnlab import problem as P

    values = spec.model_dump()
    rows = []
    for name, info in type(spec).model_fields.items():
        if name in P.PART_KINDS and isinstance(values.get(name), dict):
            part = values[name]
            try:
                fields = P.part_config(name, part.get("name")).fields()
            except Exception:  # an unknown part name: show the values without descriptions
                fields = {}
            for k, v in part.items():
                doc = f"which {name} part" if k == "name" else (fields[k].description or "") if k in fields else ""
                rows.append((f"{name}.{k}", v, isinstance(v, list | tuple), doc))
        else:
            rows.append((name, values.get(name), False, info.description or ""))
    return rows


def _images(figures: Sequence[Path]) -> list[dict]:
    names = {Path(p).name for p in figures}
    out = []
    for p in map(Path, figures):
        if p.suffix.lower() == ".png":
            pdf = p.with_suffix(".pdf").name
            out.append(
                {
                    "name": p.name,
                    "uri": "data:image/png;base64," + base64.b64encode(p.read_bytes()).decode(),
                    "pdf": quote(pdf) if pdf in names else None,
                }
            )
    return out


def attnlab_version() -> str:
    try:
        return metadata.version("attnlab")
    except metadata.PackageNotFoundError:
        return "unknown"


def write(
    path: Path,
    exp,
    spec,
    verdict: dict,
    analysis,
    figures: list[Path],
    sets: list[str],
    *,
    tables: Sequence[tuple[str, Sequence[str], Sequence[Sequence[Any]]]] | None = None,
) -> Path:
    """Write the report of one results directory. ``tables``: extra (title, columns, rows)
    sections shown after the claims (values formatted and escaped); default: the analysis's own
    ``tables`` if it has any. The command shown is the verdict's ``command`` if recorded, else
    rebuilt from the id, scale and ``sets``."""
    claims = _claims(verdict)
    audit = _audit(Path(path).parent / "audit.json", verdict)
    if tables is None:
        tables = getattr(analysis, "tables", None) or []
    prov = verdict.get("provenance") or {}
    summary = getattr(analysis, "summary", None) or {}
    sections = [("claims", "Claims")] + [(f"table-{i + 1}", t[0]) for i, t in enumerate(tables)]
    sections += [("run", "Run"), ("figures", "Figures")]
    sections += [("numbers", "Fitted numbers")] if summary else []
    sections += [("notes", "Notes")] if getattr(analysis, "notes", None) else []
    sections += [("assumptions", "Assumptions"), ("spec", "Spec")]
    sections += [("about", "About")] if getattr(exp, "description", "") else []
    text = TEMPLATE.render(
        css=CSS,
        outcomes=OUTCOMES,
        exp=exp,
        verdict=verdict,
        claims=claims,
        n_pass=sum(c["outcome"] == "pass" for c in counted_claims(claims)),
        n_counted=counted(claims),
        assumptions=assumptions_of(exp, verdict),
        tables=[{"title": t, "columns": list(c), "rows": [list(r) for r in rows]} for t, c, rows in tables],
        command=verdict.get("command") or command_line(exp.id, verdict["scale"], sets),
        provenance=[(_PROVENANCE_LABELS.get(k, k), v) for k, v in prov.items()],
        images=_images(figures),
        summary=summary,
        notes=getattr(analysis, "notes", None) or [],
        description=(getattr(exp, "description", "") or "").strip("\n"),
        spec_rows=spec_rows(spec),
        sections=sections,
        audit=audit,
        generator=attnlab_version(),
        written=utc_now(),
    )
    atomic_write_bytes(Path(path), text.encode())
    return Path(path)


def write_index(path: Path, reports: Sequence[tuple[Path, dict]]) -> Path:
    """Write an index of several reports: one row per run, then every claim of every run, with
    links relative to the index (the tree can be moved or shared as a whole)."""
    path = Path(path)
    base = path.resolve().parent
    entries = []
    for report_path, verdict in reports:
        rel = Path(os.path.relpath(Path(report_path).resolve(), base)).as_posix()
        label = Path(rel).parent.as_posix()
        entries.append(
            {
                "href": quote(rel),
                "label": label if label != "." else rel,
                "verdict": verdict,
                "claims": _claims(verdict),
            }
        )
    all_claims = [c for e in entries for c in e["claims"]]
    text = INDEX.render(
        css=CSS,
        outcomes=OUTCOMES,
        entries=entries,
        all_claims=all_claims,
        n_claims=len(all_claims),
        n_pass=sum(c["outcome"] == "pass" for c in counted_claims(all_claims)),
        n_counted=counted(all_claims),
        generator=attnlab_version(),
        written=utc_now(),
    )
    atomic_write_bytes(path, text.encode())
    return path
