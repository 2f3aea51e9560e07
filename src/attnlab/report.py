"""One static HTML report per result directory: claims, fitted numbers, figures (embedded),
spec and assumptions. Opens anywhere, no server."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import jinja2

from attnlab.sweep.store import atomic_write_bytes

TEMPLATE = jinja2.Template(
    """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{ exp.id }} ({{ verdict.scale }})</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; width: 100%; }
td, th { border: 1px solid #ccc; padding: 4px 8px; vertical-align: top; text-align: left; }
th { background: #f4f4f4; }
.pass { color: #0a6e2a; font-weight: bold; } .fail { color: #b00020; font-weight: bold; }
.inconclusive { color: #9a6700; font-weight: bold; }
code, pre { background: #f6f6f6; font-size: 12px; } pre { padding: .6em; overflow-x: auto; }
img { max-width: 100%; border: 1px solid #eee; }
</style></head><body>
<h1>{{ exp.title }}</h1>
<p><code>attnlab reproduce {{ exp.id }} --scale {{ verdict.scale }}{% for s in sets %} --set {{ s }}{% endfor %}</code>
&middot; {{ verdict.cells }} cells ({{ verdict.cells_trained_now }} trained in this run)
&middot; {{ "%.1f"|format(verdict.runtime_s) }} s this run
&middot; <b>{{ n_pass }}/{{ verdict.claims|length }} claims pass</b></p>
<p><small>{% for k, v in verdict.provenance.items() %}{{ k }} {{ v }}{% if not loop.last %} &middot; {% endif %}{% endfor %}</small></p>
<h2>Claims</h2>
<table><tr><th>id</th><th>statement</th><th>measured</th><th>pass rule</th><th>verdict</th></tr>
{% for c in verdict.claims %}<tr><td>{{ c.id }}</td><td>{{ c.statement }}{% if c.detail %}<br><i>{{ c.detail }}</i>{% endif %}</td>
<td><code>{{ c.measured_json }}</code></td><td>{{ c.expected }}</td>
<td class="{{ c.outcome }}">{{ c.outcome|upper }}</td></tr>
{% endfor %}</table>
<h2>Figures</h2>
{% for name, uri in images %}<p><img src="{{ uri }}" alt="{{ name }}"><br><small>{{ name }} (PDF beside this file)</small></p>{% endfor %}
<h2>Fitted numbers</h2><pre>{{ summary }}</pre>
{% if notes %}<h2>Notes</h2><ul>{% for n in notes %}<li>{{ n }}</li>{% endfor %}</ul>{% endif %}
<h2>About this experiment</h2><pre>{{ description }}</pre>
<h2>Assumptions</h2><ul>{% for a in exp.assumptions %}<li>{{ a }}</li>{% endfor %}</ul>
<h2>Spec</h2><pre>{{ spec }}</pre>
</body></html>
""",
    autoescape=True,
)


def write(path: Path, exp, spec, verdict: dict, analysis, figures: list[Path], sets: list[str]) -> Path:
    claims = [
        dict(c, measured_json=json.dumps(c["measured"], ensure_ascii=False, default=str)) for c in verdict["claims"]
    ]
    images = [
        (p.name, "data:image/png;base64," + base64.b64encode(p.read_bytes()).decode())
        for p in figures
        if p.suffix == ".png"
    ]
    text = TEMPLATE.render(
        exp=exp,
        verdict=dict(verdict, claims=claims),
        n_pass=sum(c["pass"] for c in claims),
        images=images,
        summary=json.dumps(analysis.summary, indent=2, ensure_ascii=False, default=str),
        notes=analysis.notes,
        description=exp.description or "",
        spec=json.dumps(spec.model_dump(), indent=2, ensure_ascii=False),
        sets=sets,
    )
    atomic_write_bytes(path, text.encode())
    return path
