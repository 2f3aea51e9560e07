"""``attnlab audit ID|all``: each claim's rule run on simulated data under its own design (power and
false-pass rate), and the experiment's real controls."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from attnlab.audit import MAX_SIMS
from attnlab.cli.common import QuietOption, app, err, fail, out
from attnlab.errors import AttnlabError
from attnlab.experiments import get, registry
from attnlab.experiments.base import SCALES


@app.command("audit")
def audit_cmd(
    exp_id: Annotated[str, typer.Argument(metavar="ID", help="experiment id (see `attnlab list`), or all")],
    scale: Annotated[str, typer.Option(help=f"the design audited: one of {', '.join(SCALES)}")] = "cpu",
    sims: Annotated[
        int,
        typer.Option(
            help=f"simulated data sets per hypothesis, 1 to {MAX_SIMS:,} (at {MAX_SIMS:,} a rate's 95 % interval is "
            "±0.01 at most: more would change no flag)",
        ),
    ] = 200,
    seed: Annotated[int, typer.Option(help="seed of the simulations")] = 0,
    from_dir: Annotated[
        Path | None,
        typer.Option("--from", help="a results directory: its spec is the design, its noise levels plugged in"),
    ] = None,
    out_dir: Annotated[
        Path | None,
        typer.Option(
            "--out", help="where audit.json goes (default: --from, else results/ID-SCALE-audit; with all: OUT/ID)"
        ),
    ] = None,
    controls: Annotated[
        bool,
        typer.Option(
            "--controls",
            help="also run the experiment's positive and negative controls (real runs, "
            "into OUT/controls/NAME); exit 1 if one does not hold",
        ),
    ] = False,
    quiet: QuietOption = False,
) -> None:
    """Power and false-pass rate of every claim's rule under the experiment's own design, on
    simulated data under each claim's H1 and H0 (nothing is trained); writes audit.json. With
    --controls, the experiment's controls are run and judged too (audit.json: "controls")."""
    try:
        if not 1 <= sims <= MAX_SIMS:
            raise AttnlabError(f"--sims: must be 1 to {MAX_SIMS:,}, got {sims:,}")
        if exp_id == "all":
            if from_dir is not None:
                raise AttnlabError("--from: audits one stored run; give its experiment id, not all")
            for i in registry():  # every id's destination checked before the first is audited
                check_audit_target(out_dir / i if out_dir else Path("results") / f"{i}-{scale}-audit", i)
            results = [
                _audit_one(i, scale, sims, seed, None, out_dir and out_dir / i, controls and bool(e.controls), quiet)
                for i, e in registry().items()
            ]
        else:
            results = [_audit_one(exp_id, scale, sims, seed, from_dir, out_dir, controls, quiet)]
    except AttnlabError as e:
        raise fail(e) from None
    if not all(c["held"] for r in results for c in r.get("controls", ())):
        raise typer.Exit(1)


def check_audit_target(target: Path, exp_id: str) -> None:
    """audit.json goes into a directory of its own or of a run of the same experiment, never into
    another run's results or parts, and never over a file attnlab did not write."""
    from attnlab.engine.guard import check_output_dir, check_output_file, recorded_owner

    check_output_dir(target, "--out")
    owner = recorded_owner(target)
    if owner is not None and owner.experiment != exp_id:
        raise AttnlabError(f"--out {target}: holds the results of {owner}; the audit of {exp_id} goes elsewhere")
    check_output_file(target / "audit.json", "--out", marker='"sims"')


def _audit_one(exp_id, scale, sims, seed, from_dir, out_dir, controls, quiet) -> dict:
    from attnlab import audit
    from attnlab.experiments.pipeline import check_target, load_results, rebuild, table_columns

    stored = None
    if from_dir is not None:
        found = load_results(from_dir)
        if found.exp.id != exp_id:
            raise AttnlabError(f"--from {from_dir}: holds {found.exp.id}, not {exp_id}")
        exp, spec, scale = found.exp, found.spec, found.verdict["scale"]
        stored = table_columns(found.table)
    else:
        exp = get(exp_id)
        spec = exp.spec(scale)
    target = out_dir or from_dir or Path("results") / f"{exp_id}-{scale}-audit"
    check_audit_target(target, exp_id)
    say = None if quiet else (lambda m: err.print(m, highlight=False, markup=False))
    if controls and not exp.controls:
        raise AttnlabError(f"--controls: {exp_id} declares no controls")
    for c in exp.controls if controls else ():  # where each control would run, checked before any work
        check_target(exp, exp.spec(c.scale, list(c.sets)), c.scale, target / "controls" / c.name)
    result = audit.audit(exp, spec, scale, sims=sims, seed=seed, stored=stored, progress=say)
    if controls:
        result["controls"] = [
            audit.run_control(exp, c, target / "controls" / c.name, progress=not quiet) for c in exp.controls
        ]
    path = audit.write(target / "audit.json", result)
    if from_dir is not None:  # the run's report shows its audit
        rebuild(found)
    table = Table(title=f"{exp_id} ({scale}): audit of {len(result['claims'])} rules, {sims} simulations each")
    for col in ("claim", "regime", "power", "false pass", "false fail", "other worlds: pass rate", "flag"):
        table.add_column(col, overflow="fold")
    pct = lambda r: f"{r['rate']:.2f} [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}]" if r["n"] else "—"
    for c in result["claims"]:
        flag = (
            f"[red]FLAGGED[/red] {escape(c['reason'])}"
            if c["flagged"]
            else f"[blue]{escape(c.get('kind', 'prediction') if c.get('kind', 'prediction') != 'prediction' else 'descriptive')}"
            if c["descriptive"]
            else "[green]ok"
        )
        table.add_row(
            escape(c["id"]),
            c["regime"],
            pct(c["power"]),
            pct(c["false_pass"]),
            pct(c["false_fail"]),
            escape(audit.worlds_text(c)),
            flag,
        )
    out.print(table)
    for c in result.get("controls", ()):
        got = ", ".join(f"{k} {v} (expected {c['expect'][k]})" for k, v in c["got"].items())
        mark = "[green]held[/green]" if c["held"] else "[red]DID NOT HOLD[/red]"
        out.print(f"{c['kind']} control {c['name']}: {got} — {mark}", highlight=False, soft_wrap=True)
    out.print(f"audit: {path.resolve()}", highlight=False, soft_wrap=True, markup=False)
    return result
