"""Vectorized value cleanup shared by the readers (polars expressions, no row loops).

Exports quote shapes (three double quotes around `32,9216;4096` in the file), end start times with a TAB, write
`N/A` where a cell does not apply and prefix dtypes/formats with `DT_`/`FORMAT_`. Start times
carry up to 19 significant digits, more than a float holds, so they are parsed as decimals
(`us_text_to_ns`, the one timestamp rule). The limits every reader applies are in scalars.py.
"""

from __future__ import annotations

import polars as pl

from .scalars import MAX_START_NS

_TRIM = ' \t\r\n"'
NULL_TOKENS = ("N/A", "NA", "n/a", "None", "NULL", "null", "")


def clean_text(expr: pl.Expr) -> pl.Expr:
    """Trim whitespace/TABs/CR and surrounding quotes; `N/A` and empty -> null."""
    text = expr.str.strip_chars(_TRIM)
    return pl.when(~text.is_in(NULL_TOKENS)).then(text)  # keeps the column's name


def strip_prefix(expr: pl.Expr, prefix: str) -> pl.Expr:
    """`DT_BF16;DT_BF16` -> `BF16;BF16` (every `;`-separated entry; the prefix only ever
    occurs at the start of an entry, so a literal replace does it)."""
    return expr.str.replace_all(prefix, "", literal=True)


def to_float(expr: pl.Expr) -> pl.Expr:
    """Cleaned text -> Float64; garbage -> null (callers compare with the text to count it)."""
    return expr.cast(pl.Float64, strict=False)


def to_int(expr: pl.Expr) -> pl.Expr:
    """Cleaned text -> Int64 via Float64, so `48` and `48.0` both parse; garbage -> null."""
    as_float = expr.cast(pl.Float64, strict=False)
    ok = as_float.is_finite() & (as_float.abs() < 9.0e18)
    return pl.when(ok).then(as_float.round(0)).otherwise(None).cast(pl.Int64)


def us_text_to_ns(expr: pl.Expr) -> pl.Expr:
    """Decimal µs text -> integer ns, exactly: THE rule for every timestamp a reader meets (CSV
    and DB cells here; a trace's JSON values through trace_values.ns_column, which spells them
    as text and applies this expression).

    The text, trimmed of spaces, TAB, CR, LF and double quotes, is an ASCII decimal number in
    µs (`1736408883716197.363`, `12`, `.5`, `1e3`; a sign and an exponent are read), parsed as
    a 38-digit decimal with 3 places: the whole ns, digits beyond them rounded half to even
    (`1.2345` -> 1234, `1.2355` -> 1236), never via float (19 significant digits do not fit
    one), never by deleting the dot (which breaks on 0-2 decimals: `1699529622790614.8`).
    The decimal's stored integer is the ns count (no multiply pass). Null: not such a number
    (garbage, empty, `nan`, `1_000`, non-ASCII digits), a negative ns, or MAX_START_NS or more
    (room left for start + duration in Int64). One cast per cell, no regex, no row loop.
    """
    dec = expr.str.strip_chars(_TRIM).cast(pl.Decimal(38, 3), strict=False)
    ns = dec.to_physical().cast(pl.Int64, strict=False)
    return pl.when(ns.is_between(0, MAX_START_NS, closed="left")).then(ns)
