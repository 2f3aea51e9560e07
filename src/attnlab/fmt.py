"""Measured values formatted for reading, in the terminal (plain text) and in reports (HTML):
significant digits, intervals as [lo, hi], dicts as key: value lists, durations."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from markupsafe import Markup, escape

DIGITS = 3  # significant digits shown; enough to compare with a pass rule, short enough to read


MISSING = "—"  # a value the analysis could not measure (stored as null)

# ---------------------------------------------------------------- formatting


def fmt_number(x: Any, digits: int = DIGITS) -> str:
    """A number for reading: integers exactly, floats to ``digits`` significant digits (the
    integer part is never rounded away: 1234.5 -> "1234"), scientific below 1e-3 or from 1e6 on,
    trailing zeros dropped; None -> "—"."""
    if x is None:
        return MISSING
    if isinstance(x, bool | np.bool_):
        return "yes" if x else "no"
    if isinstance(x, int | np.integer):
        return str(int(x))
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    if -3 <= mag < 6:
        text = f"{x:.{max(0, digits - 1 - mag)}f}"
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text
    mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def fmt_interval(lo: Any, hi: Any, digits: int = DIGITS) -> str:
    return f"[{fmt_number(lo, digits)}, {fmt_number(hi, digits)}]"


def _is_number(x: Any) -> bool:
    return x is None or (isinstance(x, int | float | np.integer | np.floating) and not isinstance(x, bool | np.bool_))


def _plain(x: Any) -> Any:
    """numpy containers and scalars as Python ones, so one formatter covers both."""
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return x


def fmt_text(v: Any, digits: int = DIGITS) -> str:
    """A value as one line of plain text (terminal tables): numbers as :func:`fmt_number`, lists
    as [a, b], dicts as ``key: value`` pairs separated by semicolons (nested ones in braces)."""
    v = _plain(v)
    if isinstance(v, dict):
        parts = []
        for k, x in v.items():
            inner = fmt_text(x, digits)
            parts.append(f"{_key(k)}: {{{inner}}}" if isinstance(_plain(x), dict) and x else f"{_key(k)}: {inner}")
        return "; ".join(parts) if parts else "{}"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(fmt_text(x, digits) for x in v) + "]"
    if _is_number(v) or isinstance(v, bool):
        return fmt_number(v, digits)
    return str(v)


def _key(k: Any) -> str:
    return fmt_number(k) if _is_number(k) and k is not None else str(k)


def fmt_value(v: Any, digits: int = DIGITS) -> Markup:
    """A value as HTML: dicts as nested key: value lists, lists of numbers as [a, b] (an interval
    reads [lo, hi]), other lists as lists, everything escaped."""
    v = _plain(v)
    if isinstance(v, dict):
        if not v:
            return Markup('<span class="muted">{}</span>')
        items = Markup("").join(
            Markup('<li><span class="k">{}:</span> {}</li>').format(_key(k), fmt_value(x, digits)) for k, x in v.items()
        )
        return Markup('<ul class="kv">{}</ul>').format(items)
    if isinstance(v, list | tuple):
        plain = [_plain(x) for x in v]
        if all(_is_number(x) or isinstance(x, bool | str) for x in plain):
            return Markup('<span class="num">{}</span>').format(fmt_text(plain, digits))
        items = Markup("").join(Markup("<li>{}</li>").format(fmt_value(x, digits)) for x in plain)
        return Markup('<ol class="seq">{}</ol>').format(items)
    if v is None:
        return Markup('<span class="muted" title="not measured">{}</span>').format(MISSING)
    if _is_number(v) or isinstance(v, bool):
        return Markup('<span class="num">{}</span>').format(fmt_number(v, digits))
    return escape(str(v))


def fmt_duration(seconds: Any) -> str:
    """Wall time for reading: 4.18 s, 12 min 5 s, 3 h 12 min."""
    if seconds is None:
        return MISSING
    s = float(seconds)
    if s < 60:
        return f"{fmt_number(s)} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(round(s % 60))} s"
    return f"{int(s // 3600)} h {int(round(s % 3600 / 60))} min"
