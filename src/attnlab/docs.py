"""The documentation pages, generated: one page per paper (every experiment's command, regime,
description, figure, assumptions and measured verdicts) and a field reference of every part.

The verdicts come from result files committed under ``docs/results/ID/`` (``verdict.json``, the
run's ``spec.json`` and the experiment's main figure), copied there from a finished run by
:func:`collect`; a page says where a committed run's spec is not the code's spec of its scale
(:func:`design_changes`: the design changed since, or the run was made with overrides); everything
else comes from the code (the registry, each experiment's ``assumptions``, each part's config),
so an assumption is written once, in its experiment, and shown in its report and on its page.
:func:`build` renders the pages from those files alone, without rerunning anything, and
:func:`stale` lists the pages that differ from what :func:`build` gives (a test keeps them in
step)::

    attnlab docs --collect results/all-cpu     # copy a run's verdicts and figures in, then build
    attnlab docs                               # rebuild the pages from the committed files
    attnlab docs --check                       # exit 1 if a page is out of date
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

from attnlab.errors import AttnlabError
from attnlab.fmt import fmt_duration, fmt_text

PAPERS = {
    "jiang2024": "Jiang et al. 2024: benign and harmful overfitting of a two-layer softmax transformer",
    "li2023": "Li et al. 2023: sample complexity and sparse attention of a shallow ViT",
    "wu2023": "Wu et al. 2023: convergence and the NTK of an encoder-only shallow transformer",
}
RESULTS = "results"  # under the docs directory: one folder per experiment id
FIELDS_PAGE = "fields.md"
PART_KINDS = ("data", "model")


def paper_of(exp_id: str) -> str:
    return exp_id.split("-", 1)[0]


def collect(run_dir: Path, docs: Path) -> list[str]:
    """Copy each experiment's ``verdict.json``, ``spec.json`` and main figure (its first PNG by
    name) from ``run_dir``/ID (a ``reproduce all`` directory) into ``docs``/results/ID; returns
    the ids."""
    from attnlab.engine.store import atomic_write_bytes
    from attnlab.experiments import registry

    run_dir, got = Path(run_dir), []
    for exp_id in registry():  # attnlab's own and installed ones alike: whatever the run holds
        src = run_dir / exp_id
        if not (src / "verdict.json").is_file():
            continue
        dst = Path(docs) / RESULTS / exp_id
        dst.mkdir(parents=True, exist_ok=True)
        verdict = json.loads((src / "verdict.json").read_text())
        atomic_write_bytes(dst / "verdict.json", (json.dumps(verdict, indent=2, ensure_ascii=False) + "\n").encode())
        (dst / "spec.json").unlink(missing_ok=True)
        if (src / "spec.json").is_file():
            atomic_write_bytes(dst / "spec.json", (src / "spec.json").read_bytes())
        for old in dst.glob("*.png"):
            old.unlink()
        pngs = sorted(src.glob("*.png"))
        if pngs:
            shutil.copyfile(pngs[0], dst / pngs[0].name)
        got.append(exp_id)
    if not got:
        raise AttnlabError(f"--collect {run_dir}: no experiment directory with a verdict.json (ID/verdict.json)")
    return got


def build(docs: Path) -> dict[str, str]:
    """Every page's text by file name (``PAPER.md`` and ``fields.md``), from the code and the
    committed result files under ``docs``/results; nothing is written."""
    from attnlab.experiments import registry
    from attnlab.parts import outside

    exps = {i: e for i, e in registry().items() if outside("experiment", i) is None}
    pages = {}
    for paper, title in PAPERS.items():
        own = {i: e for i, e in exps.items() if paper_of(i) == paper}
        pages[f"{paper}.md"] = _paper_page(paper, title, own, Path(docs))
    pages[FIELDS_PAGE] = _fields_page()
    return pages


def write(docs: Path) -> list[Path]:
    from attnlab.engine.store import atomic_write_bytes

    out = []
    for name, text in build(docs).items():
        atomic_write_bytes(Path(docs) / name, text.encode())
        out.append(Path(docs) / name)
    return out


def stale(docs: Path) -> list[str]:
    """The pages whose file differs from what :func:`build` gives (missing ones included)."""
    return [n for n, text in build(docs).items() if not (p := Path(docs) / n).is_file() or p.read_text() != text]


# ---------------------------------------------------------------- pages


def design_changes(docs: Path, exp_id: str, scale: str) -> list[str] | None:
    """The fields (dotted) in which the committed run's ``spec.json`` differs from the code's spec
    of ``scale`` now: empty when it is that spec, None when no spec is committed. A field the code
    added after the run is not counted (its default is taken to keep the earlier behaviour); one
    it dropped is."""
    from attnlab.experiments import get

    path = docs / RESULTS / exp_id / "spec.json"
    if not path.is_file():
        return None
    ran = _flat(json.loads(path.read_text()))
    now = _flat(json.loads(json.dumps(get(exp_id).spec(scale).model_dump())))
    return sorted(k for k in ran if k not in now or now[k] != ran[k])


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out |= _flat(v, f"{prefix}{k}.")
        else:
            out[f"{prefix}{k}"] = v
    return out


def _cell(text) -> str:
    """A value fit for one Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _paper_page(paper: str, title: str, exps: dict, docs: Path) -> str:
    lines = [
        f"# {title}",
        "",
        f"Generated by `attnlab docs` from the code and the result files under `docs/{RESULTS}/`; do not edit by hand.",
        "",
        "| id | regime | verdicts |",
        "|---|---|---|",
    ]
    for exp_id, exp in exps.items():
        v = _verdict(docs, exp_id)
        lines.append(f"| [`{exp_id}`](#{exp_id}) | {exp.regime} | {_tally(v) if v else 'no committed run'} |")
    for exp_id, exp in exps.items():
        lines += [
            "",
            f"## {exp_id}",
            "",
            f"**{exp.title}**",
            "",
            "```",
            f"attnlab reproduce {exp_id} --scale cpu",
            "```",
        ]
        lines += ["", f"Regime: {exp.regime}. Scales: {', '.join(exp.scales)}.", ""]
        if exp.description:  # the experiment's own text, as it reads in its module and its report
            text = textwrap.dedent(exp.description).strip("\n")
            lines += [
                "<details><summary>What it does, and its claims</summary>",
                "",
                "```text",
                text,
                "```",
                "</details>",
            ]
        v = _verdict(docs, exp_id)
        figure = next(iter(sorted((docs / RESULTS / exp_id).glob("*.png"))), None)
        if figure is not None:
            lines += ["", f"![{exp_id}]({RESULTS}/{exp_id}/{figure.name})"]
        if exp.assumptions:
            lines += ["", "### Assumptions", ""] + [f"- {' '.join(a.split())}" for a in exp.assumptions]
        lines += ["", "### Measured verdicts", ""]
        if v is None:
            lines.append(f"No run committed under `docs/{RESULTS}/{exp_id}/` yet.")
            continue
        lines.append(
            f"`{v.get('command', '')}`: {v['cells']} cells, {fmt_duration(v.get('runtime_s'))} "
            f"({v.get('provenance', {}).get('git_sha', '?')[:12]}); {_tally(v)}."
        )
        changed = design_changes(docs, exp_id, v["scale"])
        if changed:
            fields = ", ".join(f"`{k}`" for k in changed[:8]) + (
                f" and {len(changed) - 8} more" if len(changed) > 8 else ""
            )
            lines += [
                "",
                f"**Not the current design:** this run's spec differs from the {v['scale']}-scale spec of the code "
                f"in {fields}; rerun it and `attnlab docs --collect` it.",
            ]
        if v["claims"]:
            lines += ["", "| claim | regime | measured | rule | verdict |", "|---|---|---|---|---|"]
            for c in v["claims"]:
                lines.append(
                    f"| `{c['id']}`: {_cell(c['statement'])} | {c.get('regime', '')} | {_cell(fmt_text(c['measured']))} "
                    f"| {_cell(c['expected'])} | **{c['outcome']}** |"
                )
    return "\n".join(lines) + "\n"


def _verdict(docs: Path, exp_id: str) -> dict | None:
    path = docs / RESULTS / exp_id / "verdict.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _tally(v: dict) -> str:
    from attnlab.report import OUTCOMES

    n = {o: sum(c["outcome"] == o for c in v["claims"]) for o in OUTCOMES}
    return f"{v['scale']} scale: " + (", ".join(f"{k} {o}" for o, k in n.items() if k) or "no claims")


def _fields_page() -> str:
    from attnlab import problem as P
    from attnlab.parts import outside, registered

    lines = [
        "# Field reference",
        "",
        "Every field of every part attnlab ships, as `attnlab fields KIND.NAME` prints it: what `--set` "
        "and a TOML spec accept. Generated by `attnlab docs`; do not edit by hand.",
    ]
    sections = [("train", None)] + [(k, n) for k in PART_KINDS for n in sorted(registered(k)) if outside(k, n) is None]
    for kind, name in sections:
        config = P.part_config(kind, name)
        head = "train (the training recipe)" if name is None else f"{kind}.{name}"
        lines += [
            "",
            f"## {head}",
            "",
            "| field | type | default | allowed | role | description |",
            "|---|---|---|---|---|---|",
        ]
        for r in config.describe():
            lines.append(
                f"| `{kind}.{r['field']}` | {_cell(r['type'])} | {_cell(fmt_text(r['default']))} | {_cell(r['allowed'])} "
                f"| {r['role']} | {_cell(r['description'])} |"
            )
    return "\n".join(lines) + "\n"
