"""``attnlab fields`` (every field of an experiment or a part) and ``attnlab check-part`` (a model's
fast paths against its plain apply)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from attnlab.cli.common import app, fail, out
from attnlab.errors import AttnlabError
from attnlab.experiments import get
from attnlab.experiments.base import SCALES


@app.command("fields")
def fields_cmd(
    name: Annotated[
        str,
        typer.Argument(
            metavar="ID|KIND.PART",
            help="an experiment id, or a part: model.jiang2024, "
            "data.li2023, model.my_parts:LINEAR (an outside one), train",
        ),
    ],
    scale: Annotated[
        str, typer.Option(help=f"the experiment's scale whose values are shown: {', '.join(SCALES)}")
    ] = "cpu",
) -> None:
    """Every field of an experiment (its values at a scale, grid axes marked) or of a part (type,
    default, allowed values, role and meaning): what --set and TOML accept."""
    from attnlab import problem as P
    from attnlab.fmt import fmt_text
    from attnlab.report import spec_rows

    kind, _, part_name = name.partition(".")
    try:
        if name == "train" or kind in P.PART_KINDS and part_name:
            config = P.part_config(kind, part_name or None)
            table = Table(title=f"{name}: {len(config.fields())} fields")
            for col in ("field", "type", "default", "allowed", "role", "description"):
                table.add_column(col, overflow="fold", no_wrap=col in ("field", "type", "role"))
            for r in config.describe():
                table.add_row(
                    f"{kind}.{r['field']}", r["type"], fmt_text(r["default"]), r["allowed"], r["role"], r["description"]
                )
            out.print(table)
            return
        exp = get(name)
        rows = spec_rows(exp.spec(scale))
    except AttnlabError as e:
        raise fail(e) from None
    table = Table(title=f"{exp.id} ({scale}, {exp.regime}): {exp.title}")
    for col in ("field", "value", "", "description"):
        table.add_column(col, overflow="fold")
    for field, value, axis, doc in rows:
        table.add_row(field, fmt_text(value), "axis" if axis else "", doc)
    out.print(table)


@app.command("check-part")
def check_part_cmd(
    name: Annotated[
        str, typer.Argument(metavar="MODEL", help="a model: a registered name or package.module:ATTRIBUTE")
    ],
    data: Annotated[str, typer.Option(help="the data model whose samples it is checked on")] = "jiang2024",
    sets: Annotated[
        list[str] | None, typer.Option("--set", help="a field of the checked cell: model.d_h=8, data.M=4 (repeatable)")
    ] = None,
) -> None:
    """Check a model's declared fast paths (fast_apply, dual) against its plain apply: values and
    gradients on a few parameter draws and real samples, in float64. Exit 1 on a mismatch."""
    import tomllib

    from attnlab import fastcheck

    fields = {}
    for item in sets or []:
        key, eq, text = item.partition("=")
        if not eq:
            raise fail(f"--set {item}: expected FIELD=VALUE")
        try:
            fields[key.strip()] = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            fields[key.strip()] = text
    try:
        errors = fastcheck.check_part(name, data, fields)
    except AttnlabError as e:
        raise fail(e, 1 if "differs from its apply" in str(e) else 2) from None
    for path, e in errors.items():
        out.print(
            f"{name}: {path} = apply (largest relative error {e:.2g}, tolerance {fastcheck.RTOL:g})", highlight=False
        )
